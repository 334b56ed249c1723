"""Wrong answers found by users and by the fuzzer, each pinned on every backend.

Every test here failed on at least one backend before its fix. They run on
``numpy``, ``interpret`` and (on a GPU machine) ``cuda`` through the ``backend``
fixture, and compare with NumPy through ``fusejit.testing`` (floats within the
dtype's stated tolerance, ints and bools exactly).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusejit as fj
from fusejit.testing import assert_matches_numpy, numpy_reference

# -- reductions over an axis whose input stride is 0 -----------------------------------------
# The emitter loaded a stride-0 operand as a [rows, 1] tile and, when the tile had a row mask,
# reduced over a tile of width 1: sum(broadcast_to(v, (2, 3)), axis=0) gave v, not 2 * v.

REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any",
              "all", "logsumexp"]
ROW_OPS = ["softmax", "log_softmax", "layer_norm", "rms_norm"]

# (base shape, broadcast shape, axes reduced): the stride-0 axes alone, and mixed with real ones
BROADCAST_CASES = [
    ((3,), (2, 3), 0),
    ((1, 3), (5, 3), 0),
    ((4, 1), (4, 7), 1),
    ((4, 1), (4, 7), (0, 1)),
    ((1, 6), (3, 6), None),
    ((2, 1, 5), (2, 9, 5), 1),
    ((2, 1, 5), (2, 9, 5), (1, 2)),
    ((2, 1, 5), (2, 9, 5), (0, 1)),
    ((1, 1, 5), (3, 4, 5), (0, 1)),
    ((130, 1), (130, 3), 1),          # more rows than one block on interpret's small tables
    ((1, 257), (33, 257), 0),
]


def _input(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(0.5, 1.5, shape).astype(dtype)  # prod of ~300 terms stays finite


def _axis_for(op, axis):
    if op in ("argmax", "argmin") and isinstance(axis, tuple):
        return axis[0]
    return axis


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("base,shape,axis", BROADCAST_CASES)
def test_reduction_over_broadcast_axis(backend, op, base, shape, axis):
    dtype = np.bool_ if op in ("any", "all") else np.float32
    v = _input(base, dtype)
    axis = _axis_for(op, axis)
    ref = numpy_reference(op)
    with np.errstate(all="ignore"):
        expected = ref(np.broadcast_to(v, shape), axis=axis)
    got = getattr(fj, op)(fj.broadcast_to(fj.asarray(v), shape), axis=axis)
    # prod of up to 300 float32 factors: each rounding adds ~6e-8 relative, NumPy's order differs
    tol = {"rtol": 1e-4, "atol": 1e-5} if op == "prod" else {}
    assert_matches_numpy(got, expected, **tol)


@pytest.mark.parametrize("op", ["sum", "max", "argmax", "mean", "var", "any"])
@pytest.mark.parametrize("base,shape,axis", BROADCAST_CASES[:8])
def test_reduction_of_stride0_numpy_input(backend, op, base, shape, axis):
    """The same with the broadcast done by NumPy: the input buffer itself has stride 0."""
    dtype = np.bool_ if op == "any" else np.float32
    x = np.broadcast_to(_input(base, dtype, seed=1), shape)
    axis = _axis_for(op, axis)
    expected = getattr(np, op)(x, axis=axis)
    assert_matches_numpy(getattr(fj, op)(fj.asarray(x), axis=axis), expected)


@pytest.mark.parametrize("op", ROW_OPS)
@pytest.mark.parametrize("base,shape,axis", [((3,), (2, 3), 0), ((4, 1), (4, 7), 1),
                                              ((1, 257), (33, 257), 0), ((2, 1, 5), (2, 9, 5), 1)])
def test_row_op_over_broadcast_axis(backend, op, base, shape, axis):
    v = _input(base, np.float32, seed=2)
    expected = numpy_reference(op)(np.broadcast_to(v, shape), axis=axis)
    got = getattr(fj, op)(fj.broadcast_to(fj.asarray(v), shape), axis=axis)
    # layer_norm of constant rows centers to rounding noise (a few ulp of 1.0, ~1e-7) and then
    # divides by sqrt(var + eps) ~ sqrt(1e-5): the noise grows ~316x on either side, so 1e-3
    assert_matches_numpy(got, expected, atol=1e-3 if op == "layer_norm" else None)


def test_log_softmax_of_broadcast_rows_is_log_half(backend):
    v = fj.asarray(np.array([1.0, -2.0, 3.0], np.float32))
    got = fj.log_softmax(fj.broadcast_to(v, (2, 3)), axis=0).numpy()
    np.testing.assert_allclose(got, np.full((2, 3), np.log(0.5), np.float32), rtol=1e-6)


# -- a view that moves a reduced value, read inside another reduction ------------------------
# The second kernel reads the first's keepdims result as a parameter. The emitter treated any
# value of the kept/keepdims shape as one value per row, ignoring the coordinates a view (flip,
# slice) asked for, so flip(sum(v, 0, keepdims=True), 1) was read unflipped.

@pytest.mark.parametrize("shape", [(4, 5), (3, 130), (64, 9)])
@pytest.mark.parametrize("view", ["flip", "slice", "roll_by_slices"])
def test_moved_reduced_value_inside_reduction(backend, shape, view):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)

    def program(xp, v):
        s = xp.sum(v, axis=0, keepdims=True)
        if view == "flip":
            moved = xp.flip(s, axis=1)
        elif view == "slice":
            moved = s[:, ::-2][:, :1]
        else:
            moved = s[:, 1:][:, :1]
        return xp.sum(v + moved, axis=0)

    assert_matches_numpy(program(fj, fj.asarray(x)), program(np, x))


def test_flipped_input_of_kept_shape_inside_row_reduction(backend):
    """A free (non-reduced) value of the kept shape read through flip inside a reduction."""
    x = np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32)
    b = np.arange(6, dtype=np.float32).reshape(6, 1)
    got = fj.sum(fj.asarray(x) * fj.flip(fj.asarray(b), axis=0), axis=1)
    assert_matches_numpy(got, (x * np.flip(b, axis=0)).sum(axis=1), rtol=1e-5, atol=1e-5)


# -- found by `fusejit fuzz --backend cuda` on the H200 (12,991 programs, 9 failures) ----------

@pytest.mark.parametrize("index,shape", [((None, slice(None, 0), 1), (1, 2)),
                                         ((0, 1, slice(None, 0)), (1, 2, 1))])
def test_sum_of_an_empty_view_with_fixed_coordinates(backend, index, shape):
    """The view fixes every coordinate of its buffer, so the load is one element at a constant
    offset; the emitter gave that scalar load the tile's (block) mask, which Triton refuses."""
    v = np.zeros(shape, dtype=bool)
    assert_matches_numpy(fj.sum(fj.asarray(v)[index]), np.sum(v[index]))


