"""Autotuning (``FUSEJIT_AUTOTUNE=1``): every candidate tiling is correct.

Candidates (``heuristics.*_candidates``) are what autotune may launch instead of the
heuristic's tiles, so each one must compute the same results: every candidate of every
kernel of a set of representative programs (pointwise 1-D and 2-D, inner persistent and
looped reductions, online softmax, an outer reduction, split sums, a split variance and an
outer split, integer sums, GEMMs with and without split-K) runs on the ``interpret``
backend and is compared with NumPy. Tolerances: inputs are uniform in [0, 1) (no
cancellation), float32 results within ``rtol=1e-5`` (float64 references) and integer
results exact; GEMM results within ``testing.matmul_error_bound`` (any summation order).
A deterministic sample of the candidates also compiles to sm_90 cubins.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit import runtime  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.codegen import heuristics as h  # noqa: E402
from fusejit.testing import matmul_error_bound, recorded_inputs  # noqa: E402

F32 = np.float32


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache directory per test."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _uniform(*shape: int, dtype: Any = F32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape).astype(dtype)


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(xp: Any, x: Any) -> Any:
    d = x - x.mean(axis=-1, keepdims=True)
    return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + F32(1e-5))


#: name -> (program of (xp, *arrays), inputs, the kernel kind it must contain)
PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], list[np.ndarray]], str]] = {
    "pointwise": (lambda xp, x, y: xp.exp(x) * F32(2) + y,
                  lambda: [_uniform(256, 300), _uniform(300, seed=1)], "pointwise"),
    "transpose_2d": (lambda xp, x, y: x.T + y,
                     lambda: [_uniform(300, 260), _uniform(260, 300, seed=1)], "pointwise"),
    "softmax": (_softmax, lambda: [_uniform(128, 600)], "inner_reduction"),
    "softmax_looped": (_softmax, lambda: [_uniform(4, 20000)], "inner_reduction"),
    "layernorm": (_layernorm, lambda: [_uniform(128, 700)], "inner_reduction"),
    "row_sum_looped": (lambda xp, x: (x * x).sum(axis=1), lambda: [_uniform(4, 20000)],
                       "inner_reduction"),
    "outer": (lambda xp, x: x.sum(axis=0), lambda: [_uniform(300, 1024)], "outer_reduction"),
    "split_sum": (lambda xp, x: x.sum(), lambda: [_uniform(1 << 17)], "split_reduction"),
    "split_var": (lambda xp, x: x.var(), lambda: [_uniform(1 << 17)], "split_reduction"),
    "outer_split": (lambda xp, x: x.sum(axis=0), lambda: [_uniform(1 << 14, 64)],
                    "split_reduction"),
    "int_sum": (lambda xp, x: x.sum(axis=1),
                lambda: [np.random.default_rng(0).integers(-9, 9, (64, 2048)).astype(np.int32)],
                "inner_reduction"),
    "gemm": (lambda xp, a, b: a @ b, lambda: [_uniform(128, 256), _uniform(256, 192, seed=1)],
             "gemm"),
    "gemm_f16_split_k": (lambda xp, a, b: a @ b,
                         lambda: [_uniform(64, 4096, dtype=np.float16),
                                  _uniform(4096, 64, dtype=np.float16, seed=1)], "gemm"),
}


def _plan(name: str) -> tuple[Any, list[Any], list[np.ndarray]]:
    """The plan of a program, its inputs in the plan's order, and NumPy's results."""
    fn, make, _ = PROGRAMS[name]
    arrays = make()
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = outs if isinstance(outs, tuple) else (outs,)
    with np.errstate(all="ignore"):
        expected = fn(np, *[a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays])
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    return fj.plan(*outs), recorded_inputs(*outs), expected


def _run(plan: Any, inputs: list[Any], which: int, tiles: Any) -> list[np.ndarray]:
    """The plan on the interpret backend, kernel ``which`` launched with ``tiles``."""
    backend = runtime.backend_instance("interpret")
    env = {p.name: v for p, v in zip(plan.program.inputs, inputs)}
    for j, k in enumerate(plan.program.body):
        outs = backend.run_kernel(k, [env[a] for a in k.args], tiles if j == which else None)
        env.update(zip(k.results, outs))
    return [env[o] for o in plan.program.outputs]


def _check(name: str, actual: np.ndarray, expected: np.ndarray, inputs: list[Any],
           what: str) -> None:
    assert actual.shape == expected.shape, what
    if actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    elif name.startswith("gemm"):
        a, b = inputs
        bound = matmul_error_bound(a, b, a.dtype)
        assert np.all(np.abs(actual.astype(np.float64) - expected) <= bound), what
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_candidate_is_correct_on_the_interpreter(name: str) -> None:
    plan, inputs, expected = _plan(name)
    kinds = [k.kind for k in plan.program.kernels]
    assert PROGRAMS[name][2] in kinds, plan.explain()
    tuned = 0
    for i, kernel in enumerate(plan.program.kernels):
        candidates = emit_kernel(kernel, None, "cuda").candidates
        assert candidates and len(set(candidates)) == len(candidates)
        assert len(candidates) <= h.MAX_CANDIDATES
        tuned += len(candidates) > 1
        for c, tiles in enumerate(candidates):
            got = _run(plan, inputs, i, tiles)
            for out, (a, e) in enumerate(zip(got, expected)):
                _check(name, np.asarray(a), e, inputs,
                       f"{name}: kernel {kernel.name} candidate #{c + 1} {tiles!r}, output {out}")
    assert tuned, f"{name}: no kernel has candidates to tune"


def test_cubins_of_sampled_candidates() -> None:
    """A seeded sample of the candidates (one per kernel, two per GEMM; the heuristic's are
    compiled by test_cubin.py) compile to sm_90 cubins, with pointers divisible by 16 or not."""
    from fusejit.runtime.compile import compile_all
    pick = random.Random(9)
    compiled = 0
    for name in sorted(PROGRAMS):
        plan, _, _ = _plan(name)
        for kernel in plan.program.kernels:
            candidates = emit_kernel(kernel, None, "cuda").candidates[1:]
            take = 2 if kernel.kind == "gemm" else 1
            for tiles in pick.sample(candidates, min(take, len(candidates))):
                emitted = emit_kernel(kernel, None, "cuda", tiles)
                for c in compile_all(emitted, 90, divisible=compiled % 2 == 0):
                    assert c.cubin[:4] == b"\x7fELF" and c.n_params >= c.n_args
                compiled += 1
    assert compiled >= 15

