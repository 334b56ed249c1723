"""Would a CUDA graph of a cached plan pay? (issue 10: "try a CUDA graph of the whole plan
where it pays and keep it only if the measurement says so").

Run on the GPU machine: ``python3 bench/exp_cuda_graph.py``. For plans of 1, 2 and 4 kernels
on small inputs (where host cost is everything), times per call, in microseconds of host time
with the GPU kept busy:

- ``launches``: the cached plan's launches as ``realize`` and ``fj.jit`` run them (fresh
  outputs from CuPy's pool each call);
- ``graph``: ``cupy.cuda.Graph.launch`` of the same launches captured once. A graph replays
  into the buffers it was captured with, so a real use would also need those outputs copied
  out (or handed out once and recaptured); the figure is the floor of what a graph could give.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np


def main() -> None:
    """Print the comparison."""
    import cupy as cp

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    x = cp.random.standard_normal((256, 1024), dtype=cp.float32)
    w, b = cp.ones(1024, cp.float32), cp.zeros(1024, cp.float32)
    tx, tw, tb = fj.asarray(x), fj.asarray(w), fj.asarray(b)
    programs = {
        "5-op pointwise (1 kernel)": lambda: (tx * 2.0 + 1.0) * fj.exp(tx) - tx / 3.0,
        "layer norm (1 kernel)": lambda: fj.layer_norm(tx, tw, tb, eps=1e-5),
        "sum(0) then scale (2 kernels?)": lambda: tx / fj.sum(tx * tx, axis=0),
        "four chained reductions": lambda: fj.sum(fj.exp(tx - fj.max(tx, axis=0)), axis=0)
        + fj.sum(tx, axis=1).sum() + fj.max(fj.sum(tx, axis=0)),
    }
    stream = cp.cuda.Stream(non_blocking=True)
    for name, build in programs.items():
        y = build()
        plan = fj.plan(y)
        # the plan's inputs, in order: arrays of the leaves, scalars as values
        _, found = structural_key([y._node])
        buffers = [leaf.buffer for leaf in found]
        with stream:
            run = partial(backend.execute, plan.program, buffers, plan)
            for _ in range(5):
                run()
            stream.synchronize()
            reps = 2000
            t = time.perf_counter()
            for _ in range(reps):
                run()
            host_launch = (time.perf_counter() - t) / reps * 1e6
            stream.synchronize()
            try:
                stream.begin_capture()
                outs = run()
                graph = stream.end_capture()
                graph.launch(stream)
                stream.synchronize()
                t = time.perf_counter()
                for _ in range(reps):
                    graph.launch(stream)
                host_graph = (time.perf_counter() - t) / reps * 1e6
                stream.synchronize()
                ok = all(np.allclose(cp.asnumpy(o), cp.asnumpy(r))
                         for o, r in zip(outs, run()))
                graph_text = f"{host_graph:6.1f} us (same results: {ok})"
            except Exception as exc:  # noqa: BLE001
                graph_text = f"failed: {type(exc).__name__}: {exc}"[:200]
        print(f"{name:34s} kernels {len(plan.kernels)}  launches {host_launch:6.1f} us   "
              f"graph {graph_text}", flush=True)


if __name__ == "__main__":
    main()
