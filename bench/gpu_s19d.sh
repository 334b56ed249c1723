#!/usr/bin/env bash
# Nineteenth session, fourth call (H200): cooperative rows at chunks of 8192 (shipped) against
# 4096 and 2048 (more programs an SM, so that some load while others wait: the H200 ran wide
# softmax at 79% where the H100 ran 93%), halves against one tile there, and vocabulary-like
# widths; then the cuda fuzz of wide rows.
#   bash bench/gpu_s19d.sh [FUZZ_S]
set -uo pipefail
fuzz_s=${1:-40}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19d; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
exp_halves "$out" chunk4096 120 --ways 5,6
exp_halves "$out" chunk2048 120 --ways 5,7 --only '^(softmax|layer_norm|rms_norm) (256x262144|64x65536)'
exp_halves "$out" vocab4096 120 --ways 5,6 --cols 50257,128256,150000,151936
exp_halves "$out" halves 120 --ways 1,2 --only '262144|65536'
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 19401 \
  > "$work/fuzz/rows.log" 2>&1
fuzz_report "$work" "$out"
pack_out "$out"
true
