#!/usr/bin/env bash
# Eighteenth session, second call: cooperative rows of sums and m2s held as halves under 128
# registers (heuristics.coop_sub_blocks) against one tile, per workload (exp_s18_halves), the
# layer norm experiment's "fusejit now" beside its variants (exp_s16_ln --set registers), the
# wide-rows and layer-norm families side by side with jax and torch (suite), and the cuda
# fuzz of wide rows (fuzz_rows) and of random programs.
#   bash bench/gpu_s18b.sh [FUZZ_S] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-90}; suite_budget=${2:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s18b; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 150 python3 bench/exp_s18_halves.py --json "$out/exp_s18_halves.json" \
  > "$out/exp_s18_halves.txt" 2>&1; echo "halves exit $?"; cat "$out/exp_s18_halves.txt"
timeout 120 python3 bench/exp_s16_ln.py --set registers --json "$out/exp_s16_ln_registers.json" \
  > "$out/exp_s16_ln_registers.txt" 2>&1; echo "ln exit $?"
grep -v "^compil" "$out/exp_s16_ln_registers.txt" | grep "GB/s" | cut -c1-100
timeout $((suite_budget + 60)) python3 bench/suite.py --out "$work/rows" --only 'wide-rows|layer' \
  --budget "$suite_budget" --impls fusejit,jax,torch > "$work/rows.log" 2>&1; echo "suite rows exit $?"
mkdir -p "$out/rows"; cp "$work"/rows/results.* "$out/rows/" 2>/dev/null; tail -5 "$work/rows.log" > "$out/rows/log-tail.txt"
grep -A20 "^| workload" "$work/rows/results.md" | cut -d'|' -f2-14 | head -20
timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 18101 \
  > "$work/fuzz/rows.log" 2>&1 &
timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 18102 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
wait
for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 2 "$f" | tr '\n' ' ')"; done | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
pack_out "$out"
true
