"""One-pass statistics: ``var``/``std`` and user-written ``mean((x - mean(x))**2)`` become one
``m2`` reduction (sum of squared deviations), a sibling of the mean's ``sum``."""

from __future__ import annotations

import numpy as np
import pytest

import fusejit as fj
from fusejit.errors import FusejitError
from fusejit.testing import assert_matches_numpy


def batch_norm(xp, x, axis=0):
    m = x.mean(axis=axis, keepdims=True)
    c = x - m
    v = (c * c).mean(axis=axis, keepdims=True)
    return c / xp.sqrt(v + 1e-5)


def test_centered_square_sum_is_recorded_as_m2():
    x = fj.asarray(np.ones((8, 4), np.float32))
    text = fj.dump(batch_norm(fj, x))
    assert text.count(" m2 ") == 1 and text.count(" sum ") == 1, text
    # square(x - mean) too, and var itself
    assert " m2 " in fj.dump(fj.square(x - x.mean(axis=1, keepdims=True)).sum(axis=1))
    assert " m2 " in fj.dump(fj.var(x, axis=0))


def test_other_squares_are_not_rewritten():
    x = fj.asarray(np.ones((8, 4), np.float32))
    y = fj.asarray(np.ones((8, 4), np.float32))
    for expr in ((x - y.mean(axis=0, keepdims=True)) ** 2,       # another tensor's mean
                 (x - x.mean(axis=1, keepdims=True)) * (x - x.mean(axis=1, keepdims=True)) * 2,
                 (x - x.sum(axis=0, keepdims=True)) * (x - x.sum(axis=0, keepdims=True))):
        assert " m2 " not in fj.dump(expr.sum(axis=0)), fj.dump(expr.sum(axis=0))


@pytest.mark.parametrize("shape,axis", [((4096, 64), 0), ((64, 4096), 1), ((8, 300, 40), 1),
                                        ((100000,), 0)])
def test_statistics_in_one_region(shape, axis):
    x = fj.asarray(np.ones(shape, np.float32))
    assert len(fj.plan(fj.var(x, axis=axis)).program.kernels) == 1
    # batch norm: the statistics region (sum and m2 of x), then the normalize; over the last
    # axis (layer norm's shape) reduce-then-broadcast is one kernel
    inner = axis == len(shape) - 1
    assert len(fj.plan(batch_norm(fj, x, axis)).program.kernels) == (1 if inner else 2)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("shape,axis", [((257, 33), 0), ((33, 257), 1), ((5, 70000), 1),
                                        ((70000, 3), 0), ((300000,), None), ((3, 200, 40), (0, 2)),
                                        ((0, 5), 0), ((4, 0), 1), ((6, 5), ())])
def test_var_matches_numpy(backend, dtype, shape, axis):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 2 + 100).astype(dtype)
    # float16: NumPy rounds each deviation and partial sum to float16 (off by 40% here, where
    # values near 100 have an ulp of 0.06), and float32 over 70000 rows is 1.4e-5 off; fusejit
    # keeps the statistics in float32 (as NumPy's float16 mean does) and adds in a tree, so
    # its results are compared with the float64 statistics of the data
    ref = x.astype(np.float64) if dtype != "float64" else x
    with np.errstate(all="ignore"):
        expected = np.asarray(ref.var(axis=axis)).astype(dtype)
        expected_std = np.asarray(ref.std(axis=axis, ddof=1)).astype(dtype)
    assert_matches_numpy(fj.var(fj.asarray(x), axis=axis), expected)
    assert_matches_numpy(fj.std(fj.asarray(x), axis=axis, ddof=1), expected_std)


@pytest.mark.parametrize("shape,axis", [((20000, 64), 0), ((64, 20000), 1), ((200000,), None)])
def test_var_float32_error_against_float64(backend, shape, axis):
    """Welford lanes and Chan's combine: at least as accurate as NumPy's float32 var, measured
    against a float64 reference, on data whose mean (1000) dwarfs its spread (1)."""
    x = (np.random.default_rng(8).standard_normal(shape) + 1000).astype(np.float32)
    ref = x.astype(np.float64).var(axis=axis)
    ours = np.abs(fj.var(fj.asarray(x), axis=axis).numpy() - ref) / ref
    numpys = np.abs(x.var(axis=axis) - ref) / ref
    assert ours.max() <= max(2 * numpys.max(), 1e-6), (ours.max(), numpys.max())


def test_batch_norm_matches_numpy(backend):
    x = np.random.default_rng(9).standard_normal((300, 70)).astype(np.float32) * 3 + 5
    assert_matches_numpy(batch_norm(fj, fj.asarray(x)), batch_norm(np, x))


def test_m2_in_ir_text():
    text = """# fusejit ir v1
func @main(%x: f32[4,3]) -> f32[3] {
  %s = m2 %x axes=[0] : f32[3]
  return %s
}
"""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    prog = fj.parse(text)
    (out,) = prog.run(x=x)
    np.testing.assert_allclose(out, ((x - x.mean(0)) ** 2).sum(0))
    with pytest.raises(FusejitError, match="m2"):
        fj.parse(text.replace("f32", "i32"))


# -- sumexp: softmax's denominator online -----------------------------------------------------

