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
``ops``, ``max_steps``, ``allow_nan``, ``max_side``...), or widen it:
``sizes="mixed"`` (sides up to a few hundred and at block boundaries),
``input_views=True`` (broadcast, transposed, sliced and reversed NumPy views
as inputs, recorded in ``Recipe.views``), ``cupy_inputs=True``. ``fusejit
fuzz`` (``fusejit/fuzz.py``) draws with these and shrinks what fails. Matrix products are
drawn only when asked for: ``programs(ops=ALL_OPS + MATMUL_OPS)`` adds
``xp.matmul(a, b)``, ``a @ b`` and ``xp.matmul(a, xp.swapaxes(b, -1, -2))`` over
values whose shapes multiply (1-D, batched and broadcast ones included). ``numpy_reference``
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

float32 products at a reduced precision (``precision="tf32"`` or ``"tf32x3"``,
``FUSEJIT_MATMUL_PRECISION``): pass ``matmul_precision=`` to ``check_program``
(and to ``programs``, ``output_tolerances``, ``sensitive_step``). fusejit then
records the recipe's products at that precision (``using_matmul_precision``),
NumPy stays the reference, and a float value computed from such a product
(directly or downstream) is compared at ``matmul_tolerance(precision)``: for
``tf32`` rtol and atol 10 * 2**-10 (about 1e-2, float16's class), ``atol``
scaled by the largest magnitude it is computed from; ``tf32x3`` keeps float32's.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .frontend.linalg import PRECISION_VARIABLE
from .ir.ops import MATMUL_PRECISIONS

__all__ = ["Recipe", "Step", "Ref", "InputView", "programs", "check_program", "assert_matches_numpy",
           "random_array", "array_source", "numpy_reference", "TOLERANCES", "tolerance",
           "program_tolerance", "output_tolerances", "output_mismatches", "run_numpy",
           "run_fusejit", "recorded_inputs", "MATMUL_OPS",
           "matmul_error_bound", "matmul_tolerance", "using_matmul_precision",
           "reduced_precision_products", "MATMUL_UNIT_ROUNDOFF", "MATMUL_TOLERANCE_ROUNDOFFS",
           "large_plans", "LARGE_PLAN_THRESHOLDS"]

#: (rtol, atol) by float dtype; see the module docstring for why.
TOLERANCES: dict[np.dtype, tuple[float, float]] = {
    np.dtype(np.float16): (1e-2, 1e-2),
    np.dtype(np.float32): (1e-5, 1e-5),
    np.dtype(np.float64): (1e-12, 1e-12),
}


#: Relative error of one accumulated step and of the rounded result of a matrix product, by
#: (dtype, precision): float16 and float32 accumulate in float32 (tensor cores, which float16
#: uses, may truncate rather than round: twice float32's unit roundoff), float64 in float64;
#: "tf32" rounds each input to 10 mantissa bits first, "tf32x3" keeps about 21 of them.
MATMUL_UNIT_ROUNDOFF: dict[tuple[str, str], tuple[float, float]] = {
    ("float16", "ieee"): (2.0 ** -23, 2.0 ** -11),
    ("float32", "ieee"): (2.0 ** -24, 2.0 ** -24),
    ("float32", "tf32"): (2.0 ** -10, 2.0 ** -24),
    ("float32", "tf32x3"): (2.0 ** -20, 2.0 ** -24),
    ("float64", "ieee"): (2.0 ** -53, 2.0 ** -53),
}


def matmul_error_bound(a: np.ndarray, b: np.ndarray, dtype: Any, precision: str = "ieee"
                       ) -> np.ndarray:
    """Per-element bound on ``|fusejit's a @ b - the exact product|`` for a float ``dtype``.

    The classical bound of a sum of K products, in any order: ``K * u * (|a| @ |b|)``
    with ``u`` the accumulation's unit roundoff, plus the rounding of the result to
    ``dtype`` (``MATMUL_UNIT_ROUNDOFF``). NumPy's own result obeys it too (its float16
    ``matmul`` also adds in float32 and rounds once), so compare both with the exact
    product (float64 inputs and sums), not with each other.
    """
    u_acc, u_out = MATMUL_UNIT_ROUNDOFF[(np.dtype(dtype).name, precision)]
    a64, b64 = np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64))
    k = a64.shape[-1]
    exact = np.abs(np.asarray(a, np.float64) @ np.asarray(b, np.float64))
    return k * u_acc * (a64 @ b64) + u_out * exact + np.finfo(np.dtype(dtype)).tiny


def tolerance(dtype: Any) -> tuple[float, float]:
    """``(rtol, atol)`` used for results of ``dtype``; ``(0, 0)`` (exact) for ints and bools."""
    return TOLERANCES.get(np.dtype(dtype), (0.0, 0.0))


def _check_precision(precision: str) -> str:
    if precision not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul_precision={precision!r}; choose from {', '.join(MATMUL_PRECISIONS)}")
    return precision


#: A float value computed from a float32 product at a reduced precision is compared within this
#: many of the precision's unit roundoffs (``MATMUL_UNIT_ROUNDOFF``); see ``matmul_tolerance``.
MATMUL_TOLERANCE_ROUNDOFFS = 10


def matmul_tolerance(precision: str) -> tuple[float, float]:
    """``(rtol, atol)`` of a float value computed, directly or downstream, from a float32
    matrix product (two operands of two or more dimensions: a GEMM) at ``precision``.

    ``MATMUL_TOLERANCE_ROUNDOFFS`` (10) times the unit roundoff ``u`` of the precision's
    products (``MATMUL_UNIT_ROUNDOFF``), and never below float32's own tolerance:

    * ``tf32``: 10 * 2**-10, about 9.8e-3 (float16's class, 1e-2). Each input keeps 10
      mantissa bits (``u = 2**-10``: tensor cores may truncate), so each term
      ``a[i, k] * b[k, j]`` is off by up to ``2u`` of itself and the product by up to
      ``2u * (|a| @ |b|)`` (the float32 sums add ``K * 2**-24`` of that, under ``u / 16`` up to
      K = 1024). Where the terms do not cancel that is ``2u`` of the result: ``rtol`` leaves
      five times that, room for a step downstream that doubles or triples a relative error
      (a square, a quotient of two products). Where they cancel, the output's ``atol`` (this
      atol times the largest finite magnitude among the values it is computed from, as for
      every product: ``_tolerance_of``) holds the sum of ``K`` term errors of random signs,
      about ``2u * sqrt(K)`` times a term's size, since the product's largest element is
      itself about ``sqrt(K)`` terms. It is not a worst-case bound: that is
      ``matmul_error_bound``, ``K / 2`` times wider, which would pass nearly anything.
    * ``tf32x3``: 10 * 2**-20 is below float32's 1e-5, which it keeps (with the product's
      ``atol`` scaling). Its terms are off by ``2 * 2**-20``, what ``ieee``'s float32 sums
      gather over 32 of the K terms (``K * 2**-24``), so it is judged as ``ieee`` is.
    * ``ieee``: float32's tolerance.
    """
    u = MATMUL_UNIT_ROUNDOFF[("float32", _check_precision(precision))][0]
    rtol32, atol32 = tolerance(np.float32)
    t = MATMUL_TOLERANCE_ROUNDOFFS * u
    return max(rtol32, t), max(atol32, t)


def _carried_error(precision: str) -> float:
    """The relative error of one term of a float32 product at ``precision`` (both inputs
    rounded: ``2u``), which a value computed from it carries; 0.0 for ``ieee``."""
    if precision == "ieee":
        return 0.0
    return 2 * MATMUL_UNIT_ROUNDOFF[("float32", precision)][0]


@contextlib.contextmanager
def using_matmul_precision(precision: str | None) -> Iterator[None]:
    """Within it, fusejit records float32 products without ``precision=`` at ``precision``
    (it sets ``FUSEJIT_MATMUL_PRECISION``, read when a product is recorded), then puts the
    variable back as it was (or removes it). None: leaves the variable alone."""
    if precision is None:
        yield
        return
    _check_precision(precision)
    before = os.environ.get(PRECISION_VARIABLE)
    os.environ[PRECISION_VARIABLE] = precision
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PRECISION_VARIABLE, None)
        else:
            os.environ[PRECISION_VARIABLE] = before


