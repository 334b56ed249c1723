"""2-D tiled pointwise kernels for inputs read transposed (``x.T + y``).

A pointwise region whose input is contiguous along an output axis other than
the last one runs in ``[TILE, TILE]`` tiles over that axis and the last, so
that both the transposed read and the write coalesce. Everything else keeps
the flat 1-D kernel. Differential tests on the ``interpret`` backend.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.testing import assert_matches_numpy  # noqa: E402

F32 = np.float32


@pytest.fixture(autouse=True)
def _interpret(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    with fj.using_backend("interpret"):
        yield


def _source(fn, arrays):
    """Source of the one kernel of ``fn``, specialized to the strides of ``arrays``."""
    from fusejit.runtime.kernel_cache import element_strides
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    program = fj.plan(*(outs if isinstance(outs, tuple) else (outs,))).program
    (k,) = program.kernels
    by_name = {p.name: a for p, a in zip(program.inputs, arrays)}
    strides = [element_strides(np.asarray(by_name[a])) if a in by_name else None for a in k.args]
    strides = [s if s is not None else tuple(np.zeros(len(p.type.shape), int))
               for s, p in zip(strides, k.params)]
    return emit_kernel(k, strides, "cuda").source


def _check(fn, arrays):
    with np.errstate(all="ignore"):
        expected = fn(np, *arrays)
        got = fn(fj, *[fj.asarray(a) for a in arrays])
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    fj.realize(*got)
    for g, e in zip(got, expected):
        assert_matches_numpy(g.numpy(), np.asarray(e))


def _mat(*shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_transpose_add_is_tiled():
    src = _source(lambda xp, x, y: x.T + y, [_mat(96, 200), _mat(200, 96, seed=1)])
    assert "tl.arange(0, 64)[:, None]" in src and "tl.arange(0, 64)[None, :]" in src
    assert "off_v_in0 = i_n * 200 + i_m" in src   # read along the tile's first axis
    assert "offs" not in src


def test_contiguous_and_broadcast_stay_flat():
    src = _source(lambda xp, x, b: x * 2 + b, [_mat(64, 128), _mat(1, 128)])
    assert "offs = pid * 1024 + tl.arange(0, 1024)" in src and "i_m" not in src


@pytest.mark.parametrize("shape", [(64, 128), (100, 37), (129, 257), (8, 1000), (1000, 8)])
def test_transpose_add(shape):
    _check(lambda xp, x, y: x.T + y, [_mat(*shape), _mat(*shape[::-1], seed=1)])


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.bool_, np.uint8])
def test_transpose_copy_dtypes(dtype):
    a = _mat(70, 90) * 50
    a = a > 0 if dtype == np.bool_ else a.astype(dtype)
    _check(lambda xp, x: (x.T, (x.T == x.T)), [a])


def test_three_d_permutes_and_views():
    x = _mat(3, 40, 72)
    _check(lambda xp, a: xp.exp(a.transpose(0, 2, 1)) * F32(2), [x])
    _check(lambda xp, a: a.transpose(2, 1, 0) + F32(1), [x])
    _check(lambda xp, a: a.transpose(1, 0, 2)[:, ::-1] - a[0][:, None, :], [x])
    _check(lambda xp, a: (a.transpose(0, 2, 1)[:, 3:60:2, ::-2], a.sum(axis=1)), [x])


def test_transposed_with_bias_and_two_outputs():
    x, y, b = _mat(48, 80), _mat(80, 48, seed=1), _mat(48, seed=2)
    _check(lambda xp, x, y, b: (x.T * b + y, xp.maximum(x.T, F32(0))), [x, y, b])


def test_transposed_numpy_input_view():
    """A transposed NumPy view passed in: its strides make it a transposed read."""
    base = _mat(90, 60)
    src = _source(lambda xp, x: x + F32(1), [base.T])
    assert "i_m" in src
    _check(lambda xp, x: x + F32(1), [base.T])
    _check(lambda xp, x, y: x * y, [base.T, _mat(60, 90, seed=3)])
