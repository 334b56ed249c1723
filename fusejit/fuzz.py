"""``fusejit fuzz``: random programs against NumPy, each failure shrunk into a regression test.

    fusejit fuzz --backend interpret --seconds 300 --seed 1 [--out fuzz-failures/]

The fuzzer draws programs from ``fusejit.testing.programs`` with a spread of
sizes (``sizes="mixed"``: sides from 0 to a few hundred and at block boundaries
such as 127/128/129 and 1023/1024/1025, up to 4-D, up to 12 steps) and inputs
that are NumPy views (broadcast, transposed, sliced, reversed). Each program
runs on NumPy and on the backend, and is counted as passing or as one of
``KINDS``:

* ``mismatch``: fusejit's values, dtype or shape differ from NumPy's
  (``fusejit.testing.assert_matches_numpy``, at ``check_program``'s tolerances);
* ``error``: fusejit raised a ``FusejitError`` where NumPy computed a result;
* ``crash``: any other exception (from fusejit, or from the NumPy reference).

Every failure is shrunk by Hypothesis to a small program that fails the same
way, and written to the output folder as a pytest file
(``test_fuzz_<kind>_<hash>.py``) holding the program's source, its inputs
written out literally and a ``check_program`` call: it fails until the bug is
fixed, then guards against its return.

``--matmul-precision tf32`` (or ``tf32x3``) also draws matrix products
(``testing.MATMUL_OPS``), float32 inputs six times as often as another dtype,
and fusejit records every float32 product at that precision
(``FUSEJIT_MATMUL_PRECISION``, ``testing.using_matmul_precision``); NumPy stays the
reference. A float output computed from a float32 GEMM is compared at
``testing.matmul_tolerance`` (``tf32``: rtol and atol 10 * 2**-10, about 1e-2, the atol
scaled by the largest magnitude it is computed from), and the ``stable`` filter and
``sensitive_step`` nudge such values by TF32's error rather than float32's. The
default, ``ieee``, draws products only with ``--products`` (``FuzzConfig.products``): a
product on the interpreter costs about ten pointwise programs, and without it the
programs of a seed stay as they were.

Determinism: program ``i`` of seed ``S`` is drawn from a fixed byte string (a
``random.Random`` seeded with ``S`` and ``i``) through Hypothesis's public
fuzzing entry point (``fuzz_one_input``), so the same seed draws the same
programs in the same order on every run (``draw_program(config, i)`` draws one
again). Shrinking is Hypothesis's own: ``fuzz_one_input`` saves a failing
choice sequence to the test's example database, and a second test over the same
strategy replays it with only the *reuse* and *shrink* phases. That database is
a one-entry object in memory (``_memory_database``), the one way Hypothesis's
public API hands a failure to its shrinker; nothing is written to disk
(no ``.hypothesis/`` folder), health checks are off and ``.example()`` is never
used. Shrinking stops after ``shrink_seconds``, so its result can vary between
runs; dead steps and outputs are then dropped (``prune``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import random
import sys
import textwrap
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .errors import FusejitError
from .ir.ops import MATMUL_PRECISIONS
from .testing import (
    ALL_DTYPES,
    ALL_OPS,
    LITERAL_LIMIT,
    MATMUL_OPS,
    Recipe,
    Ref,
    Step,
    _nested_source,
    array_source,
    large_plans,
    output_mismatches,
    output_tolerances,
    programs,
    reduced_precision_products,
    run_fusejit,
    run_numpy,
    sensitive_step,
    using_matmul_precision,
)

__all__ = ["KINDS", "FuzzConfig", "FuzzReport", "Failure", "Outcome", "classify", "fuzz", "command",
           "program_strategy", "draw_program", "shrink", "prune", "regression_source", "recipe_key",
           "check_matmul_precision", "REDUCED_PRECISION_DTYPES"]

#: The failure kinds, in the order they are reported.
KINDS = ("mismatch", "error", "crash")

#: Bytes behind one program: far more than the largest program draws (about 2 KB).
PROGRAM_BYTES = 1 << 14


# -- configuration and results --------------------------------------------------

@dataclass
class FuzzConfig:
    """What ``fuzz`` runs: the backend, how long, which programs, and where failures go.

    ``seconds`` and ``count`` bound the run (whichever comes first; at least
    one must be set), and so does ``max_failures`` (stop after that many).
    ``shrink_seconds`` bounds shrinking each failure.
    The remaining fields are passed to ``fusejit.testing.programs``.
    """

    backend: str = "numpy"
    seconds: float | None = 60.0
    count: int | None = None
    seed: int = 0
    out: Path | None = Path("fuzz-failures")
    sizes: str = "mixed"
    max_side: int | None = None
    max_steps: int = 12
    max_dims: int = 4
    max_elements: int | None = None
    input_views: bool = True
    cupy_inputs: bool = False
    #: run every program through ``fj.jit`` (recorded on the first call, replayed on the second)
    jit: bool = False
    shrink: bool = True
    shrink_seconds: float = 60.0
    max_failures: int | None = None
    #: the precision fusejit multiplies float32 products at (``MATMUL_PRECISIONS``); other
    #: than ``ieee``, products are drawn and checked at ``testing.matmul_tolerance``
    matmul_precision: str = "ieee"
    #: draw matrix products at ``ieee`` too (a reduced ``matmul_precision`` always does): off by
    #: default, where they would cut the programs a run checks by about ten on the interpreter
    #: (seed 14422: 477 in 90 s against 5,000-6,000) and draw other programs for a seed
    products: bool = False
    #: plan the programs as large arrays are (``testing.large_plans``: the fuser's size
    #: thresholds lowered, so that the plans of megabytes meet programs of kilobytes)
    large_plans: bool = False


@dataclass(frozen=True)
class Outcome:
    """How one program failed: its ``kind``, the exception type's name, and the message."""

    kind: str
    error_type: str
    message: str

    def headline(self) -> str:
        """One line: for a mismatch, which output and what differs; else the first line."""
        lines = [line.strip() for line in self.message.splitlines() if line.strip()]
        if self.kind == "mismatch":
            where = next((line for line in lines if line.startswith("output ")), "")
            what = next((line for line in lines if "differ" in line), lines[0] if lines else "")
            return f"{where}: {what}" if where else what
        return lines[0] if lines else self.error_type

    def same_bug(self, other: Outcome) -> bool:
        """Whether ``other`` is the same failure for shrinking: same kind (and exception type)."""
        if self.kind != other.kind:
            return False
        return self.kind == "mismatch" or self.error_type == other.error_type


