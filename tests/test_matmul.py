"""Matrix products (issue 11): NumPy's rules, fusion into GEMM kernels, the gemm IR, values.

Float products are compared with the exact product (float64 inputs and sums) within
``fusejit.testing.matmul_error_bound``: ``K * u * (|a| @ |b|)`` plus the rounding of the
result, where ``u`` is the accumulation's unit roundoff (float32 for float16 and float32
inputs). NumPy's own float16 ``matmul`` adds in float32 too and rounds once, so fusejit and
NumPy differ by at most one float16 rounding of the result; the bound covers both. Integer
products are exact (wrapping as NumPy's do).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import heuristics
from fusejit.codegen.triton_emitter import kernel_sources
from fusejit.testing import assert_matches_numpy, matmul_error_bound, recorded_inputs

rng = np.random.default_rng(11)
F16, F32, F64 = np.float16, np.float32, np.float64


def _array(shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    low = -100 if dt.kind == "i" else 0
    return rng.integers(low, 100, shape).astype(dt)


def _gelu(xp, y):
    return 0.5 * y * (1 + xp.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def _close_to_product(got, a, b, dtype, precision="ieee"):
    """``got`` is ``a @ b`` within the documented error bound (ints: exactly NumPy's)."""
    got = np.asarray(got)
    expected = np.matmul(a, b)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if np.dtype(dtype).kind != "f":
        np.testing.assert_array_equal(got, expected)
        return
    exact = np.asarray(a, F64) @ np.asarray(b, F64)
    bound = matmul_error_bound(a, b, dtype, precision)
    err = np.abs(got.astype(F64) - exact)
    assert np.all(err <= bound), f"max error {err.max()} over bound at {np.argmax(err - bound)}"


# -- NumPy's rules (recorded, run by the reference backend) ---------------------------------

SHAPES = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
          ((4,), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 2)),
          ((1, 4), (4, 1))]
DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint64", "float16", "float32",
          "float64"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", SHAPES, ids=[f"{a}@{b}" for a, b in SHAPES])
def test_matmul_shapes_and_dtypes_as_numpy(numpy_backend, shapes, dtype):
    a, b = _array(shapes[0], dtype), _array(shapes[1], dtype)
    got = fj.asarray(a) @ fj.asarray(b)
    expected = a @ b
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert_matches_numpy(got, expected, rtol=1e-2 if dtype == "float16" else None)


@pytest.mark.parametrize("pair", [("float16", "float32"), ("int8", "uint8"), ("int32", "float32"),
                                  ("bool", "int16"), ("uint64", "int64")])
def test_mixed_dtypes_promote_as_numpy(numpy_backend, pair):
    a, b = _array((3, 4), pair[0]), _array((4, 2), pair[1])
    got = fj.matmul(fj.asarray(a), fj.asarray(b))
    assert_matches_numpy(got, np.matmul(a, b))


def test_integer_products_wrap_exactly_as_numpy(numpy_backend):
    a = np.full((2, 300), 100, np.int8)
    b = np.full((300, 3), 7, np.int8)
    assert_matches_numpy(fj.asarray(a) @ fj.asarray(b), a @ b)  # 210000 wraps in int8


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((4,), (4,)), ((2, 3, 4), (5, 4, 2)),
                                    ((2, 3, 4), (4,)), ((4,), (2, 4, 3)), ((), (3,)), ((2, 3), ())])
def test_dot_as_numpy(numpy_backend, shapes):
    a, b = _array(shapes[0], F32), _array(shapes[1], F32)
    assert_matches_numpy(fj.dot(fj.asarray(a), fj.asarray(b)), np.dot(a, b), rtol=1e-5)
    assert_matches_numpy(fj.asarray(a).dot(fj.asarray(b)) if a.ndim else fj.dot(a, b),
                         np.dot(a, b), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float16", "int8", "float64", "bool"])
def test_vecdot_as_numpy(numpy_backend, dtype):
    a, b = _array((2, 1, 5), dtype), _array((3, 5), dtype)
    assert_matches_numpy(fj.vecdot(fj.asarray(a), fj.asarray(b)), np.vecdot(a, b))
    c = _array((5, 3), dtype)
    assert_matches_numpy(fj.vecdot(fj.asarray(c), fj.asarray(c), axis=0),
                         np.vecdot(c, c, axis=0))


def test_rmatmul_with_numpy_operand(numpy_backend):
    a, b = _array((3, 4), F32), _array((4, 2), F32)
    assert_matches_numpy(a @ fj.asarray(b), a @ b, rtol=1e-5)


@pytest.mark.parametrize("make, words", [
    (lambda a, b: a @ b, ["(3, 4)", "(5, 6)", "4", "5"]),
    (lambda a, b: a @ fj.asarray(np.ones(5, F32)), ["(3, 4)", "(5,)"]),
    (lambda a, b: fj.matmul(a, 2.0), ["(3, 4)", "()"]),
    (lambda a, b: fj.asarray(np.ones((2, 3, 4))) @ fj.asarray(np.ones((3, 4, 5))),
     ["(2, 3, 4)", "(3, 4, 5)", "batch"]),
    (lambda a, b: fj.dot(a, b), ["(3, 4)", "(5, 6)"]),
    (lambda a, b: fj.vecdot(a, b), ["(3, 4)", "(5, 6)"]),
])
def test_shape_errors_name_both_shapes(make, words):
    a, b = fj.asarray(np.ones((3, 4), F32)), fj.asarray(np.ones((5, 6), F32))
    with pytest.raises(fj.ShapeError) as info:
        make(a, b)
    assert isinstance(info.value, fj.FusejitError)
    for w in words:
        assert w in str(info.value)


def test_precision_is_recorded_for_float32_only(monkeypatch):
    a = fj.asarray(np.ones((4, 3), F32), name="a")
    assert "precision=tf32 " in fj.dump(fj.matmul(a, a.T, precision="tf32"))
    assert "precision" not in fj.dump(a @ a.T)  # ieee is the default: not written
    h = fj.asarray(np.ones((4, 3), F16))
    assert "precision" not in fj.dump(fj.matmul(h, h.T, precision="tf32"))
    monkeypatch.setenv("FUSEJIT_MATMUL_PRECISION", "tf32x3")
    assert "precision=tf32x3" in fj.dump(a @ a.T)
    monkeypatch.setenv("FUSEJIT_MATMUL_PRECISION", "fast")
    with pytest.raises(fj.FusejitError, match="FUSEJIT_MATMUL_PRECISION='fast'"):
        a @ a.T
    with pytest.raises(fj.FusejitError, match="precision='fp8'"):
        fj.matmul(a, a.T, precision="fp8")


def test_float32_products_of_few_outputs_and_a_long_k_are_sums(interpret_backend, monkeypatch):
    """A full-precision float32 product of at most 128 outputs (batch included) and a K of
    at least ``SUM_OF_PRODUCTS_MIN_K`` (65,536; lowered to 4096 here, to keep the interpreter
    fast) is a sum of broadcast products, a reduction with no GEMM (whose FMA tiles ran 2-7x
    slower on an H100), within the GEMM's error bound; more outputs, a shorter K, TF32,
    float16 and float64 stay GEMMs; batch dimensions broadcast as matmul's do."""
    from fusejit.frontend import linalg
    assert (linalg.SUM_OF_PRODUCTS_MAX_OUTPUTS, linalg.SUM_OF_PRODUCTS_MIN_K) == (128, 1 << 16)
    monkeypatch.setattr(linalg, "SUM_OF_PRODUCTS_MIN_K", 4096)
    for sa, sb in [((1, 4100), (4100, 16)), ((2, 4096), (4096, 64)), ((3, 1, 1, 4100), (2, 4100, 5)),
                   ((2, 5000), (3, 5000, 7))]:
        a, b = _array(sa, F32), _array(sb, F32)
        y = fj.asarray(a) @ fj.asarray(b)
        plan = fj.plan(y)
        assert [k.kind for k in plan.kernels] != ["gemm"] and "matmul" not in fj.dump(y), sa
        _close_to_product(y.numpy(), a, b, F32)
    bt = _array((16, 4100), F32)  # a transposed view as B
    a = _array((1, 4100), F32)
    y = fj.asarray(a) @ fj.asarray(bt).T
    assert "matmul" not in fj.dump(y)
    _close_to_product(y.numpy(), a, bt.T, F32)
    for sa, sb, dtype, precision in [((1, 4096), (4096, 129), F32, "ieee"),
                                     ((1, 4095), (4095, 16), F32, "ieee"),
                                     ((1, 4096), (4096, 16), F32, "tf32"),
                                     ((1, 4096), (4096, 16), F16, "ieee"),
                                     ((1, 4096), (4096, 16), F64, "ieee"),
                                     ((5, 1, 4096), (4096, 30), F32, "ieee")]:
        x, w = fj.asarray(_array(sa, dtype)), fj.asarray(_array(sb, dtype))
        assert "matmul" in fj.dump(fj.matmul(x, w, precision=precision)), (sa, sb, dtype)
    with pytest.raises(fj.ShapeError, match="batch dimensions"):
        fj.asarray(_array((3, 1, 4100), F32)) @ fj.asarray(_array((2, 4100, 5), F32))


# -- fusion: kernel counts and reasons --------------------------------------------------

def _inputs(*shapes, dtype=F32):
    return [fj.asarray(_array(s, dtype), name=f"x{i}") for i, s in enumerate(shapes)]


def test_relu_of_matmul_plus_bias_is_one_kernel():
    a, b, bias = _inputs((64, 40), (40, 48), (48,), dtype=F16)
    plan = fj.plan(fj.maximum(a @ b + bias, 0))
    assert plan.num_launches == 1, plan.explain()
    assert plan.kernels[0].kind == "gemm"


def test_two_layer_mlp_is_two_kernels():
    x, w1, b1, w2, b2 = _inputs((64, 40), (40, 48), (48,), (48, 32), (32,))
    plan = fj.plan(_gelu(fj, x @ w1 + b1) @ w2 + b2)
    assert plan.num_launches == 2, plan.explain()
    assert [k.kind for k in plan.kernels] == ["gemm", "gemm"]
    assert "one_matmul" in plan.explain()


def test_scaled_cast_prologue_is_one_kernel():
    x, s = _inputs((64, 40), (40,))
    (w,) = _inputs((40, 48), dtype=F16)
    plan = fj.plan((x * s).astype(F16) @ w)
    assert plan.num_launches == 1, plan.explain()
    ops = [i.op for i in plan.regions[0].body]
    assert ops.index("cast") < ops.index("matmul")


def test_views_of_operands_are_loads_not_copies():
    a, b = _inputs((40, 64), (80, 48))
    plan = fj.plan(a.T @ b[::2] + 1)
    assert plan.num_launches == 1, plan.explain()
    c, d = _inputs((3, 1, 16, 8), (2, 8, 5))
    assert fj.plan(c @ d).num_launches == 1  # broadcast batch dimensions: stride-0 views


def test_row_reductions_of_the_product_fuse_when_a_tile_spans_the_row():
    x, w = _inputs((64, 40), (40, 48))
    assert fj.plan((x @ w).sum(-1)).num_launches == 1
    assert fj.plan(fj.softmax(x @ w, -1)).num_launches == 1
    assert fj.plan(fj.layer_norm(x @ w)).num_launches == 1
    x, w = _inputs((64, 40), (40, 1000))
    plan = fj.plan((x @ w).max(-1))
    assert plan.num_launches == 2
    assert re.search(r"gemm_row_reduction.*1000 columns.*at most 256", plan.explain())
    plan = fj.plan((x @ w).sum(0))
    assert "gemm_row_reduction" in plan.explain() and "axes [0]" in plan.explain()


def test_prologue_boundaries_state_their_reason():
    x, y, w = _inputs((128, 128), (128, 128), (128, 512))
    plan = fj.plan((x + y) @ w)  # two full-size buffers per element of the operand
    assert plan.num_launches == 2
    assert re.search(r"gemm_prologue.*2 buffers of its size", plan.explain())
    plan = fj.plan(fj.exp(fj.tanh(x)) @ w)  # 8 per element, recomputed for 4 column tiles
    assert plan.num_launches == 2
    assert re.search(r"gemm_prologue.*cost 8 per element.*4 tiles along N=512", plan.explain())
    x, w = _inputs((64, 40), (40, 48))
    assert fj.plan(fj.exp(fj.tanh(x)) @ w).num_launches == 1  # N fits one tile: computed once
    plan = fj.plan(fj.softmax(x, -1) @ w)
    assert plan.num_launches == 2 and "gemm_prologue" in plan.explain()


def test_moved_products_are_boundaries():
    x, w = _inputs((64, 40), (40, 48))
    plan = fj.plan((x @ w).T + 1)
    assert plan.num_launches == 2
    assert re.search(r"gemm_epilogue.*permute moves the product", plan.explain())


def test_split_k_is_two_launches():
    a, b = _inputs((32, 8192), (8192, 64))
    plan = fj.plan(a @ b + 1)
    (kernel,) = plan.regions
    assert kernel.attrs["split_k"] > 1
    assert [x.stage for x in plan.kernels] == ["partial", "final"]
    assert "partials + combine launch" in plan.explain()


# -- the gemm kernel in the text IR -----------------------------------------------------

def _fused_text(fn, arrays):
    return fj.dump(fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)]),
                   fused=True)


