#!/usr/bin/env bash
# Twenty-ninth session's GPU calls (no machine was lent this session: none ran; each phase was
# checked on the CPU as far as it can be: exp_s29_epilogue.py --dry, ncu_gemm's cases planned):
#  e. bench/exp_s29_epilogue.py: GEMM epilogues whole, in 2 and 4 slices of the tile's columns,
#     and the default (the cuda backend slices a GEMM that spills: 7 of the unseen draws'
#     kernels spilled 44-564 bytes a thread in ptxas -v, none so), beside cuBLAS's bare product;
#     the slices' cost where nothing spills (8192^3 and 16384x1024x4096 with bias and ReLU)
#     (about 3 min) -> exp_s29_epilogue.txt. A default that does not pay is taken out.
#  m. bench_matmul.py --unseen on the draws whose kernels spilled (20261209, 20261301) beside
#     torch.compile and jax.jit: the short-K batched residual ran 0.69x (about 8 min)
#     -> matmul-u20261209/, matmul-u20261301/
#  c. the GEMM gpu tests and the row-window tests beside 80 s of cuda fuzz (three processes:
#     products, large plans): the bias loaded under the columns' mask, the epilogue slices and
#     the argmin fix ran on the interpreter only (about 3 min) -> correctness.txt
#  w, n, g: bench/gpu_s28.sh's phases (the H200's wide rows, waiting or bytes in flight; their
#     Nsight Compute profile; Nsight Compute on full-precision float32 GEMMs aligned and not,
#     now with the B-misaligned and edge-M cases, memory tables and source counters)
#   the next session's first call (about 6 min on any card; w and n need an H200):
#     bash bench/gpu_s29.sh ec
#   then: bash bench/gpu_s29.sh g (any card); bash bench/gpu_s29.sh wn on an H200; m.
#   bash bench/gpu_s29.sh [PHASES]  (default ec)
set -uo pipefail
phases=${1:-ec}
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/gpu_common.sh"; gpu_begin /tmp/s29 || exit 1
if [[ $phases == *e* ]]; then
timeout 280 python3 bench/exp_s29_epilogue.py --budget ${EPI_BUDGET:-220} \
  > "$out/exp_s29_epilogue.txt" 2>&1
echo "exp_s29_epilogue exit $?"; grep -v -i warn "$out/exp_s29_epilogue.txt"
fi
if [[ $phases == *m* ]]; then
for seed in 20261209 20261301; do
  unseen_matmul "$out" "$work" "u$seed" "$seed:16" fusejit,torch,jax "${MATMUL_BUDGET:-200}"
done
fi
if [[ $phases == *c* ]]; then
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  tests/test_row_window.py > "$work/gpu-tests.log" 2>&1 &
mode_fuzz "$work" "${FUZZ_S:-80}" 29010 "--products" "--products --large-plans" "--large-plans"
wait
fuzz_summary "$work" | tee "$out/correctness.txt"
if [ -d "$work/fuzz/failures" ]; then cp -r "$work/fuzz/failures" "$out/"; fi
fi
rest=$(echo "$phases" | tr -cd 'wng')
if [ -n "$rest" ]; then
  bash "$here/gpu_s28.sh" "$rest"  # (writes under the same OUT)
fi
exit 0
