#!/usr/bin/env bash
# Twenty-sixth session's GEMM calls (the twenty-fifth's pending checks are gpu_s25.sh 3567):
#  a. bench/exp_s26_fma.py: full-precision float32 GEMMs of many tiles, K split 1-8 ways, K
#     by 16 and 8 warps, aligned and 4-byte rows (about 4 min) -> exp_s26_fma.txt
#     (FMA_ONLY, FMA_VARIANTS: regular expressions of the cases and variants to run)
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