def test_empty_view_with_fixed_coordinates_compiles_for_sm90():
    pytest.importorskip("triton")
    from fusejit.codegen import emit_kernel
    from fusejit.runtime.compile import compile_all
    y = fj.sum(fj.asarray(np.zeros((1, 2, 1), bool))[0, 1, :0])
    for k in fj.plan(y).program.kernels:
        assert compile_all(emit_kernel(k, None, "cuda"), 90, True)


@pytest.mark.parametrize("fn", [lambda xp, v: xp.rsqrt(v) if xp is fj else 1 / np.sqrt(v),
                                lambda xp, v: xp.divide(0.5, v),
                                lambda xp, v: xp.arctan2(v, v),
                                lambda xp, v: xp.arctan2(v, -1.5)])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_signed_zero_of_a_scalar_input(backend, fn, dtype, shape):
    """-0.0 in a 0-d float16 input lost its sign on cuda (rsqrt gave +inf, arctan2 +pi)."""
    v = np.full(shape, -0.0, dtype)
    with np.errstate(all="ignore"):
        expected = fn(np, v)
    got = fn(fj, fj.asarray(v)).numpy()
    assert_matches_numpy(got, expected)
    assert np.signbit(got).tolist() == np.signbit(expected).tolist()


@pytest.mark.parametrize("name,lo,hi", [("exp", -80, 80), ("exp2", -120, 120),
                                         ("log", 1e-3, 1e3), ("log2", 1e-3, 1e3)])
