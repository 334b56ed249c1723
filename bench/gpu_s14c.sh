#!/usr/bin/env bash
# Fourteenth session, third call: the short-K float16 products below the copies' floor with
# the copies off and on (exp_s7b), then the GEMM, alignment, TF32, row-window and regression
# tests on cuda beside the cuda fuzz with products: two processes at TF32 (the fuzzer's new
# mode: its tolerance against real tensor-core rounding), one at ieee --products, one plain.
#   bash bench/gpu_s14c.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-100}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s14c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 120 python3 bench/exp_s7b.py --only 'u7|old u10|old u13|new u12|new u13' \
  > "$out/exp_s7b_floor.txt" 2>&1
echo "exp_s7b exit $?"; cat "$out/exp_s7b_floor.txt"
timeout $((fuzz_s + 120)) python3 -m pytest -m gpu -q -p no:cacheprovider tests -k \
  "(matmul or gemm or align or tf32 or window or regressions) and not every_input" \
  > "$work/gpu-tests.log" 2>&1 &
i=0
for mode in "--matmul-precision tf32" "--matmul-precision tf32 --jit" "--products" ""; do
  i=$((i + 1))
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
    --seed $((14900 + i)) $mode --out "$work/fuzz/failures" --max-failures 3 \
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
