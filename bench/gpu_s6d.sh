#!/usr/bin/env bash
# Sixth session's fourth GPU call (2026-12-02): 1-D pointwise blocks of 512 where the flat size
# breaks vector loads (bench/exp_s6.py --set chains --no-2d: the new default against the grid),
# draw d's pointwise chains again beside torch.compile and jax.jit, then the gpu-marked tests
# beside the cuda fuzz on that code.
#   bash bench/gpu_s6d.sh [FUZZ_SECONDS] [FUZZ_PROCS] [EXP_SECONDS] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-80}; procs=${2:-10}; exp_s=${3:-120}; suite_s=${4:-60}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6d; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$exp_s" python3 bench/exp_s6.py --set chains --no-2d > "$out/exp_s6_chains.txt" 2>&1
echo "exp_s6 chains exit $?"; cut -c1-160 "$out/exp_s6_chains.txt" | grep -E "^==|default" | head -30
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/unseen" --unseen 20261206:24 \
  --only chain --budget "$suite_s" --impls fusejit,jax,torch > "$work/unseen.log" 2>&1
echo "unseen chains exit $?"; mkdir -p "$out/unseen"; cp "$work"/unseen/results.* "$out/unseen/" 2>/dev/null
grep -A10 "^| workload" "$work/unseen/results.md" | cut -d'|' -f2,4,7,8,10,12,13 | head -10
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8400 $((fuzz_s + 70))
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s6d.tgz" -C /tmp gpu-s6d
