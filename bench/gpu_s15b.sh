#!/usr/bin/env bash
# Fifteenth session, second call (an H200): the TF32 illegal access of the first call and the
# full-precision float32 operand layouts (exp_s15b), the per-call table beside cupy.fuse,
# jax.jit and torch (dispatch.py, issue 10's figures, on a quiet host: first), fj.jit against
# cupy.fuse in turn (--paired-only), and the short-K float16 products under the copies' floor
# with the copies off and on (exp_s7b: the N-major floor on an H200).
#   bash bench/gpu_s15b.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 150 python3 bench/dispatch.py --json "$out/dispatch.json" > "$out/dispatch.txt" 2>&1
echo "dispatch exit $?"; tail -9 "$out/dispatch.txt"
timeout 60 python3 bench/dispatch.py --paired-only 5 > "$out/paired.txt" 2>&1
echo "paired exit $?"; tail -8 "$out/paired.txt"
timeout 200 python3 bench/exp_s15b.py --json "$out/exp_s15b.json" > "$out/exp_s15b.txt" 2>&1
echo "exp_s15b exit $?"; cut -c1-400 "$out/exp_s15b.txt"
timeout 80 python3 bench/exp_s7b.py --only 'u7|old u10|old u13|new u12|new u13|short' \
  > "$out/exp_s7b_floor.txt" 2>&1
echo "exp_s7b exit $?"; cat "$out/exp_s7b_floor.txt"
true
