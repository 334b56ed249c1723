#!/usr/bin/env bash
# Eighteenth session, first call (a cold machine): the fuzz seed that took the host's memory
# (16403 with products) re-run after the fuzzer's matrix-product size fix, traced and then as
# the plain command; the cooperative layer norm with ptxas's registers capped
# (exp_s16_ln --set registers: four programs an SM at 128).
#   bash bench/gpu_s18.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s18; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
free -g | head -2 | tee "$out/free.txt"
timeout 100 python3 bench/fuzz_trace.py 16403 0 80 --show-from 30 > "$out/fuzz_trace.txt" 2>&1
echo "fuzz_trace exit $?"; tail -8 "$out/fuzz_trace.txt"
timeout 100 python3 -m fusejit fuzz --backend cuda --products --seed 16403 --seconds 60 \
  --out "$work/failures" --max-failures 3 > "$out/fuzz_16403.txt" 2>&1
echo "fuzz 16403 exit $?"; tail -5 "$out/fuzz_16403.txt"
[ -d "$work/failures" ] && cp -r "$work/failures" "$out/"
timeout 220 python3 bench/exp_s16_ln.py --set registers --json "$out/exp_s16_ln_registers.json" \
  > "$out/exp_s16_ln_registers.txt" 2>&1; echo "ln exit $?"; grep -v "^compil" "$out/exp_s16_ln_registers.txt"
pack_out "$out"
true
