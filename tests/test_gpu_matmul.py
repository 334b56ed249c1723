"""GPU tests of matrix products (marker ``gpu``; skipped without a GPU).

Float products are checked element by element against the exact product (float64 on the
device) within ``fusejit.testing``'s bound, ``K * u * (|a| @ |b|)`` plus the result's
rounding (``MATMUL_UNIT_ROUNDOFF``); with a fused epilogue (bias, relu) the relative
Frobenius error is checked instead; integer products exactly against NumPy.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from fusejit.runtime import gpu_available

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]

import fusejit as fj  # noqa: E402
from fusejit.codegen import heuristics  # noqa: E402
from fusejit.testing import MATMUL_UNIT_ROUNDOFF, assert_matches_numpy, recorded_inputs  # noqa: E402

F16, F32 = np.float16, np.float32


@pytest.fixture(autouse=True)
def _cuda():
    with fj.using_backend("cuda"):
        yield


def _cp():
    import cupy as cp
    return cp


def _device(shape, dtype, seed=0, scale=1.0):
    cp = _cp()
    rng = cp.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape, dtype=cp.float32) * scale).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-100 if dt.kind == "i" else 0, 100, shape).astype(dt)


def _check_product(got, a, b, precision="ieee"):
    """``got`` (CuPy) is ``a @ b`` within the bound of ``fusejit.testing.matmul_error_bound``."""
    cp = _cp()
    dtype = np.dtype(a.dtype)
    if dtype.kind != "f":
        assert_matches_numpy(cp.asnumpy(got), np.matmul(cp.asnumpy(a), cp.asnumpy(b)))
        return
    u_acc, u_out = MATMUL_UNIT_ROUNDOFF[(dtype.name, precision)]
    a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
    exact = a64 @ b64
    bound = a.shape[-1] * u_acc * (cp.abs(a64) @ cp.abs(b64)) + u_out * cp.abs(exact)
    err = cp.abs(got.astype(cp.float64) - exact)
    worst = float(cp.max(err - bound - np.finfo(dtype).tiny))
    assert got.dtype == dtype and got.shape == exact.shape
    assert worst <= 0, f"error over the bound by {worst}"


def _rel_error(got, ref):
    cp = _cp()
    d = got.astype(cp.float64) - ref
    return float(cp.linalg.norm(d) / cp.linalg.norm(ref))


@pytest.mark.parametrize("shape", [(224, 241, 9669, False), (301, 205, 1537, True),
                                   (500, 501, 503, False), (64, 1001, 250, True),
                                   (3, 70, 129, 1001, False)],
                         ids=lambda s: "x".join(map(str, s[:-1])) + ("-bt" if s[-1] else ""))
@pytest.mark.parametrize("mode", ["1", "always"])
def test_tf32_products_of_misaligned_rows_cuda(shape, mode, monkeypatch):
    """TF32 products whose float32 rows start on 4 bytes, with the alignment copies as the
    default makes them (224x241x9669: copied, split K) and forced on every operand: each
    element within ``matmul_error_bound``'s TF32 bound of the exact product."""
    from fusejit.runtime import forget_plans
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", mode)
    forget_plans()
    *lead, m, n, k, bt = shape
    a = _device((*lead, m, k), F32, 5)
    b = _device((*lead, n, k) if bt else (*lead, k, n), F32, 6)
    b_view = b.swapaxes(-1, -2) if bt else b
    fb = fj.swapaxes(fj.asarray(b), -1, -2) if bt else fj.asarray(b)
    y = fj.matmul(fj.asarray(a), fb, precision="tf32")
    copies = sum(1 for kernel in fj.plan(y).program.kernels if kernel.row_pitch)
    if mode == "always" or shape == (224, 241, 9669, False):
        assert copies == 2
    _check_product(y.realize()._node.buffer, a, b_view, "tf32")
    forget_plans()


@pytest.mark.parametrize("shape", [(2050, 3000, 2051), (5183, 1023, 15402), (3, 70, 129, 1001),
                                   (257, 300, 9), (2, 40, 33, 42)],
                         ids=lambda s: "x".join(map(str, s)))