@dataclass
class Failure:
    """One failing program: where it was found, how it failed, its shrunk form and its file."""

    index: int
    outcome: Outcome
    original: Recipe
    recipe: Recipe
    shrunk: bool
    path: Path | None = None


@dataclass
class FuzzReport:
    """What a run did: programs checked, skipped draws, failures, and elapsed seconds."""

    config: FuzzConfig
    programs: int = 0
    skipped: int = 0
    elapsed: float = 0.0
    failures: list[Failure] = field(default_factory=list)
    interrupted: bool = False
    #: mismatches of programs with a rounding-sensitive step (see ``classify``): not failures
    excused: int = 0
    #: programs with a float32 GEMM at the config's reduced ``matmul_precision`` (0 for ieee)
    reduced_products: int = 0

    def counts(self) -> dict[str, int]:
        """Failures by kind (every kind present, zeros included)."""
        counts = dict.fromkeys(KINDS, 0)
        for f in self.failures:
            counts[f.outcome.kind] += 1
        return counts

    @property
    def ok(self) -> bool:
        """True when no program failed."""
        return not self.failures


# -- one program ------------------------------------------------------------------

def classify(recipe: Recipe, backend: str, excused: Callable[[int], None] | None = None,
             jit: bool = False, *, matmul_precision: str = "ieee") -> Outcome | None:
    """Run ``recipe`` on NumPy and on ``backend``; None when they agree, else how they differ.

    ``jit``: fusejit runs the recipe as an ``fj.jit`` function, called twice (the second call
    replays the plan; ``testing.run_fusejit``). ``matmul_precision``: fusejit records float32
    products at that precision, and outputs computed from one are compared at
    ``testing.matmul_tolerance`` (``output_tolerances``, ``sensitive_step``).

    A mismatch of a program with a rounding-sensitive step (``testing.sensitive_step``:
    ``sin`` of an argument one ulp of which moves the result past the tolerance, the variance
    of equal values whose two-pass residue overflows) is not a failure: ``excused`` is told
    the step's index, and the fuzz report counts it.
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            expected = run_numpy(recipe)
            tolerances = output_tolerances(recipe, matmul_precision=matmul_precision)
        except Exception as exc:  # noqa: BLE001  (the generator promised NumPy accepts it)
            return Outcome("crash", type(exc).__name__,
                           f"the NumPy reference raised: {_describe(exc)}")
        try:
            with using_matmul_precision(matmul_precision):
                actual = run_fusejit(recipe, backend, jit=jit)
        except FusejitError as exc:
            return Outcome("error", type(exc).__name__, _describe(exc))
        except Exception as exc:  # noqa: BLE001  (a crash is what we are looking for)
            return Outcome("crash", type(exc).__name__, _describe(exc))
        try:
            mismatches = output_mismatches(recipe, actual, expected, tolerances,
                                           show_recipe=False)
        except Exception as exc:  # noqa: BLE001
            return Outcome("crash", type(exc).__name__, _describe(exc))
        if mismatches:
            # excused only by a rounding-sensitive step that each mismatched output comes from:
            # one output through floor(x @ y) does not excuse another output's wrong x @ y
            steps = [sensitive_step(recipe, [i], matmul_precision=matmul_precision)
                     for i, _ in mismatches]
            for (_, message), step in zip(mismatches, steps):
                if step is None:
                    return Outcome("mismatch", "AssertionError", message.strip())
            if excused is not None:
                excused(min(s for s in steps if s is not None))
    return None


def _describe(exc: BaseException) -> str:
    """The exception's message and where it was raised (the innermost frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno}, in {frames[-1].name})" \
        if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def recipe_key(recipe: Recipe) -> str:
    """A hex digest of the recipe: its steps, outputs, and every input (values, views, module)."""
    h = hashlib.sha256()
    h.update(recipe.source().encode())
    h.update(repr(recipe.outputs).encode())
    for i, a in enumerate(recipe.inputs):
        view = recipe.view(i)
        base = a if view is None else view.base
        h.update(f"|{base.dtype}{base.shape}".encode())
        h.update(np.ascontiguousarray(base).tobytes())
        if view is not None:
            h.update(repr((view.steps, view.module)).encode())
    return h.hexdigest()


