#!/usr/bin/env bash
# Ninth session's first GPU call (2026-12-05): stream-K GEMMs (gemm.py, _stream_k_loop) timed
# against the persistent loop over whole tiles and one program per tile (bench/exp_s8.py); the
# eighth session's last change (float16 GEMMs of half a wave of tiles to one load through TMA,
# 71b0806) timed as the default; the gpu-marked tests beside the cuda fuzz (two processes with
# every GEMM of two tiles or more stream-K); whether the wide layer norm's weight and bias
# reads hold it under the wide softmax (bench/exp_coop_ln.py).
#   bash bench/gpu_s9.sh [FUZZ_S] [TESTS_S]
set -uo pipefail
fuzz_s=${1:-130}; tests_s=${2:-170}
out=${OUT:-gpu-out}; mkdir -p "$out"; work=/tmp/s9; mkdir -p "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
align_fuzz "$work" "$fuzz_s" 12950 2 "FUSEJIT_GEMM_PERSISTENT=always FUSEJIT_GEMM_STREAM_K=always"
tests_beside_fuzz "$work" "$fuzz_s" 4 12900 "$tests_s"
wait
fuzz_summary "$work" | tee "$out/gpu-tests-fuzz.txt"
cp "$work/gpu-tests.log" "$out/"; cp -r "$work/fuzz/failures"* "$out/" 2>/dev/null
timeout 170 python3 bench/exp_s8.py --only '^(d|a)' \
  --configs '^default$|^128x256 p$|^128x256 s$' --json "$out/exp_s8_streamk.json" \
  > "$out/exp_s8_streamk.txt" 2>&1; echo "exp_s8 stream-K exit $?"
cat "$out/exp_s8_streamk.txt"
timeout 80 python3 bench/exp_s8.py --only '^w' --configs '^default$|^128x256 t$' \
  --json "$out/exp_s8_tma.json" > "$out/exp_s8_tma.txt" 2>&1; echo "exp_s8 tma exit $?"
cat "$out/exp_s8_tma.txt"
timeout 90 python3 bench/exp_coop_ln.py --emitted-only > "$out/exp_coop_ln.txt" 2>&1
echo "exp_coop_ln exit $?"; cat "$out/exp_coop_ln.txt"
