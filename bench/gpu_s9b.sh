#!/usr/bin/env bash
# Ninth session's second GPU call (2026-12-05): batched GEMMs (3-D TMA boxes; a weight shared by
# the batch folded into M) and GEMMs of 129-255 rows (128x128 tiles by default) against other
# tiles (bench/exp_s8.py); the eighth session's fresh GEMM draw (20261209:16) beside
# torch.compile and jax.jit again; the GEMM GPU tests beside two cuda fuzz processes.
#   bash bench/gpu_s9b.sh [DRAW] [BUDGET] [FUZZ_S]
set -uo pipefail
draw=${1:-20261209:16}; budget=${2:-100}; fuzz_s=${3:-90}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s9b; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 120 python3 bench/exp_s8.py --only '^(m|b)' \
  --configs '^default$|^128x256 t$|^128x256 p$' --json "$out/exp_s8_mb.json" \
  > "$out/exp_s8_mb.txt" 2>&1; echo "exp_s8 exit $?"
cat "$out/exp_s8_mb.txt"
unseen_matmul "$out" "$work" "${draw%%:*}" "$draw" fusejit,torch,jax "$budget"
grep -A8 "^## Summary" "$work/matmul-${draw%%:*}/results.md" 2>/dev/null
align_fuzz "$work" "$fuzz_s" 13050 2 "FUSEJIT_GEMM_PERSISTENT=1"
timeout $((fuzz_s + 30)) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  > "$work/gpu-tests.log" 2>&1
wait
grep -E "passed|failed" "$work/gpu-tests.log" | tail -2; grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head
grep -h "^fusejit fuzz" "$work"/fuzz/align-*.log; cp "$work/gpu-tests.log" "$out/"
