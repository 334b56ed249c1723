#!/usr/bin/env bash
# Twentieth session, first call: why the cooperative wide-row kernels run under the copy
# rate on the H200 (bench/exp_s20_wide.py: no-wait bound, warps, register caps, a persistent
# pipelined form), then the nineteenth session's fifth call (bench/gpu_s19e.sh: misaligned and
# ragged rows, the gpu tests of cooperative rows, cuda fuzz, dispatch).
#   bash bench/gpu_s20.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-60}
out=${OUT:-gpu-out}; mkdir -p "$out"
here="$(dirname "${BASH_SOURCE[0]}")"
. "$here/gpu_common.sh"; gpu_setup || exit 1
timeout 300 python3 bench/exp_s20_wide.py > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; cat "$out/exp_s20_wide.txt" | grep -v Warning | tail -120
OUT="$out/s19e" bash "$here/gpu_s19e.sh" "$fuzz_s"
mv "$out/s19e/results.tar.gz" "$out/s19e.tar.gz" 2>/dev/null
pack_out "$out"
true