def test_tf32_b_transposed_to_padded_rows_cuda(shape, monkeypatch):
    """TF32 products of a row-major B whose K is not a multiple of 4: B written K-major to rows
    padded to 16 bytes (``rule_tf32_k_major_b``; the two large ones by default, the others with
    the pass's cost set to nothing), then read through TMA or 16-byte loads: each element
    within ``matmul_error_bound``'s TF32 bound of the exact product."""
    from fusejit.fuse import cost
    from fusejit.runtime import forget_plans
    monkeypatch.delenv("FUSEJIT_GEMM_ALIGN", raising=False)
    if shape[-2] * shape[-3] < 1e6:
        monkeypatch.setattr(cost, "TRANSPOSE_BYTES_PER_S", 1e30)
        monkeypatch.setattr(cost, "EXTRA_LAUNCH_S", 0.0)
    forget_plans()
    *lead, m, n, k = shape
    a, b = _device((*lead, m, k), F32, 7), _device((*lead, k, n), F32, 8)
    y = fj.matmul(fj.asarray(a), fj.asarray(b), precision="tf32")
    passes = [kk for kk in fj.plan(y).program.kernels if kk.name.startswith("transpose_")]
    assert [kk.row_pitch for kk in passes] == [-(-k // 4) * 4]
    _check_product(y.realize()._node.buffer, a, b, "tf32")
    forget_plans()


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32",
                                   "int64", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(300, 190, 257), (1024, 1024, 1024), (1, 77, 300)])
def test_gemm_dtypes_cuda(dtype, shape):
    m, n, k = shape
    a, b = _device((m, k), dtype, 1), _device((k, n), dtype, 2)
    got = (fj.asarray(a) @ fj.asarray(b)).realize()
    _check_product(got._node.buffer, a, b)


@pytest.mark.parametrize("precision", ["ieee", "tf32", "tf32x3"])
def test_float32_precisions_cuda(precision):
    a, b = _device((2048, 2048), F32, 3), _device((2048, 1536), F32, 4)
    y = fj.matmul(fj.asarray(a), fj.asarray(b), precision=precision).realize()
    _check_product(y._node.buffer, a, b, precision)
    cp = _cp()
    err = _rel_error(y._node.buffer, a.astype(cp.float64) @ b.astype(cp.float64))
    assert err < {"ieee": 1e-5, "tf32": 3e-3, "tf32x3": 2e-5}[precision], err


@pytest.mark.parametrize("shape", [(512, 1024, 1024), (2000, 3001, 700), (100, 4096, 4096)])
def test_full_precision_products_of_a_k_major_b_cuda(shape):
    """``a @ bt.T`` in full precision, large enough that B is written row-major first
    (``rule_fma_n_major_b``; 3001 columns: rows not 16-byte aligned), within the bound."""
    m, n, k = shape
    a, bt = _device((m, k), F32, 5), _device((n, k), F32, 6)
    y = fj.asarray(a) @ fj.asarray(bt).T
    assert [kk.kind for kk in fj.plan(y).program.kernels] == ["pointwise", "gemm"]
    _check_product(y.realize()._node.buffer, a, bt.T)


@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (16384, 1024, 4096), (128, 4096, 4096)])
def test_bench_shapes_f16_relu_bias(shape):
    """The benchmark's float16 shapes with the fused epilogue: one launch (split-K: two)."""
    cp = _cp()
    m, n, k = shape
    a = _device((m, k), F16, 5, scale=k ** -0.5)
    b, bias = _device((k, n), F16, 6), _device((n,), F16, 7)
    y = fj.maximum(fj.asarray(a) @ fj.asarray(b) + fj.asarray(bias), 0)
    plan = fj.plan(y)
    assert len(plan.regions) == 1 and plan.regions[0].kind == "gemm", plan.explain()
    y.realize()
    ref = cp.maximum(a.astype(cp.float64) @ b.astype(cp.float64) + bias.astype(cp.float64), 0)
    assert _rel_error(y._node.buffer, ref) < 2e-3


def test_split_k_is_deterministic_cuda():
    cp = _cp()
    a, b = _device((64, 8192), F32, 8), _device((8192, 256), F32, 9)
    y = fj.asarray(a) @ fj.asarray(b) * 2 + 1
    (kernel,) = fj.plan(y).regions
    assert kernel.attrs["split_k"] > 1
    first = y.realize()._node.buffer
    again = (fj.asarray(a) @ fj.asarray(b) * 2 + 1).realize()._node.buffer
    assert bool(cp.all(first == again))
    ref = (a.astype(cp.float64) @ b.astype(cp.float64)) * 2 + 1
    assert _rel_error(first, ref) < 1e-6


