"""Plans that read one large input twice: how fast the fused one-program-per-row kernel ran
(before ``fuse.rules.rule_broadcast_back_fills_gpu``), the two launches that replace it, and
those two with the second launch last block first (``fuse.rules.rule_reverse_reread``,
``order=reversed``; issue 9).

Cases: batch norm over axis 0 and centering columns (two launches always: the order alone),
``x / x.sum()``, min-max scaling and ``x - x.mean()`` of a vector, softmax over 8 rows (one
program per row before). Each at inputs of 32 MB to 1 GB (L2: 50 MB), timed through
``fj.jit`` (CUDA events, median of rounds) under three plans, in turn three times (the best
of each; the first plan once): ``fused`` (the rule that splits few wide rows left out: the plan before this
session), ``in order`` (``FUSEJIT_REVERSE_REREADS=0``) and ``reversed`` (the default); the
outputs of the last two compared (identical: the order changes no value), the first within
1e-5 relative (another summation order), beside the copy rate of the input's size.

Run on the GPU machine: ``python3 bench/exp_s22_order.py [--only REGEX]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def batch_norm(xp: Any, x: Any) -> Any:
    mu = x.mean(axis=0)
    return (x - mu) / xp.sqrt(x.var(axis=0) + 1e-5)


def center_cols(xp: Any, x: Any) -> Any:
    return x - x.mean(axis=0)


def share(xp: Any, x: Any) -> Any:
    return x / x.sum()


def min_max(xp: Any, x: Any) -> Any:
    lo = x.min()
    return (x - lo) / (x.max() - lo)


def center(xp: Any, x: Any) -> Any:
    return x - x.mean()


def softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


#: name -> (program, its input's shape from its elements)
CASES = {"batch_norm": (batch_norm, lambda n: (n // 256, 256)),
         "center_cols": (center_cols, lambda n: (n // 1024, 1024)),
         "share": (share, lambda n: (n,)), "min_max": (min_max, lambda n: (n,)),
         "center": (center, lambda n: (n,)), "softmax_8_rows": (softmax, lambda n: (8, n // 8))}
#: input bytes
SIZES = (32 << 20, 64 << 20, 128 << 20, 256 << 20, 1 << 30)
PLANS = ("fused", "in order", "reversed")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    args = p.parse_args(argv)
    import cupy as cp
    from exp_reductions import event_time

    import fusejit as fj
    from fusejit.fuse import rules
    from fusejit.runtime import forget_plans
    fj.set_backend("cuda")
    all_rules = rules.RULES
    before = tuple(r for r in all_rules if r is not rules.rule_broadcast_back_fills_gpu)

    @contextlib.contextmanager
    def planned_as(plan: str) -> Iterator[None]:
        """Plans built inside are ``plan``'s: ``fused`` without the new rule, the others with
        it, in order or reversed (``FUSEJIT_REVERSE_REREADS``); plans of before forgotten."""
        rules.RULES = before if plan == "fused" else all_rules
        os.environ["FUSEJIT_REVERSE_REREADS"] = "1" if plan == "reversed" else "0"
        forget_plans()
        try:
            yield
        finally:
            rules.RULES = all_rules
    for name, (fn, shape_of) in CASES.items():
        for size in SIZES:
            label = f"{name} {size >> 20} MB"
            if not re.search(args.only, label):
                continue
            shape = shape_of(size // 4)
            x = cp.random.standard_normal(shape, dtype=cp.float32)
            y = cp.empty_like(x)
            copy_us = event_time(lambda x=x, y=y: cp.copyto(y, x)) * 1e6
            best: dict[str, float] = {}
            outs: dict[str, Any] = {}
            launches: dict[str, str] = {}
            for turn in range(3):
                for plan in PLANS:
                    if plan == "fused" and turn:
                        continue  # (timed once: up to 50x slower, and nothing to compare)
                    with planned_as(plan):
                        jf = fj.jit(lambda t, fn=fn: fn(fj, t))
                        out = jf(x)
                        cp.cuda.get_current_stream().synchronize()
                        t0 = time.perf_counter()
                        jf(x)
                        cp.cuda.get_current_stream().synchronize()
                        reps = max(2, min(20, int(0.05 / (time.perf_counter() - t0))))
                        us = event_time(lambda jf=jf, x=x: jf(x), rounds=5, reps=reps) * 1e6
                        kernels = fj.plan(fn(fj, fj.asarray(x))).program.kernels
                    best[plan] = min(best.get(plan, float("inf")), us)
                    outs[plan] = cp.asarray(out).copy()  # (while the result lives)
                    launches[plan] = "+".join(("r" if k.attrs.get("order") == "reversed" else "")
                                              + k.kind.split("_")[0] for k in kernels)
            same = bool(cp.array_equal(outs["in order"], outs["reversed"]))
            scale = float(cp.abs(outs["reversed"]).max())
            drift = float(cp.abs(outs["fused"] - outs["reversed"]).max()) / scale
            cells = " | ".join(f"{plan} {best[plan]:8.1f} us {100 * copy_us / best[plan]:5.1f}% "
                               f"({launches[plan]})" for plan in PLANS)
            print(f"{label:24s} {str(shape):16s} copy {copy_us:7.1f} us | {cells} | reversed "
                  f"/ in order {best['in order'] / best['reversed']:.3f}x, / fused "
                  f"{best['fused'] / best['reversed']:.2f}x | same values {same}, fused "
                  f"within {drift:.1e}", flush=True)
            del x, y, outs
            cp.get_default_memory_pool().free_all_blocks()
    os.environ.pop("FUSEJIT_REVERSE_REREADS", None)
    forget_plans()
    # split argmax/argmin (it ran as one program before this session): the time against half
    # a copy of the input (it reads the input once and writes nothing)
    for size in SIZES[1:]:
        label = f"argmax {size >> 20} MB"
        if not re.search(args.only, label):
            continue
        x = cp.random.standard_normal(size // 4, dtype=cp.float32)
        y = cp.empty_like(x)
        copy_us = event_time(lambda x=x, y=y: cp.copyto(y, x)) * 1e6
        jf = fj.jit(lambda t: (t.argmax(), t.argmin()))
        got = [int(cp.asarray(v)) for v in jf(x)]
        want = [int(x.argmax()), int(x.argmin())]
        us = event_time(lambda jf=jf, x=x: jf(x)) * 1e6
        kinds = [k.kind for k in fj.plan(*(lambda t: (t.argmax(), t.argmin()))(
            fj.asarray(x))).program.kernels]
        print(f"{label:24s} argmax and argmin: {us:8.1f} us, {100 * copy_us / 2 / us:5.1f}% of "
              f"half the copy ({copy_us:.1f} us) ({'+'.join(kinds)}); right: {got == want}",
              flush=True)
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
