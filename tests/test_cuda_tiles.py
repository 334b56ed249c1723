"""The ``cuda`` heuristics' tiles run on Triton's interpreter, against NumPy.

The interpreter normally gets its own tiles (the largest blocks, ``heuristics``); the GPU's
come from shape rules that only the GPU fuzz would exercise. Here the emitter is handed the
``cuda`` heuristic's choice on the ``interpret`` target, for shapes that meet the rules measured
with ``bench/exp_tiles.py`` and ``bench/exp_s5.py``: short rows (and rows not 16-byte
aligned), a short outer extent under many kept points held in one tile, Welford's halved step
over looped rows and its capped partials, float32 rows of 16K-32K held by 16 warps, and 2-D
tiles of transposed reads (a short transposed axis, unaligned transposed rows), and outer
reductions over a short inner kept run (``Domain.short_inner_kept``). Each case
first checks that its rule applies (the ``cuda`` tiling line of ``plan.explain()``), then
compares with NumPy (float64 accumulations: rtol 1e-5 for float32,
1e-12 for float64; max and min exact).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import heuristics
from fusejit.codegen.heuristics import SMS
from fusejit.runtime import forget_plans
from fusejit.testing import numpy_reference


@pytest.fixture
def cuda_tiles(monkeypatch: pytest.MonkeyPatch, interpret_backend: str) -> Iterator[None]:
    reduction, split = heuristics.reduction_candidates, heuristics.split_candidates
    tiles_2d = heuristics.tiles_2d_candidates
    monkeypatch.setattr(heuristics, "reduction_candidates",
                        lambda target, *a, **k: reduction("cuda", *a, **k)[:1])
    monkeypatch.setattr(heuristics, "tiles_2d_candidates",
                        lambda target, *a, **k: tiles_2d("cuda", *a, **k)[:1])
    monkeypatch.setattr(heuristics, "split_candidates",
                        lambda target, *a, **k: split("cuda", *a, **k)[:1])
    forget_plans()
    yield
    forget_plans()


def _named(name: str, **kwargs: Any) -> Callable[..., Any]:
    """fusejit's ``name`` on fusejit, the testing module's NumPy reference of it on NumPy."""
    def fn(xp: Any, x: Any) -> Any:
        return (numpy_reference(name) if xp is np else getattr(xp, name))(x, **kwargs)
    return fn


#: name -> (shape, dtype, program written against NumPy's names, the rule's words)
CASES: dict[str, tuple[tuple[int, ...], Any, Callable[..., Any], str]] = {
    "sum_axis0_short": ((109, 17000), np.float32, lambda xp, x: x.sum(axis=0), "in one tile"),
    "min_axis0_short_f64": ((77, 17000), np.float64, lambda xp, x: x.min(axis=0), "in one tile"),
    "var_axis0_short": ((120, 17000), np.float32, lambda xp, x: x.var(axis=0), "in one tile"),
    "softmax_axis0_short": ((96, 17000), np.float32, _named("softmax", axis=0),
                            "in one tile"),
    "var_axis0_extent200": ((200, 17000), np.float32, lambda xp, x: x.var(axis=0),
                            "in one tile"),
    "mean_rows141": ((300, 141), np.float32, lambda xp, x: x.mean(axis=1),
                     "warps for short rows not 16-byte aligned"),
    "log_softmax_rows257": ((200, 257), np.float32, _named("log_softmax", axis=-1),
                            "warps for short rows"),
    "layer_norm_rows999": ((40, 999), np.float32, _named("layer_norm", axis=-1),
                           "warps for short rows"),
    "var_rows30000": ((6, 30000), np.float32, lambda xp, x: x.var(axis=1),
                      "Welford: half the step"),
    "var_axis0_split": ((140000, 50), np.float32, lambda xp, x: x.var(axis=0), "chunks"),
    "logsumexp_few_wide_rows": ((6, 70000), np.float32, _named("logsumexp", axis=1),
                                "split in one launch"),
    "softmax_rows16500_held": ((4 * SMS, 16500), np.float32, _named("softmax", axis=-1),
                               "in registers, 16 warps"),
    "transposed_axis3_f64": ((5000, 3), np.float64, lambda xp, x: xp.sqrt(xp.abs(x.T) + 0.5),
                             "a short transposed axis"),
    "transposed_axis5_f32": ((3000, 5), np.float32, lambda xp, x: xp.exp(-x.T) * 2.0,
                             "a short transposed axis"),
    "transposed_rows769": ((300, 769), np.float32, lambda xp, x: xp.abs(x.T) + x.T * x.T,
                           "unaligned transposed rows"),
    # a short inner kept run (a middle axis reduced, channels-last images): one run across
    # the tile, padded to a power of two when it is not one
    "min_axis1_run3_f64": ((37, 3000, 3), np.float64, lambda xp, x: x.min(axis=1),
                           "inner kept run of 3 point(s) padded to 4"),
    "sum_nhwc_channels3": ((8, 40, 40, 3), np.float32, lambda xp, x: x.sum(axis=(0, 1, 2)),
                           "inner kept run of 3 point(s) padded to 4"),
    "var_axis1_run5": ((300, 400, 5), np.float32, lambda xp, x: x.var(axis=1),
                       "inner kept run of 5 point(s) padded to 8"),
    "softmax_axis1_run6": ((50, 300, 2, 3), np.float32, _named("softmax", axis=1),
                           "inner kept run of 6 point(s) padded to 8"),
    "sum_axis1_run4": ((600, 300, 4), np.float32, lambda xp, x: x.sum(axis=1),
                       "inner kept run of 4 point(s): a tile"),
    # a row and a column broadcast over the tile: each loaded under its own axis's mask
    "transposed_rows769_broadcasts": ((300, 769), np.float32,
                                      lambda xp, x: xp.abs(x.T) * x[:, 0] + x[0][:, None],
                                      "unaligned transposed rows"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_tiles_match_numpy(name: str, cuda_tiles: None) -> None:
    shape, dtype, fn, rule = CASES[name]
    x = np.random.default_rng(7).standard_normal(shape).astype(dtype) + 0.5
    out = fn(fj, fj.asarray(x))
    explained = fj.plan(out).explain()
    if rule == "chunks":  # at most one partial per SM (264 without the cap)
        chunks = re.search(r"row block\(s\) x (\d+) chunks", explained)
        assert chunks and 100 <= int(chunks.group(1)) <= SMS, explained
    else:
        assert rule in explained, explained
    got = out.numpy()
    want = fn(np, x.astype(np.float64))
    assert got.dtype == dtype and got.shape == want.shape
    if name.startswith("min"):
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5,
                                   atol=1e-6)
