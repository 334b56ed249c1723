#!/usr/bin/env bash
# Fifteenth session, fourth call: the twelfth session's GEMM draw again (bench_matmul.py
# --unseen 20261212:16, default tiles) beside torch (eager, torch.compile) and jax.jit, after
# the thirteenth to fifteenth sessions' GEMM changes (padded K-major TF32 B, K-major short-K
# float16 copies, the full-precision rule); same code as the third call. First, the
# full-precision kernel's tiles with B row-major (exp_s15 --precision ieee-row).
#   bash bench/gpu_s15d.sh [BUDGET]
set -uo pipefail
budget=${1:-200}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s15d; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 150 python3 bench/exp_s15.py --precision ieee-row --json "$out/exp_s15_ieee_row.json" \
  > "$out/exp_s15_ieee_row.txt" 2>&1; echo "exp_s15 ieee-row exit $?"; cat "$out/exp_s15_ieee_row.txt"
unseen_matmul "$out" "$work" 20261212 20261212:16 fusejit,torch,jax "$budget"
true
