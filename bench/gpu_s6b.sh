#!/usr/bin/env bash
# Sixth session's second GPU call (2026-12-02): the short-run rules as the first call set them
# (bench/exp_s6.py again, and the suite's reduce-short-run family beside torch.compile and
# jax.jit), then a fourth draw of unseen workloads with the peers.
#   bash bench/gpu_s6b.sh [EXP_SECONDS] [SUITE_BUDGET] [UNSEEN SEED:COUNT] [UNSEEN_BUDGET]
set -uo pipefail
exp_s=${1:-170}; suite_s=${2:-60}; draw=${3:-20261206:24}; unseen_s=${4:-200}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6b; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$exp_s" python3 bench/exp_s6.py > "$out/exp_s6.txt" 2>&1; echo "exp_s6 exit $?"
grep -E "^==|default|rule off|forced" "$out/exp_s6.txt" | cut -c1-150 | head -60
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/suite" --only "short-run" \
  --budget "$suite_s" --impls fusejit,jax,torch > "$work/suite.log" 2>&1; echo "suite exit $?"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
grep -A8 "^| workload" "$work/suite/results.md" | cut -d'|' -f2,3,4,8,9,10,12,13 | head -10
unseen_suite "$out" "$work" "$draw" "$unseen_s"
tar czf "$out/gpu-s6b.tgz" -C /tmp gpu-s6b