# -- drawing programs -----------------------------------------------------------------

#: The dtypes drawn with a reduced ``matmul_precision``: float32 six times as often as another
#: (6 in 17), so that more products are float32 GEMMs: about one program in seventeen computes
#: one (an output is computed from it), against one in forty with every dtype alike (seeds 1
#: and 7, 300 programs each).
REDUCED_PRECISION_DTYPES = ALL_DTYPES + (np.dtype(np.float32),) * 5


def check_matmul_precision(precision: str) -> str:
    """``precision`` if it is one of ``MATMUL_PRECISIONS``; else a ValueError saying which are."""
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul precision {precision!r} is not one of {', '.join(MATMUL_PRECISIONS)}")
    return precision


def program_strategy(config: FuzzConfig) -> Any:
    """The ``programs`` strategy the fuzzer draws from (see ``FuzzConfig``). With a reduced
    ``matmul_precision``, products are drawn too (float32 operands more often)."""
    if check_matmul_precision(config.matmul_precision) == "ieee":
        return programs(sizes=config.sizes, max_side=config.max_side, max_steps=config.max_steps,
                        max_dims=config.max_dims, max_elements=config.max_elements,
                        input_views=config.input_views, cupy_inputs=config.cupy_inputs,
                        ops=ALL_OPS + MATMUL_OPS if config.products else ALL_OPS)
    return programs(sizes=config.sizes, max_side=config.max_side, max_steps=config.max_steps,
                    max_dims=config.max_dims, max_elements=config.max_elements,
                    input_views=config.input_views, cupy_inputs=config.cupy_inputs,
                    ops=ALL_OPS + MATMUL_OPS, dtypes=REDUCED_PRECISION_DTYPES,
                    matmul_precision=config.matmul_precision)


def _program_bytes(seed: int, index: int) -> bytes:
    return random.Random(f"fusejit-fuzz:{seed}:{index}").randbytes(PROGRAM_BYTES)


def _quiet_settings(**kwargs: Any) -> Any:
    from hypothesis import HealthCheck, Verbosity, settings
    return settings(deadline=None, suppress_health_check=list(HealthCheck),
                    verbosity=Verbosity.quiet, **kwargs)


