#!/usr/bin/env bash
# Sixteenth session, third call: after full-precision split K (four programs an SM) and A's
# alignment copies: the gpu-marked GEMM, alignment, TF32, row-window and regression tests
# beside the cuda fuzz with products; exp_s15 ieee-small (the default now splits) and ieee-epi
# (each epilogue's cost in the FMA kernel); exp_s7b --set ieee (the default now copies A from
# 5e10 flops); the short-run reductions' variants twice (is the first run's order a bias?);
# the wide layer norm's sub-blocked epilogue (exp_s16_ln).
#   bash bench/gpu_s16c.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-50}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s16c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 16400 "$out"
for part in ieee-small ieee-epi; do
  timeout 120 python3 bench/exp_s15.py --precision $part --json "$out/exp_s15_$part.json" \
    > "$out/exp_s15_$part.txt" 2>&1; echo "exp_s15 $part exit $?"; cat "$out/exp_s15_$part.txt"
done
timeout 120 python3 bench/exp_s7b.py --set ieee > "$out/exp_s7b_ieee.txt" 2>&1
echo "exp_s7b ieee exit $?"; cut -c1-300 "$out/exp_s7b_ieee.txt"
for i in 1 2; do
  timeout 90 python3 bench/exp_s16_shortrun.py --json "$out/exp_s16_shortrun_$i.json" \
    > "$out/exp_s16_shortrun_$i.txt" 2>&1; echo "shortrun $i exit $?"
done
grep -h "emitted \|run_fastest  \|run_fastest b256 w4\|fusejit plan\|best" "$out"/exp_s16_shortrun_*.txt
if [ -f bench/exp_s16_ln.py ]; then
  timeout 120 python3 bench/exp_s16_ln.py --json "$out/exp_s16_ln.json" > "$out/exp_s16_ln.txt" 2>&1
  echo "exp_s16_ln exit $?"; cat "$out/exp_s16_ln.txt"
fi
true
