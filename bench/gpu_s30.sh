#!/usr/bin/env bash
# Thirtieth session's GPU calls:
#  c. the GEMM gpu tests, the row-window tests and the regression tests on cuda (today's: a row
#     reduction of a product of no columns is its own kernel) beside 80 s of cuda fuzz (three
#     processes: products, large plans) over s29's emitter changes, which have run on the
#     interpreter and compiled only (about 3 min) -> correctness.txt
#  r. bench/exp_s30_maxnreg.py: full-precision float32 GEMMs with registers capped at 96 a
#     thread (5 programs an SM) against uncapped, twice (about 2.5 min) -> exp_s30_maxnreg.txt
#  p. bench/exp_s26_fma.py's clamp, peel and peel+clamp variants beside the default and the
#     padded operands (the twenty-eighth session's timing of them was void; they are back in
#     gemm.py, off) (about 4 min) -> exp_s26_peel.txt
#  k. bench/gpu_s28.sh's k: the spread combine (void too before retiled_run's fix)
#  e, m, w, n, g: bench/gpu_s29.sh's phases (e: the GEMM epilogue slices timed against the
#     whole epilogue and cuBLAS; m: the unseen draws whose GEMMs spilled beside torch.compile
#     and jax.jit; w, n: the H200's wide rows; g: Nsight Compute on float32 GEMMs)
#   ran this session (H100): ce, g (through gpu_s29.sh), r. Next: bash bench/gpu_s30.sh p
#   (about 4 min, any card), then wn on an H200, then m
#   bash bench/gpu_s30.sh [PHASES]  (default ce)
set -uo pipefail
phases=${1:-ce}
here=$(dirname "${BASH_SOURCE[0]}")
. "$here/gpu_common.sh"; gpu_begin /tmp/s30 || exit 1
if [[ $phases == *c* ]]; then
{ timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
    tests/test_row_window.py
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_regressions.py -k cuda
} > "$work/gpu-tests.log" 2>&1 &
mode_fuzz "$work" "${FUZZ_S:-80}" 30010 "--products" "--products --large-plans" "--large-plans"
wait
fuzz_summary "$work" | tee "$out/correctness.txt"
cp "$work/gpu-tests.log" "$out/" 2>/dev/null
if [ -d "$work/fuzz/failures" ]; then cp -r "$work/fuzz/failures" "$out/"; fi
fi
if [[ $phases == *r* ]]; then
timeout 200 python3 bench/exp_s30_maxnreg.py --budget ${CAP_BUDGET:-150} \
  > "$out/exp_s30_maxnreg.txt" 2>&1
echo "exp_s30_maxnreg exit $?"; grep -v -i warn "$out/exp_s30_maxnreg.txt"
fi
if [[ $phases == *p* ]]; then  # (gpu_s28.sh's p, with the clamp and peel variants)
  PEEL_ONLY=${PEEL_ONLY:-"^both 2047|^both 767|^both 1279|^A |^B |^edge|f64 both"} \
    PEEL_VARIANTS='^(default|clamp|peel|peel\+clamp|pad|pad peel|pad p\+c)$' \
    bash "$here/gpu_s28.sh" p
fi
if [[ $phases == *k* ]]; then
  bash "$here/gpu_s28.sh" k  # (the spread combine, now timed for what it is)
fi
rest=$(echo "$phases" | tr -cd 'emwng')
if [ -n "$rest" ]; then
  bash "$here/gpu_s29.sh" "$rest"  # (writes under the same OUT)
fi
exit 0
