#!/usr/bin/env bash
# Eighteenth session, last call: the GEMM anchors (bench_matmul.py --quick) with every worker
# heat-soaked and each implementation's cases timed in interleaved passes (so that clock
# drift does not read as epilogue cost), beside cuBLAS, torch and jax; then the cuda fuzz
# of random programs and of wide rows on the final code.
#   bash bench/gpu_s18c.sh [FUZZ_S] [MATMUL_BUDGET]
set -uo pipefail
fuzz_s=${1:-60}; mm_s=${2:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s18c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout $((mm_s + 90)) python3 bench/bench_matmul.py --out "$work/anchors" --quick \
  --impls fusejit,cupy,torch,jax --budget "$mm_s" > "$work/anchors.log" 2>&1
echo "anchors exit $?"; mkdir -p "$out/anchors"
cp "$work"/anchors/results.* "$work"/anchors/*.log "$out/anchors/" 2>/dev/null
cut -d'|' -f2-12 "$work/anchors/results.md" | head -30
timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 18201 \
  > "$work/fuzz/rows.log" 2>&1 &
timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 18202 \
  --products --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/products.log" 2>&1 &
wait
for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
pack_out "$out"
true
