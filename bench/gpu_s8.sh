#!/usr/bin/env bash
# Eighth session's first GPU call (2026-12-02): GEMM tiles against wave quantization
# (bench/exp_s8.py), the alignment copies kernel by kernel (bench/exp_s7b.py) and the fused
# outer reduction with its broadcast (bench/exp_s7c.py). Every result is under $OUT as it ends.
#   bash bench/gpu_s8.sh [EXP_S8_TIMEOUT]
set -uo pipefail
s8_s=${1:-300}
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$s8_s" python3 bench/exp_s8.py --json "$out/exp_s8.json" > "$out/exp_s8.txt" 2>&1
echo "exp_s8 exit $?"; cat "$out/exp_s8.txt" | cut -c1-400
timeout 120 python3 bench/exp_s7b.py > "$out/exp_s7b.txt" 2>&1; echo "exp_s7b exit $?"
cut -c1-300 "$out/exp_s7b.txt"
timeout 100 python3 bench/exp_s7c.py > "$out/exp_s7c.txt" 2>&1; echo "exp_s7c exit $?"
cat "$out/exp_s7c.txt"
