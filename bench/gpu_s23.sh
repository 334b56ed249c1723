#!/usr/bin/env bash
# Twenty-third session: the twenty-second's gpu_s22.sh (renamed: it never ran, no machine
# started) plus the twenty-third's split-K of few-tile products, in order of what matters:
#  0. bench/exp_s23_gram.py: products of a few tiles and a long K, at 16 chunks (before) and
#     one per SM (now), beside cuBLAS (about 1 min);
#     bench/exp_s22_host.py: where the realize of sin-heavy loses 9% to its kernel (about 30 s);
#     bench/exp_s22_order.py: two-launch plans re-reading their input, with the pointwise
#     launch in order and last block first (FUSEJIT_REVERSE_REREADS 0 / 1; about 2 min)
#  1. (H200 only) bench/exp_s20_wide.py --quick at 256x2**18, 1024x2**16, 256x150,001: is the
#     H200's wide softmax / layer norm (79% / 72% of copy) waiting (no-wait bound well above
#     the emitted kernel) or bytes in flight (bound near it)? -> exp_s20_wide.txt
#  2. bench/autotune_check.py over the split reductions (four known, five unseen shapes): the
#     tuner's time of every split candidate, the heuristic's count beside "chunks of whole
#     tiles", 2x / half the partials -> autotune/autotune_check.json, autotune.txt
#  3. (H200 only) the suite's wide softmax and layer norm with COOP_PIPELINE off and on.
#  4. cuda correctness after this session's two fuser rules: every gpu-marked test beside
#     the cuda fuzz (plain, fj.jit, and --large-plans: the plans of large arrays drawn small)
#     -> correctness.txt (run before phase 1); 5: its short form (the split reductions' and
#     canonical gpu tests beside 40 s of --large-plans cuda fuzz, about 100 s).
#   bash bench/gpu_s23.sh [PHASES] [FUZZ_S]  (default 041, about 9 min; on an H100 phases 1
#   and 3 are left out)
set -uo pipefail
phases=${1:-041}; fuzz_s=${2:-60}
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_begin /tmp/s23 || exit 1
grep -q H200 "$out/card.txt" || { echo "not an H200: phases 1 and 3 left out"; phases=${phases//[13]/}; }
if [[ $phases == *0* ]]; then
timeout 120 python3 bench/exp_s23_gram.py > "$out/exp_s23_gram.txt" 2>&1
echo "exp_s23_gram exit $?"; grep -v -i warn "$out/exp_s23_gram.txt" | tail -16
timeout 90 python3 bench/exp_s22_host.py > "$out/exp_s22_host.txt" 2>&1
echo "exp_s22_host exit $?"; head -40 "$out/exp_s22_host.txt"
timeout 150 python3 bench/exp_s22_order.py > "$out/exp_s22_order.txt" 2>&1
echo "exp_s22_order exit $?"; grep -v -i warn "$out/exp_s22_order.txt" | tail -24
fi
if [[ $phases == *5* ]]; then  # (a short phase 4: the split reductions' gpu tests, large plans)
timeout 70 python3 -m fusejit fuzz --backend cuda --seconds 40 --seed 22201 --large-plans \
  --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/large-short.log" 2>&1 &
timeout 100 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu.py \
  -k "split_reductions or canonical or long_rows" > "$work/gpu-short.log" 2>&1
wait
{ tail -n 3 "$work/gpu-short.log"; grep -E "^FAILED" "$work/gpu-short.log" | head
  grep -h "^fusejit fuzz" "$work/fuzz/large-short.log"; } | tee "$out/correctness.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
fi
if [[ $phases == *4* ]]; then
for i in 1 2; do  # planned as large arrays are (split reductions, reversed launches: --large-plans)
  timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" \
    --seed $((22100 + i)) --large-plans $([ $i = 2 ] && echo --jit) --out "$work/fuzz/failures" \
    --max-failures 3 > "$work/fuzz/large-$i.log" 2>&1 &
done
tests_beside_fuzz "$work" "$fuzz_s" 4 22000 $((fuzz_s + 140))  # (waits for the two above too)
{ fuzz_summary "$work"; grep -h "^fusejit fuzz" "$work"/fuzz/large-*.log; } | tee "$out/correctness.txt"
[ -d "$work/fuzz/failures" ] && cp -r "$work/fuzz/failures" "$out/"
fi
if [[ $phases == *1* ]]; then
timeout 170 python3 bench/exp_s20_wide.py --quick --shapes 256x262144,1024x65536,256x150001 \
  > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"; grep -v Warning "$out/exp_s20_wide.txt" | grep -v warn_once | tail -40
fi
if [[ $phases == *2* ]]; then
split=sum_axes02_64x4096x256,std_cols_65536x1024,colsum_65536x1024,sum_mid_96x3000x640
split+=,mean_cols_150000x768,max_axes02_48x2000x1000,var_cols_300000x200,sum_cols_f16_131072x512
timeout 260 python3 bench/autotune_check.py "$out/autotune" --only "$split" --budget 200 \
  > "$out/autotune.txt" 2>&1
echo "autotune_check exit $?"; grep -v "^\[" "$out/autotune.txt" | tail -60
fi
[[ $phases == *3* ]] || exit 0
wide_pipeline_suite "$out" "$work"
