"""Why does ``realize`` of the suite's sin-heavy workload (6 rounds of sin and cos over 2**26
float32) run 9% slower than its kernel on the H200 (781.5 us against 717.1, nineteenth
session), where a 717 us kernel should hide a realize's host work? (issue 9)

The suite times rounds of back-to-back calls lasting about 2 ms (3 calls here): the first
call's host work (building the graph, finding the plan, launching) is not hidden behind a
kernel, so a round is ``host + 3 x kernel`` at least. This prints, on the ``cuda`` backend:

* the host seconds of one ``realize`` (no synchronization) and of building the graph alone;
* GPU time per call (CUDA events) in rounds of 1, 3, 10 and 30 calls, through ``realize``
  and through the cached plan's launches alone: if the gap is the first call's host work
  it shrinks as 1/calls;
* the top of a profile of 200 realizes (where the host time goes).

Run on the GPU machine: ``python3 bench/exp_s22_host.py``.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def sin_heavy(xp: Any, x: Any) -> Any:
    y = x
    for _ in range(6):
        y = xp.sin(y) * 1.5 + xp.cos(y) * 0.5
    return y


def main() -> int:
    import cupy as cp
    from exp_reductions import event_time  # (median of rounds of back-to-back calls)

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import _plans, current
    fj.set_backend("cuda")
    stream = cp.cuda.get_current_stream()
    for n in (1 << 26, 1 << 22, 1 << 16):
        x = fj.asarray(cp.random.standard_normal(n, dtype=cp.float32))
        sin_heavy(fj, x).realize()
        stream.synchronize()
        t = time.perf_counter()
        for _ in range(200):
            sin_heavy(fj, x)
        build = (time.perf_counter() - t) / 200
        stream.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            sin_heavy(fj, x).realize()
        host = (time.perf_counter() - t) / 50
        stream.synchronize()
        key, found = structural_key([sin_heavy(fj, x)._node])
        plan = _plans[key]
        buffers = [leaf.buffer for leaf in found]
        backend = current()

        def realize(x: Any = x) -> Any:
            return sin_heavy(fj, x).realize()

        def launch(plan: Any = plan, buffers: Any = buffers, backend: Any = backend) -> Any:
            return backend.execute(plan.program, buffers, plan)

        line = [f"n={n}: build {build * 1e6:.1f} us, realize (host, unsynchronized) "
                f"{host * 1e6:.1f} us; GPU us per call in rounds of"]
        for calls in (1, 3, 10, 30):
            got = []
            for name, fn in (("realize", realize), ("launches", launch)):
                got.append(f"{name} {event_time(fn, rounds=9, reps=calls) * 1e6:.1f}")
            line.append(f"  {calls}: " + ", ".join(got))
        print("\n".join(line), flush=True)
    prof = cProfile.Profile()
    x = fj.asarray(cp.random.standard_normal(1 << 16, dtype=cp.float32))
    prof.enable()
    for _ in range(200):
        sin_heavy(fj, x).realize()
    prof.disable()
    stream.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(30)
    print(s.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