def _retile(text, **attrs):
    for key, value in attrs.items():
        text = re.sub(rf"\b{key}=\d+", f"{key}={value}", text)
    return text


def test_gemm_kernel_text_round_trips_with_its_tiles():
    text = _fused_text(lambda xp, a, b: xp.maximum(a @ b, 0), [_array((64, 40), F16),
                                                              _array((40, 48), F16)])
    assert re.search(r"kind=gemm block_k=\d+ block_m=\d+ block_n=\d+ group_m=\d+ num_stages=\d+ "
                     r"num_warps=\d+ split_k=1 ", text)
    assert str(fj.parse(text)) == text


def test_edited_tiles_are_used(interpret_backend):
    a, b = _array((64, 40), F32), _array((40, 48), F32)
    text = _retile(_fused_text(lambda xp, a, b: a @ b, [a, b]), block_m=16, block_n=32, block_k=16)
    prog = fj.parse(text)
    (kernel,) = prog.kernels
    assert (kernel.attrs["block_m"], kernel.attrs["block_n"]) == (16, 32)
    from fusejit.codegen import emit_kernel
    source = emit_kernel(kernel, None, "interpret").source
    assert "in 16 x 32 tiles, K by 16" in source
    (out,) = prog.run(a, b)
    _close_to_product(out, a, b, F32)


@pytest.mark.parametrize("edit, message", [
    ({"block_m": 100}, "block_m=100 is not a power of two"),
    ({"block_k": 8}, "block_k=8 is not a power of two from 16"),
    ({"num_warps": 3}, "num_warps=3"),
    ({"split_k": 9}, "split_k=9 is more chunks than the 3 steps"),
    ({"num_stages": 0}, "num_stages=0"),
    ({"block_m": 256, "block_n": 256, "num_warps": 4}, "registers per thread"),
    ({"block_m": 256, "block_n": 256, "block_k": 256, "num_warps": 16}, "bytes of shared memory"),
])
def test_invalid_tiles_are_errors_at_the_kernel_line(edit, message):
    text = _retile(_fused_text(lambda xp, a, b: a @ b, [_array((64, 40), F32),
                                                      _array((40, 48), F32)]),
                   **{"block_k": 16, **edit})
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "kernel @" in t)
    with pytest.raises(fj.IRVerifyError) as info:
        fj.parse(text, "mm.fir")
    assert info.value.line == line
    assert message in str(info.value) and "mm.fir" in str(info.value)


def test_row_reduction_needs_block_n_spanning_the_row():
    text = _fused_text(lambda xp, a, b: (a @ b).sum(-1), [_array((64, 40), F32),
                                                         _array((40, 48), F32)])
    with pytest.raises(fj.IRVerifyError, match="block_n=32 does not span the rows of 48"):
        fj.parse(_retile(text, block_n=32))


def test_user_gemm_block_without_tiles_gets_the_defaults():
    text = _fused_text(lambda xp, a, b: a @ b, [_array((64, 40), F32), _array((40, 48), F32)])
    text = re.sub(r" block_k=.*split_k=1", "", text)
    prog = fj.parse(text)
    from fusejit.fuse import plan_for
    (kernel,) = plan_for(prog).program.kernels
    assert kernel.attrs["block_m"] >= 16 and kernel.attrs["split_k"] == 1


def test_generated_gemm_source_reads_like_the_ir():
    from fusejit.codegen import emit_kernel
    a, b, bias = _inputs((64, 40), (40, 48), (48,), dtype=F16)
    (kernel,) = fj.plan(fj.maximum(a @ b + bias, 0)).regions
    source = emit_kernel(kernel, None, "cuda").source
    assert "def matmul_add_maximum_f16_64x48(" in source
    assert "# gemm: C[64, 48] = A[64, 40] @ B[40, 48]" in source
    assert "#     %0 = matmul %x0, %x1 : f16[64,48]" in source  # the region's IR on top
    assert "acc = tl.dot(" in source and "# %0 = matmul: one block_k step" in source
    assert "v0 = acc.to(tl.float16)  # %0 = matmul %x0, %x1 : f16[64,48]" in source
    assert re.search(r"# %4 = maximum %3, %s0", source)  # the 0 of maximum(., 0): a scalar param
    assert source.count("tl.store(") == 1


# -- values on the interpret backend (the generated Triton, run on the CPU) -------------------

TILES = {"block_m": 16, "block_n": 32, "block_k": 16}


