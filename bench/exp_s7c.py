"""Experiment (seventh session, run in the eighth): a short outer reduction fused with its
broadcast back (``FUSEJIT_OUTER_BROADCAST=1``, the default since for elements of at most 4
bytes) against two kernels (``=0``).

With the flag, softmax over a leading axis or a standardization over leading or middle axes
of at most 256 reduced elements is one kernel holding the reduced extent in one tile: one
read of the input where two kernels read it twice. This times both plans of each shape by
CUDA events on the plan's launches; "% of copy" is the bytes read and written once per
second against a copy's (same run). The fifth unseen draw's cases (``20261207:24``): u12
softmax over axis 0 of 127x74436 float16 (57.6 us in two kernels, torch.compile 48.4), u06
and u17 normalizes over axis 0 (81x256318, 11x24x16649: the latter's 264 reduced elements
stay two kernels).

Run on the GPU machine: ``python3 bench/exp_s7c.py [--only NAME] [--dry]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_s5 import shape_header, timers  # noqa: E402


def _softmax(axis: Any) -> Callable[[Any], Any]:
    def f(x: Any) -> Any:
        import fusejit as fj
        return fj.softmax(x, axis=axis)
    return f


def _normalize(axis: Any) -> Callable[[Any], Any]:
    return lambda x: (x - x.mean(axis=axis, keepdims=True)) / (x.std(axis=axis, keepdims=True)
                                                              + 1e-5)


#: name -> shape, dtype, program
SHAPES: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "softmax f16 127x74436 axis 0 (draw e u12)": ((127, 74436), "float16", _softmax(0)),
    "normalize f32 81x256318 axis 0 (draw e u06)": ((81, 256318), "float32", _normalize(0)),
    "softmax f32 200x131072 axis 0": ((200, 131072), "float32", _softmax(0)),
    "softmax f32 32x1048576 axis 0": ((32, 1048576), "float32", _softmax(0)),
    "normalize f32 256x65536 axis 0": ((256, 65536), "float32", _normalize(0)),
    "normalize f16 64x262144 axis 0": ((64, 262144), "float16", _normalize(0)),
    "softmax f32 1000x100x300 axis 1": ((1000, 100, 300), "float32", _softmax(1)),
    "normalize f32 16x12x65536 axes (0, 1)": ((16, 12, 65536), "float32", _normalize((0, 1))),
    "softmax f64 100x100000 axis 0": ((100, 100000), "float64", _softmax(0)),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None)
    p.add_argument("--dry", action="store_true",
                   help="no GPU: the interpret backend at small shapes, one run each (a check)")
    args = p.parse_args(argv)
    shapes = dict(SHAPES)
    if args.dry:
        shapes = {k: (tuple(max(2, d // 64) if i == len(s) - 1 else min(d, 40)
                            for i, d in enumerate(s)), dt, f)
                  for k, (s, dt, f) in shapes.items()}
    cp, time_plan, copy_us = timers(args.dry)

    import fusejit as fj
    for name, (shape, dtype, fn) in shapes.items():
        if args.only and args.only not in name:
            continue
        x, base = shape_header(cp, copy_us, name, shape, dtype)  # (as the fused kernel at best)
        for mode in ("0", "1"):
            os.environ["FUSEJIT_OUTER_BROADCAST"] = mode
            y = fn(x)
            us, how = time_plan(y)
            kernels = len(fj.plan(y).program.kernels)
            print(f"   {us:9.1f} us {100 * base / us:5.1f}% of copy  "
                  f"FUSEJIT_OUTER_BROADCAST={mode} ({kernels} kernel{'s' * (kernels > 1)}): "
                  f"{how[:160]}", flush=True)
        del x
        cp.get_default_memory_pool().free_all_blocks()
    os.environ.pop("FUSEJIT_OUTER_BROADCAST", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
