#!/usr/bin/env bash
# Thirteenth session's GPU call (2026-12-05): TF32 products of a row-major B with B written
# K-major to padded rows (bench/exp_s13.py: default, no pass, the pass forced, the pass and
# every copy forced, cuBLAS beside), the twelfth session's u13 (0.49x) again beside
# torch.compile, then the GEMM tests on cuda beside the cuda fuzz.
#   bash bench/gpu_s13.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-120}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s13; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 300 python3 bench/exp_s13.py --json "$out/exp_s13.json" > "$out/exp_s13.txt" 2>&1
echo "exp_s13 exit $?"; cat "$out/exp_s13.txt"
timeout 200 python3 bench/bench_matmul.py --out "$work/matmul-u13" --unseen 20261212:16 \
  --only '^u13 ' --quick --impls fusejit,cupy-tf32,torch --budget 120 > "$work/matmul-u13.log" 2>&1
echo "matmul u13 exit $?"; mkdir -p "$out/matmul-u13"
cp "$work/matmul-u13"/results.* "$work/matmul-u13"/fusejit.log "$out/matmul-u13/" 2>/dev/null
cut -d'|' -f2-10 "$work/matmul-u13/results.md" | head -5
tests_beside_fuzz "$work" "$fuzz_s" 4 14600 $((fuzz_s + 90)) \
  "(matmul or gemm or align or tf32) and not every_input and not no_device_synchronization"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
