#!/usr/bin/env bash
# Twenty-seventh session's GPU calls:
#  a. bench/exp_s26_fma.py on the full-precision float32 products whose operands' rows are
#     both 4-byte aligned (and their one-operand neighbours, float64): the split's untimed
#     picks against 4 and 8 chunks, and each operand, then both, read from padded rows beside
#     the copies' time (about 3 min; FMA_ONLY, FMA_VARIANTS, FMA_BUDGET) -> exp_s26_fma.txt
#  b. bench/exp_s7b.py --set ieee on the same shapes: whole plans with the alignment copies
#     off, the default and forced, kernel by kernel (about 1.5 min) -> exp_s7b_ieee.txt
#  e. bench/exp_s26_fma.py: edge tiles loaded through clamped indices (clamp,
#     FUSEJIT_GEMM_CLAMP_EDGES=1) against masked along M and N (the default), float32, float16
#     and float64 (about 2 min)
#     -> exp_s26_edges.txt
#  c. the GEMM gpu tests beside 90 s of cuda fuzz (gpu_s25.sh phase 5)
#  d. bench/exp_s25_check.py (few-tile products: the combine of smaller tiles, back, against
#     the GEMM-tiled one, now timed from fresh emits) and exp_s26_fma.py's float64 cases and
#     a few float32 ones at the default (the combine under the split by rounds), about 3 min
#     -> exp_s25_check.txt, exp_s26_check.txt
#   the next session's first call (about 4 min; three tries to start a machine for it failed):
#     bash bench/gpu_s27.sh e && FUSEJIT_GEMM_CLAMP_EDGES=1 bash bench/gpu_s25.sh 5
#     (clamped edge loads against masked ones, then the GEMM gpu tests and cuda fuzz with them
#     on; if they pay, CLAMP_EDGE_LOADS on by default in fusejit/codegen/gemm.py). Timed in the
#     twenty-eighth session (bench/results/h100-s28/call1): no gain; the clamps were taken out
#   bash bench/gpu_s27.sh [PHASES]  (default ab)
set -uo pipefail
phases=${1:-ab}
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/gpu_common.sh"; gpu_begin /tmp/s27 || exit 1
if [[ $phases == *a* ]]; then
timeout $((${FMA_BUDGET:-150} + 60)) python3 bench/exp_s26_fma.py --budget ${FMA_BUDGET:-150} \
  --only "${FMA_ONLY:-both|^A |^B |f64}" --variants "${FMA_VARIANTS:-^(default|s25|s4|s8|pad)$}" \
  > "$out/exp_s26_fma.txt" 2>&1
echo "exp_s26_fma exit $?"; grep -v -i warn "$out/exp_s26_fma.txt"
fi
if [[ $phases == *b* ]]; then
timeout 200 python3 bench/exp_s7b.py --set ieee --only "${S7B_ONLY:-^g|f4|f5}" \
  > "$out/exp_s7b_ieee.txt" 2>&1
echo "exp_s7b --set ieee exit $?"; grep -v -i warn "$out/exp_s7b_ieee.txt"
fi
if [[ $phases == *d* ]]; then
timeout 200 python3 bench/exp_s25_check.py --budget ${CHECK_BUDGET:-120} > "$out/exp_s25_check.txt" 2>&1
echo "exp_s25_check exit $?"; grep -v -i warn "$out/exp_s25_check.txt"
timeout 150 python3 bench/exp_s26_fma.py --budget 90 --only "f64|288t|144t|both 2047|both 767" \
  --variants "^(default|s4|s8)$" > "$out/exp_s26_check.txt" 2>&1
echo "exp_s26_fma exit $?"; grep -v -i warn "$out/exp_s26_check.txt"
fi
if [[ $phases == *e* ]]; then
timeout 240 python3 bench/exp_s26_fma.py --budget 180 --only "${EDGE_ONLY:-both|edge|^B |f16}" \
  --variants "^(default|clamp)$" > "$out/exp_s26_edges.txt" 2>&1
echo "exp_s26_fma (edges) exit $?"; grep -v -i warn "$out/exp_s26_edges.txt"
fi
if [[ $phases == *c* ]]; then
bash "$here/gpu_s25.sh" 5
fi
exit 0