#: The size thresholds ``large_plans`` lowers: (module, name, value within it). Split
#: reductions from 64 reduced elements (outer ones from 256 in all), rows over 128 elements
#: too wide for a cooperative kernel, every re-reading pointwise launch last block first.
LARGE_PLAN_THRESHOLDS: tuple[tuple[str, str, Any], ...] = (
    ("fusejit.fuse.cost", "SPLIT_MIN_REDUCE", 64),
    ("fusejit.fuse.cost", "OUTER_SPLIT_MIN_ELEMENTS", 256),
    ("fusejit.fuse.cost", "REVERSE_REREAD_MIN_BYTES", 0),
    ("fusejit.codegen.heuristics", "coop_row_capacity", lambda itemsize, target="cuda": 128),
    ("fusejit.codegen.heuristics", "GEMM_SPLIT_MIN_STEPS", 2),
    ("fusejit.codegen.heuristics", "GEMM_STEPS_PER_CHUNK", 1),
    ("fusejit.frontend.linalg", "SUM_OF_PRODUCTS_MIN_K", 64),
)


@contextlib.contextmanager
def large_plans() -> Iterator[None]:
    """Within it, small programs are planned as arrays of megabytes are: the fuser's size
    thresholds are lowered (``LARGE_PLAN_THRESHOLDS``), so that split reductions, reductions
    kept apart from their broadcast back, reversed launches, split-K products (more
    chunks than the unrolled combine takes, too) and float32 products recorded as sums of
    broadcast products meet the random programs of tests and
    ``fusejit fuzz --large-plans`` (whose arrays are kilobytes). Plans built
    before or inside it are forgotten on the way in and out. Not thread-safe: it sets module
    attributes for the whole process."""
    import importlib

    from .runtime import forget_plans
    saved = []
    for module_name, name, value in LARGE_PLAN_THRESHOLDS:
        module = importlib.import_module(module_name)
        saved.append((module, name, getattr(module, name)))
        setattr(module, name, value)
    forget_plans()
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        forget_plans()


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


#: The reference norms' default epsilons (fusejit's ``layer_norm`` and ``rms_norm`` take the same).
_LAYER_NORM_EPS, _RMS_NORM_EPS = 1e-5, 1e-6


def _np_layer_norm(x: Any, weight: Any = None, bias: Any = None, axis: Any = -1,
                   eps: float = _LAYER_NORM_EPS) -> np.ndarray:
    x = _floaty(x)
    c = x - np.mean(x, axis=axis, keepdims=True)
    y = c / np.sqrt(np.mean(c * c, axis=axis, keepdims=True) + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _np_rms_norm(x: Any, weight: Any = None, axis: Any = -1, eps: float = _RMS_NORM_EPS
                 ) -> np.ndarray:
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
        if self.kind == "matmul_t":
            return f"xp.matmul({args[0]}, xp.swapaxes({args[1]}, -1, -2))"
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
    "@": lambda a, b: a @ b,
}
_UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "-": lambda a: -a, "+": lambda a: +a, "~": lambda a: ~a, "abs": abs,
}


def _apply_step(xp: Any, step: Step, values: list[Any]) -> Any:
    result = _apply_step_raw(xp, step, values)
    # NumPy returns a scalar where an op's result is 0-d, and a few ops promote NumPy scalars
    # unlike 0-d arrays (np.True_ ** 2 is int64, np.array(True) ** 2 int8); fusejit's values
    # are arrays, so the reference keeps arrays too
    return np.asarray(result) if xp is np and isinstance(result, np.generic) else result


def _apply_step_raw(xp: Any, step: Step, values: list[Any]) -> Any:
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
    if step.kind == "matmul_t":  # a product with the second operand's last two axes swapped
        return xp.matmul(args[0], xp.swapaxes(args[1], -1, -2))
    if step.kind == "safe_cast":  # float -> int casts only of in-range finite values
        (a,) = args
        target = np.dtype(kwargs["dtype"])
        low = 0 if target.kind == "u" else -100
        a = xp.where(xp.isfinite(a), xp.clip(a, low, 100), 0)
        return a.astype(target)
    return _function(xp, step.name)(*args, **kwargs)


def _float_source(v: float) -> str:
    if math.isnan(v):
        return "np.nan"
    if math.isinf(v):
        return "np.inf" if v > 0 else "-np.inf"
    return repr(v)


def _nested_source(x: Any) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested_source(v) for v in x) + "]"
    return _float_source(x) if isinstance(x, float) else repr(x)


#: Arrays with more elements than this are written as base64 ``.npy`` bytes by ``array_source``.
LITERAL_LIMIT = 4096


def array_source(a: np.ndarray, *, limit: int = LITERAL_LIMIT) -> str:
    """Python source (over ``np``) that rebuilds ``a`` exactly: its values, dtype and shape.

    Up to ``limit`` elements the values are written as a nested list literal
    (``np.nan``, ``np.inf`` for the special floats); larger arrays as the
    base64 of their ``.npy`` bytes (which needs ``import base64, io``).
    """
    a = np.asarray(a)
    if a.size <= limit:
        return f"np.array({_nested_source(a.ravel().tolist())}, dtype=np.{a.dtype}).reshape({a.shape})"
    import base64
    import io
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    text = base64.b64encode(buf.getvalue()).decode("ascii")
    return f"np.load(io.BytesIO(base64.b64decode({text!r})), allow_pickle=False)"


def random_array(shape: Sequence[int], dtype: Any, seed: int, *, allow_nan: bool = True,
                 pattern: str | None = None) -> np.ndarray:
    """A reproducible array of ``shape`` and ``dtype`` with values like those ``programs`` draws.

    ``programs`` draws small inputs element by element through Hypothesis and
    larger ones (more than ``DRAWN_LIMIT`` elements) from this function with a
    drawn ``seed``: floats uniform in [-4, 4] with about 3% NaN, infinities
    and signed zeros (when ``allow_nan``), integers in [-100, 100] (unsigned
    [0, 200]), random bools.

    ``pattern`` (one of ``VALUE_PATTERNS``) draws values that uniform ones almost never
    give, where reductions meet ties and their own identities: ``"constant"``, one value
    everywhere; ``"rows"``, each row (the last axis) one value of its own; ``"ties"``, two
    values only. The values come from ``_pattern_values``: for floats the specials
    (when ``allow_nan``), zero, one and small numbers; for integers zero, one, minus
    one and the dtype's extremes.
    """
    dt = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    rng = np.random.default_rng(seed)
    if pattern is not None:
        if pattern not in VALUE_PATTERNS:
            raise ValueError(f"pattern={pattern!r}; choose from {VALUE_PATTERNS}")
        values = _pattern_values(dt, allow_nan)
        if pattern == "constant":
            return np.full(shape, values[rng.integers(0, len(values))], dt)
        if pattern == "rows":
            rows = values[rng.integers(0, len(values), shape[:-1] + (1,) if shape else ())]
            return np.array(np.broadcast_to(rows, shape), dt)
        pair = values[rng.choice(len(values), 2, replace=False)]
        return pair[rng.integers(0, 2, shape)].astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind == "i":
        return rng.integers(-100, 101, shape).astype(dt)
    if dt.kind == "u":
        return rng.integers(0, 201, shape).astype(dt)
    out = rng.uniform(-4, 4, shape)
    if allow_nan:
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
        where = rng.random(shape) < 0.03
        out[where] = special[rng.integers(0, len(special), int(where.sum()))]
    return out.astype(dt)


#: ``random_array``'s patterns of values (``None``: uniform values)
VALUE_PATTERNS = ("constant", "rows", "ties")


def _pattern_values(dt: np.dtype, allow_nan: bool) -> np.ndarray:
    """The values ``random_array``'s patterns are made of, in ``dt``: those a reduction
    takes as its identity (the infinities, an integer dtype's extremes) among them."""
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array(sorted({0, 1, info.max, info.min} | ({-1} if dt.kind == "i" else set())),
                        dtype=dt)
    values = [0.0, -0.0, 1.0, -2.5, 0.5]
    if allow_nan:
        values += [np.inf, -np.inf, np.nan]
    return np.array(values, dtype=dt)


#: ``programs`` draws inputs of at most this many elements value by value (so Hypothesis
#: shrinks the values); larger ones come from ``random_array`` with a drawn seed.
DRAWN_LIMIT = 64

_VIEW_KINDS = ("broadcast_to", "transpose", "getitem")


