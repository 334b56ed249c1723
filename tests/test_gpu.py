"""GPU tests: the ``cuda`` backend against NumPy (marker ``gpu``; skipped without a GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from fusejit.runtime import gpu_available

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]

import fusejit as fj  # noqa: E402
from fusejit.testing import assert_matches_numpy  # noqa: E402

from ._canonical import (  # noqa: E402
    CANONICAL,
    DTYPES,
    SPECIAL_UNARY,
    SPLIT,
    check_float_divmod_bit_for_bit,
    check_float_power_special_values,
    check_unary_special_values,
    dtype_inputs,
    dtype_program,
)


@pytest.fixture(autouse=True)
def _cuda():
    with fj.using_backend("cuda"):
        yield


def _check(fn, arrays, device_inputs=None, tol=None):
    import cupy as cp
    with np.errstate(all="ignore"):
        expected = fn(np, *arrays)
    ins = device_inputs if device_inputs is not None else arrays
    got = fn(fj, *[fj.asarray(a) for a in ins])
    if not isinstance(expected, tuple):
        expected, got = (expected,), (got,)
    fj.realize(*got)
    cp.cuda.get_current_stream().synchronize()
    for g, e in zip(got, expected):
        kw = {"rtol": tol, "atol": tol} if tol and np.asarray(e).dtype == np.float32 else {}
        assert_matches_numpy(g.numpy(), np.asarray(e), **kw)


@pytest.mark.parametrize("name", sorted(CANONICAL))
@pytest.mark.parametrize("n", [6, 256])
def test_canonical_cuda(name, n):
    fn, make = CANONICAL[name]
    # sums of ~1000 float32 terms: NumPy adds non-contiguous axes sequentially in float32, so
    # its own rounding error (~1e-5 absolute) exceeds the default tolerance at n=256
    _check(fn, make(n), tol=1e-4 if n > 64 else None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_cuda(dtype):
    _check(dtype_program, dtype_inputs(dtype, 64))


def test_long_rows_looped():
    fn, _ = CANONICAL["softmax"]
    _check(fn, [np.random.default_rng(0).standard_normal((8, 70000)).astype(np.float32)])
    fn, _ = CANONICAL["layernorm"]
    x = np.random.default_rng(1).standard_normal((4, 40001)).astype(np.float32)
    _check(fn, [x, np.ones(40001, np.float32), np.zeros(40001, np.float32)])


def test_noncontiguous_offset_misaligned_views():
    import cupy as cp
    host = np.random.default_rng(0).standard_normal((65, 130)).astype(np.float32)
    dev = cp.asarray(host)
    views = [(host.T, dev.T), (host[1:, 3::2], dev[1:, 3::2]), (host[::-1, ::-3], dev[::-1, ::-3]),
             (host[:, 1:], dev[:, 1:])]  # the last one starts 4 bytes past alignment
    for h, d in views:
        _check(lambda xp, a: (a * 2 + 1, a.sum(axis=1), a.max(axis=0)), [h], [d])
    flat = cp.asarray(host.ravel())[1:1 + 64 * 128].reshape(64, 128)  # misaligned base
    _check(lambda xp, a: xp.exp(a) + a, [cp.asnumpy(flat)], [flat])


def test_int64_indexing_more_than_2_31_elements():
    import cupy as cp
    n = 2**31 + 16
    x = cp.zeros(n, dtype=cp.int8)
    x[-5:] = 7
    y = (fj.asarray(x) + np.int8(1)).realize()
    out = y._node.buffer if hasattr(y._node, "buffer") else None
    arr = out if out is not None else cp.asarray(y.numpy())
    assert int(arr[:16].sum()) == 16
    assert int(arr[-5:].astype(cp.int64).sum()) == 40
    assert int(arr.astype(cp.int64).sum()) == n + 7 * 5
    del x, arr, y


#: (compare with NumPy in float64, rtol, atol) per split case at 2**26 elements: NumPy
#: sums columns and multiplies sequentially in float32, less accurately than the split
#: kernels.
_SPLIT_TOL = {"column_sums": (True, 1e-5, 1e-2), "prod_exact": (False, 0.0, 0.0),
              "full_float16": (False, 1e-2, 1e-2), "full_f32": (False, 1e-5, 1e-2),
              "full_nan": (False, 1e-5, 1e-2), "norm_plus_one": (False, 1e-5, 1e-5),
              "var": (False, 1e-4, 1e-5)}


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_split_reductions_2_26(name):
    """Split reductions (one launch: partials, combined by the last program of each row
    block) over 2**26 elements against NumPy."""
    import cupy as cp
    fn, make = SPLIT[name]
    arrays = make(1 << 26)
    ref64, rtol, atol = _SPLIT_TOL.get(name, (False, None, None))
    with np.errstate(all="ignore"):
        ref = [a.astype(np.float64) if ref64 and a.dtype == np.float32 else a for a in arrays]
        expected = fn(np, *ref)
    got = fn(fj, *[fj.asarray(cp.asarray(a)) for a in arrays])
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    kinds = [launch.kind for launch in fj.plan(*got).kernels]
    assert "split_reduction" in kinds, kinds  # var too: one m2 reduction, split into partials
    fj.realize(*got)
    cp.cuda.get_current_stream().synchronize()
    for g, e in zip(got, expected):
        e = np.asarray(e)
        if ref64:
            e = e.astype(g.dtype)
        kw = {"rtol": rtol, "atol": atol} if rtol is not None and e.dtype.kind == "f" else {}
        assert_matches_numpy(g.numpy(), e, **kw)
    # again on the same counters: the last program of each row block zeroed them, else no
    # program of the second launch finishes a row block and its outputs stay unwritten
    again = fn(fj, *[fj.asarray(cp.asarray(a)) for a in arrays])
    again = again if isinstance(again, tuple) else (again,)
    fj.realize(*again)
    for g, a in zip(got, again):
        np.testing.assert_array_equal(a.numpy(), g.numpy())  # a fixed order: the same bits


@pytest.mark.parametrize("shape", [(8192, 8192), (4097, 8191), (3, 1000, 2049)])
def test_transposed_pointwise_2d_tiles(shape):
    """Transposed reads run in 2-D tiles (masked edges included) and match NumPy."""
    import cupy as cp
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    perm = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
    y = rng.standard_normal(x.transpose(perm).shape).astype(np.float32)
    _check(lambda xp, a, b: a.transpose(perm) + b, [x, y], [cp.asarray(x), cp.asarray(y)])
    _check(lambda xp, a: a.T * np.float32(2), [x], [cp.asarray(x)])


def test_torch_never_imported():
    _check(CANONICAL["softmax"][0], CANONICAL["softmax"][1](64))
    assert "torch" not in sys.modules


def test_disk_cache_reused_by_second_process(tmp_path):
    code = textwrap.dedent("""
        import time, numpy as np, fusejit as fj
        from fusejit.runtime import compile as c
        calls = []
        orig = c.triton_compile if hasattr(c, "triton_compile") else None
        import triton
        real = triton.compile
        def counting(*a, **k):
            calls.append(1)
            return real(*a, **k)
        triton.compile = counting
        with fj.using_backend("cuda"):
            x = fj.asarray(np.ones((128, 1000), np.float32))
            (fj.exp(x - x.max(axis=1, keepdims=True))).numpy()
        print("COMPILES", len(calls))
    """)
    env = dict(os.environ, FUSEJIT_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "COMPILES 0" in second.stdout, (first.stdout, second.stdout)
    assert "COMPILES 0" not in first.stdout


def test_cached_realize_does_no_codegen_or_compile(monkeypatch):
    # speed is measured by bench/bench_gpu.py; here: a repeated realize reuses everything
    import cupy as cp

    import fusejit.runtime.cuda_backend as cuda_backend
    import fusejit.runtime.kernel_cache as kernel_cache
    x = fj.asarray(cp.ones((64, 64), cp.float32))
    (x * 2 + 1).realize()
    calls = []
    monkeypatch.setattr(kernel_cache, "emitted_for", lambda *a, **k: calls.append("emit"))
    monkeypatch.setattr(cuda_backend, "compile_launch", lambda *a, **k: calls.append("compile"))
    y = (x * 2 + 1).realize()
    assert calls == []
    np.testing.assert_array_equal(y.numpy(), np.full((64, 64), 3, np.float32))


def test_numpy_input_is_copied_to_the_device_once():
    import cupy as cp
    host = np.arange(4096, dtype=np.float32)
    x = fj.asarray(host)
    first = (x * 2).realize()
    assert x._node.buffer is host                  # the leaf keeps its host data...
    moved, _ = x._node.copies[cp.cuda.runtime.getDevice()]  # (the copy, its specialization)
    assert isinstance(moved, cp.ndarray)           # ...and its copy on this device
    second = (x + 1).realize()
    assert x._node.copies[cp.cuda.runtime.getDevice()][0] is moved  # no second upload
    np.testing.assert_array_equal(first.numpy(), host * 2)
    np.testing.assert_array_equal(second.numpy(), host + 1)


def test_results_are_cupy_arrays_and_program_run_returns_cupy():
    import cupy as cp
    x = cp.linspace(-3, 3, 1 << 16, dtype=cp.float32).reshape(256, 256)
    y = fj.softmax(fj.asarray(x, name="x")).realize()
    assert isinstance(y._node.buffer, cp.ndarray)
    program = fj.parse(fj.dump(fj.softmax(fj.asarray(x, name="x"))))
    (out,) = program.run(x=x)
    assert isinstance(out, cp.ndarray)
    ref = np.exp(cp.asnumpy(x) - cp.asnumpy(x).max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(cp.asnumpy(out), ref, rtol=1e-5, atol=1e-7)  # f32: a few ulps


def test_random_programs_cuda():
    # differential: random programs (broadcasting, views, reductions, every dtype, NaN/inf,
    # empty and 0-d) on the GPU against NumPy; odd sides up to 37 exercise the masked edges.
    # Each example compiles its own kernels, so the count is kept modest.
    from hypothesis import HealthCheck, given, settings

    from fusejit.testing import check_program, programs

    @settings(max_examples=60, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(programs(max_steps=8, max_side=37, max_outputs=3))
    def check(recipe):
        check_program(recipe, backend="cuda")

    check()


def test_signed_zeros_and_special_values_cuda():
    # libdevice math and the emitter's own lowerings keep NumPy's infinities, NaNs and signed
    # zeros (negation is x * -1.0: Triton lowers -x as 0 - x)
    import cupy as cp
    x = np.array([np.inf, -np.inf, -0.0, 0.0, 1e-30, -2.5, 0.5, np.nan, 700.0, -700.0])
    for name in ("negative", "sinh", "tanh", "arcsinh", "arctan", "expm1", "log1p", "sqrt"):
        with np.errstate(all="ignore"):
            expected = getattr(np, name)(x)
        got = getattr(fj, name)(fj.asarray(cp.asarray(x))).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=0, err_msg=name)
        finite = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(expected[finite]),
                                      err_msg=name)


def test_float_floor_divide_and_remainder_bit_for_bit_cuda():
    import cupy as cp
    check_float_divmod_bit_for_bit(cp.asarray)


def test_float_power_special_values_cuda():
    import cupy as cp
    check_float_power_special_values(cp.asarray)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", SPECIAL_UNARY)
def test_unary_special_values_cuda(name, dtype):
    # every float function on the GPU: NumPy's infinities, NaNs and signed zeros in every float
    # dtype (rsqrt(-0.0) in float64 was +inf here)
    import cupy as cp
    check_unary_special_values(cp.asarray, name, dtype)


def test_float16_tanh_within_one_ulp_of_numpy_everywhere():
    # float16 tanh is the hardware's tanh.approx.f32 rounded to float16: every finite float16
    # input within one float16 ulp of NumPy's (float32 tanh rounded), specials exactly
    import cupy as cp
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    got = fj.tanh(fj.asarray(cp.asarray(x))).numpy()
    expected = np.tanh(x)
    ulps = np.abs(got.view(np.int16).astype(np.int32) - expected.view(np.int16).astype(np.int32))
    same_sign = np.signbit(got) == np.signbit(expected)
    assert same_sign.all() and ulps.max() <= 1, (x[ulps > 1][:8], got[ulps > 1][:8])


def test_float32_exp_is_libdevices_expf_bit_for_bit_on_every_input(monkeypatch):
    # float32 exp on cuda is libdevice's __nv_expf written out as inline PTX (lowering.py,
    # EXP_F32_HELPER, for compile time): on every one of the 2**32 float32 bit patterns it
    # gives the bits of the libdevice call (EXP_F32_AS_PTX off), NaN for NaN
    import cupy as cp

    import fusejit.fuse as fuse
    import fusejit.runtime as runtime
    import fusejit.runtime.kernel_cache as kernel_cache
    from fusejit.codegen import lowering

    def exp_of(x, as_ptx):  # (nothing planned or emitted under the other setting is reused)
        monkeypatch.setattr(lowering, "EXP_F32_AS_PTX", as_ptx)
        monkeypatch.setattr(runtime, "_plans", {})
        monkeypatch.setattr(runtime, "_backends", {})
        monkeypatch.setattr(kernel_cache, "_emit_cache", {})
        fuse.clear_cache()
        return fj.exp(fj.asarray(x)).realize().cupy()

    from fusejit.codegen.triton_emitter import kernel_sources
    program = fj.plan(fj.exp(fj.asarray(np.zeros(8, np.float32)))).program
    for as_ptx, call in ((True, "_exp_f32("), (False, "libdevice.exp(")):
        monkeypatch.setattr(lowering, "EXP_F32_AS_PTX", as_ptx)
        assert call in kernel_sources(program, "cuda")[0].source
    chunk = 1 << 28
    for start in range(0, 1 << 32, chunk):
        x = cp.arange(start, start + chunk, dtype=cp.uint64).astype(cp.uint32).view(cp.float32)
        got, want = exp_of(x, True), exp_of(x, False)
        same = (got.view(cp.uint32) == want.view(cp.uint32)) | (cp.isnan(got) & cp.isnan(want))
        bad = cp.flatnonzero(~same)
        assert bad.size == 0, (start, x[bad[:5]].get(), got[bad[:5]].get(), want[bad[:5]].get())
    fuse.clear_cache()


def test_float16_add_sub_mul_bit_for_bit():
    # float16 + - * are native float16 instructions on the GPU: correctly rounded, so NumPy's
    # float16 results exactly, subnormals and signed zeros included
    import cupy as cp
    rng = np.random.default_rng(16)
    bits = rng.integers(0, 1 << 16, size=(3, 1 << 18), dtype=np.uint16)
    a, b, c = (v.view(np.float16) for v in bits)
    fa, fb, fc = (fj.asarray(cp.asarray(v)) for v in (a, b, c))
    with np.errstate(all="ignore"):
        for got, want in ((fa * fb, a * b), (fa + fb, a + b), (fa - fc, a - c),
                          (fa * fb + fc, a * b + c), ((fa - fb) * fc, (a - b) * c)):
            got = got.numpy()
            same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
            assert same.all(), (got[~same][:5], want[~same][:5])