def test_softmax_denominator_is_recorded_as_sumexp():
    x = fj.asarray(np.ones((8, 4), np.float32))
    assert " sumexp " in fj.dump(fj.softmax(x, axis=1))
    assert " sumexp " in fj.dump(fj.log_softmax(x, axis=0))
    # another tensor's max, or a max over other axes, is not softmax's pattern
    y = fj.asarray(np.ones((8, 4), np.float32))
    assert " sumexp " not in fj.dump(fj.exp(x - y.max(axis=1, keepdims=True)).sum(axis=1))
    assert " sumexp " not in fj.dump(fj.exp(x - x.max(axis=0, keepdims=True)).sum(axis=1))


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,axis", [((3, 70000), 1), ((70000, 3), 0), ((200000,), 0),
                                        ((40, 33), 0), ((40, 33), 1), ((3, 500, 7), 1)])
def test_softmax_with_infinities_and_nan(backend, fn, dtype, shape, axis):
    """Rows with -inf entries, all -inf (NaN, as NumPy's composite), +inf (NaN) and NaN, through
    the persistent, looped (online) and split paths."""
    from fusejit.testing import numpy_reference
    x = np.random.default_rng(10).standard_normal(shape).astype(dtype) * 3
    flat = np.moveaxis(x, axis, -1).reshape(-1, shape[axis])  # a copy: rows along ``axis``
    flat[0, ::3] = -np.inf
    if flat.shape[0] > 3:
        flat[1, :] = -np.inf
        flat[2, 4] = np.inf
        flat[3, 1] = np.nan
    x = np.moveaxis(flat.reshape(np.moveaxis(x, axis, -1).shape), -1, axis).copy()
    # against the float64 composite: NumPy's own float32 sum of 70000 terms along axis 0 is off
    # by ~1e-5 relative, fusejit's blocked sums are closer to the float64 value
    with np.errstate(all="ignore"):
        expected = numpy_reference(fn)(x.astype(np.float64), axis=axis).astype(dtype)
    assert_matches_numpy(getattr(fj, fn)(fj.asarray(x), axis=axis), expected)


@pytest.mark.parametrize("shape", [(4, 100000), (64, 4096)])
def test_softmax_statistics_in_one_stage(shape, monkeypatch):
    """max and sumexp of the row are one stage: a looped row is read twice (statistics, then
    the output), not three times; a cooperative row's programs store one (max, sum) partial
    per chunk, the max being the sumexp's."""
    import fusejit.codegen.heuristics as heuristics
    from fusejit.codegen import emit_kernel
    x = fj.asarray(np.ones(shape, np.float32))
    (k,) = fj.plan(fj.softmax(x, axis=1)).program.kernels
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    source = emit_kernel(k, None, "cuda").source
    loops = source.count("for k in range") + source.count("for k_up in range")  # (backwards)
    assert loops == (2 if shape[1] > 16384 else 0), source
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
    source = emit_kernel(k, None, "cuda").source
    assert ("_finish(" in source) == (shape[1] > 16384)
    assert source.count("tl.store(part_") == (2 if shape[1] > 16384 else 0), source


@pytest.fixture
def looped_rows(monkeypatch, fresh_plans):
    """The interpreter with GPU-sized rows: rows over 4096 run the looped (online) paths."""
    import fusejit.codegen.heuristics as heuristics
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 4096)
    with fj.using_backend("interpret"):
        yield


@pytest.mark.parametrize("shape,axis", [((16, 20000), 1), ((20000, 16), 0)])
def test_looped_var_is_accurate_when_the_mean_dwarfs_the_spread(looped_rows, shape, axis):
    """Welford's running mean is rounded at the data's magnitude; accumulating x - (the row's
    first element) keeps float32 m2 within NumPy's own error of the float64 variance (it was
    1.4e-6 against NumPy's 1.2e-7 before the shift, on the H200 and in emulation)."""
    x = (np.random.default_rng(8).standard_normal(shape) + 1000).astype(np.float32)
    ref = x.astype(np.float64).var(axis=axis)
    ours = np.abs(fj.var(fj.asarray(x), axis=axis).numpy() - ref) / ref
    numpys = np.abs(x.var(axis=axis) - ref) / ref
    assert ours.max() <= max(2 * numpys.max(), 5e-7), (ours.max(), numpys.max())
    xs = fj.softmax(fj.asarray(x), axis=axis).numpy()
    from fusejit.testing import numpy_reference
    np.testing.assert_allclose(xs, numpy_reference("softmax")(x.astype(np.float64), axis=axis),
                               rtol=1e-5, atol=1e-7)


def test_means_of_one_shape_over_other_axes_and_dtypes():
    # mean memoizes what it records per (dtype, shape, axis, keepdims, dtype argument): each
    # of these is its own entry, in any order
    arrays = [np.arange(24, dtype=np.float16).reshape(2, 3, 4) / 7,
              np.arange(18, dtype=np.float16).reshape(2, 3, 3) / 5]
    cases = [dict(axis=None), dict(axis=1), dict(axis=-2), dict(axis=(0, 2)), dict(axis=[2, 0]),
             dict(axis=1, keepdims=True), dict(axis=1, dtype=np.float64), dict(axis=1, dtype="f4")]
    for _ in range(2):
        for x in arrays:
            for kw in cases:
                numpy_kw = {k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()}
                got, want = fj.mean(fj.asarray(x), **kw).numpy(), np.mean(x, **numpy_kw)
                assert got.dtype == want.dtype and got.shape == want.shape, kw
                # float16 results within an ulp; float32 and float64 at their own tolerance
                assert_matches_numpy(got, want, rtol=1e-3 if want.dtype == np.float16 else None)
    with pytest.raises(fj.AxisError):
        fj.mean(fj.asarray(arrays[0]), axis=3)
