"""Property-testing helpers: random fusejit programs checked against NumPy.

fusejit promises NumPy's answers: the same values, dtypes and shapes. This
module lets you check that promise for your own code and for random code.

The pieces
----------

``Recipe``
    A small program as data: input arrays plus a list of steps such as
    ``v3 = xp.add(v0, v2)`` or ``v4 = xp.sum(v3, axis=(0, -1), keepdims=True)``.
    A recipe is *applied to a module*: ``recipe(np, *arrays)`` runs it on NumPy,
    ``recipe(fj, *tensors)`` records it with fusejit. ``repr(recipe)`` is
    runnable Python, so a failing example reads as the program that failed.

``programs(...)``
    A Hypothesis strategy drawing random recipes: random shapes that
    broadcast, 0-d and empty dimensions, every supported dtype, NaN and
    infinities, elementwise ops (functions and operators), views (reshape,
    transpose, slicing with steps, integer indexing, flip, ...), reductions
    over random axes with ``keepdims``, composites (softmax, layer_norm, ...),
    and several outputs sharing subexpressions.

``check_program(recipe, backend=None)``
    Runs the recipe on NumPy and on fusejit (realizing all outputs together
    with ``fj.realize``, on ``backend`` or the current one) and asserts each
    output matches with ``assert_matches_numpy``.

``assert_matches_numpy(actual, expected)``
    Same dtype, same shape, and equal values: exactly for bool and integer
    results; for floats within ``rtol``/``atol`` of the dtype (``TOLERANCES``),
    with NaN equal to NaN and infinities equal only to themselves.

Example
-------

Check a function of your own on random inputs::

    import numpy as np
    import fusejit as fj
    from fusejit.testing import assert_matches_numpy

    def gelu_ish(xp, x):
        return x * (1 / (1 + xp.exp(-1.702 * x)))

    x = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    assert_matches_numpy(gelu_ish(fj, fj.asarray(x)), gelu_ish(np, x))

Property-test random programs on a backend (Hypothesis required)::

    from hypothesis import given
    from fusejit.testing import programs, check_program

    @given(programs())
    def test_interpret_backend(recipe):
        check_program(recipe, backend="interpret")

Restrict what is drawn with the arguments of ``programs`` (``dtypes``,
``ops``, ``max_steps``, ``allow_nan``, ``max_side``...). ``numpy_reference``
returns a NumPy implementation for fusejit functions NumPy lacks (sigmoid,
rsqrt, erf, softmax, log_softmax, layer_norm, rms_norm, logsumexp), so a
recipe runs unchanged on both modules.

Tolerances
----------

Integer and bool results must be identical: integer arithmetic (wrapping
included) and comparisons have exactly one right answer. Floats are compared
with ``|actual - expected| <= atol + rtol * |expected|`` where both ``rtol``
and ``atol`` depend on the result dtype: float16 1e-2 (11-bit mantissa, ulp
about 1e-3, and a GPU computes float16 math in float32 and rounds once,
where NumPy may round after each step), float32 1e-5 (about 100 ulp: room for
a different summation order in reductions and for libdevice versus libm
transcendental functions, which differ by a few ulp), float64 1e-12 (the same
reasons at double precision). The inputs drawn by ``programs`` are bounded
(floats in [-4, 4], small integers) so that chains of a few ops stay
well-conditioned enough for these tolerances.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Recipe", "Step", "Ref", "programs", "check_program", "assert_matches_numpy",
           "numpy_reference", "TOLERANCES", "tolerance", "program_tolerance", "run_numpy", "run_fusejit"]

#: (rtol, atol) by float dtype; see the module docstring for why.
TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (1e-2, 1e-2),
    np.dtype(np.float32): (1e-5, 1e-5),
    np.dtype(np.float64): (1e-12, 1e-12),
}


def tolerance(dtype: Any) -> tuple[float, float]:
    """``(rtol, atol)`` used for results of ``dtype``; ``(0, 0)`` (exact) for ints and bools."""
    return TOLERANCES.get(np.dtype(dtype), (0.0, 0.0))


# -- comparing ------------------------------------------------------------------

def _host(value: Any) -> np.ndarray:
    """A host ndarray from a fusejit Tensor, CuPy array, NumPy array or NumPy scalar."""
    numpy_method = getattr(value, "numpy", None)
    if callable(numpy_method) and not isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(numpy_method())
    get = getattr(value, "get", None)
    if callable(get) and not isinstance(value, (np.ndarray, np.generic)):
        return np.asarray(get())
    return np.asarray(value)


def assert_matches_numpy(actual: Any, expected: Any, *, rtol: float | None = None,
                         atol: float | None = None, err_msg: str = "") -> None:
    """Assert that a fusejit result equals NumPy's: dtype, shape and values.

    ``actual`` may be a Tensor (it is realized), a NumPy or CuPy array;
    ``expected`` is what NumPy returned (an array or a NumPy scalar). Ints and
    bools must match exactly; floats within the dtype's tolerance (override
    with ``rtol``/``atol``), NaN equal to NaN, infinities with the same sign.
    Raises AssertionError describing the first difference.
    """
    a, e = _host(actual), _host(expected)
    prefix = f"{err_msg}\n" if err_msg else ""
    if a.dtype != e.dtype:
        raise AssertionError(f"{prefix}dtype differs: fusejit {a.dtype}, NumPy {e.dtype}")
    if a.shape != e.shape:
        raise AssertionError(f"{prefix}shape differs: fusejit {a.shape}, NumPy {e.shape}")
    if e.dtype.kind in "biu":
        np.testing.assert_array_equal(a, e, err_msg=prefix + "values differ (exact comparison)")
        return
    default_rtol, default_atol = tolerance(e.dtype)
    np.testing.assert_allclose(
        a.astype(np.float64), e.astype(np.float64),
        rtol=default_rtol if rtol is None else rtol, atol=default_atol if atol is None else atol,
        equal_nan=True, err_msg=prefix + f"values differ ({e.dtype})")


# -- NumPy versions of fusejit functions that NumPy lacks ------------------------

def _float_loop_dtype(x: np.ndarray, ufunc: str = "exp") -> np.dtype:
    """The dtype NumPy's float ufuncs compute ``x`` in (float16 for int8, float64 for int64...)."""
    return np.dtype(getattr(np, ufunc).resolve_dtypes((x.dtype, None))[-1])


