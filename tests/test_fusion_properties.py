"""Properties of the fusion pass on random programs (Hypothesis).

* Fused and unfused programs give the same values on the numpy backend,
  compared bit for bit (NaN equal to NaN). No tolerance is needed: the
  numpy backend evaluates a fused region with the very NumPy calls of the
  unfused program, on the very same arrays (values cross kernel boundaries
  as the same ndarray objects, never copied or re-laid out), so even
  NumPy's pairwise summation order is identical.
* Every region the pass builds passes ``region_domain``, and the incremental
  rules never accept a growth that the domain analysis would refuse
  (``greedy.CHECK_EVERY_GROWTH`` runs the analysis on every growth).
* The fused text round-trips (``parse(print(p))`` prints identically) and
  runs to the same values.
* The pass is deterministic and idempotent on its own output.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import fusejit as fj
from fusejit import fuse
from fusejit.fuse import greedy
from fusejit.ir.domain import region_domain
from fusejit.ir.graph import lower
from fusejit.runtime.numpy_backend import NumpyBackend
from fusejit.testing import programs

BACKEND = NumpyBackend()


@pytest.fixture(autouse=True)
def _check_every_growth():
    greedy.CHECK_EVERY_GROWTH = True
    try:
        yield
    finally:
        greedy.CHECK_EVERY_GROWTH = False


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)  # NaN == NaN here; -0.0 == 0.0 (same ops give same sign)


def _lowered(recipe):
    tensors = recipe(fj, *[fj.asarray(a.copy()) for a in recipe.inputs])
    outs = [x if isinstance(x, fj.Tensor) else fj.asarray(x) for x in tensors]
    return lower([o._node for o in outs])


@settings(max_examples=60)
@given(programs(max_steps=10, max_outputs=3))
def test_fused_equals_unfused(recipe):
    program, buffers, _ = _lowered(recipe)
    plan = fuse.build_plan(program)
    for k in plan.program.kernels:
        region_domain(k)
    assert all(isinstance(s, fj.Kernel) for s in plan.program.body)
    expected = BACKEND.execute(program, buffers)
    got = BACKEND.execute(plan.program, buffers, plan)
    for a, b in zip(got, expected):
        _same(a, b)


@settings(max_examples=40)
@given(programs(max_steps=8, max_outputs=2))
def test_fused_text_round_trips_and_reruns(recipe):
    program, buffers, _ = _lowered(recipe)
    assert str(fj.parse(str(program))) == str(program)  # every recorded program verifies
    plan = fuse.build_plan(program)
    text = str(plan)
    again = fj.parse(text)
    assert str(again) == text
    # the parsed fused program runs as written (its regions are the user's now)
    replan = fuse.build_plan(again)
    assert str(replan.program) == text
    expected = BACKEND.execute(program, buffers)
    for a, b in zip(BACKEND.execute(replan.program, buffers), expected):
        _same(a, b)


@settings(max_examples=30)
@given(programs(max_steps=8))
def test_pass_is_deterministic(recipe):
    program, _, _ = _lowered(recipe)
    assert str(fuse.build_plan(program)) == str(fuse.build_plan(program))


@settings(max_examples=30)
@given(programs(max_steps=8, ops=None))
def test_launch_count_never_exceeds_unfused(recipe):
    program, _, _ = _lowered(recipe)
    plan = fuse.build_plan(program)
    non_leaf = [i for i in program.body if i.op not in ("const", "iota")]
    blocks = len(plan.program.kernels)
    assert blocks <= max(len(non_leaf), len(program.outputs), 1)


def _random_model(seed: int) -> list[fj.Tensor]:
    """A larger random program than Hypothesis draws: composites, views, both reduction axes."""
    import random
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    vals = [fj.asarray(rng.standard_normal((4, 6)).astype(np.float32)) for _ in range(3)]
    steps = [
        lambda a, b: a + b, lambda a, b: fj.exp(a * 0.1),
        lambda a, b: a - a.max(rnd.choice([0, 1]), keepdims=True),
        lambda a, b: fj.softmax(a, axis=rnd.choice([0, -1])), lambda a, b: a.T.T * b,
        lambda a, b: a + a.sum(1, keepdims=True), lambda a, b: a * a.mean(),
        lambda a, b: fj.layer_norm(a), lambda a, b: a[::-1] + b[:, ::-1],
        lambda a, b: (a.reshape(6, 4) * 2).reshape(4, 6),
        lambda a, b: fj.where(a > b, a, b.sum(0)), lambda a, b: a * fj.sqrt(fj.abs(b)).max(0),
    ]
    for _ in range(rnd.randint(5, 60)):
        vals.append(rnd.choice(steps)(rnd.choice(vals), rnd.choice(vals)))
    return rnd.sample(vals[3:], min(3, len(vals) - 3))


@pytest.mark.parametrize("seed", range(40))
def test_larger_random_models_fuse_exactly(seed):
    outs = _random_model(seed)
    program, buffers, _ = lower([o._node for o in outs])
    plan = fuse.build_plan(program)
    for a, b in zip(BACKEND.execute(plan.program, buffers, plan), BACKEND.execute(program, buffers)):
        _same(a, b)
    assert str(fj.parse(str(plan))) == str(plan)
