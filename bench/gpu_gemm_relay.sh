#!/usr/bin/env bash
# One GPU call after a change to the GEMM emitter's epilogue (the product relayed through its
# output before a special function: gemm.py, _relay_output): the gpu-marked GEMM tests and the
# cuda fuzz (its programs have matmul steps) side by side, then, alone, the MLP's first layer
# under each GEMM_RELAY_PRODUCT mode (exp_matmul.py --mlp) and the GEMM benchmark against the
# peers (bench_matmul.py --quick). Logs in $OUT/gpu-gemm.tgz.
#   bash bench/gpu_gemm_relay.sh [FUZZ_SECONDS] [FUZZ_PROCS]
set -uo pipefail
fuzz_s=${1:-60}; procs=${2:-12}
out=${OUT:-gpu-out}; work=/tmp/gpu-gemm; mkdir -p "$out" "$work/fuzz"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
timeout $((fuzz_s + 120)) python3 -m pytest -m gpu -q -p no:cacheprovider tests/test_gpu_matmul.py \
  > "$work/gpu-tests.log" 2>&1 &
for i in $(seq 1 "$procs"); do
  timeout $((fuzz_s + 60)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed $((4000 + i)) \
    --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/fuzz-$i.log" 2>&1 &
done
wait
tail -n 2 "$work/gpu-tests.log"; grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | awk '
  { for (i = 1; i <= NF; i++) if ($(i+1) == "programs") n += $i } END { print "cuda fuzz programs:", n }'
grep -h "^fusejit fuzz" "$work"/fuzz/fuzz-*.log | grep -v "mismatch 0, error 0, crash 0" | head -5
ls "$work/fuzz/failures" 2>/dev/null | head
timeout 200 python3 bench/exp_matmul.py "$work/mm" --skip-epilogue --mlp --budget 170 \
  > "$work/exp_matmul.log" 2>&1; echo "exp_matmul exit $?"
timeout 200 python3 bench/bench_matmul.py --out "$work/bm" --quick --budget 160 \
  > "$work/bench_matmul.log" 2>&1; echo "bench_matmul exit $?"; head -14 "$work/bm/results.md"
tar czf "$out/gpu-gemm.tgz" -C /tmp gpu-gemm