def _run(fn, arrays, backend, **tiles):
    out = fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)])
    out = out if isinstance(out, tuple) else (out,)
    text = fj.dump(*out, fused=True)
    inputs = recorded_inputs(*out)  # the arrays and the values of its scalar params
    if tiles:
        text = _retile(text, **tiles)
    with fj.using_backend(backend):
        return fj.parse(text).run(*inputs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_every_dtype(interpret_backend, dtype):
    a, b = _array((64, 40), dtype), _array((40, 48), dtype)
    (out,) = _run(lambda xp, a, b: a @ b, [a, b], interpret_backend,
                  **{**TILES, "block_k": 32 if dtype == "int8" else 16
                     if dtype in ("float16", "float32", "float64", "bool") else 8})
    _close_to_product(out, a, b, dtype)


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_reduced_precision_float32(interpret_backend, precision):
    a, b = _array((64, 40), F32), _array((40, 48), F32)
    (out,) = _run(lambda xp, a, b: xp.matmul(a, b, precision=precision) if xp is fj else a @ b,
                  [a, b], interpret_backend, **TILES)
    _close_to_product(out, a, b, F32, precision)


@pytest.mark.parametrize("case", ["row_major", "batched", "row_scaled_a", "split_k", "k_major"])
def test_tf32_with_b_transposed_through_registers(interpret_backend, case):
    """A TF32 product of a row-major B is computed as (B^T A^T)^T (Hopper's TF32 MMA reads B
    K-major); the same values in a batch, with a prologue on A and split over K. A K-major B
    (``bt.T``) is multiplied as it is."""
    a, b, s = _array((2, 64, 40), F32), _array((40, 48), F32), _array((64, 1), F32)
    lhs = {"batched": a, "row_scaled_a": a[1] * s}.get(case, a[0])
    if case == "k_major":  # B given as its transpose, [N, K] contiguous
        fn, arrays = (lambda xp, a, bt: _tf32(xp, a, bt.T)), [lhs, np.ascontiguousarray(b.T)]
    elif case == "row_scaled_a":
        fn, arrays = (lambda xp, a, b, s: _tf32(xp, a * s, b)), [a[1], b, s]
    else:
        fn, arrays = (lambda xp, a, b: _tf32(xp, a, b)), [lhs, b]
    source = kernel_sources(fj.plan(fn(fj, *[fj.asarray(x) for x in arrays])).program)[0].source
    assert ("B^T A^T" in source) == (case != "k_major")
    tiles = {**TILES, "split_k": 2} if case == "split_k" else TILES
    (out,) = _run(fn, arrays, interpret_backend, **tiles)
    _close_to_product(out, lhs, b, F32, "tf32")


def _tf32(xp, a, b):
    return xp.matmul(a, b, precision="tf32") if xp is fj else a @ b


@pytest.mark.parametrize("case", ["transposed", "sliced", "negative_steps", "batched_broadcast",
                                  "vector_left", "row_times_matrix"])
def test_gemm_views_and_shapes(interpret_backend, case):
    fns = {
        "transposed": (lambda xp, a, b: a.T @ b.T, [(40, 64), (48, 40)]),
        "sliced": (lambda xp, a, b: a[1::2, :40] @ b[:, 3:51], [(129, 45), (40, 60)]),
        "negative_steps": (lambda xp, a, b: a[::-1] @ b[:, ::-2], [(64, 40), (40, 96)]),
        "batched_broadcast": (lambda xp, a, b: a @ b, [(3, 1, 33, 40), (2, 40, 17)]),
        "vector_left": (lambda xp, a, b: (a @ b) * 2, [(40,), (2, 40, 48)]),
        "row_times_matrix": (lambda xp, a, b: (a @ b).reshape(-1) + 1, [(1, 40), (40, 48)]),
    }
    fn, shapes = fns[case]
    arrays = [_array(s, F32) for s in shapes]
    (out,) = _run(fn, arrays, interpret_backend, **TILES)
    expected = fn(np, *arrays)
    assert_matches_numpy(out, expected, rtol=1e-5, atol=1e-4)


def test_epilogue_prologue_and_row_reductions(interpret_backend):
    x, s, w = _array((64, 40), F32), _array((40,), F32), _array((40, 48), F16)
    bias, res = _array((48,), F16), _array((64, 48), F16)
    fn = lambda xp, x, s, w, bias, res: xp.maximum((x * s).astype(F16) @ w + bias, 0) + res  # noqa: E731
    (out,) = _run(fn, [x, s, w, bias, res], interpret_backend, **TILES)
    assert_matches_numpy(out, fn(np, x, s, w, bias, res), rtol=2e-2, atol=2e-2)
    a, b = _array((50, 40), F32), _array((40, 48), F32)
    for fn in (lambda xp, a, b: (a @ b).sum(-1), lambda xp, a, b: (a @ b).max(-1, keepdims=True),
               lambda xp, a, b: xp.softmax(a @ b, -1) if xp is fj else
               (lambda y: np.exp(y - y.max(-1, keepdims=True))
                / np.exp(y - y.max(-1, keepdims=True)).sum(-1, keepdims=True))(a @ b)):
        (out,) = _run(fn, [a, b], interpret_backend, block_m=16, block_n=64, block_k=16)
        assert_matches_numpy(out, fn(np, a, b), rtol=1e-5, atol=1e-4)


def test_prologue_zeroes_past_k(interpret_backend):
    # exp(0) = 1 and log(0) = -inf: a prologue of the zeros loaded past K must not count
    a, b = _array((33, 40), F32), np.abs(_array((40, 20), F32)) + 0.5
    fn = lambda xp, a, b: xp.exp(a * 0.1) @ xp.log(b)  # noqa: E731
    (out,) = _run(fn, [a, b], interpret_backend, block_m=16, block_n=16, block_k=32)
    assert_matches_numpy(out, fn(np, a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_split_k(interpret_backend, dtype):
    a, b = _array((20, 200), dtype), _array((200, 30), dtype)
    (out,) = _run(lambda xp, a, b: a @ b, [a, b], interpret_backend, block_m=16, block_n=32,
                  block_k=16 if dtype != "int32" else 8, split_k=4)
    _close_to_product(out, a, b, dtype)  # the bound holds for any order of the sum
    x = _array((20, 200), F32)
    fn = lambda xp, a, b: (a @ b * 2 + 1).max(-1)  # noqa: E731
    (out,) = _run(fn, [x, x.T.copy()], interpret_backend, block_m=16, block_n=32, block_k=16,
                  split_k=3)
    assert_matches_numpy(out, fn(np, x, x.T.copy()), rtol=1e-5, atol=1e-4)


def test_split_k_combine_adds_blocks_of_chunks_in_smaller_tiles(interpret_backend):
    """A product of one or two tiles and a long K takes one chunk per SM (more than
    ``GEMM_MAX_SPLIT_K``): its combine spreads the partials over programs of smaller tiles
    than the GEMM's, each adding a block of chunks a step (a ragged last block masked), with
    the epilogue on the combine's tiles."""
    split = heuristics.GEMM_MAX_SPLIT_K + 4
    a, b = _array((12, 16 * 2 * split + 5), F32), _array((16 * 2 * split + 5, 40), F32)
    fn = lambda xp, a, b: a @ b - 1  # noqa: E731
    (out,) = _run(fn, [a, b], interpret_backend, block_m=16, block_n=64, block_k=16,
                  split_k=split)
    assert_matches_numpy(out, fn(np, a, b), rtol=1e-5, atol=1e-4)
    rows, cols, chunks = heuristics.gemm_combine_tiles(16, 64, split, False)
    assert (rows, cols) == (4, 64) and chunks == 32 and chunks > split
    text = _retile(_fused_text(fn, [a, b]), block_m=16, block_n=64, block_k=16, split_k=split)
    (kernel,) = kernel_sources(fj.parse(text))
    combine = kernel.source[kernel.source.index("_combine("):]
    assert f"for first in range(0, {split}, {chunks}):" in combine
    assert f"rows_m = pid_m * {rows} + tl.arange(0, {rows})" in combine
    assert f"(split < {split})" in combine  # the last block is ragged


def test_empty_and_degenerate_products(interpret_backend):
    for sa, sb in [((5, 0), (0, 7)), ((0, 4), (4, 3)), ((1, 1), (1, 1)), ((17, 3), (3, 1))]:
        a, b = _array(sa, F32), _array(sb, F32)
        assert_matches_numpy(fj.asarray(a) @ fj.asarray(b) + 1, a @ b + 1, rtol=1e-5, atol=1e-5)


def test_nan_and_inf_propagate(interpret_backend):
    a, b = _array((20, 24), F32), _array((24, 18), F32)
    a[3, 5] = np.nan
    b[2, 7] = np.inf
    got = (fj.asarray(a) @ fj.asarray(b)).numpy()
    with np.errstate(all="ignore"):
        expected = a @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))


def test_two_layer_mlp_values(backend):
    x, w1, b1, w2, b2 = (_array(s, F32) for s in [(32, 40), (40, 48), (48,), (48, 24), (24,)])
    got = _gelu(fj, fj.asarray(x) @ fj.asarray(w1) + fj.asarray(b1)) @ fj.asarray(w2) + b2
    assert_matches_numpy(got, _gelu(np, x @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shapes", [((1, 37), (37, 5)), ((37, 1), (1, 5)), ((5, 37), (37, 1)),
                                    ((1, 1), (1, 1)), ((2, 1, 40), (40, 33))])
def test_size_one_dims(interpret_backend, shapes):
    a, b = _array(shapes[0], F32), _array(shapes[1], F32)
    fn = lambda xp, a, b: (a @ b + 1, (a @ b).sum(-1))  # noqa: E731
    got = fn(fj, fj.asarray(a), fj.asarray(b))
    fj.realize(*got)
    for g, e in zip(got, fn(np, a, b)):
        assert_matches_numpy(g, e, rtol=1e-5, atol=1e-5)


# -- random programs with products ----------------------------------------------------------

_FUZZ_OPS = ("add", "multiply", "subtract", "maximum", "exp", "tanh", "negative", "sum", "max",
             "argmax", "transpose", "T", "reshape", "slice", "broadcast_to", "expand_dims",
             "astype", "where", "softmax", "layer_norm", "matmul")


@pytest.fixture
def _every_growth_checked(monkeypatch):
    from fusejit.fuse import greedy
    monkeypatch.setattr(greedy, "CHECK_EVERY_GROWTH", True)


def _fuzz(backend_name):
    from hypothesis import HealthCheck, given, settings

    from fusejit.testing import check_program, programs

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(programs(ops=_FUZZ_OPS, max_side=5))
    def check(recipe):
        check_program(recipe, backend=backend_name)
    check()


def test_random_programs_with_products_numpy(numpy_backend, _every_growth_checked):
    _fuzz("numpy")


def test_random_programs_with_products_interpret(interpret_backend, _every_growth_checked):
    _fuzz("interpret")


# -- TMA loads (opt-in: tma=1) ---------------------------------------------------------------

@pytest.mark.parametrize("case", ["plain", "weight_transposed", "prologue", "split_k", "tf32",
                                  "int8", "batch_broadcast"])
def test_tma_loads(interpret_backend, case):
    fns = {
        "plain": (lambda xp, a, b: a @ b, [((64, 40), F16), ((40, 48), F16)]),
        "weight_transposed": (lambda xp, a, w: a @ w.T, [((64, 40), F16), ((48, 40), F16)]),
        "prologue": (lambda xp, x, w: (x * 0.5).astype(F16) @ w, [((64, 40), F32),
                                                                  ((40, 48), F16)]),
        "split_k": (lambda xp, a, b: a @ b + 1, [((20, 200), F32), ((200, 30), F32)]),
        "tf32": (lambda xp, a, b: xp.matmul(a, b, precision="tf32") if xp is fj else a @ b,
                 [((64, 40), F32), ((40, 48), F32)]),
        "int8": (lambda xp, a, b: a @ b, [((64, 48), np.int8), ((48, 32), np.int8)]),
        "batch_broadcast": (lambda xp, a, b: a @ b, [((3, 33, 40), F16), ((40, 32), F16)]),
    }
    fn, specs = fns[case]
    arrays = [_array(s, d) for s, d in specs]
    text = _retile(_fused_text(fn, arrays), block_m=16, block_n=32,
                   block_k=32 if case == "int8" else 16,  # (int8 dots: K tiles of 32 or more)
                   split_k=4 if case == "split_k" else 1).replace("kind=gemm", "kind=gemm tma=1")
    prog = fj.parse(text)
    from fusejit.codegen import emit_kernel
    source = emit_kernel(prog.kernels[0], None, "interpret").source
    assert "tl.make_tensor_descriptor(" in source and "(TMA)" in source
    # scalar params (0.5, 1) are inputs of the parsed program too, in the recorded order
    inputs = recorded_inputs(fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)]))
    (out,) = prog.run(*inputs)
    expected = fn(np, *arrays)
    tol = {"float16": 1e-2, "float32": 2e-3 if case == "tf32" else 1e-5}.get(str(out.dtype))
    assert_matches_numpy(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("case", ["batched", "batched_ragged_k", "weight_broadcast",
                                  "two_batch_axes_transposed", "f32_transposed_ragged_k"])
@pytest.mark.parametrize("edit", [" tma=1", " tma=1 programs=3", " tma=1 programs=5 stream_k=1"])
def test_batched_operands_load_as_tma_boxes(interpret_backend, case, edit):
    """An operand with batch axes loads through TMA: a descriptor of its whole rank (the box
    one deep along each batch axis, reshaped to the tile), so a box past a matrix's last row
    or column reads zeros, not the next matrix of the batch (K of 40 in tiles of 16: the last
    step's box is half past K); a weight broadcast over the batch folds the batch into M (A
    one 2-D descriptor over its 120 rows); with one program per tile, persistent or stream-K:
    NumPy's bits (integer values)."""
    cases = {
        "batched": ([(3, 40, 48), (3, 48, 40)], F16, False),
        "batched_ragged_k": ([(3, 33, 40), (3, 40, 24)], F16, False),
        "weight_broadcast": ([(3, 40, 48), (48, 40)], F16, False),
        "two_batch_axes_transposed": ([(2, 3, 40, 48), (3, 36, 48)], F16, True),
        "f32_transposed_ragged_k": ([(2, 3, 40, 40), (3, 24, 40)], F32, True),
    }
    (a_shape, b_shape), dtype, transposed = cases[case][0], cases[case][1], cases[case][2]
    arrays = [_small_ints(a_shape, dtype), _small_ints(b_shape, dtype)]

    def fn(xp, a, b):
        return a @ (b.swapaxes(-1, -2) if transposed else b)
    text = _retile(_fused_text(fn, arrays), block_m=16, block_n=16, block_k=16, split_k=1)
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm" + edit))
    from fusejit.codegen import emit_kernel
    source = emit_kernel(prog.kernels[0], None, "interpret").source
    k_step = source.split("for k in range(")[1].split("tl.dot(")[0]
    assert source.count("(TMA)") == 2 and "tl.load(" not in k_step
    if case == "weight_broadcast":  # the batch folded into M: A is one 2-D descriptor
        assert "its batch and M axes as one" in source and "rows_bm // 40" in source
    else:
        assert ".reshape(16, 16)" in source
    (out,) = prog.run(*recorded_inputs(fn(fj, *[fj.asarray(a, name=f"in{i}")
                                                for i, a in enumerate(arrays)])))
    np.testing.assert_array_equal(out, fn(np, *arrays))


def test_a_weight_broadcast_over_a_batch_folds_the_batch_into_m(interpret_backend, fresh_plans):
    """``x @ w`` with ``x`` of [batch, rows, K] and a 2-D ``w``: the batch's products are one
    product of batch x rows (``GemmEmitter._fold_batch``): 3 x 33 rows fill 7 tile rows of 16
    where they took 9, ``plan.explain()`` says so, a row reduction and a residual of the
    batch's shape fuse as before, and the values are NumPy's. Not folded: a batched ``w``, and
    an ``x`` whose batch and row axes do not merge (a transposed view)."""
    from fusejit.codegen import emit_kernel

    x, w, r = _small_ints((3, 33, 40), F32), _small_ints((40, 16), F32), _small_ints((3, 33, 16), F32)

    def fn(xp, x, w, r):
        y = x @ w + r
        return y, (y * y).sum(-1)
    text = _retile(_fused_text(lambda xp, x, w, r: fn(xp, x, w, r)[1], [x, w, r]), block_m=16,
                   block_n=16, block_k=16, split_k=1)
    prog = fj.parse(text)
    (kernel,) = prog.kernels
    emitted = emit_kernel(kernel, None, "interpret")
    assert emitted.launches[0].grid == (7, 1, 1)
    assert "the batch's 3 products as one of 99 rows" in "\n".join(emitted.tiling)
    inputs = recorded_inputs(fn(fj, *[fj.asarray(a, name=f"in{i}")
                                      for i, a in enumerate((x, w, r))])[1])
    (out,) = prog.run(*inputs)
    np.testing.assert_array_equal(out, fn(np, x, w, r)[1])
    y, total = fn(fj, fj.asarray(x), fj.asarray(w), fj.asarray(r))
    np.testing.assert_array_equal(y.numpy(), fn(np, x, w, r)[0])
    np.testing.assert_array_equal(total.numpy(), fn(np, x, w, r)[1])
    for a, b in (((3, 33, 40), (3, 40, 16)),                     # w batched
                 ((33, 3, 40), (40, 16))):                       # x transposed: rows 3 * 40 apart
        xa, wb = _small_ints(a, F32), _small_ints(b, F32)

        def g(xp, xa, wb):
            return (xa.swapaxes(0, 1) if xa.shape[0] == 33 else xa) @ wb
        t = _retile(_fused_text(g, [xa, wb]), block_m=16, block_n=16, block_k=16, split_k=1)
        e = emit_kernel(fj.parse(t).kernels[0], None, "interpret")
        assert e.launches[0].grid == (9, 1, 1) and "products as one" not in e.source
        np.testing.assert_array_equal(g(fj, fj.asarray(xa), fj.asarray(wb)).numpy(), g(np, xa, wb))


def test_tma_is_validated():
    text = _fused_text(lambda xp, a, b: a @ b, [_array((64, 40), F32), _array((40, 48), F32)])
    with pytest.raises(fj.IRVerifyError, match="tma=2 is not 0 or 1"):
        fj.parse(text.replace("kind=gemm", "kind=gemm tma=2"))


# -- the product relayed through an output (gemm.py, _relay_output) --------------------------

def _sources(fn, arrays, target):
    from fusejit.codegen import emit_kernel
    out = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = out if isinstance(out, tuple) else (out,)
    return [emit_kernel(k, None, target).source for k in fj.plan(*outs).program.kernels
            if k.kind == "gemm"]


def _emitted(fn, arrays, target):
    from fusejit.codegen import emit_kernel
    out = fn(fj, *[fj.asarray(a) for a in arrays])
    return [emit_kernel(k, None, target) for k in fj.plan(out).program.kernels
            if k.kind == "gemm"]


def test_which_epilogues_may_relay_the_product(fresh_plans):
    """By default (``GEMM_RELAY_PRODUCT`` "serialized") a GEMM is emitted reading its product
    from the MMA's registers, and marked ``relayable`` on ``cuda`` when its epilogue has a
    special function (GELU's tanh, an exp) and an output that can hold the product: the
    ``cuda`` backend then emits it again with ``relay=1`` if ptxas serializes its main loop
    (tests/test_devices.py). Not relayable: plain epilogues, bare products, the
    interpreter's kernels, a float16 output of a float32 product."""
    a, b, bias = _array((64, 40), F16), _array((40, 48), F16), _array((48,), F16)
    relayed = "relayed through L2"
    with fj.using_backend("interpret"):
        for fn in (lambda xp, a, b, c: _gelu(xp, a @ b + c),
                   lambda xp, a, b, c: (a @ b + c) * xp.exp(a @ b)):
            (e,) = _emitted(fn, [a, b, bias], "cuda")
            assert e.relayable and relayed not in e.source
            (e,) = _emitted(fn, [a, b, bias], "interpret")
            assert not e.relayable and relayed not in e.source
        for fn in (lambda xp, a, b, c: a @ b, lambda xp, a, b, c: xp.maximum(a @ b + c, 0)):
            (e,) = _emitted(fn, [a, b, bias], "cuda")
            assert not e.relayable and relayed not in e.source
        a32, b32 = _array((64, 40), F32), _array((40, 48), F32)
        (e,) = _emitted(lambda xp, a, b, c: xp.tanh(a @ b).astype(F16), [a32, b32, bias], "cuda")
        assert not e.relayable


@pytest.mark.parametrize("mode", ["serialized", "never"])
def test_full_precision_products_relay_special_epilogues_on_cuda(fresh_plans, monkeypatch, mode):
    """A full-precision float32 product (the FMA kernel) with a special function in its
    epilogue reads its product back from its output on ``cuda`` by default (H100,
    6400x1552x3336 with bias and GELU: 1855 us from the accumulator, 1518 relayed); not under
    "never", not with a plain epilogue, not at TF32 (tensor cores: the ptxas check decides),
    not on the interpreter. The relayed kernel compiles for sm_90, and with ``relay=1``
    written in the text it computes NumPy's values on the interpreter."""
    monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", mode)
    a, b, bias = _array((64, 40), F32), _array((40, 48), F32), _array((48,), F32)
    relayed = "relayed through L2"
    with fj.using_backend("interpret"):
        (e,) = _emitted(lambda xp, a, b, c: _gelu(xp, a @ b + c), [a, b, bias], "cuda")
        assert (relayed in e.source) == (mode == "serialized") and not e.relayable
        if mode == "serialized":
            assert "slowed the FMA main loop" in e.source
        (e,) = _emitted(lambda xp, a, b, c: _gelu(xp, a @ b + c), [a, b, bias], "interpret")
        assert relayed not in e.source
        (e,) = _emitted(lambda xp, a, b, c: xp.maximum(a @ b + c, 0), [a, b, bias], "cuda")
        assert relayed not in e.source
        (e,) = _emitted(lambda xp, a, b, c: _gelu(xp, fj.matmul(a, b, precision="tf32") + c)
                        if xp is fj else _gelu(xp, a @ b + c), [a, b, bias], "cuda")
        assert relayed not in e.source and e.relayable == (mode == "serialized")


def test_a_relayed_full_precision_product_compiles_and_matches_numpy(fresh_plans):
    """The relayed FMA kernel compiles for sm_90; written with ``relay=1`` it runs on the
    interpreter and matches float64 NumPy at float32's tolerance (``4 sqrt(K) eps``)."""
    pytest.importorskip("triton")
    from fusejit.codegen import emit_kernel
    from fusejit.runtime.compile import compile_all
    a, b, bias = _array((70, 300), F32), _array((300, 45), F32), _array((45,), F32)
    with fj.using_backend("interpret"):
        y = _gelu(fj, fj.asarray(a) @ fj.asarray(b) + fj.asarray(bias))
        (kernel,) = [k for k in fj.plan(y).program.kernels if k.kind == "gemm"]
        emitted = emit_kernel(kernel, None, "cuda")
        assert "relayed through L2" in emitted.source
        assert compile_all(emitted, 90, True)
        text = fj.dump(y, fused=True).replace("kind=gemm", "kind=gemm relay=1")
        from fusejit.testing import recorded_inputs
        (got,) = fj.parse(text).run(*recorded_inputs(y))
    ref = _gelu(np, a.astype(np.float64) @ b.astype(np.float64) + bias)
    err = np.linalg.norm(np.asarray(got, np.float64) - ref) / np.linalg.norm(ref)
    assert err < 4 * np.sqrt(300) * 2.0 ** -23


@pytest.mark.parametrize("mode", ["serialized", "never", "special", "always"])
def test_relay_attribute_decides_whatever_the_mode(fresh_plans, monkeypatch, mode):
    """A gemm kernel's ``relay=1`` in the IR text relays its product (``relay=0`` does not),
    whatever ``GEMM_RELAY_PRODUCT`` says; "special" relays on ``cuda`` by itself, "always"
    everywhere; ``relay=2`` is an error at the kernel's line."""
    from fusejit.codegen import emit_kernel
    monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", mode)
    a, b, bias = (fj.asarray(x) for x in (_array((64, 40), F16), _array((40, 48), F16),
                                          _array((48,), F16)))
    text = fj.dump(_gelu(fj, a @ b + bias), fused=True)
    relayed = "relayed through L2"
    for edit, want in (("", mode in ("special", "always")), (" relay=1", True),
                       (" relay=0", False)):
        (kernel,) = fj.parse(text.replace("kind=gemm", "kind=gemm" + edit)).kernels
        emitted = emit_kernel(kernel, None, "cuda")
        assert (relayed in emitted.source) == want, edit
        assert emitted.relayable == (mode == "serialized" and not edit)
    with pytest.raises(fj.FusejitError, match=r"relay=2 is not 0 or 1"):
        fj.plan(fj.parse(text.replace("kind=gemm", "kind=gemm relay=2")))


@pytest.mark.parametrize("case", ["gelu_ragged", "wider_output", "product_and_epilogue",
                                  "batched", "softmax_rows", "residual"])
def test_relayed_products_match_numpy(interpret_backend, fresh_plans, monkeypatch, case):
    """``GEMM_RELAY_PRODUCT = "always"`` relays on the interpreter too: the store, barrier and
    load of the product, with ragged tiles (masks), a float32 output of a float16 product, two
    outputs, batches and a row reduction, give NumPy's answers."""
    monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", "always")
    cases = {
        "gelu_ragged": (lambda xp, a, b, c: _gelu(xp, a @ b + c),
                        [((50, 40), F32), ((40, 45), F32), ((45,), F32)]),
        "wider_output": (lambda xp, a, b, c: xp.tanh(a @ b) + c,
                         [((33, 40), F16), ((40, 47), F16), ((47,), F32)]),
        "product_and_epilogue": (lambda xp, a, b, c: (a @ b, xp.exp((a @ b) * 0.1) - c),
                                 [((40, 24), F32), ((24, 36), F32), ((36,), F32)]),
        "batched": (lambda xp, a, b, c: xp.sqrt(xp.abs(a @ b)) + c,
                    [((3, 20, 24), F32), ((3, 24, 40), F32), ((40,), F32)]),
        "softmax_rows": (lambda xp, a, b, c: xp.softmax(a @ b + c, -1) if xp is fj else
                         (lambda y: np.exp(y - y.max(-1, keepdims=True))
                          / np.exp(y - y.max(-1, keepdims=True)).sum(-1, keepdims=True))(
                              a @ b + c), [((30, 40), F32), ((40, 48), F32), ((48,), F32)]),
        "residual": (lambda xp, a, b, c: (a @ b) / (1 + c),
                     [((37, 40), F32), ((40, 29), F32), ((37, 29), F32)]),
    }
    fn, specs = cases[case]
    arrays = [_array(s, d) for s, d in specs]
    arrays[-1] = np.abs(arrays[-1]) if case == "residual" else arrays[-1]
    sources = _sources(fn, arrays, "interpret")
    assert sources and all("relayed through L2" in s for s in sources)
    tiles = {"block_m": 16, "block_n": 64, "block_k": 16} if case == "softmax_rows" else TILES
    outs = _run(fn, arrays, interpret_backend, **tiles)
    want = fn(np, *arrays)
    want = want if isinstance(want, tuple) else (want,)
    tol = 2e-2 if case == "wider_output" else 1e-4
    for got, expected in zip(outs, want):
        assert_matches_numpy(got, expected, rtol=tol, atol=tol)


def test_random_programs_with_relayed_products(interpret_backend, fresh_plans, monkeypatch,
                                               _every_growth_checked):
    monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", "always")
    _fuzz("interpret")


def test_an_unknown_relay_mode_is_a_clear_error(fresh_plans, monkeypatch):
    from fusejit.codegen import emit_kernel
    monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", "sometimes")
    a, b, bias = (fj.asarray(x) for x in (_array((64, 40), F16), _array((40, 48), F16),
                                          _array((48,), F16)))
    with fj.using_backend("interpret"):
        (kernel,) = fj.plan(_gelu(fj, a @ b + bias)).program.kernels
    with pytest.raises(fj.FusejitError, match=r"FUSEJIT_GEMM_RELAY='sometimes' is not one of "
                                              r"serialized, special, always, never"):
        emit_kernel(kernel, None, "cuda")


# -- persistent GEMMs (programs=P: P programs loop over the tiles) ----------------------------

@pytest.mark.parametrize("case", ["relu_bias_ragged", "batched", "row_softmax", "tma",
                                  "relayed", "int8", "one_more_than_programs"])
def test_persistent_gemm_matches_numpy(interpret_backend, case):
    """``programs=P`` on a gemm kernel: P programs, each over every P-th tile (in the grouped
    order), give NumPy's answers with ragged tiles, batches, a row reduction in the epilogue,
    TMA loads (their descriptors made once, before the tile loop) and a relayed product."""
    cases = {
        "relu_bias_ragged": (lambda xp, a, b, c: xp.maximum(a @ b + c, 0),
                             [((70, 40), F32), ((40, 90), F32), ((90,), F32)], 3),
        "batched": (lambda xp, a, b, c: (a @ b) * c,
                    [((3, 33, 24), F16), ((24, 40), F16), ((40,), F16)], 4),
        "row_softmax": (lambda xp, a, b, c: xp.softmax(a @ b + c, -1) if xp is fj else
                        (lambda y: np.exp(y - y.max(-1, keepdims=True))
                         / np.exp(y - y.max(-1, keepdims=True)).sum(-1, keepdims=True))(a @ b + c),
                        [((70, 40), F32), ((40, 32), F32), ((32,), F32)], 2),
        "tma": (lambda xp, a, b, c: a @ b.T + c,
                [((64, 40), F16), ((48, 40), F16), ((48,), F16)], 3),
        "relayed": (lambda xp, a, b, c: _gelu(xp, a @ b + c),
                    [((50, 40), F32), ((40, 45), F32), ((45,), F32)], 5),
        "int8": (lambda xp, a, b, c: a @ b + c,
                 [((40, 48), np.int8), ((48, 40), np.int8), ((40,), np.int32)], 2),
        "one_more_than_programs": (lambda xp, a, b, c: a @ b - c,
                                   [((48, 40), F32), ((40, 64), F32), ((64,), F32)], 5),
    }
    fn, specs, programs = cases[case]
    arrays = [_array(s, d) for s, d in specs]
    tiles = {"block_m": 16, "block_n": 32 if case == "row_softmax" else 16,
             "block_k": 32 if case == "int8" else 16}
    text = _retile(_fused_text(fn, arrays), **tiles).replace(
        "kind=gemm", f"kind=gemm programs={programs}"
        + (" tma=1" if case == "tma" else "") + (" relay=1" if case == "relayed" else ""))
    prog = fj.parse(text)
    from fusejit.codegen import emit_kernel
    emitted = emit_kernel(prog.kernels[0], None, "interpret")
    source = emitted.source
    # the interpreter's loop has constant bounds (Triton 3.6's cannot take a program id in
    # range()); the GPU's is flattened by Triton with the K loop
    loop = "for step in range(0, "
    assert loop in source and f"one in every {programs} of" in source
    assert emitted.launches[0].grid == (programs, 1, 1)
    cuda = emit_kernel(prog.kernels[0], None, "cuda").source
    assert "for pid in tl.range(tl.program_id(0), " in cuda
    assert f", {programs}, flatten=True)" in cuda
    if case == "tma":  # made once per program, outside the loop over tiles
        assert source.index("tl.make_tensor_descriptor(") < source.index(loop)
    if case == "relayed":
        assert "relayed through L2" in source
    inputs = recorded_inputs(fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)]))
    (out,) = prog.run(*inputs)
    expected = fn(np, *arrays)
    tol = {"float16": 1e-2, "float32": 1e-4}.get(str(out.dtype))
    if tol is None:
        np.testing.assert_array_equal(out, expected)
    else:
        assert_matches_numpy(out, expected, rtol=tol, atol=tol)


