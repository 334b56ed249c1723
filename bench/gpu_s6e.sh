#!/usr/bin/env bash
# Sixth session's closing GPU call (2026-12-02): the host cost per call (bench/host_cost.py,
# and bench/host_templates.py: the composites with and without their templates, interleaved),
# the realize path of the suite's row workloads (fusejit alone), then the gpu-marked tests
# beside the cuda fuzz on the final code. Every result is under $OUT before the next step.
#   bash bench/gpu_s6e.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET]
set -uo pipefail
fuzz_s=${1:-60}; procs=${2:-10}; suite_s=${3:-50}
out=${OUT:-gpu-out}; work=/tmp/gpu-s6e; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
timeout 40 python3 bench/host_cost.py --backend cuda > "$out/host_cost.txt" 2>&1
echo "host cost:"; tail -12 "$out/host_cost.txt"
timeout 60 python3 bench/host_templates.py --backend cuda > "$out/host_templates.txt" 2>&1
echo "templates:"; cat "$out/host_templates.txt"
timeout $((suite_s + 40)) python3 bench/suite.py --out "$work/suite" --quick \
  --only "softmax|layer_norm|logsumexp|var_rows|short-run" --budget "$suite_s" --impls fusejit \
  > "$work/suite.log" 2>&1; echo "suite exit $?"
mkdir -p "$out/suite"; cp "$work"/suite/results.* "$out/suite/" 2>/dev/null
grep -A12 "^| workload" "$work/suite/results.md" | cut -d'|' -f2,4,7,8,9 | head -12
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8500 $((fuzz_s + 75))
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s6e.tgz" -C /tmp gpu-s6e