@pytest.mark.parametrize("dtype", [F16, F32, "int32"])
def test_gram_matrix_of_long_vectors_cuda(dtype):
    """One output tile, K = 2**20: more K chunks than the unrolled combine takes (one
    program per SM), added in a loop in chunk order: deterministic and within float16's
    float32-accumulated error of the float64 product (integers exact)."""
    cp = _cp()
    a = _device((16, 1 << 20), F32, 12)
    # (float16: entries of 1/64, so that the diagonal, a sum of 2**20 squares, stays finite)
    a = (a * 8).astype(cp.int32) if dtype == "int32" else (a / 64).astype(dtype)
    y = fj.asarray(a) @ fj.asarray(a).T
    (kernel,) = fj.plan(y).regions
    assert kernel.attrs["split_k"] > heuristics.GEMM_MAX_SPLIT_K
    first = y.realize()._node.buffer
    again = (fj.asarray(a) @ fj.asarray(a).T).realize()._node.buffer
    assert bool(cp.all(first == again))
    if dtype == "int32":
        wide = a.astype(cp.int64)
        assert bool(cp.all(first == (wide @ wide.T).astype(cp.int32)))
    else:
        wide = a.astype(cp.float64)
        assert _rel_error(first, wide @ wide.T) < (2e-3 if dtype == F16 else 1e-5)


def test_operand_views_of_device_arrays():
    """Transposed, sliced, misaligned and broadcast operands are read in place."""
    cp = _cp()
    host = _device((515, 1030), F16, 10)
    b = _device((512, 300), F16, 11)
    for view in (host.T[:512, :300].T, host[1:301, 2:514], host[::-1, :512][:300],
                 cp.asarray(host.ravel())[1:1 + 300 * 512].reshape(300, 512)):
        got = (fj.asarray(view) @ fj.asarray(b)).realize()._node.buffer
        _check_product(got, cp.ascontiguousarray(view), b)
    a3 = _device((3, 1, 70, 96), F32, 12)
    b3 = _device((2, 96, 130), F32, 13)
    got = (fj.asarray(a3) @ fj.asarray(b3)).realize()._node.buffer
    ref = cp.matmul(a3.astype(cp.float64), b3.astype(cp.float64))
    assert got.shape == (3, 2, 70, 130) and _rel_error(got, ref) < 1e-6


def test_prologue_epilogue_and_row_reductions_cuda():
    cp = _cp()
    x, s = _device((1024, 768), F32, 14), _device((768,), F32, 15)
    w, bias = _device((768, 512), F16, 16, scale=768 ** -0.5), _device((512,), F16, 17)
    y = fj.maximum((fj.asarray(x) * fj.asarray(s)).astype(F16) @ fj.asarray(w)
                   + fj.asarray(bias), 0)
    assert len(fj.plan(y).regions) == 1
    ref = cp.maximum((x * s).astype(F16).astype(cp.float64) @ w.astype(cp.float64) + bias, 0)
    assert _rel_error(y.realize()._node.buffer, ref) < 2e-3
    a, b = _device((4096, 512), F32, 18), _device((512, 200), F32, 19, scale=0.05)
    z = fj.asarray(a) @ fj.asarray(b)
    outs = (fj.softmax(z, -1), z.sum(-1), z.max(-1))
    assert len(fj.plan(*outs).regions) == 1  # one GEMM region (split-K would add a launch)
    fj.realize(*outs)
    p = a.astype(cp.float64) @ b.astype(cp.float64)
    e = cp.exp(p - p.max(-1, keepdims=True))
    for got, ref in zip(outs, (e / e.sum(-1, keepdims=True), p.sum(-1), p.max(-1))):
        assert _rel_error(got._node.buffer, ref) < 1e-5


