#!/usr/bin/env bash
# Eighth session's third GPU call (2026-12-02): the alignment copies in 8-byte words. Each
# kernel of the copied GEMM plans (bench/exp_s7b.py), the last session's second GEMM draw and a fresh one beside torch.compile and jax.jit, the
# gpu-marked tests beside the cuda fuzz (two processes with every misaligned float16 operand
# copied), then hand-written copy variants (bench/exp_s8b.py).
#   bash bench/gpu_s8c.sh [OLD SEED:COUNT] [NEW SEED:COUNT] [MATMUL_BUDGET] [FUZZ_S] [TESTS_S]
set -uo pipefail
old=${1:-20261208:16}; new=${2:-20261209:16}; mm_s=${3:-100}; fuzz_s=${4:-130}; tests_s=${5:-165}
out=${OUT:-gpu-out}; work=/tmp/gpu-s8c; mkdir -p "$out" "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 120 python3 bench/exp_s7b.py > "$out/exp_s7b.txt" 2>&1; echo "exp_s7b exit $?"
cut -c1-330 "$out/exp_s7b.txt"
unseen_matmul "$out" "$work" old "$old" fusejit,torch,jax "$mm_s"
unseen_matmul "$out" "$work" new "$new" fusejit,torch,jax "$mm_s"
align_fuzz "$work" "$fuzz_s" 12300
tests_beside_fuzz "$work" "$fuzz_s" 5 12310 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s8c.tgz" -C /tmp gpu-s8c
timeout 90 python3 bench/exp_s8b.py > "$out/exp_s8b.txt" 2>&1; echo "exp_s8b exit $?"
cat "$out/exp_s8b.txt"
