#!/usr/bin/env bash
# Sixth session's first GPU call (2026-12-02): outer reductions over a short inner kept run
# (bench/exp_s6.py: the old tiling, the new, the split decision turned around, a grid); the
# suite's reduce-short-run family and sum over axes (0, 2) at every size beside torch.compile and
# jax.jit; the gpu-marked tests (but the exhaustive float32 exp test) beside the cuda fuzz.
# Every result is under $OUT before the next step starts.
#   bash bench/gpu_s6.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [EXP_SECONDS]
set -uo pipefail
fuzz_s=${1:-80}; procs=${2:-10}; suite_s=${3:-100}; exp_s=${4:-200}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$exp_s" python3 bench/exp_s6.py > "$out/exp_s6.txt" 2>&1; echo "exp_s6 exit $?"
grep -E "^==|default|rule off|forced|grid" "$out/exp_s6.txt" | head -90
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/suite" --only "short-run|sum_axes02" \
  --budget "$suite_s" --impls fusejit,jax,torch > "$work/suite.log" 2>&1; echo "suite exit $?"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
grep -A12 "^| workload" "$work/suite/results.md" | cut -d'|' -f2,3,4,8,9,10,12,13 | head -14
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8200 $((fuzz_s + 70))
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s6.tgz" -C /tmp gpu-s6
