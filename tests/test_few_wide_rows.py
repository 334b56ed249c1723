"""A reduction over trailing axes keeps its broadcast back apart when its rows are too few
to fill the GPU one program each and too wide for a cooperative row kernel
(``fuse.rules.rule_broadcast_back_fills_gpu``): ``x / x.sum()`` of a large vector, softmax
over 8 rows of 2**20. Fused, such a region ran one program per row, streaming the whole array
twice through a handful of SMs; apart, the reduction splits across the GPU and the broadcast
is a pointwise kernel.

Checked: which plans split and which stay one kernel (the cooperative capacity, float64's
half of it, enough rows; a reduction of a value computed from another, which no cooperative
kernel runs), the boundary's reason in ``plan.explain()``, and results against
NumPy on ``interpret`` with the capacity made small (float32 within 1e-5 relative to the
largest value: the split adds partials in another order than NumPy's pairwise sum).
"""

from __future__ import annotations

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import heuristics
from fusejit.fuse import cost

rng = np.random.default_rng(2213)

# (every test plans under thresholds or settings of its own: conftest's fresh_plans)
pytestmark = pytest.mark.usefixtures("fresh_plans")


def _share(xp, x):
    return x / x.sum()


def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(xp, x):
    d = x - x.mean(axis=-1, keepdims=True)
    return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-5)


def _center_all(xp, x):
    return x - x.mean()


def _kinds(fn, shape, dtype=np.float32):
    with fj.using_backend("numpy"):
        plan = fj.plan(fn(fj, fj.asarray(np.zeros(shape, dtype))))
    return [k.kind for k in plan.program.kernels], plan.explain()


@pytest.mark.parametrize("fn, shape, dtype, kinds", [
    (_share, (1 << 20,), np.float32, ["split_reduction", "pointwise"]),
    (_share, (1 << 19,), np.float32, ["inner_reduction"]),  # 64 cooperative chunks of 8192
    (_share, (1 << 19,), np.float64, ["split_reduction", "pointwise"]),  # (chunks of 4096)
    (_share, (1 << 15,), np.float32, ["inner_reduction"]),  # too short to split at all
    (_softmax, (8, 1 << 20), np.float32, ["split_reduction", "pointwise"]),
    (_softmax, (1024, 1 << 20), np.float16, ["inner_reduction"]),  # rows fill the GPU
    (_center_all, (1024, 1024), np.float32, ["split_reduction", "pointwise"]),
    (_layer_norm, (4, 1 << 21), np.float32, ["split_reduction", "pointwise"]),
    # a reduction of a value computed from another (mean absolute deviation): never one
    # program per row where rows are few, whether the first stage is cooperative or split
    (lambda xp, x: xp.abs(x - x.mean()).sum(), (1 << 22,), np.float32,
     ["split_reduction", "split_reduction"]),
    (lambda xp, x: xp.abs(x - x.mean()).sum(), (300000,), np.float32,
     ["inner_reduction", "split_reduction"]),
    (lambda xp, x: xp.abs(x - x.mean(axis=1, keepdims=True)).sum(axis=1), (4096, 4096),
     np.float32, ["inner_reduction"]),  # (rows enough: one kernel, a program per row)
])
def test_which_regions_keep_the_broadcast_apart(fn, shape, dtype, kinds):
    got, text = _kinds(fn, shape, dtype)
    assert got == kinds, text
    assert ("not fused (broadcast_back_fills_gpu)" in text) == (len(kinds) > 1), text


def test_the_reason_names_rows_and_capacity():
    _, text = _kinds(_softmax, (8, 1 << 20))
    assert ("broadcasts a reduction back over 8 row(s) of 1048576 elements: too few rows to "
            "fill the GPU one program each, too wide for a cooperative row kernel (524288 "
            "elements at most)") in text


def test_without_cooperative_rows_every_wide_few_row_region_splits(monkeypatch):
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    assert _kinds(_share, (1 << 17,))[0] == ["split_reduction", "pointwise"]


@pytest.mark.parametrize("fn, shape", [
    (_share, (20000,)),
    (_softmax, (3, 5000)),
    (_layer_norm, (2, 3001)),
    (_center_all, (37, 300)),
    (lambda xp, x: x * (x.max(axis=(1, 2), keepdims=True) - x), (2, 50, 90)),
    (lambda xp, x: xp.abs(x - x.mean()).sum(), (7, 700)),
    (lambda xp, x: (x / x.sum(axis=1, keepdims=True)).max(axis=1), (3, 3000)),
])
def test_split_regions_compute_what_numpy_does(monkeypatch, fn, shape):
    monkeypatch.setattr(heuristics, "coop_row_capacity", lambda itemsize, target="cuda": 256)
    monkeypatch.setattr(cost, "SPLIT_MIN_REDUCE", 1024)
    x = rng.standard_normal(shape).astype(np.float32)
    with fj.using_backend("interpret"):
        t = fn(fj, fj.asarray(x))
        text = fj.plan(t).explain()
        assert "broadcast_back_fills_gpu" in text, text
        got = np.asarray(t.realize().numpy())
    want = fn(np, x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
