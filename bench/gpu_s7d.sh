#!/usr/bin/env bash
# Seventh session's fourth GPU call (2026-12-02): GEMM K loops with the partial last step after
# the loop. A fresh unseen GEMM draw beside torch.compile and jax.jit, the first call's draw
# with fusejit alone (its peers: the third call), then the gpu-marked matmul tests beside the
# cuda fuzz (two processes with every misaligned float16 operand copied).
#   bash bench/gpu_s7d.sh [NEW SEED:COUNT] [OLD SEED:COUNT] [MATMUL_BUDGET] [FUZZ_SECONDS] [TESTS_S]
set -uo pipefail
new=${1:-20261208:16}; old=${2:-20261207:16}; mm_s=${3:-100}; fuzz_s=${4:-50}; tests_s=${5:-110}
out=${OUT:-gpu-out}; work=/tmp/gpu-s7d; mkdir -p "$out" "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
unseen_matmul "$out" "$work" new "$new" fusejit,torch,jax "$mm_s"
unseen_matmul "$out" "$work" old "$old" fusejit 40
align_fuzz "$work" "$fuzz_s" 8500
tests_beside_fuzz "$work" "$fuzz_s" 6 8510 "$tests_s" "matmul or gemm or tf32 or cubin"
wait
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s7d.tgz" -C /tmp gpu-s7d
