"""Differential property tests: random programs (``fusejit.testing.programs``) against NumPy.

The ``numpy`` backend runs every drawn program; other engineers' backends
reuse the same strategy (``check_program(recipe, backend="interpret")``).
Example counts come from the Hypothesis profile in ``conftest.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusejit as fj
from fusejit.testing import (
    ALL_OPS,
    Recipe,
    Ref,
    Step,
    assert_matches_numpy,
    check_program,
    programs,
    run_fusejit,
    run_numpy,
)


@given(programs())
def test_random_programs_match_numpy(recipe: Recipe) -> None:
    check_program(recipe, backend="numpy")


@given(programs(dtypes=["float32"], ops=["add", "multiply", "exp", "sum", "max", "reshape", "transpose",
                                         "slice", "softmax", "layer_norm", "where", "mean"],
                max_steps=8, allow_nan=False))
def test_float32_pipelines_match_numpy(recipe: Recipe) -> None:
    check_program(recipe, backend="numpy")


@settings(max_examples=20)
@given(programs(max_steps=3), st.sampled_from(["numpy"]))
def test_check_program_accepts_backend_argument(recipe: Recipe, backend: str) -> None:
    before = fj.get_backend()
    check_program(recipe, backend=backend)
    assert fj.get_backend() == before  # the backend switch is scoped


def test_recipe_is_readable_and_applies_to_both_modules() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    recipe = Recipe((x,), (Step("function", "exp", (Ref(0),)),
                           Step("operator", "+", (Ref(1), 1.5)),
                           Step("method", "sum", (Ref(2),), (("axis", -1), ("keepdims", True))),
                           Step("getitem", "getitem", (Ref(2), (slice(None, None, -1), 1)))),
                    outputs=(3, 4))
    assert recipe.source() == ("def program(xp, v0):\n    v1 = xp.exp(v0)\n    v2 = v1 + 1.5\n"
                               "    v3 = v2.sum(axis=-1, keepdims=True)\n    v4 = v2[::-1, 1]\n"
                               "    return (v3, v4,)")
    assert "dtype=np.float32" in repr(recipe)
    expected = run_numpy(recipe)
    np.testing.assert_allclose(expected[0], (np.exp(x) + 1.5).sum(-1, keepdims=True))
    for got, want in zip(run_fusejit(recipe, "numpy"), expected):
        assert_matches_numpy(got, want)
    check_program(recipe)


def test_assert_matches_numpy_catches_each_kind_of_difference() -> None:
    a = np.array([1.0, np.nan, np.inf], np.float32)
    assert_matches_numpy(a, a.copy())  # NaN equals NaN
    with pytest.raises(AssertionError, match="dtype differs: fusejit float64, NumPy float32"):
        assert_matches_numpy(a.astype(np.float64), a)
    with pytest.raises(AssertionError, match=r"shape differs: fusejit \(1, 3\), NumPy \(3,\)"):
        assert_matches_numpy(a[None], a)
    with pytest.raises(AssertionError):
        assert_matches_numpy(np.array([1.0, np.nan, -np.inf], np.float32), a)
    with pytest.raises(AssertionError):
        assert_matches_numpy(np.array([1, 2]), np.array([1, 3]))  # ints are exact
    assert_matches_numpy(np.float32([1 + 5e-6]), np.float32([1]))  # within float32 tolerance
    with pytest.raises(AssertionError):
        assert_matches_numpy(np.float32([1 + 5e-5]), np.float32([1]))
    assert_matches_numpy(fj.asarray(a) * 1, a)  # a Tensor is realized


def test_programs_rejects_unknown_ops() -> None:
    with pytest.raises(ValueError, match="unknown ops"):
        programs(ops=["fft"])  # ("matmul" is known: MATMUL_OPS, opt-in)
    assert "softmax" in ALL_OPS and "slice" in ALL_OPS
