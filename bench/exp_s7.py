"""Experiment (seventh session): how many partials should a split reduction write?

``heuristics.choose_split`` gives a split reduction about ``TARGET_PROGRAMS`` (4 per SM)
programs in all: ``ceil(528 / row blocks)`` partials per output. Sum over axes (0, 2) of
64x4096x256 float32 gets 128 row blocks x 5 = 640 programs and ran at 0.91-1.08x of
torch.compile between runs; the autotuner preferred 8 partials (1,024 programs) there. One
explanation is wave quantization: 640 programs are 1.2 waves of 528 resident ones, the last
0.2 wave running with a fifth of the GPU's loads in flight. This times every split
reduction of a family of shapes (multi-axis, leading, middle and full reductions, a Welford
variance, float16) at its default partial count and at 1/2, 3/2, 2, 3 and 4 times it, with
the heuristic's tiles otherwise, by CUDA events on the plan's launches; "% of copy" is the
bytes read per second against a copy's (bytes read and written per second, same run).

Run on the GPU machine: ``python3 bench/exp_s7.py [--only NAME] [--dry]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_s5 import shape_header, timers  # noqa: E402


def _op(name: str, axes: tuple[int, ...] | int | None) -> Callable[[Any], Any]:
    return lambda x: getattr(x, name)(axis=axes)


#: name -> shape, dtype, program
SHAPES: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "sum f32 64x4096x256 axes (0, 2) (suite L)": ((64, 4096, 256), "float32", _op("sum", (0, 2))),
    "sum f32 16x1024x256 axes (0, 2) (suite S)": ((16, 1024, 256), "float32", _op("sum", (0, 2))),
    "sum f32 32x8192x128 axes (0, 2)": ((32, 8192, 128), "float32", _op("sum", (0, 2))),
    "sum f32 128x2048x512 axes (0, 2)": ((128, 2048, 512), "float32", _op("sum", (0, 2))),
    "sum f32 100x3001x257 axes (0, 2)": ((100, 3001, 257), "float32", _op("sum", (0, 2))),
    "sum f32 8x512x16384 axes (0, 2)": ((8, 512, 16384), "float32", _op("sum", (0, 2))),
    "mean f16 64x4096x256 axes (0, 2)": ((64, 4096, 256), "float16", _op("mean", (0, 2))),
    "var f32 64x4096x256 axes (0, 2)": ((64, 4096, 256), "float32", _op("var", (0, 2))),
    "sum f32 65536x1024 axis 0 (suite L)": ((65536, 1024), "float32", _op("sum", 0)),
    "sum f32 1048576x32 axis 0 (suite M)": ((1048576, 32), "float32", _op("sum", 0)),
    "sum f32 300007x200 axis 0": ((300007, 200), "float32", _op("sum", 0)),
    "sum f32 2**26 (suite L)": ((1 << 26,), "float32", _op("sum", None)),
    "sum f64 3001x7001 all": ((3001, 7001), "float64", _op("sum", None)),
    "max f32 4x16777216 axis 1": ((4, 1 << 24), "float32", _op("max", 1)),
}

#: partial counts tried, as multiples of the default
FACTORS = (0.5, 1.5, 2, 3, 4)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None)
    p.add_argument("--dry", action="store_true",
                   help="no GPU: the interpret backend at small shapes, one run each (a check)")
    args = p.parse_args()
    if args.dry:
        for key, (shape, dtype, fn) in SHAPES.items():
            SHAPES[key] = (tuple(max(2, d // 64) for d in shape), dtype, fn)
    cp, time_plan, copy_us = timers(args.dry)

    from fusejit.codegen import heuristics as heur
    target = "interpret" if args.dry else "cuda"
    original = heur.split_candidates
    for name, (shape, dtype, fn) in SHAPES.items():
        if args.only and args.only not in name:
            continue
        x, base = shape_header(cp, copy_us, name, shape, dtype)  # (the copy moves 2x)
        seen: dict[str, Any] = {}

        def spy(tgt: str, *a: Any, seen: dict = seen, **k: Any) -> list:
            out = original(target, *a, **k)
            seen.setdefault("h", out[0])
            seen.setdefault("rows", a[0])
            return out[:1]
        heur.split_candidates = spy
        try:
            us, how = time_plan(fn(x))
        finally:
            heur.split_candidates = original
        if "h" not in seen:
            print(f"   {us:9.1f} us {50 * base / us:5.1f}% of copy  not split: {how}")
            continue
        h = seen["h"]
        blocks = -(-seen["rows"] // h.block_m)
        rows = [(us, h.split, "default")]
        for f in FACTORS:
            s = max(1, min(heur.SPLIT_MAX, int(round(h.split * f))))
            if s == h.split or any(r[1] == s for r in rows):
                continue

            def forced(tgt: str, *a: Any, s: int = s, **k: Any) -> list:
                t = original(target, *a, **k)[0]
                step = max(1, min(t.block_n, heur.next_pow2(-(-a[1] // s))))
                return [heur.SplitTiles(t.block_m, step, t.num_warps, s, "forced")]
            heur.split_candidates = forced
            try:
                rows.append((time_plan(fn(x))[0], s, f"{f}x"))
            except Exception as exc:  # noqa: BLE001
                print(f"   failed split {s}: {type(exc).__name__}: {str(exc)[:160]}")
            finally:
                heur.split_candidates = original
        print(f"   tiles {h.block_m}x{h.block_n} w{h.num_warps}, {blocks} row blocks; {how}")
        for t, s, label in rows:
            print(f"   {t:9.1f} us {50 * base / t:5.1f}% of copy  split {s:4d} "
                  f"({blocks * s:6d} programs, {blocks * s / heur.TARGET_PROGRAMS:5.2f} x "
                  f"TARGET_PROGRAMS)  {label}")
        del x
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
