"""Launches for Nsight Compute: the cooperative wide-row kernels and a copy of the same bytes.

Why do the emitted cooperative softmax and layer norm over 256 rows of 2**18 float32 run at
79% and 72% of the copy rate on the H200 (92% and 85% on the H100)? Run under ``ncu`` on the
GPU machine (``bash bench/gpu_s28.sh n``), this launches each kernel ``--reps`` times
(``exp_s20_wide.emit_plan``, Triton's launcher: torch views of CuPy buffers, this script
only), with a CuPy copy of the same bytes first, so that the profile shows each one's DRAM
throughput, achieved occupancy, registers and warp stall reasons side by side.

``python3 bench/ncu_wide.py [--shape RxC] [--reps N] [--chunk C]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="256x262144")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--chunk", type=int, default=0, help="elements a program holds (0: default)")
    args = p.parse_args(argv)
    import cupy as cp
    from exp_s20_wide import EPS, emit_plan
    from exp_wide_softmax import direct_launch

    rows, cols = (int(v) for v in args.shape.split("x"))
    rng = cp.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=cp.float32) * 4 + 1
    w = rng.standard_normal(cols, dtype=cp.float32)
    b = rng.standard_normal(cols, dtype=cp.float32)
    y = cp.empty_like(x)
    for _ in range(args.reps):
        cp.copyto(y, x)
    for kind in ("softmax", "layer_norm"):
        emitted = emit_plan(kind, x, w, b, chunk=args.chunk)
        arrays = [x] if kind == "softmax" else [x, EPS, w, b]
        run, _ = direct_launch(emitted, arrays)
        for _ in range(args.reps):
            run()
    cp.cuda.get_current_stream().synchronize()
    print("launched", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
