"""Random edits of dumped IR text, for as long as you like: ``tests/test_ir_mutations.py``'s
check (each edited program runs the same on ``numpy`` and ``interpret``, or fails on both with
a ``FusejitError`` naming its line) over many more programs than the test draws. No GPU.

Run: ``python bench/ir_edit_fuzz.py [--seconds S] [--seed N] [--fused]``; prints each
problem (the edited text and what went wrong) and a count of edits by outcome.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fused", action="store_true", help="edit the text with kernel regions")
    args = p.parse_args(argv)
    from tests.test_ir_mutations import check_edit, edited_programs
    counts: dict[str, int] = {}
    deadline = time.time() + args.seconds
    for index, edited, inputs in edited_programs(args.seed, args.fused):
        if time.time() > deadline:
            break
        try:
            result = check_edit(edited, inputs)
        except Exception:  # noqa: BLE001  (a problem: shown, and the run goes on)
            result = "problem"
            print(f"=== problem (program {index})\n{edited}\n{traceback.format_exc(limit=3)}",
                  flush=True)
        counts[result] = counts.get(result, 0) + 1
    print(f"ir_edit_fuzz seed {args.seed}{' --fused' if args.fused else ''}: "
          f"{sum(counts.values())} edits, {counts}", flush=True)
    return 1 if counts.get("problem") else 0


if __name__ == "__main__":
    raise SystemExit(main())
