"""Result dtypes against NumPy 2's, for every dtype pair and every weak Python scalar kind.

Only the recorded dtype is compared (nothing is computed): ``(fj op).dtype``
must equal the dtype of NumPy's result on arrays of the same dtypes, and
where NumPy refuses the operands (TypeError, DTypePromotionError, or an
out-of-bounds Python int) fusejit must raise ``fj.DTypeError``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import fusejit as fj
from fusejit.testing import ALL_DTYPES

SCALARS = [True, 1, -1, 2.5, 300, -129, 2**64]
BINARY = ["add", "subtract", "multiply", "true_divide", "divide", "floor_divide", "remainder", "power",
          "maximum", "minimum", "arctan2", "less", "less_equal", "greater", "greater_equal", "equal",
          "not_equal", "logical_and", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
          "left_shift", "right_shift"]
UNARY = ["negative", "positive", "abs", "square", "sign", "exp", "exp2", "log", "sqrt", "sin", "tanh",
         "arctanh", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "logical_not",
         "bitwise_not", "reciprocal", "sigmoid", "rsqrt", "erf"]
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any", "all"]


#: NumPy rejected the operands' values (an integer to a negative integer power)
VALUE_ERROR = np.dtype("V1")


def _numpy_dtype(fn: Callable[[], Any]) -> np.dtype | None:
    """Dtype of NumPy's result, None when NumPy rejects the operands' types, VALUE_ERROR when
    it rejects their values."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(fn()).dtype
    except (TypeError, OverflowError, np.exceptions.DTypePromotionError):
        return None
    except ValueError:
        return VALUE_ERROR


def _check(expected: np.dtype | None, fj_fn: Callable[[], Any], what: str) -> None:
    if expected is VALUE_ERROR:
        with pytest.raises(fj.DomainError):
            fj_fn()
            pytest.fail(f"{what}: NumPy rejects these values, fusejit accepted them")
        return
    if expected is None:
        with pytest.raises(fj.DTypeError):
            fj_fn()
            pytest.fail(f"{what}: NumPy rejects it, fusejit accepted it")
        return
    got = fj_fn().dtype
    assert got == expected, f"{what}: fusejit {got}, NumPy {expected}"


def _arr(dt: np.dtype) -> np.ndarray:
    return np.ones(2, dt)


@pytest.mark.parametrize("op", BINARY)
def test_binary_dtype_pairs(op: str) -> None:
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            x, y = _arr(a), _arr(b)
            expected = _numpy_dtype(lambda: getattr(np, op)(x, y))  # noqa: B023
            _check(expected, lambda: getattr(fj, op)(fj.asarray(x), fj.asarray(y)),  # noqa: B023
                   f"{op}({a}, {b})")


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_binary_with_weak_python_scalars(op: str, scalar: Any) -> None:
    for a in ALL_DTYPES:
        x = _arr(a)
        for order in ("array_first", "scalar_first"):
            args_np = (x, scalar) if order == "array_first" else (scalar, x)
            expected = _numpy_dtype(lambda: getattr(np, op)(*args_np))  # noqa: B023
            args_fj = tuple(fj.asarray(v) if isinstance(v, np.ndarray) else v for v in args_np)
            _check(expected, lambda: getattr(fj, op)(*args_fj),  # noqa: B023
                   f"{op}({a} array, {scalar!r}) [{order}]")


@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_operators_with_scalars_match_functions(scalar: Any) -> None:
    for a in ALL_DTYPES:
        x = _arr(a)
        for sym in ["+", "-", "*", "/", "//", "%", "**", "<", "==", "&", "<<"]:
            fn = eval(f"lambda p, q: p {sym} q")  # noqa: S307  (fixed operator symbols)
            expected = _numpy_dtype(lambda: fn(x, scalar))  # noqa: B023
            _check(expected, lambda: fn(fj.asarray(x), scalar), f"{a} array {sym} {scalar!r}")  # noqa: B023
            expected = _numpy_dtype(lambda: fn(scalar, x))  # noqa: B023
            _check(expected, lambda: fn(scalar, fj.asarray(x)), f"{scalar!r} {sym} {a} array")  # noqa: B023


