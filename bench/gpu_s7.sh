#!/usr/bin/env bash
# Seventh session's first GPU call (2026-12-02): split reductions at several partial counts
# (bench/exp_s7.py), cold compile times on the H200 host
# (bench/compile_time.py), a first draw of unseen GEMM cases beside cuBLAS, torch.compile and
# jax.jit (bench/bench_matmul.py --unseen), and a fifth unseen draw of the suite's families
# beside torch.compile and jax.jit. Every result is under $OUT before the next step starts.
#   bash bench/gpu_s7.sh [MATMUL SEED:COUNT] [MATMUL_BUDGET] [SUITE SEED:COUNT] [SUITE_BUDGET]
set -uo pipefail
mm_draw=${1:-20261207:16}; mm_s=${2:-170}; draw=${3:-20261207:24}; unseen_s=${4:-150}
out=${OUT:-gpu-out}; work=/tmp/gpu-s7; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 100 python3 bench/exp_s7.py > "$out/exp_s7.txt" 2>&1; echo "exp_s7 exit $?"
timeout 120 python3 bench/compile_time.py --json "$out/compile_time.json" > "$out/compile_time.txt" 2>&1
echo "compile_time exit $?"; tail -3 "$out/compile_time.txt"
timeout $((mm_s + 90)) python3 bench/bench_matmul.py --out "$work/matmul" --unseen "$mm_draw" --quick \
  --impls fusejit,cupy,torch,jax --budget "$mm_s" > "$work/matmul.log" 2>&1; echo "matmul exit $?"
mkdir -p "$out/matmul"; cp "$work"/matmul/*.json "$work"/matmul/*.md "$work"/matmul/*.log "$out/matmul/" 2>/dev/null
cut -d'|' -f2,3,4,5,7,8,9,10 "$work/matmul/results.md" | head -24
unseen_suite "$out" "$work" "$draw" "$unseen_s"
tar czf "$out/gpu-s7.tgz" -C /tmp gpu-s7