def _via_float64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Any], np.ndarray]:
    def ref(x: Any) -> np.ndarray:
        x = np.asarray(x)
        out_dt = _float_loop_dtype(x)
        with np.errstate(all="ignore"):
            return np.asarray(fn(x.astype(np.float64))).astype(out_dt)
    return ref


def _floaty(x: Any) -> np.ndarray:
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _np_logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    x = _floaty(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else None)


def _np_softmax(x: Any, axis: int = -1) -> np.ndarray:
    x = _floaty(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _np_log_softmax(x: Any, axis: int = -1) -> np.ndarray:
    x = _floaty(x)
    s = x - np.max(x, axis=axis, keepdims=True)
    return s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))


def _np_layer_norm(x: Any, weight: Any = None, bias: Any = None, axis: Any = -1,
                   eps: float = 1e-5) -> np.ndarray:
    x = _floaty(x)
    c = x - np.mean(x, axis=axis, keepdims=True)
    y = c / np.sqrt(np.mean(c * c, axis=axis, keepdims=True) + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _np_rms_norm(x: Any, weight: Any = None, axis: Any = -1, eps: float = 1e-6) -> np.ndarray:
    x = _floaty(x)
    y = x / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)
    return y * weight if weight is not None else y


_NUMPY_EXTRAS: dict[str, Callable[..., Any]] = {
    "sigmoid": _via_float64(_np_sigmoid),
    "rsqrt": _via_float64(lambda x: 1 / np.sqrt(x)),
    "erf": _via_float64(np.vectorize(math.erf, otypes=[np.float64])),
    "logsumexp": _np_logsumexp,
    "softmax": _np_softmax,
    "log_softmax": _np_log_softmax,
    "layer_norm": _np_layer_norm,
    "rms_norm": _np_rms_norm,
}


def numpy_reference(name: str) -> Callable[..., Any]:
    """NumPy's function ``name``, or fusejit's NumPy reference for one NumPy lacks."""
    if name in _NUMPY_EXTRAS:
        return _NUMPY_EXTRAS[name]
    return getattr(np, name)


def _function(xp: Any, name: str) -> Callable[..., Any]:
    if xp is np:
        return numpy_reference(name)
    return getattr(xp, name)


# -- recipes ----------------------------------------------------------------------