class _ProgramFailed(Exception):  # noqa: N818  (a signal inside the fuzzer, not an error)
    """Raised inside a Hypothesis test to mark a failing program (carries the outcome)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.kind)
        self.outcome = outcome


def _memory_database(value: bytes | None = None) -> Any:
    """A Hypothesis example database with one entry, kept under every *secondary* key.

    ``fuzz_one_input`` saves a failing choice sequence under its test's
    secondary key (``<digest>.secondary``); the shrinking run, a different
    test, finds it under its own secondary key. (Hypothesis shrinks what it
    finds there, while it replays the entries of a primary key as already
    shrunk.) Saves to other keys are ignored.
    """
    from hypothesis.database import ExampleDatabase

    secondary = b".secondary"

    class OneEntry(ExampleDatabase):
        def __init__(self) -> None:
            super().__init__()
            self.value = value

        def save(self, key: bytes, value: bytes) -> None:
            if key.endswith(secondary):
                self.value = value

        def fetch(self, key: bytes) -> Iterator[bytes]:
            if self.value is not None and key.endswith(secondary):
                yield self.value

        def delete(self, key: bytes, value: bytes) -> None:
            return None

    return OneEntry()


class _Target:
    """A Hypothesis fuzz target over ``strategy``: draws program ``i`` and runs ``check`` on it."""

    def __init__(self, strategy: Any, check: Any) -> None:
        self.strategy = strategy
        self.check = check
        self.database = _memory_database()
        self.recipe: Recipe | None = None
        self.fuzz_one_input = self._fresh()

    def _fresh(self) -> Any:
        """A new fuzz entry point. Hypothesis keeps one per test and saves a failure only when
        it is smaller than the earlier ones from the same line, so each failure gets a new one."""
        from hypothesis import given

        @_quiet_settings(database=self.database)
        @given(self.strategy)
        def target(recipe: Recipe) -> None:
            self.recipe = recipe
            outcome = self.check(recipe)
            if outcome is not None:
                raise _ProgramFailed(outcome)

        return target.hypothesis.fuzz_one_input

    def run(self, data: bytes) -> tuple[Recipe | None, Outcome | None, bytes | None]:
        """(recipe, outcome, saved choices); recipe None when the bytes drew no program."""
        self.recipe = None
        self.database.value = None
        try:
            self.fuzz_one_input(data)
        except _ProgramFailed as failed:
            self.fuzz_one_input = self._fresh()
            return self.recipe, failed.outcome, self.database.value
        return self.recipe, None, None


def draw_program(config: FuzzConfig, index: int) -> Recipe | None:
    """Program ``index`` of ``config.seed`` (None when its bytes draw no program), unchecked."""
    recipe, _, _ = _Target(program_strategy(config), lambda r: None).run(
        _program_bytes(config.seed, index))
    return recipe


# -- shrinking ------------------------------------------------------------------------

def shrink(strategy: Any, choices: bytes, outcome: Outcome, backend: str,
           seconds: float = 60.0, jit: bool = False, *, matmul_precision: str = "ieee") -> Recipe | None:
    """The smallest program Hypothesis finds from ``choices`` that fails like ``outcome``.

    ``choices`` is a failing example as Hypothesis saved it. Shrinking stops
    after ``seconds`` (candidates tried later count as passing). None when the
    example does not fail again (a failure that depends on what ran before).
    """
    from hypothesis import Phase, given

    deadline = time.monotonic() + seconds
    failing: set[str] = set()
    passing: set[str] = set()
    last: list[Recipe] = []

    @_quiet_settings(database=_memory_database(choices), phases=[Phase.reuse, Phase.shrink],
                     max_examples=10 ** 6, report_multiple_bugs=False)
    @given(strategy)
    def minimal(recipe: Recipe) -> None:
        key = recipe_key(recipe)
        if key not in failing and key not in passing and time.monotonic() < deadline:
            got = classify(recipe, backend, jit=jit, matmul_precision=matmul_precision)
            (failing if got is not None and got.same_bug(outcome) else passing).add(key)
        if key in failing:  # one raise site: Hypothesis tells failures apart by their line
            last.append(recipe)
            raise _ProgramFailed(outcome)

    try:
        minimal()
    except _ProgramFailed:
        return _drop_dead_code(last[-1], outcome, backend, jit, matmul_precision)
    except Exception:  # noqa: BLE001  (Hypothesis's Flaky and the like: keep the original)
        return None
    return None


def prune(recipe: Recipe) -> Recipe:
    """The recipe without the steps and inputs that no output depends on (references renumbered).

    Hypothesis shrinks the choices that draw a program; a step drawn early and
    never used again often survives that, so the fuzzer drops such dead code
    afterwards (and keeps the result only if it still fails the same way).
    """
    first = len(recipe.inputs)
    live = set(recipe.outputs)
    for k in range(len(recipe.steps) - 1, -1, -1):
        if first + k in live:
            live.update(a.index for a in recipe.steps[k].args if isinstance(a, Ref))
    kept_inputs = [i for i in range(first) if i in live]
    kept_steps = [k for k in range(len(recipe.steps)) if first + k in live]
    renumber = {old: new for new, old in enumerate(kept_inputs + [first + k for k in kept_steps])}

    def ref(a: Any) -> Any:
        return Ref(renumber[a.index]) if isinstance(a, Ref) else a

    steps = tuple(Step(s.kind, s.name, tuple(ref(a) for a in s.args), s.kwargs)
                  for s in (recipe.steps[k] for k in kept_steps))
    views = tuple(recipe.view(i) for i in kept_inputs) if recipe.views else ()
    names = tuple(recipe.input_names[i] for i in kept_inputs) if recipe.input_names else ()
    return Recipe(tuple(recipe.inputs[i] for i in kept_inputs), steps,
                  tuple(renumber[o] for o in recipe.outputs), input_names=names,
                  views=views if any(v is not None for v in views) else ())


def _drop_dead_code(recipe: Recipe, outcome: Outcome, backend: str, jit: bool = False,
                    matmul_precision: str = "ieee") -> Recipe:
    """Remove outputs one at a time and ``prune``, while the program still fails like ``outcome``."""
    def size(r: Recipe) -> tuple[int, int, int]:
        return len(r.steps), len(r.inputs), len(r.outputs)

    best = recipe
    while True:
        candidates = [prune(best)]
        if len(best.outputs) > 1:
            candidates += [prune(dataclasses.replace(best, outputs=best.outputs[:j] + best.outputs[j + 1:]))
                           for j in range(len(best.outputs))]
        for candidate in candidates:
            if size(candidate) < size(best):
                got = classify(candidate, backend, jit=jit, matmul_precision=matmul_precision)
                if got is not None and got.same_bug(outcome):
                    best = candidate
                    break
        else:
            return best


# -- regression files -------------------------------------------------------------------

def _literal(x: Any) -> str:
    """Python source for a step argument (``Ref(i)`` for references, exact floats)."""
    if isinstance(x, Ref):
        return f"Ref({x.index})"
    if isinstance(x, tuple):
        inner = ", ".join(_literal(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(_literal(v) for v in x) + "]"
    if isinstance(x, slice):
        return f"slice({_literal(x.start)}, {_literal(x.stop)}, {_literal(x.step)})"
    if x is Ellipsis:
        return "..."
    if isinstance(x, float) and not math.isfinite(x):
        return "np.nan" if math.isnan(x) else ("np.inf" if x > 0 else "-np.inf")
    return repr(x)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


#: Lines of a regression file stay within this width (the project's ruff line length is 110).
WIDTH = 100


def _wrapped_array(prefix: str, a: np.ndarray, suffix: str = "") -> list[str]:
    """``prefix`` + source for ``a`` + ``suffix``, broken into lines of at most ``WIDTH``."""
    one_line = f"{prefix}{array_source(a)}{suffix}"
    if len(one_line) <= WIDTH:
        return [one_line]
    if a.size > LITERAL_LIMIT:  # base64: a parenthesized run of string pieces
        head, _, rest = array_source(a).partition("b64decode(")
        text = rest[1:rest.index("'", 1)]
        pieces = [text[k:k + WIDTH - 10] for k in range(0, len(text), WIDTH - 10)]
        return ([f"{prefix}{head}b64decode("] + [f"    {p!r}" for p in pieces]
                + [f")), allow_pickle=False){suffix}"])
    items = [_nested_source(v) for v in a.ravel().tolist()]
    lines, line = [f"{prefix}np.array(["], "    "
    for item in items:
        if len(line) + len(item) + 2 > WIDTH and line.strip():
            lines.append(line.rstrip())
            line = "    "
        line += item + ", "
    lines.append(line.rstrip())
    lines.append(f"], dtype=np.{a.dtype}).reshape({a.shape}){suffix}")
    return lines


def _wrap_text(text: str, indent: str = "    ") -> str:
    out = []
    for line in text.splitlines():
        if len(indent + line) <= WIDTH:
            out.append(indent + line if line else "")
        else:
            out.extend(textwrap.wrap(line, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                                     break_long_words=True, break_on_hyphens=False))
    return "\n".join(out)


def regression_source(recipe: Recipe, outcome: Outcome, backend: str, *, test_name: str,
                      found: str = "", jit: bool = False, matmul_precision: str = "ieee",
                      large: bool = False) -> str:
    """A self-contained pytest file that checks ``recipe`` on ``backend`` against NumPy.

    The module docstring shows the program as source and how it failed; the
    inputs are written out literally (views as their base and view steps), the
    recipe as ``Step`` data (each step under its source as a comment), and the
    test calls ``fusejit.testing.check_program`` (with ``matmul_precision`` other than
    ``ieee``: at that precision and its tolerance). Lines fit in ``WIDTH``.
    """
    check_matmul_precision(matmul_precision)
    lines_of_message = outcome.message.splitlines()
    if len(lines_of_message) > 24:
        lines_of_message = lines_of_message[:24] + ["..."]
    message = "\n".join(lines_of_message).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    doc = [f"Regression test written by `fusejit fuzz`: {outcome.kind} on the {backend} backend.", ""]
    if matmul_precision != "ieee":
        doc += [f"float32 products at precision={matmul_precision}, checked at "
                f"fusejit.testing.matmul_tolerance({matmul_precision!r}).", ""]
    if large:
        doc += ["Planned as large arrays are (fusejit.testing.large_plans).", ""]
    if found:
        doc += [found, ""]
    doc += ["What went wrong:", "", _wrap_text(message), "", "The program (inputs below):", "",
            _wrap_text(recipe.source().replace("\\", "\\\\"))]
    inputs: list[str] = []
    view_names: list[str] = []
    for i, a in enumerate(recipe.inputs):
        view = recipe.view(i)
        if view is None:
            inputs += _wrapped_array(f"v{i} = ", a)
            view_names.append("None")
        else:
            inputs += _wrapped_array(f"v{i}_base = ", view.base)
            inputs.append(f"v{i}_view = InputView(v{i}_base, module={view.module!r}, steps=(")
            inputs += [f"    {_literal(step)}," for step in view.steps]
            inputs.append("))")
            inputs.append(f"v{i} = v{i}_view.build(np, copy=False)")
            view_names.append(f"v{i}_view")
    first = len(recipe.inputs)
    steps_src = []
    for k, step in enumerate(recipe.steps):
        steps_src.append(f"        # v{first + k} = {step.source()}")
        steps_src.append(f"        Step({step.kind!r}, {step.name!r}, {_literal(step.args)}, "
                         f"{_literal(step.kwargs)}),")
    names = ["InputView"] if recipe.views else []
    names += ["Recipe"] + (["Ref"] if any(isinstance(a, Ref) for st in recipe.steps for a in st.args)
                           else []) + (["Step"] if recipe.steps else []) + ["check_program"]
    header = ['"""' + "\n".join(doc) + '\n"""', "", "from __future__ import annotations", ""]
    if any("b64decode" in line for line in inputs):
        header += ["import base64", "import io", ""]
    header += ["import numpy as np", "", f"from fusejit.testing import {', '.join(names)}", "", ""]
    views_src = f"    views=({', '.join(view_names)},),\n" if recipe.views else ""
    tuple_of_inputs = ", ".join(f"v{i}" for i in range(first)) + ("," if first == 1 else "")
    recipe_src = ("RECIPE = Recipe(\n"
                  f"    inputs=({tuple_of_inputs}),\n"
                  "    steps=(\n" + "".join(line + "\n" for line in steps_src) + "    ),\n"
                  f"    outputs={_literal(recipe.outputs)},\n" + views_src + ")\n")
    options = (", jit=True" if jit else "") + \
        (f", matmul_precision={matmul_precision!r}" if matmul_precision != "ieee" else "") + \
        (", large=True" if large else "")
    test = (f"\n\ndef {test_name}() -> None:\n"
            f"    check_program(RECIPE, backend={backend!r}{options})\n")
    return "\n".join(header) + "\n".join(inputs) + "\n\n" + recipe_src + test


def write_regression(out: Path, recipe: Recipe, outcome: Outcome, backend: str,
                     found: str = "", jit: bool = False, matmul_precision: str = "ieee",
                     large: bool = False) -> Path:
    """Write ``regression_source`` to ``out/test_fuzz_<kind>_<hash>.py``; returns the path."""
    mode = f"{backend}+jit" if jit else backend
    if matmul_precision != "ieee":
        mode += f"+{matmul_precision}"
    if large:
        mode += "+large"
    digest = hashlib.sha256(f"{mode}:{outcome.kind}:{recipe_key(recipe)}".encode()).hexdigest()[:10]
    name = f"test_fuzz_{outcome.kind}_{digest}"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.py"
    path.write_text(regression_source(recipe, outcome, backend, test_name=name, found=found, jit=jit,
                                      matmul_precision=matmul_precision,
                                      large=large), encoding="utf-8")
    return path


# -- progress -------------------------------------------------------------------------

class Progress:
    """The progress line on ``stream``: redrawn in place on a terminal, else a line every few seconds."""

    def __init__(self, stream: TextIO | None, every: float = 5.0) -> None:
        self.stream = stream
        self.tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self.every = 0.1 if self.tty else every
        self.last = -math.inf if self.tty else time.monotonic()  # a log gets its first line later
        self.width = 0

    def show(self, report: FuzzReport, note: str = "", *, force: bool = False) -> None:
        """Write the line (rate-limited unless ``force``)."""
        if self.stream is None:
            return
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        self.last = now
        rate = report.programs / report.elapsed if report.elapsed > 0 else 0.0
        counts = report.counts()
        line = (f"fuzz {report.config.backend}: {report.programs} programs, {rate:.1f}/s, "
                f"failures: " + ", ".join(f"{k} {counts[k]}" for k in KINDS))
        if note:
            line += f" ({note})"
        if self.tty:
            pad = max(self.width - len(line), 0)
            self.stream.write("\r" + line + " " * pad)
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        """End the in-place line."""
        if self.stream is not None and self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()


# -- the run --------------------------------------------------------------------------

def _check_backend(backend: str) -> None:
    import fusejit as fj
    with fj.using_backend(backend):
        fj.realize(fj.asarray(np.arange(3.0)) + 1)


def fuzz(config: FuzzConfig, *, progress: TextIO | None = None) -> FuzzReport:
    """Draw, check, shrink and write failures until ``config.seconds`` or ``config.count``.

    Progress goes to ``progress`` (None: silent). Returns the report; failures
    are written to ``config.out`` (unless it is None).
    """
    if config.seconds is None and config.count is None:
        raise ValueError("give seconds, count or both")
    _check_backend(config.backend)
    strategy = program_strategy(config)
    report = FuzzReport(config)
    line = Progress(progress)

    def excuse(_: int) -> None:
        report.excused += 1

    target = _Target(strategy, lambda recipe: classify(recipe, config.backend, excuse, config.jit,
                                                       matmul_precision=config.matmul_precision))
    start = time.monotonic()
    index = 0
    thresholds = contextlib.ExitStack()  # (the large plans' thresholds, while it runs)
    if config.large_plans:
        thresholds.enter_context(large_plans())
    try:
        while True:
            report.elapsed = time.monotonic() - start
            if config.count is not None and index >= config.count:
                break
            if config.seconds is not None and report.elapsed >= config.seconds:
                break
            if config.max_failures is not None and len(report.failures) >= config.max_failures:
                break
            line.show(report)
            recipe, outcome, choices = target.run(_program_bytes(config.seed, index))
            index += 1
            if recipe is None:
                report.skipped += 1
                continue
            report.programs += 1
            if config.matmul_precision != "ieee" and _has_reduced_product(recipe, config.matmul_precision):
                report.reduced_products += 1
            if outcome is not None:
                report.failures.append(_record(config, strategy, index - 1, recipe, outcome, choices,
                                               report, line, start))
    except KeyboardInterrupt:  # stop, and report what was found so far
        report.interrupted = True
    finally:
        thresholds.close()
        report.elapsed = time.monotonic() - start
        line.show(report, force=True)
        line.done()
    return report


def _has_reduced_product(recipe: Recipe, precision: str) -> bool:
    """Whether ``recipe`` has a float32 GEMM at ``precision`` (False when NumPy refuses it)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return bool(reduced_precision_products(recipe, precision))
        except Exception:  # noqa: BLE001  (the reference's failure is classify's to report)
            return False


