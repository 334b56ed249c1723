#!/usr/bin/env bash
# Nineteenth session, fifth call: the shipped cooperative rows (windowed, softmax's in chunks
# of 4096) against the looped kernel over rows that are not 16-byte multiples, the gpu tests
# of cooperative rows and row windows, the cuda fuzz of wide rows and random programs, and
# fj.jit against cupy.fuse in turn (dispatch.py --paired-only, the host warmed first).
#   bash bench/gpu_s19e.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-60}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19e; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
exp_halves "$out" exp_misaligned 120 --ways 0,5 --cols 50257,100003,131073,150001
# what costs in rows that end in a partial chunk: widths whose rows start on 128 bytes or 64
# past, with a last chunk of 31% or nearly whole (150,000 ran 65% against 76% at 147,456)
# (way 8: rows that start off a 128-byte line laid from it: 150,000 and 155,632 here)
exp_halves "$out" exp_ragged 70 --ways 5,8 --cols 150000,150016,155520,155632,155648
# (way 9: rows that chunks of 8192 do not divide in equal chunks: 150,000, 150,016, 155,520,
# 155,632 here)
exp_halves "$out" exp_equal 70 --ways 5,9 --cols 150000,150016,155520,155632,155648
timeout $((fuzz_s + 60)) python3 -m pytest -m gpu -q -p no:cacheprovider \
  tests/test_cooperative_rows.py tests/test_row_window.py > "$out/gpu-tests.txt" 2>&1 &
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 19501 \
  > "$work/fuzz/rows.log" 2>&1 &
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19502 \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/plain.log" 2>&1 &
wait
tail -3 "$out/gpu-tests.txt"
fuzz_report "$work" "$out"
timeout 60 python3 bench/dispatch.py --paired-only 5 > "$out/dispatch.txt" 2>&1
echo "dispatch exit $?"; tail -16 "$out/dispatch.txt"
pack_out "$out"
true