@dataclass(frozen=True)
class Ref:
    """A reference to value ``index`` of a recipe (inputs first, then step results)."""

    index: int

    def __repr__(self) -> str:
        return f"v{self.index}"


@dataclass(frozen=True)
class Step:
    """One operation: ``kind`` selects how it is applied (see ``_APPLY``)."""

    kind: str
    name: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def source(self) -> str:
        """The step as Python source over a module ``xp``."""
        args = [repr(a) for a in self.args]
        kw = [f"{k}={v!r}" for k, v in self.kwargs]
        if self.kind == "operator":
            if len(args) == 1:
                return f"abs({args[0]})" if self.name == "abs" else f"{self.name}{args[0]}"
            return f"{args[0]} {self.name} {args[1]}"
        if self.kind == "method":
            return f"{args[0]}.{self.name}({', '.join(args[1:] + kw)})"
        if self.kind == "getitem":
            return f"{args[0]}[{_index_source(self.args[1])}]"
        if self.kind == "attr":
            return f"{args[0]}.{self.name}"
        if self.kind == "safe_div":
            return f"xp.{self.name}({args[0]}, xp.where({args[1]} == 0, 1, {args[1]}))"
        if self.kind == "safe_cast":
            dt = dict(self.kwargs)["dtype"]
            low = 0 if dt.startswith("u") else -100
            return (f"xp.where(xp.isfinite({args[0]}), xp.clip({args[0]}, {low}, 100), 0)"
                    f".astype({dt!r})")
        return f"xp.{self.name}({', '.join(args + kw)})"


def _index_source(index: tuple[Any, ...]) -> str:
    parts = []
    for item in index:
        if isinstance(item, slice):
            parts.append(":".join("" if v is None else str(v)
                                  for v in (item.start, item.stop, item.step)).rstrip(":") or ":")
        elif item is None:
            parts.append("None")
        elif item is Ellipsis:
            parts.append("...")
        else:
            parts.append(str(item))
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


_OPERATORS: dict[str, Callable[..., Any]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
}
_UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "-": lambda a: -a, "+": lambda a: +a, "~": lambda a: ~a, "abs": abs,
}


def _apply_step(xp: Any, step: Step, values: list[Any]) -> Any:
    args = [values[a.index] if isinstance(a, Ref) else a for a in step.args]
    kwargs = dict(step.kwargs)
    if step.kind == "operator":
        table = _UNARY_OPERATORS if len(args) == 1 else _OPERATORS
        return table[step.name](*args)
    if step.kind == "method":
        return getattr(args[0], step.name)(*args[1:], **kwargs)
    if step.kind == "getitem":
        return args[0][step.args[1]]
    if step.kind == "attr":
        return getattr(args[0], step.name)
    if step.kind == "safe_div":  # integer // and % with a nonzero divisor
        a, b = args
        return _function(xp, step.name)(a, xp.where(b == 0, 1, b))
    if step.kind == "safe_cast":  # float -> int casts only of in-range finite values
        (a,) = args
        target = np.dtype(kwargs["dtype"])
        low = 0 if target.kind == "u" else -100
        a = xp.where(xp.isfinite(a), xp.clip(a, low, 100), 0)
        return a.astype(target)
    return _function(xp, step.name)(*args, **kwargs)


