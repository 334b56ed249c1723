#!/usr/bin/env bash
# GPU calls of 2026-12-02 (third session), before the changes they measure were final: float32
# exp as libdevice's instructions in inline PTX (the exhaustive bit-for-bit test against the
# libdevice call, and the GPU tests of the cooperative rows), the cooperative layer norm's
# variants (bench/exp_coop_ln.py), the cooperative softmax as emitted (bench/exp_coop_gap.py),
# then the suite's wide-row, float16 and batch-norm workloads (cold compile included).
#   bash bench/gpu_s3.sh [SUITE_BUDGET]
set -uo pipefail
suite_s=${1:-150}; out=${OUT:-gpu-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py tests/test_cooperative_rows.py \
  -k "exp_is_libdevice or cooperative or coop or long_rows" > "$out/gpu-tests.log" 2>&1
tail -n 3 "$out/gpu-tests.log"; grep -E "^FAILED|^ERROR" "$out/gpu-tests.log" | head
timeout 200 python3 bench/exp_coop_ln.py 2>&1 | grep -v "UserWarning\|warn_once" > "$out/coop-ln.txt"
cat "$out/coop-ln.txt"
timeout 90 python3 bench/exp_coop_gap.py 2>&1 | grep -v "UserWarning\|warn_once" > "$out/coop-gap.txt"
cat "$out/coop-gap.txt"
timeout $((suite_s + 60)) python3 bench/suite.py --out "$out/suite" --quick --budget "$suite_s" \
  --only "wide|softmax_f16|batch_norm|^softmax$|^layer_norm$" --impls fusejit,jax,torch > "$out/suite.log" 2>&1
echo "suite exit $?"; grep -A40 "^| workload" "$out/suite/results.md" | cut -c1-400
