#!/usr/bin/env bash
# Nineteenth session, first call (H200): cooperative rows as halves against one tile
# (exp_s18_halves, H100-only figures so far), the windowed cooperative chunk against the
# looped kernel on rows that are not 16-byte multiples (--ways 0,3), looped against
# cooperative at widths around a chunk multiple (--cols), the wide-rows and
# layer-norm families beside jax and torch (suite), and the cuda fuzz.
#   bash bench/gpu_s19.sh [FUZZ_S] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-40}; suite_budget=${2:-90}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 130 python3 bench/exp_s18_halves.py --json "$out/exp_s18_halves.json" \
  > "$out/exp_s18_halves.txt" 2>&1; echo "halves exit $?"; grep -v "^compil" "$out/exp_s18_halves.txt" | tail -30
timeout 70 python3 bench/exp_s18_halves.py --ways 0,3 --only 'x(150001|131073|100003)$' \
  --json "$out/exp_window.json" > "$out/exp_window.txt" 2>&1; echo "window exit $?"
grep -v "^compil" "$out/exp_window.txt" | tail -12
# widths around 18 and 19 chunks of 8192: does a ragged last chunk cost, or the width?
timeout 90 python3 bench/exp_s18_halves.py --ways 0,1 --cols 131072,147456,150000,155648,196608 \
  --json "$out/exp_cols.json" > "$out/exp_cols.txt" 2>&1; echo "cols exit $?"
grep -v "^compil" "$out/exp_cols.txt" | grep -v "^    " | tail -12
timeout $((suite_budget + 50)) python3 bench/suite.py --out "$work/rows" --only 'wide-rows|layer' \
  --budget "$suite_budget" --impls fusejit,jax,torch > "$work/rows.log" 2>&1; echo "suite rows exit $?"
mkdir -p "$out/rows"; cp "$work"/rows/results.* "$out/rows/" 2>/dev/null; tail -5 "$work/rows.log" > "$out/rows/log-tail.txt"
grep -A20 "^| workload" "$work/rows/results.md" | cut -d'|' -f2-14 | head -20
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 19101 \
  > "$work/fuzz/rows.log" 2>&1 &
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19102 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
wait
for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 2 "$f" | tr '\n' ' ')"; done | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
pack_out "$out"
true
