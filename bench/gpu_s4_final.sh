#!/usr/bin/env bash
# Fourth session's closing GPU call (2026-12-02), after the reduction rules of bench/exp_tiles.py:
# the gpu-marked tests (but the exhaustive float32 exp test: its code did not change) beside the
# cuda fuzz, then the fixed suite's S and M sizes of the reduction families (where the rules
# apply) beside torch.compile and jax.jit, then a second draw of unseen workloads with the peers.
#   bash bench/gpu_s4_final.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [UNSEEN SEED:COUNT] [UNSEEN_BUDGET]
set -uo pipefail
fuzz_s=${1:-100}; procs=${2:-10}; suite_s=${3:-150}; draw=${4:-20261203:24}; unseen_s=${5:-120}
out=${OUT:-gpu-out}; work=/tmp/gpu-s4; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 7000 $((fuzz_s + 70))
fuzz_summary "$work"
timeout $((suite_s + 50)) python3 bench/suite.py --out "$work/suite" --sizes S,M --budget "$suite_s" \
  --only "reduce|softmax|layer-norm|var-std|logsumexp|batch-norm|float16" --impls fusejit,jax,torch \
  > "$work/suite.log" 2>&1; echo "suite exit $?"
grep -A40 "^| workload" "$work/suite/results.md" | cut -d'|' -f2,3,8,9,10,12,13 | head -30
grep -A4 "^## Summary" "$work/suite/results.md"
timeout $((unseen_s + 50)) python3 bench/suite.py --out "$work/unseen" --unseen "$draw" --budget "$unseen_s" \
  --impls fusejit,jax,torch > "$work/unseen.log" 2>&1; echo "unseen exit $?"
grep -A40 "^| workload" "$work/unseen/results.md" | cut -d'|' -f2,4,8,9,10,12,13 | head -30
grep -A4 "^## Summary" "$work/unseen/results.md"
mkdir -p "$out/suite" "$out/unseen"
cp "$work"/suite/results.* "$out/suite/" 2>/dev/null; cp "$work"/unseen/results.* "$out/unseen/" 2>/dev/null
tar czf "$out/gpu-s4.tgz" -C /tmp gpu-s4