def test_numpy_scalars_are_strong() -> None:
    for a in ALL_DTYPES:
        for s in [np.int8(1), np.float32(1.5), np.uint64(3), np.bool_(True), np.float16(2)]:
            x = _arr(a)
            expected = _numpy_dtype(lambda: np.add(x, s))  # noqa: B023
            _check(expected, lambda: fj.add(fj.asarray(x), s), f"add({a} array, {s!r})")  # noqa: B023


def test_where_dtype_pairs_and_scalars() -> None:
    cond = np.array([True, False])
    for a in ALL_DTYPES:
        for b in [*ALL_DTYPES, *SCALARS]:
            x = _arr(a)
            y = _arr(b) if isinstance(b, np.dtype) else b
            expected = _numpy_dtype(lambda: np.where(cond, x, y))  # noqa: B023
            yf = fj.asarray(y) if isinstance(y, np.ndarray) else y
            _check(expected, lambda: fj.where(fj.asarray(cond), fj.asarray(x), yf),  # noqa: B023
                   f"where(cond, {a}, {b!r})")
            expected = _numpy_dtype(lambda: np.where(cond, y, x))  # noqa: B023
            _check(expected, lambda: fj.where(fj.asarray(cond), yf, fj.asarray(x)),  # noqa: B023
                   f"where(cond, {b!r}, {a})")


@pytest.mark.parametrize("scalars", [(1, 2.5), (True, 0), (1.5, 2.5), (True, False), (0, 1)])
def test_where_of_two_scalars(scalars: tuple[Any, Any]) -> None:
    expected = np.where(np.array([True]), *scalars).dtype
    assert fj.where(fj.asarray([True]), *scalars).dtype == expected


@pytest.mark.parametrize("op", UNARY)
def test_unary_dtypes(op: str) -> None:
    from fusejit.testing import numpy_reference
    for a in ALL_DTYPES:
        x = _arr(a)
        expected = _numpy_dtype(lambda: numpy_reference(op)(x))  # noqa: B023
        if op == "reciprocal" and a.kind in "biu":
            expected = None  # NumPy truncates 1/x on ints; fusejit refuses (DTypeError)
        _check(expected, lambda: getattr(fj, op)(fj.asarray(x)), f"{op}({a})")  # noqa: B023


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_dtypes(op: str) -> None:
    for a in ALL_DTYPES:
        x = _arr(a)
        expected = _numpy_dtype(lambda: getattr(np, op)(x, axis=0))  # noqa: B023
        _check(expected, lambda: getattr(fj, op)(fj.asarray(x), axis=0), f"{op}({a})")  # noqa: B023


def test_astype_all_pairs() -> None:
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            assert fj.asarray(_arr(a)).astype(b).dtype == b


def test_factory_default_dtypes() -> None:
    assert fj.zeros(3).dtype == np.zeros(3).dtype
    assert fj.full(3, 2).dtype == np.full(3, 2).dtype
    assert fj.full(3, 2.0).dtype == np.full(3, 2.0).dtype
    assert fj.full(3, True).dtype == np.full(3, True).dtype
    assert fj.arange(3).dtype == np.arange(3).dtype
    assert fj.arange(0.5, 3).dtype == np.arange(0.5, 3).dtype
    assert fj.asarray(3).dtype == np.asarray(3).dtype


def test_where_memoized_types_follow_numpy_for_each_operand_kind(numpy_backend):
    """``where`` memoizes its result dtype and shape by the operands' dtypes and shapes (a
    Python float by its type): each combination, recorded twice, as NumPy."""
    cond = np.array([[True], [False]])
    for x, y in ((np.arange(3, dtype=np.int32), 0.5), (np.ones(3, np.float16), 0.5),
                 (np.ones(3, np.float16), np.ones((2, 1), np.float32)),
                 (np.arange(3, dtype=np.int8), 2), (np.arange(3, dtype=np.uint8), True)):
        want = np.where(cond, x, y)
        for _ in range(2):
            got = fj.where(fj.asarray(cond), fj.asarray(x),
                           fj.asarray(y) if isinstance(y, np.ndarray) else y)
            assert got.dtype == want.dtype and got.shape == want.shape, (x.dtype, y)
            np.testing.assert_array_equal(got.numpy(), want)