@dataclass(frozen=True, eq=False)
class InputView:
    """How one recipe input is presented: a ``base`` array, view ``steps``, an array module.

    ``steps`` apply in order to the base: ``("broadcast_to", shape)`` (stride-0
    axes), ``("transpose", axes)``, ``("getitem", index)`` (basic slicing with
    steps, negative steps and integer indices). ``module`` is ``"numpy"`` or
    ``"cupy"`` (the fusejit side then gets a CuPy array; NumPy always computes
    the reference from NumPy arrays). ``origin``, when set, is Python source
    that rebuilds ``base`` (such as a ``random_array(...)`` call), shown by
    ``repr`` in place of a long literal.
    """

    base: np.ndarray
    steps: tuple[tuple[str, Any], ...] = ()
    module: str = "numpy"
    origin: str | None = None

    def build(self, xp: Any = np, *, copy: bool = True) -> Any:
        """The view over (a copy of) the base, built with array module ``xp`` (NumPy or CuPy)."""
        a = xp.asarray(self.base.copy() if copy else self.base)
        for kind, arg in self.steps:
            if kind == "broadcast_to":
                a = xp.broadcast_to(a, arg)
            elif kind == "transpose":
                a = a.transpose(arg)
            elif kind == "getitem":
                a = a[arg]
            else:
                raise ValueError(f"unknown view step {kind!r}; choose from {_VIEW_KINDS}")
        return a

    def source(self, name: str, *, literal: bool = False) -> list[str]:
        """Lines of Python (over ``np``, and ``cupy`` for a CuPy input) that bind ``name`` to the view.

        ``literal``: write the base's values even when an ``origin`` is known.
        """
        base = self.origin if self.origin is not None and not literal else array_source(self.base)
        lines = [f"{name} = {base}"]
        if self.module == "cupy":
            lines.append(f"{name} = cupy.asarray({name})")
        xp = "cupy" if self.module == "cupy" else "np"
        for kind, arg in self.steps:
            if kind == "broadcast_to":
                lines.append(f"{name} = {xp}.broadcast_to({name}, {arg!r})")
            elif kind == "transpose":
                lines.append(f"{name} = {name}.transpose({arg!r})")
            else:
                lines.append(f"{name} = {name}[{_index_source(arg)}]")
        return lines


@dataclass(frozen=True)
class Recipe:
    """A program as data: ``inputs`` (arrays), ``steps``, and the ``outputs`` (value indices).

    Call it as ``recipe(xp, *arrays)`` with ``xp`` the module (``numpy`` or
    ``fusejit``) and the inputs converted for it (``recipe.inputs`` by
    default, converted with ``xp.asarray``); it returns a tuple of outputs.

    ``views`` (optional, one entry per input, ``None`` for a plain input)
    records how each input was built (``InputView``): an input may be a
    broadcast, transposed, sliced or reversed NumPy view, or a CuPy array;
    ``inputs[i]`` is then the NumPy view ``views[i].build(np)``.
    ``check_program`` hands fusejit fresh inputs built the same way
    (``fresh_inputs``), and ``repr`` writes the view steps after the base.
    """

    inputs: tuple[np.ndarray, ...]
    steps: tuple[Step, ...]
    outputs: tuple[int, ...]
    input_names: tuple[str, ...] = field(default=())
    views: tuple[InputView | None, ...] = field(default=())

    def __call__(self, xp: Any, *arrays: Any) -> tuple[Any, ...]:
        if not arrays:
            arrays = tuple(xp.asarray(a) for a in self.inputs)
        values = list(arrays)
        with np.errstate(all="ignore"):
            for step in self.steps:
                values.append(_apply_step(xp, step, values))
        return tuple(values[i] for i in self.outputs)

    def view(self, i: int) -> InputView | None:
        """How input ``i`` is built, or None for a plain (C-contiguous NumPy) input."""
        return self.views[i] if i < len(self.views) else None

    def fresh_inputs(self, *, device: bool = False) -> list[Any]:
        """New copies of the inputs, viewed as recorded (NumPy arrays; CuPy where ``device``
        and the input's view asks for CuPy)."""
        out: list[Any] = []
        for i, a in enumerate(self.inputs):
            view = self.view(i)
            if view is None:
                out.append(a.copy())
            elif device and view.module == "cupy":
                import cupy
                out.append(view.build(cupy))
            else:
                out.append(view.build(np))
        return out

    def source(self) -> str:
        """The recipe as a Python function of ``xp`` and the inputs."""
        params = ", ".join(f"v{i}" for i in range(len(self.inputs)))
        lines = [f"def program(xp, {params}):" if params else "def program(xp):"]
        base = len(self.inputs)
        for i, step in enumerate(self.steps):
            lines.append(f"    v{base + i} = {step.source()}")
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        return "\n".join(lines)

    def input_source(self, *, literal: bool = False) -> list[str]:
        """Lines of Python (over ``np``) binding ``v0``, ``v1``, ... to the inputs, views included.

        ``literal``: write every base array's values (never a ``random_array`` call).
        """
        lines: list[str] = []
        for i, a in enumerate(self.inputs):
            view = self.view(i)
            if view is None:
                lines.append(f"v{i} = {array_source(a)}")
            else:
                lines.extend(view.source(f"v{i}", literal=literal))
        return lines

    def __repr__(self) -> str:
        lines = self.input_source()
        header = "# inputs:"
        if any("random_array(" in line for line in lines):
            header = "# inputs (from fusejit.testing import random_array):"
        return "\n".join([self.source(), header, *lines])


def run_numpy(recipe: Recipe) -> list[np.ndarray]:
    """The recipe's outputs computed by NumPy (warnings silenced), as arrays."""
    values = _numpy_values(recipe)
    return [np.asarray(values[i]) for i in recipe.outputs]


def _as_arrays(values: list[Any]) -> list[Any]:
    """NumPy scalars (an input view indexed down to one element) as 0-d arrays, which is what
    fusejit makes of them: NumPy promotes a few ops of scalars unlike 0-d arrays
    (``np.False_ ** 2`` is int64, ``np.array(False) ** 2`` int8: interpret fuzz, seed 9613),
    and the reference follows arrays, as for step results (``_apply_step``)."""
    return [np.asarray(v) if isinstance(v, np.generic) else v for v in values]


def _numpy_values(recipe: Recipe) -> list[Any]:
    values: list[Any] = _as_arrays(recipe.fresh_inputs())
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "Degrees of freedom <= 0" from var
        for step in recipe.steps:
            values.append(_apply_step(np, step, values))
    return values


def _ancestors(recipe: Recipe, outputs: Sequence[int]) -> set[int]:
    """The value indices that ``outputs`` (value indices) are computed from, themselves
    included (inputs first, then step results, as ``Ref`` counts them)."""
    n = len(recipe.inputs)
    found, stack = set(), list(outputs)
    while stack:
        i = stack.pop()
        if i not in found:
            found.add(i)
            if i >= n:
                stack.extend(a.index for a in recipe.steps[i - n].args if isinstance(a, Ref))
    return found


def sensitive_step(recipe: Recipe, outputs: Sequence[int] | None = None, *,
                   matmul_precision: str = "ieee") -> int | None:
    """The index of the first step of ``recipe`` whose NumPy result is sensitive to rounding
    (``programs``' ``stable`` filter, re-applied to a whole recipe), or None; with
    ``outputs`` (value indices), only a step those outputs are computed from counts.

    The fuzzer asks this of a program that mismatched: a drawn program passes the filter
    step by step, but a shrunk one, or one whose draw met the filter's random nudges at a
    lucky spot, may not; its mismatch is then a different rounding, not a bug.
    ``matmul_precision``: the precision fusejit ran float32 products at; values computed from
    them are nudged by that precision's error (``programs``).
    """
    _check_precision(matmul_precision)
    values: list[Any] = _as_arrays(recipe.fresh_inputs())
    n = len(values)
    counts = _ancestors(recipe, outputs) if outputs is not None else None
    exact = [True] * n
    scales = [_magnitude(v) for v in values]
    carried = ["ieee"] * n
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, step in enumerate(recipe.steps):
            result = _apply_step(np, step, values)
            if (counts is None or n + k in counts) and \
                    _rounding_sensitive(step, values, exact, result, scales, carried,
                                        matmul_precision=matmul_precision):
                return k
            _append_value(step, result, values, exact, scales, carried,
                          matmul_precision=matmul_precision)
    return None


def _product_precision(step: Step, values: list[Any], result: Any, matmul_precision: str) -> str:
    """``matmul_precision`` when ``step`` is a float32 product that fusejit computes as a GEMM
    (both operands of two or more dimensions: the one place ``precision`` applies; a product
    with a 1-D operand is a float32 sum of products), else ``"ieee"``."""
    if matmul_precision == "ieee" or _op_name(step) != "matmul" or _dtype(result) != np.float32:
        return "ieee"
    operands = [values[a.index] if isinstance(a, Ref) else a for a in step.args[:2]]
    if len(operands) < 2 or any(np.ndim(x) < 2 for x in operands):
        return "ieee"
    return matmul_precision


