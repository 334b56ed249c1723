#!/usr/bin/env bash
# Fifteenth session, third call (an H200): after the full-precision rule (a K-major B written
# row-major first, rule_fma_n_major_b) and row windows for float16 kernels that store rows:
# the gpu-marked GEMM, alignment, TF32, row-window and regression tests beside the cuda fuzz
# with products; the rule's plans against cuBLAS (exp_s15b --part rule); the row windows
# again (exp_row_window); the suite's families beside torch.compile and jax.jit (--quick).
#   bash bench/gpu_s15c.sh [FUZZ_S] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-60}; suite_s=${2:-130}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s15c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
tests_beside_product_fuzz "$work" "$fuzz_s" 15100 "$out"
timeout 100 python3 bench/exp_s15b.py --part rule --json "$out/exp_s15b_rule.json" \
  > "$out/exp_s15b_rule.txt" 2>&1; echo "exp_s15b rule exit $?"; cut -c1-400 "$out/exp_s15b_rule.txt"
timeout 80 python3 bench/exp_row_window.py --json "$out/exp_row_window.json" \
  > "$out/exp_row_window.txt" 2>&1; echo "exp_row_window exit $?"; cat "$out/exp_row_window.txt"
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/suite" --quick --budget "$suite_s" \
  --impls fusejit,jax,torch > "$work/suite.log" 2>&1; echo "suite exit $?"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
grep -A40 "^| workload" "$work/suite/results.md" | head -45
true
