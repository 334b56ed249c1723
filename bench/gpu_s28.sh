#!/usr/bin/env bash
# Twenty-eighth session's GPU calls (an H200 is the default kind this session):
#  w. bench/exp_s20_wide.py on 256x2**18 (and --quick on 1024x2**16): the cooperative wide rows as
#     emitted, with their wait removed (the bound of what waiting costs), and the pipelined
#     forms; on the H100 (s21) waiting cost nothing. Does it on the H200, where the emitted
#     softmax and layer norm run at 79% and 72% of the copy rate? (about 2 min)
#     -> exp_s20_wide.txt
#  n. Nsight Compute on the same kernels beside a copy of the same bytes (bench/ncu_wide.py):
#     DRAM throughput, occupancy, registers, warp stalls (about 1 min) -> ncu_wide.txt
#  p. bench/exp_s26_fma.py: at commit f1bb72a, the split-K loop peeled (FUSEJIT_GEMM_PEEL_SPLIT=1)
#     and clamped edge loads (FUSEJIT_GEMM_CLAMP_EDGES=1), alone and together, against the
#     default, the padded operands with and without the peel (about 4 min) -> exp_s26_peel.txt.
#     Both settings were taken out after it (no case moved by 0.5%); now the default and pads.
#  g. Nsight Compute on full-precision float32 GEMMs, aligned, misaligned and padded
#     (bench/ncu_gemm.py): instruction mix, stalls, occupancy (about 1 min) -> ncu_gemm.txt
#  k. bench/exp_s25_check.py on few-tile long-K products: the split-K combine spread over more
#     programs (``spread``) against the default's 256 outputs a program (16x16 tiles ran
#     faster with the scalar loop in s27, one combine program) (about 2.5 min) -> exp_s25_check.txt
#  s. the --quick suite beside torch.compile and jax.jit (about 6 min) -> suite/
#  c. the GEMM gpu tests beside 80 s of cuda fuzz (three processes: products, large plans)
#     -> correctness.txt (call 1 ran it with the peel and clamps on, at f1bb72a)
#   the next session's first call, on an H200 (none came this session; about 3 min):
#     bash bench/gpu_s28.sh wng
#     (w: is the H200's 79% / 72% waiting or bytes in flight? n: the same kernels under
#     Nsight Compute beside the H100's profile in bench/results/h100-s28/call2; g: why
#     misaligned full-precision float32 GEMMs run 0.75x of cuBLAS, on any card)
#   bash bench/gpu_s28.sh [PHASES]  (default w)
set -uo pipefail
phases=${1:-w}
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/gpu_common.sh"; gpu_begin /tmp/s28 || exit 1
if [[ $phases == *w* ]]; then
timeout 200 python3 bench/exp_s20_wide.py --shapes 256x262144 > "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide exit $?"
timeout 120 python3 bench/exp_s20_wide.py --quick --shapes 1024x65536 >> "$out/exp_s20_wide.txt" 2>&1
echo "exp_s20_wide --quick exit $?"; grep -v -i warn "$out/exp_s20_wide.txt"
fi
if [[ $phases == *n* ]]; then
timeout 150 ncu --clock-control none --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  --section SchedulerStats -k "regex:softmax|layer_norm|copy" -c 6 \
  python3 bench/ncu_wide.py --reps 1 > "$out/ncu_wide.txt" 2>&1
echo "ncu exit $?"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|No Eligible|Active Warps" "$out/ncu_wide.txt" | head -120
fi
if [[ $phases == *g* ]]; then
timeout 200 ncu --clock-control none --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section InstructionStats \
  --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
  --section SchedulerStats --section SourceCounters -k "regex:partials" -c 6 \
  python3 bench/ncu_gemm.py > "$out/ncu_gemm.txt" 2>&1
echo "ncu exit $?"; grep -E "^  [a-z_]+.*\(|: [0-9]+x|Duration|Compute \(SM\) Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Block Limit (Reg|Shared)|Warp Cycles Per Issued|Executed Ipc A|Issue Slots Busy|No Eligible|Executed Instructions  |L1/TEX Cache Throughput|L2 Cache Throughput|Bank Conflicts" "$out/ncu_gemm.txt" | head -160
fi
if [[ $phases == *k* ]]; then
timeout 200 python3 bench/exp_s25_check.py --budget ${CHECK_BUDGET:-130} \
  --only "${CHECK_ONLY:-16x16|gram 64x64|2x64|128x128|5x5|1x16|224x241}" > "$out/exp_s25_check.txt" 2>&1
echo "exp_s25_check exit $?"; grep -v -i warn "$out/exp_s25_check.txt"
fi
if [[ $phases == *p* ]]; then
timeout 280 python3 bench/exp_s26_fma.py --budget ${PEEL_BUDGET:-220} \
  --only "${PEEL_ONLY:-^both 2047|^both 767|^A |^B |^edge|f64 both}" \
  --variants "${PEEL_VARIANTS:-^(default|pad)$}" > "$out/exp_s26_peel.txt" 2>&1
echo "exp_s26_fma (peel) exit $?"; grep -v -i warn "$out/exp_s26_peel.txt"
fi
if [[ $phases == *s* ]]; then
suite_family "$out" "$work" suite "${SUITE_BUDGET:-300}" --quick
fi
if [[ $phases == *c* ]]; then
timeout 200 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  > "$work/gpu-matmul.log" 2>&1 &
i=0
for mode in "--products" "--products --large-plans" "--large-plans"; do
  i=$((i + 1))
  timeout 120 python3 -m fusejit fuzz --backend cuda --seconds ${FUZZ_S:-80} --seed $((28010 + i)) \
    $mode --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/c-$i.log" 2>&1 &
done
wait
{ grep -E "passed|failed" "$work/gpu-matmul.log" | tail -2
  grep -E "^FAILED|^ERROR" "$work/gpu-matmul.log" | head -20
  grep -h "^fusejit fuzz" "$work"/fuzz/c-*.log; } | tee "$out/correctness.txt"
if [ -d "$work/fuzz/failures" ]; then cp -r "$work/fuzz/failures" "$out/"; fi
fi
exit 0
