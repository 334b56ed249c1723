#!/usr/bin/env bash
# The second GPU call of a session, after gpu_last.sh: what its figures asked next.
#   1. wide rows: fusejit's looped row kernel (second pass backwards, forwards) against its
#      cooperative row kernel at several tiles, at four row widths (exp_wide_softmax.py
#      --fusejit-only): the crossover for heuristics.COOP_MIN_ROW_BYTES and the tile;
#   2. GEMM: the MLP's first layer over tiles (exp_matmul.py --mlp) and the 16384x1024x4096
#      cases with their tile sweep (bench_matmul.py --only);
#   3. the wide-row fuzz on cuda, cooperative kernels off and on (after a kernel change);
#   4. the host cost of realize and fj.jit again (a second sample of a noisy host).
# Logs are packed into $OUT/gpu-followup.tgz.   bash bench/gpu_followup.sh [FUZZ_SECONDS]
set -uo pipefail
fuzz_s=${1:-90}
out=${OUT:-gpu-out}; work=/tmp/gpu-followup; mkdir -p "$out" "$work"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
for shape in 256x262144 1024x65536 512x131072 64x1048576; do
  timeout 150 python3 bench/exp_wide_softmax.py --rows "${shape%x*}" --cols "${shape#*x}" \
    --fusejit-only --coop-tiles 8192x8,16384x8,16384x16,4096x4 2>&1 | grep -v "^ *%\|^ *tt\.\|^ *scf\."
done > "$work/wide.log"; grep "us " "$work/wide.log" | cut -c1-200
timeout 160 python3 bench/exp_matmul.py "$work/mm" --skip-epilogue --mlp --budget 120 \
  > "$work/exp_matmul.log" 2>&1; echo "exp_matmul exit $?"
timeout 170 python3 bench/bench_matmul.py --out "$work/mm2" --only "16384x1024x4096" \
  --impls fusejit,cupy,torch,jax --budget 130 > "$work/bench_matmul.log" 2>&1
echo "bench_matmul exit $?"; head -6 "$work/mm2/results.md"
for coop in 0 1; do
  timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" \
    --seed $((3100 + coop)) --cooperative $coop 2>&1 | grep "FAIL\|fuzz_rows" > "$work/rows-$coop.log" &
done
wait; cat "$work"/rows-*.log
timeout 60 python3 bench/host_cost.py --backend cuda > "$work/host_cost.log" 2>&1; tail -10 "$work/host_cost.log"
timeout 120 python3 bench/dispatch.py > "$work/dispatch.log" 2>&1; tail -9 "$work/dispatch.log"
tar czf "$out/gpu-followup.tgz" -C /tmp gpu-followup
