"""Threads: many threads realizing different programs at once get NumPy's answers.

Every backend is shared by the threads of a process (one instance each, one
plan cache, one kernel cache); these tests run 8 threads x many realizes of
several programs (canonical ones, each with a per-thread constant so that
caches are hit and missed concurrently) and compare every result with NumPy.
Before the interpreter's launches were serialized, two threads interpreting at
once failed with Triton's "Did you forget to add @triton.jit ?".

Backend selection: ``using_backend`` is per thread, ``set_backend`` is the
process default.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import fusejit as fj
from fusejit import runtime
from fusejit.runtime import gpu_available
from fusejit.testing import assert_matches_numpy

from ._canonical import CANONICAL

THREADS = 8
#: programs every thread runs, in a rotated order per thread and round
PROGRAMS = ["pointwise_chain", "softmax", "layernorm", "sum_max_siblings", "transpose_add",
            "full_reduction", "int_floordiv_mod", "argmax_nan"]


def _one(name: str, n: int, thread: int, to_input: Callable[[np.ndarray], Any] = np.asarray,
         backend: str | None = None) -> None:
    """Realize one canonical program (plus a per-thread constant) and check it against NumPy."""
    fn, make = CANONICAL[name]
    arrays = make(n)
    scale = np.float32(thread + 1)  # a constant of the program: each thread has its own kernel

    def program(xp: Any, *a: Any) -> tuple[Any, ...]:
        out = fn(xp, *a)
        outs = out if isinstance(out, tuple) else (out,)
        first = outs[0]
        extra = first * scale if first.dtype.kind == "f" else first + int(scale)
        return (*outs, extra)

    with np.errstate(all="ignore"):
        expected = program(np, *arrays)
    got = program(fj, *[fj.asarray(to_input(a)) for a in arrays])
    if backend is not None:
        assert fj.get_backend() == backend  # no other thread's selection leaked in
    fj.realize(*got)
    for g, e in zip(got, expected):
        assert_matches_numpy(g.numpy(), np.asarray(e))


def run_threads(backends: list[str], rounds: int, sizes: tuple[int, ...],
                to_input: Callable[[np.ndarray], Any] = np.asarray) -> None:
    """``THREADS`` threads, thread i selecting ``backends[i % len(backends)]`` with
    ``using_backend`` and running every program ``rounds`` times."""
    barrier = threading.Barrier(THREADS)

    def worker(thread: int) -> int:
        backend = backends[thread % len(backends)]
        done = 0
        with fj.using_backend(backend):
            barrier.wait()  # start together, so that first compiles race too
            for r in range(rounds):
                for i in range(len(PROGRAMS)):
                    _one(PROGRAMS[(i + thread + r) % len(PROGRAMS)], sizes[(r + i) % len(sizes)],
                         thread, to_input, backend)
                    done += 1
        return done

    with ThreadPoolExecutor(THREADS) as pool:
        counts = list(pool.map(worker, range(THREADS)))
    assert counts == [rounds * len(PROGRAMS)] * THREADS


def test_threads_numpy_backend() -> None:
    run_threads(["numpy"], rounds=6, sizes=(3, 6, 9))


def test_threads_interpret_backend(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))  # a cold disk cache: writes race too
    run_threads(["interpret"], rounds=3, sizes=(3, 5, 4))


def test_threads_mixed_backends(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Half the threads on ``interpret``, half on ``numpy``, at once: each keeps its own."""
    pytest.importorskip("triton")
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    run_threads(["interpret", "numpy"], rounds=2, sizes=(4, 3))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_threads_cuda_backend(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 threads on the GPU: host inputs in some threads, CuPy inputs in others."""
    import cupy as cp
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))  # cold: compiles race too
    run_threads(["cuda"], rounds=4, sizes=(6, 33, 7))
    run_threads(["cuda"], rounds=2, sizes=(5, 33), to_input=cp.asarray)
    cp.cuda.Device().synchronize()


# -- backend selection --------------------------------------------------------------------------

def test_using_backend_is_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread inside ``using_backend`` does not change what another thread uses, and a new
    thread starts with the process default, not with its parent's override."""
    monkeypatch.setattr(runtime, "_selected", "numpy")
    inside, leave = threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def holder() -> None:
        with fj.using_backend("interpret"):
            seen["holder"] = fj.get_backend()
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    inside.wait(10)
    seen["main"] = fj.get_backend()  # while the other thread is inside its block
    leave.set()
    t.join()
    with fj.using_backend("interpret"):
        child = threading.Thread(target=lambda: seen.setdefault("child", fj.get_backend()))
        child.start()
        child.join()
        seen["main inside"] = fj.get_backend()
    assert seen == {"holder": "interpret", "main": "numpy", "child": "numpy",
                    "main inside": "interpret"}


def test_copied_context_carries_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's recipe: a thread run in a copy of the context uses the block's backend."""
    import contextvars
    monkeypatch.setattr(runtime, "_selected", "numpy")
    seen = []
    with fj.using_backend("interpret"):
        context = contextvars.copy_context()
    t = threading.Thread(target=context.run, args=(lambda: seen.append(fj.get_backend()),))
    t.start()
    t.join()
    assert seen == ["interpret"] and fj.get_backend() == "numpy"


def test_set_backend_is_the_process_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_selected", "numpy")
    seen = []
    with fj.using_backend("interpret"):
        fj.set_backend("numpy")
        seen.append(fj.get_backend())       # this thread's override still wins
    seen.append(fj.get_backend())
    t = threading.Thread(target=lambda: seen.append(fj.get_backend()))
    fj.set_backend("interpret")
    t.start()
    t.join()
    assert seen == ["interpret", "numpy", "interpret"]


def test_using_backend_nests_and_restores_after_errors() -> None:
    before = fj.get_backend()
    with fj.using_backend("numpy"):
        with pytest.raises(ZeroDivisionError), fj.using_backend("interpret"):
            assert fj.get_backend() == "interpret"
            1 / 0  # noqa: B018
        assert fj.get_backend() == "numpy"
    assert fj.get_backend() == before


def test_backend_instances_are_created_once_under_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    created = []

    class Slow:
        name, device_memory = "numpy", False

        def __init__(self) -> None:
            created.append(self)
            threading.Event().wait(0.01)  # widen the window a racing thread could use

    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(runtime, "_create", lambda name: Slow())
    with ThreadPoolExecutor(THREADS) as pool:
        got = list(pool.map(lambda _: runtime.backend_instance("numpy"), range(THREADS)))
    assert len(created) == 1 and all(g is created[0] for g in got)
