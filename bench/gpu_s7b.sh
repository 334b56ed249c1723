#!/usr/bin/env bash
# Seventh session's second GPU call (2026-12-02): the GEMM alignment copies
# (rules.rule_align_gemm_operands) on the first call's unseen GEMM draw and on a fresh one,
# each beside torch.compile and jax.jit (and cuBLAS on the fresh one); draw 20261207:24's u11
# on 2-D tiles bounded for slow math (compile time, kernel time beside the peers); then the
# gpu-marked tests beside the cuda fuzz. Every result is under $OUT before the next step starts.
#   bash bench/gpu_s7b.sh [OLD SEED:COUNT] [NEW SEED:COUNT] [MATMUL_BUDGET] [FUZZ_SECONDS] [PROCS]
set -uo pipefail
old=${1:-20261207:16}; new=${2:-20261208:16}; mm_s=${3:-100}; fuzz_s=${4:-60}; procs=${5:-10}
out=${OUT:-gpu-out}; work=/tmp/gpu-s7b; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
unseen_matmul "$out" "$work" old "$old" fusejit,torch,jax "$mm_s"
unseen_matmul "$out" "$work" new "$new" fusejit,cupy,torch,jax "$mm_s"
FUSEJIT_SUITE_UNSEEN=20261207:24 timeout 60 python3 bench/compile_time.py --only "u11|u08" \
  > "$out/compile-u11.txt" 2>&1; tail -4 "$out/compile-u11.txt"
timeout 120 python3 bench/suite.py --out "$work/u11" --unseen 20261207:24 --only u11 --budget 60 \
  --impls fusejit,jax,torch > "$work/u11.log" 2>&1; echo "u11 exit $?"
mkdir -p "$out/u11"; cp "$work"/u11/results.* "$out/u11/" 2>/dev/null
grep -A3 "^| workload" "$work/u11/results.md" | cut -d'|' -f2,4,7,8,9,10,12,13,14,15
tests_beside_fuzz "$work" "$fuzz_s" "$procs" 8300 $((fuzz_s + 90))
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
tar czf "$out/gpu-s7b.tgz" -C /tmp gpu-s7b