def test_float32_exp_and_log_within_four_ulp(backend, name, lo, hi):
    """float32 exp/log/exp2/log2 within 4 ulp of the float64 value (libdevice states 2; NumPy's
    own SIMD expf is 2.2 ulp off at -72.4). Triton's ex2/lg2.approx were 4 ulp off at exp(7)
    and about 60 at exp(80) on cuda (the fuzzer's sin(exp(7)) was 1e-3 off)."""
    x = np.concatenate([np.linspace(lo, hi, 4001), [7.0, 11.0, 0.999, 1.001]]).astype(np.float32)
    got = getattr(fj, name)(fj.asarray(x)).numpy()
    exact = getattr(np, name)(x.astype(np.float64))
    ulps = np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))
    assert ulps.max() <= 4, (name, float(ulps.max()), x[np.argmax(ulps)])


# -- found by `fusejit fuzz --backend interpret` (20,000 programs, seed 2026: 2 failures) --------

@pytest.mark.parametrize("base,view,axis", [
    (np.zeros((2, 2, 1, 1), bool), lambda b: np.broadcast_to(b, (2, 2, 1, 2)), -1),
    ((np.arange(66) % 3 == 0).reshape(33, 2), lambda b: np.broadcast_to(b[:, 0], (2, 33)), 0),
])
def test_softmax_over_a_stride0_axis_of_a_numpy_view(backend, base, view, axis):
    """A stride-0 NumPy input reduced along its broadcast axis inside softmax gave 1.0, not 0.5:
    the load's offset was emitted at the tile's level although it used no tile coordinate, so
    the value was not widened over the reduced axis (same root as the empty-view crash)."""
    x = view(base)
    from fusejit.testing import numpy_reference
    assert_matches_numpy(fj.softmax(fj.asarray(x), axis=axis), numpy_reference("softmax")(x, axis))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("op", ["maximum", "minimum", "clip"])
def test_maximum_minimum_signed_zeros_and_nan_as_numpy(backend, dtype, op):
    """maximum/minimum of equal operands pick the one NumPy's loop picks (float16: the first,
    float32/64: the second), so max(-0.0, 0) and clip(-0.0, 0, None) keep NumPy's sign."""
    vals = np.array([-0.0, 0.0, np.nan, 1.0, -1.0, np.inf, -np.inf], dtype)
    a, b = (np.array(v) for v in zip(*[(x, y) for x in vals for y in vals]))
    if op == "clip":
        got, want = fj.clip(fj.asarray(a), 0, None).numpy(), np.clip(a, 0, None)
    else:
        got, want = getattr(fj, op)(fj.asarray(a), fj.asarray(b)).numpy(), getattr(np, op)(a, b)
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()


@pytest.mark.parametrize("first", ["scalar", "zero_d", "array"])
def test_maximum_with_a_scalar_first_operand(backend, first):
    """maximum(0.5, x) put a scalar comparison beside a block one in `|`, which Triton's
    interpreter refuses (found by `fusejit fuzz --backend interpret --seed 4242`)."""
    x = np.array([[0.0, 1.0], [np.nan, -0.0]], np.float16)
    a = {"scalar": 0.5, "zero_d": np.array(0.5, np.float16), "array": x[::-1]}[first]
    fa = fj.asarray(a) if first != "scalar" else a
    assert_matches_numpy(fj.maximum(fa, fj.asarray(x)), np.maximum(a, x))
    assert_matches_numpy(fj.minimum(fa, fj.asarray(x)), np.minimum(a, x))


# -- realized outputs freed with their last tensor ------------------------------------------
# Leaf nodes stored their own leaves as (node,): a reference cycle, so a realized output's
# buffer lived until the garbage collector ran. On the H200 a loop of 256 MB layer norms held
# 27 GB and tripled each realize's host time (every output a fresh device allocation).

def _buffer_dies_with_its_tensors(make, forget=None) -> None:
    import gc
    import weakref
    gc.disable()  # only reference counts may free it
    try:
        refs = []
        for i in range(4):
            outs = make(i)
            for t in outs:
                assert t.is_realized
                refs.append(weakref.ref(t._node.buffer))
            del outs, t
            if forget is not None:
                forget()
        assert all(r() is None for r in refs), [r() is not None for r in refs]
    finally:
        gc.enable()