@dataclass(frozen=True)
class Recipe:
    """A program as data: ``inputs`` (arrays), ``steps``, and the ``outputs`` (value indices).

    Call it as ``recipe(xp, *arrays)`` with ``xp`` the module (``numpy`` or
    ``fusejit``) and the inputs converted for it (``recipe.inputs`` by
    default, converted with ``xp.asarray``); it returns a tuple of outputs.
    """

    inputs: tuple[np.ndarray, ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    input_names: tuple[str, ...] = field(default=())

    def __call__(self, xp: Any, *arrays: Any) -> tuple[Any, ...]:
        if not arrays:
            arrays = tuple(xp.asarray(a) for a in self.inputs)
        values = list(arrays)
        with np.errstate(all="ignore"):
            for step in self.steps:
                values.append(_apply_step(xp, step, values))
        return tuple(values[i] for i in self.outputs)

    def source(self) -> str:
        """The recipe as a Python function of ``xp`` and the inputs."""
        params = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        lines = [f"def program(xp, {params}):" if params else "def program(xp):"]
        base = len(self.inputs)
        for i, step in enumerate(self.steps):
            lines.append(f"    v{base + i} = {step.source()}")
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        shown = []
        with np.printoptions(threshold=50, precision=4):
            for i, a in enumerate(self.inputs):
                shown.append(f"v{i} = np.array({a.tolist()!r}, dtype=np.{a.dtype}).reshape({a.shape})")
        return "\n".join([self.source(), "# inputs:", *shown])


def run_numpy(recipe: Recipe) -> list[np.ndarray]:
    """The recipe's outputs computed by NumPy (warnings silenced), as arrays."""
    values = _numpy_values(recipe)
    return [np.asarray(values[i]) for i in recipe.outputs]


def _numpy_values(recipe: Recipe) -> list[Any]:
    values: list[Any] = [a.copy() for a in recipe.inputs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "Degrees of freedom <= 0" from var
        for step in recipe.steps:
            values.append(_apply_step(np, step, values))
    return values


def program_tolerance(recipe: Recipe) -> tuple[float, float]:
    """``(rtol, atol)`` of the least precise float dtype of any value in the recipe.

    A float32 result computed from float16 intermediates carries float16
    rounding error, so it is compared at float16's tolerance.
    """
    tolerances = [tolerance(np.asarray(v).dtype) for v in _numpy_values(recipe)]
    return max(tolerances, default=(0.0, 0.0))


def run_fusejit(recipe: Recipe, backend: str | None = None, *, jit: bool = False
                ) -> list[np.ndarray]:
    """The recipe's outputs recorded with fusejit, realized together on ``backend``.

    With ``jit``, the recipe runs as an ``fj.jit`` function of its inputs, called twice
    (the second call replays the recorded plan); the second call's outputs are returned,
    after checking that both calls agree.
    """
    import fusejit as fj
    ctx = fj.using_backend(backend) if backend is not None else contextlib.nullcontext()
    with ctx:
        if jit:
            def program(*arrays: Any) -> tuple[Any, ...]:
                return tuple(t if isinstance(t, fj.Tensor) else fj.asarray(t)
                             for t in recipe(fj, *arrays))
            jitted = fj.jit(program)
            first = [t.numpy() for t in jitted(*[a.copy() for a in recipe.inputs])]
            second = [t.numpy() for t in jitted(*[a.copy() for a in recipe.inputs])]
            assert jitted.recordings == 1, "the second call with the same signature recorded"
            for a, b in zip(first, second):
                np.testing.assert_array_equal(a, b)
            return second
        tensors = recipe(fj, *[fj.asarray(a.copy()) for a in recipe.inputs])
        outs = [t if isinstance(t, fj.Tensor) else fj.asarray(t) for t in tensors]
        fj.realize(*outs)
        return [t.numpy() for t in outs]


def check_program(recipe: Recipe, backend: str | None = None, *, rtol: float | None = None,
                  atol: float | None = None, jit: bool = False) -> None:
    """Assert that fusejit (on ``backend``, default the current one) computes what NumPy does.

    Every output is compared with ``assert_matches_numpy``: ints and bools
    exactly, floats at the tolerance of the least precise float dtype in the
    whole recipe (``program_tolerance``) unless ``rtol``/``atol`` are given.
    The error message shows the recipe as Python source with its inputs. With
    ``jit``, the recipe runs through ``fj.jit`` (recorded once, replayed once).
    """
    expected = run_numpy(recipe)
    actual = run_fusejit(recipe, backend, jit=jit)
    assert len(actual) == len(expected)
    loosest = program_tolerance(recipe)
    for i, (a, e) in enumerate(zip(actual, expected)):
        default = max(tolerance(e.dtype), loosest) if e.dtype.kind == "f" else (0.0, 0.0)
        assert_matches_numpy(a, e, rtol=default[0] if rtol is None else rtol,
                             atol=default[1] if atol is None else atol,
                             err_msg=f"output {i} (v{recipe.outputs[i]}) of\n{recipe!r}")


# -- the strategy -------------------------------------------------------------------

ALL_DTYPES: tuple[np.dtype, ...] = tuple(np.dtype(d) for d in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64"))

UNARY_FUNCTIONS = (
    "negative", "positive", "abs", "square", "sign", "exp", "exp2", "expm1", "log", "log2",
    "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos",
    "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "sigmoid", "erf",
    "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "logical_not",
    "bitwise_not")
BINARY_FUNCTIONS = (
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum",
    "minimum", "arctan2", "less", "less_equal", "greater", "greater_equal", "equal",
    "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift")
REDUCTIONS = ("sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std", "argmax",
              "argmin", "any", "all", "logsumexp")
VIEWS = ("reshape", "transpose", "T", "expand_dims", "squeeze", "broadcast_to", "slice",
         "index", "flip")
COMPOSITES = ("softmax", "log_softmax", "layer_norm", "rms_norm")
OTHER = ("where", "clip", "astype", "full_like", "arange")
_GROUPS = (BINARY_FUNCTIONS, UNARY_FUNCTIONS, REDUCTIONS, VIEWS, BINARY_FUNCTIONS,
           COMPOSITES + OTHER)
ALL_OPS: tuple[str, ...] = (UNARY_FUNCTIONS + BINARY_FUNCTIONS + REDUCTIONS + VIEWS
                            + COMPOSITES + OTHER)

_FLOAT_ONLY = {"reciprocal"}  # integer reciprocal truncates in NumPy; fusejit refuses it
_INT_DIVISION = {"floor_divide", "remainder"}
_SHIFTS = {"left_shift", "right_shift"}


def _elements(dtype: np.dtype, allow_nan: bool) -> Any:
    from hypothesis import strategies as st
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind == "i":
        return st.integers(-100, 100)
    if dtype.kind == "u":
        return st.integers(0, 200)
    finite = st.floats(-4, 4, width=dtype.itemsize * 8, allow_subnormal=False)
    if not allow_nan:
        return finite
    return st.one_of(finite, st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0]))


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(np.shape(v))


def _dtype(v: Any) -> np.dtype:
    return np.asarray(v).dtype


def programs(*, dtypes: Sequence[Any] | None = None, ops: Sequence[str] | None = None,
             max_inputs: int = 3, max_steps: int = 6, max_dims: int = 3, max_side: int = 4,
             allow_nan: bool = True, allow_empty: bool = True, max_outputs: int = 3) -> Any:
    """A Hypothesis strategy of random ``Recipe`` objects (see the module docstring).

    ``dtypes``: input dtypes to draw from (default every supported dtype).
    ``ops``: names from ``ALL_OPS`` to use (default all). ``max_steps``: ops per
    program. ``max_dims``/``max_side``: input shapes (0-d included; sides of 0
    when ``allow_empty``). ``allow_nan``: put NaN and infinities in float inputs.
    Every drawn step is checked on NumPy as it is drawn, so a recipe never asks
    NumPy for something it rejects; it also avoids corners where NumPy's result
    is platform-defined (float to int casts of out-of-range values, integer
    division by zero, shifts by the bit width or more).
    """
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    dtype_pool = tuple(np.dtype(d) for d in (dtypes or ALL_DTYPES))
    op_pool = tuple(ops or ALL_OPS)
    unknown = set(op_pool) - set(ALL_OPS)
    if unknown:
        raise ValueError(f"unknown ops {sorted(unknown)}; choose from fusejit.testing.ALL_OPS")

    @st.composite
    def draw_recipe(draw: Any) -> Recipe:
        n_inputs = draw(st.integers(1, max_inputs))
        empty = allow_empty and draw(st.integers(0, 4)) == 0
        base = [draw(st.integers(1, max_side)) for _ in range(draw(st.sampled_from(range(max_dims + 1))))]
        if empty and base:
            base[draw(st.integers(0, len(base) - 1))] = 0
        inputs = []
        for _ in range(n_inputs):
            # a suffix of the base shape with some sides set to 1: all inputs broadcast together
            nd = len(base) if draw(st.booleans()) else draw(st.sampled_from(range(len(base) + 1)))
            shape = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in base[len(base) - nd:])
            dt = draw(st.sampled_from(dtype_pool))
            arr = draw(hnp.arrays(dt, shape, elements=_elements(dt, allow_nan)))
            inputs.append(np.array(arr, order="C"))  # ascontiguousarray makes 0-d 1-d
        values: list[Any] = list(inputs)
        steps: list[Step] = []
        n_steps = draw(st.integers(1, max_steps))
        attempts = 0
        while len(steps) < n_steps and attempts < 4 * n_steps:
            attempts += 1
            step = _draw_step(draw, st, op_pool, dtype_pool, values)
            if step is None:
                continue
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = _apply_step(np, step, values)
            except Exception:  # noqa: BLE001  (NumPy refuses: draw another step)
                continue
            steps.append(step)
            values.append(result)
        first = len(inputs)
        produced = list(range(first, len(values))) or [0]
        outputs = [produced[-1]]
        extra = draw(st.lists(st.sampled_from(produced), max_size=max(max_outputs - 1, 0),
                              unique=True))
        outputs += [i for i in extra if i not in outputs]
        return Recipe(tuple(inputs), tuple(steps), tuple(outputs))

    return draw_recipe()


