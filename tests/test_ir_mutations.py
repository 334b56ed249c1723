"""Edited IR text, at random: every edit runs the same on ``numpy`` and ``interpret`` or fails
on both with a ``FusejitError`` (one that names its line, where parsing rejects it).

Users edit dumped programs (ops, constants, dtypes, shapes, kernel blocks and their
attributes), so an edit the parser, the verifier or the fuser lets through must be one the
emitter can compile and run right; an edit that is not must fail as a ``FusejitError``, never
a raw exception from a dependency. ``test_hostile_ir.py`` covers hand-picked odd text; here
drawn programs (``fusejit.fuzz.draw_program``, matrix products included), dumped before and
after fusion, each get a few random edits of the kinds a user makes: a number, an op, a
dtype, two operands swapped, a line dropped, repeated or moved, an attribute's value. The two
backends are compared with each other (the edited program has no NumPy reference): the
``numpy`` backend evaluates the program op by op; ``interpret`` runs the fused plan's
generated Triton source. Floats agree at the project's tolerance
(``fusejit.testing.tolerance``) of the least precise float dtype the program computes in (a
float64 output cast from a float16 prod carries float16's rounding), the absolute one times
the largest magnitude among the program's inputs and that output (the two backends sum in
different orders: a float64 mean of int64 values near 1e18 that cancel to 0.25 is 0.0 in the
other order, within the terms' rounding); NaNs equal; integers and bools exactly.

The same check run longer (thirty-first session, ``bench/ir_edit_fuzz.py``) found three
defects: ``sub`` of bools and ``min`` over no elements passed the verifier, and the
``numpy`` backend raised NumPy's own errors (both are verifier errors now,
``test_ir_errors.py``); an integer array to negative powers raised there and was garbage in
the kernels (``test_regressions.py``).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Iterator

import numpy as np
import pytest

import fusejit as fj
from fusejit import fuzz
from fusejit.errors import FusejitError, IRError
from fusejit.ir.program import Kernel, Program
from fusejit.testing import _magnitude, recorded_inputs, tolerance

OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "exp", "log", "sqrt", "neg", "abs",
       "sum", "max", "min", "mean", "tanh", "sigmoid", "where", "cast", "square", "floordiv",
       "mod", "pow", "less", "eq", "matmul", "reshape", "permute", "broadcast", "slice",
       "argmax", "prod", "any", "all")
DTYPES = ("f16", "f32", "f64", "i8", "i32", "i64", "u8", "u32", "bool")
NUMBERS = ("0", "1", "2", "3", "7", "64", "-1", "4096", "100000")
ATTR_VALUES = ("0", "1", "2", "-3", "17", "1024", "3.5", "reversed", "x")


def edit(text: str, rng: random.Random) -> str:
    """``text`` with one or two random edits, each of a kind a user makes."""
    lines = text.split("\n")
    for _ in range(rng.choice((1, 1, 2))):
        i = rng.randrange(len(lines))
        line, kind = lines[i], rng.randrange(8)
        if kind == 4:
            lines.pop(i)
            continue
        if kind == 5:
            lines.insert(i, line)
            continue
        if kind == 7:
            lines.insert(rng.randrange(len(lines)), lines.pop(i))
            continue
        pattern, choices = {
            0: (r"(?<![%@\w])\d+", NUMBERS),
            1: (r"(?<== )\w+", OPS),
            2: (r"\b(?:f16|f32|f64|i8|i16|i32|i64|u8|u16|u32|u64|bool)\b", DTYPES),
            6: (r"(?<==)[^\s,)\]]+", ATTR_VALUES),
        }.get(kind, (r"%\w+", ()))
        found = list(re.finditer(pattern, line))
        if kind == 3:  # two operands swapped
            if len(found) >= 2:
                a, b = sorted(rng.sample(found, 2), key=lambda m: m.start())
                line = (line[:a.start()] + b.group() + line[a.end():b.start()] + a.group()
                        + line[b.end():])
        elif found:
            m = rng.choice(found)
            line = line[:m.start()] + rng.choice(choices) + line[m.end():]
        lines[i] = line
    return "\n".join(lines)


def outcome(text: str, backend: str, inputs: list[object]) -> tuple[str, object]:
    """("ok", (outputs, program)) or ("error", the FusejitError) of ``text`` run on ``backend``;
    any other exception propagates (the test's failure)."""
    try:
        with fj.using_backend(backend), np.errstate(all="ignore"):
            try:
                program = fj.parse(text)
            except IRError as exc:
                assert exc.line is not None, f"no line in {exc}"
                raise
            return "ok", ([np.asarray(out) for out in program.run(*inputs)], program)
    except FusejitError as exc:
        return "error", exc


def program_tolerance(program: Program) -> tuple[float, float]:
    """``(rtol, atol)`` of the least precise float dtype of any value ``program`` computes,
    inside kernel blocks too (``testing.tolerance``; ``(0, 0)`` where none is a float)."""
    types = list(program.types().values())
    for stmt in program.body:
        if isinstance(stmt, Kernel):
            types += [p.type for p in stmt.params] + [i.type for i in stmt.body]
    return max((tolerance(t.dtype) for t in types), default=(0.0, 0.0))


def edited_programs(seed: int, fused: bool) -> Iterator[tuple[int, str, list[object]]]:
    """(program index, edited text, its inputs): drawn programs (``fuzz.draw_program``, matrix
    products included) dumped plain or ``fused``, each edited three times."""
    config = fuzz.FuzzConfig(seed=seed, products=True, max_side=9)
    rng = random.Random(seed * 2 + fused)
    for index in itertools.count(1):
        recipe = fuzz.draw_program(config, index)
        if recipe is None:
            continue
        with fj.using_backend("numpy"), np.errstate(all="ignore"):
            outs = recipe(fj)
            text = fj.dump(*outs, fused=fused)
            inputs = recorded_inputs(*outs)  # (arrays and scalar params, in the text's order)
        for _ in range(3):
            yield index, edit(text, rng), inputs


def check_edit(edited: str, inputs: list[object]) -> str:
    """``edited`` run on both backends: "ok" where both ran it to the same outputs (as the
    module says), "error" where both raised a ``FusejitError``; else an AssertionError."""
    want = outcome(edited, "numpy", inputs)
    got = outcome(edited, "interpret", inputs)
    assert want[0] == got[0], (edited, want[1], got[1])
    if want[0] == "ok":
        (wanted, program), (gotten, _) = want[1], got[1]  # type: ignore[misc]
        rtol, atol = program_tolerance(program)
        scale = max([1.0] + [_magnitude(x) for x in inputs])
        assert len(gotten) == len(wanted)
        for a, b in zip(gotten, wanted):
            assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
            if a.dtype.kind in "fc":
                np.testing.assert_allclose(a, b, rtol=rtol, equal_nan=True,
                                           atol=atol * max(scale, _magnitude(b)))
            else:
                np.testing.assert_array_equal(a, b)
    return want[0]


@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
@pytest.mark.parametrize("seed", [3101, 3102])
def test_edited_text_runs_the_same_on_both_backends_or_fails_cleanly(seed: int,
                                                                     fused: bool) -> None:
    results = [check_edit(edited, inputs)
               for _, edited, inputs in itertools.islice(edited_programs(seed, fused), 60)]
    # (many edits are rejected; enough run to be compared)
    assert results.count("ok") >= 10, results
