#!/usr/bin/env bash
# Twelfth session's first GPU call (2026-12-05): TF32 products whose float32 rows start on 4
# (or 8) bytes, with the alignment copies off and forced, beside what the default now chooses
# and cuBLAS's bare TF32 product (bench/exp_s7b.py --set tf32); the misaligned f16 set again
# as a check that the rule's float16 decisions are unchanged; then the GPU tests (the new
# TF32 copies' test among them) beside the cuda fuzz.
#   bash bench/gpu_s12.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s12; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 240 python3 bench/exp_s7b.py --set tf32 > "$out/exp_s7b_tf32.txt" 2>&1
echo "exp_s7b tf32 exit $?"; cat "$out/exp_s7b_tf32.txt"
tests_beside_fuzz "$work" "$fuzz_s" 4 14400 $((fuzz_s + 60))
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
