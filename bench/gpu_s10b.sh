#!/usr/bin/env bash
# Tenth session's second GPU call (2026-12-05): GEMMs of few rows against split-K and
# block_n (bench/exp_thin.py, beside cuBLAS); the new default for 129-255 rows (exp_s8 m
# shapes, default only); the eighth session's fresh GEMM draw beside torch.compile and jax.jit;
# the gpu-marked tests beside the cuda fuzz (two processes, both through fj.jit) and the
# wide-row fuzz.
#   bash bench/gpu_s10b.sh [DRAW] [BUDGET] [FUZZ_S] [TESTS_S]
set -uo pipefail
draw=${1:-20261209:16}; budget=${2:-80}; fuzz_s=${3:-150}; tests_s=${4:-210}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s10b; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 130 python3 bench/exp_thin.py --json "$out/exp_thin.json" > "$out/exp_thin.txt" 2>&1
echo "exp_thin exit $?"; cat "$out/exp_thin.txt"
timeout 40 python3 bench/exp_s8.py --only '^m' --configs '^default$' --json "$out/exp_s8_m.json" \
  > "$out/exp_s8_m.txt" 2>&1; echo "exp_s8 exit $?"; cat "$out/exp_s8_m.txt"
unseen_matmul "$out" "$work" "${draw%%:*}" "$draw" fusejit,torch,jax "$budget"
mkdir -p "$work/fuzz"
timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed 102 \
  > "$work/fuzz/fuzz-rows-1.log" 2>&1 &
tests_beside_fuzz "$work" "$fuzz_s" 2 13500 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
tail -qn 1 "$work"/fuzz/fuzz-rows-*.log | tee -a "$out/gpu-tests-fuzz.txt"
grep -h "^FAIL" "$work"/fuzz/fuzz-rows-*.log | head -5
cp "$work/gpu-tests.log" "$out/"; cp -r "$work/fuzz/failures"* "$out/" 2>/dev/null