def test_realized_buffers_die_with_their_tensors(numpy_backend):
    """On ``numpy`` (``interpret``: Triton's interpreter keeps its own cycles over the last
    launch's arguments; the ``cuda`` backend's host code: tests/test_devices.py)."""
    check_buffers_die_with_their_tensors()


def check_buffers_die_with_their_tensors(forget=None) -> None:
    """Realize, realize several, and ``fj.jit``: no output buffer outlives its tensors
    (``forget``: called after each call, to drop what a test double keeps)."""
    x = fj.asarray(np.ones((64, 33), np.float32))
    _buffer_dies_with_its_tensors(lambda i: [(x * float(i) + 1).realize()], forget)
    _buffer_dies_with_its_tensors(lambda i: fj.realize(fj.exp(x).sum(axis=1) * float(i),
                                                       x.max(axis=0)), forget)
    f = fj.jit(lambda a, s: (a * s, fj.softmax(a, axis=-1)))
    xs = np.ones((64, 33), np.float32)
    _buffer_dies_with_its_tensors(lambda i: list(f(xs, float(i))), forget)


# -- clip keeps x where it equals a bound --------------------------------------------------------
# clip was maximum then minimum; for float32, maximum(-0.0, 0) is 0.0 (NumPy's loop picks the
# second of equal operands), but np.clip(-0.0, 0, 3) is -0.0: rsqrt(clip(x, 0, 3)) was +inf
# where NumPy gives -inf (interpret fuzz, seed 4001).

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_clip_keeps_a_signed_zero_equal_to_a_bound(backend, dtype):
    x = np.array([-0.0, 0.0, np.nan, -5, 5, 1.5, -0.0, 3.0], dtype)
    for lo, hi in ((0, 3), (-0.0, 3), (np.nan, 3), (0, np.nan), (None, 1), (-1, None)):
        got = fj.clip(fj.asarray(x), lo, hi).numpy()
        want = np.clip(x, lo, hi)
        assert_matches_numpy(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want)), (lo, hi, got, want)
    assert_matches_numpy(fj.rsqrt(fj.clip(fj.asarray(x), 0, 3)), 1 / np.sqrt(np.clip(x, 0, 3)))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_clip_of_integers(backend, dtype):
    x = np.array([0, 7, 100, 3], dtype)
    for lo, hi in ((0, 3), (2, 50), (None, 7), (5, None)):
        assert_matches_numpy(fj.clip(fj.asarray(x), lo, hi), np.clip(x, lo, hi))


# -- shifts keep their integer type ----------------------------------------------------------------
# right_shift's out-of-range branch was tl.where(x < 0, -1, 0): two int literals, so int32, and
# the shift's result became int32 for int8 input; a later square did not wrap at 8 bits:
# maximum(square(right_shift(12, 0)), 1) in int8 was -112 (144 stored), NumPy 1 (interpret fuzz,
# seed 9101, program 7263).

@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "int32", "int64"])
@pytest.mark.parametrize("shift", ["right_shift", "left_shift"])
def test_shifts_keep_the_integer_type(backend, dtype, shift):
    x = np.array([12, -3, 100, 0, 7, 250, 60000, 3_000_000_000], dtype=np.int64).astype(dtype)
    for amount in (0, 1, 3, 100):
        y = fj.maximum(fj.square(getattr(fj, shift)(fj.asarray(x), amount)), 1)
        with np.errstate(over="ignore"):
            want = np.maximum(np.square(getattr(np, shift)(x, amount)), 1)
        got = y.numpy()
        assert got.dtype == want.dtype
        assert_matches_numpy(got, want)


# -- a float axis is refused whatever ran before ------------------------------------------------
# mean memoized what it records by its raw axis argument, and 1.0 == 1 as a dict key: after
# fj.mean(x, axis=1), fj.mean(x, axis=1.0) returned a result where NumPy (and a cold fusejit)
# refuse the axis; a bare float axis also escaped as a raw TypeError

@pytest.mark.parametrize("axis", [1.0, (1.0,), (0, 1.0)])
def test_a_float_axis_is_an_axis_error_cold_and_warm(backend, axis):
    x = fj.asarray(np.ones((2, 3), np.float32))
    for warm in (None, 1, (1,), (0, 1)):
        if warm is not None:
            fj.mean(x, axis=warm)
        for reduce in (fj.mean, fj.sum, fj.var):
            with pytest.raises(fj.AxisError, match="axis must be an integer"):
                reduce(x, axis=axis)


