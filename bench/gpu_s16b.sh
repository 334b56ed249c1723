#!/usr/bin/env bash
# Sixteenth session, second call: full-precision float32 products over misaligned rows with the
# alignment copies off and forced (exp_s7b --set ieee; the draw's u12 ran 0.71x of
# torch.compile), small-M full-precision tiles and K splits (exp_s15 --precision ieee-small),
# the short-run reductions' kernel variants (exp_s16_shortrun: channel sums of an NHWC batch at
# 81% of copy, a float64 min over a middle axis of 3 at 78%); first a cuda fuzz with products
# and every misaligned operand copied (full precision included now), alone on the GPU.
#   bash bench/gpu_s16b.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-45}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s16b; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
for i in 1 2; do
  FUSEJIT_GEMM_ALIGN=always timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda \
    --products --seconds "$fuzz_s" --seed $((16300 + i)) --out "$work/fuzz/failures" \
    --max-failures 3 > "$work/fuzz/align-$i.log" 2>&1 &
done
wait
grep -h "^fusejit fuzz" "$work"/fuzz/align-*.log | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
timeout 120 python3 bench/exp_s7b.py --set ieee > "$out/exp_s7b_ieee.txt" 2>&1
echo "exp_s7b ieee exit $?"; cut -c1-300 "$out/exp_s7b_ieee.txt"
timeout 150 python3 bench/exp_s15.py --precision ieee-small --json "$out/exp_s15_small.json" \
  > "$out/exp_s15_small.txt" 2>&1; echo "exp_s15 ieee-small exit $?"; cat "$out/exp_s15_small.txt"
timeout 90 python3 bench/exp_s16_shortrun.py --json "$out/exp_s16_shortrun.json" \
  > "$out/exp_s16_shortrun.txt" 2>&1; echo "shortrun exit $?"; cat "$out/exp_s16_shortrun.txt"
true
