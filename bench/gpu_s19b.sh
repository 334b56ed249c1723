#!/usr/bin/env bash
# Nineteenth session, second call: the tile sweep of the narrow-N float16 GEMMs
# (16384x1024x4096, bare and relu(ab+bias); bench_matmul.py without --quick) beside cuBLAS,
# torch and jax, the cooperative chunk with its columns masked where chunks divide the row
# (exp_s18_halves --ways 1,4), then the per-call figures of issue 10 (dispatch.py, then fj.jit and
# cupy.fuse in turn), and a cuda fuzz with matrix products.
#   bash bench/gpu_s19b.sh [FUZZ_S] [MATMUL_BUDGET]
set -uo pipefail
fuzz_s=${1:-45}; mm_s=${2:-240}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19b; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout $((mm_s + 80)) python3 bench/bench_matmul.py --out "$work/sweep" --only '^f16 16384x1024x4096' \
  --impls fusejit,cupy,torch,jax --budget "$mm_s" > "$work/sweep.log" 2>&1
echo "sweep exit $?"; mkdir -p "$out/sweep"
cp "$work"/sweep/results.* "$work"/sweep/*.log "$out/sweep/" 2>/dev/null
cut -d'|' -f2-12 "$work/sweep/results.md" | head -30
# does a chunk's column mask cost, where chunks divide the row? (one tile / every chunk masked)
exp_halves "$out" exp_masked 60 --ways 1,4 --cols 147456,155648,262144
timeout 100 python3 bench/dispatch.py --paired 5 --json "$out/dispatch.json" > "$out/dispatch.txt" 2>&1
echo "dispatch exit $?"; tail -25 "$out/dispatch.txt"
timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19202 \
  --products --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/products.log" 2>&1
fuzz_report "$work" "$out"
pack_out "$out"
true