def reduced_precision_products(recipe: Recipe, matmul_precision: str) -> list[int]:
    """The value indices of ``recipe``'s float32 GEMM steps that an output is computed from,
    which fusejit multiplies at ``matmul_precision`` (none for ``"ieee"``)."""
    if _check_precision(matmul_precision) == "ieee":
        return []
    values = _numpy_values(recipe)
    n = len(recipe.inputs)
    live = _ancestors(recipe, recipe.outputs)
    return [n + k for k, step in enumerate(recipe.steps) if n + k in live
            and _product_precision(step, values, values[n + k], matmul_precision) != "ieee"]


def _tolerance_of(recipe: Recipe, values: list[Any], indices: Sequence[int],
                  matmul_precision: str = "ieee") -> tuple[float, float]:
    """``(rtol, atol)`` of the least precise float dtype among ``values[indices]``; with a
    matrix product among them, ``atol`` times the largest finite magnitude among them; with
    a float32 GEMM run at ``matmul_precision`` among them, at least ``matmul_tolerance``."""
    chosen = [np.asarray(values[i]) for i in indices]
    rtol, atol = max((tolerance(a.dtype) for a in chosen), default=(0.0, 0.0))
    n = len(recipe.inputs)
    if matmul_precision != "ieee" and any(
            i >= n and _product_precision(recipe.steps[i - n], values, values[i], matmul_precision)
            != "ieee" for i in indices):
        wide = matmul_tolerance(matmul_precision)
        rtol, atol = max(rtol, wide[0]), max(atol, wide[1])
    if any(i >= n and recipe.steps[i - n].name in ("matmul", "@") for i in indices):
        finite = [float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0)) for a in chosen
                  if a.dtype.kind == "f"]
        atol *= max([1.0, *finite])
    return rtol, atol


def program_tolerance(recipe: Recipe, *, matmul_precision: str = "ieee") -> tuple[float, float]:
    """``(rtol, atol)`` of the least precise float dtype of any value in the recipe.

    A float32 result computed from float16 intermediates carries float16
    rounding error, so it is compared at float16's tolerance. With a matrix
    product in the recipe, ``atol`` scales with the largest finite magnitude of any
    value: a sum of products is exact only to its terms' size (its result can
    cancel to 0 while its terms do not). ``output_tolerances`` gives each output the
    tolerance of the values it is computed from alone. ``matmul_precision``: fusejit
    multiplies float32 GEMMs at that precision, and values computed from one are compared at
    least at ``matmul_tolerance(matmul_precision)``.
    """
    values = _numpy_values(recipe)
    return _tolerance_of(recipe, values, range(len(values)), _check_precision(matmul_precision))


def output_tolerances(recipe: Recipe, *, matmul_precision: str = "ieee") -> list[tuple[float, float]]:
    """``program_tolerance`` per output, over only the values that output is computed
    from: a float16 or matrix-product step elsewhere in the program does not loosen it."""
    _check_precision(matmul_precision)
    values = _numpy_values(recipe)
    return [_tolerance_of(recipe, values, sorted(_ancestors(recipe, [i])), matmul_precision)
            for i in recipe.outputs]


def recorded_inputs(*tensors: Any) -> list[Any]:
    """The values a recorded program's inputs are bound to, in the Program's input order.

    ``fj.dump(*tensors)`` text, parsed and run (``prog.run(*recorded_inputs(*tensors))``),
    takes its arrays and the values of its scalar params this way: arrays as they are
    (NumPy or device), scalars as 0-d NumPy arrays of their dtype.
    """
    from .ir.graph import structural_key
    leaves = structural_key([t._node for t in tensors])[1]
    return [np.asarray(leaf.buffer, leaf.dtype) if leaf.op == "scalar" else leaf.buffer
            for leaf in leaves]


def run_fusejit(recipe: Recipe, backend: str | None = None, *, jit: bool = False,
                matmul_precision: str | None = None) -> list[np.ndarray]:
    """The recipe's outputs recorded with fusejit, realized together on ``backend``.

    With ``jit``, the recipe runs as an ``fj.jit`` function of its inputs, called twice
    (the second call replays the recorded plan); the second call's outputs are returned,
    after checking that both calls agree. ``matmul_precision``: float32 products are
    recorded at that precision (``using_matmul_precision``; None: as
    ``FUSEJIT_MATMUL_PRECISION`` says).
    """
    import fusejit as fj
    ctx = fj.using_backend(backend) if backend is not None else contextlib.nullcontext()
    with ctx, using_matmul_precision(matmul_precision):
        if jit:
            def program(*arrays: Any) -> tuple[Any, ...]:
                # a NumPy bool or integer scalar is a static argument of a jitted function,
                # passed as it is; the realize path and the reference take every input as an
                # array (``_as_arrays``), so it becomes a 0-d tensor here too
                inputs = [fj.asarray(a) if isinstance(a, np.generic) else a for a in arrays]
                return tuple(t if isinstance(t, fj.Tensor) else fj.asarray(t)
                             for t in recipe(fj, *inputs))
            jitted = fj.jit(program)
            first = [t.numpy() for t in jitted(*recipe.fresh_inputs(device=True))]
            second = [t.numpy() for t in jitted(*recipe.fresh_inputs(device=True))]
            assert jitted.recordings == 1, "the second call with the same signature recorded"
            for a, b in zip(first, second):
                np.testing.assert_array_equal(a, b)
            return second
        tensors = recipe(fj, *[fj.asarray(a) for a in recipe.fresh_inputs(device=True)])
        outs = [t if isinstance(t, fj.Tensor) else fj.asarray(t) for t in tensors]
        fj.realize(*outs)
        return [t.numpy() for t in outs]


def check_program(recipe: Recipe, backend: str | None = None, *, rtol: float | None = None,
                  atol: float | None = None, jit: bool = False, matmul_precision: str = "ieee",
                  large: bool = False) -> None:
    """Assert that fusejit (on ``backend``, default the current one) computes what NumPy does.

    Every output is compared with ``assert_matches_numpy``: ints and bools
    exactly, floats at the tolerance of the least precise float dtype among the
    values the output is computed from (``output_tolerances``) unless ``rtol``/``atol`` are given.
    The error message shows the recipe as Python source with its inputs. With
    ``jit``, the recipe runs through ``fj.jit`` (recorded once, replayed once).
    ``matmul_precision``: fusejit records the recipe's float32 products at that precision
    (``FUSEJIT_MATMUL_PRECISION`` is set while it runs), and outputs computed from one are
    compared at least at ``matmul_tolerance(matmul_precision)``. ``large``: fusejit plans the
    recipe as it would large arrays (``large_plans``).
    """
    _check_precision(matmul_precision)
    expected = run_numpy(recipe)
    with large_plans() if large else contextlib.nullcontext():
        actual = run_fusejit(recipe, backend, jit=jit, matmul_precision=matmul_precision)
    mismatches = output_mismatches(recipe, actual, expected,
                                   output_tolerances(recipe, matmul_precision=matmul_precision),
                                   rtol=rtol, atol=atol)
    if mismatches:
        raise AssertionError(mismatches[0][1])


def output_mismatches(recipe: Recipe, actual: Sequence[Any], expected: Sequence[np.ndarray],
                      tolerances: Sequence[tuple[float, float]], *, rtol: float | None = None,
                      atol: float | None = None, show_recipe: bool = True
                      ) -> list[tuple[int, str]]:
    """``check_program``'s comparison of computed outputs (the fuzzer shares it): per output
    that differs from NumPy's, its value index and the message of ``assert_matches_numpy``.
    ``tolerances``: per output (``output_tolerances``), unless ``rtol``/``atol`` are given."""
    assert len(actual) == len(expected) == len(tolerances)
    found = []
    for i, (a, e, tol) in enumerate(zip(actual, expected, tolerances)):
        default = max(tolerance(e.dtype), tol) if e.dtype.kind == "f" else (0.0, 0.0)
        where = f"output {i} (v{recipe.outputs[i]})" + (f" of\n{recipe!r}" if show_recipe else "")
        try:
            assert_matches_numpy(a, e, rtol=default[0] if rtol is None else rtol,
                                 atol=default[1] if atol is None else atol, err_msg=where)
        except AssertionError as exc:
            found.append((recipe.outputs[i], str(exc)))
    return found


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
#: Drawn only when named in ``ops`` (not in ``ALL_OPS``): matrix products.
MATMUL_OPS = ("matmul",)
_GROUPS = (BINARY_FUNCTIONS, UNARY_FUNCTIONS, REDUCTIONS, VIEWS, BINARY_FUNCTIONS,
           COMPOSITES + OTHER, MATMUL_OPS)
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


