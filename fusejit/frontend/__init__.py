"""The lazy array frontend: ``Tensor`` and NumPy-named functions that record graph nodes."""

from __future__ import annotations

from typing import Any

from .linalg import dot, matmul, vecdot
from .reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    clip,
    layer_norm,
    log_softmax,
    logsumexp,
    max,
    mean,
    min,
    prod,
    rms_norm,
    softmax,
    std,
    sum,
    var,
)
from .tensor import (
    Tensor,
    arange,
    asarray,
    astype,
    binary,
    binary_recorder as _binary_recorder,
    from_dlpack,
    full,
    unary,
    unary_recorder as _unary_recorder,
    where,
)
from .views import (
    IndexingError,
    broadcast_to,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    ravel,
    reshape,
    squeeze,
    swapaxes,
    transpose,
)


def _binary_function(name: str, ufunc: str, doc: str) -> Any:
    """``fj.<name>``: the ufunc's recording function itself (an alias: a function calling it)."""
    record = _binary_recorder(ufunc)
    function = record
    if name != ufunc:
        def function(x1: Any, x2: Any) -> Tensor:
            return record(x1, x2)
    function.__name__ = function.__qualname__ = ufunc
    function.__doc__ = doc
    function.__module__ = __name__
    return function


def _unary_function(name: str, ufunc: str, doc: str) -> Any:
    """``fj.<name>``: the ufunc's recording function itself (an alias: a function calling it)."""
    record = _unary_recorder(ufunc)
    function = record
    if name != ufunc:
        def function(x: Any) -> Tensor:
            return record(x)
    function.__name__ = function.__qualname__ = ufunc
    function.__doc__ = doc
    function.__module__ = __name__
    return function


_BINARY_DOCS = {
    "add": "Elementwise ``x1 + x2``.", "subtract": "Elementwise ``x1 - x2``.",
    "multiply": "Elementwise ``x1 * x2``.", "divide": "Elementwise true division ``x1 / x2``.",
    "true_divide": "Elementwise true division ``x1 / x2``.",
    "floor_divide": "Elementwise ``x1 // x2`` (rounds toward minus infinity, as NumPy).",
    "remainder": "Elementwise ``x1 % x2`` with the sign of ``x2``, as NumPy.",
    "mod": "Elementwise ``x1 % x2`` with the sign of ``x2``, as NumPy.",
    "power": "Elementwise ``x1 ** x2``.", "maximum": "Elementwise maximum; NaN propagates.",
    "minimum": "Elementwise minimum; NaN propagates.", "arctan2": "Elementwise ``atan2(x1, x2)``.",
    "less": "Elementwise ``x1 < x2``.", "less_equal": "Elementwise ``x1 <= x2``.",
    "greater": "Elementwise ``x1 > x2``.", "greater_equal": "Elementwise ``x1 >= x2``.",
    "equal": "Elementwise ``x1 == x2``.", "not_equal": "Elementwise ``x1 != x2``.",
    "logical_and": "Elementwise logical and of the truth values.",
    "logical_or": "Elementwise logical or of the truth values.",
    "logical_xor": "Elementwise logical xor of the truth values.",
    "bitwise_and": "Elementwise ``x1 & x2`` on integers and bools.",
    "bitwise_or": "Elementwise ``x1 | x2`` on integers and bools.",
    "bitwise_xor": "Elementwise ``x1 ^ x2`` on integers and bools.",
    "left_shift": "Elementwise ``x1 << x2`` on integers.",
    "right_shift": "Elementwise ``x1 >> x2`` on integers (arithmetic for signed).",
}
_ALIASES = {"divide": "true_divide", "mod": "remainder"}
_UNARY_DOCS = {
    "negative": "Elementwise ``-x``.", "positive": "Elementwise ``+x``.",
    "abs": "Elementwise absolute value.", "absolute": "Elementwise absolute value.",
    "square": "Elementwise ``x * x``.", "sign": "Elementwise sign (-1, 0, 1; NaN stays NaN).",
    "exp": "Elementwise ``e**x``.", "exp2": "Elementwise ``2**x``.", "expm1": "Elementwise ``e**x - 1``.",
    "log": "Elementwise natural logarithm.", "log2": "Elementwise base-2 logarithm.",
    "log10": "Elementwise base-10 logarithm.", "log1p": "Elementwise ``log(1 + x)``.",
    "sqrt": "Elementwise square root.", "rsqrt": "Elementwise ``1 / sqrt(x)``.",
    "reciprocal": "Elementwise ``1 / x`` (floats).", "sin": "Elementwise sine.",
    "cos": "Elementwise cosine.", "tan": "Elementwise tangent.", "arcsin": "Elementwise arcsine.",
    "arccos": "Elementwise arccosine.", "arctan": "Elementwise arctangent.",
    "sinh": "Elementwise hyperbolic sine.", "cosh": "Elementwise hyperbolic cosine.",
    "tanh": "Elementwise hyperbolic tangent.", "arcsinh": "Elementwise inverse hyperbolic sine.",
    "arccosh": "Elementwise inverse hyperbolic cosine.",
    "arctanh": "Elementwise inverse hyperbolic tangent.",
    "sigmoid": "Elementwise logistic ``1 / (1 + exp(-x))``.", "erf": "Elementwise error function.",
    "floor": "Elementwise floor.", "ceil": "Elementwise ceiling.", "trunc": "Elementwise truncation.",
    "rint": "Elementwise round to nearest, ties to even.", "isnan": "Elementwise NaN test.",
    "isinf": "Elementwise infinity test.", "isfinite": "Elementwise finiteness test.",
    "logical_not": "Elementwise logical not.", "invert": "Elementwise bitwise not (logical for bool).",
    "bitwise_not": "Elementwise bitwise not (logical for bool).",
}
_UNARY_ALIASES = {"abs": "absolute", "bitwise_not": "invert"}

