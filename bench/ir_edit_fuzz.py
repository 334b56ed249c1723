"""Random edits of dumped IR text, for as long as you like: ``tests/test_ir_mutations.py``'s
check (each edited program runs the same on ``numpy`` and ``interpret``, or fails on both with
a ``FusejitError`` naming its line) over many more programs than the test draws. No GPU.

Run: ``python bench/ir_edit_fuzz.py [--seconds S] [--seed N] [--fused]``; prints each
problem (the edited text and what went wrong) and a count of edits by outcome.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fused", action="store_true", help="edit the text with kernel regions")
    args = p.parse_args(argv)
    import fusejit as fj
    from fusejit import fuzz
    from fusejit.testing import recorded_inputs
    from tests.test_ir_mutations import coarsest_tolerance, edit, magnitude, outcome, same_outputs
    config = fuzz.FuzzConfig(seed=args.seed, products=True, max_side=9)
    rng = random.Random(args.seed)
    counts: dict[str, int] = {}
    problems = 0
    deadline = time.time() + args.seconds
    index = 0
    while time.time() < deadline:
        index += 1
        recipe = fuzz.draw_program(config, index)
        if recipe is None:
            continue
        with fj.using_backend("numpy"), np.errstate(all="ignore"):
            outs = recipe(fj)
            text = fj.dump(*outs, fused=args.fused)
            inputs = recorded_inputs(*outs)
        for _ in range(4):
            edited = edit(text, rng)
            try:
                want = outcome(edited, "numpy", inputs)
                got = outcome(edited, "interpret", inputs)
                assert want[0] == got[0], f"numpy {want[1]!r}, interpret {got[1]!r}"
                if want[0] == "ok":
                    same_outputs(got[1], want[1], magnitude(inputs),  # type: ignore[arg-type]
                                 coarsest_tolerance(edited))
                counts[want[0]] = counts.get(want[0], 0) + 1
            except Exception:  # noqa: BLE001  (a problem: shown, and the run goes on)
                problems += 1
                counts["problem"] = counts.get("problem", 0) + 1
                print(f"=== problem (program {index})\n{edited}\n{traceback.format_exc(limit=3)}",
                      flush=True)
    print(f"ir_edit_fuzz seed {args.seed}{' --fused' if args.fused else ''}: "
          f"{sum(counts.values())} edits, {counts}", flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
