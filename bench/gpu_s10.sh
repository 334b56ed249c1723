#!/usr/bin/env bash
# Tenth session's GPU call (2026-12-05): cooperative row programs holding the same chunk of
# 1, 2 or 4 rows where the rows read a shared vector (the layer norm's weight and bias read
# once per group; bench/exp_coop_ln.py --shared-rows), the wide-row and layer-norm workloads
# of the suite beside torch.compile and jax.jit (default: 2 rows), the GEMM shapes of 129-255
# rows and batched GEMMs (3-D TMA boxes, the folded shared weight; bench/exp_s8.py, unrun in
# the ninth session), then the gpu-marked tests beside the cuda fuzz and the wide-row fuzz.
# Ran once (on an H100: bench/results/h100-s10-call1-*): the grouped rows ran slower (81.1 /
# 80.0 / 76.9% of the copy rate at 1 / 2 / 4 rows, 256x2**18) and were taken out again, with
# exp_coop_ln's --shared-rows: this script no longer runs as it is.
#   bash bench/gpu_s10.sh [FUZZ_S] [TESTS_S] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-120}; tests_s=${2:-160}; suite_budget=${3:-100}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s10; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 100 python3 bench/exp_coop_ln.py --emitted-only --shared-rows 1,2,4 \
  --shapes 256x262144,1024x65536,512x131072 > "$out/exp_coop_ln.txt" 2>&1
echo "exp_coop_ln exit $?"; cat "$out/exp_coop_ln.txt"
timeout $((suite_budget + 60)) python3 bench/suite.py --out "$work/rows" --only 'wide-rows|layer' \
  --budget "$suite_budget" --impls fusejit,jax,torch > "$work/rows.log" 2>&1; echo "suite rows exit $?"
mkdir -p "$out/rows"; cp "$work"/rows/results.* "$out/rows/" 2>/dev/null
grep -A20 "^| workload" "$work/rows/results.md" | cut -d'|' -f2-14 | head -20
timeout 110 python3 bench/exp_s8.py --only '^(m|b)' \
  --configs '^default$|^128x256 t$|^128x256 p$' --json "$out/exp_s8_mb.json" \
  > "$out/exp_s8_mb.txt" 2>&1; echo "exp_s8 exit $?"
cat "$out/exp_s8_mb.txt"
mkdir -p "$work/fuzz"
timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 101 \
  > "$work/fuzz/fuzz-rows-1.log" 2>&1 &
tests_beside_fuzz "$work" "$fuzz_s" 3 13400 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
tail -qn 1 "$work"/fuzz/fuzz-rows-*.log; grep -h "^FAIL" "$work"/fuzz/fuzz-rows-*.log | head -5
cp "$work/gpu-tests.log" "$work"/fuzz/fuzz-rows-*.log "$out/"; cp -r "$work/fuzz/failures"* "$out/" 2>/dev/null
