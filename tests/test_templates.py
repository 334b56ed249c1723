"""Composites replayed from templates (``fusejit.frontend.templates``): the same nodes,
plans and results as recording them, on the ``numpy`` backend (no compile).

Results against NumPy's float64 forms of the composites (``fusejit.testing``): rtol 1e-5 for
float32, the same as recording gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusejit as fj
from fusejit.frontend import reductions, templates
from fusejit.ir.graph import structural_key
from fusejit.testing import numpy_reference


@pytest.fixture(autouse=True)
def _numpy_backend_and_fresh_templates():
    templates._TEMPLATES.clear()
    with fj.using_backend("numpy"):
        yield
    templates._TEMPLATES.clear()


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _key(t: fj.Tensor) -> tuple:
    return structural_key([t._node])[0]


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "softmax", "log_softmax", "var",
                                  "std", "logsumexp"])
def test_a_replay_makes_the_nodes_recording_makes(name: str, monkeypatch) -> None:
    replays: list[int] = []
    replay = templates._replay

    def counted(*args):
        replays.append(1)
        return replay(*args)

    monkeypatch.setattr(templates, "_replay", counted)
    fn = getattr(fj, name)
    record = getattr(reductions, name).__wrapped__
    x0, w = _rand(64, 48), _rand(48, seed=1) + 2.0
    args = (lambda x: (x, fj.asarray(w))) if "norm" in name else (lambda x: (x, -1))
    first = fn(*args(fj.asarray(x0)))  # recorded, and its template kept
    kept = len(templates._TEMPLATES)
    assert kept == (2 if name == "std" else 1)  # (std's var has its own)
    for seed in (2, 3):  # new inputs of the same structure: replayed
        xs = _rand(64, 48, seed=seed)
        x = fj.asarray(xs)
        replays.clear()
        replayed, recorded = fn(*args(x)), record(*args(x))
        assert replays, "not replayed"
        assert _key(replayed) == _key(recorded) == _key(first)
        assert replayed.dtype == recorded.dtype and replayed.shape == recorded.shape
        ref_args = (xs, w) if "norm" in name else (xs, -1)
        np.testing.assert_allclose(replayed.numpy(), numpy_reference(name)(*ref_args),
                                   rtol=1e-5, atol=1e-6)
    assert len(templates._TEMPLATES) == kept


def test_a_replay_without_scalars_returns_the_recorded_node_itself() -> None:
    x = fj.asarray(_rand(16, 8))
    first = fj.softmax(x)
    assert fj.softmax(x)._node is first._node  # hash-consed: one node per structure


def test_each_eps_is_its_own_template_and_its_value_reaches_the_kernel() -> None:
    xs = _rand(32, 16)
    x = fj.asarray(xs)
    for eps in (1e-5, 0.5, 1e-5, 0.5):
        got = fj.layer_norm(x, eps=eps).numpy()
        np.testing.assert_allclose(got, numpy_reference("layer_norm")(xs, eps=eps),
                                   rtol=1e-5, atol=1e-6)
    assert len(templates._TEMPLATES) == 2


def test_arrays_and_odd_arguments_record_normally() -> None:
    xs = _rand(8, 4)
    fj.layer_norm(xs)  # a NumPy array, not a tensor
    fj.softmax(fj.asarray(xs), axis=np.int64(1))  # a NumPy int axis
    assert not templates._TEMPLATES


def test_the_same_tensor_twice_is_another_structure() -> None:
    xs, ws = _rand(8, 4), _rand(4, seed=1)
    x, w, b = fj.asarray(xs), fj.asarray(ws), fj.asarray(ws.copy())
    y1 = fj.layer_norm(x, w, b)
    y2 = fj.layer_norm(x, w, w)
    assert len(templates._TEMPLATES) == 2
    np.testing.assert_allclose(y1.numpy(), y2.numpy(), rtol=1e-6)


def test_a_composite_reaching_past_its_arguments_is_never_replayed() -> None:
    # rms_norm of a centered value: mean(x * x) becomes m2(u), which reads u, an input the
    # call did not pass; such a call records normally, every time
    us = _rand(16, 8)
    for seed in (0, 1):
        u = fj.asarray(_rand(16, 8, seed=seed) if seed else us)
        y = fj.rms_norm(u - u.mean(axis=-1, keepdims=True))
        assert "m2" in fj.dump(y)
    assert list(templates._TEMPLATES.values()) == [templates._REFUSED]
    c = us - us.mean(axis=-1, keepdims=True)
    got = fj.rms_norm(fj.asarray(us) - fj.asarray(us).mean(axis=-1, keepdims=True)).numpy()
    np.testing.assert_allclose(got, numpy_reference("rms_norm")(c), rtol=1e-5, atol=1e-6)


def test_errors_are_raised_on_every_call() -> None:
    x = fj.asarray(_rand(8, 4))
    for _ in range(2):
        with pytest.raises(fj.FusejitError):
            fj.layer_norm(x, fj.asarray(_rand(5)))
    assert not templates._TEMPLATES


def test_jit_dynamic_eps_is_not_a_template_and_every_value_is_used() -> None:
    xs = _rand(16, 8)

    @fj.jit
    def ln(x, eps):
        return fj.layer_norm(x, eps=eps)

    for eps in (1e-5, 0.25, 3.0):
        np.testing.assert_allclose(ln(xs, eps).numpy(),
                                   numpy_reference("layer_norm")(xs, eps=eps),
                                   rtol=1e-5, atol=1e-6)
