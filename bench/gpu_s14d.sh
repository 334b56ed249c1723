#!/usr/bin/env bash
# Fourteenth session, fourth call: after the fixes for what the third call's cuda fuzz found,
# the GEMM, alignment, TF32, row-window and regression tests on cuda beside the cuda fuzz with
# products (two processes at TF32, one at ieee --products, one plain).
#   bash bench/gpu_s14d.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-90}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s14d; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 14910 "$out"
true
