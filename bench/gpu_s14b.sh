#!/usr/bin/env bash
# Fourteenth session, second call (H100, warm after gpu_s14.sh): exp_row_window with the
# window restricted to kernels that store no rows, the row tests beside a short cuda fuzz.
#   bash bench/gpu_s14b.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s14b; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 80 python3 bench/exp_row_window.py --json "$out/exp_row_window.json" > "$out/exp_row_window.txt" 2>&1
echo "exp_row_window exit $?"; cat "$out/exp_row_window.txt"
tests_beside_fuzz "$work" 60 4 14800 150 "window or reduction or softmax or norm or regressions"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
