#!/usr/bin/env bash
# The test suite under Triton 3.6, the GPU image's version, on any machine (no GPU needed):
# CI installs the newest Triton, so a kernel that only 3.6 fails to compile (tests/test_cubin.py
# compiles every kind for sm_90) or that only 3.6's interpreter rejects would reach the H200
# unseen. Two such failures were found this way (a split var kernel, split-K loops).
#   bash bench/triton36_check.sh [PYTEST ARGS...]     (default: the whole suite)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
venv=${FUSEJIT_T36_VENV:-/tmp/fusejit-triton36}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "triton==3.6.0" numpy lark pytest hypothesis filecheck
fi
"$venv/bin/python" -c "import triton; assert triton.__version__.startswith('3.6'), triton.__version__"
# (PYTHONPATH: the experiments' tests run bench scripts in a subprocess of this venv, where
# fusejit is not installed)
CI=true FUSEJIT_CACHE_DIR="${FUSEJIT_CACHE_DIR:-/tmp/fusejit-triton36-cache}" \
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