# -- GEMMs the fuzzer's TF32 mode found (fourteenth session) -------------------------------------

@pytest.mark.parametrize("dtype", ["float64", "int8"])
@pytest.mark.parametrize("shape", [(129, 1), (129, 5)])
def test_a_product_of_a_value_and_its_transpose_from_one_kernel(backend, dtype, shape):
    """``softmax(x, axis=0) @ softmax(x, axis=0).T``: the normalize's kernel was asked to write
    both operands, of shapes [129, 5] and [5, 129], and a pointwise kernel writes one shape
    ("internal error in the fusion pass"); now it writes one and the GEMM reads the other
    as its transpose (seed 101 of ``fusejit fuzz --matmul-precision tf32``, program 856)."""
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)

    def fn(xp, x):
        s = xp.exp(x - xp.max(x, axis=0, keepdims=True))
        s = s / xp.sum(s, axis=0, keepdims=True)
        return -xp.matmul(s, xp.swapaxes(s, -1, -2)), xp.matmul(xp.swapaxes(s, -1, -2), s) * 2
    for got, want in zip(fn(fj, fj.asarray(a)), fn(np, a)):
        assert_matches_numpy(got, want)


@pytest.mark.parametrize("shapes", [((0, 1, 1023), (0, 1023, 1)), ((3, 241), (241, 0)),
                                    ((0, 241), (241, 5))])
def test_an_empty_product_with_a_long_k(backend, shapes):
    """A product with no output elements and K long enough to split divided by zero tiles in
    ``gemm_config`` (seed 14402, program 229; seed 102, program 193)."""
    a, b = (np.ones(s, np.float32) for s in shapes)
    assert_matches_numpy(fj.matmul(fj.asarray(a), fj.asarray(b)), np.matmul(a, b))


@pytest.mark.parametrize("dtype", ["bool", "int8", "float16"])
def test_a_tf32_product_of_a_narrow_operand(backend, dtype):
    """A TF32 product of float32 with a bool, int8 or float16 operand (converted while its tiles
    load; rows of 2 or 6 bytes) raised KeyError in the alignment rule's TF32 model (seed 101,
    programs 133, 238, 605). Values within the TF32 bound of the exact product."""
    from fusejit.testing import matmul_error_bound
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = (rng.standard_normal((3, 2)) > 0).astype(dtype)
    got = fj.matmul(fj.asarray(a), fj.asarray(b), precision="tf32").numpy()
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - exact) <= matmul_error_bound(a, b.astype(np.float32),
                                                            np.float32, "tf32"))


def test_a_gemm_of_single_rows_and_columns_with_computed_outputs(backend):
    """A batched product of M = N = K = 1 whose operands and outputs are computed in the GEMM
    kernel: the flat index of its [4, 1023, 1, 1] domain took the tile's level from the size-1
    M and N coordinates, so a load at it got the tile's mask with a scalar pointer (the
    interpreter refused it; ``fusejit fuzz --backend interpret --seed 5 --products``,
    program 213)."""
    a = np.random.default_rng(5).random((4, 1023, 1, 1)) > 0.5

    def fn(xp, x):
        v1 = xp.arccosh(x)
        v2 = xp.less_equal(x, v1)
        v3 = xp.less_equal(3, v1)
        return xp.matmul(v2, xp.swapaxes(v3, -1, -2)), v3, v2
    with np.errstate(invalid="ignore"):
        want = fn(np, a)
    got = fn(fj, fj.asarray(a))
    fj.realize(*got)  # (together: the GEMM kernel computes and writes all three)
    for value, expected in zip(got, want):
        assert_matches_numpy(value, expected)


