"""Do the cooperative row kernels lose occupancy to registers? (issue 9, wide rows)

The cooperative softmax over rows of 2**18 float32 uses 127 registers per thread (four
programs of 4 warps per SM), the layer norm with a weight and a bias 166 (three). This
launches each as emitted under Triton's ``maxnreg`` caps, so that ptxas fits more programs
per SM (spilling or loading in smaller batches where it must), and checks each against a
float64 reference.

Result (``bench/results/h200-s3-2026-12-02.md``): no cap that helps at both shapes. Softmax
under 96 registers ran at 86% at 256x2**18 (83% uncapped) and 62% at 1024x2**16; layer norm
under 128 at 73% and 71% (72% and 73% uncapped); tighter caps spill.

Run (GPU machine, torch installed: Triton's launcher takes torch views):
``python3 bench/exp_coop_regs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CAPS = {"softmax": (None, 112, 96, 80), "layer_norm": (None, 128, 112, 96)}


def main() -> int:
    """Time each kernel under each cap beside a copy (CUDA events)."""
    import cupy as cp
    from exp_coop_ln import layer_norm_reference
    from exp_reductions import event_time
    from exp_wide_softmax import direct_launch_us

    import fusejit as fj
    import fusejit.codegen.heuristics as heuristics
    from fusejit.codegen import emit_kernel

    def events(fn: Any) -> float:
        return event_time(fn) * 1e6

    heuristics.COOPERATIVE_ROWS = True
    for rows, cols in ((256, 1 << 18), (1024, 1 << 16)):
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4 + 1
        w = cp.random.standard_normal(cols, dtype=cp.float32)
        b = cp.random.standard_normal(cols, dtype=cp.float32)
        y = cp.empty_like(x)
        copy_us = events(lambda x=x, y=y: cp.copyto(y, x))
        print(f"{rows}x{cols} float32: copy {copy_us:8.1f} us", flush=True)
        e = cp.exp(x.astype(cp.float64) - x.max(axis=1, keepdims=True))
        cases = {"softmax": (lambda t: fj.softmax(t[0], axis=-1), [x],
                             e / e.sum(axis=1, keepdims=True)),
                 "layer_norm": (lambda t: fj.layer_norm(*t), [x, 1e-5, w, b],
                                layer_norm_reference(x, w, b))}
        for name, (build, args, want) in cases.items():
            arrays = [a for a in args if not isinstance(a, float)]
            with fj.using_backend("interpret"):  # (planned only)
                zeros = [fj.asarray(np.zeros(a.shape, np.float32)) for a in arrays]
                (kernel,) = fj.plan(build(zeros)).program.kernels
            emitted = emit_kernel(kernel, None, "cuda")
            for cap in CAPS[name]:
                try:
                    outs: list[Any] = []
                    us = direct_launch_us(emitted, args, events, outputs=outs, maxnreg=cap)
                    err = float(cp.abs(outs[0] - want).max())
                    print(f"  {name:10s} maxnreg {cap or '-':>4} {us:8.1f} us  "
                          f"{100 * copy_us / us:5.1f}% of copy  max abs err {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001  (report, go on)
                    print(f"  {name} maxnreg {cap}: failed {type(exc).__name__}: {exc}"[:300],
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
