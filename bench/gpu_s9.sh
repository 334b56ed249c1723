#!/usr/bin/env bash
# Ninth session's first GPU call (2026-12-05): the eighth session's last change (float16 GEMMs
# of half a wave of tiles to one load through TMA, one program per tile; 71b0806) timed as the
# default, the gpu-marked tests beside the cuda fuzz on it, and whether the wide layer norm's
# weight and bias reads are what hold it under the wide softmax (bench/exp_coop_ln.py).
#   bash bench/gpu_s9.sh [FUZZ_S] [TESTS_S]
set -uo pipefail
fuzz_s=${1:-130}; tests_s=${2:-170}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s9; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
tests_beside_fuzz "$work" "$fuzz_s" 4 12900 "$tests_s"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/"
timeout 100 python3 bench/exp_s8.py --only '^(w|a8$|a11)' \
  --configs '^default$|^128x256 t$|^128x128 t$' --json "$out/exp_s8_tma.json" \
  > "$out/exp_s8_tma.txt" 2>&1; echo "exp_s8 exit $?"
cat "$out/exp_s8_tma.txt"
timeout 90 python3 bench/exp_coop_ln.py --emitted-only > "$out/exp_coop_ln.txt" 2>&1
echo "exp_coop_ln exit $?"; cat "$out/exp_coop_ln.txt"
