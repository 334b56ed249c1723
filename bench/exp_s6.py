"""Experiment (sixth session): outer reductions over a short inner kept run.

A reduction whose kept axes after its last reduced axis hold a few points (a middle axis
reduced before a last axis of 3; per-channel statistics of a channels-last image) reads,
per reduced point, a run of a few contiguous elements. The emitter tiled them 32 kept
points across, so a warp's lanes read runs of several outer points far apart (draw c's
u15, a min over axis 1 of 374x13355x3 float64, at 0.68x of torch.compile). Now a tile holds
one run across (padded to a power of two: ``Domain.short_inner_kept``,
``heuristics.short_run_tiles``). This times, per shape, the old tiling (the rule off), the
new default, the fuser's split decision turned around, and a grid of tiles around the default,
by CUDA events on the plan's launches; "% of copy" is the bytes read per second against a
copy's (bytes read and written per second, copying the input's size in the same run).

Run on the GPU machine: ``python3 bench/exp_s6.py [--only NAME] [--dry]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_s5 import shape_header, timers  # noqa: E402


def _op(name: str, axes: tuple[int, ...]) -> Callable[[Any], Any]:
    return lambda x: getattr(x, name)(axis=axes)


def _softmax1(x: Any) -> Any:
    import fusejit as fj
    return fj.softmax(x, axis=1)


def _batch_norm_nhwc(x: Any) -> Any:
    axes = (0, 1, 2)
    return (x - x.mean(axis=axes, keepdims=True)) / (x.std(axis=axes, keepdims=True) + 1e-5)


#: name -> shape, dtype, program
SHAPES: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "min f64 374x13355x3 axis 1 (u15)": ((374, 13355, 3), "float64", _op("min", (1,))),
    "sum f32 512x16384x3 axis 1": ((512, 16384, 3), "float32", _op("sum", (1,))),
    "mean f32 256x40000x5 axis 1": ((256, 40000, 5), "float32", _op("mean", (1,))),
    "max f16 1024x8192x6 axis 1": ((1024, 8192, 6), "float16", _op("max", (1,))),
    "sum f32 2000x4000x8 axis 1": ((2000, 4000, 8), "float32", _op("sum", (1,))),
    "sum f32 300x10000x12 axis 1": ((300, 10000, 12), "float32", _op("sum", (1,))),
    "sum f32 8x3000000x2 axis 1": ((8, 3000000, 2), "float32", _op("sum", (1,))),
    "sum f32 NHWC 128x224x224x3": ((128, 224, 224, 3), "float32", _op("sum", (0, 1, 2))),
    "var f32 NHWC 64x112x112x3": ((64, 112, 112, 3), "float32", _op("var", (0, 1, 2))),
    "sum f32 NHWC 64x56x56x24": ((64, 56, 56, 24), "float32", _op("sum", (0, 1, 2))),
    "softmax f32 4000x500x3 axis 1": ((4000, 500, 3), "float32", _softmax1),
    "batch norm f32 NHWC 64x112x112x3": ((64, 112, 112, 3), "float32", _batch_norm_nhwc),
}


def _chain4(x: Any, b: Any, s: Any, strided: bool) -> Any:
    """Draw d's u20: ``x[:, ::2]`` (or ``x``) through affine, ``y * y - b``, leaky, ``* s``."""
    import fusejit as fj
    y = x[:, ::2] if strided else x
    y = y * 1.5 - 0.25
    y = y * y - b
    y = fj.where(y > 0, y, 0.1 * y)
    return y * s


