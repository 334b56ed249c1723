"""An outer reduction over at most ``cost.OUTER_BROADCAST_MAX`` (256) elements of at most 4
bytes fuses with its broadcast back (softmax over a leading axis, a normalize over leading or
middle axes: one kernel, the reduced extent in one tile), on by default since the H200 timed it
1.3-1.6x faster (``bench/exp_s7c.py``); ``FUSEJIT_OUTER_BROADCAST=0`` keeps two kernels
(``rules.rule_broadcast_back_inner_only``), as do float64 and longer extents.

Values on the ``numpy`` and ``interpret`` backends against NumPy in float64 (relative and
absolute 1e-5 for float32 inputs: a softmax's and a standardization's float32 roundings), and
the fused kernels compile for sm_90.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.runtime import forget_plans

rng = np.random.default_rng(31)


def _softmax(xp, x, axis):
    if xp is fj:
        return fj.softmax(x, axis=axis)
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _normalize(xp, x, axis):
    return (x - x.mean(axis=axis, keepdims=True)) / (x.std(axis=axis, keepdims=True) + 1e-3)


def _kernels(y):
    return fj.plan(y).program.kernels


def test_on_by_default_off_when_asked_and_for_float64(monkeypatch):
    monkeypatch.delenv("FUSEJIT_OUTER_BROADCAST", raising=False)
    fj.set_backend("numpy")
    forget_plans()
    y = _softmax(fj, fj.asarray(np.zeros((127, 301), np.float32)), 0)
    assert len(_kernels(y)) == 1
    y64 = _softmax(fj, fj.asarray(np.zeros((127, 301), np.float64)), 0)
    assert len(_kernels(y64)) == 2
    assert "not fused (broadcast_back_inner_only)" in fj.plan(y64).explain()
    monkeypatch.setenv("FUSEJIT_OUTER_BROADCAST", "0")
    forget_plans()
    y = _softmax(fj, fj.asarray(np.zeros((127, 301), np.float32)), 0)
    assert len(_kernels(y)) == 2
    assert "not fused (broadcast_back_inner_only)" in fj.plan(y).explain()
    forget_plans()


@pytest.mark.parametrize("shape, axis, kernels", [
    ((127, 302), 0, 1), ((256, 40), 0, 1), ((257, 40), 0, 2), ((16, 17, 33), (0, 1), 2),
    ((40, 6, 30), 1, 1), ((7, 5, 9), (0, 2), 1),
])
def test_short_outer_extents_fuse(shape, axis, kernels, monkeypatch):
    """At most 256 reduced elements: one kernel (257, or 16x17 = 272, stay two)."""
    monkeypatch.setenv("FUSEJIT_OUTER_BROADCAST", "1")
    fj.set_backend("numpy")
    y = _normalize(fj, fj.asarray(np.zeros(shape, np.float32)), axis)
    assert len(_kernels(y)) == kernels


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 24), min_size=2, max_size=3), st.data(),
       st.sampled_from(["softmax", "normalize"]), st.sampled_from(["numpy", "interpret"]))
def test_values_against_numpy(shape, data, which, backend):
    mp = pytest.MonkeyPatch()
    mp.setenv("FUSEJIT_OUTER_BROADCAST", "1")
    try:
        nd = len(shape)
        axes = tuple(sorted(data.draw(st.sets(st.integers(0, nd - 2), min_size=1))))
        axis = axes[0] if len(axes) == 1 else axes
        x = rng.standard_normal(shape).astype(np.float32)
        f = _softmax if which == "softmax" else _normalize
        fj.set_backend(backend)
        forget_plans()  # (a plan of this shape made without the flag would be reused)
        y = f(fj, fj.asarray(x), axis)
        if int(np.prod([shape[a] for a in axes])) <= 256:
            assert len(_kernels(y)) == 1  # (the fused path is the one checked)
        ref = f(np, x.astype(np.float64), axis)
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)
    finally:
        mp.undo()


def test_fused_kernels_compile_for_sm90(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    from fusejit.runtime.compile import compile_all
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEJIT_OUTER_BROADCAST", "1")
    fj.set_backend("numpy")
    for y in (_softmax(fj, fj.asarray(np.zeros((127, 74436), np.float16)), 0),
              _normalize(fj, fj.asarray(np.zeros((81, 25631), np.float32)), 0)):
        (kernel,) = _kernels(y)
        for c in compile_all(emit_kernel(kernel, None, "cuda"), 90, True):
            assert c.cubin[:4] == b"\x7fELF"


def test_an_unknown_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("FUSEJIT_OUTER_BROADCAST", "yes")
    fj.set_backend("numpy")
    with pytest.raises(fj.FusejitError, match="FUSEJIT_OUTER_BROADCAST='yes' is not one of"):
        fj.plan(_softmax(fj, fj.asarray(np.zeros((37, 53), np.float32)), 0))
