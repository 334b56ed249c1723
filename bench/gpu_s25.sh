#!/usr/bin/env bash
# Twenty-fifth session's GPU calls:
#  0. bench/exp_s25_occupancy.py: products of a few output tiles and a long K split to 1-8
#     programs an SM (float32 FMA dots and float16), beside cuBLAS (about 4 min)
#     -> exp_s25_occupancy.txt
#  1. bench/exp_s24_longk.py --compare (the twenty-fourth session's final K steps and float32
#     sums of products, unmeasured there; about 2 min) -> exp_s24_compare2.txt
#  3. bench/exp_s25_check.py: the new defaults (whole chunks, float32 few tiles on four
#     2-warp programs an SM, the combine's tiles) against the twenty-fourth session's, B
#     K-major and row-major, timed as CUDA graphs (about 4 min) -> exp_s25_check.txt
#  2. cuda correctness: every gpu-marked test beside cuda fuzz (products, plain and
#     --large-plans; plain and --jit), about 6 min -> correctness.txt
#  5. the GEMM gpu tests beside 90 s of cuda fuzz (products, large plans), about 3 min
#     -> correctness5.txt
#  6. bench/exp_s25_check.py --large: large full-precision float32 products on 2 warps, 4
#     stages, 64x128 / 128x64 tiles against the default (about 3 min) -> exp_s25_large.txt
#  7. bench/exp_s7b.py on the products the alignment model's 2-byte rate (0.15) now copies,
#     copies off and on, kernel by kernel (about 2 min) -> exp_s7b_flips.txt
#   the next session's first call (checks the emission-time float32 rules, B K-major on 2 warps
#   and one row-major tile on one 4-warp program an SM, and the alignment flips, about 9 min):
#     CHECK_BUDGET=150 LARGE_ONLY=K-major LARGE_BUDGET=80 bash bench/gpu_s25.sh 3567
#   bash bench/gpu_s25.sh [PHASES]  (default 01)
set -uo pipefail
phases=${1:-01}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s25 || exit 1
if [[ $phases == *0* ]]; then
timeout 280 python3 bench/exp_s25_occupancy.py --budget ${OCC_BUDGET:-230} \
  > "$out/exp_s25_occupancy.txt" 2>&1
echo "exp_s25_occupancy exit $?"; grep -v -i warn "$out/exp_s25_occupancy.txt"
fi
if [[ $phases == *1* ]]; then
timeout 150 python3 bench/exp_s24_longk.py --compare --budget 110 > "$out/exp_s24_compare2.txt" 2>&1
echo "exp_s24_longk --compare exit $?"; grep -v -i warn "$out/exp_s24_compare2.txt"
fi
if [[ $phases == *3* ]]; then
timeout 260 python3 bench/exp_s25_check.py --budget ${CHECK_BUDGET:-200} \
  > "$out/exp_s25_check.txt" 2>&1
echo "exp_s25_check exit $?"; grep -v -i warn "$out/exp_s25_check.txt"
fi
if [[ $phases == *2* ]]; then
timeout 290 python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not every_input and not no_device_synchronization" > "$work/gpu-tests.log" 2>&1 &
i=0
for mode in "--products" "--products --large-plans" "--large-plans" "--jit"; do
  i=$((i + 1))
  timeout 140 python3 -m fusejit fuzz --backend cuda --seconds 100 --seed $((25000 + i)) $mode \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/f-$i.log" 2>&1 &
done
wait
{ grep -E "passed|failed" "$work/gpu-tests.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/f-*.log; } | tee "$out/correctness.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
fi
if [[ $phases == *5* ]]; then  # the lighter check: the GEMM gpu tests beside 90 s of cuda fuzz
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  > "$work/gpu-matmul.log" 2>&1 &
i=0
for mode in "--products" "--products --large-plans" "--large-plans"; do
  i=$((i + 1))
  timeout 130 python3 -m fusejit fuzz --backend cuda --seconds 90 --seed $((25010 + i)) $mode \
    --out "$work/fuzz/failures5" --max-failures 3 > "$work/fuzz/h-$i.log" 2>&1 &
done
wait
{ grep -E "passed|failed" "$work/gpu-matmul.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-matmul.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/h-*.log; } | tee "$out/correctness5.txt"
cp "$work/gpu-matmul.log" "$out/" 2>/dev/null
[ -d "$work/fuzz/failures5" ] && cp -r "$work/fuzz/failures5" "$out/"
fi
if [[ $phases == *6* ]]; then
timeout 200 python3 bench/exp_s25_check.py --large --budget ${LARGE_BUDGET:-150} --only "${LARGE_ONLY:-}" \
  > "$out/exp_s25_large.txt" 2>&1
echo "exp_s25_check --large exit $?"; grep -v -i warn "$out/exp_s25_large.txt"
fi
if [[ $phases == *7* ]]; then  # the alignment model's 2-byte rate: the products it now copies
timeout 200 python3 bench/exp_s7b.py --only "old u13|new u13|d10 u12|d12 u19|new u12" \
  > "$out/exp_s7b_flips.txt" 2>&1
echo "exp_s7b exit $?"; grep -v -i warn "$out/exp_s7b_flips.txt"
fi
exit 0
