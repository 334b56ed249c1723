#!/usr/bin/env bash
# Seventeenth session, first call (a cold machine): the fuzz seed whose process took the host's
# memory on two cold H100s (16403 with products) traced program by program; the float16
# GEMM's epilogue edits (exp_s17_epi); the cuda fuzz with products, TF32 and plain programs;
# the full-precision GEMM with bias and GELU relayed (exp_s15 ieee-epi).
#   bash bench/gpu_s17.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-60}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s17; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
free -g | head -2 | tee "$out/free.txt"
timeout 150 python3 bench/fuzz_trace.py 16403 0 60 --show-from 30 > "$out/fuzz_trace.txt" 2>&1
echo "fuzz_trace exit $?"; tail -15 "$out/fuzz_trace.txt"
timeout 200 python3 bench/exp_s17_epi.py --json "$out/exp_s17_epi.json" > "$out/exp_s17_epi.txt" 2>&1
echo "epi exit $?"; cat "$out/exp_s17_epi.txt"
i=0
for mode in "--products --seed 17001" "--matmul-precision tf32 --seed 17002" "--seed 17003" "--jit --seed 17004"; do
  i=$((i + 1))
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" $mode \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
for f in "$work"/fuzz/fuzz-*.log; do echo "$f: $(grep -h '^fusejit fuzz' "$f" || tail -c 300 "$f")"; done \
  | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
timeout 60 python3 bench/exp_s15.py --precision ieee-epi --only "e1|e0 none ieee-epi default" \
  --json "$out/exp_s15_epi.json" > "$out/exp_s15_epi.txt" 2>&1; echo "ieee epi exit $?"
cat "$out/exp_s15_epi.txt"
pack_out "$out"
true