#: name -> stored shape of x, dtype, strided (x[:, ::2]): draw d's u20 (0.69x of torch.compile)
CHAINS: dict[str, tuple[tuple[int, int], str, bool]] = {
    "chain4 strided f16 327453x374 (u20)": ((327453, 374), "float16", True),
    "chain4 plain f32 1001x65537": ((1001, 65537), "float32", False),
    "chain4 plain f64 4097x8191": ((4097, 8191), "float64", False),
    "chain4 plain f32 4096x16384 (aligned)": ((4096, 16384), "float32", False),
    "chain4 plain f16 327453x187": ((327453, 187), "float16", False),
    "chain4 strided f32 327453x374": ((327453, 374), "float32", True),
    "chain4 strided f16 65536x4096": ((65536, 4096), "float16", True),
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--set", default="all", choices=("runs", "chains", "all"))
    p.add_argument("--only", default=None)
    p.add_argument("--no-2d", action="store_true", help="chains: flat blocks only")
    p.add_argument("--dry", action="store_true",
                   help="no GPU: the interpret backend at small shapes, one run each (a check)")
    args = p.parse_args()
    if args.dry:
        for key, (shape, dtype, fn) in SHAPES.items():
            SHAPES[key] = ((*[max(2, d // 40) for d in shape[:-1]], shape[-1]), dtype, fn)
    cp, time_plan, copy_us = timers(args.dry)

    import fusejit as fj
    from fusejit.codegen import heuristics as heur
    from fusejit.fuse import cost
    from fusejit.ir import domain as dom
    target = "interpret" if args.dry else "cuda"

    if args.set in ("chains", "all"):
        chains(args, cp, fj, heur, time_plan, copy_us)
    rule = dom.Domain.short_inner_kept
    red, split = heur.reduction_candidates, heur.split_candidates
    for name, (shape, dtype, fn) in SHAPES.items():
        if args.set == "chains":
            break
        if args.only and args.only not in name:
            continue
        x, base = shape_header(cp, copy_us, name, shape, dtype)  # (the copy moves 2x)
        results = []
        dom.Domain.short_inner_kept = property(lambda self: 0)
        try:
            results.append((*time_plan(fn(x)), "old tiling (rule off)"))
        finally:
            dom.Domain.short_inner_kept = rule
        results.append((*time_plan(fn(x)), "new default"))
        should_split = cost.should_split
        for forced in (True, False):  # the fuser's split decision turned around
            cost.should_split = lambda *a, forced=forced, **k: forced
            try:
                results.append((*time_plan(fn(x)), f"new, split forced {'on' if forced else 'off'}"))
            except Exception as exc:  # noqa: BLE001
                print(f"   failed split {forced}: {type(exc).__name__}: {str(exc)[:160]}")
            finally:
                cost.should_split = should_split
        # the grid: tiles of one or two runs across, reduced steps, warps
        run = None
        d = dom.Domain(shape, (1,), dom.OUTER_REDUCTION, frozenset())
        if len(shape) == 3:
            run = d.short_inner_kept
        elif len(shape) == 4:
            run = dom.Domain(shape, (0, 1, 2), dom.OUTER_REDUCTION, frozenset()).short_inner_kept
        if run:
            pad = heur.next_pow2(run)
            grid = []
            for across in (pad, 2 * pad):
                for step in (64, 128, 256, 512, 1024, 2048):
                    for warps in (4, 8):
                        if 512 <= across * step <= 8192 and heur._warps_ok(warps, across * step):
                            grid.append((across, step, warps))
            for across, step, warps in grid:
                def one_red(tgt: str, *a: Any, t: tuple = (across, step, warps), **k: Any) -> list:
                    full = heur.next_pow2(a[1])  # (rows, cols, ...)
                    return [heur.ReductionTiles(t[0], min(t[1], full), t[2], full <= t[1], "grid")]

                def one_split(tgt: str, *a: Any, t: tuple = (across, step, warps), **k: Any) -> list:
                    h = split(target, *a, **k)[0]
                    return [heur.SplitTiles(t[0], t[1], t[2], h.split, "grid")]
                heur.reduction_candidates, heur.split_candidates = one_red, one_split
                try:
                    us, how = time_plan(fn(x))
                    results.append((us, how, f"grid {across}x{step} w{warps}"))
                except Exception as exc:  # noqa: BLE001
                    print(f"   failed {across}x{step} w{warps}: {type(exc).__name__}: "
                          f"{str(exc)[:160]}")
                finally:
                    heur.reduction_candidates, heur.split_candidates = red, split
        for us, how, label in results[:4]:
            print(f"   {us:9.1f} us {50 * base / us:5.1f}% of copy  {label}: {how}")
        for us, _how, label in sorted(results[4:])[:5]:
            print(f"   {us:9.1f} us {50 * base / us:5.1f}% of copy  {label}")
        del x
        cp.get_default_memory_pool().free_all_blocks()
    return 0


def chains(args: Any, cp: Any, fj: Any, heur: Any, time_plan: Any, copy_us: Any
           ) -> None:
    """Pointwise chains over a strided view (``CHAINS``): flat 1-D blocks (the default) at other
    blocks and warps, against 2-D tiles over (rows, columns) (``pointwise_2d``, which the
    emitter uses for transposed reads only)."""
    from fusejit.codegen.pointwise import PointwiseEmitter
    point, tiles2 = heur.pointwise_candidates, heur.tiles_2d_candidates
    axis = PointwiseEmitter._transposed_axis
    for name, (shape, dtype, strided) in CHAINS.items():
        if args.only and args.only not in name:
            continue
        if args.dry:
            shape = (max(2, shape[0] // 400), shape[1])
        x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
        cols = shape[1] // 2 if strided else shape[1]
        b = fj.asarray(cp.random.standard_normal((cols,), dtype=cp.float32).astype(dtype))
        s = fj.asarray(cp.random.standard_normal((shape[0], 1), dtype=cp.float32).astype(dtype))
        item = np.dtype(dtype).itemsize
        moved = (shape[0] * shape[1] + shape[0] * cols) * item  # x read whole, the output written
        base = copy_us(moved // 2)
        print(f"== {name}: {moved / 1e6:.0f} MB moved; a copy of as many {base:.1f} us", flush=True)
        results = [(*time_plan(_chain4(x, b, s, strided)), "default")]
        for block in (256, 512, 1024, 2048, 4096):
            for warps in (1, 2, 4, 8):
                if not heur._warps_ok(warps, block) or block // (32 * warps) > 16:
                    continue
                one = heur.PointwiseTiles(block, warps, "grid")
                heur.pointwise_candidates = lambda *a, t=one, **k: [t]
                try:
                    us, _ = time_plan(_chain4(x, b, s, strided))
                    results.append((us, "", f"1-D blocks of {block}, {warps} warps"))
                finally:
                    heur.pointwise_candidates = point
        PointwiseEmitter._transposed_axis = lambda self: 0
        for tm, tn in () if args.no_2d else ((8, 256), (16, 128), (16, 256), (32, 64), (32, 128),
                                             (64, 64), (4, 512)):
            for warps in (4, 8):
                one2 = heur.Tiles2D(tm, tn, warps, "grid")
                heur.tiles_2d_candidates = lambda *a, t=one2, **k: [t]
                try:
                    us, _ = time_plan(_chain4(x, b, s, strided))
                    results.append((us, "", f"2-D tiles {tm}x{tn}, {warps} warps"))
                except Exception as exc:  # noqa: BLE001
                    print(f"   failed 2-D {tm}x{tn} w{warps}: {type(exc).__name__}: {str(exc)[:120]}")
                finally:
                    heur.tiles_2d_candidates = tiles2
        PointwiseEmitter._transposed_axis = axis
        us, how, label = results[0]
        print(f"   {us:9.1f} us {100 * base / us:5.1f}% of copy  {label}: {how}")
        for us, _how, label in sorted(results[1:])[:8]:
            print(f"   {us:9.1f} us {100 * base / us:5.1f}% of copy  {label}")
        del x, b, s
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    sys.exit(main())
