#!/usr/bin/env bash
# The closing GPU call of a session with little device time left (2026-12-02): the
# gpu-marked tests beside the cuda fuzz (JIT_PROCS of its processes through fj.jit), the
# no-synchronization timing test alone, then alone: the suite (--quick), the GEMM benchmark
# (--quick), the host cost per call (two rounds, this code and the code under .old in turn)
# and fj.jit against cupy.fuse in turn (dispatch.py --paired-only). Each phase is bounded by
# `timeout`; logs packed into $OUT/gpu-final.tgz, the suite's and the GEMM benchmark's tables
# and JSON copied to $OUT.
#   bash bench/gpu_final.sh [FUZZ_SECONDS] [FUZZ_PROCS] [SUITE_BUDGET] [MATMUL_BUDGET]
# (MATMUL_BUDGET 0: no GEMM benchmark; ROWS_PROCS of the fuzz processes run the wide-row fuzz,
# bench/fuzz_rows.py; SUITE_IMPLS: the suite's --impls, default all)
set -uo pipefail
fuzz_s=${1:-120}; procs=${2:-11}; suite_s=${3:-120}; mm_s=${4:-80}; jit_procs=${JIT_PROCS:-3}
rows_procs=${ROWS_PROCS:-0}; suite_impls=${SUITE_IMPLS:-fusejit,cupy,cupy.fuse,jax,torch}
out=${OUT:-gpu-out}; work=/tmp/gpu-final; mkdir -p "$out" "$work/fuzz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$work/gpu.txt" 2>&1
timeout $((fuzz_s + 230)) python3 -m pytest -m gpu -q -p no:cacheprovider tests \
  -k "not no_device_synchronization" > "$work/gpu-tests.log" 2>&1 &
for i in $(seq 1 "$rows_procs"); do
  timeout $((fuzz_s + 60)) python3 bench/fuzz_rows.py --backend cuda --seconds "$fuzz_s" --seed $((90 + i)) \
    > "$work/fuzz/fuzz-rows-$i.log" 2>&1 &
done
for i in $(seq $((rows_procs + 1)) "$procs"); do
  mode=""; [ "$i" -gt $((procs - jit_procs)) ] && mode="--jit"
  timeout $((fuzz_s + 40)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed $((6000 + i)) \
    $mode --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
timeout 60 python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_jit.py -k "no_device_synchronization" \
  >> "$work/gpu-tests.log" 2>&1
grep -E "passed|failed" "$work/gpu-tests.log" | tail -3; grep -E "^FAILED|^ERROR" "$work/gpu-tests.log" | head -20
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | awk '
  { jit = ($0 ~ /--jit/) ? "fj.jit" : "realize"; for (i = 1; i <= NF; i++) if ($(i+1) == "programs") n[jit] += $i }
  END { for (k in n) print "cuda fuzz programs (" k "):", n[k] }'
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | grep -v "mismatch 0, error 0, crash 0" | head -5
ls "$work/fuzz/failures" 2>/dev/null | head
tail -qn 1 "$work"/fuzz/fuzz-rows-*.log 2>/dev/null; grep -h "^FAIL" "$work"/fuzz/fuzz-rows-*.log 2>/dev/null | head -5
timeout $((suite_s + 60)) python3 bench/suite.py --out "$work/suite" --quick --budget "$suite_s" \
  --impls "$suite_impls" > "$work/suite.log" 2>&1; echo "suite exit $?"; grep -A8 "^## Summary" "$work/suite/results.md"
if [ "$mm_s" -gt 0 ]; then
  timeout $((mm_s + 50)) python3 bench/bench_matmul.py --out "$work/matmul" --quick --budget "$mm_s" \
    > "$work/matmul.log" 2>&1; echo "matmul exit $?"; head -14 "$work/matmul/results.md"
fi
for round in 1 2; do  # new code, then (when .old is there) the code at the start of the host-cost work
  timeout 40 python3 bench/host_cost.py --backend cuda > "$work/host_cost_$round.log" 2>&1
  echo "host cost, round $round, this code:"; tail -10 "$work/host_cost_$round.log"
  if [ -d .old ]; then  # (same run, in turn: see gpu_host_rows.sh)
    (cd .old && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 bench/host_cost.py --backend cuda) \
      > "$work/host_cost_old_$round.log" 2>&1; echo "old code:"; head -8 "$work/host_cost_old_$round.log"
  fi
done
timeout 40 python3 bench/dispatch.py --paired-only 5 > "$work/paired.log" 2>&1; tail -6 "$work/paired.log"
cp "$work"/suite/results.md "$work"/suite/results.png "$work"/suite/results.json "$out"/ 2>/dev/null
cp "$work"/matmul/results.md "$out"/matmul.md 2>/dev/null
tar czf "$out/gpu-final.tgz" -C /tmp gpu-final
