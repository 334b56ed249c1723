#!/usr/bin/env bash
# GPU calls of the fourth session (2026-12-02): the suite on workloads drawn at random
# (bench/unseen.py: shapes, axes and dtypes nobody tuned for), fusejit beside jax.jit and
# torch.compile, in its own processes as always.
#   bash bench/gpu_s4.sh SEED:COUNT [BUDGET]
set -uo pipefail
draw=${1:-20261202:30}; budget=${2:-420}; out=${OUT:-gpu-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
timeout $((budget + 90)) python3 bench/suite.py --out "$out/unseen" --unseen "$draw" --budget "$budget" \
  --impls fusejit,jax,torch > "$out/unseen.log" 2>&1
echo "suite exit $?"; grep -A60 "^| workload" "$out/unseen/results.md" | cut -c1-400
