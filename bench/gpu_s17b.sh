#!/usr/bin/env bash
# Seventeenth session, second call: the float16 GEMM's epilogue edits timed in interleaved
# passes with a probe of max.NaN's signed zeros (exp_s17_epi); the cooperative layer norm with
# ptxas's registers capped (exp_s16_ln --set registers: four programs an SM at 128).
#   bash bench/gpu_s17b.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
timeout 200 python3 bench/exp_s16_ln.py --set registers --json "$out/exp_s16_ln_registers.json" \
  > "$out/exp_s16_ln_registers.txt" 2>&1; echo "ln exit $?"; grep -v "^compil" "$out/exp_s16_ln_registers.txt"
timeout 240 python3 bench/exp_s17_epi.py --json "$out/exp_s17_epi.json" > "$out/exp_s17_epi.txt" 2>&1
echo "epi exit $?"; cat "$out/exp_s17_epi.txt"
pack_out "$out"
true