def test_where_memoizes_a_python_scalar_x_as_it_does_y(numpy_backend, monkeypatch):
    """A Python scalar ``x`` with a tensor ``y`` takes the memoized path too (float results
    only; the second recording of such a combination never reaches the full path): the
    second recording of each combination is the first's structure (the same plan-cache key),
    and both are NumPy's dtype, shape and values."""
    from fusejit.frontend import tensor
    from fusejit.ir.graph import structural_key
    full_path = tensor._where
    calls: list[int] = []

    def counted(*args):
        calls.append(1)
        return full_path(*args)

    monkeypatch.setattr(tensor, "_where", counted)
    cond = np.array([[True], [False]])
    for x, y in ((0.5, np.arange(3, dtype=np.int32)), (0.5, np.ones(3, np.float16)),
                 (2, np.ones((2, 1), np.float32)), (-3, np.ones(3, np.float64)),
                 (2, np.arange(3, dtype=np.int8)), (70000, np.arange(3, dtype=np.int32))):
        want = np.where(cond, x, y)
        keys = []
        for i in range(2):
            calls.clear()
            got = fj.where(fj.asarray(cond), x, fj.asarray(y))
            if i == 1:  # memoized where the result is a float (its type alone decides)
                assert bool(calls) == (want.dtype.kind != "f"), (x, y.dtype)
            keys.append(structural_key([got._node])[0])
            assert got.dtype == want.dtype and got.shape == want.shape, (x, y.dtype)
            np.testing.assert_array_equal(got.numpy(), want)
        assert keys[0] == keys[1]
        # and the mirrored call, which the fast path already took
        np.testing.assert_array_equal(fj.where(fj.asarray(~cond), fj.asarray(y), x).numpy(),
                                      want)


def test_where_memoizes_a_python_int_only_where_its_type_decides(numpy_backend):
    """A Python int ``y`` of ``where`` is memoized by its type only for a float result (then
    NumPy 2's weak int never changes the dtype and needs no range check); on an integer
    result its value decides (in range, wrapped or refused): each recorded twice, as NumPy,
    after the same kinds with other values."""
    cond = np.array([[True], [False]])
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.uint8, np.int64):
        x = np.arange(3).astype(dtype)
        # (2**63 on an integer result: NumPy wraps it, fusejit refuses it, as before)
        extra = (2**63,) if x.dtype.kind == "f" else ()
        for y in (0, 2, -3, 70000, *extra, 2**64, 2**70, -2**70):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    want = np.where(cond, x, y)
                except OverflowError:
                    want = None
            for _ in range(2):
                if want is None:
                    with pytest.raises(fj.DTypeError):
                        fj.where(fj.asarray(cond), fj.asarray(x), y)
                    continue
                got = fj.where(fj.asarray(cond), fj.asarray(x), y)
                assert got.dtype == want.dtype and got.shape == want.shape, (dtype, y)
                np.testing.assert_array_equal(got.numpy(), want)


def test_narrow_float_scalars_keep_their_value_and_sign(numpy_backend, monkeypatch):
    """The fast path's conversions of Python scalars to float16/float32 (a lookup table,
    ``tensor._Rounded``) give ``dtype.type(value)``: -0.0 stays apart from 0.0, an int from
    an unequal float, whatever was converted before and when the table starts anew."""
    from fusejit.frontend import tensor
    monkeypatch.setattr(tensor, "MAX_ROUNDED", 4)
    values = [0.0, -0.0, 0, 3, 3.0, 1e-5, -1e-5, 2**24 + 1, 16777216.0, 65504.0, 65519.0, 1e38,
              0.1, 0.2, 0.30000000000000004, 7, -0.0, 0.0]
    for dtype in (np.float16, np.float32):
        x = np.array([1.0, -2.0, 0.5], dtype)
        xt = fj.asarray(x)
        for _ in range(2):
            for v in values:
                with np.errstate(all="ignore"):
                    pairs = ((xt * v, x * v), (v - xt, v - x))
                    for got, want in pairs:
                        assert got.dtype == want.dtype
                        out = got.numpy()
                        np.testing.assert_array_equal(out, want, err_msg=f"{dtype} {v!r}")
                        assert (np.signbit(out) == np.signbit(want)).all(), (dtype, v)
