#!/usr/bin/env bash
# Thirteenth session's GPU call (2026-12-05): TF32 products of a row-major B with B written
# K-major to padded rows (bench/exp_s13.py: default, no pass, the pass forced, the pass and
# every copy forced, the GEMM's tiles edited, cuBLAS beside; the twelfth session's u13 among
# them), short-K float16 products of misaligned rows with the copies off and on
# (exp_s7b --only 'u7|short'), then the GEMM tests on cuda beside the cuda fuzz.
#   bash bench/gpu_s13.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-90}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s13; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 240 python3 bench/exp_s13.py --json "$out/exp_s13.json" > "$out/exp_s13.txt" 2>&1
echo "exp_s13 exit $?"; cat "$out/exp_s13.txt"
timeout 100 python3 bench/exp_s7b.py --only 'u7|short' > "$out/exp_s7b_short.txt" 2>&1
echo "exp_s7b short exit $?"; cat "$out/exp_s7b_short.txt"
tests_beside_fuzz "$work" "$fuzz_s" 4 14600 $((fuzz_s + 90)) \
  "(matmul or gemm or align or tf32) and not every_input and not no_device_synchronization"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