@pytest.mark.parametrize("case", ["broadcast", "transposed"])
def test_a_product_over_an_empty_k_of_a_reshaped_operand(backend, case):
    """Products over K = 0 with a non-empty result (all zeros) whose operand is a reshape of an
    empty array: the load analysis divided by its zero strides (``fusejit fuzz --backend
    interpret --seed 14431 --products``, programs 79 and 122)."""
    if case == "broadcast":
        v0 = np.zeros((1, 1, 0, 1), bool)

        def fn(xp, x):
            return xp.matmul(xp.broadcast_to(x[0, :, :, 0], (2, 1, 0)), x)
        arrays = (v0,)
    else:
        arrays = (np.zeros((1, 1, 1, 1), bool), np.zeros((2, 1, 0), bool))

        def fn(xp, x, y):
            return xp.matmul(y, xp.swapaxes(xp.add(x, y), -1, -2))
    assert_matches_numpy(fn(fj, *[fj.asarray(a) for a in arrays]), fn(np, *arrays))


@pytest.mark.parametrize("case", ["bool_divided", "int8_softmax", "float16_operand", "int8_operand"])
def test_a_float64_product_of_narrow_operands(backend, case):
    """A float64 product whose operand is converted from 1- or 2-byte elements: Triton 3.6 (the
    GPU image's) failed to compile such a prologue into the float64 ``tl.dot`` ("fp64 don't
    support largeK MMA"; ``fusejit fuzz --backend cuda --products``, seeds 14901-14903), so the
    operand is written as float64 first (``rules.gemm_prologue_unsupported``)."""
    rng = np.random.default_rng(7)
    b = rng.random((1, 65)) > 0.5
    i8 = rng.integers(-3, 3, (1, 2, 3, 11)).astype(np.int8)
    cases = {
        "bool_divided": (lambda xp, x: xp.matmul(x / True, xp.swapaxes(x, -1, -2)), (b,)),
        "int8_softmax": (lambda xp, x: xp.matmul(
            xp.exp(x - xp.max(x, axis=0, keepdims=True))
            / xp.sum(xp.exp(x - xp.max(x, axis=0, keepdims=True)), axis=0, keepdims=True),
            xp.swapaxes(x, -1, -2)), (i8,)),
        "float16_operand": (lambda xp, x, y: xp.matmul(x, y),
                            (rng.standard_normal((40, 50)).astype(np.float16),
                             rng.standard_normal((50, 30)))),
        "int8_operand": (lambda xp, x, y: xp.matmul(x, y),
                         (rng.standard_normal((40, 11)), rng.integers(-3, 3, (11, 5), np.int8))),
    }
    fn, arrays = cases[case]
    got = fn(fj, *[fj.asarray(a) for a in arrays])
    if case in ("float16_operand", "int8_operand"):
        kernels = fj.plan(got).program.kernels
        assert [k.kind for k in kernels] == ["pointwise", "gemm"], [k.name for k in kernels]
        assert "Triton 3.6 cannot compile" in fj.plan(got).explain()
    assert_matches_numpy(got, fn(np, *arrays))


def test_a_float64_product_of_a_narrow_value_and_its_transpose(backend):
    """``v3 = v0 @ exp(b).T; v3 @ exp(b)`` in float64 from a bool ``b``: the kernel of
    ``exp(b)`` writes its transpose for the first product, cannot write the other shape too,
    and the second product may not recompute it (1-byte loads under a float64 dot, which
    Triton 3.6 cannot compile): a kernel of its own writes it (``fusejit fuzz --backend
    interpret --seed 14451 --products``, program 386: "internal error in the fusion pass")."""
    rng = np.random.default_rng(14451)
    v0 = rng.integers(-5, 5, (1, 65)).astype(np.int32)
    v1 = rng.random((2, 65)) > 0.5

    def fn(xp, x, y):
        e = xp.exp(y)
        return xp.matmul(xp.matmul(x, xp.swapaxes(e, -1, -2)), e)
    got = fn(fj, fj.asarray(v0), fj.asarray(v1))
    assert len(fj.plan(got).program.kernels) == 4
    assert_matches_numpy(got, fn(np, v0, v1))


@pytest.mark.parametrize("shapes", [((1, 1), (1, 1)), ((1, 2), (2, 1)), ((3, 3, 8), (1, 8, 1)),
                                    ((64, 1), (1, 64))])
def test_int8_products_over_a_short_k(backend, shapes):
    """int8 products of K = 1 to 8 took 16-deep K tiles, and Triton's int8 ``tl.dot`` needs 32
    ("Input shapes should have M >= 1, N >= 1 and K >= 32"; cuda fuzz seeds 14911-14913)."""
    rng = np.random.default_rng(11)
    a, b = (rng.integers(-4, 4, s).astype(np.int8) for s in shapes)
    assert_matches_numpy(fj.matmul(fj.asarray(a), fj.asarray(b)), np.matmul(a, b))


