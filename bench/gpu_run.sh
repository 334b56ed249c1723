#!/usr/bin/env bash
# One full GPU session on the H200 machine: GPU tests, demo, benchmarks, host profile.
# Run from the repo root there, after `../shared/gpu/prepare filecheck==1.0.6` put lark and
# filecheck into .whl/ here:
#   bash bench/gpu_run.sh        (logs and JSON go to $OUT, or ./gpu-out without it)
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit 1
export FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total --format=csv | tee "$out/gpu.txt"
python3 -c "import triton, cupy, numpy; print('triton', triton.__version__, 'cupy', cupy.__version__, 'numpy', numpy.__version__)" | tee -a "$out/gpu.txt"
python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$out/gpu-tests.log" | tail -25
# the CPU suite too, under this machine's Triton (CI has the newest); the wheel test needs PyPI
python3 -m pytest -m "not gpu" -q -p no:cacheprovider -k "not wheel" tests 2>&1 \
  | tee "$out/cpu-tests.log" | tail -5
python3 -m fusejit demo > "$out/demo.log" 2>&1; echo "demo exit $?" | tee -a "$out/demo.log"
python3 bench/profile_realize.py "$out/profile.txt" | head -4
python3 bench/bench_gpu.py "$out/bench.json" 2>"$out/bench-stderr.log" | tee "$out/bench.log"
