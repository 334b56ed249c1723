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
x() {  # x NAME ARGS...: one exp_s18_halves run, its table lines shown
  local name=$1; shift
  timeout 120 python3 bench/exp_s18_halves.py "$@" --json "$out/$name.json" > "$out/$name.txt" 2>&1
  echo "$name exit $?"; grep -v "^compil" "$out/$name.txt" | grep -v "^    " | tail -20
}
x chunk4096 --ways 5,6
x chunk2048 --ways 5,7 --only '^(softmax|layer_norm|rms_norm) (256x262144|64x65536)'
x vocab4096 --ways 5,6 --cols 50257,128256,150000,151936
x halves --ways 1,2 --only '262144|65536'
timeout $((fuzz_s + 30)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 19401 \
  > "$work/fuzz/rows.log" 2>&1
for f in "$work"/fuzz/*.log; do echo "$f: $(tail -n 1 "$f")"; done | tee "$out/fuzz.txt"
pack_out "$out"
true
