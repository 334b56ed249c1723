"""Reductions and the composites built from them (so the fuser sees primitives).

Result dtypes follow NumPy (``sum`` of int8 is int64, ``mean`` of ints is
float64, ``mean`` of float16 accumulates in float32 and returns float16).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dtypes import BOOL, FLOAT64, INT64, as_dtype, is_float, reduction_dtype
from ..errors import FusejitError, ShapeError
from ..ir.graph import Node, make, make1, make2, num_elements
from .templates import replayed
from .tensor import (
    Tensor,
    asarray,
    binary,
    cast_node,
    const_node,
    normalize_axes,
    normalize_axis,
    reshape_node,
    unary,
    where,
)

Axis = int | Sequence[int] | None


def _tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else asarray(x)


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce(op: str, node: Node, axes: tuple[int, ...], keepdims: bool, dtype: np.dtype,
            shape: tuple[int, ...] | None = None) -> Node:
    """``op`` over ``axes`` of ``node`` (``shape``: the result's, when the caller knows it)."""
    if shape is None:
        shape = _reduced_shape(node.shape, axes, keepdims)
    if not axes:  # reducing over no axis is the identity on values...
        if op == "sum" and is_float(dtype):  # ...but for NumPy a sum starts at +0.0: -0.0 -> +0.0
            return binary("add", Tensor(node), 0.0)._node
        return node
    if op == "sum":
        centered = _centered_square_of(node, axes)
        if centered is not None:  # sum((x - mean(x))**2): one pass, as var's numerator
            op, node = "m2", centered
        shifted = _shifted_exp_of(node, axes)
        if shifted is not None:  # sum(exp(x - max(x))): online, as softmax's denominator
            op, node = "sumexp", shifted
    if keepdims:  # (attributes as make1 takes them: frozen, axes are ints)
        return make1(op, node, dtype, shape, {"axes": axes, "keepdims": True},
                     (("axes", axes), ("keepdims", True)))
    return make1(op, node, dtype, shape, {"axes": axes}, (("axes", axes),))


def _centered_square_of(node: Node, axes: tuple[int, ...]) -> Node | None:
    """``x`` when ``node`` is ``(x - mean(x, axes, keepdims))**2`` (as ``d * d`` or ``square(d)``).

    Summing such a node over ``axes`` is ``m2(x)``: the fuser then sees one
    reduction of ``x`` (a sibling of the mean's ``sum``), so batch norm's and
    ``var``'s statistics take one pass over ``x`` instead of two.
    """
    if node.op == "mul" and node.srcs[0] is node.srcs[1] or node.op == "square":
        d = node.srcs[0]
    else:
        return None
    if d.op != "sub" or d.dtype.kind != "f":
        return None
    x, m = d.srcs
    while m.op in ("expand", "reshape") and m.srcs:
        m = m.srcs[0]
    if m.op != "div":
        return None
    total, count = m.srcs
    if (total.op != "sum" or total.srcs[0] is not x or tuple(total.attrs.get("axes", ())) != axes
            or not total.attrs.get("keepdims") or count.op != "const"
            or count.attrs.get("value") != _count(x.shape, axes) or x.shape != node.shape):
        return None
    return x


def _shifted_exp_of(node: Node, axes: tuple[int, ...]) -> Node | None:
    """``x`` when ``node`` is ``exp(x - max(x, axes, keepdims))`` (softmax's numerator).

    Summing it over ``axes`` is ``sumexp(x)``: a sibling of the ``max``, so
    both statistics of a row come from one read even when the row is too
    long to stay in registers (online softmax).
    """
    if node.op != "exp" or node.dtype.kind != "f":
        return None
    d = node.srcs[0]
    if d.op != "sub":
        return None
    x, m = d.srcs
    while m.op in ("expand", "reshape") and m.srcs:
        m = m.srcs[0]
    if (m.op != "max" or m.srcs[0] is not x or tuple(m.attrs.get("axes", ())) != axes
            or not m.attrs.get("keepdims") or x.shape != node.shape):
        return None
    return x


def _count(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    # (a list, not a generator: checked on every sum of a centered square, var's numerator)
    return num_elements(tuple([shape[a] for a in axes]))


def _simple(op: str, numpy_name: str, x: Any, axis: Axis, keepdims: bool, dtype: Any) -> Tensor:
    x = _tensor(x)
    axes = normalize_axes(axis, x.ndim)
    out_dt = as_dtype(dtype, where=numpy_name) if dtype is not None else \
        reduction_dtype(numpy_name, x.dtype)
    node = cast_node(x._node, out_dt)
    if op in ("max", "min") and _count(x.shape, axes) == 0 and x.size == 0:
        raise ShapeError(f"{numpy_name}: zero-size reduction over axes {axes} of shape {x.shape} "
                         f"has no identity")
    return Tensor(_reduce(op, node, axes, keepdims, out_dt))


def sum(x: Any, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (all axes when None). Small integers sum in int64, as NumPy."""
    return _simple("sum", "sum", x, axis, keepdims, dtype)


def prod(x: Any, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Tensor:
    """Product over ``axis``."""
    return _simple("prod", "prod", x, axis, keepdims, dtype)


def max(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``; NaN propagates."""
    return _simple("max", "max", x, axis, keepdims, None)


def min(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum over ``axis``; NaN propagates."""
    return _simple("min", "min", x, axis, keepdims, None)


amax, amin = max, min


def _arg(op: str, x: Any, axis: int | None, keepdims: bool) -> Tensor:
    x = _tensor(x)
    if axis is None:
        flat = Tensor(reshape_node(x._node, (x.size,)))
        out = _arg(op, flat, 0, False)
        return Tensor(reshape_node(out._node, (1,) * x.ndim)) if keepdims else out
    a = normalize_axis(axis, x.ndim)
    if x.shape[a] == 0:
        raise ShapeError(f"{op}: attempt to get {op} of an empty sequence (axis {a} of shape "
                         f"{x.shape})")
    return Tensor(_reduce(op, x._node, (a,), keepdims, INT64))


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the first maximum along ``axis`` (of the flattened tensor when None)."""
    return _arg("argmax", x, axis, keepdims)


def argmin(x: Any, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the first minimum along ``axis``."""
    return _arg("argmin", x, axis, keepdims)


def any(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether any element along ``axis`` is nonzero."""
    x = _tensor(x)
    return Tensor(_reduce("any", cast_node(x._node, BOOL), normalize_axes(axis, x.ndim),
                          keepdims, BOOL))


def all(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Whether every element along ``axis`` is nonzero."""
    x = _tensor(x)
    return Tensor(_reduce("all", cast_node(x._node, BOOL), normalize_axes(axis, x.ndim),
                          keepdims, BOOL))


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def _accumulation_dtype(dt: np.dtype) -> np.dtype:
    """float16 statistics accumulate in float32, as NumPy's mean and var do."""
    return _F32 if dt == _F16 else dt


def mean(x: Any, axis: Axis = None, keepdims: bool = False, dtype: Any = None) -> Tensor:
    """Arithmetic mean over ``axis`` (NaN for an empty axis, as NumPy)."""
    x = _tensor(x)
    node = x._node
    key: tuple | None = None
    found = None
    # memoized for axes given as ints only: 1.0 == 1 as a key, but NumPy refuses a float axis
    if axis is None or type(axis) is int or (
            type(axis) is tuple and builtins.all(type(a) is int for a in axis)):
        try:
            key = (node.dtype, node.shape, axis, keepdims, dtype)
            found = _MEANS.get(key)
        except TypeError:  # (a dtype given as an unhashable object)
            key = None
    if found is None:
        axes = normalize_axes(axis, x.ndim)
        out_dt = as_dtype(dtype, where="mean") if dtype is not None else \
            reduction_dtype("mean", x.dtype)
        acc = _accumulation_dtype(out_dt)
        found = (axes, out_dt, acc, _reduced_shape(x.shape, axes, keepdims), _count(x.shape, axes))
        if key is not None:
            if len(_MEANS) >= 1024:
                _MEANS.clear()
            _MEANS[key] = found
    axes, out_dt, acc, shape, count = found
    total = _reduce("sum", cast_node(node, acc), axes, keepdims, acc, shape)
    mean = make2("div", total, const_node(count, acc, shape), acc, shape)
    return Tensor(cast_node(mean, out_dt))


#: (dtype, shape, axis, keepdims, dtype argument) -> what ``mean`` records for them: the
#: axes, the result and accumulation dtypes, the result's shape and the count it divides by
_MEANS: dict[tuple, tuple] = {}


@replayed
def var(x: Any, axis: Axis = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """Variance over ``axis``: ``sum(|x - mean|**2) / (n - ddof)``, as NumPy computes it."""
    x = _tensor(x)
    axes = normalize_axes(axis, x.ndim)
    if not isinstance(ddof, (int, float, np.integer, np.floating)):
        raise FusejitError(f"var: ddof must be a number, got {ddof!r}")
    out_dt = reduction_dtype("var", x.dtype, ddof)
    acc = _accumulation_dtype(out_dt)
    xa = cast_node(x._node, acc)
    if not axes:  # each element is its own mean: (x - x)**2 (NaN for inf and NaN)
        d = make("sub", (xa, xa), {}, acc, xa.shape)
        total = make("mul", (d, d), {}, acc, xa.shape)
    else:
        total = _reduce("m2", xa, axes, keepdims, acc)  # sum((x - mean)**2) in one pass
    denom = const_node(np.maximum(_count(x.shape, axes) - ddof, 0), acc, total.shape)
    return Tensor(cast_node(make("div", (total, denom), {}, acc, total.shape), out_dt))


@replayed
def std(x: Any, axis: Axis = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """Standard deviation over ``axis``: the square root of ``var``."""
    v = var(x, axis, keepdims, ddof)
    return unary("sqrt", v)


def _float(x: Tensor) -> Tensor:
    if is_float(x.dtype):
        return x
    return Tensor(cast_node(x._node, FLOAT64))


@replayed
def logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` computed stably (shifted by the maximum), as SciPy's.

    ``sum(exp(x - max))`` is one online reduction beside the max (``sumexp``: one read of a
    row too wide for registers, splittable over programs when the rows are few). Where the
    maximum is not finite the result is the maximum itself, as SciPy's: +inf when an element
    is +inf, -inf when every element is -inf, NaN when one is NaN (the shifted sum is NaN
    there, and not selected).
    """
    x = _float(_tensor(x))
    m = max(x, axis, keepdims=True)
    s = sum(unary("exp", x - m), axis, keepdims=True)
    out = where(unary("isfinite", m), unary("log", s) + m, m)
    if keepdims:
        return out
    from .views import squeeze
    return squeeze(out, normalize_axes(axis, x.ndim))


@replayed
def softmax(x: Any, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    x = _float(_tensor(x))
    e = unary("exp", x - max(x, axis, keepdims=True))
    return e / sum(e, axis, keepdims=True)


@replayed
def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``."""
    x = _float(_tensor(x))
    shifted = x - max(x, axis, keepdims=True)
    return shifted - unary("log", sum(unary("exp", shifted), axis, keepdims=True))


@replayed
def layer_norm(x: Any, weight: Any = None, bias: Any = None, axis: Axis = -1,
               eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over ``axis``."""
    x = _float(_tensor(x))
    mu = mean(x, axis, keepdims=True)
    centered = x - mu
    variance = mean(centered * centered, axis, keepdims=True)
    y = centered * unary("rsqrt", variance + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


@replayed
def rms_norm(x: Any, weight: Any = None, axis: Axis = -1, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x**2) + eps) * weight`` over ``axis``."""
    x = _float(_tensor(x))
    y = x * unary("rsqrt", mean(x * x, axis, keepdims=True) + eps)
    return y * weight if weight is not None else y


def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Tensor:
    """``x`` limited to [a_min, a_max] (either may be None).

    As NumPy's, whose ``clip`` with one bound is ``maximum``/``minimum`` and with both its
    own loop: that one keeps ``x`` where it equals a bound (``clip(-0.0, 0, 3)`` is ``-0.0``,
    where ``clip(-0.0, 0, None)``, as ``maximum(-0.0, 0)``, is ``0.0`` for float32); a NaN in
    ``x`` or a bound is the result either way.
    """
    out = _tensor(x)
    if a_min is None or a_max is None:
        if a_min is not None:
            out = binary("maximum", out, a_min)
        if a_max is not None:
            out = binary("minimum", out, a_max)
        return out
    for bound, inside in ((a_min, "greater_equal"), (a_max, "less_equal")):
        keep = binary("logical_or", binary("not_equal", out, out), binary(inside, out, bound))
        out = where(keep, out, bound)
    return out
