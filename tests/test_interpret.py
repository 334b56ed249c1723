"""Differential tests: the ``interpret`` backend (generated Triton run by Triton's interpreter) vs NumPy."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit.testing import assert_matches_numpy  # noqa: E402

from ._canonical import (  # noqa: E402
    CANONICAL,
    DTYPES,
    SPECIAL_UNARY,
    check_float_divmod_bit_for_bit,
    check_float_power_special_values,
    check_unary_special_values,
    dtype_inputs,
    dtype_program,
)


@pytest.fixture(autouse=True)
def _interpret(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    with fj.using_backend("interpret"):
        yield


def _check(fn, arrays):
    with np.errstate(all="ignore"):
        expected = fn(np, *arrays)
        got = fn(fj, *[fj.asarray(a) for a in arrays])
    if not isinstance(expected, tuple):
        expected, got = (expected,), (got,)
    fj.realize(*got)
    for g, e in zip(got, expected):
        assert_matches_numpy(g.numpy(), np.asarray(e))


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_canonical(name):
    fn, make = CANONICAL[name]
    _check(fn, make(6))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_add_cast(dtype):
    _check(dtype_program, dtype_inputs(dtype, 4))


def test_float_math_formulas():
    """The interpreter lowering of libdevice-only math (formulas) matches NumPy."""
    x = np.linspace(-3, 3, 97).astype(np.float32)

    def f(xp, a):
        return (xp.tanh(a), xp.expm1(a), xp.log1p(xp.abs(a)), xp.arctan2(a, a[::-1]),
                xp.arcsin(a / 4), xp.arccos(a / 4), xp.arctan(a), xp.sinh(a), xp.cosh(a),
                xp.arcsinh(a), xp.arccosh(xp.abs(a) + 1), xp.arctanh(a / 4), xp.tan(a / 2),
                xp.power(xp.abs(a), a), xp.power(a, np.float32(3)), xp.log10(xp.abs(a) + 1),
                xp.rint(a * 2), xp.sign(a), xp.floor_divide(a, np.float32(0.7)),
                xp.remainder(a, np.float32(-0.7)))
    _check(f, [x])
    _check(f, [x.astype(np.float64)])


def test_int_semantics():
    a = np.array([-7, -1, 0, 1, 7, 9, -9, 5], np.int64)
    b = np.array([2, -2, 0, 0, -3, 0, 4, 1], np.int64)
    _check(lambda xp, a, b: (a // b, a % b, xp.maximum(a, b), a << (b & 7), a >> (b & 7),
                             xp.power(a, xp.abs(b))), [a, b])
    u = np.array([7, 1, 0, 200], np.uint8)
    v = np.array([2, 0, 0, 3], np.uint8)
    _check(lambda xp, a, b: (a // b, a % b, a - b), [u, v])


def test_nan_propagation():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 1.0], [2.0, 5.0, -1.0]], np.float32)
    _check(lambda xp, a: (xp.maximum(a, a.T), xp.minimum(a, np.float32(0)), a.max(axis=1),
                          a.min(axis=0), xp.argmax(a, axis=1), xp.argmin(a, axis=0)), [x])


def test_noncontiguous_numpy_inputs():
    base = np.arange(3 * 40, dtype=np.float32).reshape(3, 40)
    view = base[:, ::-3]
    _check(lambda xp, a: (a * 2, a.sum(axis=1)), [view])


def test_looped_reduction_interpret(monkeypatch):
    """Rows longer than the persistent limit take the looped path (re-reading the row)."""
    from fusejit.codegen import triton_emitter
    monkeypatch.setitem(triton_emitter.PERSISTENT_LIMIT, "interpret", 16)
    fn, make = CANONICAL["softmax"]
    _check(fn, make(4))
    fn, make = CANONICAL["layernorm"]
    _check(fn, make(4))
    fn, make = CANONICAL["argmax_nan"]
    _check(fn, make(4))


def test_looped_passes_alternate_direction(monkeypatch):
    """A looped pass over a row that follows a forward one runs backwards (the tiles read
    last are the likeliest in L2), unless its reductions need the forward order: argmax
    keeps the first index of a tie, Welford's counts assume the ragged tile comes last.
    Rows of 37 in tiles of 16: the ragged tile is first on the way back."""
    from fusejit.codegen import heuristics, triton_emitter
    monkeypatch.setitem(triton_emitter.PERSISTENT_LIMIT, "interpret", 16)
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)  # (the looped kernel's test)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 37)).astype(np.float32)
    ties = np.clip(np.round(x), -1, 1)  # equal maxima in several tiles of each row
    ties[1, 5] = ties[1, 30] = np.nan  # and a NaN that wins twice

    def loops(out):
        (kernel,) = fj.plan(out).program.kernels
        src = triton_emitter.emit_kernel(kernel, None, "interpret").source
        return ["back" if "k_up" in line else "fwd" for line in src.splitlines()
                if line.strip().startswith("for k")]

    def above_mean(xp, a):  # the mean, then how many lie above it, then the scaled row
        return a * (a > a.mean(axis=1, keepdims=True)).sum(axis=1, keepdims=True)

    cases = {
        "softmax": (lambda xp, a: CANONICAL["softmax"][0](xp, a), x, ["fwd", "back"]),
        "above mean": (above_mean, x, ["fwd", "back", "fwd"]),
        "var then scale": (lambda xp, a: a / a.var(axis=1, keepdims=True), x, ["fwd", "back"]),
        "argmax of centered": (lambda xp, a: xp.argmax(a - a.max(axis=1, keepdims=True), axis=1),
                               ties, ["fwd", "fwd"]),
        "var of centered": (lambda xp, a: xp.var(a - a.max(axis=1, keepdims=True), axis=1), x,
                            ["fwd", "fwd"]),
    }
    for name, (fn, data, want) in cases.items():
        assert loops(fn(fj, fj.asarray(data))) == want, name
        _check(fn, [data])
    # (the data exercise both rules: maxima tied across tiles, a NaN that is first at 5)
    assert all(len(set(np.flatnonzero(row == 1) // 16)) > 1 for row in ties[[0, 2]])
    assert np.argmax(ties[1]) == 5


def test_interpreter_arctanh_near_minus_one():
    """float64 ``arctanh`` near -1 (interpret fuzz, seed 9615: 1.2e-12 off at -0.999995, past
    float64's 1e-12 tolerance): the formula ``0.5 * log1p(2x / (1 - x))`` lost the residue
    of ``2x / (1 - x) + 1``; it now runs on ``|x|`` and restores the sign. Within 1e-15 of
    NumPy from 1 - 2**-1 to 1 - 2**-52 on both sides; -0.0, +-1, +-2 and NaN as NumPy."""
    k = np.arange(1, 53)
    x = np.concatenate([1 - 2.0 ** -k, -(1 - 2.0 ** -k), [-0.999995, 0.999995]])
    np.testing.assert_allclose(fj.arctanh(fj.asarray(x)).numpy(), np.arctanh(x), rtol=1e-15)
    special = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, np.nan])
    with np.errstate(all="ignore"):
        expected = np.arctanh(special)
    got = fj.arctanh(fj.asarray(special)).numpy()
    np.testing.assert_array_equal(got, expected)
    assert np.signbit(got[1]) and not np.signbit(got[0])


@pytest.mark.parametrize("name", ["sinh", "cosh"])
def test_interpreter_sinh_cosh_near_overflow(name):
    """float64 ``sinh`` and ``cosh`` past e^x's overflow (interpret fuzz, seed 9731:
    ``sinh(-710)`` was -inf, NumPy's -1.117e308): the formula halved ``exp(|x|)`` after it
    had overflowed, from |x| = 709.78 where the result overflows only from 710.48. Now
    ``(0.5 * exp(|x| / 2)) * exp(|x| / 2)`` past 20: within 1e-14 of NumPy from 20 to the
    overflow, inf past it, on both sides."""
    x = np.concatenate([np.linspace(20.0, 710.47, 301), [709.78, 709.9, 710.0, 710.4,
                                                         710.475, 710.476, 711.0, 1e4]])
    x = np.concatenate([x, -x])
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(x)
    got = getattr(fj, name)(fj.asarray(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_per_program_scalar_bools_of_a_tiled_kernel(op):
    """``logical_and(exp(v1), v0)``, v1 a (1, 2, 1) bool, v0 a transposed (8, 1, 64) bool
    (interpret fuzz, seed 9620): the output runs as a tiled (transposing) kernel whose other
    axis is one index per program, so ``exp(v1) != 0`` was a scalar comparison, and Triton's
    interpreter refused ``&`` of it with a block (a crash; the GPU compiles it)."""
    rng = np.random.default_rng(0)
    v0 = (rng.random((64, 8, 1)) > 0.5).transpose(1, 2, 0)
    for v1 in (np.array([False, True]).reshape(1, 2, 1), np.zeros((1, 2, 1), bool)):
        fn = getattr(fj, op)
        got = fn(fj.exp(fj.asarray(v1)), fj.asarray(v0)).numpy()
        np.testing.assert_array_equal(got, getattr(np, op)(np.exp(v1), v0))


def test_hypothesis_random_programs():
    """Random programs on the interpret backend against NumPy itself (values, dtypes, shapes)."""
    hypothesis = pytest.importorskip("hypothesis")
    from fusejit.testing import check_program, programs

    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(programs())
    def run(recipe):
        check_program(recipe, backend="interpret")

    run()


_SPECIAL = np.array([np.inf, -np.inf, 1e200, -1e300, -0.0, 0.0, 1e-300, 3.0, np.nan, 1.0, 0.999,
                     -2.5, 0.3, -0.7, 30.0, -30.0, 1e-8, -1e-8, 700.0, -700.0, 0.5, -0.5])


@pytest.mark.parametrize("name", ["negative", "arcsinh", "sinh", "cosh", "tanh", "expm1", "log1p", "arctanh",
                                  "arccosh", "arctan", "arcsin", "arccos", "exp2", "log10", "tan"])
def test_interpreter_math_formulas_at_special_values(name):
    # the interpreter has no libdevice: these run as formulas in float64, which must keep
    # NumPy's infinities, NaNs and signed zeros and stay within a few ulps elsewhere
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(_SPECIAL)
    got = getattr(fj, name)(fj.asarray(_SPECIAL)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=0)
    finite = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(expected[finite]))


def test_interpreter_atan2_quadrants_signed_zeros_and_constants():
    import itertools
    values = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5, -3e-5])
    ys, xs = (np.array(v) for v in zip(*itertools.product(values, values)))
    for dtype in (np.float64, np.float32, np.float16):
        y, x = ys.astype(dtype), xs.astype(dtype)
        expected = np.arctan2(y, x)
        got = fj.arctan2(fj.asarray(y), fj.asarray(x)).numpy()
        rtol = 2e-3 if dtype == np.float16 else 1e-6   # one ulp of the result dtype, about
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=0)
        finite = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(expected[finite]))
    # a constant operand (a 0-d constant in the kernel)
    f = np.array([1.0, np.inf, -np.inf, np.nan], np.float16)
    np.testing.assert_array_equal(fj.arctan2(f, True).numpy(), np.arctan2(f, True))


@pytest.mark.parametrize("scalar", [np.array(0.5, np.float16), np.array(0.0, np.float32),
                                    np.array(2, np.int8), np.array(True)])
def test_scalar_truth_values_combine_with_blocks(scalar):
    # a 0-d input's comparison is a scalar in the kernel; the interpreter needs it typed as
    # a proper bool before `&` / `|` with a block
    a = np.array([[0], [1], [3]], np.int8)
    np.testing.assert_array_equal(fj.logical_and(a, scalar).numpy(), np.logical_and(a, scalar))
    np.testing.assert_array_equal(fj.logical_or(a < scalar, a > 2).numpy(),
                                  np.logical_or(a < scalar, a > 2))


def test_float_floor_divide_and_remainder_match_numpy_exactly():
    check_float_divmod_bit_for_bit(lambda a: a)



def test_iota_at_a_coordinate_fixed_by_a_view():
    # a length-1 slice fixes the iota's coordinate to a literal in the kernel
    np.testing.assert_array_equal(fj.arange(3)[2:].numpy(), np.arange(3)[2:])
    np.testing.assert_array_equal((-fj.arange(5).reshape(5, 1)[3:4]).numpy(),
                                  -np.arange(5).reshape(5, 1)[3:4])
    np.testing.assert_array_equal(fj.arange(6.0)[::-2][1:2].numpy(), np.arange(6.0)[::-2][1:2])


def test_float_power_special_values():
    check_float_power_special_values(lambda a: a)


def test_sigmoid_of_very_negative_inputs_does_not_underflow_early():
    # 1 / (1 + exp(-x)) overflows exp and gives 0; the true value is still representable
    x = np.array([-89, -30, 0, 30, 89, -200, -745], np.float64)
    expected = np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x)))
    expected = np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), expected)
    for dtype in (np.float64, np.float32):
        got = fj.sigmoid(x.astype(dtype)).numpy()
        np.testing.assert_allclose(got, expected.astype(dtype), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", SPECIAL_UNARY)
def test_unary_special_values(name, dtype):
    # every float function: NumPy's infinities, NaNs and signed zeros, in every float dtype
    check_unary_special_values(np.asarray, name, dtype)
