#!/usr/bin/env bash
# Eleventh session's first GPU call (2026-12-05): the misaligned float32 products of the
# 20261211 draw (TF32 224x241x9669 at 0.13x of torch, 257x3467x585 at 0.27x of cuBLAS) and
# two more, each beside the same product read through rows padded to 16 bytes, over a sweep
# of tiles (bench/exp_thin.py x shapes), cuBLAS in the same process (TF32: CUPY_TF32=1); then
# the GPU tests beside the cuda fuzz.
#   bash bench/gpu_s11.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s11; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 120 python3 bench/exp_thin.py --only '^x(1|1p|3)$' --json "$out/exp_thin_x1.json" \
  > "$out/exp_thin_x1.txt" 2>&1; echo "exp_thin x1 exit $?"; cat "$out/exp_thin_x1.txt"
timeout 120 python3 bench/exp_thin.py --only '^x(2|2p|4|4p|5|5p)$' \
  --configs '^default$|^n(64|128) s1$|^m(128|64|256) n(64|128) s1|cuBLAS' \
  --json "$out/exp_thin_x2.json" > "$out/exp_thin_x2.txt" 2>&1
echo "exp_thin x2 exit $?"; cat "$out/exp_thin_x2.txt"
CUPY_TF32=1 timeout 60 python3 bench/exp_thin.py --only '^x(1|3|5|5p)$' --configs 'default|cuBLAS' \
  --json "$out/exp_thin_tf32_cublas.json" > "$out/exp_thin_tf32_cublas.txt" 2>&1
echo "exp_thin tf32 cuBLAS exit $?"; cat "$out/exp_thin_tf32_cublas.txt"
tests_beside_fuzz "$work" "$fuzz_s" 4 14300 $((fuzz_s + 60))
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null; cp -r "$work/fuzz/failures" "$out/" 2>/dev/null
