"""Where the host time of one ``fj.jit`` call goes on the GPU machine (issue 10).

Run: ``python3 bench/diag_launch.py``. For the 5-op program on 1,024 float32 elements
(one kernel), microseconds per call of each step of the replay, timed alone in a loop
of back-to-back calls: CuPy's ``empty``; CuPy's ``Function.__call__`` with the bound
arguments; the same launch through the driver's ``cuLaunchKernel`` by ctypes, with a
prepacked parameter array (the pointers rewritten per call, as a launcher would); the
backend's ``bind`` and plan lookup; the plan runner; and the whole ``fj.jit`` call. Then the
top functions of a cProfile of the jit call loop.
"""

from __future__ import annotations

import cProfile
import ctypes
import io
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def per_call(fn: Callable[[], Any], reps: int = 20000) -> float:
    """Best of 5 rounds, microseconds per call."""
    import cupy as cp
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps * 1e6)
        cp.cuda.get_current_stream().synchronize()
    return best


def main() -> None:
    """Print the breakdown."""
    import cupy as cp

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    x = cp.random.standard_normal(1024, dtype=cp.float32)
    y = cp.random.standard_normal(1024, dtype=cp.float32)
    five = fj.jit(lambda a, b, s: fj.maximum(a * s + b, 0.0) * 0.5 - 1.0)
    five(x, y, 2.0)
    tx, ty = fj.asarray(x), fj.asarray(y)
    lazy = fj.maximum(tx * 2.0 + ty, 0.0) * 0.5 - 1.0
    plan = fj.plan(lazy)
    buffers = [leaf.buffer for leaf in structural_key([lazy._node])[1]]
    arrays, spec = backend.bind(plan.program, buffers)
    from fusejit.codegen.lowering import scalar_arg
    arrays = [scalar_arg(a, p.type.dtype) if p.scalar else a
              for p, a in zip(plan.program.inputs, arrays)]
    runner = backend.plan_runner(plan.program, spec)
    kernel = plan.program.kernels[0]
    info = next(iter(kernel.__dict__[backend._slot].values()))
    outs, _ = backend.bind_launches(info, list(arrays))
    fn, grid, block, shared, selectors, n_nulls, _ = info.launches[0]
    groups = (list(arrays), outs, [], [])
    args = tuple([groups[g][i] for g, i in selectors] + [None] * n_nulls)
    print(f"kernel {kernel.name}: grid {grid} block {block} shared {shared}, "
          f"{len(args)} arguments: {[type(a).__name__ for a in args]}")

    fig: dict[str, float] = {}
    keep: list[Any] = [None]
    fig["cupy.empty(1024, f32)"] = per_call(lambda: cp.empty(1024, np.float32))
    fig["cupy.empty((256,1024), f32)"] = per_call(lambda: cp.empty((256, 1024), np.float32))
    pool_malloc = cp.get_default_memory_pool().malloc
    ndarray = cp.ndarray
    f32 = np.dtype(np.float32)
    fig["cupy.ndarray(shape, dtype, cuda.alloc(n))"] = per_call(
        lambda: ndarray((256, 1024), f32, cp.cuda.alloc(1 << 20)))
    fig["cupy.ndarray(shape, dtype, pool.malloc(n))"] = per_call(
        lambda: ndarray((256, 1024), f32, pool_malloc(1 << 20)))
    fig["pool.malloc(n) alone"] = per_call(lambda: pool_malloc(1 << 20))
    fig["Function.__call__ (bound args)"] = per_call(
        lambda: fn(grid, block, args, shared_mem=shared))

    # the same launch through cuLaunchKernel with a prepacked parameter array
    lib = ctypes.CDLL("libcuda.so.1")
    launch = lib.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    launch.restype = ctypes.c_int
    store: list[Any] = []
    pointer_slots: list[Any] = []
    for a in args:
        if a is None:
            store.append(ctypes.c_uint64(0))
        elif isinstance(a, cp.ndarray):
            store.append(ctypes.c_uint64(a.data.ptr))
            pointer_slots.append((store[-1], a))
        elif isinstance(a, np.generic):
            ct = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double,
                  np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
                  np.dtype(np.uint32): ctypes.c_uint32}[a.dtype]
            store.append(ct(a.item()))
        else:
            raise SystemExit(f"unexpected argument {a!r}")
    params = (ctypes.c_void_p * len(store))(*[ctypes.addressof(s) for s in store])
    fptr = fn.ptr
    g0, g1, g2 = grid
    b0 = block[0]

    def ctypes_launch() -> None:
        stream = cp.cuda.get_current_stream().ptr
        rc = launch(fptr, g0, g1, g2, b0, 1, 1, shared, stream, params, None)
        if rc:
            raise RuntimeError(f"cuLaunchKernel: {rc}")

    def ctypes_launch_rebind() -> None:
        for slot, arr in pointer_slots:
            slot.value = arr.data.ptr
        ctypes_launch()
    fig["cuLaunchKernel via ctypes (prepacked)"] = per_call(ctypes_launch)
    fig["cuLaunchKernel via ctypes, pointers rewritten"] = per_call(ctypes_launch_rebind)
    fig["get_current_stream().ptr"] = per_call(lambda: cp.cuda.get_current_stream().ptr)
    fig["backend.bind"] = per_call(lambda: backend.bind(plan.program, buffers))
    fig["backend.plan_runner lookup"] = per_call(lambda: backend.plan_runner(plan.program, spec))
    fig["plan runner (alloc + launch)"] = per_call(lambda: runner(list(arrays)))
    fig["plan runner, one output kept alive"] = per_call(
        lambda: keep.append(runner(list(arrays))) or keep.pop(0))
    fig["backend.execute"] = per_call(lambda: backend.execute(plan.program, buffers, plan))
    fig["fj.jit call"] = per_call(lambda: five(x, y, 2.0))
    fig["realize"] = per_call(
        lambda: (fj.maximum(tx * 2.0 + ty, 0.0) * 0.5 - 1.0).realize(), 5000)
    for name, us in fig.items():
        print(f"  {name:48s} {us:7.2f} us")

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(20000):
        five(x, y, 2.0)
    prof.disable()
    cp.cuda.get_current_stream().synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(18)
    print(s.getvalue())


if __name__ == "__main__":
    main()
