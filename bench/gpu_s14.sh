#!/usr/bin/env bash
# Fourteenth session's GPU call (2026-12-06): the thirteenth session's TF32 experiment (the
# padded K-major pass, tiles 128x128 / 256x128 / 128x256 beside the new wave rule's choice),
# row kernels over misaligned rows with the row window on and off (exp_row_window), the
# short-K float16 products with the copies off and on (exp_s7b --only 'u7|short'), then the
# GEMM and row tests on cuda beside the cuda fuzz.
#   bash bench/gpu_s14.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-75}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s14; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 80 python3 bench/exp_row_window.py --json "$out/exp_row_window.json" \
  > "$out/exp_row_window.txt" 2>&1
echo "exp_row_window exit $?"; cat "$out/exp_row_window.txt"
timeout 220 python3 bench/exp_s13.py --json "$out/exp_s13.json" > "$out/exp_s13.txt" 2>&1
echo "exp_s13 exit $?"; cat "$out/exp_s13.txt"
timeout 70 python3 bench/exp_s7b.py --only 'u7|short' > "$out/exp_s7b_short.txt" 2>&1
echo "exp_s7b short exit $?"; cat "$out/exp_s7b_short.txt"
tests_beside_fuzz "$work" "$fuzz_s" 4 14700 $((fuzz_s + 85)) \
  "(matmul or gemm or align or tf32 or window or reduction or softmax or norm) and not every_input and not no_device_synchronization"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
