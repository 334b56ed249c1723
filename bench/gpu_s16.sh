#!/usr/bin/env bash
# Sixteenth session, first call: the gpu-marked GEMM, alignment, TF32, row-window and regression
# tests beside the cuda fuzz with products; the full-precision layout rule's whole plans with the
# fifteenth session's 64x64x32 tiles (exp_s15b --part rule, never timed with them); the issue's
# GEMM anchors (bench_matmul.py --quick) beside cuBLAS, torch and jax in the same run.
#   bash bench/gpu_s16.sh [FUZZ_S] [MATMUL_BUDGET]
set -uo pipefail
fuzz_s=${1:-60}; mm_s=${2:-200}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s16; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 16100 "$out"
timeout 100 python3 bench/exp_s15b.py --part rule --json "$out/exp_s15b_rule.json" \
  > "$out/exp_s15b_rule.txt" 2>&1; echo "exp_s15b rule exit $?"; cut -c1-400 "$out/exp_s15b_rule.txt"
timeout $((mm_s + 90)) python3 bench/bench_matmul.py --out "$work/anchors" --quick \
  --impls fusejit,cupy,cupy-tf32,torch,jax --budget "$mm_s" > "$work/anchors.log" 2>&1
echo "anchors exit $?"; mkdir -p "$out/anchors"
cp "$work"/anchors/results.* "$work"/anchors/fusejit.log "$out/anchors/" 2>/dev/null
cut -d'|' -f2-12 "$work/anchors/results.md" | head -30
true
