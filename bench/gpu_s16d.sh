#!/usr/bin/env bash
# Sixteenth session, last call: the cuda fuzz with products after the full-precision split and
# copies (seed 16403 again: its process was killed by the OOM killer in the third call, 130 GB
# of host memory, program 36 on a cold machine; not reproduced on a warm one); the short-run
# reductions' emitted kernel edited one difference at a time from run_fastest (exp_s16_shortrun:
# the load's identity, the run index from tl.arange); the FMA GEMM with bias and GELU relayed
# (exp_s15 ieee-epi); the 20261212 GEMM draw beside torch and jax.
#   bash bench/gpu_s16d.sh [FUZZ_S] [DRAW_BUDGET]
set -uo pipefail
fuzz_s=${1:-50}; draw_s=${2:-150}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s16d; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
i=0
for mode in "--products --seed 16403" "--products --seed 16501" "--matmul-precision tf32 --seed 16502"; do
  i=$((i + 1))
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" $mode \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
for f in "$work"/fuzz/fuzz-*.log; do echo "$f: $(grep -h '^fusejit fuzz' "$f" || tail -c 300 "$f")"; done \
  | tee "$out/fuzz.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
timeout 90 python3 bench/exp_s16_shortrun.py --json "$out/exp_s16_shortrun.json" \
  > "$out/exp_s16_shortrun.txt" 2>&1; echo "shortrun exit $?"
grep -h "emitted\|run_fastest  \|run_fastest b256 w4\|fusejit plan\|best" "$out/exp_s16_shortrun.txt"
timeout 60 python3 bench/exp_s15.py --precision ieee-epi --only "e1|e0 none ieee-epi default" \
  --json "$out/exp_s15_epi.json" > "$out/exp_s15_epi.txt" 2>&1; echo "epi exit $?"
cat "$out/exp_s15_epi.txt"
unseen_matmul "$out" "$work" 20261212 20261212:16 fusejit,torch,jax "$draw_s"
true