#: Sides that sit at block boundaries: masks, remainders and multi-block grids
#: (CUDA's pointwise block is 1024, the interpret target's 16384).
BOUNDARY_SIDES: tuple[int, ...] = (
    7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513,
    1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 16383, 16384, 16385, 65535, 65536,
    65537)

SIZES = ("small", "mixed")
_DEFAULT_MAX_SIDE = {"small": 4, "mixed": 1025}
_DEFAULT_MAX_ELEMENTS = {"small": None, "mixed": 1 << 16}


def _draw_side(draw: Any, st: Any, max_side: int, budget: int) -> int:
    """A side for ``sizes="mixed"``: mostly small, some medium and large, some at block boundaries.

    Hypothesis shrinks the first draw towards 0, so failures shrink towards small sides.
    """
    group = draw(st.integers(0, 9))
    if group <= 4:
        side = draw(st.integers(1, min(4, max_side)))
    elif group <= 6:
        side = draw(st.integers(1, min(64, max_side)))
    elif group == 7:
        side = draw(st.integers(1, max_side))
    else:
        side = draw(st.sampled_from([b for b in BOUNDARY_SIDES if b <= max_side] or [max_side]))
    return max(1, min(side, budget))


def _draw_view_steps(draw: Any, st: Any, shape: tuple[int, ...]
                     ) -> tuple[tuple[tuple[str, Any], ...], tuple[int, ...]]:
    """View steps that turn a base array into one of ``shape``, and that base's shape.

    Drawn backwards from the wanted shape: a broadcast from a shape with sides
    of 1 (or fewer dims), a transpose, or a slice with steps (negative ones
    too), offsets and integer indices that drop a base axis.
    """
    steps: list[tuple[str, Any]] = []
    current = tuple(shape)
    for _ in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(_VIEW_KINDS))
        nd = len(current)
        if kind == "broadcast_to":
            if nd == 0:
                continue
            dropped = draw(st.integers(0, nd))
            base = tuple(1 if draw(st.booleans()) else d for d in current[dropped:])
            steps.append(("broadcast_to", current))
            current = base
        elif kind == "transpose":
            if nd < 2:
                continue
            axes = tuple(draw(st.permutations(range(nd))))
            base_list = [0] * nd
            for i, a in enumerate(axes):  # base.transpose(axes).shape[i] == base.shape[axes[i]]
                base_list[a] = current[i]
            steps.append(("transpose", axes))
            current = tuple(base_list)
        else:
            index: list[Any] = []
            base_list = []
            for d in current:
                step = draw(st.sampled_from([1, 2, -1, -2, 3]))
                offset = draw(st.integers(0, 1))
                need = (d - 1) * abs(step) + 1 if d else 0
                base_list.append(need + offset)
                if step > 0:
                    index.append(slice(offset or None, None, step))
                else:
                    index.append(slice(-1 - offset if offset else None, None, step))
            if draw(st.integers(0, 3)) == 0:  # an integer index drops an extra base axis
                at = draw(st.integers(0, len(index)))
                extra = draw(st.integers(1, 3))
                index.insert(at, draw(st.integers(-extra, extra - 1)))
                base_list.insert(at, extra)
            if not index:  # a 0-d array and no integer index: nothing to view
                continue
            steps.append(("getitem", tuple(index)))
            current = tuple(base_list)
    return tuple(reversed(steps)), current


def programs(*, dtypes: Sequence[Any] | None = None, ops: Sequence[str] | None = None,
             max_inputs: int = 3, max_steps: int = 6, max_dims: int = 3, max_side: int | None = None,
             allow_nan: bool = True, allow_empty: bool = True, max_outputs: int = 3,
             sizes: str = "small", max_elements: int | None = None, input_views: bool = False,
             cupy_inputs: bool = False, stable: bool | None = None, matmul_precision: str = "ieee"
             ) -> Any:
    """A Hypothesis strategy of random ``Recipe`` objects (see the module docstring).

    ``dtypes``: input dtypes to draw from (default every supported dtype).
    ``ops``: names from ``ALL_OPS`` to use (default all). ``max_steps``: ops per
    program. ``max_dims``/``max_side``: input shapes (0-d included; sides of 0
    when ``allow_empty``). ``allow_nan``: put NaN and infinities in float inputs.

    ``sizes``: ``"small"`` (the default) draws sides from 1 to ``max_side``
    (default 4); ``"mixed"`` draws a spread: mostly small sides, some up to
    64, some up to ``max_side`` (default 1025), and sides at block boundaries
    (``BOUNDARY_SIDES``: 127/128/129, 1023/1024/1025, ...), with at most
    ``max_elements`` (default 2**16) elements per input. Inputs of more than
    ``DRAWN_LIMIT`` elements get values from ``random_array`` with a drawn seed.

    ``input_views``: some inputs are NumPy views rather than fresh arrays:
    broadcast (stride 0), transposed, sliced with steps, reversed (negative
    strides), recorded in ``Recipe.views`` so that ``repr`` reproduces them.
    ``cupy_inputs``: some inputs reach fusejit as CuPy arrays (and CuPy views);
    for the ``cuda`` backend; needs CuPy.

    ``stable``: leave out steps whose NumPy result is sensitive to rounding, so
    that a mismatch means a bug rather than a different (equally right)
    rounding: a step is redrawn when nudging its inexact float operands by a
    few ulps moves its result past the tolerance (``floor``, ``rint`` or a
    comparison at a rounding boundary, ``sin`` of a huge argument, layer norm
    of a nearly constant row), or when computing it from float64 operands
    gives another answer (a float16 product that overflows, then meets a
    zero). Default: on, except for the plain generator (``sizes="small"``,
    no views, no CuPy), which draws exactly as it always did.

    ``matmul_precision``: the precision fusejit will multiply float32 products at (see
    ``check_program``). The ``stable`` filter then nudges a value computed from a float32
    GEMM by that precision's error (about 2e-3 of it for ``tf32``) and judges the steps
    downstream at ``matmul_tolerance``: ``floor`` or a comparison of a TF32 product near a
    boundary is not drawn. (Products are drawn only when ``ops`` includes ``MATMUL_OPS``.)

    Every drawn step is checked on NumPy as it is drawn, so a recipe never asks
    NumPy for something it rejects; it also avoids corners where NumPy's result
    is platform-defined (float to int casts of out-of-range values, integer
    division by zero, shifts by the bit width or more).
    """
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    dtype_pool = tuple(np.dtype(d) for d in (dtypes or ALL_DTYPES))
    op_pool = tuple(ops or ALL_OPS)
    unknown = set(op_pool) - set(ALL_OPS) - set(MATMUL_OPS)
    if unknown:
        raise ValueError(f"unknown ops {sorted(unknown)}; choose from fusejit.testing.ALL_OPS")
    if sizes not in SIZES:
        raise ValueError(f"sizes={sizes!r}; choose from {SIZES}")
    _check_precision(matmul_precision)
    if cupy_inputs:
        import importlib.util
        if importlib.util.find_spec("cupy") is None:
            raise ValueError("cupy_inputs=True needs CuPy (pip install cupy-cuda12x or cupy-cuda13x)")
    side_limit = _DEFAULT_MAX_SIDE[sizes] if max_side is None else max_side
    element_limit = _DEFAULT_MAX_ELEMENTS[sizes] if max_elements is None else max_elements
    plain = sizes == "small" and not input_views and not cupy_inputs
    stable_steps = not plain if stable is None else stable
    # values broadcast from several operands may grow past the inputs: (n, 1) with (1, m)
    value_limit = 4 * element_limit if element_limit else None

    def draw_input(draw: Any, shape: tuple[int, ...], dt: np.dtype) -> tuple[np.ndarray, InputView | None]:
        if plain:  # the draws of the original generator, so seeded examples stay the same
            arr = draw(hnp.arrays(dt, shape, elements=_elements(dt, allow_nan)))
            return np.array(arr, order="C"), None  # ascontiguousarray makes 0-d 1-d
        steps: tuple[tuple[str, Any], ...] = ()
        base_shape = shape
        if input_views and draw(st.integers(0, 2)) == 0:
            steps, base_shape = _draw_view_steps(draw, st, shape)
            if math.prod(base_shape) > 4 * max(element_limit or 0, DRAWN_LIMIT):
                steps, base_shape = (), shape
        origin = None
        if math.prod(base_shape) <= DRAWN_LIMIT:
            base = np.array(draw(hnp.arrays(dt, base_shape, elements=_elements(dt, allow_nan))), order="C")
        else:
            seed = draw(st.integers(0, 2**32 - 1))
            # one large input in eight has patterned values: ties and reductions' identities
            pattern = (draw(st.sampled_from(VALUE_PATTERNS)) if draw(st.integers(0, 7)) == 0
                       else None)
            base = random_array(base_shape, dt, seed, allow_nan=allow_nan, pattern=pattern)
            origin = (f"random_array({base_shape!r}, {dt.name!r}, seed={seed}"
                      f"{'' if allow_nan else ', allow_nan=False'}"
                      f"{'' if pattern is None else f', pattern={pattern!r}'})")
        module = "cupy" if cupy_inputs and draw(st.booleans()) else "numpy"
        if not steps and module == "numpy" and origin is None:
            return base, None
        view = InputView(base, steps, module, origin)
        return view.build(np, copy=False), view

    @st.composite
    def draw_recipe(draw: Any) -> Recipe:
        n_inputs = draw(st.integers(1, max_inputs))
        empty = allow_empty and draw(st.integers(0, 4)) == 0
        n_dims = draw(st.sampled_from(range(max_dims + 1)))
        if sizes == "small":
            base = [draw(st.integers(1, side_limit)) for _ in range(n_dims)]
        else:
            base = []
            for _ in range(n_dims):
                budget = element_limit // max(math.prod(base), 1) if element_limit else side_limit
                base.append(_draw_side(draw, st, side_limit, budget))
        if empty and base:
            base[draw(st.integers(0, len(base) - 1))] = 0
        inputs, views = [], []
        for _ in range(n_inputs):
            # a suffix of the base shape with some sides set to 1: all inputs broadcast together
            nd = len(base) if draw(st.booleans()) else draw(st.sampled_from(range(len(base) + 1)))
            shape = tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in base[len(base) - nd:])
            dt = draw(st.sampled_from(dtype_pool))
            arr, view = draw_input(draw, shape, dt)
            inputs.append(arr)
            views.append(view)
        values: list[Any] = _as_arrays(inputs)
        exact = [True] * len(inputs)  # which values fusejit must compute bit for bit as NumPy
        scales = [_magnitude(v) for v in inputs]  # the size of what each value was added up from
        carried = ["ieee"] * len(inputs)  # the reduced matmul precision each value's error is of
        steps: list[Step] = []
        n_steps = draw(st.integers(1, max_steps))
        attempts = 0
        while len(steps) < n_steps and attempts < 4 * n_steps:
            attempts += 1
            step = _draw_step(draw, st, op_pool, dtype_pool, values)
            if step is None or _too_large(step, values, value_limit):
                continue
            try:
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = _apply_step(np, step, values)
                    if stable_steps and _rounding_sensitive(step, values, exact, result, scales, carried,
                                                            matmul_precision=matmul_precision):
                        continue
            except Exception:  # noqa: BLE001  (NumPy refuses: draw another step)
                continue
            steps.append(step)
            _append_value(step, result, values, exact, scales, carried,
                          matmul_precision=matmul_precision)
        first = len(inputs)
        produced = list(range(first, len(values))) or [0]
        outputs = [produced[-1]]
        extra = draw(st.lists(st.sampled_from(produced), max_size=max(max_outputs - 1, 0),
                              unique=True))
        outputs += [i for i in extra if i not in outputs]
        has_views = any(v is not None for v in views)
        return Recipe(tuple(inputs), tuple(steps), tuple(outputs),
                      views=tuple(views) if has_views else ())

    return draw_recipe()


