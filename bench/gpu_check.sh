#!/usr/bin/env bash
# One GPU session of checks on the H200 machine: the gpu-marked tests, the fuzzer on `cuda` in
# parallel processes (Triton compiles are the bottleneck, one per CPU core), and optionally the
# GEMM benchmark. Logs go to a work folder that is packed into $OUT/gpu-check.tgz at the end.
#   bash bench/gpu_check.sh [TEST_SECONDS] [FUZZ_SECONDS] [FUZZ_PROCS] [MATMUL_BUDGET|0]
set -uo pipefail
test_s=${1:-180}; fuzz_s=${2:-140}; procs=${3:-14}; mm_budget=${4:-0}
out=${OUT:-gpu-out}; work=/tmp/gpu-check; mkdir -p "$out" "$work/fuzz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$work/gpu.txt" 2>&1
timeout "$test_s" python3 -m pytest -m gpu -q -p no:cacheprovider tests > "$work/gpu-tests.log" 2>&1
echo "gpu tests exit $?"; grep -E "passed|failed" "$work/gpu-tests.log" | tail -3
grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -30
for i in $(seq 1 "$procs"); do
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed $((1000 + i)) \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | tee "$work/fuzz/summary.txt"
python3 - "$work/fuzz/summary.txt" <<'PY'
import re, sys
total = fails = 0
for line in open(sys.argv[1]):
    m = re.search(r"(\d+) programs.*mismatch (\d+), error (\d+), crash (\d+)", line)
    if m:
        total += int(m[1]); fails += int(m[2]) + int(m[3]) + int(m[4])
print(f"cuda fuzz total: {total} programs, {fails} failures")
PY
ls "$work/fuzz/failures" 2>/dev/null | head
if [ "$mm_budget" != 0 ]; then
  timeout $((mm_budget + 60)) python3 bench/bench_matmul.py --out "$work/matmul" --quick --budget "$mm_budget" \
    > "$work/matmul.log" 2>&1; echo "matmul bench exit $?"; tail -25 "$work/matmul.log"
fi
tar czf "$out/gpu-check.tgz" -C /tmp gpu-check