def test_persistent_gemm_attributes_are_checked_and_explained(fresh_plans):
    """``programs`` is a count of programs (0: one per tile), refused with split-K; as many
    programs as tiles or more launch one per tile; ``plan.explain()`` says the kernel is
    persistent."""
    from fusejit.codegen import emit_kernel
    arrays = [_array((64, 40), F32), _array((40, 48), F32)]
    text = _retile(_fused_text(lambda xp, a, b: a @ b, arrays), block_m=16, block_n=16,
                   block_k=16)  # 12 tiles
    for bad, why in (("programs=-1", "programs=-1 is not an integer from 0 to 65535"),
                     ("programs=70000", "programs=70000 is not an integer from 0 to 65535")):
        with pytest.raises(fj.IRVerifyError, match=why):
            fj.parse(text.replace("kind=gemm", f"kind=gemm {bad}"))
    split = _retile(text, split_k=2).replace("kind=gemm", "kind=gemm programs=4")
    with pytest.raises(fj.IRVerifyError, match="a split-K GEMM is not persistent"):
        fj.parse(split)
    for programs, grid in ((4, 4), (12, 12), (50, 12), (0, 12)):
        (kernel,) = fj.parse(text.replace("kind=gemm", f"kind=gemm programs={programs}")).kernels
        emitted = emit_kernel(kernel, None, "cuda")
        assert emitted.launches[0].grid == (grid, 1, 1)
        assert ("flatten=True" in emitted.source) == (grid < 12)
    from fusejit.fuse import plan_for
    plan = plan_for(fj.parse(text.replace("kind=gemm", "kind=gemm programs=4")))
    assert "persistent: 4 programs" in plan.explain()


