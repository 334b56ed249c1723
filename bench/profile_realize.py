"""Where the host time of a cached ``realize`` goes, on the current backend.

Run: ``python bench/profile_realize.py [out.txt]``. Prints microseconds per
cached realize (best of 5 rounds) for a tiny program and a layer norm, each
split into graph building and the rest, then the top of a cProfile of the
tiny program's loop.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fusejit as fj


def _sync() -> None:
    if fj.get_backend() == "cuda":
        import cupy
        cupy.cuda.get_current_stream().synchronize()


def _best_us(fn: Callable[[], Any], reps: int = 2000, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        _sync()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        _sync()
        best = min(best, (time.perf_counter() - t) / reps * 1e6)
    return best


def _large_layer_norm(lines: list[str]) -> str:
    """Host time to issue a 16384x4096 layer norm realize vs the time with the GPU's work."""
    import cupy as cp
    xs = cp.random.standard_normal((16384, 4096), dtype=cp.float32)
    x, w, b = fj.asarray(xs), fj.asarray(cp.ones(4096, cp.float32)), \
        fj.asarray(cp.zeros(4096, cp.float32))
    for _ in range(3):
        fj.layer_norm(x, w, b).realize()
    _sync()
    t = time.perf_counter()
    keep = [fj.layer_norm(x, w, b).realize() for _ in range(30)]
    issued = (time.perf_counter() - t) / 30 * 1e6
    _sync()
    total = (time.perf_counter() - t) / 30 * 1e6
    del keep
    lines.append(f"layer_norm 16384x4096: host issue {issued:.1f} us/call, with GPU work "
                 f"{total:.1f} us/call")
    text = io.StringIO()
    _profile(text, "\nlayer_norm 16384x4096, 30 realizes:\n",
             lambda: fj.layer_norm(x, w, b).realize(), 30, ("tottime",), 15)
    return text.getvalue()


def _profile(text: io.StringIO, title: str, call: Callable[[], Any], reps: int,
             orders: tuple[str, ...], top: int) -> None:
    """Write ``title`` and the top ``top`` lines of a cProfile of ``reps`` calls (the device
    waited for), sorted by each of ``orders``, to ``text``."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(reps):
        call()
    _sync()
    profiler.disable()
    text.write(title)
    stats = pstats.Stats(profiler, stream=text)
    for order in orders:
        stats.sort_stats(order).print_stats(top)


def main(out_path: str | None = None) -> int:
    """Print (and optionally save) the host-time breakdown of cached realizes."""
    small = fj.asarray(np.ones((64, 64), np.float32))
    x = fj.asarray(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    w = fj.asarray(np.ones(64, np.float32))
    (small * 2 + 1).realize()
    fj.layer_norm(x, w).realize()
    lines = [f"backend: {fj.get_backend()}"]
    for name, build in (("tiny (x*2+1)", lambda: small * 2 + 1),
                        ("layer_norm 64x64", lambda: fj.layer_norm(x, w))):
        built = _best_us(build)
        total = _best_us(lambda b=build: b().realize())
        lines.append(f"{name:18s} build {built:7.1f} us   realize total {total:7.1f} us")
    text = io.StringIO()
    _profile(text, "", lambda: (small * 2 + 1).realize(), 3000, ("tottime",), 18)
    # the layer norm (256x1024, weight and bias): where a cached realize's time goes
    lx = fj.asarray(np.random.default_rng(1).standard_normal((256, 1024)).astype(np.float32))
    lw, lb = fj.asarray(np.ones(1024, np.float32)), fj.asarray(np.zeros(1024, np.float32))
    if fj.get_backend() == "cuda":
        import cupy as cp
        lx, lw, lb = (fj.asarray(cp.asarray(t.numpy())) for t in (lx, lw, lb))
    fj.layer_norm(lx, lw, lb).realize()
    built = _best_us(lambda: fj.layer_norm(lx, lw, lb))
    total = _best_us(lambda: fj.layer_norm(lx, lw, lb).realize())
    lines.append(f"{'layer_norm 256x1024':18s} build {built:7.1f} us   realize total {total:7.1f} us")
    _profile(text, "\nlayer_norm 256x1024 with weight and bias, 3000 realizes:\n",
             lambda: fj.layer_norm(lx, lw, lb).realize(), 3000, ("tottime", "cumulative"), 30)
    if fj.get_backend() == "cuda":
        text.write(_large_layer_norm(lines))
    report = "\n".join(lines) + "\n\n" + text.getvalue()
    print(report)
    if out_path:
        with open(out_path, "w") as f:
            f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
