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
timeout $((fuzz_s + 120)) python3 -m pytest -m gpu -q -p no:cacheprovider tests -k \
  "(matmul or gemm or align or tf32 or window or regressions) and not every_input" \
  > "$work/gpu-tests.log" 2>&1 &
i=0
for mode in "--matmul-precision tf32" "--matmul-precision tf32 --jit" "--products" ""; do
  i=$((i + 1))
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
    --seed $((14910 + i)) $mode --out "$work/fuzz/failures" --max-failures 3 \
    > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
{ grep -E "passed|failed" "$work/gpu-tests.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log
  ls "$work/fuzz/failures" 2>/dev/null; } | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