def test_float16_gemms_of_enough_tiles_are_persistent_with_tma_by_default(fresh_plans,
                                                                         monkeypatch):
    """On ``cuda``, a float16 GEMM of more than ``GEMM_PERSISTENT_AFTER_WAVES`` waves of tiles
    (from half a wave to one, ``GEMM_TMA_MIN_WAVES``: TMA loads, one program per tile)
    whose attributes say neither ``tma`` nor ``programs`` loads its operand tiles through TMA
    and launches one program per SM (``heuristics.SMS``); one whose operand is computed (a
    prologue: not a TMA box) is emitted again with ``tma=0 programs=0``; a prologue of a
    TMA-readable buffer (a scale), other dtypes, fewer tiles, the interpreter,
    ``FUSEJIT_GEMM_PERSISTENT=0`` and written attributes are not persistent; a bad
    ``FUSEJIT_GEMM_PERSISTENT`` is a clear error."""
    from fusejit.codegen import emit_kernel
    monkeypatch.setattr(heuristics, "SMS", 5)  # 12 tiles of 16 x 16: 2.4 waves of 5

    def emitted(fn, arrays, target="cuda", edit=""):
        text = _retile(_fused_text(fn, arrays), block_m=16, block_n=16, block_k=16)
        (kernel,) = fj.parse(text.replace("kind=gemm", "kind=gemm" + edit)).kernels
        return emit_kernel(kernel, None, target)
    f16 = [_array((64, 40), F16), _array((40, 48), F16), _array((48,), F16)]
    bias_relu = lambda xp, a, b, c: xp.maximum(a @ b + c, 0)  # noqa: E731
    e = emitted(bias_relu, f16)
    assert e.auto_persistent and e.launches[0].grid == (5, 1, 1)
    assert "(TMA)" in e.source and "flatten=True" in e.source and e.aligned == (0, 1)
    assert "GEMM_PERSISTENT: float16" in "\n".join(e.tiling)
    plain = [emitted(bias_relu, f16, "interpret"), emitted(bias_relu, f16, edit=" tma=0"),
             emitted(bias_relu, f16, edit=" programs=0"),
             emitted(lambda xp, a, b, c: (a @ b) + c,
                     [_array((64, 40), F32), _array((40, 48), F32), _array((48,), F32)]),
             emitted(lambda xp, a, s, b: (a * s).astype(F16) @ b,  # a prologue: re-emitted
                     [_array((64, 40), F32), _array((40,), F32), _array((40, 48), F16)]),
             emitted(lambda xp, a, b: (a * 0.5).astype(F16) @ b,  # TMA could load it: not
                     [_array((64, 40), F32), _array((40, 48), F16)])]             # measured
    for p in plain:
        assert not p.auto_persistent and p.launches[0].grid == (12, 1, 1)
        assert "flatten=True" not in p.source and "(TMA)" not in p.source
    monkeypatch.setattr(heuristics, "SMS", 11)  # 12 tiles: 1.1 waves of 11, the least
    assert emitted(bias_relu, f16).launches[0].grid == (11, 1, 1)
    for sms in (12, 24):  # one wave, half a wave: one program per tile, TMA loads
        monkeypatch.setattr(heuristics, "SMS", sms)
        e = emitted(bias_relu, f16)
        assert e.launches[0].grid == (12, 1, 1) and e.auto_tma and not e.auto_persistent
        assert "(TMA)" in e.source and "flatten=True" not in e.source and e.aligned == (0, 1)
        assert "GEMM_TMA_MIN_WAVES: float16" in "\n".join(e.tiling)
    monkeypatch.setattr(heuristics, "SMS", 25)  # under half a wave: pointer loads
    e = emitted(bias_relu, f16)
    assert not e.auto_tma and "(TMA)" not in e.source
    monkeypatch.setattr(heuristics, "SMS", 12)  # a prologue: pointer loads, emitted again
    e = emitted(lambda xp, a, b, c: xp.maximum((a * 2) @ b + c, 0), f16)
    assert not e.auto_tma and "(TMA)" not in e.source
    monkeypatch.setattr(heuristics, "GEMM_PERSISTENT", "0")
    monkeypatch.setattr(heuristics, "SMS", 5)
    assert emitted(bias_relu, f16).launches[0].grid == (12, 1, 1)
    monkeypatch.setattr(heuristics, "GEMM_PERSISTENT", "yes")
    with pytest.raises(fj.FusejitError, match="FUSEJIT_GEMM_PERSISTENT='yes' is not one of "
                                              "0, 1, always"):
        emitted(bias_relu, f16)


