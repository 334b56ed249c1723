#!/usr/bin/env bash
# Fifth session's first GPU call (2026-12-02): what the fourth session changed after its last
# call (logsumexp in one online pass, `where`'s recording cost). The gpu-marked tests (but the
# exhaustive float32 exp test) beside the cuda fuzz; the suite's largest sizes (--quick) with
# torch.compile and jax.jit; the host cost per call, this code and the code of ee0fbb4 (carried
# as .old2) in turn, two rounds; a third draw of unseen workloads with the peers.
#   bash bench/gpu_s5.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [UNSEEN SEED:COUNT] [UNSEEN_BUDGET]
set -uo pipefail
fuzz_s=${1:-90}; procs=${2:-10}; suite_s=${3:-150}; draw=${4:-20261205:24}; unseen_s=${5:-110}
out=${OUT:-gpu-out}; work=/tmp/gpu-s5; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8000 $((fuzz_s + 70))
fuzz_summary "$work"
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/suite" --quick --budget "$suite_s" \
  --impls fusejit,jax,torch > "$work/suite.log" 2>&1; echo "suite exit $?"
grep -A40 "^| workload" "$work/suite/results.md" | cut -d'|' -f2,4,8,9,10,12,13 | head -30
grep -A6 "^## Summary" "$work/suite/results.md"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
for round in 1 2; do
  timeout 40 python3 bench/host_cost.py --backend cuda > "$work/host_cost_$round.log" 2>&1
  echo "host cost, round $round, this code:"; tail -12 "$work/host_cost_$round.log"
  PYTHONPATH=/tmp/site:$PWD/.old2 timeout 40 python3 bench/host_cost.py --backend cuda \
    > "$work/host_cost_old_$round.log" 2>&1; echo "ee0fbb4:"; tail -12 "$work/host_cost_old_$round.log"
done
timeout $((unseen_s + 50)) python3 bench/suite.py --out "$work/unseen" --unseen "$draw" --budget "$unseen_s" \
  --impls fusejit,jax,torch > "$work/unseen.log" 2>&1; echo "unseen exit $?"
grep -A40 "^| workload" "$work/unseen/results.md" | cut -d'|' -f2,4,8,9,10,12,13 | head -30
grep -A6 "^## Summary" "$work/unseen/results.md"
mkdir -p "$out/unseen"; cp "$work"/unseen/results.* "$out/unseen/" 2>/dev/null
tar czf "$out/gpu-s5.tgz" -C /tmp gpu-s5
