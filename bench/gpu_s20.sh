#!/usr/bin/env bash
# Twentieth session, first call, in order of what matters (a phase cut off by the call's
# limit loses only itself: each phase writes its own files, at most 8 in all):
#  1. why the cooperative wide-row kernels run under the copy rate on the H200
#     (bench/exp_s20_wide.py: no-wait bound, a register cap, fusejit's pipelined form
#     (COOP_PIPELINE) and a hand-written one) -> exp_s20_wide.txt;
#  2. cuda correctness of this session's emitter (merged coordinates) and of the pipelined
#     form: plain fuzz, wide-row fuzz with and without COOP_PIPELINE, the gpu tests of
#     cooperative rows and row windows with and without it (gpu_common.sh's coop_correctness)
#     -> correctness.txt, fuzz.txt (+ failures);
#  3. the ragged-row experiments left from the nineteenth session (exp_s18_halves --ways 5,8
#     and 5,9) -> ragged_equal.txt.
#   bash bench/gpu_s20.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-50}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s20 || exit 1
timeout 260 python3 bench/exp_s20_wide.py > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -80
coop_correctness "$work" "$out" "$fuzz_s" full
exp_halves "$work" ragged 70 --ways 5,8 --cols 150000,150016,155520,155632,155648
exp_halves "$work" equal 70 --ways 5,9 --cols 150000,150016,155520,155632,155648
cat "$work/ragged.txt" "$work/equal.txt" > "$out/ragged_equal.txt"  # (one file: at most 8 return)
true
