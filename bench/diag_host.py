"""Where a large realize's wall time goes on the GPU (layer norm, 16384x4096 float32).

Run: ``python bench/diag_host.py``. Times, per call and with outputs dropped as in a
loop: building the lazy graph; building plus the plan key (``structural_key``); the
cached plan's launches alone; the whole ``realize``; and the CuPy pool's size after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def main() -> None:
    """Print the breakdown."""
    import cupy as cp

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import _plans, current
    fj.set_backend("cuda")
    sync = cp.cuda.get_current_stream().synchronize
    x = fj.asarray(cp.random.standard_normal((16384, 4096), dtype=cp.float32))
    w, b = fj.asarray(cp.ones(4096, cp.float32)), fj.asarray(cp.zeros(4096, cp.float32))

    def build() -> Any:
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        return d / fj.sqrt((d * d).mean(axis=-1, keepdims=True) + np.float32(1e-5)) * w + b

    build().realize()
    y = build()
    key, leaves = structural_key([y._node])
    buffers = [leaf.buffer for leaf in leaves]
    plan, backend = _plans[key], current()

    def timed(name: str, fn: Callable[[], Any], reps: int = 50) -> None:
        for _ in range(3):
            fn()
        sync()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        issued = (time.perf_counter() - t) / reps * 1e6
        sync()
        total = (time.perf_counter() - t) / reps * 1e6
        print(f"{name:28s} issue {issued:8.1f} us/call   with GPU {total:8.1f} us/call")

    timed("build graph", build)
    timed("build + plan key", lambda: structural_key([build()._node]))
    timed("launches only", lambda: backend.execute(plan.program, buffers, plan))
    timed("realize", lambda: build().realize())
    timed("fj.realize(t) (general path)", lambda: fj.realize(build()))
    import gc
    gc.disable()
    timed("realize, gc disabled", lambda: build().realize())
    gc.enable()
    pool = cp.get_default_memory_pool()
    print(f"pool used {pool.used_bytes() / 2**20:.0f} MiB, total {pool.total_bytes() / 2**20:.0f} MiB")
    print(f"kernels in plan: {len(plan.kernels)}")


if __name__ == "__main__":
    main()
