"""Shared test set-up: Hypothesis profiles, the ``gpu`` marker, and one fixture per backend.

Hypothesis profiles (select with ``HYPOTHESIS_PROFILE=name``; ``ci`` is the
default when ``CI`` is set, else ``dev``):

* ``ci``: derandomized (the same examples on every run, so CI is reproducible),
  moderate ``max_examples``, no deadline (2 shared cores are slow and uneven).
* ``dev``: random examples, fewer of them, for quick local runs.
* ``thorough``: many random examples, for hunting bugs locally.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

import fusejit as fj
from fusejit.runtime import gpu_available

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", derandomize=True, max_examples=150, print_blob=True, **_COMMON)
settings.register_profile("dev", max_examples=60, **_COMMON)
settings.register_profile("thorough", max_examples=2000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

_GPU = gpu_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked ``gpu`` when CuPy sees no CUDA device."""
    if _GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (fusejit.runtime.gpu_available() is False)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _interpret_available() -> bool:
    return (importlib.util.find_spec("triton") is not None
            and importlib.util.find_spec("fusejit.runtime.interpret_backend") is not None)


def _cuda_available() -> bool:
    return _GPU and importlib.util.find_spec("fusejit.runtime.cuda_backend") is not None


def _use(name: str) -> Iterator[str]:
    with fj.using_backend(name):
        yield name


@pytest.fixture
def numpy_backend() -> Iterator[str]:
    """Run the test with the ``numpy`` reference backend selected; yields its name."""
    yield from _use("numpy")


@pytest.fixture
def interpret_backend() -> Iterator[str]:
    """Run with the ``interpret`` backend (Triton's interpreter); skips without Triton."""
    if not _interpret_available():
        pytest.skip("interpret backend needs triton and fusejit.runtime.interpret_backend")
    yield from _use("interpret")


@pytest.fixture
def cuda_backend() -> Iterator[str]:
    """Run with the ``cuda`` backend; skips without a GPU."""
    if not _cuda_available():
        pytest.skip("cuda backend needs a CUDA GPU, CuPy and fusejit.runtime.cuda_backend")
    yield from _use("cuda")


@pytest.fixture(params=["numpy", "interpret", "cuda"])
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each backend in turn (those unavailable here are skipped); yields its name."""
    yield request.getfixturevalue(f"{request.param}_backend")


@pytest.fixture
def fresh_plans(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Plans, emitted kernels and backend instances of the test's own, the process's put back
    afterwards: for tests that change ``fusejit.codegen.heuristics`` or the fuser's limits
    (nothing planned or emitted under other settings may be reused, nor leak out)."""
    import fusejit.fuse as fuse
    import fusejit.runtime as runtime
    import fusejit.runtime.kernel_cache as kernel_cache
    monkeypatch.setattr(runtime, "_plans", {})
    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(kernel_cache, "_emit_cache", {})
    fuse.clear_cache()
    yield
    fuse.clear_cache()