def test_a_float64_product_whose_narrow_operand_an_epilogue_also_reads(backend):
    """``v0 @ v1`` and ``v1 + v0`` of int32 and float16 inputs (float64 results): the sum's
    kernel and the product's merged, which put the float16 operand's conversion back into the
    float64 dot (cuda fuzz seed 14913); the domain analysis now refuses such a kernel
    (``domain._check_float64_operand_loads``) and the conversion stays a kernel of its own."""
    rng = np.random.default_rng(13)
    v0 = rng.integers(-3, 3, (65, 1, 1)).astype(np.int32)
    v1 = rng.standard_normal((65, 1, 2)).astype(np.float16)
    x, y = fj.asarray(v0), fj.asarray(v1)
    got = (fj.matmul(x, y), fj.add(y, x))
    kernels = fj.plan(*got).program.kernels
    assert [k.kind for k in kernels] == ["pointwise", "gemm"]
    fj.realize(*got)
    assert_matches_numpy(got[0], np.matmul(v0, v1))
    assert_matches_numpy(got[1], np.add(v1, v0))


def test_a_kernel_of_its_own_for_a_product_operand_is_a_dependency_of_the_product(backend):
    """A float64 product of a layer norm of a bool input gets its operand written by a kernel
    of its own (the 1-byte loads may not run under a float64 dot); the product's kernel did
    not record that it reads that kernel, so the cycle check let the pointwise kernel after
    the product (``v3 + v0``) merge with it, whose output the product reads: "kernels depend
    on each other in a cycle" (``fusejit fuzz --backend interpret --seed 27003 --products
    --large-plans``, program 741)."""
    from fusejit.testing import large_plans
    rng = np.random.default_rng(27003)
    v0 = np.broadcast_to(rng.random((1, 129)) > 0.5, (1, 129))

    def fn(xp, x):
        layer_norm = numpy_reference("layer_norm") if xp is np else xp.layer_norm
        normed = layer_norm(x, 2.0, 0.5, axis=1)
        return xp.reshape(xp.maximum(x, True), (-1,)), xp.matmul(normed, xp.swapaxes(x, -1, -2)) + x
    with large_plans():
        got = fn(fj, fj.asarray(v0))
        plan = fj.plan(*got)
        assert "no_cycle" in plan.explain()
        fj.realize(*got)
    for g, want in zip(got, fn(np, v0)):
        assert_matches_numpy(g, want)


def test_argmin_of_rows_of_infinities_is_the_first_index(backend):
    """argmin(rsqrt(var(zeros, axis=0)), axis=-1): every row is +inf, and rows of 5 float64s
    that start inside a 16-byte word were read through a window whose lanes before the row
    hold the identity (+inf) too; they tied with the row and won with their negative columns:
    -1 for rows 1, 3 and 5 (``fusejit fuzz --backend interpret --seed 29001 --products
    --large-plans``, program 1894; ``tests/test_row_window.py`` pins each dtype and op)."""
    v0 = np.broadcast_to(np.zeros(5, np.int8), (1, 1, 7, 5))

    def fn(xp, x):
        rsqrt = (lambda v: 1 / np.sqrt(v)) if xp is np else xp.rsqrt
        return xp.argmin(rsqrt(xp.var(x, axis=0)), axis=-1)
    with np.errstate(divide="ignore"):
        want = fn(np, v0)
    assert_matches_numpy(fn(fj, fj.asarray(v0)), want)