def test_random_persistent_gemms_match_numpy(interpret_backend, fresh_plans):
    """Random persistent GEMMs on the interpreter: sizes from 1 to 70 in 16 x 16 x 16 tiles
    (ragged edges), a batch or none, float32 or float16, a prologue or none, one of several
    epilogues (a row sum among them: its tile spans the row), any number of programs from 1
    to the tile count, TMA loads or pointer loads: NumPy's answers (float32 1e-4, float16
    2e-2, relative to the result's scale)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    epilogues = {
        "none": lambda xp, y, c: y,
        "bias_relu": lambda xp, y, c: xp.maximum(y + c, 0),
        "tanh": lambda xp, y, c: xp.tanh(y * 0.1) * c,
        "row_sum": lambda xp, y, c: (y + c).sum(-1),
    }

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 70),
           batch=st.sampled_from([None, 2]), dtype=st.sampled_from([F32, F16]),
           prologue=st.booleans(), epilogue=st.sampled_from(sorted(epilogues)),
           tma=st.booleans(), data=st.data())
    def check(m, n, k, batch, dtype, prologue, epilogue, tma, data):
        if epilogue == "row_sum":
            n = min(n, 16)  # the row in one tile
        lead = (batch,) if batch else ()
        a, b, c = _array((*lead, m, k), dtype), _array((k, n), dtype), _array((n,), dtype)
        s = np.abs(_array((k,), dtype)) + 0.5

        def fn(xp, a, b, c, s):
            return epilogues[epilogue](xp, ((a * s) if prologue else a) @ b, c)
        arrays = [a, b, c, s]
        tiles = (batch or 1) * -(-m // 16) * -(-n // 16)
        programs = data.draw(st.integers(1, tiles), "programs")
        text = _retile(_fused_text(fn, arrays), block_m=16, block_n=16, block_k=16, split_k=1)
        edit = f"kind=gemm programs={programs}" + (" tma=1" if tma else "")
        prog = fj.parse(text.replace("kind=gemm", edit))
        gemms = [kern for kern in prog.kernels if kern.kind == "gemm"]
        assert gemms
        inputs = recorded_inputs(fn(fj, *[fj.asarray(x, name=f"in{i}")
                                          for i, x in enumerate(arrays)]))
        (out,) = prog.run(*inputs)
        expected = fn(np, *arrays)
        tol = 1e-4 if dtype == F32 else 2e-2
        scale = max(1.0, float(np.max(np.abs(expected.astype(np.float64)))) if expected.size
                    else 1.0)
        assert_matches_numpy(out, expected, rtol=tol, atol=tol * scale)
    check()


@pytest.mark.parametrize("case", ["prologue", "batched", "plain"])
def test_always_persistent_mode_keeps_pointer_loads_persistent(fresh_plans, monkeypatch, case):
    """In mode "always" a GEMM whose operand TMA cannot read is emitted again persistent with
    pointer loads (the default would go back to one program per tile)."""
    from fusejit.codegen import emit_kernel
    monkeypatch.setattr(heuristics, "GEMM_PERSISTENT", "always")
    fns = {"prologue": (lambda xp, a, s, b: (a * s) @ b,
                        [((64, 40), F32), ((40,), F32), ((40, 48), F32)]),
           # (rows of 41 float32 are not 16-byte aligned: no TMA box)
           "batched": (lambda xp, a, b: a @ b, [((3, 64, 41), F32), ((3, 41, 48), F32)]),
           "plain": (lambda xp, a, b: a @ b, [((64, 40), F32), ((40, 48), F32)])}
    fn, specs = fns[case]
    text = _retile(_fused_text(fn, [_array(s, d) for s, d in specs]), block_m=16, block_n=16,
                   block_k=16)
    (kernel,) = fj.parse(text).kernels
    e = emit_kernel(kernel, None, "interpret")
    tiles = 12 * (3 if case == "batched" else 1)
    assert e.launches[0].grid == (tiles // 3, 1, 1) and "for step in range(0, " in e.source
    assert ("(TMA)" in e.source) == (case == "plain")


# -- stream-K GEMMs (stream_k=1: the tiles' K steps split evenly between the programs) -------

def _small_ints(shape, dtype):
    """Values from -3 to 3: every product and sum of the tests below is exact in float16 and
    float32, so any order of the K steps' partial sums gives NumPy's bits."""
    return rng.integers(-3, 4, shape).astype(dtype)


def test_random_stream_k_gemms_match_numpy_exactly(interpret_backend, fresh_plans):
    """Random stream-K GEMMs on the interpreter: sizes from 1 to 70 (K to 200) in 16 x 16 x 16
    tiles, a batch or none (B batched too, or broadcast: the batch folded into M), float32 or
    float16, one of several epilogues (a row sum: its tile spans the row; a product relayed
    through its output), TMA or pointer loads, any number of
    programs from 2 to one less than the tiles (tiles cut between two, three or more
    programs, or none): NumPy's bits exactly (integer values, so every partial sum is exact),
    and the tiles' counters left zero for the next launch."""
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as st

    from fusejit.codegen import emit_kernel
    from fusejit.runtime import current

    epilogues = {
        "none": lambda xp, y, c: y,
        "bias_relu": lambda xp, y, c: xp.maximum(y + c, 0),
        "row_sum": lambda xp, y, c: (y * c).sum(-1),
        "relayed": lambda xp, y, c: y - c,
    }

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 200),
           batch=st.sampled_from([None, 3]), dtype=st.sampled_from([F32, F16]),
           epilogue=st.sampled_from(sorted(epilogues)), tma=st.booleans(),
           b_batched=st.booleans(), data=st.data())
    def check(m, n, k, batch, dtype, epilogue, tma, b_batched, data):
        if epilogue == "row_sum":
            n = min(n, 16)  # the row in one tile
        lead = (batch,) if batch else ()
        b_lead = lead if b_batched else ()
        arrays = [_small_ints((*lead, m, k), dtype), _small_ints((*b_lead, k, n), dtype),
                  _small_ints((n,), dtype)]

        def fn(xp, a, b, c):
            return epilogues[epilogue](xp, a @ b, c)
        # (a B broadcast over the batch folds the batch into M: tiles run across matrices)
        folded = batch and not b_batched
        tiles = -(-(batch or 1) * m // 16) * -(-n // 16) if folded else \
            (batch or 1) * -(-m // 16) * -(-n // 16)
        assume(tiles >= 3)
        programs = data.draw(st.integers(2, tiles - 1), "programs")
        text = _retile(_fused_text(fn, arrays), block_m=16, block_n=16, block_k=16, split_k=1)
        edit = f"kind=gemm programs={programs} stream_k=1" + (" tma=1" if tma else "") + (
            " relay=1" if epilogue == "relayed" else "")
        prog = fj.parse(text.replace("kind=gemm", edit))
        (kernel,) = prog.kernels
        emitted = emit_kernel(kernel, None, "interpret")
        assert emitted.launches[0].grid == (programs, 1, 1) and "stream-K" in emitted.source
        inputs = recorded_inputs(fn(fj, *[fj.asarray(x, name=f"in{i}")
                                          for i, x in enumerate(arrays)]))
        (out,) = prog.run(*inputs)
        np.testing.assert_array_equal(out, fn(np, *arrays))
        assert not current().counters(emitted).any()
    check()


def test_stream_k_cuts_tiles_between_programs_as_documented(interpret_backend, fresh_plans):
    """The stretches of K steps: 4 programs over 9 tiles of 7 steps (63 steps: 15, 16, 16, 16)
    cut tiles 2, 4 and 6 between two programs each; the partial products of a cut tile are
    added in program order, so a product whose sum depends on the order (float32 values of
    every magnitude) gives the same bits run after run, and matches NumPy to float32's
    rounding of a sum of 100 products."""
    a = (rng.standard_normal((40, 100)) * np.exp(rng.uniform(-8, 8, (40, 100)))).astype(F32)
    b = rng.standard_normal((100, 40)).astype(F32)
    text = _retile(_fused_text(lambda xp, a, b: a @ b, [a, b]), block_m=16, block_n=16,
                   block_k=16, split_k=1)
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm programs=4 stream_k=1"))
    from fusejit.codegen import emit_kernel
    emitted = emit_kernel(prog.kernels[0], None, "interpret")
    assert "each computing 15-16 of the 63 K steps (9 tiles x 7)" in "\n".join(emitted.tiling)
    first = prog.run(a, b)[0]
    for _ in range(2):
        np.testing.assert_array_equal(prog.run(a, b)[0], first)
    ref = a.astype(F64) @ b.astype(F64)
    bound = 100 * np.finfo(F32).eps * (np.abs(a).astype(F64) @ np.abs(b).astype(F64))
    assert np.all(np.abs(first - ref) <= bound)


def test_stream_k_attributes_are_checked_and_explained(fresh_plans, monkeypatch):
    """``stream_k`` is a flag that needs ``programs``; ``plan.explain()`` says how the steps are
    split; never by default (``GEMM_STREAM_K`` "0": measured slower); in mode "1" a float16
    GEMM the heuristic makes persistent is stream-K when its whole-tile rounds would leave SMs
    idle (2.4 waves: 80% busy) and its tiles have ``GEMM_STREAM_K_MIN_STEPS`` K steps or
    more, not at whole waves, not with too few steps; a bad ``FUSEJIT_GEMM_STREAM_K`` is a
    clear error."""
    from fusejit.codegen import emit_kernel
    from fusejit.fuse import plan_for
    arrays = [_array((64, 160), F16), _array((160, 48), F16)]
    text = _retile(_fused_text(lambda xp, a, b: a @ b, arrays), block_m=16, block_n=16,
                   block_k=16)  # 12 tiles of 10 steps
    for bad, why in (("stream_k=2", "stream_k=2 is not 0 or 1"),
                     ("stream_k=1", "stream_k=1 without programs=P")):
        with pytest.raises(fj.IRVerifyError, match=why):
            fj.parse(text.replace("kind=gemm", f"kind=gemm {bad}"))
    plan = plan_for(fj.parse(text.replace("kind=gemm", "kind=gemm programs=5 stream_k=1")))
    assert "stream-K: 5 programs, each computing 24-25 of the 120 K steps" in plan.explain()

    def default(k=160, sms=5):
        monkeypatch.setattr(heuristics, "SMS", sms)
        arrays = [_array((64, k), F16), _array((k, 48), F16)]
        t = _retile(_fused_text(lambda xp, a, b: a @ b, arrays), block_m=16, block_n=16,
                    block_k=16)
        return emit_kernel(fj.parse(t).kernels[0], None, "cuda")
    assert heuristics.GEMM_STREAM_K == "0" and "stream-K" not in default().source
    monkeypatch.setattr(heuristics, "GEMM_STREAM_K", "1")
    e = default()  # 12 tiles on 5 SMs: 3 rounds, 80% busy
    assert e.auto_persistent and "stream-K" in e.source and e.counters == 12
    assert "GEMM_STREAM_K: 12 tiles are 2.40 waves of 5" in "\n".join(e.tiling)
    assert "for k in range(k_lo, k_hi, 16)" in e.source
    for plain in (default(sms=6),        # 2 whole waves
                  default(k=96),         # 6 steps per tile
                  default(sms=2)):       # 6 waves
        assert plain.auto_persistent and "stream-K" not in plain.source and not plain.counters
    monkeypatch.setattr(heuristics, "GEMM_STREAM_K", "0")
    assert "stream-K" not in default().source
    monkeypatch.setattr(heuristics, "GEMM_STREAM_K", "always")
    assert "stream-K" in default(sms=6).source
    monkeypatch.setattr(heuristics, "GEMM_STREAM_K", "yes")
    with pytest.raises(fj.FusejitError, match="FUSEJIT_GEMM_STREAM_K='yes' is not one of"):
        default()


def test_full_precision_product_of_a_k_major_b_runs_two_warps(interpret_backend):
    """A full-precision float32 GEMM of the heuristic's 64x64 tiles whose B loads K-major (an
    input stored ``[N, K]``, read as its transpose) runs on 2 warps and says why in its
    header; B row-major, TF32 and edited tiles keep the IR's warps. The numbers are the same
    either way (checked against NumPy's product within the error bound)."""
    from fusejit.codegen.triton_emitter import emit_kernel
    a, b = _array((200, 90), F32), _array((90, 130), F32)
    b_k_major = np.ascontiguousarray(b.T).T  # [K, N], stored [N, K]
    out = fj.asarray(a) @ fj.asarray(b_k_major)
    _close_to_product(out.numpy(), a, b, "float32")

    def header_and_warps(strides_b, precision="ieee", edit=None):
        y = fj.matmul(fj.asarray(a), fj.asarray(b), precision=precision)
        kernel = fj.plan(y).program.kernels[-1]
        if edit:
            kernel = fj.parse(re.sub(r"num_warps=\d+", edit, fj.dump(y, fused=True))).kernels[-1]
        em = emit_kernel(kernel, [(90, 1), strides_b], "cuda")
        return em.source, em.launches[0].num_warps
    source, warps = header_and_warps((1, 90))
    assert warps == 2 and "2 warps, not the shapes' 4: B loads K-major" in source
    assert header_and_warps((130, 1))[1] == 4  # B row-major
    assert header_and_warps((1, 90), "tf32")[1] != 2
    assert header_and_warps((1, 90), edit="num_warps=8")[1] == 8


def test_full_precision_split_by_rounds_of_tiles_matches_numpy(interpret_backend, fresh_plans,
                                                             monkeypatch):
    """A full-precision float32 product whose tiles fall unevenly over the SMs splits K into
    the chunk count that evens the busiest SM's work (``heuristics._fma_round_split``): on 4
    SMs, 5 tiles in 3 chunks (the occupancy rule's) leave one SM 4 of 15 thirds, in 4 chunks
    5 of 20 quarters. The kernel header and ``plan.explain()`` say so; edited tiles do not
    claim it. The result is NumPy's within the product's error bound, through the partials
    and the combine of that split."""
    from fusejit.codegen.triton_emitter import emit_kernel
    monkeypatch.setattr(heuristics, "SMS", 4)
    a, b = _array((320, 8192), F32), _array((8192, 64), F32)
    y = fj.asarray(a) @ fj.asarray(b)
    plan = fj.plan(y)
    kernel = plan.program.kernels[-1]
    assert (kernel.attrs["block_m"], kernel.attrs["block_n"], kernel.attrs["split_k"]) == (64, 64, 4)
    why = ("K in 4 chunks, not 3: 5 tiles over 4 SMs leave the busiest SM 1.07x the even "
           "share of the work, 1.00x so (heuristics._fma_round_split)")
    assert why in emit_kernel(kernel, None, "cuda").source and why in plan.explain()
    edited = fj.parse(re.sub(r"num_stages=\d+", "num_stages=2", fj.dump(y, fused=True)))
    assert "_fma_round_split" not in emit_kernel(edited.kernels[-1], None, "cuda").source
    _close_to_product(y.numpy(), a, b, "float32")


def test_float64_split_by_rounds_of_tiles_matches_numpy(interpret_backend, fresh_plans,
                                                        monkeypatch):
    """float64 products run on the FMA units too and split K by the same rounds: on 4 SMs, 5
    tiles of 64x64 go from one chunk (the busiest SM 2 tiles of an even 1.25) to 4, said in the
    kernel header; the values are NumPy's within the float64 product's error bound."""
    from fusejit.codegen.triton_emitter import emit_kernel
    monkeypatch.setattr(heuristics, "SMS", 4)
    a, b = _array((320, 2048), F64), _array((2048, 64), F64)
    y = fj.asarray(a) @ fj.asarray(b)
    kernel = fj.plan(y).program.kernels[-1]
    assert (kernel.attrs["block_k"], kernel.attrs["split_k"]) == (16, 4)
    assert "K in 4 chunks, not 1: 5 tiles over 4 SMs" in emit_kernel(kernel, None, "cuda").source
    _close_to_product(y.numpy(), a, b, "float64")


def test_full_precision_single_tile_of_a_row_major_b_keeps_one_program_an_sm(interpret_backend):
    """A full-precision float32 product of one 64x64 tile and a long K: four 2-warp programs
    an SM from the shapes, but where B loads row-major (a Gram matrix ``x @ x.T``, whose B the
    fuser writes row-major first) one 4-warp program an SM, as measured faster there; B
    K-major keeps the shapes' tiles. Values within the product's error bound either way."""
    from fusejit.codegen import heuristics
    from fusejit.codegen.triton_emitter import emit_kernel
    k = 1 << 14
    a, b = _array((40, k), F32), _array((k, 50), F32)
    y = fj.asarray(a) @ fj.asarray(b)
    kernel = fj.plan(y).program.kernels[-1]
    assert (kernel.attrs["num_warps"], kernel.attrs["split_k"]) == (2, 64)  # 512 steps / 8
    row_major = emit_kernel(kernel, [(k, 1), (50, 1)], "cuda")
    split, warps = heuristics.fma_single_tile_row_major(k, 32)
    assert (split, warps) == (64, 4)  # (512 steps of 32: 64 chunks of 8, under one an SM)
    assert [(launch.grid[1], launch.num_warps) for launch in row_major.launches][0] == (64, 4)
    assert "4 warps in 64 chunks, not the shapes' 2 in 64" in row_major.source
    k_major = emit_kernel(kernel, [(k, 1), (1, k)], "cuda")
    assert k_major.launches[0].num_warps == 2
    _close_to_product(y.numpy(), a, b, "float32")
    x = fj.asarray(np.zeros((64, 1 << 18), F32))  # (planned only: zeros are cheap)
    gram = fj.plan(x @ x.T).program.kernels[-1]
    source = emit_kernel(gram, None, "cuda").source
    assert "4 warps in 132 chunks, not the shapes' 2 in 512" in source


# -- the epilogue in slices of the tile's columns ------------------------------------------------

@pytest.mark.parametrize("split", [2, 4])
@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_an_epilogue_in_slices_matches_numpy(interpret_backend, fresh_plans, split, dtype):
    """``epilogue_split=2|4`` runs the epilogue (a bias and ReLU beside a residual times the
    product, two outputs) on that many slices of the tile's columns in turn: the same values
    as NumPy's, on tiles that cross the product's edges (m=50, n=90 in 32 x 64 tiles), batched
    and not; ``plan.explain()`` and the source say so."""
    from fusejit.codegen import emit_kernel
    from fusejit.fuse import plan_for
    for shape_a, shape_b in (((50, 30), (30, 90)), ((2, 50, 30), (2, 30, 90))):
        arrays = [_array(shape_a, dtype), _array(shape_b, dtype), _array((90,), dtype),
                  _array(shape_a[:-1] + (90,), dtype)]

        def fn(xp, a, b, bias, r):
            y = xp.matmul(a, b)
            return xp.maximum(y + bias, 0), y * r
        outs = fn(fj, *[fj.asarray(x, name=f"in{i}") for i, x in enumerate(arrays)])
        text = _retile(fj.dump(*outs, fused=True), block_m=32, block_n=64, split_k=1)
        prog = fj.parse(text.replace("kind=gemm", f"kind=gemm epilogue_split={split}"))
        (kernel,) = [k for k in prog.kernels if k.kind == "gemm"]
        assert kernel.attrs["epilogue_split"] == split
        source = emit_kernel(kernel, None, "interpret").source
        assert source.count("tl.split(") == split - 1 and f"slice {split} of {split}" in source
        assert f"epilogue in {split} slices of {64 // split} columns" in \
            plan_for(prog).explain()
        got_all = prog.run(**{f"in{i}": x for i, x in enumerate(arrays)}, s0=0)
        for got, want in zip(got_all, fn(np, *arrays)):
            assert_matches_numpy(got, want, rtol=1e-2 if dtype is F16 else None)


def test_epilogue_split_attributes_are_checked(fresh_plans):
    """Bad ``epilogue_split`` values are errors at the kernel's line: not 1, 2 or 4, slices
    under 16 columns, with split_k (the combine runs the epilogue), with relay=1, and in a
    kernel that reduces the product's rows (a row needs every column)."""
    arrays = [_array((64, 160), F16), _array((160, 48), F16)]
    text = _retile(_fused_text(lambda xp, a, b: a @ b, arrays), block_m=16, block_n=32,
                   block_k=16, split_k=1)
    for edit, why in (("epilogue_split=3", "epilogue_split=3 is not 1, 2 or 4"),
                      ("epilogue_split=4", "leaves slices of 8 columns"),
                      ("epilogue_split=2 relay=1", "with relay=1")):
        with pytest.raises(fj.IRVerifyError, match=why):
            fj.parse(text.replace("kind=gemm", f"kind=gemm {edit}"))
    with pytest.raises(fj.IRVerifyError, match="with split_k=2"):
        fj.parse(_retile(text, split_k=2).replace("kind=gemm", "kind=gemm epilogue_split=2"))
    rows = _fused_text(lambda xp, a, b: xp.sum(a @ b, axis=1), arrays)
    with pytest.raises(fj.IRVerifyError, match="reduces the product's rows"):
        fj.parse(_retile(rows, split_k=1).replace("kind=gemm", "kind=gemm epilogue_split=2"))


@pytest.mark.parametrize("k, split", [(53, 2), (53, 3), (53, 4), (64, 3), (37, 3), (21, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_split_k_runs_whole_steps_unmasked_and_the_partial_step_apart(
        interpret_backend, monkeypatch, k, split, dtype):
    """With ``gemm.PEEL_SPLIT_K``, a split-K program whose chunks K does not fill runs the
    chunks before the one holding K's end without a mask along K, that chunk's whole steps
    unmasked and its partial step masked; chunks past K's end add nothing (K = 53 in 3 chunks
    of 2 steps of 16: the third starts at 64; K = 64 in 3: a whole last step, an empty chunk;
    K = 21 in 2: one whole step, then one partial one). Values are NumPy's, also for a
    prologue whose zeros past K would not give 0 (``exp``). Off by default (untimed): every
    step is masked there."""
    from fusejit.codegen import gemm
    a, b = _array((37, k), dtype) - 0.5, _array((k, 21), dtype) - 0.5
    tiles = {"block_m": 16, "block_n": 16, "block_k": 16, "split_k": split}
    product = lambda xp, a, b: a @ b  # noqa: E731
    (kernel,) = kernel_sources(fj.parse(_retile(_fused_text(product, [a, b]), **tiles)))
    assert "for k_step in range(" in kernel.source and "mask_ka = k_a <" in kernel.source
    assert "no mask along K" not in kernel.source
    monkeypatch.setattr(gemm, "PEEL_SPLIT_K", True)
    (kernel,) = kernel_sources(fj.parse(_retile(_fused_text(product, [a, b]), **tiles)))
    whole = [line for line in kernel.source.splitlines() if "no mask along K" in line]
    assert whole, kernel.source
    masked = [line for line in kernel.source.splitlines() if "mask_ka = k_a <" in line]
    assert len(masked) == (1 if k % 16 else 0), kernel.source
    (out,) = _run(product, [a, b], interpret_backend, **tiles)
    _close_to_product(out, a, b, dtype)
    scaled = lambda xp, a, b: xp.exp(a) @ b  # noqa: E731
    (out,) = _run(scaled, [a, b], interpret_backend, **tiles)
    want = np.exp(a.astype(F64)) @ b.astype(F64)
    tol = 2e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(out.astype(F64), want, rtol=tol, atol=tol * np.abs(want).max())


def test_edge_tiles_load_clamped_rows_and_columns_without_masks(interpret_backend, monkeypatch):
    """Where M (N) does not fill the last tile, the K loop reads A's rows past M as row M - 1
    (B's columns past N as column N - 1) and masks only along K (``gemm.CLAMP_EDGE_LOADS``);
    what those rows and columns compute is never stored. Not where that would hide a
    contiguity that 16-byte loads need (a row-major B of 16-byte rows keeps its mask along N)
    nor where the kernel reduces the product's rows (the extra columns would join the max).
    Values are NumPy's within the product's bound, also with negative products (a zero past
    the edge would win a max), for one tile and split K alike. Off by default (untimed): the
    loads are masked along M and N there."""
    from fusejit.codegen import gemm
    a, b = _array((37, 53), F32) - 0.5, _array((53, 21), F32) - 0.5
    fn = lambda xp, a, b: a @ b  # noqa: E731
    (kernel,) = kernel_sources(fj.parse(_retile(_fused_text(fn, [a, b]), block_m=16, block_n=16,
                                                block_k=16, split_k=1)))
    assert "rows_a" not in kernel.source and "mask_a = mask_m" in kernel.source
    monkeypatch.setattr(gemm, "CLAMP_EDGE_LOADS", True)
    for split in (1, 3):
        (kernel,) = kernel_sources(fj.parse(_retile(_fused_text(fn, [a, b]), block_m=16,
                                                    block_n=16, block_k=16, split_k=split)))
        assert "rows_a = tl.minimum(rows_m, 36)" in kernel.source
        assert "cols_b = tl.minimum(cols_n, 20)" in kernel.source
        loads = [line for line in kernel.source.splitlines() if "tl.load(p_in" in line]
        assert loads and all("mask_m" not in line and "mask_n" not in line and "mask_a" not in
                             line and "mask_b" not in line for line in loads), loads
        (out,) = _run(fn, [a, b], interpret_backend, block_m=16, block_n=16, block_k=16,
                      split_k=split)
        _close_to_product(out, a, b, "float32")
    # a row-major B of 16-byte rows (N = 24) keeps its mask along N; A is clamped
    b24 = _array((53, 24), F32)
    (kernel,) = kernel_sources(fj.parse(_retile(_fused_text(fn, [a, b24]), block_m=16,
                                                block_n=16, block_k=16, split_k=1)))
    assert "rows_a = " in kernel.source and "cols_b = " not in kernel.source
    # a row reduction of the product keeps B's columns masked
    row_max = lambda xp, a, b: (a @ b).max(axis=-1)  # noqa: E731
    (kernel,) = kernel_sources(fj.parse(_fused_text(row_max, [a, b])))
    assert "cols_b = " not in kernel.source
    (out,) = _run(row_max, [a, b], interpret_backend)
    np.testing.assert_allclose(out, (a.astype(F64) @ b).max(axis=-1), rtol=1e-5, atol=1e-5)
