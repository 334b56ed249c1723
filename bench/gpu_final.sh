#!/usr/bin/env bash
# The last GPU session of a change: gpu tests and the parallel cuda fuzz (bench/gpu_check.sh),
# the benchmark suite (quick) and the host cost of realize and fj.jit. Everything is packed
# into $OUT/gpu-check.tgz; the suite's table and plot are also copied to $OUT.
#   bash bench/gpu_final.sh [TEST_SECONDS] [FUZZ_SECONDS] [SUITE_BUDGET]
set -uo pipefail
test_s=${1:-160}; fuzz_s=${2:-110}; suite_s=${3:-170}
out=${OUT:-gpu-out}
OUT=/tmp/gpu-check-pack bash bench/gpu_check.sh "$test_s" "$fuzz_s" 14 0
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
timeout $((suite_s + 90)) python3 bench/suite.py --out /tmp/gpu-check/suite --quick --budget "$suite_s" \
  > /tmp/gpu-check/suite.log 2>&1; echo "suite exit $?"; tail -45 /tmp/gpu-check/suite.log
timeout 60 python3 bench/host_cost.py --backend cuda > /tmp/gpu-check/host_cost.log 2>&1
echo "host cost exit $?"; tail -20 /tmp/gpu-check/host_cost.log
cp /tmp/gpu-check/suite/results.md /tmp/gpu-check/suite/results.png /tmp/gpu-check/suite/results.json \
  "$out"/ 2>/dev/null
tar czf "$out/gpu-check.tgz" -C /tmp gpu-check
