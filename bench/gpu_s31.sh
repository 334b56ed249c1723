#!/usr/bin/env bash
# Thirty-first session's GPU calls (none ran: every start failed, then loans were paused; the
# next session's first call is `bash bench/gpu_s31.sh f`, then `p`, then `wn` on an H200, `m`):
#  f. bench/exp_s31_fma_plans.py: full-precision float32 and float64 products as whole plans
#     (alignment copies included) under the default, the clamps and peel, copies of both
#     operands, both, and copies with the clamps alone, each in a fresh process (about 6 min,
#     any card) -> exp_s31_fma_plans.txt
#  p, k, w, n, m: bench/gpu_s30.sh's phases (p: the GEMM kernel alone under clamp / peel /
#     padded operands; k: the spread combine; w, n: the H200's wide rows and their Nsight
#     Compute profile; m: the unseen draws whose GEMMs spilled beside torch.compile and jax.jit)
#   bash bench/gpu_s31.sh [PHASES]  (default f)
set -uo pipefail
phases=${1:-f}
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/gpu_common.sh"; gpu_begin /tmp/s31 || exit 1
if [[ $phases == *f* ]]; then
timeout 380 python3 bench/exp_s31_fma_plans.py --budget ${PLANS_BUDGET:-320} \
  > "$out/exp_s31_fma_plans.txt" 2>&1
echo "exp_s31_fma_plans exit $?"; grep -v -i warn "$out/exp_s31_fma_plans.txt"
fi
rest=$(echo "$phases" | tr -cd 'pkwnm')
if [ -n "$rest" ]; then
  bash "$here/gpu_s30.sh" "$rest"  # (writes under the same OUT)
fi
exit 0
