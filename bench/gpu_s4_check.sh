#!/usr/bin/env bash
# Fourth session, second GPU call: the reduction rules of exp_tiles.py checked on shapes they were
# not measured on (exp_tiles.py --set check), then the unseen suite again (fusejit only: the
# peers ran in the first call on the same draw).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 330 python3 bench/exp_tiles.py --set check 2>&1 | grep -v "UserWarning\|warn_once\|warnings.warn" > $OUT/exp-tiles-check.txt
grep -v "^  grid" $OUT/exp-tiles-check.txt | grep -A3 "^==\|heuristic" | cut -c1-200
timeout 200 python3 bench/suite.py --out "$OUT/unseen" --unseen 20261202:26 --budget 150 --impls fusejit > "$OUT/unseen.log" 2>&1
echo "suite exit $?"; grep -A30 "^| workload" "$OUT/unseen/results.md" | cut -d'|' -f2,4,7,8 