def test_two_layer_mlp_cuda():
    cp = _cp()
    x, w1, b1 = _device((2048, 1024), F16, 20), _device((1024, 4096), F16, 21, 1 / 32), \
        _device((4096,), F16, 22)
    w2, b2 = _device((4096, 1024), F16, 23, 1 / 64), _device((1024,), F16, 24)

    def gelu(xp, h):
        return 0.5 * h * (1 + xp.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    y = gelu(fj, fj.asarray(x) @ fj.asarray(w1) + fj.asarray(b1)) @ fj.asarray(w2) + fj.asarray(b2)
    assert len(fj.plan(y).regions) == 2
    h = gelu(cp, x.astype(cp.float64) @ w1.astype(cp.float64) + b1)
    ref = h @ w2.astype(cp.float64) + b2
    assert _rel_error(y.realize()._node.buffer, ref) < 5e-3


def test_edited_tiles_run_on_the_gpu():
    a, b = _device((300, 257), F16, 25), _device((257, 190), F16, 26)
    text = fj.dump(fj.asarray(a, name="a") @ fj.asarray(b, name="b"), fused=True)
    for tiles in ((16, 32, 16, 4, 2, 1), (64, 64, 32, 4, 3, 3), (256, 128, 64, 8, 3, 1)):
        edited = text
        for name, v in zip(("block_m", "block_n", "block_k", "num_warps", "num_stages",
                            "split_k"), tiles):
            edited = re.sub(rf"\b{name}=\d+", f"{name}={v}", edited)
        (out,) = fj.parse(edited).run(a, b)
        _check_product(out, a, b)


def test_matmul_never_imports_torch():
    assert "torch" not in sys.modules


@pytest.mark.parametrize("case", ["plain", "weight_transposed", "prologue", "split_k", "tf32"])
def test_tma_gemm_cuda(case):
    """``tma=1`` (opt-in): operand tiles through TMA descriptors, values as without."""
    cp = _cp()
    fns = {
        "plain": (lambda xp, a, b: a @ b, [((1024, 512), F16), ((512, 768), F16)]),
        "weight_transposed": (lambda xp, a, w: a @ w.T, [((1000, 512), F16), ((776, 512), F16)]),
        "prologue": (lambda xp, x, w: (x * 0.5).astype(F16) @ w, [((1024, 512), F32),
                                                                  ((512, 768), F16)]),
        "split_k": (lambda xp, a, b: a @ b, [((64, 8192), F16), ((8192, 256), F16)]),
        "tf32": (lambda xp, a, b: xp.matmul(a, b, precision="tf32") if xp is fj else a @ b,
                 [((1024, 512), F32), ((512, 768), F32)]),
    }
    fn, specs = fns[case]
    arrays = [_device(s, d, seed, scale=0.05) for seed, (s, d) in enumerate(specs)]
    recorded = fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)])
    text = fj.dump(recorded, fused=True)
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm tma=1"))
    # the program's inputs in order: the arrays and the scalar params' values (0.5)
    (out,) = prog.run(*recorded_inputs(recorded))
    ref = fn(cp, *[a.astype(cp.float64) if a.dtype != F32 or case != "prologue" else a
                   for a in arrays])
    assert _rel_error(out, ref.astype(cp.float64)) < (3e-3 if case == "tf32" else 2e-3)


