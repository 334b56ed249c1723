#!/usr/bin/env bash
# Fifteenth session, last call (what device time was left): the full-precision kernel's tiles
# with B row-major (exp_s15 --precision ieee-row) alone.
#   bash bench/gpu_s15e.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 120 python3 bench/exp_s15.py --precision ieee-row --json "$out/exp_s15_ieee_row.json" \
  > "$out/exp_s15_ieee_row.txt" 2>&1; echo "exp_s15 ieee-row exit $?"; cat "$out/exp_s15_ieee_row.txt"
true