def _record(config: FuzzConfig, strategy: Any, index: int, recipe: Recipe, outcome: Outcome,
            choices: bytes | None, report: FuzzReport, line: Progress, start: float) -> Failure:
    """Shrink one failure (if asked) and write its regression file (if there is an ``out``)."""
    shrunk = None
    if config.shrink and choices is not None:
        report.elapsed = time.monotonic() - start
        line.show(report, f"shrinking a {outcome.kind} from program {index}", force=True)
        shrunk = shrink(strategy, choices, outcome, config.backend, config.shrink_seconds, config.jit,
                        matmul_precision=config.matmul_precision)
    failure = Failure(index, outcome, recipe, shrunk if shrunk is not None else recipe, shrunk is not None)
    if shrunk is not None:  # the message of the shrunk program, not the original's
        failure.outcome = classify(shrunk, config.backend, jit=config.jit,
                                   matmul_precision=config.matmul_precision) or outcome
    if config.out is not None:
        found = (f"Found as program {index} of `{command(config)}`"
                 + (", then shrunk." if shrunk is not None else " (not shrunk)."))
        failure.path = write_regression(config.out, failure.recipe, failure.outcome, config.backend, found,
                                        config.jit, config.matmul_precision, config.large_plans)
    return failure


def command(config: FuzzConfig) -> str:
    """The ``fusejit fuzz`` command line that draws the same programs as ``config``."""
    parts = ["fusejit fuzz", f"--backend {config.backend}", f"--seed {config.seed}"]
    defaults = FuzzConfig()
    for name in ("sizes", "max_side", "max_steps", "max_dims", "max_elements"):
        value = getattr(config, name)
        if value != getattr(defaults, name):
            parts.append(f"--{name.replace('_', '-')} {value}")
    if not config.input_views:
        parts.append("--no-views")
    if config.cupy_inputs:
        parts.append("--cupy-inputs")
    if config.jit:
        parts.append("--jit")
    if config.matmul_precision != defaults.matmul_precision:
        parts.append(f"--matmul-precision {config.matmul_precision}")
    elif config.products:
        parts.append("--products")
    if config.large_plans:
        parts.append("--large-plans")
    return " ".join(parts)


