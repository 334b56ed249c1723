"""Benchmark: print and parse a 10,000-instruction program.

The program is a pointwise chain recorded through the public API (each step
adds or multiplies by a constant, so the text has 10,000 value lines plus
constants). Run: ``python bench/bench_ir.py [n_ops]``. Target: under a
second each for printing and parsing on a small CI machine.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import fusejit as fj
from fusejit.ir.graph import lower
from fusejit.ir.parser import parse
from fusejit.ir.printer import print_program


def build(n_ops: int) -> fj.Program:
    """A chain of ``n_ops`` recorded instructions over one f32[64,64] input."""
    x = fj.asarray(np.ones((64, 64), np.float32))
    y = x
    ops = 0
    step = 0
    while ops < n_ops:
        # alternate ops and constants so that constants are not shared by hash-consing
        y = y * (1.0 + step * 1e-6) if step % 2 else y + step
        step += 1
        ops += 2
    program, _, _ = lower([y._node])
    return program


def main(argv: list[str] | None = None) -> None:
    """Time printing and parsing; print the figures."""
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 10_000
    program = build(n)
    t0 = time.perf_counter()
    text = print_program(program)
    t1 = time.perf_counter()
    parsed = parse(text)  # includes building the Lark parser once and verifying
    t2 = time.perf_counter()
    again = parse(text)
    t3 = time.perf_counter()
    assert print_program(parsed) == text and again.outputs == program.outputs
    lines = text.count("\n")
    print(f"{lines} lines, {len(text)} chars")
    print(f"print:                {t1 - t0:.3f} s")
    print(f"parse (first, cold):  {t2 - t1:.3f} s  (incl. grammar load and verify)")
    print(f"parse (warm):         {t3 - t2:.3f} s  (incl. verify)")


if __name__ == "__main__":
    main()
