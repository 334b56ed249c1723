"""Canonical programs shared by the codegen, interpret, cubin and GPU tests.

Each entry is ``name -> (function of (xp, *arrays), input arrays builder(n))``;
``n`` scales the shapes (small for the interpreter, large on a GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

F32 = np.float32


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(xp: Any, x: Any) -> Any:
    s = x - x.max(axis=-1, keepdims=True)
    return s - xp.log(xp.exp(s).sum(axis=-1, keepdims=True))


def _layernorm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / xp.sqrt(var + F32(1e-5)) * w + b


def _rmsnorm(xp: Any, x: Any, w: Any) -> Any:
    ms = (x * x).mean(axis=-1, keepdims=True)
    return x / xp.sqrt(ms + F32(1e-6)) * w


def _mat(r: int, c: int, dtype: Any = F32, seed: int = 0) -> np.ndarray:
    return _rng(seed).standard_normal((r, c)).astype(dtype)


CANONICAL: dict[str, tuple[Callable[..., Any], Callable[[int], list[np.ndarray]]]] = {
    "pointwise_chain": (lambda xp, x, b: xp.maximum(x * F32(2) + b, F32(0)) * F32(0.5) - xp.exp(-x),
                        lambda n: [_mat(n, 3 * n), _mat(1, 3 * n, seed=1)]),
    "transpose_add": (lambda xp, x, y: x.T + y, lambda n: [_mat(n, 2 * n), _mat(2 * n, n, seed=1)]),
    "slices_negative_steps": (lambda xp, x: x[::-1, 1::2][1:] * F32(3) + x[:-1, ::-2][:, 1:],
                              lambda n: [_mat(n + 1, 2 * n + 1)]),
    "reshape_views": (lambda xp, x: (x.reshape(x.shape[0], 2, -1).transpose(1, 0, 2) + F32(1)).reshape(-1),
                      lambda n: [_mat(n, 4 * n)]),
    "softmax": (_softmax, lambda n: [_mat(n, 5 * n + 3)]),
    "log_softmax": (_log_softmax, lambda n: [_mat(n, 5 * n)]),
    "layernorm": (_layernorm, lambda n: [_mat(n, 4 * n + 1), _mat(1, 4 * n + 1, seed=1)[0],
                                         _mat(1, 4 * n + 1, seed=2)[0]]),
    "rmsnorm": (_rmsnorm, lambda n: [_mat(n, 4 * n), _mat(1, 4 * n, seed=1)[0]]),
    "sum_max_siblings": (lambda xp, x: (x.sum(axis=1), x.max(axis=1)), lambda n: [_mat(n, 3 * n)]),
    "mean_var": (lambda xp, x: (x.mean(axis=-1), x.var(axis=-1)), lambda n: [_mat(n, 3 * n)]),
    "reduce_middle_axis": (lambda xp, x: x.sum(axis=1),
                           lambda n: [_rng().standard_normal((n, n + 3, 2 * n)).astype(F32)]),
    "outer_reduction": (lambda xp, x: x.sum(axis=0), lambda n: [_mat(4 * n, 3 * n)]),
    "full_reduction": (lambda xp, x: x.sum(), lambda n: [_mat(4 * n, 4 * n)]),
    "argmax_nan": (lambda xp, x: (xp.argmax(x, axis=1), xp.argmin(x, axis=1), x.max(axis=1)),
                   lambda n: [np.where(_mat(n, 3 * n) > 1.2, np.nan, _mat(n, 3 * n)).astype(F32)]),
    "int_floordiv_mod": (lambda xp, a, b: (a // b, a % b),
                         lambda n: [_rng().integers(-20, 20, (n, 2 * n)).astype(np.int32),
                                    _rng(1).integers(-5, 5, (n, 2 * n)).astype(np.int32)]),
    "float16": (lambda xp, x: (xp.exp(x) * x + x, (x * x).sum(axis=-1)),
                lambda n: [_mat(n, 2 * n, np.float16)]),
    "empty": (lambda xp, x: (x + F32(1), x.sum(axis=1)), lambda n: [np.zeros((n, 0), F32)]),
    "zero_d": (lambda xp, x: x * F32(2) + F32(1), lambda n: [np.array(3.0, F32)]),
}

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]


def dtype_inputs(dtype: str, n: int) -> list[np.ndarray]:
    """Two arrays of ``dtype`` with values valid for add and casts."""
    dt = np.dtype(dtype)
    rng = _rng(3)
    if dt.kind == "b":
        return [rng.integers(0, 2, (n, 3 * n)).astype(dt), rng.integers(0, 2, (1, 3 * n)).astype(dt)]
    if dt.kind in "iu":
        return [rng.integers(0, 50, (n, 3 * n)).astype(dt), rng.integers(0, 50, (1, 3 * n)).astype(dt)]
    return [rng.standard_normal((n, 3 * n)).astype(dt), rng.standard_normal((1, 3 * n)).astype(dt)]


def dtype_program(xp: Any, a: Any, b: Any) -> Any:
    """add (with broadcast), cast to float32 and to int16, and a comparison."""
    s = a + b
    return s, s.astype(np.float32), s.astype(np.int16), a > b


def _vec(n: int, dtype: Any = F32, seed: int = 0) -> np.ndarray:
    return _rng(seed).standard_normal(n).astype(dtype)


def _full_reductions(xp: Any, x: Any) -> Any:
    return x.sum(), x.max(), x.min(), (x > 0).any(), (x > -9).all()


#: Programs the fuser runs as split reductions (small output, long reduction): the same
#: ``name -> (function, builder(n))`` form, ``n`` being the number of reduced elements
#: (at least ``2**16`` for the fuser to split; ``2**26`` on a GPU).
def _exact_factors(n: int) -> np.ndarray:
    x = np.ones(n, F32)
    where = np.random.default_rng(7).choice(n, size=min(n, 96), replace=False)
    x[where] = np.random.default_rng(8).choice(np.array([2.0, 0.5, -1.0], F32), size=where.size)
    return x


def _ties(x: np.ndarray, nan: bool = False, seed: int = 11) -> np.ndarray:
    """``x`` with its largest and smallest values each placed twice along axis 0 (the first
    index wins), and with ``nan`` two NaNs after the first of them (the first NaN wins)."""
    x = x.copy()
    at = np.sort(np.random.default_rng(seed).choice(x.shape[0], size=4, replace=False))
    top, bottom = x.max() + 1, x.min() - 1
    x[at[[1, 3]]] = top
    x[at[[0, 2]]] = bottom
    if nan:
        x[at[[2, 3]]] = np.nan
    return x


def _argbest(xp: Any, x: Any) -> Any:
    return x.argmax(), x.argmin()


SPLIT: dict[str, tuple[Callable[..., Any], Callable[[int], list[np.ndarray]]]] = {
    # argmax/argmin: each chunk's (best, first index), combined in chunk order
    "argbest": (_argbest, lambda n: [_ties(_vec(n))]),
    "argbest_nan": (_argbest, lambda n: [_ties(_vec(n), nan=True)]),
    "argbest_int16": (_argbest, lambda n: [_ties(_rng(3).integers(-99, 99, n).astype(np.int16))]),
    "argbest_columns": (lambda xp, x: (x.argmax(axis=0), x.argmin(axis=0, keepdims=True)),
                        lambda n: [_ties(_mat(max(n // 64, 1 << 16), 64))]),
    "full_f32": (_full_reductions, lambda n: [_vec(n)]),
    "full_nan": (_full_reductions,
                 lambda n: [np.where(_rng(5).random(n) < 1e-5, np.nan, _vec(n)).astype(F32)]),
    "full_int32": (lambda xp, x: (x.sum(), x.prod(), x.max(), x.min(), x.mean()),
                   lambda n: [_rng(2).integers(-1000, 1000, n).astype(np.int32)]),
    "full_float16": (lambda xp, x: (x.sum(), x.max(), x.min(), x.mean()),
                     lambda n: [_vec(n, np.float16)]),
    # ones with a few factors of 2, 1/2 and -1: the product is exact in float32 in any order,
    # so it is compared exactly (a product of 2**26 general floats carries ~n*eps of rounding)
    "prod_exact": (lambda xp, x: x.prod(), lambda n: [_exact_factors(n)]),
    "column_sums": (lambda xp, x: (x.sum(0), x.max(0)), lambda n: [_mat(max(n // 64, 1 << 16), 64)]),
    "mean": (lambda xp, x: x.mean(), lambda n: [_vec(n)]),
    # var reduces a value computed from the mean: a chain of reductions, not split (yet)
    "var": (lambda xp, x: x.var(), lambda n: [_vec(n)]),
    "norm_plus_one": (lambda xp, x: xp.sqrt((x * x).sum()) + F32(1), lambda n: [_vec(n)]),
}


def check_float_divmod_bit_for_bit(to_array: Callable[[np.ndarray], Any]) -> None:
    """floor_divide and remainder over special floats, bit for bit against NumPy.

    NumPy's npy_divmod: remainders take the divisor's sign (zero ones too), a zero quotient
    takes the sign of x / y, division by zero gives x / y. ``to_array`` puts an input where
    the backend under test reads it.
    """
    import itertools

    import fusejit as fj
    values = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf, np.nan,
                       2.5, -7.25, 1e-300])
    xs, ys = (np.array(v) for v in zip(*itertools.product(values, values)))
    for dtype in (np.float64, np.float32, np.float16):
        x, y = xs.astype(dtype), ys.astype(dtype)
        with np.errstate(all="ignore"):
            expected = (np.remainder(x, y), np.floor_divide(x, y))
        fx, fy = fj.asarray(to_array(x)), fj.asarray(to_array(y))
        got = (fj.remainder(fx, fy).numpy(), fj.floor_divide(fx, fy).numpy())
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
            finite = ~np.isnan(e)
            np.testing.assert_array_equal(np.signbit(g[finite]), np.signbit(e[finite]))


def check_float_power_special_values(to_array: Callable[[np.ndarray], Any]) -> None:
    """power over signed zeros, infinities, NaN and negative bases against NumPy's (C pow's)
    IEEE results, for arrays of exponents (a scalar 0.5 is sqrt, tested with the frontend)."""
    import itertools

    import fusejit as fj
    values = np.array([-0.0, 0.0, -np.inf, np.inf, np.nan, 2.0, -2.0, 0.5, -0.5, 1.0, -1.0,
                       3.0, -3.0, 1.5])
    xs, ys = (np.array(v) for v in zip(*itertools.product(values, values)))
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 1e-6), (np.float16, 1e-3)):
        x, y = xs.astype(dtype), ys.astype(dtype)
        with np.errstate(all="ignore"):
            expected = np.power(x, y)
        got = fj.power(fj.asarray(to_array(x)), fj.asarray(to_array(y))).numpy()
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=0)
        finite = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(expected[finite]))


#: Inputs where float functions have signed zeros, infinities, NaN, overflow or domain edges.
SPECIAL_VALUES = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-30, -1e-30, 1e-8, -1e-8, 0.5,
                           -0.5, 1.0, -1.0, 0.999, -0.999, 2.5, -2.5, 3.0, 30.0, -30.0, 700.0,
                           -700.0, 1e200, -1e300])

#: Unary float functions audited at ``SPECIAL_VALUES`` in every float dtype.
SPECIAL_UNARY = ("negative", "abs", "square", "sign", "exp", "exp2", "expm1", "log", "log2",
                 "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "arcsin",
                 "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
                 "sigmoid", "erf", "floor", "ceil", "trunc", "rint")


def check_unary_special_values(to_array: Callable[[np.ndarray], Any], name: str,
                               dtype: Any) -> None:
    """``name`` over ``SPECIAL_VALUES`` cast to ``dtype``: NumPy's infinities, NaNs and signed
    zeros exactly, other values within a few ulp (float64 1e-13, float32 2e-6, float16 1e-3:
    libdevice and libm differ by up to 2 ulp; float16 computes in float32 and rounds once)."""
    import fusejit as fj
    from fusejit.testing import numpy_reference

    dtype = np.dtype(dtype)
    rtol = {8: 1e-13, 4: 2e-6, 2: 1e-3}[dtype.itemsize]
    with np.errstate(all="ignore"):
        x = SPECIAL_VALUES.astype(dtype)
        expected = np.asarray(numpy_reference(name)(x))
    got = getattr(fj, name)(fj.asarray(to_array(x))).numpy()
    assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
    where = f"{name}({dtype}) at {x.tolist()}"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg="NaN " + where)
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(expected), err_msg="+inf " + where)
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(expected), err_msg="-inf " + where)
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite].astype(np.float64), expected[finite].astype(np.float64),
                               rtol=rtol, atol=0, err_msg=where)
    signed = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(expected[signed]),
                                  err_msg="sign bit " + where)
