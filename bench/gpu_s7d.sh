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
for pair in "new:$new:fusejit,torch,jax:$mm_s" "old:$old:fusejit:40"; do
  IFS=: read -r tag seed count impls budget <<< "$pair"
  timeout $((budget + 90)) python3 bench/bench_matmul.py --out "$work/matmul-$tag" --unseen "$seed:$count" \
    --quick --impls "$impls" --budget "$budget" > "$work/matmul-$tag.log" 2>&1; echo "matmul $tag exit $?"
  mkdir -p "$out/matmul-$tag"
  cp "$work/matmul-$tag"/results.* "$work/matmul-$tag"/fusejit.log "$out/matmul-$tag/" 2>/dev/null
  cut -d'|' -f2,3,4,5,6,7,8,9 "$work/matmul-$tag/results.md" | head -20
done
for i in 1 2; do
  FUSEJIT_GEMM_ALIGN=always timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda \
    --seconds "$fuzz_s" --seed $((8500 + i)) --out "$work/fuzz/failures-align" --max-failures 3 \
    > "$work/fuzz/align-$i.log" 2>&1 &
done
tests_beside_fuzz "$work" "$fuzz_s" 6 8510 "$tests_s" "matmul or gemm or tf32 or cubin"
wait
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
grep -h "^fusejit fuzz" "$work"/fuzz/align-*.log | tee -a "$out/fuzz-summary.txt"
tar czf "$out/gpu-s7d.tgz" -C /tmp gpu-s7d
