#!/usr/bin/env bash
# Twentieth session, the call that fits 450 device seconds (gpu_s20.sh's first two phases,
# cut): the wide-row experiment at 256x2**18 and 1024x2**16 (emitted, no wait, fusejit's
# pipelined form at 1-3 programs an SM, the hand-written one at two settings), then cuda
# correctness: plain fuzz, wide-row fuzz with the pipelined form on, its gpu tests.
#   bash bench/gpu_s20b.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-40}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s20b; mkdir -p "$work/fuzz"
here="$(dirname "${BASH_SOURCE[0]}")"
. "$here/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 170 python3 bench/exp_s20_wide.py --quick --shapes 256x262144,1024x65536 \
  > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -40
FUSEJIT_COOP_PIPELINE=1 timeout $((fuzz_s + 30)) python3 -m pytest -m gpu -q -p no:cacheprovider \
  tests/test_cooperative_rows.py tests/test_row_window.py > "$work/tests-pipelined.log" 2>&1 &
timeout $((fuzz_s + 20)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 20021 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
FUSEJIT_COOP_PIPELINE=1 timeout $((fuzz_s + 20)) python3 bench/fuzz_rows.py --backend cuda \
  --seconds "$fuzz_s" --seed 20023 > "$work/fuzz/rows-pipelined.log" 2>&1 &
wait
{ for f in "$work"/tests-*.log; do echo "$f: $(grep -E 'passed|failed' "$f" | tail -1)";
    grep -E "^FAILED|^ERROR" "$f" | head -10; done
  for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done; } | tee "$out/correctness.txt"
if [ -d "$work/fuzz/failures" ]; then tar -czf "$out/failures.tar.gz" -C "$work/fuzz" failures; fi
true
