#!/usr/bin/env bash
# Fifth session's first GPU call (2026-12-02): what the fourth session changed after its last
# call (logsumexp in one online pass, `where`'s recording cost). The gpu-marked tests (but the
# exhaustive float32 exp test) beside the cuda fuzz; the suite's largest sizes (--quick) with
# torch.compile and jax.jit; the host cost per call, this code and the code of ee0fbb4 (carried
# as .old2) in turn, two rounds; a third draw of unseen workloads with the peers.
#   bash bench/gpu_s5.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [UNSEEN SEED:COUNT] [UNSEEN_BUDGET]
set -uo pipefail
fuzz_s=${1:-90}; procs=${2:-10}; suite_s=${3:-150}; draw=${4:-20261205:24}; unseen_s=${5:-110}
out=${OUT:-gpu-out}; work=/tmp/gpu-s5; mkdir -p "$out" "$work/fuzz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
timeout $((fuzz_s + 70)) python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not every_input and not no_device_synchronization" > "$work/gpu-tests.log" 2>&1 &
for i in $(seq 1 "$procs"); do
  mode=""; [ "$i" -gt $((procs - 3)) ] && mode="--jit"
  timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed $((8000 + i)) \
    $mode --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
grep -E "passed|failed" "$work/gpu-tests.log" | tail -2; grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | awk '
  { jit = ($0 ~ /--jit/) ? "fj.jit" : "realize"; for (i = 1; i <= NF; i++) if ($(i+1) == "programs") n[jit] += $i }
  END { for (k in n) print "cuda fuzz programs (" k "):", n[k] }'
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | grep -v "mismatch 0, error 0, crash 0" | head -5
ls "$work/fuzz/failures" 2>/dev/null | head
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
