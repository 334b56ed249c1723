"""Host cost of the composites with and without their templates (``fusejit.frontend.templates``),
interleaved in one process (best of 15 rounds of 300 calls, process CPU time): recording,
realize with the same input, realize of a new input each call.

Run: ``python bench/host_templates.py [--backend fake-cuda|cuda|numpy]`` (``fake-cuda``: the
``cuda`` backend's host code on ``tests/fake_cupy.py``, no GPU).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_cost  # noqa: E402

import fusejit as fj  # noqa: E402
from fusejit.frontend import reductions  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="fake-cuda", choices=("fake-cuda", "cuda", "numpy"))
    args = p.parse_args()
    backend = args.backend
    if backend == "fake-cuda":
        host_cost.install_fake_cuda()
        backend = "cuda"
    fj.set_backend(backend)
    clock = time.process_time if backend != "cuda" or args.backend == "fake-cuda" else time.perf_counter
    on, off = reductions.layer_norm, reductions.layer_norm.__wrapped__
    sm_on, sm_off = reductions.softmax, reductions.softmax.__wrapped__
    ln_x, = host_cost._arrays(backend, (256, 1024), 1)
    ln_w, ln_b = host_cost._arrays(backend, (1024,), 2)
    lx, lw, lb = fj.asarray(ln_x), fj.asarray(ln_w), fj.asarray(ln_b)
    cases = {
        "layer_norm 256x1024 record, template": lambda: on(lx, lw, lb),
        "layer_norm 256x1024 record, recorded": lambda: off(lx, lw, lb),
        "layer_norm realize, template": lambda: on(lx, lw, lb).realize(),
        "layer_norm realize, recorded": lambda: off(lx, lw, lb).realize(),
        "layer_norm realize of a new input, template": lambda: on(fj.asarray(ln_x), lw, lb).realize(),
        "layer_norm realize of a new input, recorded": lambda: off(fj.asarray(ln_x), lw, lb).realize(),
        "softmax 256x1024 realize, template": lambda: sm_on(lx).realize(),
        "softmax 256x1024 realize, recorded": lambda: sm_off(lx).realize(),
    }
    best = {k: 1e9 for k in cases}
    for _ in range(15):
        for k, f in cases.items():
            for _ in range(20):
                f()
            host_cost._sync()
            t = clock()
            for _ in range(300):
                f()
            host_cost._sync()
            best[k] = min(best[k], (clock() - t) / 300 * 1e6)
    print(f"backend: {args.backend}")
    for k, v in best.items():
        print(f"  {k:48s} {v:7.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
