#!/usr/bin/env bash
# Twenty-fourth session's GPU calls, in order of what matters:
#  0. bench/exp_s24_longk.py: the K loop's tiles of products of a few output tiles and a long K
#     (BLOCK_K, stages, chunk counts, warps) beside cuBLAS (about 3 min) -> exp_s24_longk.txt
#  1. bench/bench_matmul.py's sweep on the drawn GEMMs whose 128x256 (float16) and 256x128
#     (TF32) tiles spill registers in their epilogues (bench/spill_audit.py --unseen 1:24
#     --unseen 2:24): the default tiles against 128x128 and the others, beside cuBLAS
#     -> matmul-spill-{1,2}/ (about 3 min)
#  2. cuda correctness: every gpu-marked test, then 50 s of cuda fuzz with products, plain and
#     --large-plans (about 8 min) -> correctness.txt
#  3. bench/exp_s24_longk.py --compare: the new float16 K steps beside the old tiles on more
#     shapes of the family; float32 at 2 and 1 warps (about 1 min)
#  4. after the deep K steps' refinement and float32 sums of products: phase 3 again
#     (exp_s24_compare2.txt; float16 products of few outputs as sums too: unmeasured), then the GEMM gpu tests beside 70 s of cuda fuzz --products,
#     with and without --large-plans (the plans that record float32 products as sums from a
#     K of 64) -> correctness2.txt (about 5 min)
#   bash bench/gpu_s24.sh [PHASES]  (default 01)
set -uo pipefail
phases=${1:-01}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s24 || exit 1
if [[ $phases == *0* ]]; then
timeout 240 python3 bench/exp_s24_longk.py --budget 190 > "$out/exp_s24_longk.txt" 2>&1
echo "exp_s24_longk exit $?"; grep -v -i warn "$out/exp_s24_longk.txt"
fi
if [[ $phases == *1* ]]; then
for draw in "2:24 u2 |u6 |u14 |u22 |u23 " "1:24 u6 |u22 |u23 "; do
  seed=${draw%% *}; only=${draw#* }
  timeout 200 python3 bench/bench_matmul.py --out "$work/matmul-spill-${seed%%:*}" \
    --unseen "$seed" --only "$only" --impls fusejit,cupy --budget 110 \
    > "$work/matmul-spill-${seed%%:*}.log" 2>&1
  echo "matmul spill $seed exit $?"
  mkdir -p "$out/matmul-spill-${seed%%:*}"
  cp "$work/matmul-spill-${seed%%:*}"/results.* "$work/matmul-spill-${seed%%:*}"/fusejit.log \
    "$out/matmul-spill-${seed%%:*}/" 2>/dev/null
  python3 -c "import json, sys
for c, d in json.load(open(sys.argv[1]))['results'].items():
    print(c, {k: (v.get('tflops') and round(v['tflops'], 1), v.get('tiles')) for k, v in d.items()
              if isinstance(v, dict)})
    print('   sweep', [(s.get('tiles'), s.get('tflops') and round(s['tflops'], 1)) for s in d.get('sweep', [])])
" "$work/matmul-spill-${seed%%:*}/results.json"
done
fi
if [[ $phases == *3* ]]; then
timeout 150 python3 bench/exp_s24_longk.py --compare --budget 120 > "$out/exp_s24_compare.txt" 2>&1
echo "exp_s24_longk --compare exit $?"; grep -v -i warn "$out/exp_s24_compare.txt"
fi
if [[ $phases == *2* ]]; then
timeout 320 python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not every_input and not no_device_synchronization" > "$work/gpu-tests.log" 2>&1
echo "gpu tests exit $?"
for mode in "--products" "--products --large-plans"; do
  timeout 80 python3 -m fusejit fuzz --backend cuda --seconds 50 --seed 24001 $mode \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/f-${mode// /}.log" 2>&1 &
done
wait
{ grep -E "passed|failed" "$work/gpu-tests.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/f-*.log; } | tee "$out/correctness.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
fi
if [[ $phases == *4* ]]; then
timeout 150 python3 bench/exp_s24_longk.py --compare --budget 115 > "$out/exp_s24_compare2.txt" 2>&1
echo "exp_s24_longk --compare exit $?"; grep -v -i warn "$out/exp_s24_compare2.txt"
for mode in "--products" "--products --large-plans"; do
  timeout 100 python3 -m fusejit fuzz --backend cuda --seconds 70 --seed 24201 $mode \
    --out "$work/fuzz/failures2" --max-failures 3 > "$work/fuzz/g-${mode// /}.log" 2>&1 &
done
timeout 150 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  > "$work/gpu-matmul.log" 2>&1
wait
{ grep -E "passed|failed" "$work/gpu-matmul.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-matmul.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/g-*.log; } | tee "$out/correctness2.txt"
[ -d "$work/fuzz/failures2" ] && cp -r "$work/fuzz/failures2" "$out/"
fi
exit 0