for _name, _doc in _BINARY_DOCS.items():
    globals()[_name] = _binary_function(_name, _ALIASES.get(_name, _name), _doc)
for _name, _doc in _UNARY_DOCS.items():
    globals()[_name] = _unary_function(_name, _UNARY_ALIASES.get(_name, _name), _doc)

ELEMENTWISE_FUNCTIONS = tuple(_BINARY_DOCS) + tuple(_UNARY_DOCS)


def zeros(shape: Any, dtype: Any = float) -> Tensor:
    """A lazy tensor of zeros (float64 by default)."""
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = float) -> Tensor:
    """A lazy tensor of ones (float64 by default)."""
    return full(shape, 1, dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Tensor:
    """A lazy constant with the shape (and by default the dtype) of ``x``."""
    x = asarray(x)
    return full(x.shape, fill_value, dtype if dtype is not None else x.dtype)


def zeros_like(x: Any, dtype: Any = None) -> Tensor:
    """Zeros with the shape and dtype of ``x``."""
    return full_like(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Tensor:
    """Ones with the shape and dtype of ``x``."""
    return full_like(x, 1, dtype)


def _attach_methods() -> None:
    g = globals()
    simple = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any",
              "all", "clip", "reshape", "transpose", "squeeze", "flip", "ravel", "swapaxes",
              "astype", "logsumexp", "softmax", "log_softmax", "cumsum"]
    for name in simple:
        if name in g:
            setattr(Tensor, name, g[name])
    # reshape and transpose take *args as methods, as in NumPy
    Tensor.reshape = lambda self, *shape: reshape(self, *shape)  # type: ignore[attr-defined]
    Tensor.transpose = lambda self, *axes: transpose(  # type: ignore[attr-defined]
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else (axes or None))
    Tensor.permute = lambda self, *axes: permute_dims(  # type: ignore[attr-defined]
        self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes)
    Tensor.expand_dims = expand_dims  # type: ignore[attr-defined]
    Tensor.broadcast_to = broadcast_to  # type: ignore[attr-defined]
    Tensor.amax, Tensor.amin = max, min  # type: ignore[attr-defined]
    Tensor.dot = dot  # type: ignore[attr-defined]
    Tensor.__matmul__ = lambda self, other: matmul(self, other)  # type: ignore[attr-defined]
    Tensor.__rmatmul__ = lambda self, other: matmul(other, self)  # type: ignore[attr-defined]
    for name in ELEMENTWISE_FUNCTIONS:
        if not hasattr(Tensor, name):
            setattr(Tensor, name, g[name])


_attach_methods()
