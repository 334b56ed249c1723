#!/usr/bin/env bash
# Eighth session's fourth GPU call (2026-12-02): fj.jit's leaner replay against the code
# before it (unpacked under .old/ and carried; dispatch.py --paired-only in turn, same host),
# the gpu-marked tests beside the cuda fuzz on the final code, dispatch.py's table beside
# cupy.fuse, jax.jit and torch, and a sixth unseen draw of the suite's families beside
# torch.compile and jax.jit.
#   git archive <before> fusejit bench | tar -x -C .old   (then carry .old)
#   bash bench/gpu_s8d.sh [SUITE SEED:COUNT] [SUITE_BUDGET] [FUZZ_S] [TESTS_S]
set -uo pipefail
draw=${1:-20261210:24}; suite_s=${2:-130}; fuzz_s=${3:-120}; tests_s=${4:-150}
out=${OUT:-gpu-out}; work=/tmp/gpu-s8d; mkdir -p "$out" "$work"
. "$(dirname "${BASH_SOURCE[0]}")/gpu_common.sh"; gpu_setup || exit 1
for side in new old new old; do
  dir=.; [ "$side" = old ] && dir=.old
  echo "## $side code: python3 bench/dispatch.py --paired-only 5" >> "$out/paired.txt"
  (cd "$dir" && PYTHONPATH=/tmp/site:$PWD timeout 40 python3 bench/dispatch.py --paired-only 5) \
    >> "$out/paired.txt" 2>&1
done
grep -E "^##|median|ratio" "$out/paired.txt"
tests_beside_fuzz "$work" "$fuzz_s" 6 12500 "$tests_s"
fuzz_summary "$work" | tee "$out/fuzz-summary.txt"
timeout 120 python3 bench/dispatch.py --json "$out/dispatch.json" > "$out/dispatch.txt" 2>&1
echo "dispatch exit $?"; tail -12 "$out/dispatch.txt"
unseen_suite "$out" "$work" "$draw" "$suite_s"
tar czf "$out/gpu-s8d.tgz" -C /tmp gpu-s8d
