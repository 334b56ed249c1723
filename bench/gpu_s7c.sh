#!/usr/bin/env bash
# Seventh session's third GPU call (2026-12-02): the GEMM alignment copies again (the second
# call's fusejit worker stopped at a fused text it could not parse, fixed in its commit) on
# the first call's unseen GEMM draw and a fresh one, beside torch.compile and jax.jit (and
# cuBLAS on the fresh one); then the gpu-marked tests beside the cuda fuzz, two of its
# processes with every misaligned float16 operand copied (FUSEJIT_GEMM_ALIGN=always).
#   bash bench/gpu_s7c.sh [OLD SEED:COUNT] [NEW SEED:COUNT] [MATMUL_BUDGET] [FUZZ_SECONDS] [TESTS_S]
set -uo pipefail
old=${1:-20261207:16}; new=${2:-20261208:16}; mm_s=${3:-100}; fuzz_s=${4:-60}; tests_s=${5:-200}
out=${OUT:-gpu-out}; work=/tmp/gpu-s7c; mkdir -p "$out" "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
unseen_matmul "$out" "$work" old "$old" fusejit,torch,jax "$mm_s"
unseen_matmul "$out" "$work" new "$new" fusejit,cupy,torch,jax "$mm_s"
align_fuzz "$work" "$fuzz_s" 8400
tests_beside_fuzz "$work" "$fuzz_s" 8 8410 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s7c.tgz" -C /tmp gpu-s7c
