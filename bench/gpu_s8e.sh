#!/usr/bin/env bash
# Eighth session's fifth GPU call (2026-12-02): the gpu-marked tests alone on the final code
# (the fourth call's ran beside the fuzz and reached its time limit at about 93%), then GEMMs
# of one wave of tiles or less with pointer loads (the default) and with TMA, for the next
# session (bench/exp_s8.py --only 'w').
#   bash bench/gpu_s8e.sh [TESTS_S]
set -uo pipefail
tests_s=${1:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$tests_s" python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not every_input and not no_device_synchronization" > "$out/gpu-tests.log" 2>&1
echo "tests exit $?"; grep -E "passed|failed" "$out/gpu-tests.log" | tail -2
grep -E "^FAILED|^ERROR" "$out/gpu-tests.log" | head -20
timeout 80 python3 bench/exp_s8.py --only '^w' --configs '^default$|^128x256 t$|^128x128 t$' \
  --json "$out/exp_s8_waves.json" > "$out/exp_s8_waves.txt" 2>&1; echo "exp_s8 exit $?"
cat "$out/exp_s8_waves.txt"