def summary(report: FuzzReport) -> str:
    """A few lines: totals by kind, then each distinct failure with its file and program."""
    counts = report.counts()
    rate = report.programs / report.elapsed if report.elapsed > 0 else 0.0
    lines = [f"{command(report.config)}: {report.programs} programs "
             f"in {report.elapsed:.1f} s ({rate:.1f}/s); failures: "
             + ", ".join(f"{k} {counts[k]}" for k in KINDS)
             + (f"; {report.skipped} draws skipped" if report.skipped else "")
             + (f"; {report.excused} rounding-sensitive mismatches excused" if report.excused else "")
             + (f"; {report.reduced_products} with a float32 product at {report.config.matmul_precision}"
                if report.config.matmul_precision != "ieee" else "")
             + ("; interrupted" if report.interrupted else "")]
    seen: set[str] = set()
    for f in report.failures:
        where = str(f.path) if f.path is not None else "(not written)"
        if where in seen:
            lines.append(f"  {f.outcome.kind}: program {f.index}, same as {where}")
            continue
        seen.add(where)
        first = f.outcome.headline()
        lines.append(f"  {f.outcome.kind}: program {f.index} -> {where}\n    {first}")
        lines.append(_indent(f.recipe.source(), "    | "))
    return "\n".join(lines)


def main(config: FuzzConfig, stream: TextIO | None = None) -> int:
    """Run ``fuzz`` with progress on stderr and the summary on stdout; 0 if nothing failed, else 1."""
    report = fuzz(config, progress=sys.stderr if stream is None else stream)
    print(summary(report))
    if report.interrupted and report.ok:
        return 130
    return 0 if report.ok else 1