_SYMBOLS = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "//": "floor_divide",
            "%": "remainder", "**": "power", "&": "bitwise_and", "|": "bitwise_or", "^": "bitwise_xor",
            "<<": "left_shift", ">>": "right_shift", "<": "less", "<=": "less_equal", ">": "greater",
            ">=": "greater_equal", "==": "equal", "!=": "not_equal", "@": "matmul"}
_UNARY_SYMBOLS = {"-": "negative", "+": "positive", "~": "bitwise_not", "abs": "abs"}
#: Ops whose result is exact (no rounding) when their operands are: fusejit and NumPy then agree
#: bit for bit, so a later ``floor`` or comparison of the result is safe to check exactly.
_EXACT_OPS = frozenset(VIEWS + (
    "getitem", "astype", "full_like", "arange", "where", "clip", "maximum", "minimum", "abs", "negative",
    "positive", "sign", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "logical_not",
    "bitwise_not", "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
    "left_shift", "right_shift", "max", "min", "amax", "amin", "argmax", "argmin", "any", "all"))
#: Ops that add up or normalize: checked against nudged operands even when these are exact.
_ACCUMULATING = frozenset(("sum", "prod", "mean", "var", "std", "logsumexp") + COMPOSITES)


def _op_name(step: Step) -> str:
    if step.kind == "operator":
        return (_UNARY_SYMBOLS if len(step.args) == 1 else _SYMBOLS)[step.name]
    return step.name


def _exact_result(step: Step, values: list[Any], exact: list[bool], result: Any) -> bool:
    """Whether ``result`` is exact: exact operands, and an op that does not round."""
    refs = [a.index for a in step.args if isinstance(a, Ref)]
    if not all(exact[i] for i in refs):
        return False
    if _op_name(step) in _EXACT_OPS or step.kind == "safe_cast":
        return True
    return _dtype(result).kind in "biu" and all(_dtype(values[i]).kind in "biu" for i in refs)


def _close(a: Any, b: Any, rtol: float, atol: float) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol,
                            equal_nan=True))


#: Ops whose rounding error is a few ulps of what they add up (or pass on), not of their result:
#: a sum that cancels to 1e-16 is off by ulps of its terms; a remainder ``x - n * y`` is off by
#: ulps of its dividend (``remainder(arccos(1e-32), 1e-32)``: an ulp of pi / 2 moves it anywhere
#: in [0, 1e-32), interpret fuzz, seed 31002).
_ADDITIVE = frozenset(VIEWS + COMPOSITES + (
    "getitem", "add", "subtract", "sum", "mean", "var", "std", "logsumexp", "where", "clip", "maximum",
    "minimum", "abs", "negative", "positive", "astype", "remainder"))


#: Reductions that add up their inputs (``_scale``: their error grows with the count).
_SUMMING = frozenset(("sum", "mean", "var", "std"))


def _magnitude(value: Any) -> float:
    """The largest finite magnitude in ``value`` (0 when there is none)."""
    a = np.asarray(value)
    if a.dtype.kind not in "iuf" or a.size == 0:
        return 0.0
    finite = np.abs(a[np.isfinite(a)]) if a.dtype.kind == "f" else np.abs(a)
    return float(finite.max()) if finite.size else 0.0


def _scale(step: Step, scales: list[float], result: Any, values: list[Any] | None = None
           ) -> float:
    """The magnitude that ``result``'s rounding error is relative to (see ``_ADDITIVE``)."""
    own = _magnitude(result)
    name = _op_name(step)
    if name in ("multiply", "divide", "true_divide") and len(step.args) >= 2:
        # a product or quotient by a constant scales its operand's error with it: a var's
        # residue of 9.5e-7 halved is still within rounding of 0 at the var's input scale
        # (interpret fuzz, seed 20001: logical_and(var(x) * 0.5, 0.5))
        a, b = step.args[:2]
        if name == "multiply" and isinstance(b, Ref):  # (constant * value)
            a, b = b, a
        if isinstance(a, Ref) and isinstance(b, (int, float)) and not isinstance(b, bool) \
                and b != 0 and math.isfinite(b):
            return max(own, scales[a.index] * (abs(b) if name == "multiply" else 1 / abs(b)))
    if name not in _ADDITIVE:
        return own
    scale = max([own] + [scales[a.index] for a in step.args if isinstance(a, Ref)])
    if name in ("layer_norm", "rms_norm") and values is not None:
        scale = max(scale, _normalized_scale(step, values, scales))
    if name in _SUMMING and values is not None and isinstance(step.args[0], Ref):
        # NumPy's sum over a strided axis adds row by row, so its error grows with the count:
        # 115 float32 copies of 1.6255579 have a mean 9 ulps off and a std of 1.7e-6 where
        # fusejit's is 0 (interpret fuzz, seed 31003); the nudges are 8 ulps, so the scale
        # takes the count over 8, as a layer norm's row does (``_normalized_scale``)
        count = np.size(values[step.args[0].index]) // max(1, np.size(result))
        scale *= max(1.0, count / 8)
    return scale


