#!/usr/bin/env bash
# GPU call of 2026-12-02 (second session): fusejit's cooperative row kernel after its two
# changes (no grid-wide count of programs done; softmax's numerator from the chunk's own
# exps), against the looped row kernel at five row widths, then the wide-row fuzz with
# cooperative rows on, against NumPy.
#   bash bench/gpu_coop_rows.sh [FUZZ_SECONDS]
set -uo pipefail
fuzz_s=${1:-60}; out=${OUT:-gpu-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
for shape in 256x262144 1024x65536 2048x32768 512x131072; do
  timeout 150 python3 bench/exp_wide_softmax.py --rows "${shape%x*}" --cols "${shape#*x}" --fusejit-only \
    --coop-tiles 8192x8,8192x4,16384x16,16384x8 2>&1 | grep -v "direct launch failed" | cut -c1-260
done > "$out/coop-rows.txt"
for i in 1 2 3 4; do  # (after the timings: alone on the GPU)
  timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed $((80 + i)) \
    --cooperative 1 > "$out/fuzz-rows-$i.txt" 2>&1 &
done
wait
cat "$out/coop-rows.txt"; tail -n 3 "$out"/fuzz-rows-*.txt
