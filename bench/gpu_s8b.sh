#!/usr/bin/env bash
# Eighth session's second GPU call (2026-12-02): float16 copies to padded rows, hand-written
# variants beside CuPy's copy (bench/exp_s8b.py); the new GEMM tile defaults against the
# sweep's best (bench/exp_s8.py: default and persistent 128x256 only); the gpu-marked tests
# beside the cuda fuzz.
#   bash bench/gpu_s8b.sh [FUZZ_SECONDS] [TESTS_TIMEOUT]
set -uo pipefail
fuzz_s=${1:-140}; tests_s=${2:-170}
out=${OUT:-gpu-out}; work=/tmp/gpu-s8b; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 150 python3 bench/exp_s8b.py > "$out/exp_s8b.txt" 2>&1; echo "exp_s8b exit $?"
cat "$out/exp_s8b.txt"
timeout 150 python3 bench/exp_s8.py --configs '^default$|^128x256 p$' --json "$out/exp_s8.json" \
  > "$out/exp_s8.txt" 2>&1; echo "exp_s8 exit $?"; cat "$out/exp_s8.txt"
tests_beside_fuzz "$work" "$fuzz_s" 6 12200 "$tests_s"
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s8b.tgz" -C /tmp gpu-s8b
