#!/usr/bin/env bash
# Fifteenth session, first call (an H200): the float32 GEMM kernel's tiles in TF32 and full
# precision (exp_s15), row windows for kernels that store rows (exp_row_window), the short-K float16 products under the copies' floor with the copies
# off and on (exp_s7b: the N-major floor on an H200), then the GEMM, alignment, TF32,
# row-window and regression tests on cuda beside the cuda fuzz with products (the fourteenth
# session's last fixes, int8 short K and float64 dots of narrow loads, were never run on a GPU).
#   bash bench/gpu_s15.sh [FUZZ_S] [floor]   (floor: exp_s7b too)
set -uo pipefail
fuzz_s=${1:-60}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s15; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 150 python3 bench/exp_s15.py --precision tf32 --json "$out/exp_s15_tf32.json" \
  > "$out/exp_s15_tf32.txt" 2>&1; echo "exp_s15 tf32 exit $?"
timeout 90 python3 bench/exp_s15.py --precision ieee --json "$out/exp_s15_ieee.json" \
  > "$out/exp_s15_ieee.txt" 2>&1; echo "exp_s15 ieee exit $?"
cat "$out"/exp_s15_*.txt
timeout 100 python3 bench/exp_row_window.py --json "$out/exp_row_window.json" \
  > "$out/exp_row_window.txt" 2>&1; echo "exp_row_window exit $?"; cat "$out/exp_row_window.txt"
[ "${2:-}" = floor ] && timeout 70 python3 bench/exp_s7b.py --only 'u7|old u10|old u13|new u12|new u13|short' \
  > "$out/exp_s7b_floor.txt" 2>&1
echo "exp_s7b exit $?"; cat "$out/exp_s7b_floor.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 15000 "$out"
true
