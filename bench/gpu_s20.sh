#!/usr/bin/env bash
# Twentieth session, first call, in order of what matters (a phase cut off by the call's
# limit loses only itself: each phase writes its own files, at most 8 in all):
#  1. why the cooperative wide-row kernels run under the copy rate on the H200
#     (bench/exp_s20_wide.py: no-wait bound, a register cap, fusejit's pipelined form
#     (COOP_PIPELINE) and a hand-written one) -> exp_s20_wide.txt;
#  2. cuda correctness of this session's emitter (merged coordinates) and of the pipelined
#     form: plain fuzz, wide-row fuzz with and without COOP_PIPELINE, the gpu tests of
#     cooperative rows and row windows with and without it -> correctness.txt (+ failures);
#  3. the ragged-row experiments left from the nineteenth session (exp_s18_halves --ways 5,8
#     and 5,9) -> ragged.txt, equal.txt.
#   bash bench/gpu_s20.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-50}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s20; mkdir -p "$work/fuzz"
here="$(dirname "${BASH_SOURCE[0]}")"
. "$here/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 260 python3 bench/exp_s20_wide.py > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -80
( timeout $((fuzz_s + 40)) python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_cooperative_rows.py tests/test_row_window.py > "$work/tests-default.log" 2>&1
  FUSEJIT_COOP_PIPELINE=1 timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/test_cooperative_rows.py tests/test_row_window.py > "$work/tests-pipelined.log" 2>&1 ) &
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 20021 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" \
  --seed 20022 > "$work/fuzz/rows.log" 2>&1 &
FUSEJIT_COOP_PIPELINE=1 timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda \
  --seconds "$fuzz_s" --seed 20023 > "$work/fuzz/rows-pipelined.log" 2>&1 &
wait
{ for f in "$work"/tests-*.log; do echo "$f: $(grep -E 'passed|failed' "$f" | tail -1)";
    grep -E "^FAILED|^ERROR" "$f" | head -10; done
  for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done; } | tee "$out/correctness.txt"
if [ -d "$work/fuzz/failures" ]; then tar -czf "$out/failures.tar.gz" -C "$work/fuzz" failures; fi
exp_halves "$work" ragged 70 --ways 5,8 --cols 150000,150016,155520,155632,155648
cp "$work/ragged.txt" "$out/"
exp_halves "$work" equal 70 --ways 5,9 --cols 150000,150016,155520,155632,155648
cp "$work/equal.txt" "$out/"
true
