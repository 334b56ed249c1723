"""Host cost per recorded op, per cached ``realize`` and (where it exists) per ``fj.jit`` call.

Run: ``python bench/host_cost.py [--backend numpy|interpret|cuda|fake-cuda] [--json OUT]``.
``fake-cuda`` runs the ``cuda`` backend's host code on ``tests/fake_cupy.py`` (no GPU: the
kernels and CuPy's own launch and allocation costs are left out).

Each figure is the best of several rounds (microseconds per call, or per recorded op), so a
busy machine inflates it less. The recording figures build graphs and drop them (nothing
runs); the realize figures include recording, the plan lookup and the backend's execution
(on ``numpy`` that is NumPy's own work per op; on ``cuda`` the launches, not waiting for
the GPU); the jit figures are whole calls of a jitted function.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fusejit as fj


def _sync() -> None:
    if fj.get_backend() == "cuda":
        import cupy
        stream = getattr(cupy.cuda, "get_current_stream", None)
        if stream is not None:  # (not on the fake)
            stream().synchronize()


#: the clock of ``best_us``: wall time, or (``--cpu-time``) the process's CPU time, which a
#: machine shared with other work disturbs less (it leaves out the time spent waiting for a
#: core; on a GPU it also leaves out waiting for the device, so it is not used there)
CLOCK = [time.perf_counter]


def best_us(fn: Callable[[], Any], reps: int, rounds: int = 7) -> float:
    """Best time per call over ``rounds`` rounds of ``reps`` calls, in microseconds."""
    clock = CLOCK[0]
    best = float("inf")
    for _ in range(rounds):
        _sync()
        t = clock()
        for _ in range(reps):
            fn()
        _sync()
        best = min(best, (clock() - t) / reps * 1e6)
    return best


def _arrays(backend: str, shape: tuple[int, ...], n: int) -> list[Any]:
    rng = np.random.default_rng(0)
    out = [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]
    if backend == "cuda":
        import cupy
        out = [cupy.asarray(a) for a in out]
    return out


def install_fake_cuda() -> None:
    """Put ``tests/fake_cupy.FakeCupy`` in place of CuPy, with compiles faked: the ``cuda``
    backend's host logic runs for real, kernels and CuPy's own work do not (so the figures
    are fusejit's share of a call; CuPy adds its launch and allocation costs on a GPU)."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from fusejit.runtime import compile as compile_module
    from fusejit.runtime import cuda_backend
    from tests.fake_cupy import FakeCupy

    def compile_launch(emitted: Any, launch: Any, divisible: Any, cc: int = 90) -> Any:
        n = len(launch.signature)
        return compile_module.Compiled(launch.fn_name, b"\x7fELF" + launch.fn_name.encode(), 0,
                                       launch.num_warps, n + 2, n)

    # (launches through the driver's launchKernel, as on CuPy: cuda_backend._RawLaunch)
    fake = FakeCupy(raw_launch=True)
    # the fake's per-launch logs keep nothing (``arguments`` held every launch's arrays: the
    # figures grew with the run, by about 4 us per realize on a 5-op program)
    for log in ("launches", "launch_args", "arguments", "launch_streams", "raw_launches"):
        setattr(fake, log, _Discard())
    sys.modules["cupy"] = fake
    cuda_backend.compile_launch = compile_launch  # type: ignore[assignment]


class _Discard(list):
    """A list that keeps nothing (the fake's launch log, in a timing loop)."""

    def append(self, item: Any) -> None:
        pass


def measure(backend: str, quick: bool = False) -> dict[str, float]:
    """The figures, by name (microseconds); ``fake-cuda``: see ``install_fake_cuda``."""
    if backend == "fake-cuda":
        install_fake_cuda()
        backend = "cuda"
    fj.set_backend(backend)
    reps = 200 if quick else 1000
    x_arr, y_arr = _arrays(backend, (1024,), 2)
    ln_x, = _arrays(backend, (256, 1024), 1)
    ln_w, ln_b = _arrays(backend, (1024,), 2)
    x, y = fj.asarray(x_arr), fj.asarray(y_arr)
    lx, lw, lb = fj.asarray(ln_x), fj.asarray(ln_w), fj.asarray(ln_b)
    fig: dict[str, float] = {}

    def chain_scalar() -> Any:  # 20 tensor-scalar ops
        t = x
        for _ in range(10):
            t = t * 1.5 + 0.25
        return t

    def chain_tensor() -> Any:  # 20 tensor-tensor ops
        t = x
        for _ in range(10):
            t = t * y + x
        return t

    def chain_unary() -> Any:  # 20 unary ops
        t = x
        for _ in range(10):
            t = fj.exp(fj.negative(t))
        return t

    def chain_where() -> Any:  # 10 compare-and-select pairs: 20 ops
        t = x
        for _ in range(10):
            t = fj.where(t > y, t, y)
        return t

    def five_ops() -> Any:  # the 5-op program of the target
        return fj.maximum(x * 2.0 + y, 0.0) * 0.5 - 1.0

    def layer_norm() -> Any:
        return fj.layer_norm(lx, lw, lb)

    for name, build, ops in (("scalar op", chain_scalar, 20), ("tensor op", chain_tensor, 20),
                             ("unary op", chain_unary, 20), ("where op", chain_where, 20)):
        fig[f"record per {name}"] = best_us(build, reps // 4) / ops
    fig["record 5-op program"] = best_us(five_ops, reps)
    fig["record layer_norm 256x1024"] = best_us(layer_norm, reps // 2)
    five_ops().realize()
    layer_norm().realize()
    fig["realize 5-op program, 1024"] = best_us(lambda: five_ops().realize(), reps // 2)
    fig["realize layer_norm 256x1024"] = best_us(lambda: layer_norm().realize(),
                                                 max(reps // 20, 10) if backend == "interpret"
                                                 else reps // 4)
    jit = getattr(fj, "jit", None)
    if jit is not None:
        five = jit(lambda a, b, s: fj.maximum(a * s + b, 0.0) * 0.5 - 1.0)
        ln = jit(lambda a, w, b: fj.layer_norm(a, w, b))
        five(x_arr, y_arr, 2.0)
        ln(ln_x, ln_w, ln_b)
        fig["jit 5-op program, 1024"] = best_us(lambda: five(x_arr, y_arr, 2.0), reps // 2)
        values = iter(np.linspace(0.0, 1.0, 10**7).tolist())
        fig["jit 5-op program, new scalar each call"] = best_us(
            lambda: five(x_arr, y_arr, next(values)), reps // 2)
        fig["jit layer_norm 256x1024"] = best_us(lambda: ln(ln_x, ln_w, ln_b),
                                                 max(reps // 20, 10) if backend == "interpret"
                                                 else reps // 4)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Print the figures (and write them as JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numpy",
                        choices=("numpy", "interpret", "cuda", "fake-cuda"))
    parser.add_argument("--json", default=None)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the process's CPU time (a busy machine disturbs it less)")
    args = parser.parse_args(argv)
    if args.cpu_time:
        CLOCK[0] = time.process_time
    gc.collect()
    fig = measure(args.backend, args.quick)
    print(f"backend: {args.backend}" + (" (process CPU time)" if args.cpu_time else ""))
    for name, value in fig.items():
        print(f"  {name:42s} {value:8.2f} us")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "figures": fig}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
