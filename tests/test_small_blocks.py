"""Random programs through the looped, split and multi-program kernel paths, on the CPU.

The interpret target normally uses blocks large enough that the small shapes of the
Hypothesis programs fit one persistent tile, which would leave the looped reductions,
the split reductions and masked multi-program edges to the GPU tests alone. Here the
thresholds shrink (rows longer than 4 elements loop, reductions of 8 or more elements
with few outputs split, pointwise blocks of 8), so the same random programs run through
those paths and are compared with NumPy (values, dtypes, shapes; tolerances of
``fusejit.testing``).
"""

from __future__ import annotations

import pytest

pytest.importorskip("triton")
hypothesis = pytest.importorskip("hypothesis")

import fusejit as fj  # noqa: E402
import fusejit.codegen.heuristics as heuristics  # noqa: E402
import fusejit.codegen.triton_emitter as emitter  # noqa: E402
from fusejit.fuse import cost  # noqa: E402
from fusejit.testing import check_program, programs  # noqa: E402


@pytest.fixture
def small_blocks(monkeypatch, fresh_plans):
    monkeypatch.setitem(emitter.PERSISTENT_LIMIT, "interpret", 4)
    monkeypatch.setitem(emitter.POINTWISE_BLOCK, "interpret", 8)
    monkeypatch.setattr(heuristics, "SPLIT_MIN_CHUNK", 2)
    monkeypatch.setattr(cost, "SPLIT_MIN_REDUCE", 8)
    monkeypatch.setattr(cost, "OUTER_SPLIT_MIN_ELEMENTS", 8)
    # (fresh_plans: nothing planned or emitted under the normal thresholds is reused)


def test_small_blocks_reach_the_looped_and_split_paths(small_blocks):
    import numpy as np
    x = np.arange(6 * 40, dtype=np.float32).reshape(6, 40) / 7
    plan = fj.plan(fj.asarray(x).sum())
    assert [k.kind for k in plan.kernels] == ["split_reduction"]
    with fj.using_backend("interpret"):
        np.testing.assert_allclose(fj.softmax(fj.asarray(x)).numpy(),
                                   np.exp(x - x.max(-1, keepdims=True))
                                   / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
                                   rtol=1e-5)
        np.testing.assert_allclose(fj.asarray(x).sum().numpy(), x.sum(dtype=np.float64),
                                   rtol=1e-5)


def test_random_programs_with_small_blocks(small_blocks):
    @hypothesis.settings(max_examples=80, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(programs(max_steps=8, max_side=11, max_outputs=3))
    def run(recipe):
        check_program(recipe, backend="interpret")

    run()