@pytest.mark.parametrize("m", [1, 5, 33])
def test_a_softmax_over_a_one_column_product_reshaped_to_its_rows(backend, m):
    """softmax(a @ b, axis=1) of one column, reshaped to ``(m,)``: the reduced extent is 1, so
    the value of the tile has the row's shape after the reshape and the GEMM's epilogue stored
    it as a row value, from a ``[rows, 1]`` pointer with the ``[rows, columns]`` tile
    (Triton's interpreter: "Expected pointer argument to have shape [16, 16] but got [16, 1]";
    ``fusejit fuzz --backend interpret --seed 29001 --products --large-plans``, program 9303:
    ``-argmax(softmax(v0 @ v0.T, axis=1))`` of a bool 1x65)."""
    rng = np.random.default_rng(9303)
    a = rng.standard_normal((m, 65)).astype(np.float32)
    b = rng.standard_normal((65, 1)).astype(np.float32)

    def fn(xp, x, y):
        softmax = numpy_reference("softmax") if xp is np else xp.softmax
        return xp.reshape(softmax(xp.matmul(x, y) * 2, axis=1), (-1,))
    assert_matches_numpy(fn(fj, fj.asarray(a), fj.asarray(b)), fn(np, a, b))


@pytest.mark.parametrize("reduction", ["sum", "prod", "any", "all", "max", "argmin"])
@pytest.mark.parametrize("mkn", [(1, 7, 0), (5, 0, 0), (2, 3, 0), (0, 4, 0)])
def test_a_row_reduction_of_a_product_of_no_columns(backend, reduction, mkn):
    """``exp(sum(a @ b, axis=2))`` where ``b`` has no columns: the GEMM kernel fused the row
    reduction, but its grid had no column tile, so the rows' identities were never written
    (uninitialized memory came back; ``fusejit fuzz --backend interpret --seed 30001
    --products --large-plans``, program 4997: ``exp(sum(v0 @ v0[:, :0, :].T, axis=2))`` of a
    bool 1x1x7). Such a reduction is now a kernel of its own. max and argmin of no columns
    are NumPy's ValueError, here fusejit's."""
    m, k, n = mkn
    rng = np.random.default_rng(4997)
    a = rng.standard_normal((2, m, k)).astype(np.float32)
    b = rng.standard_normal((2, k, n)).astype(np.float32)

    def fn(xp, x, y):
        return xp.exp(getattr(xp, reduction)(xp.matmul(x, y), axis=2))
    if reduction in ("max", "argmin"):
        with pytest.raises(ValueError):
            fn(np, a, b)
        with pytest.raises(fj.FusejitError):
            fn(fj, fj.asarray(a), fj.asarray(b)).numpy()
        return
    assert_matches_numpy(fn(fj, fj.asarray(a), fj.asarray(b)), fn(np, a, b))


def test_a_gemm_kernel_written_to_reduce_rows_of_no_columns_is_an_error_at_its_line():
    """The same region written in fused text (a user's edit) is refused where it stands,
    naming the reduction, rather than run with no tile to write the rows."""
    a = fj.asarray(np.ones((2, 3), np.float32))
    b = fj.asarray(np.ones((3, 4), np.float32))
    text = fj.dump(fj.sum(a @ b, axis=1), fused=True).replace(",4]", ",0]")
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "kernel @" in t)
    with pytest.raises(fj.FusejitError, match=r"%1 = sum reduces rows of no columns") as info:
        fj.parse(text)
    assert info.value.line == line


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_an_integer_to_an_array_of_negative_powers(backend, dtype):
    """``x ** y`` of integers where some exponents in an array are negative. NumPy raises for
    any negative one; a kernel cannot (the frontend raises only for a negative scalar), and
    the generated kernels computed x ** (y mod 2**bits): 3 ** -1 was -1431655765 in int32,
    while the ``numpy`` backend raised NumPy's own ValueError (found by random edits of IR
    text, thirty-first session). Now every backend gives 1 / x**|y| truncated: 1 for x = 1,
    +-1 for x = -1 by the exponent's parity, 0 otherwise; other exponents as NumPy."""
    x = np.array([3, 5, -3, 2, 1, -1, -1, 0, 7, 2, -2, 3], dtype)
    y = np.array([-1, -2, -1, -1, -5, -3, -4, -1, -7, 3, 5, 0], dtype)
    negative = y < 0
    want = np.where(negative, np.where(x == 1, 1, np.where(x == -1, (-1) ** (y % 2 != 0), 0)),
                    np.power(x, np.where(negative, 0, y))).astype(dtype)
    got = fj.power(fj.asarray(x), fj.asarray(y)).numpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    # (the exponents NumPy takes give NumPy's values, wrapping included)
    np.testing.assert_array_equal(got[~negative], np.power(x[~negative], y[~negative]))
