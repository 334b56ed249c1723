"""Random programs through Triton's compiler for sm_90, no GPU needed.

Draws ``fusejit fuzz``'s programs (``fusejit.fuzz.draw_program``), runs each on the
``numpy`` backend to plan it (``--large-plans``: as large arrays are planned,
``fusejit.testing.large_plans``), then emits every distinct kernel of the plans for ``cuda``
and compiles it for sm_90 (``fusejit.runtime.compile.compile_all``, 16-byte divisible
arguments). A kernel Triton cannot compile is printed with its IR; the last line counts
programs, kernels and failures, and the kernels by kind (``+reversed``: ``order=reversed``;
``+arg``: a split argmax/argmin). Exit status 1 if any failed.

Run: ``python3 bench/compile_fuzz.py [--seconds S] [--seed N] [--large-plans] [--products]``
(``--products``: matrix products drawn too, as ``fusejit fuzz --products``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import warnings
from collections import Counter

import numpy as np

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.fuzz import FuzzConfig, draw_program
from fusejit.ir.program import Kernel
from fusejit.runtime import _plans
from fusejit.runtime.compile import compile_all
from fusejit.testing import large_plans, run_fusejit


def _tag(kernel: Kernel) -> str:
    tag = kernel.kind + ("+reversed" if kernel.attrs.get("order") == "reversed" else "")
    if kernel.kind == "split_reduction" and any(i.op in ("argmax", "argmin") for i in kernel.body):
        tag += "+arg"
    return tag


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--large-plans", action="store_true")
    p.add_argument("--products", action="store_true", help="draw matrix products too")
    args = p.parse_args(argv)
    config = FuzzConfig(backend="numpy", seed=args.seed, out=None, products=args.products)
    start = time.monotonic()
    programs = compiled = failed = 0
    kinds: Counter[str] = Counter()
    seen: set[str] = set()
    with (large_plans() if args.large_plans else contextlib.nullcontext()), \
            fj.using_backend("numpy"), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index = 0
        while time.monotonic() - start < args.seconds:
            recipe = draw_program(config, index)
            index += 1
            if recipe is None:
                continue
            try:
                run_fusejit(recipe, "numpy")
            except Exception:  # noqa: BLE001  (the fuzzer's business; here only compiles)
                continue
            programs += 1
            for plan in list(_plans.values()):
                for kernel in plan.program.kernels:
                    text = str(kernel)
                    if text in seen:
                        continue
                    seen.add(text)
                    kinds[_tag(kernel)] += 1
                    try:
                        for c in compile_all(emit_kernel(kernel, None, "cuda"), 90, True):
                            assert c.cubin[:4] == b"\x7fELF"
                        compiled += 1
                    except Exception as exc:  # noqa: BLE001  (reported, counted)
                        failed += 1
                        print(f"FAILED {_tag(kernel)}: {type(exc).__name__}: {str(exc)[:400]}")
                        print(kernel)
            _plans.clear()
    mode = (" --large-plans" if args.large_plans else "") + (" --products" if args.products else "")
    print(f"compile_fuzz --seed {args.seed}{mode}: {programs} programs, {compiled} kernels "
          f"compiled for sm_90, {failed} failed; by kind {dict(sorted(kinds.items()))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
