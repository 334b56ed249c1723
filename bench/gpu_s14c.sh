#!/usr/bin/env bash
# Fourteenth session, third call: the short-K float16 products below the copies' floor with
# the copies off and on (exp_s7b), then the GEMM, alignment, TF32, row-window and regression
# tests on cuda beside the cuda fuzz with products: two processes at TF32 (the fuzzer's new
# mode: its tolerance against real tensor-core rounding), one at ieee --products, one plain.
#   bash bench/gpu_s14c.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-100}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s14c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 120 python3 bench/exp_s7b.py --only 'u7|old u10|old u13|new u12|new u13' \
  > "$out/exp_s7b_floor.txt" 2>&1
echo "exp_s7b exit $?"; cat "$out/exp_s7b_floor.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 14900 "$out"
true
