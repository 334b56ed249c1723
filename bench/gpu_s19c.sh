#!/usr/bin/env bash
# Nineteenth session, third call: the whole suite, largest size of each workload (--quick),
# fusejit beside torch.compile and jax.jit in one run (issue 9's table), then the cuda fuzz.
#   bash bench/gpu_s19c.sh [SUITE_BUDGET] [FUZZ_S]
set -uo pipefail
suite_budget=${1:-380}; fuzz_s=${2:-40}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout $((suite_budget + 70)) python3 bench/suite.py --out "$work/suite" --quick \
  --budget "$suite_budget" --impls fusejit,jax,torch > "$work/suite.log" 2>&1; echo "suite exit $?"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
tail -5 "$work/suite.log" > "$out/suite/log-tail.txt"
grep -A40 "^| workload" "$work/suite/results.md" | cut -d'|' -f2-14 | head -40
grep -A8 "^## Summary" "$work/suite/results.md"
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19302 \
  --jit --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/jit.log" 2>&1
for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
pack_out "$out"
true
