#!/usr/bin/env bash
# Twentieth session, the call that fits 450 device seconds (gpu_s20.sh's first two phases,
# cut): the wide-row experiment at 256x2**18 and 1024x2**16 (emitted, no wait, fusejit's
# pipelined form at 1-3 programs an SM, the hand-written one at two settings), then cuda
# correctness: plain fuzz, wide-row fuzz with the pipelined form on, its gpu tests.
#   bash bench/gpu_s20b.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-40}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s20b || exit 1
timeout 170 python3 bench/exp_s20_wide.py --quick --shapes 256x262144,1024x65536 \
  > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -40
coop_correctness "$work" "$out" "$fuzz_s"
true
