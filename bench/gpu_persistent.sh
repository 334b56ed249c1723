#!/usr/bin/env bash
# One GPU call (2026-12-02): persistent GEMMs against one program per tile on issue 11's
# shapes (exp_matmul.py --persistent), the autotuner's picks for the suite's near misses
# (std over columns, float64 GELU, sum over axes (0, 2)), and per-call figures with fj.jit
# and cupy.fuse timed in turn in one process (dispatch.py --paired). Logs in $OUT.
#   bash bench/gpu_persistent.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
timeout 240 python3 bench/exp_matmul.py "$out/mm" --skip-epilogue --persistent --budget 220 \
  > "$out/exp_matmul_persistent.log" 2>&1; echo "exp_matmul exit $?"
timeout 130 python3 bench/autotune_check.py "$out/at" --budget 110 \
  --only std_cols_65536x1024,gelu_f64_2^25,sum_axes02_64x4096x256 > "$out/autotune.log" 2>&1
echo "autotune exit $?"
timeout 150 python3 bench/dispatch.py --json "$out/dispatch.json" --paired 7 > "$out/dispatch.log" 2>&1
echo "dispatch exit $?"
