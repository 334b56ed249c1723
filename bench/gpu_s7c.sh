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
for pair in "old:$old:fusejit,torch,jax" "new:$new:fusejit,cupy,torch,jax"; do
  IFS=: read -r tag seed count impls <<< "$pair"
  timeout $((mm_s + 90)) python3 bench/bench_matmul.py --out "$work/matmul-$tag" --unseen "$seed:$count" \
    --quick --impls "$impls" --budget "$mm_s" > "$work/matmul-$tag.log" 2>&1; echo "matmul $tag exit $?"
  mkdir -p "$out/matmul-$tag"
  cp "$work/matmul-$tag"/results.* "$work/matmul-$tag"/fusejit.log "$out/matmul-$tag/" 2>/dev/null
  cut -d'|' -f2,3,4,6,7,8,9,10,11 "$work/matmul-$tag/results.md" | head -20
done
for i in 1 2; do
  FUSEJIT_GEMM_ALIGN=always timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda \
    --seconds "$fuzz_s" --seed $((8400 + i)) --out "$work/fuzz/failures-align" --max-failures 3 \
    > "$work/fuzz/align-$i.log" 2>&1 &
done
tests_beside_fuzz "$work" "$fuzz_s" 8 8410 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
grep -h "^fusejit fuzz" "$work"/fuzz/align-*.log | tee -a "$out/fuzz-summary.txt"
tar czf "$out/gpu-s7c.tgz" -C /tmp gpu-s7c
