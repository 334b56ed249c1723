"""Plan a 10,000-node program with the greedy fusion pass; prints seconds (target: < 1 s).

The program is a stack of transformer-like blocks over one [64, 256] float32
activation: layer norm, a softmax, reductions over both axes broadcast back,
pointwise chains, transposes and slices, so every rule and the cost model are
exercised, not only the pointwise fast path.

    python bench/bench_fusion.py [--nodes N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fusejit as fj
from fusejit.fuse import build_plan
from fusejit.ir.graph import lower


def build(nodes: int) -> tuple[object, int]:
    """A Program of about ``nodes`` instructions and its instruction count."""
    rng = np.random.default_rng(0)
    h = fj.asarray(rng.standard_normal((64, 256)).astype(np.float32), name="x")
    w = fj.asarray(rng.standard_normal(256).astype(np.float32), name="w")
    b = fj.asarray(rng.standard_normal(256).astype(np.float32), name="b")
    outs = []
    layer = 0
    while True:
        program, _, _ = lower([h._node, *[o._node for o in outs]])
        if len(program.body) >= nodes:
            return program, len(program.body)
        for _ in range(8):  # grow in steps, lowering only now and then
            layer += 1
            y = fj.layer_norm(h, w, b)
            y = y + fj.softmax(y * (1.0 + layer % 5))
            y = fj.maximum(y, 0) * 0.5 + fj.tanh(y) * 0.5
            y = y - y.mean(0, keepdims=True)           # leading-axis reduce, broadcast back
            z = (y.T * 2).T[:, ::-1]                   # views of computed values
            y = fj.sqrt(fj.abs(z)) + 1
            h = h + y * 0.1
            if layer % 16 == 0:
                outs.append(fj.sum(h, -1))              # side outputs: materialized values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    program, n = build(args.nodes)
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        plan = build_plan(program)
        best = min(best, time.perf_counter() - start)
    print(f"planned {n} instructions into {len(plan.regions)} kernels "
          f"({plan.num_launches} launches) in {best:.3f} s (best of {args.repeat})")


if __name__ == "__main__":
    main()
