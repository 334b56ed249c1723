#!/usr/bin/env bash
# Twelfth session's second GPU call (2026-12-05): a fresh draw of 16 GEMMs (bench_matmul.py
# --unseen 20261212:16, default tiles, the TF32 alignment copies and the split rule of this
# session) beside torch (eager and torch.compile) and jax.jit; then the GEMM tests on cuda
# (TF32 copies included) beside the cuda fuzz.
#   bash bench/gpu_s12b.sh [FUZZ_S] [BUDGET]
set -uo pipefail
fuzz_s=${1:-120}; budget=${2:-200}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s12b; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
unseen_matmul "$out" "$work" 20261212 20261212:16 fusejit,torch,jax "$budget"
tests_beside_fuzz "$work" "$fuzz_s" 4 14500 $((fuzz_s + 60)) \
  "(matmul or gemm or align) and not every_input and not no_device_synchronization"
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
true
