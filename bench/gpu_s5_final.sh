#!/usr/bin/env bash
# Fifth session's closing GPU call (2026-12-02): the gpu-marked tests (but the exhaustive
# float32 exp test) beside the cuda fuzz; the TF32 plans of a row-major B (exp_matmul.py
# --tf32-plan: the transposing pass); draw c of the unseen suite again, fusejit alone (its
# peers' figures are the first call's: bench/results/h200-unseen-c-2026-12-02-s5.md); the host
# cost per call, this code and the code before the session's host-cost change (carried as
# .old3) in turn, two rounds.
#   bash bench/gpu_s5_final.sh [FUZZ_SECONDS] [FUZZ_PROCS] [MATMUL_BUDGET] [UNSEEN_BUDGET]
set -uo pipefail
fuzz_s=${1:-90}; procs=${2:-10}; mm_s=${3:-60}; unseen_s=${4:-70}
out=${OUT:-gpu-out}; work=/tmp/gpu-s5f; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8100 $((fuzz_s + 80))
fuzz_summary "$work"
timeout $((mm_s + 60)) python3 bench/exp_matmul.py "$work/mm" --skip-epilogue --no-small-m --tf32-plan \
  --budget "$mm_s" > "$work/tf32-plan.log" 2>&1; echo "tf32 plan exit $?"
grep -v "^{" "$work/tf32-plan.log" | head -8
python3 - "$work/mm/exp_matmul.json" <<'PY' 2>/dev/null
import json, sys
for r in json.load(open(sys.argv[1])):
    print(f"{r['label'][:70]:70s} {r.get('tflops', 0):7.1f} TFLOP/s  {r.get('kernels', '')} kernels"
          f"  err {r.get('error', 0):.1e} {r.get('failed', '')[:80]}")
PY
timeout $((unseen_s + 50)) python3 bench/suite.py --out "$work/unseen" --unseen 20261205:24 \
  --budget "$unseen_s" --impls fusejit > "$work/unseen.log" 2>&1; echo "unseen exit $?"
grep -A30 "^| workload" "$work/unseen/results.md" | cut -d'|' -f2,4,7,8,9 | head -28
mkdir -p "$out/unseen"; cp "$work"/unseen/results.* "$out/unseen/" 2>/dev/null
for round in 1 2; do
  timeout 40 python3 bench/host_cost.py --backend cuda > "$work/host_cost_$round.log" 2>&1
  echo "host cost, round $round, this code:"; tail -12 "$work/host_cost_$round.log"
  PYTHONPATH=/tmp/site:$PWD/.old3 timeout 40 python3 bench/host_cost.py --backend cuda \
    > "$work/host_cost_old_$round.log" 2>&1; echo "before:"; tail -12 "$work/host_cost_old_$round.log"
done
tar czf "$out/gpu-s5f.tgz" -C /tmp gpu-s5f
