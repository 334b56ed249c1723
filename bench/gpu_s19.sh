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
exp_halves "$out" exp_s18_halves 130
exp_halves "$out" exp_window 70 --ways 0,3 --only 'x(150001|131073|100003)$'
# widths around 18 and 19 chunks of 8192: does a ragged last chunk cost, or the width?
exp_halves "$out" exp_cols 90 --ways 0,1 --cols 131072,147456,150000,155648,196608
suite_family "$out" "$work" rows "$suite_budget" --only 'wide-rows|layer'
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 19101 \
  > "$work/fuzz/rows.log" 2>&1 &
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19102 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
wait
fuzz_report "$work" "$out"
pack_out "$out"
true