def _normalized_scale(step: Step, values: list[Any], scales: list[float]) -> float:
    """The error scale of a layer or RMS norm: its input's, over the smallest divisor
    ``sqrt(var + eps)`` of any row (times the weight). A nearly constant row divides a
    residue of a few ulps of its values by ``sqrt(eps)``: layer norm of 72 copies of 1.2e-297
    is a residue of 8e-311 in NumPy, 0 in fusejit, and ``floor_divide`` of it by -54 is -1
    against -0 (interpret fuzz, seed 9611)."""
    ref = step.args[0]
    x = np.asarray(values[ref.index], np.float64)
    if x.size == 0 or not np.isfinite(x).all():
        return 0.0
    axis = dict(step.kwargs).get("axis", -1)
    name = _op_name(step)
    with np.errstate(all="ignore"):
        if name == "layer_norm":
            c = x - np.mean(x, axis=axis, keepdims=True)
            divisor = np.sqrt(np.mean(c * c, axis=axis) + _LAYER_NORM_EPS)
        else:
            divisor = np.sqrt(np.mean(x * x, axis=axis) + _RMS_NORM_EPS)
    weight = step.args[1] if len(step.args) > 1 else None
    gain = _magnitude(values[weight.index]) if isinstance(weight, Ref) else \
        abs(float(weight)) if weight is not None else 1.0
    # a layer norm's residue is its mean's error, which NumPy's sequential sum over a strided
    # axis lets grow with the row: 127 copies of 1.03e-10 in float32 left 5.7e-14 after the
    # division (about 30 ulps of the input over sqrt(eps)), fusejit's one-pass form 0, and
    # False / it was 0 against NaN (interpret fuzz, seed 10101); the nudges are 8 ulps, so
    # the scale takes the row's length over 8
    rows = max(1, x.size // max(1, divisor.size)) if name == "layer_norm" else 1
    return scales[ref.index] * max(gain, 1.0) * max(1.0, rows / 8) / float(np.min(divisor))


def _append_value(step: Step, result: Any, values: list[Any], exact: list[bool],
                  scales: list[float], carried: list[str] | None = None, *,
                  matmul_precision: str = "ieee") -> None:
    """Record a step's ``result`` as the next value, with whether it is exact and the
    magnitude its rounding error is relative to (``_rounding_sensitive``'s bookkeeping);
    with ``carried``, also the reduced matmul precision whose error it carries."""
    if carried is not None:
        carried.append(_carried_precision(step, values, carried, result, matmul_precision))
    values.append(result)
    exact.append(_exact_result(step, values, exact, result))
    scales.append(_scale(step, scales, result, values))


def _carried_precision(step: Step, values: list[Any], carried: list[str], result: Any,
                       matmul_precision: str) -> str:
    """The reduced matmul precision (``"tf32"``, ``"tf32x3"``) whose rounding error ``step``'s
    float ``result`` carries: it is a float32 GEMM at ``matmul_precision`` or computed from a
    value that carries it; else ``"ieee"``. Integer and bool results carry none: they are
    compared exactly, and the step that made them was checked against nudges of that size."""
    if matmul_precision == "ieee" or _dtype(result).kind != "f":
        return "ieee"
    own = _product_precision(step, values, result, matmul_precision)
    if own != "ieee" or any(carried[a.index] != "ieee" for a in step.args if isinstance(a, Ref)):
        return matmul_precision
    return "ieee"


def _rounding_sensitive(step: Step, values: list[Any], exact: list[bool], result: Any,
                        scales: list[float] | None = None, carried: list[str] | None = None, *,
                        matmul_precision: str = "ieee") -> bool:
    """Whether ``step``'s result could differ past the tolerance by rounding alone (see ``stable``).

    ``scales`` (by value; default each value's own largest magnitude) is what
    the rounding error of an inexact value is relative to. ``carried`` (by value; default
    none) names the reduced matmul precision whose error a value carries
    (``_carried_precision``): such a value is nudged by that error (``2u`` of
    ``MATMUL_UNIT_ROUNDOFF``: about 2e-3 for ``tf32``) rather than by its dtype's ulps, and
    the step is judged at ``matmul_tolerance``, as is a float32 GEMM at ``matmul_precision``.
    """
    name = _op_name(step)
    floats = [a.index for a in step.args if isinstance(a, Ref) and _dtype(values[a.index]).kind == "f"]
    if not floats:
        return False
    rtol, atol = max([tolerance(_dtype(values[i])) for i in floats] + [tolerance(_dtype(result))])
    reduced = {_product_precision(step, values, result, matmul_precision)}
    if carried is not None:
        reduced.update(carried[i] for i in floats)
    for precision in sorted(reduced - {"ieee"}):
        # an output computed from this step is compared at least at the precision's tolerance,
        # its atol times the largest magnitude it is computed from (``_tolerance_of``): the
        # operands and the result here are among those values
        wide = matmul_tolerance(precision)
        magnitude = max([1.0, _magnitude(result)] + [_magnitude(values[i]) for i in floats])
        rtol, atol = max(rtol, wide[0]), max(atol, wide[1] * magnitude)
    rtol, atol = rtol / 2, atol / 2
    if name in _ACCUMULATING and _overflows_inside(values, floats, result, step):
        return True
    if name in ("max", "min", "amax", "amin") and _zero_sign_by_order(values, floats, result):
        return True
    if name == "prod" and _prod_order_decides(values, floats, result, step):
        return True
    nudge = [i for i in floats if name in _ACCUMULATING or not exact[i]]
    if nudge:
        rng = np.random.default_rng(len(values))
        draws = []
        for i in nudge:
            v = np.asarray(values[i])
            # a few ulps, as far as an honest difference in rounding goes (float16: about one),
            # and for a computed value a few ulps of what it came from: -3e-7 from log_softmax
            # over values near 50, or 1e-16 from a sum of layer norm outputs, are that far off
            size = min(8 * float(np.finfo(v.dtype).eps), tolerance(v.dtype)[0] / 8)
            if carried is not None:  # a TF32 product's error, and what is computed from it
                size = max(size, _carried_error(carried[i]))
            scale = 0.0 if exact[i] else size * (scales[i] if scales is not None else _magnitude(v))
            # random signs and sizes: a fixed size can happen to be a whole period of the step
            # (13 ulps of 2e27 is a multiple of 52, so remainder(x, 52) did not move). One sign
            # per element for both parts of its nudge: with a sign each, the relative and the
            # absolute part cancelled (a float16 var of 11.62 nudged by 0.0145 - 0.0142, so
            # floor_divide(151, var) was not seen to move: interpret fuzz 9608)
            signs = rng.choice([-1.0, 1.0], v.shape)
            steps = signs * rng.uniform(0.5, 1.0, (2, *v.shape))
            draws.append((i, v, size, scale, steps))
        # each nudge and its opposite: floor(625 - 1 ulp) moves, floor(625 + 1 ulp) does not,
        # and one random direction missed it (floor(power(var(x), 2.0)), interpret fuzz 9303)
        for direction in (1.0, -1.0):
            nudged = list(values)
            for i, v, size, scale, steps in draws:
                wide = v.astype(np.float64)
                with np.errstate(invalid="ignore"):
                    moved = wide + direction * (np.abs(wide) * size * steps[0]
                                                + scale * steps[1])
                # (infinities and NaNs stay as they are: -inf + inf would be a NaN)
                nudged[i] = np.where(np.isfinite(wide), moved, wide).astype(v.dtype)
            if not _close(_apply_step(np, step, nudged), result, rtol, atol):
                return True
        # a computed value within its rounding error of zero may be exactly zero in another
        # order of the same sums: NumPy's float16 var of 33 equal values is a residue, fusejit's
        # 0, and 0 / var is 0 against NaN (interpret fuzz 9610); no nudge of the residue
        # reaches 0 itself
        snapped, near_zero = list(values), False
        for i, v, _, scale, _ in draws:
            near = np.isfinite(v) & (v != 0) & (np.abs(v.astype(np.float64)) <= scale)
            if near.any():
                snapped[i] = np.where(near, np.zeros_like(v), v)
                near_zero = True
        if near_zero and not _close(_apply_step(np, step, snapped), result, rtol, atol):
            return True
        # likewise a computed value within its rounding error of the value it is compared with
        # may equal it in another order of the same sums: rms_norm's 1.9999992 + 1.9999996
        # - 1.9999988 is 2.0 in fusejit's order of the sum (interpret fuzz, seed 30001); a
        # nudge almost never lands exactly on the other value
        if name in ("equal", "not_equal") and _within_rounding_of_other(step, values, draws):
            return True
    if name in _EXACT_OPS or all(_dtype(values[i]) == np.float64 for i in floats):
        return False
    wide = list(values)
    for i in floats:
        wide[i] = np.asarray(values[i]).astype(np.float64)
    precise = np.asarray(_apply_step(np, step, wide))
    if precise.dtype.kind == "f" and _dtype(result).kind == "f":
        precise = precise.astype(_dtype(result))
    return not _close(precise, result, rtol, atol)


def _within_rounding_of_other(step: Step, values: list[Any], draws: list[tuple]) -> bool:
    """Whether some element of a nudged operand of a two-operand comparison (``draws`` of
    ``_rounding_sensitive``: value index, value, relative nudge, absolute nudge, ...) differs
    from the element it is compared with, but by no more than its nudge."""
    if len(step.args) != 2:
        return False
    operands = [np.asarray(values[a.index]) if isinstance(a, Ref) else np.asarray(a)
                for a in step.args]
    for i, v, size, scale, _ in draws:
        for k, arg in enumerate(step.args):
            if not (isinstance(arg, Ref) and arg.index == i):
                continue
            mine, other = np.broadcast_arrays(v.astype(np.float64),
                                              operands[1 - k].astype(np.float64))
            with np.errstate(invalid="ignore"):
                gap = np.abs(mine - other)
                near = np.isfinite(gap) & (gap > 0) & (gap <= np.abs(mine) * size + scale)
            if near.any():
                return True
    return False


def _overflows_inside(values: list[Any], floats: list[int], result: Any,
                      step: Step | None = None) -> bool:
    """Whether an accumulating step turned finite operands into a non-finite result: where
    it overflows depends on the order and form of its sums (NumPy's two-pass variance squares
    a one-ulp residue of the mean: equal values near 4e244 have variance inf there, 0 in a
    one-pass form), so the step is ill-conditioned rather than a check of either.

    For a reduction over some axes (``step``), each output is judged by its own inputs: an
    infinity elsewhere in the array does not make another output's overflow legitimate (a
    float16 ``prod`` whose one column holds an inf, another a zero among values that overflow
    before it in NumPy's order: NaN there, 0 in fusejit's float32 products; interpret fuzz,
    seed 9614)."""
    r = np.asarray(result)
    if r.dtype.kind != "f" or bool(np.isfinite(r).all()):
        return False
    if all(bool(np.isfinite(np.asarray(values[i])).all()) for i in floats):
        return True
    if step is None or len(floats) != 1 or _op_name(step) not in REDUCTIONS:
        return False
    kwargs = dict(step.kwargs)
    x = np.asarray(values[floats[0]])
    try:
        finite = np.all(np.isfinite(x), axis=kwargs.get("axis"),
                        keepdims=bool(kwargs.get("keepdims", False)))
        return bool(np.any(~np.isfinite(r) & np.broadcast_to(finite, r.shape)))
    except (ValueError, TypeError, np.exceptions.AxisError):  # (another form of the step)
        return False


def _prod_order_decides(values: list[Any], floats: list[int], result: Any, step: Step) -> bool:
    """Whether the order of a float ``prod``'s multiplications decides its result: a zero
    among terms whose product overflows in some order (NumPy multiplies in sequence and may
    meet the zero first, 0; a tree or a split overflows a partial product first, inf * 0 =
    NaN: cuda fuzz seed 7001, 511 values up to 200 with a zero at index 23), or an infinity
    among terms whose product underflows to 0 in some order (NumPy may meet the infinity
    first, inf; a split underflows a block first, 0 * inf = NaN: interpret fuzz seed 19901,
    64,448 terms ``1 / v`` of a uint8 ``v`` with zeros). Each output of a reduction over
    an axis is judged by its own terms."""
    r = np.asarray(result)
    if r.dtype.kind != "f" or len(floats) != 1:
        return False
    axis = dict(step.kwargs).get("axis")
    magnitude = np.abs(np.asarray(values[floats[0]], dtype=np.float64))
    finfo = np.finfo(r.dtype)
    try:
        with np.errstate(divide="ignore"):
            # the largest partial product any order can form: every term above 1, multiplied;
            # the smallest: every finite term below 1
            logs = np.log2(np.where(np.isfinite(magnitude), magnitude, 1.0))
        grows = np.sum(np.maximum(logs, 0.0), axis=axis)
        shrinks = np.sum(np.minimum(logs, 0.0), axis=axis)
        has_zero = np.any(magnitude == 0, axis=axis)
        has_inf = np.any(np.isinf(magnitude), axis=axis)
    except (ValueError, TypeError, np.exceptions.AxisError):  # (another form of the step)
        return False
    overflow = has_zero & (grows >= np.log2(finfo.max) - 1)
    underflow = has_inf & (shrinks <= np.log2(float(finfo.smallest_subnormal)) + 1)
    return bool(np.any(overflow | underflow))


def _zero_sign_by_order(values: list[Any], floats: list[int], result: Any) -> bool:
    """Whether a max/min reduction's result is a zero whose sign came from the order it met
    +0.0 and -0.0 in (they compare equal: NumPy's reduction keeps whichever its SIMD order
    meets last, np.max([0.0, -0.0]) is -0.0; a tree or another order keeps the other one)."""
    r = np.asarray(result)
    if r.dtype.kind != "f" or not bool((r == 0).any()):
        return False
    for i in floats:
        v = np.asarray(values[i])
        zeros = np.signbit(v[v == 0])
        if zeros.any() and not zeros.all():  # both signs met
            return True
    return False


def _too_large(step: Step, values: list[Any], limit: int | None) -> bool:
    """Whether the result of ``step`` would hold more than ``limit`` elements: its operands
    broadcast together, or a matrix product's batch, rows and columns; or whether a product's
    batch holds more than ``PRODUCT_BATCH_LIMIT`` matrices.

    Checked before NumPy runs the step: a product of (n, k) and (k, m) operands has n * m
    elements, which broadcasting the two shapes does not tell (they need not broadcast at
    all), and a fuzz process once drew one of several GB on the host."""
    shapes = [_shape(values[a.index]) for a in step.args if isinstance(a, Ref)]
    if len(shapes) < 2:
        return False
    if _op_name(step) in ("matmul", "@"):
        if _product_batch(shapes[0], shapes[1]) > PRODUCT_BATCH_LIMIT:
            return True  # (whatever the limit: see PRODUCT_BATCH_LIMIT)
        return limit is not None and \
            _product_elements(shapes[0], shapes[1], step.kind == "matmul_t") > limit
    if limit is None:
        return False
    try:
        return math.prod(np.broadcast_shapes(*shapes)) > limit
    except ValueError:
        return False


#: Most matrices in one drawn product's batch. The interpreter runs a GEMM's programs one at
#: a time, one (or more) per matrix of the batch, about 8 ms each: a drawn (32, 666, 1, 1)
#: product with its own transpose (21,312 one-element products, ``--products`` seed 18001 on
#: interpret) ran for minutes and stalled the fuzz. A batch of this many still covers every
#: batch layout.
PRODUCT_BATCH_LIMIT = 256


def _product_batch(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """Matrices in the batch of ``a @ b`` (1 without batch axes; 0 when the batch axes do
    not broadcast: NumPy refuses the step anyway)."""
    try:
        return math.prod(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        return 0


def _product_elements(a: tuple[int, ...], b: tuple[int, ...], b_swapped: bool) -> int:
    """Elements of ``a @ b`` (``b`` with its last two axes swapped first when ``b_swapped``),
    by NumPy's rules; 0 when the shapes do not multiply (NumPy refuses the step anyway)."""
    if b_swapped and len(b) >= 2:
        b = b[:-2] + (b[-1], b[-2])
    rows = a[-2:-1] if len(a) >= 2 else ()
    cols = b[-1:] if len(b) >= 2 else ()
    return _product_batch(a, b) * math.prod(rows) * math.prod(cols)


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
    if op == "matmul":
        return _matmul_step(draw, st, ref, shape, values)
    if op == "full_like":
        fill = scalar_for(dt)
        return Step("function", "full_like", (ref, fill))
    if op == "arange":
        return Step("function", "arange", (draw(st.integers(-3, 3)), draw(st.integers(3, 8))))
    return None  # pragma: no cover


def _matmul_step(draw: Any, st: Any, ref: Ref, shape: tuple[int, ...], values: list[Any]) -> Step | None:
    """A product of ``ref`` with a value whose shape fits (maybe with its last two axes swapped)."""
    if not shape:
        return None
    pairs = []
    for j, v in enumerate(values):
        s = _shape(v)
        if s and (s[0] if len(s) == 1 else s[-2]) == shape[-1]:
            pairs.append((j, False))
        if len(s) >= 2 and s[-1] == shape[-1]:
            pairs.append((j, True))
    if not pairs:
        return None
    j, swapped = draw(st.sampled_from(pairs))
    if swapped:
        return Step("matmul_t", "matmul", (ref, Ref(j)))
    if draw(st.booleans()):
        return Step("operator", "@", (ref, Ref(j)))
    return Step("function", "matmul", (ref, Ref(j)))
