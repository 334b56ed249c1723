#!/usr/bin/env bash
# Sixth session's last GPU call (2026-12-02): the gpu-marked tests (but the exhaustive float32
# exp test) beside the cuda fuzz on the final code (where's scalar-x fast path, the split
# kernels' program-id comment), with what device time was left.
#   bash bench/gpu_s6f.sh [FUZZ_SECONDS] [FUZZ_PROCS] [TESTS_TIMEOUT]
set -uo pipefail
fuzz_s=${1:-50}; procs=${2:-10}; tests_s=${3:-135}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6f; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8600 "$tests_s"
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
