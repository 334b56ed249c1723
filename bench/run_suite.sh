#!/usr/bin/env bash
# The benchmark suite on the H200 machine (bench/suite.py; bench/README.md says what it measures):
# fusejit beside torch.compile, jax.jit, CuPy and cupy.fuse over every workload family.
# Run from the repo root there, after `../shared/gpu/prepare` put lark into .whl/ here:
#   bash bench/run_suite.sh [suite.py options, e.g. --quick, --only softmax, --budget 300]
# Writes $OUT (or ./gpu-out/suite without it): results.json, results.md, results.png, logs/,
# parts/ (each process's raw records), gpu.txt and suite.log. About 7 minutes in all.
set -uo pipefail
out=${OUT:-gpu-out/suite}
mkdir -p "$out"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
python3 -c "import lark" 2>/dev/null \
  || { echo "lark is missing: run ../shared/gpu/prepare in this checkout and carry .whl" >&2; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.total,temperature.gpu \
  --format=csv 2>&1 | tee "$out/gpu.txt"
# fresh compile caches (suite.py's default) make the cold first-call times cold on any machine
python3 bench/suite.py --out "$out" "$@" 2>&1 | tee "$out/suite.log"
exit "${PIPESTATUS[0]}"
