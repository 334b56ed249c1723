#!/usr/bin/env bash
# Nineteenth session, third call: the whole suite, largest size of each workload (--quick),
# fusejit beside torch.compile and jax.jit in one run (issue 9's table), then the cuda fuzz.
#   bash bench/gpu_s19c.sh [SUITE_BUDGET] [FUZZ_S]
set -uo pipefail
suite_budget=${1:-380}; fuzz_s=${2:-40}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s19c; mkdir -p "$work/fuzz"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$out/card.txt"
suite_family "$out" "$work" suite "$suite_budget" --quick
timeout $((fuzz_s + 30)) python3 -m fusejit fuzz --backend cuda --seconds "$fuzz_s" --seed 19302 \
  --jit --out "$work/fuzz/failures" --max-failures 3 > "$work/fuzz/jit.log" 2>&1
fuzz_report "$work" "$out"
pack_out "$out"
true
