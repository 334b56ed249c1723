"""The lazy frontend against NumPy: constructors, Tensor API, every op, reductions, views, graph."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import fusejit as fj
from fusejit.ir.graph import MAX_SCALAR_LEAVES, lower, topological_order
from fusejit.testing import assert_matches_numpy, numpy_reference, tolerance

pytestmark = pytest.mark.usefixtures("numpy_backend")

RNG = np.random.default_rng(1234)
X = RNG.uniform(-3, 3, (3, 4)).astype(np.float32)
POS = RNG.uniform(0.1, 3, (3, 4)).astype(np.float32)
UNIT = RNG.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
I8 = RNG.integers(-100, 100, (3, 4)).astype(np.int8)
U8 = RNG.integers(0, 200, (3, 4)).astype(np.uint8)
B = RNG.integers(0, 2, (3, 4)).astype(bool)
F64 = np.array([[0.0, -0.0, np.nan, np.inf], [-np.inf, 1.5, -2.5, 3.0], [0.5, -0.5, 2.5, -1e300]])


# -- constructors ------------------------------------------------------------------

def test_asarray_from_numpy_keeps_dtype_shape_and_is_lazy_leaf() -> None:
    t = fj.asarray(X, name="x")
    assert t.shape == (3, 4) and t.dtype == np.float32 and t.ndim == 2 and t.size == 12
    assert t.is_realized  # a leaf holds its buffer
    assert "%x" in fj.dump(t * 2) if hasattr(fj, "dump") else True
    np.testing.assert_array_equal(t.numpy(), X)


@pytest.mark.parametrize("obj, dtype", [
    ([[1, 2], [3, 4]], np.int64), ([1.5, 2], np.float64), ([True, False], np.bool_),
    (3, np.int64), (2.5, np.float64), (True, np.bool_), ([], np.float64),
])
def test_asarray_lists_and_scalars(obj: object, dtype: type) -> None:
    t = fj.asarray(obj)
    assert t.dtype == np.dtype(dtype)
    assert_matches_numpy(t, np.asarray(obj))


def test_asarray_dtype_argument_and_tensor_passthrough() -> None:
    t = fj.asarray([1, 2, 3], dtype=np.float16)
    assert t.dtype == np.float16
    assert fj.asarray(t) is t
    assert fj.asarray(t, dtype="int32").dtype == np.int32


def test_asarray_byteswapped_input_is_normalized() -> None:
    a = np.arange(4, dtype=">i4")
    assert_matches_numpy(fj.asarray(a) + 1, np.arange(4, dtype=np.int32) + 1)


def test_cupy_is_optional() -> None:
    # the package imports and runs without CuPy; importing fusejit must not import it
    assert fj.asarray(X).numpy() is not None
    if "cupy" not in sys.modules:
        assert "cupy" not in sys.modules


@pytest.mark.parametrize("fn, args, expected", [
    (fj.zeros, ((2, 3),), np.zeros((2, 3))),
    (fj.ones, (4,), np.ones(4)),
    (fj.zeros, ((2,), np.int8), np.zeros(2, np.int8)),
    (fj.full, ((2, 2), 7), np.full((2, 2), 7)),
    (fj.full, ((2, 2), 1.5, np.float16), np.full((2, 2), 1.5, np.float16)),
    (fj.full, ((), True), np.full((), True)),
    (fj.arange, (5,), np.arange(5)),
    (fj.arange, (2, 11, 3), np.arange(2, 11, 3)),
    (fj.arange, (5, 0, -2), np.arange(5, 0, -2)),
    (fj.arange, (0.0, 1.0, 0.25), np.arange(0.0, 1.0, 0.25)),
    (fj.arange, (3, 1), np.arange(3, 1)),
])
def test_factories(fn: object, args: tuple, expected: np.ndarray) -> None:
    t = fn(*args)  # type: ignore[operator]
    assert not t.is_realized
    assert_matches_numpy(t, expected)


def test_full_allocates_no_host_buffer() -> None:
    t = fj.full((10_000, 10_000), 3.0, np.float32)  # 400 MB if it were allocated
    assert t._node.op == "const" and t._node.buffer is None
    assert t.shape == (10_000, 10_000)
    assert float(t[5, 7]) == 3.0


def test_like_factories() -> None:
    base = fj.asarray(I8)
    assert_matches_numpy(fj.zeros_like(base), np.zeros_like(I8))
    assert_matches_numpy(fj.ones_like(base), np.ones_like(I8))
    assert_matches_numpy(fj.full_like(base, 3), np.full_like(I8, 3))
    assert_matches_numpy(fj.full_like(base, 2.5, dtype=np.float32), np.full_like(I8, 2.5, np.float32))
    assert_matches_numpy(fj.zeros_like(X), np.zeros_like(X))


# -- the Tensor object ----------------------------------------------------------------

def test_repr_does_not_compute() -> None:
    t = fj.exp(fj.asarray(X)) + 1
    text = repr(t)
    assert "shape=(3, 4)" in text and "float32" in text and "lazy" in text
    assert not t.is_realized
    t.realize()
    assert t.is_realized and "realized" in repr(t)


def test_realize_returns_self_and_numpy_array_protocol() -> None:
    t = fj.asarray(X) * 2
    assert t.realize() is t
    np.testing.assert_array_equal(np.asarray(t), X * 2)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert_matches_numpy(t, X * 2)


def test_scalar_conversions() -> None:
    t = fj.asarray(X)
    assert float(t.sum()) == pytest.approx(float(X.sum()), rel=1e-6)
    assert int(fj.asarray(7) * 3) == 21
    assert bool(fj.asarray(X)[0, 0] == X[0, 0]) is True
    assert fj.asarray([[5]]).item() == 5 and isinstance(fj.asarray([[5]]).item(), int)
    assert len(t) == 3 and [r.shape for r in t] == [(4,)] * 3


def test_transpose_property_and_methods() -> None:
    t = fj.asarray(X)
    assert t.T.shape == (4, 3)
    assert_matches_numpy(t.T, X.T)
    assert_matches_numpy(t.transpose(), X.transpose())
    assert_matches_numpy(t.transpose(1, 0), X.transpose(1, 0))
    assert_matches_numpy(t.permute(1, 0), X.transpose(1, 0))
    assert_matches_numpy(t.T.T, X)


# -- elementwise: functions, methods, operators -------------------------------------------

UNARY = ["negative", "positive", "abs", "absolute", "square", "sign", "exp", "exp2", "expm1",
         "sin", "cos", "tan", "arctan", "sinh", "cosh", "tanh", "arcsinh", "sigmoid", "erf",
         "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "reciprocal"]
UNARY_POSITIVE = ["log", "log2", "log10", "log1p", "sqrt", "rsqrt"]
UNARY_UNIT = ["arcsin", "arccos", "arctanh"]


@pytest.mark.parametrize("name", UNARY + UNARY_POSITIVE + UNARY_UNIT)
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_unary_float(name: str, dtype: type) -> None:
    data = (POS if name in UNARY_POSITIVE else UNIT if name in UNARY_UNIT else X).astype(dtype)
    expected = numpy_reference(name)(data)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(data)), expected)
    assert_matches_numpy(getattr(fj.asarray(data), name)(), expected)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "sigmoid", "rsqrt", "erf", "isnan",
                                  "floor", "abs", "sign", "negative", "square", "arccosh"])
@pytest.mark.parametrize("data", [I8, U8, I8.astype(np.int64), B], ids=["i8", "u8", "i64", "bool"])
def test_unary_on_ints_and_bools_follow_numpy_loops(name: str, data: np.ndarray) -> None:
    try:
        expected = numpy_reference(name)(np.abs(data) if name != "sign" else data)
    except TypeError:
        with pytest.raises(fj.DTypeError):
            getattr(fj, name)(fj.asarray(data))
        return
    with np.errstate(all="ignore"):
        assert_matches_numpy(getattr(fj, name)(fj.asarray(np.abs(data) if name != "sign" else data)),
                             expected)


def test_special_float_values() -> None:
    t = fj.asarray(F64)
    with np.errstate(all="ignore"):
        for name in ["exp", "log", "sqrt", "sign", "isnan", "isinf", "isfinite", "floor", "tanh",
                     "sigmoid", "abs", "rint"]:
            assert_matches_numpy(getattr(fj, name)(t), numpy_reference(name)(F64), err_msg=name)
        assert_matches_numpy(fj.maximum(t, 0), np.maximum(F64, 0))
        assert_matches_numpy(fj.minimum(t, t[::-1]), np.minimum(F64, F64[::-1]))
        assert_matches_numpy(t / 0.0, F64 / 0.0)


BINARY_ANY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "less", "less_equal",
              "greater", "greater_equal", "equal", "not_equal", "logical_and", "logical_or",
              "logical_xor", "power", "floor_divide", "remainder"]
BINARY_INT = ["bitwise_and", "bitwise_or", "bitwise_xor"]


@pytest.mark.parametrize("name", BINARY_ANY + ["arctan2"])
@pytest.mark.parametrize("a, b", [(X, POS), (X, POS[0]),
                                  (X.astype(np.float64), POS[:, :1].astype(np.float16))],
                         ids=["same", "row", "mixed"])
def test_binary_float(name: str, a: np.ndarray, b: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a, b)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(a), fj.asarray(b)), expected)
    assert_matches_numpy(getattr(fj.asarray(a), name)(fj.asarray(b)), expected)


@pytest.mark.parametrize("name", BINARY_ANY + BINARY_INT)
@pytest.mark.parametrize("a, b", [(I8, U8), (I8, np.where(I8 == 0, 1, I8)), (B, B[::-1]), (U8, B)],
                         ids=["i8u8", "i8i8", "bool", "u8bool"])
def test_binary_int_and_bool(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if name in ("floor_divide", "remainder"):
        b = np.where(b == 0, 1, b).astype(b.dtype)
    if name == "power":
        b = (b % 3).astype(b.dtype)
    try:
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(a, b)
    except TypeError:
        with pytest.raises(fj.DTypeError):
            getattr(fj, name)(fj.asarray(a), fj.asarray(b))
        return
    assert_matches_numpy(getattr(fj, name)(fj.asarray(a), fj.asarray(b)), expected)


@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint64, np.int64])
def test_shifts(name: str, dtype: type) -> None:
    a = I8.astype(dtype)
    shifts = (np.abs(I8) % 7).astype(dtype)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(a), fj.asarray(shifts)), getattr(np, name)(a, shifts))
    assert_matches_numpy(getattr(fj, name)(fj.asarray(a), 3), getattr(np, name)(a, 3))


def test_operators_and_reflected_operators_with_scalars_and_arrays() -> None:
    t, tb, ti = fj.asarray(X), fj.asarray(B), fj.asarray(I8)
    w = np.where(I8 == 0, 3, I8).astype(np.int8)
    cases = [
        (t + 1, X + 1), (1 + t, 1 + X), (t - 2.5, X - 2.5), (2.5 - t, 2.5 - X), (t * 3, X * 3),
        (3 * t, 3 * X), (t / 2, X / 2), (2 / fj.asarray(POS), 2 / POS), (t // 2, X // 2),
        (7 // fj.asarray(w), 7 // w), (t % 2, X % 2), (7 % fj.asarray(w), 7 % w),
        (t ** 2, X ** 2), (2 ** t, 2 ** X), (-t, -X), (+t, +X), (abs(t), abs(X)),
        (t < 0, X < 0), (t <= 0, X <= 0), (t > 0, X > 0), (t >= 0, X >= 0), (t == t, X == X),
        (t != 0, X != 0), (0 < t, 0 < X), (tb & True, B & True), (False | tb, False | B),
        (tb ^ tb, B ^ B), (~tb, ~B), (~ti, ~I8), (ti & 3, I8 & 3), (3 | ti, 3 | I8),
        (ti ^ 5, I8 ^ 5), (ti << 2, I8 << 2), (ti >> 1, I8 >> 1), (1 << fj.asarray(U8 % 8), 1 << (U8 % 8)),
        (X + t, X + X), (X * t, X * X), (X < t, X < X),  # ndarray on the left defers to Tensor
    ]
    for got, expected in cases:
        assert isinstance(got, fj.Tensor)
        assert_matches_numpy(got, expected)


def test_clip_where_astype() -> None:
    t = fj.asarray(X)
    assert_matches_numpy(fj.clip(t, -1, 1), np.clip(X, -1, 1))
    assert_matches_numpy(t.clip(-1, None), np.clip(X, -1, None))
    assert_matches_numpy(fj.clip(t, None, 0.5), np.clip(X, None, 0.5))
    assert_matches_numpy(fj.clip(fj.asarray(I8), 0, 10), np.clip(I8, 0, 10))
    assert_matches_numpy(fj.where(t > 0, t, 0), np.where(X > 0, X, 0))
    assert_matches_numpy(fj.where(B, fj.asarray(I8), 2.5), np.where(B, I8, 2.5))
    assert_matches_numpy(fj.where(X, 1, 0), np.where(X, 1, 0))
    assert_matches_numpy(fj.where(True, fj.asarray(U8), fj.asarray(I8)), np.where(True, U8, I8))
    for dtype in ["bool", "int8", "uint16", "int64", "float16", "float64"]:
        source = I8 if dtype != "bool" else X
        assert_matches_numpy(fj.asarray(source).astype(dtype), source.astype(dtype))
        assert_matches_numpy(fj.astype(fj.asarray(source), dtype), source.astype(dtype))


def test_int_division_by_zero_follows_numpy() -> None:
    zero = np.zeros_like(I8)
    with np.errstate(all="ignore"):
        assert_matches_numpy(fj.asarray(I8) // fj.asarray(zero), I8 // zero)
        assert_matches_numpy(fj.asarray(I8) % fj.asarray(zero), I8 % zero)


def test_weak_python_scalars_keep_dtype() -> None:
    assert (fj.asarray(I8) + 1).dtype == np.int8
    assert (fj.asarray(I8) + 1.0).dtype == np.float64
    assert (fj.asarray(X.astype(np.float16)) * 2.0).dtype == np.float16
    assert (fj.asarray(B) + True).dtype == np.bool_
    assert (fj.asarray(B) + 1).dtype == np.int64
    assert (fj.asarray(I8) / fj.asarray(I8)).dtype == np.float64
    assert (fj.asarray(U8) < -1).dtype == np.bool_
    assert_matches_numpy(fj.asarray(U8) < -1, U8 < -1)
    assert_matches_numpy(fj.asarray(U8) != 300, U8 != 300)
    assert (fj.asarray(I8) + np.float32(1)).dtype == np.float32  # NumPy scalars are strong


def test_int64_uint64_comparisons_are_exact() -> None:
    a = np.array([-5, 0, 5, -1], np.int64)
    b = np.array([3, 0, 2**64 - 1, 2**63], np.uint64)
    for name in ["less", "less_equal", "greater", "greater_equal", "equal", "not_equal"]:
        assert_matches_numpy(getattr(fj, name)(fj.asarray(a), fj.asarray(b)), getattr(np, name)(a, b))
        assert_matches_numpy(getattr(fj, name)(fj.asarray(b), fj.asarray(a)), getattr(np, name)(b, a))


# -- reductions ----------------------------------------------------------------------

A3 = RNG.uniform(-2, 2, (2, 3, 4))
AXES = [None, 0, 1, 2, -1, -3, (0, 2), (-1, 0), (0, 1, 2), ()]


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "amax", "amin", "mean", "var", "std",
                                  "any", "all", "logsumexp"])
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions_axes_keepdims(name: str, axis: object, keepdims: bool) -> None:
    expected = numpy_reference(name)(A3, axis=axis, keepdims=keepdims)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(A3), axis=axis, keepdims=keepdims), expected)
    if name not in ("amax", "amin", "logsumexp"):
        assert_matches_numpy(getattr(fj.asarray(A3), name)(axis=axis, keepdims=keepdims), expected)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_reductions(name: str, axis: object, keepdims: bool) -> None:
    data = np.round(A3)  # ties: the first index wins, as in NumPy
    expected = getattr(np, name)(data, axis=axis, keepdims=keepdims)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(data), axis=axis, keepdims=keepdims), expected)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int32", "uint64", "float16", "float32"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "mean", "var", "std", "any", "argmin"])
def test_reduction_result_dtypes_follow_numpy(dtype: str, name: str) -> None:
    data = (np.abs(I8) % 5).astype(dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(data, axis=0)
    assert_matches_numpy(getattr(fj, name)(fj.asarray(data), axis=0), expected)


def test_var_std_ddof_and_nan_propagation() -> None:
    for ddof in (0, 1, 2):
        assert_matches_numpy(fj.var(fj.asarray(A3), axis=1, ddof=ddof), np.var(A3, axis=1, ddof=ddof))
        assert_matches_numpy(fj.std(fj.asarray(A3), axis=(0, 2), ddof=ddof),
                             np.std(A3, axis=(0, 2), ddof=ddof))
    t = fj.asarray(F64)
    for name in ["sum", "max", "min", "mean", "prod", "argmax", "argmin"]:
        assert_matches_numpy(getattr(fj, name)(t, axis=1), getattr(np, name)(F64, axis=1), err_msg=name)


def test_empty_reductions() -> None:
    e = np.zeros((0, 3))
    with np.errstate(all="ignore"):
        for name in ["sum", "prod", "mean", "any", "all"]:
            assert_matches_numpy(getattr(fj, name)(fj.asarray(e), axis=0), getattr(np, name)(e, axis=0))
            assert_matches_numpy(getattr(fj, name)(fj.asarray(e)), getattr(np, name)(e))
        assert_matches_numpy(fj.max(fj.asarray(e), axis=1), np.max(e, axis=1))


# -- views ---------------------------------------------------------------------------

def test_reshape_forms() -> None:
    t = fj.asarray(A3)
    assert_matches_numpy(t.reshape(-1), A3.reshape(-1))
    assert_matches_numpy(t.reshape(4, -1), A3.reshape(4, -1))
    assert_matches_numpy(t.reshape((6, 4)), A3.reshape((6, 4)))
    assert_matches_numpy(fj.reshape(t, (2, -1, 2)), A3.reshape((2, -1, 2)))
    assert_matches_numpy(fj.ravel(t.T), np.ravel(A3.T))  # reshape of a permuted view: C order
    assert_matches_numpy(fj.asarray(np.zeros((0, 3))).reshape(-1), np.zeros((0, 3)).reshape(-1))


def test_transpose_expand_squeeze_broadcast_flip() -> None:
    t = fj.asarray(A3)
    assert_matches_numpy(fj.transpose(t, (2, 0, 1)), np.transpose(A3, (2, 0, 1)))
    assert_matches_numpy(fj.transpose(t, (-1, 0, -2)), np.transpose(A3, (-1, 0, -2)))
    assert_matches_numpy(fj.permute_dims(t, (1, 0, 2)), np.permute_dims(A3, (1, 0, 2)))
    assert_matches_numpy(fj.swapaxes(t, 0, 2), np.swapaxes(A3, 0, 2))
    assert_matches_numpy(fj.moveaxis(t, 0, -1), np.moveaxis(A3, 0, -1))
    assert_matches_numpy(fj.expand_dims(t, 0), np.expand_dims(A3, 0))
    assert_matches_numpy(fj.expand_dims(t, -1), np.expand_dims(A3, -1))
    assert_matches_numpy(fj.expand_dims(t, (0, 2)), np.expand_dims(A3, (0, 2)))
    s = A3[:, :1, None]
    assert_matches_numpy(fj.squeeze(fj.asarray(s)), np.squeeze(s))
    assert_matches_numpy(fj.squeeze(fj.asarray(s), axis=1), np.squeeze(s, axis=1))
    assert_matches_numpy(fj.squeeze(fj.asarray(s), axis=(1, -2)), np.squeeze(s, axis=(1, -2)))
    assert_matches_numpy(fj.broadcast_to(fj.asarray(A3[:, :1]), (5, 2, 3, 4)),
                         np.broadcast_to(A3[:, :1], (5, 2, 3, 4)))
    assert_matches_numpy(fj.broadcast_to(fj.asarray(2.0), (3,)), np.broadcast_to(2.0, (3,)))
    assert_matches_numpy(fj.flip(t), np.flip(A3))
    assert_matches_numpy(fj.flip(t, 1), np.flip(A3, 1))
    assert_matches_numpy(t.flip((0, -1)), np.flip(A3, (0, -1)))


INDICES = [
    0, -1, (1, 2), (slice(None), 0), (slice(None, None, -1),), (slice(1, None), slice(None, None, 2)),
    (Ellipsis, -1), (None, 0), (0, None, slice(None), None), (slice(-2, None), slice(3, 0, -2), 1),
    (slice(5, -5, -1),), (slice(0, 0),), (Ellipsis,), (slice(None, None, 3), Ellipsis, slice(1, 3)),
    (-2, -3, -4), (slice(-100, 100),),
]


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in INDICES])
def test_basic_indexing(index: object) -> None:
    assert_matches_numpy(fj.asarray(A3)[index], A3[index])


def test_views_compose_and_feed_ops() -> None:
    t = fj.asarray(A3)
    got = (t.T[::-1, 1:] + 1).reshape(-1)[::3].sum()
    assert_matches_numpy(got, (A3.T[::-1, 1:] + 1).reshape(-1)[::3].sum())
    z = fj.asarray(np.float32(3.5))  # 0-d
    assert z.shape == () and z.ndim == 0 and z.size == 1
    assert_matches_numpy(z[None, ...] * 2, np.float32(3.5)[None, ...] * 2)


# -- composites ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
@pytest.mark.parametrize("axis", [-1, 0])
def test_composites(dtype: type, axis: int) -> None:
    data = (A3 * 3).astype(dtype)
    w = np.linspace(0.5, 1.5, A3.shape[axis]).astype(np.float32)
    wb = w if axis == -1 else w[:, None, None]
    t = fj.asarray(data)
    if dtype == np.float16:  # float16 intermediates: a float32 result has float16 accuracy
        rtol, atol = tolerance(np.float16)
        assert_matches_numpy(fj.layer_norm(t, fj.asarray(wb), 0.25, axis=axis),
                             numpy_reference("layer_norm")(data, wb, 0.25, axis=axis), rtol=rtol, atol=atol)
        assert_matches_numpy(fj.rms_norm(t, fj.asarray(wb), axis=axis),
                             numpy_reference("rms_norm")(data, wb, axis=axis), rtol=rtol, atol=atol)
        wb = wb.astype(np.float16)
    assert_matches_numpy(fj.softmax(t, axis=axis), numpy_reference("softmax")(data, axis=axis))
    assert_matches_numpy(t.softmax(axis), numpy_reference("softmax")(data, axis=axis))
    assert_matches_numpy(fj.log_softmax(t, axis=axis), numpy_reference("log_softmax")(data, axis=axis))
    assert_matches_numpy(fj.layer_norm(t, axis=axis), numpy_reference("layer_norm")(data, axis=axis))
    assert_matches_numpy(fj.layer_norm(t, fj.asarray(wb), 0.25, axis=axis),
                         numpy_reference("layer_norm")(data, wb, 0.25, axis=axis))
    assert_matches_numpy(fj.rms_norm(t, axis=axis), numpy_reference("rms_norm")(data, axis=axis))
    assert_matches_numpy(fj.rms_norm(t, fj.asarray(wb), axis=axis),
                         numpy_reference("rms_norm")(data, wb, axis=axis))


def test_softmax_rows_sum_to_one_and_survive_large_inputs() -> None:
    big = np.array([[1000.0, 1000.0, -1000.0], [-np.inf, 0.0, 1.0]], np.float32)
    y = fj.softmax(fj.asarray(big)).numpy()
    np.testing.assert_allclose(y.sum(-1), 1, rtol=1e-6)
    assert np.isfinite(fj.logsumexp(fj.asarray(big), axis=1).numpy()).all()


# -- the graph --------------------------------------------------------------------------

def test_hash_consing_gives_cse() -> None:
    x = fj.asarray(X)
    a, b = fj.exp(x * x + x), fj.exp(x * x + x)
    assert a._node is b._node
    assert fj.asarray(X)._node is not x._node  # leaves holding data are never merged
    # Python scalars are parameters, never merged either (so that the structure never
    # depends on values): equal expressions with scalars are equal in structure only
    c, d = fj.exp(x * 2 + 1), fj.exp(x * 2 + 1)
    assert c._node is not d._node and c._node.sig == d._node.sig
    assert (x + 1)._node.sig == (x + 2)._node.sig


def test_realize_several_outputs_one_program_shared_subexpression_once() -> None:
    x = fj.asarray(X)
    shared = fj.exp(x * 2)
    a, b = shared.sum(axis=1), shared.max(axis=0)
    program, buffers, _ = lower([a._node, b._node])
    ops = [instr.op for instr in program.body]
    assert ops.count("exp") == 1 and ops.count("mul") == 1
    assert len(program.outputs) == 2 and len(buffers) == 2  # x, and 2 as a scalar param
    out = fj.realize(a, b)
    assert out == (a, b) and a.is_realized and b.is_realized
    assert_matches_numpy(a, np.exp(X * 2).sum(axis=1))
    assert_matches_numpy(b, np.exp(X * 2).max(axis=0))


def test_realize_counts_each_instruction_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit.runtime import numpy_backend
    calls: list[str] = []
    original = numpy_backend.evaluate_instr

    def counting(instr: object, args: list) -> np.ndarray:
        calls.append(instr.op)  # type: ignore[attr-defined]
        return original(instr, args)  # type: ignore[arg-type]

    monkeypatch.setattr(numpy_backend, "evaluate_instr", counting)
    x = fj.asarray(X)
    s = fj.sin(x)
    fj.realize(s + 1, s * 2, s - 3)
    assert calls.count("sin") == 1


def test_ten_thousand_op_chain_records_lowers_and_runs() -> None:
    x = fj.asarray(np.zeros(3, np.float64))
    y = x
    for i in range(10_000):
        y = y + 1 if i % 2 == 0 else y * 1.0
    # the input, 63 scalar params (a graph gets MAX_SCALAR_LEAVES leaves), then one shared
    # const 1.0, and 10,000 ops
    assert MAX_SCALAR_LEAVES == 64
    assert len(topological_order([y._node])) == 1 + 63 + 1 + 10_000
    assert_matches_numpy(y, np.full(3, 5000.0))
    if hasattr(fj, "dump"):
        z = x
        for _ in range(10_000):
            z = z - 1
        assert fj.dump(z).count("sub") == 10_000


def test_repeated_recording_keeps_value_dependent_checks():
    # the second recording of an op takes a memoized fast path; value checks must still apply
    x = fj.asarray(np.array([1, 2, 3], np.int8))
    assert (x + 1).dtype == np.int8
    with pytest.raises(fj.DTypeError, match="out of bounds for int8"):
        x + 1000
    np.testing.assert_array_equal((x < 5).numpy(), [True, True, True])
    np.testing.assert_array_equal((x < 300).numpy(), np.array([1, 2, 3], np.int8) < 300)
    np.testing.assert_array_equal((x * 2.5).numpy(), np.array([1, 2, 3], np.int8) * 2.5)
    b = fj.asarray(np.array([True, False]))
    np.testing.assert_array_equal((b + True).numpy(), np.array([True, False]) + True)
    np.testing.assert_array_equal((b + 2).numpy(), np.array([True, False]) + 2)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "float16", "float32", "float64"])
@pytest.mark.parametrize("exponent", [2, 2.0, 0.5, -1, -1.0, 3, 1])
def test_power_operator_follows_numpys_fast_scalar_paths(dtype, exponent):
    # NumPy's ** turns a scalar exponent of 2 into square (bool ** 2 is int8, not int64)
    # and, on floats, 0.5 into sqrt (sqrt(-0.0) is -0.0) and -1 into reciprocal
    a = np.array([1, 0, 1, 3], dtype) if dtype == "bool" or dtype[0] in "iu" else \
        np.array([-0.0, 0.0, 2.0, -np.inf], dtype)
    try:
        with np.errstate(all="ignore"):
            expected = a ** exponent
    except (ValueError, OverflowError) as exc:  # integers to negative integer powers
        error = fj.DomainError if isinstance(exc, ValueError) else fj.DTypeError
        with pytest.raises(error):
            fj.asarray(a) ** exponent
        return
    got = (fj.asarray(a) ** exponent).numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("args", [(6.0,), (0, 6.0), (2, 9, 2.0), (np.float32(5),), (np.int8(3), 7),
                                  (0, np.uint64(4)), (5, 0, -1), (1.5, 4.0, 0.5)])
def test_arange_dtype_and_values_follow_numpy(args):
    expected = np.arange(*args)
    got = fj.arange(*args)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)


def test_power_with_a_scalar_half_is_sqrt_as_in_numpy():
    # np.power(x, 0.5) with a scalar exponent is sqrt(x) (-0.0 stays -0.0, -inf gives nan);
    # with an array of exponents it is pow, and so it is here
    for dtype in (np.float64, np.float32, np.float16):   # (float16's loop calls pow)
        a = np.array([-0.0, -np.inf, 2.0, np.nan, 0.0], dtype)
        for exponent in (0.5, np.float64(0.5), np.float32(0.5)):
            with np.errstate(all="ignore"):
                expected = np.power(a, exponent)
            got = fj.power(a, exponent).numpy()
            np.testing.assert_array_equal(got, expected)
            np.testing.assert_array_equal(np.signbit(got[:3]), np.signbit(expected[:3]))
    a = np.array([-0.0, -np.inf, 2.0, np.nan, 0.0])
    with np.errstate(all="ignore"):
        expected = np.power(a, np.full(5, 0.5))
    np.testing.assert_array_equal(fj.power(a, np.full(5, 0.5)).numpy(), expected)


@pytest.mark.parametrize("backend_name", ["numpy", "interpret"])
def test_logsumexp_of_rows_with_infinities_and_nans_is_scipys(backend_name: str) -> None:
    """``logsumexp`` is ``where(isfinite(max), log(sumexp) + max, max)``: an online sum
    beside the max; where the max is not finite the result is the max, as SciPy's (+inf
    with an +inf, -inf when all are -inf, NaN with a NaN)."""
    if backend_name == "interpret":
        pytest.importorskip("triton")
    from fusejit.testing import numpy_reference
    rows = np.array([[0.5, -1.0, 2.0, 3.0], [np.inf, 1.0, 2.0, 0.0], [-np.inf] * 4,
                     [np.nan, 1.0, 2.0, 3.0], [-np.inf, np.inf, 0.0, 1.0],
                     [-np.inf, -np.inf, 1.0, 1.0], [1e30, 1e30, -1e30, 0.0]], np.float32)
    with fj.using_backend(backend_name), np.errstate(all="ignore"):
        for axis, data in ((1, rows), (0, rows.T.copy())):
            got = fj.logsumexp(fj.asarray(data), axis=axis).numpy()
            want = numpy_reference("logsumexp")(data, axis=axis)
            np.testing.assert_allclose(got, want, rtol=1e-6)
            assert got.dtype == want.dtype


def test_itemsize_and_nbytes_are_numpys_and_need_no_computation() -> None:
    for a in (np.zeros((3, 4), np.float32), np.zeros(5, np.float16), np.zeros((), np.int64),
              np.zeros((2, 0, 3), np.float64), np.broadcast_to(np.zeros(3, np.int8), (4, 3))):
        t = fj.asarray(a)
        lazy = t * 2
        assert (t.itemsize, t.nbytes) == (a.itemsize, a.nbytes)
        assert (lazy.itemsize, lazy.nbytes) == ((a * 2).itemsize, (a * 2).nbytes)
        assert not lazy.is_realized
