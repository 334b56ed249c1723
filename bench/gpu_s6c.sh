#!/usr/bin/env bash
# Sixth session's third GPU call (2026-12-02): pointwise chains over a strided view (draw d's
# u20 at 0.69x of torch.compile: bench/exp_s6.py --set chains), the host cost per call, then the
# gpu-marked tests (but the exhaustive float32 exp test) beside the cuda fuzz on the short-run
# rules as committed. Every result is under $OUT before the next step starts.
#   bash bench/gpu_s6c.sh [FUZZ_SECONDS] [FUZZ_PROCS] [EXP_SECONDS]
set -uo pipefail
fuzz_s=${1:-80}; procs=${2:-10}; exp_s=${3:-120}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6c; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout "$exp_s" python3 bench/exp_s6.py --set chains > "$out/exp_s6_chains.txt" 2>&1
echo "exp_s6 chains exit $?"; cut -c1-160 "$out/exp_s6_chains.txt" | head -50
timeout 40 python3 bench/host_cost.py --backend cuda > "$out/host_cost.txt" 2>&1
echo "host cost:"; tail -12 "$out/host_cost.txt"
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8300 $((fuzz_s + 70))
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s6c.tgz" -C /tmp gpu-s6c
