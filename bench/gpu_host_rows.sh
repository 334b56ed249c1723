#!/usr/bin/env bash
# GPU call of 2026-12-02 (second session): the host cost of the code at the start of the
# host-cost work (commit 7a3ac01, unpacked under .old/ and carried) and of this tree, in
# turn in one run (so the host's speed is the same for both); a profile of the cached
# realize of the layer norm on real CuPy; launch cost alone; fj.jit against
# cupy.fuse in turn; the wide-row softmax experiment (bench/exp_wide_softmax2.py).
#   git archive 7a3ac01 fusejit bench/host_cost.py | tar -x -C .old   (then carry .old)
#   bash bench/gpu_host_rows.sh
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONUNBUFFERED=1 FUSEJIT_CACHE_DIR=/tmp/fusejit-cache
new=/tmp/site:$PWD; old=/tmp/site:$PWD/.old
for round in 1 2; do
  for side in new old; do
    if [ "$side" = new ]; then pp=$new; dir=.; else pp=$old; dir=.old; fi
    echo "## round $round, $side code: python3 bench/host_cost.py --backend cuda" >> "$out/host-cost.txt"
    (cd "$dir" && PYTHONPATH=$pp timeout 90 python3 bench/host_cost.py --backend cuda) >> "$out/host-cost.txt" 2>&1
  done
done
PYTHONPATH=$new timeout 90 python3 bench/dispatch.py --paired-only 5 > "$out/paired.txt" 2>&1
PYTHONPATH=$new timeout 90 python3 bench/profile_realize.py "$out/profile-realize.txt" > /dev/null 2>&1
PYTHONPATH=$new timeout 90 python3 bench/diag_dispatch.py > "$out/diag-dispatch.txt" 2>&1
PYTHONPATH=$new timeout 240 python3 bench/exp_wide_softmax2.py > "$out/wide-softmax2.txt" 2>&1
grep -E "^##|record per|realize (5|layer)|jit (5|layer)" "$out/host-cost.txt"
tail -4 "$out/paired.txt"; head -6 "$out/profile-realize.txt"; tail -8 "$out/diag-dispatch.txt"
cat "$out/wide-softmax2.txt"