def _draw_step(draw: Any, st: Any, op_pool: tuple[str, ...], dtype_pool: tuple[np.dtype, ...],
               values: list[Any]) -> Step | None:
    """One random step over the values so far, or None when the drawn op does not apply."""
    groups = [g for g in _GROUPS if any(o in op_pool for o in g)]
    group = draw(st.sampled_from(groups))
    op = draw(st.sampled_from([o for o in group if o in op_pool]))
    i = draw(st.integers(0, len(values) - 1))
    x, ref = values[i], Ref(i)
    shape, dt, nd = _shape(x), _dtype(x), len(_shape(x))

    def axis_arg() -> Any:
        """None, an int, or a tuple of distinct axes, each maybe negative."""
        if nd == 0:
            return draw(st.sampled_from([None, ()]))
        axes = draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd))
        form = draw(st.integers(0, 3))
        if form == 0:
            return None
        if form == 1 and axes:
            return axes[0] - nd if draw(st.booleans()) else axes[0]
        return tuple(a - nd if draw(st.booleans()) else a for a in axes)

    def scalar_for(dtype: np.dtype) -> Any:
        if dtype.kind == "f":
            return draw(st.sampled_from([0.5, -1.5, 2.0, 3, True, 1e-3]))
        if dtype.kind in "iu":
            return draw(st.sampled_from([1, 2, 3, 7, True]))
        return draw(st.sampled_from([True, False, 1, 2.5]))

    def partner() -> tuple[Any, Any]:
        """A second operand broadcastable with x: a value or a weak Python scalar."""
        if draw(st.integers(0, 3)) == 0:
            return scalar_for(dt), None
        candidates = []
        for j, v in enumerate(values):
            try:
                np.broadcast_shapes(shape, _shape(v))
            except ValueError:
                continue
            candidates.append(j)
        j = draw(st.sampled_from(candidates))
        return Ref(j), values[j]

    if op in UNARY_FUNCTIONS:
        if op in _FLOAT_ONLY and dt.kind != "f":
            return None
        kind = draw(st.sampled_from(["function", "function", "method_or_operator"]))
        operator_form = {"negative": "-", "positive": "+", "bitwise_not": "~", "abs": "abs"}
        if kind == "method_or_operator" and op in operator_form:
            return Step("operator", operator_form[op], (ref,))
        return Step("function", op, (ref,))
    if op in BINARY_FUNCTIONS:
        other, other_value = partner()
        odt = _dtype(other_value) if other_value is not None else None
        ints = dt.kind in "iub" and (odt is None or odt.kind in "iub")
        if op in _SHIFTS:
            if dt.kind not in "iu":
                return None
            return Step("function", op, (ref, draw(st.integers(0, 7))))
        if op in _INT_DIVISION and ints and other_value is not None:
            return Step("safe_div", op, (ref, other))
        if op == "power" and ints:
            other = draw(st.integers(0, 3))
        if op in _INT_DIVISION and ints and other in (0, False):
            return None
        args = (other, ref) if draw(st.booleans()) else (ref, other)
        symbols = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/",
                   "floor_divide": "//", "remainder": "%", "power": "**", "bitwise_and": "&",
                   "bitwise_or": "|", "bitwise_xor": "^", "less": "<", "less_equal": "<=",
                   "greater": ">", "greater_equal": ">=", "equal": "==", "not_equal": "!="}
        if op in symbols and draw(st.booleans()):
            return Step("operator", symbols[op], args)
        return Step("function", op, args)
    if op in REDUCTIONS:
        if op in ("argmax", "argmin"):
            axis = None if nd == 0 else draw(st.one_of(st.none(), st.integers(-nd, nd - 1)))
        else:
            axis = axis_arg()
        kwargs: list[tuple[str, Any]] = [("axis", axis)]
        if draw(st.booleans()):
            kwargs.append(("keepdims", True))
        if op in ("var", "std") and draw(st.booleans()):
            kwargs.append(("ddof", 1))
        if op in ("max", "min", "amax", "amin", "argmax", "argmin") and 0 in shape:
            return None  # NumPy raises: no identity
        if draw(st.booleans()) and op not in ("amax", "amin", "logsumexp"):
            return Step("method", op, (ref,), tuple(kwargs))
        return Step("function", op, (ref,), tuple(kwargs))
    if op in COMPOSITES:
        if nd == 0:
            return None
        axis = draw(st.integers(-nd, nd - 1))
        if op in ("layer_norm", "rms_norm") and draw(st.booleans()):
            w = Ref(i) if draw(st.booleans()) else 2.0
            extra = (w, 0.5) if op == "layer_norm" else (w,)
            return Step("function", op, (ref, *extra), (("axis", axis),))
        return Step("function", op, (ref,), (("axis", axis),))
    if op == "reshape":
        size = int(np.prod(shape))
        options: list[tuple[int, ...]] = [(-1,), (size,), (1, -1) if size else (0, 1)]
        if nd >= 2:
            options.append((-1, shape[-1]) if shape[-1] else (shape[0], 0, -1)[:2])
            options.append(tuple(reversed(shape)))
        target = draw(st.sampled_from(options))
        if draw(st.booleans()):
            return Step("method", "reshape", (ref, *target))
        return Step("function", "reshape", (ref, target))
    if op == "transpose":
        perm = tuple(draw(st.permutations(range(nd))))
        if draw(st.booleans()):
            perm = tuple(p - nd if k % 2 else p for k, p in enumerate(perm))
        return Step("function", "transpose", (ref, perm))
    if op == "T":
        return Step("attr", "T", (ref,))
    if op == "expand_dims":
        return Step("function", "expand_dims", (ref, draw(st.integers(-nd - 1, nd))))
    if op == "squeeze":
        ones = [a for a, d in enumerate(shape) if d == 1]
        axis = draw(st.one_of(st.none(), st.sampled_from(ones))) if ones else None
        return Step("function", "squeeze", (ref,), (("axis", axis),))
    if op == "broadcast_to":
        target = (draw(st.integers(0 if 0 in shape else 1, 3)),) + tuple(
            draw(st.integers(1, 3)) if d == 1 else d for d in shape)
        return Step("function", "broadcast_to", (ref, target))
    if op in ("slice", "index"):
        if nd == 0:
            return None
        index: list[Any] = []
        for d in shape:
            if op == "index" and d and draw(st.booleans()):
                index.append(draw(st.integers(-d, d - 1)))
            else:
                start = draw(st.one_of(st.none(), st.integers(-d - 1, d + 1)))
                stop = draw(st.one_of(st.none(), st.integers(-d - 1, d + 1)))
                step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
                index.append(slice(start, stop, step))
        if draw(st.integers(0, 3)) == 0:
            index.insert(draw(st.integers(0, len(index))), None)
        return Step("getitem", "getitem", (ref, tuple(index)))
    if op == "flip":
        return Step("function", "flip", (ref,), (("axis", axis_arg()),))
    if op == "where":
        a, _ = partner()
        b = scalar_for(dt) if draw(st.booleans()) else ref
        return Step("function", "where", (ref, a, b))  # any dtype: nonzero is true
    if op == "clip":
        if dt.kind == "b":
            return None
        lo = draw(st.sampled_from([None, 0, 1, -1.5 if dt.kind == "f" else 2]))
        hi = draw(st.sampled_from([None, 3, 50])) if lo is not None else 3
        return Step("function", "clip", (ref, lo, hi))
    if op == "astype":
        target = draw(st.sampled_from(dtype_pool))
        if dt.kind == "f" and target.kind in "iu":
            return Step("safe_cast", "astype", (ref,), (("dtype", target.name),))
        return Step("method", "astype", (ref, target.name))
    if op == "full_like":
        fill = scalar_for(dt)
        return Step("function", "full_like", (ref, fill))
    if op == "arange":
        return Step("function", "arange", (draw(st.integers(-3, 3)), draw(st.integers(3, 8))))
    return None  # pragma: no cover
