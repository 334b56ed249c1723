"""Where an ``fj.jit`` call's host time goes on the GPU machine (issue 10's 5-op program).

Run: ``python3 bench/diag_dispatch.py [--profile]``. Times per call (best of 5 rounds of
back-to-back calls, synchronized at the end of each round): ``cupy.fuse`` of the same
program; CuPy's ``empty`` alone; a bare launch of fusejit's compiled kernel through CuPy
(the arguments prepared once); the entry's runner (allocation and launch); the signature
check alone (the call with ``run`` replaced by a no-op); the whole ``fj.jit`` call. With
``--profile``, cProfile's top functions of 20,000 calls (its overhead inflates every figure;
the shares are what it is for).
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dispatch import per_call_us  # noqa: E402  (best of 5 rounds, device finished)


def main() -> int:
    import cupy as cp
    import numpy as np

    import fusejit as fj
    fj.set_backend("cuda")
    sync = cp.cuda.get_current_stream().synchronize
    host = np.random.default_rng(7)
    a = cp.asarray(host.standard_normal(1024).astype(np.float32))
    b = cp.asarray(host.standard_normal(1024).astype(np.float32))

    def five(xp: Any, a: Any, b: Any, s: Any) -> Any:
        return xp.maximum(a * s + b, 0.0) * 0.5 - 1.0

    def five_cupy(a: Any, b: Any, s: Any) -> Any:
        return five(cp, a, b, s)
    ffive = cp.fuse()(five_cupy) if hasattr(cp, "fuse") else None  # (not on the fake)
    jfive = fj.jit(lambda a, b, s: five(fj, a, b, s))
    jfive(a, b, 2.0)
    entry = jfive._latest
    fig: dict[str, float] = {}
    if ffive is not None:
        fig["cupy.fuse call"] = per_call_us(lambda: ffive(a, b, 2.0), sync)
    fig["fj.jit call"] = per_call_us(lambda: jfive(a, b, 2.0), sync)
    fig["cupy.empty((1024,), float32)"] = per_call_us(lambda: cp.empty((1024,), np.float32), sync)
    dyn = [a, b, 2.0]
    buffers = entry.template.copy()  # bound as entry.run binds them (inputs in leaf order)
    for i, k in entry.from_args:
        buffers[i] = dyn[k]
    for i, k, conv in entry.from_floats:
        buffers[i] = conv(dyn[k])
    runner = entry.runner
    fig["entry runner (alloc + launch)"] = per_call_us(lambda: runner(list(buffers)), sync)
    fig["entry.run (bind, alloc, launch, wrap)"] = per_call_us(lambda: entry.run(dyn), sync)
    # the launch alone: the runner's first bound launch, its arguments built once
    free = dict(zip(runner.__code__.co_freevars, (c.cell_contents for c in runner.__closure__)))
    launch = free["bound"][0]
    slots = list(buffers) + free["pad"]
    for i, shape, dtype in free["fresh"]:
        slots[i] = cp.empty(shape, dtype)
    stream = cp.cuda.get_current_stream().ptr
    fig[f"launch alone ({type(launch).__name__})"] = per_call_us(lambda: launch(slots, stream),
                                                                 sync)
    if hasattr(launch, "sel"):  # the same launch through CuPy's Function call
        args = tuple(slots[i] for i in launch.sel)
        fn, grid, block, shared = launch.fn, launch.grid, launch.block, launch.shared
        fig["launch alone (CuPy's Function call)"] = per_call_us(
            lambda: fn(grid, block, args, shared_mem=shared), sync)
    real_run = type(entry).run
    type(entry).run = lambda self, dyn: None  # the signature check alone
    try:
        fig["fj.jit signature check alone"] = per_call_us(lambda: jfive(a, b, 2.0), sync)
    finally:
        type(entry).run = real_run
    # what reading an array's signature costs, attribute by attribute
    for attr, get in (("a.flags.c_contiguous", lambda: a.flags.c_contiguous),
                      ("a._c_contiguous", lambda: getattr(a, "_c_contiguous", None)),
                      ("a.shape", lambda: a.shape), ("a.strides", lambda: a.strides),
                      ("a.dtype", lambda: a.dtype), ("a.data.ptr", lambda: a.data.ptr),
                      ("a.data.device_id", lambda: a.data.device_id),
                      ("cupy getDevice", cp.cuda.runtime.getDevice),
                      ("cupy get_current_stream", cp.cuda.get_current_stream)):
        fig[attr] = per_call_us(get, lambda: None)
    for name, us in fig.items():
        print(f"{name:42s} {us:7.2f} us")
    if "--profile" in sys.argv:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(20000):
            jfive(a, b, 2.0)
        prof.disable()
        sync()
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
