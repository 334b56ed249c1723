#!/usr/bin/env bash
# Twenty-first session, first call (about 8 min on an H200), in order of what matters (each
# phase writes its own files, at most 8 in all):
#  1. cuda correctness: the twentieth session's emitter (offsets through merged coordinates,
#     unread index lines pruned: never run on cuda before), the codegen split into one module
#     per kind (the same source), the pipelined cooperative rows: every gpu-marked test beside
#     the cuda fuzz (plain, fj.jit) and the wide-row fuzz with and without COOP_PIPELINE
#     -> correctness.txt (tests, fuzz; failures kept);
#  2. bench/exp_s20_wide.py --quick at 256x2**18, 1024x2**16 and 256x150,001: the emitted
#     cooperative rows, their no-wait bound, fusejit's pipelined form at 1-3 programs an SM
#     and the hand-written pipelined kernels -> exp_s20_wide.txt;
#  3. the suite's wide softmax and layer norm (both sizes, fusejit alone) with COOP_PIPELINE
#     off and on, each in its own process -> wide-off/, wide-on/.
#   bash bench/gpu_s21.sh [FUZZ_S] [PHASES]   (PHASES: which of 1, 2, 3 to run; default 123)
set -uo pipefail
fuzz_s=${1:-80}; phases=${2:-123}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s21 || exit 1
if [[ $phases == *1* ]]; then
coop_jobs "$work" "$fuzz_s" 21022 full
tests_beside_fuzz "$work" "$fuzz_s" 5 21000 $((fuzz_s + 150))  # (waits for the jobs above too)
{ fuzz_summary "$work"; for f in "$work"/tests-*.log; do echo "$f: $(grep -E 'passed|failed' \
    "$f" | tail -1)"; grep -E "^FAILED|^ERROR" "$f" | head -10; done
  tail -n 1 "$work"/fuzz/rows*.log; } | tee "$out/correctness.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
fi
if [[ $phases == *2* ]]; then
timeout 170 python3 bench/exp_s20_wide.py --quick --shapes 256x262144,1024x65536,256x150001 \
  > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -60
fi
[[ $phases == *3* ]] || exit 0
wide_pipeline_suite "$out" "$work"
