#!/usr/bin/env bash
# Tenth session's third GPU call (2026-12-05): float16 GEMMs of short K (a few K steps per
# tile; the epilogue a large part of each tile) at one and two persistent programs per SM
# (bench/exp_s8.py k shapes); the new split of GEMMs of few rows at its default beside cuBLAS
# (bench/exp_thin.py); a fresh GEMM draw beside torch.compile and jax.jit; then the cuda fuzz.
#   bash bench/gpu_s10c.sh [DRAW] [BUDGET] [FUZZ_S]
set -uo pipefail
draw=${1:-20261211:16}; budget=${2:-80}; fuzz_s=${3:-80}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s10c; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 150 python3 bench/exp_s8.py --only '^k' \
  --configs '^default$|^128x256 t$|^128x128 p$|^128x128 t$|p2$' --json "$out/exp_s8_k.json" \
  > "$out/exp_s8_k.txt" 2>&1; echo "exp_s8 exit $?"; cat "$out/exp_s8_k.txt"
timeout 60 python3 bench/exp_thin.py --configs '^default$|cuBLAS' --json "$out/exp_thin_default.json" \
  > "$out/exp_thin_default.txt" 2>&1; echo "exp_thin exit $?"; cat "$out/exp_thin_default.txt"
unseen_matmul "$out" "$work" "${draw%%:*}" "$draw" fusejit,torch,jax "$budget"
mkdir -p "$work/fuzz"
for i in 1 2; do
  timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
    --seed $((13600 + i)) --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | tee "$out/fuzz.txt"
cp -r "$work/fuzz/failures" "$out/" 2>/dev/null
