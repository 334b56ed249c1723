#!/usr/bin/env bash
# The GPU session of a change, in the least device time: the gpu-marked tests
# beside the parallel cuda fuzz (they share the machine: 1 + PROCS processes on 16 cores),
# then the benchmark suite alone (--quick), the GEMM benchmark (--quick), the host cost of
# realize and fj.jit, the per-call comparison with the peers (dispatch.py), where a large
# realize's host time goes (diag_host.py) and the one-read wide-row softmax experiment
# (exp_wide_softmax.py). Logs are packed into $OUT/gpu-last.tgz;
# the suite's table, plot and JSON are also copied to $OUT.
#   bash bench/gpu_last.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [MATMUL_BUDGET]
# JIT_PROCS (default 3) of the fuzz processes run with --jit; beside them, bench/fuzz_rows.py
# checks wide-row programs (64K-600K) with the looped and with the cooperative row kernels
# (two more processes: the generic fuzz's rows are too narrow to reach the cooperative ones).
# PART=tests or PART=bench runs one half (each fits a 10-minute device call with room to spare).
set -uo pipefail
part=${PART:-all}; jit_procs=${JIT_PROCS:-3}
fuzz_s=${1:-120}; procs=${2:-13}; suite_s=${3:-160}; mm_s=${4:-90}
out=${OUT:-gpu-out}; work=/tmp/gpu-last; mkdir -p "$out" "$work/fuzz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,driver_version --format=csv > "$work/gpu.txt" 2>&1
if [ "$part" != bench ]; then
# (the timing test of "no device synchronization" runs alone afterwards: the fuzz's processes
# would slow the host loop it times)
timeout $((fuzz_s + 120)) python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not no_device_synchronization" > "$work/gpu-tests.log" 2>&1 &
for i in $(seq 1 "$procs"); do
  mode=""  # the last JIT_PROCS processes run every program through fj.jit
  [ "$i" -gt $((procs - jit_procs)) ] && mode="--jit"
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed $((2000 + i)) \
    $mode --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
for coop in 0 1; do
  timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" \
    --seed $((3000 + coop)) --cooperative $coop > "$work/fuzz/rows-$coop.log" 2>&1 &
done
wait
tail -n 3 "$work"/fuzz/rows-*.log
timeout 120 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_jit.py -k "no_device_synchronization" \
  >> "$work/gpu-tests.log" 2>&1
grep -E "passed|failed" "$work/gpu-tests.log" | tail -3; grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log > "$work/fuzz/summary.txt"
python3 - "$work/fuzz/summary.txt" <<'PY'
import re, sys
counts = {}
for line in open(sys.argv[1]):
    mode = "fj.jit" if "--jit" in line else "realize"
    total, fails, excused = counts.get(mode, (0, 0, 0))
    m = re.search(r"(\d+) programs.*mismatch (\d+), error (\d+), crash (\d+)", line)
    if m:
        total += int(m[1]); fails += int(m[2]) + int(m[3]) + int(m[4])
    e = re.search(r"(\d+) rounding-sensitive", line)
    excused += int(e[1]) if e else 0
    counts[mode] = (total, fails, excused)
for mode, (total, fails, excused) in counts.items():
    print(f"cuda fuzz total ({mode}): {total} programs, {fails} failures, "
          f"{excused} rounding-sensitive excused")
PY
ls "$work/fuzz/failures" 2>/dev/null | head
fi
if [ "$part" != tests ]; then
timeout $((suite_s + 90)) python3 bench/suite.py --out "$work/suite" --quick --budget "$suite_s" \
  > "$work/suite.log" 2>&1; echo "suite exit $?"; grep -A8 "^## Summary" "$work/suite/results.md"
timeout $((mm_s + 60)) python3 bench/bench_matmul.py --out "$work/matmul" --quick --budget "$mm_s" \
  > "$work/matmul.log" 2>&1; echo "matmul exit $?"; head -14 "$work/matmul/results.md"
timeout 60 python3 bench/host_cost.py --backend cuda > "$work/host_cost.log" 2>&1; tail -12 "$work/host_cost.log"
timeout 120 python3 bench/dispatch.py --json "$work/dispatch.json" > "$work/dispatch.log" 2>&1; tail -9 "$work/dispatch.log"
timeout 60 python3 bench/diag_host.py > "$work/diag_host.log" 2>&1; cat "$work/diag_host.log"
timeout 150 python3 bench/exp_wide_softmax.py > "$work/wide_softmax.log" 2>&1; cat "$work/wide_softmax.log"
fi
cp "$work"/suite/results.md "$work"/suite/results.png "$work"/suite/results.json "$out"/ 2>/dev/null
tar czf "$out/gpu-last-$part.tgz" -C /tmp gpu-last
