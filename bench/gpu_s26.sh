#!/usr/bin/env bash
# Twenty-sixth session's GEMM calls (the twenty-fifth's pending checks are gpu_s25.sh 3567):
#  a. bench/exp_s26_fma.py: full-precision float32 GEMMs of many tiles, K split 1-8 ways, K
#     by 16 and 8 warps, aligned and 4-byte rows (about 4 min) -> exp_s26_fma.txt
#     (FMA_ONLY, FMA_VARIANTS: regular expressions of the cases and variants to run)
#   the next session's first call (about 7 min; the device never came back after call 1):
#     FMA_ONLY="both (2047|767|1279)|2048x577|2048x576x8191|f64" \
#       FMA_VARIANTS="^(default|s25|s4|s8|pad)$" FMA_BUDGET=130 bash bench/gpu_s26.sh a \
#       && CHECK_BUDGET=80 bash bench/gpu_s25.sh 73
#     (the rule's unmeasured picks, 5-7 chunks, against their measured neighbours; one operand
#     read from padded rows; float64's rounds; the alignment flips; the few-tile check)
#   bash bench/gpu_s26.sh [PHASES]  (default a)
set -uo pipefail
phases=${1:-a}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s26 || exit 1
if [[ $phases == *a* ]]; then
timeout $((${FMA_BUDGET:-240} + 60)) python3 bench/exp_s26_fma.py --budget ${FMA_BUDGET:-240} \
  --only "${FMA_ONLY:-}" --variants "${FMA_VARIANTS:-}" > "$out/exp_s26_fma.txt" 2>&1
echo "exp_s26_fma exit $?"; grep -v -i warn "$out/exp_s26_fma.txt"
fi
exit 0