@pytest.mark.parametrize("case", ["gelu", "ragged", "misaligned", "edited_programs"])
def test_persistent_gemm_cuda(case):
    """float16 GEMMs of at least two waves of tiles are persistent with TMA loads by default
    (``heuristics.GEMM_PERSISTENT``): a GELU epilogue, ragged M, N and K (TMA's boxes read
    zeros past the edges), an operand 2 bytes into its allocation (not TMA-readable: one
    program per tile instead) and an edited ``programs=100 tma=1``: values as NumPy's."""
    from fusejit.codegen import emit_kernel

    cp = _cp()
    m, n, k = (4000, 3000, 200) if case == "ragged" else (4096, 4096, 512)
    a = _device((m, k), F16, 30, scale=k ** -0.5)
    b, bias = _device((k, n), F16, 31), _device((n,), F16, 32)
    if case == "misaligned":
        a = cp.asarray(_device((m * k + 1,), F16, 30, scale=k ** -0.5))[1:].reshape(m, k)
    a64, b64 = a.astype(cp.float64), b.astype(cp.float64)
    pre = a64 @ b64 + bias.astype(cp.float64)

    def gelu(xp, h):
        return 0.5 * h * (1 + xp.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    fa, fb, fbias = fj.asarray(a, name="a"), fj.asarray(b, name="b"), fj.asarray(bias, name="bias")
    y = gelu(fj, fa @ fb + fbias) if case == "gelu" else fj.maximum(fa @ fb + fbias, 0)
    ref = gelu(cp, pre) if case == "gelu" else cp.maximum(pre, 0)
    (kernel,) = fj.plan(y).regions
    assert "flatten=True" in emit_kernel(kernel, None, "cuda").source
    if case == "edited_programs":
        text = fj.dump(y, fused=True).replace("kind=gemm", "kind=gemm programs=100 tma=1")
        (out,) = fj.parse(text).run(*recorded_inputs(y))
    else:
        out = y.realize()._node.buffer
    assert _rel_error(out, ref) < 2e-3


@pytest.mark.parametrize("case", ["bt_residual", "ragged_relu", "batched", "edited_tf32"])
def test_stream_k_gemm_cuda(case):
    """Stream-K GEMMs (edited to ``programs=132 stream_k=1``, off by default): float16 ``b.T``
    with a residual (430x13368x5000: 1.6 waves of 128x256 tiles) and ragged M, N and K with
    bias and ReLU (1.3 waves), both with ``tma=1``; a batch (3 x 1000x2000x3000, B batched
    too: pointer loads) and a float32 TF32 product: within the product's error bound, and the
    same bits on a second launch (partials added in program order; a counter left non-zero
    by the first launch would make the second finish its tiles early or never)."""
    from fusejit.codegen import emit_kernel

    cp = _cp()
    if case == "bt_residual":
        a, bt = _device((430, 5000), F16, 40, scale=0.02), _device((13368, 5000), F16, 41)
        r = _device((430, 13368), F16, 42)
        y = fj.asarray(a) @ fj.asarray(bt).T + fj.asarray(r)
        ref = a.astype(cp.float64) @ bt.T.astype(cp.float64) + r
    elif case == "batched":
        a, b = _device((3, 1000, 3000), F16, 43, scale=0.02), _device((3, 3000, 2000), F16, 44)
        y = fj.asarray(a) @ fj.asarray(b)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
    else:
        m, n, k = (2600, 2000, 1112) if case == "ragged_relu" else (1500, 2900, 2000)
        dtype = F16 if case == "ragged_relu" else F32
        a, b = _device((m, k), dtype, 45, scale=k ** -0.5), _device((k, n), dtype, 46)
        bias = _device((n,), dtype, 47)
        fa, fb = fj.asarray(a), fj.asarray(b)
        prod = fj.matmul(fa, fb, precision="tf32") if dtype == F32 else fa @ fb
        y = fj.maximum(prod + fj.asarray(bias), 0)
        ref = cp.maximum(a.astype(cp.float64) @ b.astype(cp.float64) + bias, 0)
    tma = " tma=1" if case in ("bt_residual", "ragged_relu") else ""
    text = fj.dump(y, fused=True).replace("kind=gemm", "kind=gemm programs=132 stream_k=1" + tma)
    prog = fj.parse(text)
    (kernel,) = [k for k in prog.kernels if k.kind == "gemm"]
    assert "stream-K" in emit_kernel(kernel, None, "cuda").source
    (out,) = prog.run(*recorded_inputs(y))
    (again,) = prog.run(*recorded_inputs(y))
    assert _rel_error(out, ref) < (3e-3 if case == "edited_tf32" else 2e-3)
    assert bool(cp.all(out == again))


@pytest.mark.parametrize("case", ["batched", "weight_broadcast", "transposed"])
def test_batched_tma_gemm_cuda(case):
    """Batched float16 products load their operands as 3-D TMA boxes by default (ragged M,
    N and K: a box past one matrix of the batch reads zeros, not the next one): within the
    product's error bound against float64."""
    from fusejit.codegen import emit_kernel

    cp = _cp()
    a = _device((8, 1000, 520), F16, 50, scale=520 ** -0.5)
    b = _device((520, 1000) if case == "weight_broadcast" else (8, 520, 1000), F16, 51)
    if case == "transposed":
        b = cp.ascontiguousarray(b.swapaxes(-1, -2)).swapaxes(-1, -2)  # [8, 1000, 520] read as .T
    y = fj.asarray(a) @ fj.asarray(b)
    (kernel,) = fj.plan(y).regions
    assert emit_kernel(kernel, None, "cuda").source.count("(TMA)") == 2
    _check_product(y.realize()._node.buffer, a, b)
