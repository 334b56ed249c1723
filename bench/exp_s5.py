"""Experiment (fifth session): what the third unseen draw (seed 20261205) found far from the
copy rate or from the peers, each kernel under a few tilings, timed by CUDA events on the
plan's launches beside a copy of the same bytes.

- **Transposed pointwise** (``--set transpose``): an output read from an input contiguous
  along another axis. A short such axis (an [N, 3] input written as [3, N]: draw c's u22,
  0.57x of torch.compile) ran as flat blocks, reading the input 3 elements apart; now 2-D
  tiles. The grid: flat blocks (the old path) and tiles of every shape and warps; odd long
  axes too (u20: 769, at 0.82x).
- **Rows of 16K-64K elements** (``--set rows``): looped rows (two passes) ran at 32-52% of
  the copy rate (u07 float16 softmax of 25379, u19 log_softmax of 22301); against the
  cooperative kernel (today from 128 KB rows) at narrower rows, float16 chunks of more
  elements, and rows of 32768 held in registers.

Run on the GPU machine: ``python3 bench/exp_s5.py [--set transpose|rows|all] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def chain(x: Any) -> Any:
    import fusejit as fj
    return fj.sqrt(fj.abs(x.T) + 0.5) * 2.0


#: name -> stored shape, dtype (the program reads the input transposed)
TRANSPOSE = {
    "t3_f64 (u22)": ((10313439, 3), "float64"),
    "t3_f32": ((20000000, 3), "float32"),
    "t2_f32": ((30000000, 2), "float32"),
    "t5_f32": ((12000000, 5), "float32"),
    "t7_f16": ((16000000, 7), "float16"),
    "t769_f32 (u20)": ((35118, 769), "float32"),
    "t333_f32": ((60000, 333), "float32"),
    "t4096_f32": ((8192, 4096), "float32"),
}


def _softmax(x: Any) -> Any:
    import fusejit as fj
    return fj.softmax(x, axis=-1)


def _log_softmax(x: Any) -> Any:
    import fusejit as fj
    return fj.log_softmax(x, axis=-1)


def _layer_norm(x: Any) -> Any:
    import fusejit as fj
    return fj.layer_norm(x)


ROWS = {
    "softmax f16 2412x25379 (u07)": ((2412, 25379), "float16", _softmax),
    "log_softmax f32 427x22301 (u19)": ((427, 22301), "float32", _log_softmax),
    "softmax f32 2000x20000": ((2000, 20000), "float32", _softmax),
    "softmax f16 1000x60000": ((1000, 60000), "float16", _softmax),
    "layer_norm f32 4000x20000": ((4000, 20000), "float32", _layer_norm),
    "softmax f32 4000x30000": ((4000, 30000), "float32", _softmax),
    "log_softmax f16 175x149440 (u17)": ((175, 149440), "float16", _log_softmax),
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--set", default="all", choices=("transpose", "rows", "all", "round2"))
    p.add_argument("--only", default=None)
    p.add_argument("--dry", action="store_true",
                   help="no GPU: shapes / 1000 on the interpret backend, one run each (a check)")
    args = p.parse_args()
    if args.dry:
        for table in (TRANSPOSE, ROWS, TRANSPOSE2, ROWS2, F16ROWS):
            for key, spec in table.items():
                table[key] = ((max(2, spec[0][0] // 1000), spec[0][1]), *spec[1:])
    cp, time_plan, copy_us = timers(args.dry)

    import fusejit as fj
    from fusejit.codegen import heuristics as heur
    from fusejit.codegen.pointwise import PointwiseEmitter
    from fusejit.runtime import forget_plans

    if args.set in ("transpose", "all"):
        original = heur.tiles_2d_candidates
        original_axis = PointwiseEmitter._transposed_axis
        for name, (shape, dtype) in TRANSPOSE.items():
            if args.only and args.only not in name:
                continue
            x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
            nbytes = 2 * int(np.prod(shape)) * np.dtype(dtype).itemsize
            base = copy_us(nbytes)
            m, n = shape[1], shape[0]
            print(f"== {name} stored {shape} {dtype}: copy of {nbytes / 1e6:.0f} MB {base:.1f} us",
                  flush=True)
            results = []
            PointwiseEmitter._transposed_axis = lambda self: None
            us, _ = time_plan(chain(x))
            results.append((us, "flat 1-D blocks (the old path)"))
            PointwiseEmitter._transposed_axis = original_axis
            h = heur.tiles_2d("cuda", m, n)
            grid = [h]
            mp, np2 = heur.next_pow2(m), heur.next_pow2(n)
            tms = [mp] if mp < 16 else [16, 32, 64, 128]
            for tm in tms:
                for tn in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096):
                    if tn > np2 or not 512 <= tm * tn <= 16384:
                        continue
                    for w in (2, 4, 8):
                        if heur._warps_ok(w, tm * tn):
                            grid.append(heur.Tiles2D(tm, tn, w, "grid"))
            seen = set()
            for t in grid:
                key = (t.tile_m, t.tile_n, t.num_warps)
                if key in seen:
                    continue
                seen.add(key)
                heur.tiles_2d_candidates = lambda *a, t=t, **k: [t]
                try:
                    us, _ = time_plan(chain(x))
                except Exception as exc:  # noqa: BLE001
                    print(f"   failed {key}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                label = f"{t.tile_m}x{t.tile_n} w{t.num_warps}" + (" (heuristic)" if t is h else "")
                results.append((us, label))
            heur.tiles_2d_candidates = original
            for us, label in results[:2]:
                print(f"   {us:8.1f} us {100 * base / us:5.1f}% of copy  {label}")
            for us, label in sorted(results[2:])[:6]:
                print(f"   {us:8.1f} us {100 * base / us:5.1f}% of copy  {label}")
            del x
            cp.get_default_memory_pool().free_all_blocks()

    if args.set in ("rows", "all"):
        saved = (heur.COOP_MIN_ROW_BYTES, dict(heur.COOP_CHUNK), heur.COOP_MAX_WARPS,
                 dict(heur.PERSISTENT_LIMIT))

        def restore() -> None:
            heur.COOP_MIN_ROW_BYTES, chunk, heur.COOP_MAX_WARPS, limit = saved
            heur.COOP_CHUNK.update(chunk)
            heur.PERSISTENT_LIMIT.update(limit)

        def coop(min_bytes: int, chunk: int = 8192, warps: int = 4) -> None:
            heur.COOP_MIN_ROW_BYTES, heur.COOP_MAX_WARPS = min_bytes, warps
            heur.COOP_CHUNK["cuda"] = chunk
            heur.PERSISTENT_LIMIT["cuda"] = max(chunk, saved[3]["cuda"])

        def held(limit: int) -> None:
            heur.PERSISTENT_LIMIT["cuda"] = limit
            heur.COOP_MIN_ROW_BYTES = 1 << 30

        variants: list[tuple[str, Callable[[], None]]] = [
            ("default", lambda: None),
            ("looped (no cooperative)", lambda: held(saved[3]["cuda"])),
            ("cooperative from 32 KB, chunks 8192, 4 warps", lambda: coop(1 << 15)),
            ("cooperative from 32 KB, chunks 4096, 4 warps", lambda: coop(1 << 15, 4096)),
            ("cooperative from 32 KB, chunks 16384, 8 warps", lambda: coop(1 << 15, 16384, 8)),
            ("cooperative from 32 KB, chunks 16384, 4 warps", lambda: coop(1 << 15, 16384, 4)),
            ("rows of 32768 in registers", lambda: held(32768)),
        ]
        for name, (shape, dtype, fn) in ROWS.items():
            if args.only and args.only not in name:
                continue
            x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
            nbytes = 2 * int(np.prod(shape)) * np.dtype(dtype).itemsize
            base = copy_us(nbytes)
            print(f"== {name}: copy of {nbytes / 1e6:.0f} MB {base:.1f} us", flush=True)
            for label, setup in variants:
                setup()
                try:
                    t0 = time.perf_counter()
                    us, how = time_plan(fn(x))
                    print(f"   {us:8.1f} us {100 * base / us:5.1f}% of copy  {label}  "
                          f"({time.perf_counter() - t0:.1f} s)  [{how}]", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"   failed {label}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                restore()
            del x
            cp.get_default_memory_pool().free_all_blocks()
    if args.set == "round2":
        round2(fj, cp, heur, time_plan, copy_us, args.only)
    forget_plans()
    return 0


#: second round (after the first's figures): odd transposed axes under the tiles that led
#: there, at more widths
TRANSPOSE2 = {
    "t769_f32": ((35118, 769), "float32"),
    "t333_f32": ((60000, 333), "float32"),
    "t1000_f32": ((30000, 1000), "float32"),
    "t999_f32": ((30000, 999), "float32"),
    "t4096_f32": ((8192, 4096), "float32"),
    "t2000_f64": ((8000, 2000), "float64"),
    "t1531_f16": ((40000, 1531), "float16"),
}
TILES2 = [(64, 64, 4), (64, 64, 8), (64, 128, 4), (64, 128, 8), (32, 128, 8), (32, 256, 8),
          (128, 64, 8), (32, 64, 8)]
#: rows of 16K-32K float32 held in registers (16 warps) against looped, by row count; and
#: float16 looped rows by step and warps
ROWS2 = {
    "softmax f32 500x24000": ((500, 24000), "float32", _softmax),
    "softmax f32 800x24000": ((800, 24000), "float32", _softmax),
    "softmax f32 1100x24000": ((1100, 24000), "float32", _softmax),
    "softmax f32 1600x17000": ((1600, 17000), "float32", _softmax),
    "layer_norm f32 1200x32000": ((1200, 32000), "float32", _layer_norm),
    "var f32 3000x20000": ((3000, 20000), "float32", lambda x: x.var(axis=1)),
    "log_softmax f32 6000x18000": ((6000, 18000), "float32", _log_softmax),
}
F16ROWS = {
    "softmax f16 2412x25379 (u07)": ((2412, 25379), "float16", _softmax),
    "softmax f16 1000x60000": ((1000, 60000), "float16", _softmax),
    "layer_norm f16 3000x40000": ((3000, 40000), "float16", _layer_norm),
}


def round2(fj: Any, cp: Any, heur: Any, time_plan: Any, copy_us: Any,
           only: str | None) -> None:
    """The second round's three grids (``--set round2``)."""
    original = heur.tiles_2d_candidates
    for name, (shape, dtype) in TRANSPOSE2.items():
        if only and only not in name:
            continue
        x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        base = copy_us(nbytes)  # (copies nbytes: reads and writes what the program does)
        print(f"== {name} stored {shape} {dtype}: copy {base:.1f} us", flush=True)
        for tm, tn, w in TILES2:
            heur.tiles_2d_candidates = lambda *a, t=(tm, tn, w), **k: [
                heur.Tiles2D(*t, "grid")]
            try:
                us, _ = time_plan(chain(x))
                print(f"   {us:8.1f} us {100 * base / us:5.1f}% of copy  {tm}x{tn} w{w}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"   failed {tm}x{tn} w{w}: {type(exc).__name__}: {str(exc)[:100]}")
        heur.tiles_2d_candidates = original
        del x
        cp.get_default_memory_pool().free_all_blocks()
    saved_limit = dict(heur.PERSISTENT_LIMIT)
    saved_tile, saved_reduction = heur.TILE_ELEMENTS, heur.reduction_tiles
    for table, variants in (
            (ROWS2, [("looped (default)", {}), ("in registers, 16 warps", {"limit": 32768})]),
            (F16ROWS, [("default", {}), ("steps x2", {"tile": 8192}),
                       ("steps x2, 16 warps", {"tile": 8192, "warps": 16}),
                       ("steps x4", {"tile": 16384}), ("steps x1, 16 warps", {"warps": 16}),
                       ("in registers 32768, 16 warps", {"limit": 32768, "warps": 16})])):
        for name, (shape, dtype, fn) in table.items():
            if only and only not in name:
                continue
            x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
            nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
            base = copy_us(nbytes)
            print(f"== {name}: copy {base:.1f} us", flush=True)
            for label, v in variants:
                if "limit" in v:
                    heur.PERSISTENT_LIMIT["cuda"] = v["limit"]
                if "tile" in v:
                    heur.TILE_ELEMENTS = v["tile"]
                if "warps" in v:
                    def forced(*a: Any, w: int = v["warps"], **k: Any) -> Any:
                        t = saved_reduction(*a, **k)
                        return heur.ReductionTiles(t.block_m, t.block_n, w, t.persistent, t.why)
                    heur.reduction_tiles = forced
                try:
                    us, how = time_plan(fn(x))
                    print(f"   {us:8.1f} us {100 * base / us:5.1f}% of copy  {label}  [{how[:150]}]",
                          flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"   failed {label}: {type(exc).__name__}: {str(exc)[:160]}", flush=True)
                heur.PERSISTENT_LIMIT.update(saved_limit)
                heur.TILE_ELEMENTS, heur.reduction_tiles = saved_tile, saved_reduction
            del x
            cp.get_default_memory_pool().free_all_blocks()


def timers(dry: bool) -> tuple[Any, Callable[[Any], tuple[float, str]], Callable[[int], float]]:
    """(cp, time_plan, copy_us) of an experiment, fusejit's backend set: on the GPU, CuPy and
    CUDA events (``exp_reductions.event_time``); with ``dry``, NumPy under CuPy's names and the
    interpret backend, one wall-clock run each (a check that the script works).

    ``time_plan(y)``: microseconds per run of ``y``'s plan (planned afresh: a heuristic
    switched since takes effect) and its tiling lines; ``copy_us(nbytes)``: a copy of
    ``nbytes`` (it moves twice that)."""
    if dry:
        cp = dry_cupy()

        def event_time(fn: Callable[[], Any]) -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    else:
        import cupy as cp
        from exp_reductions import event_time

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    fj.set_backend("interpret" if dry else "cuda")
    backend = current()

    def time_plan(y: Any) -> tuple[float, str]:
        forget_plans()
        plan = fj.plan(y)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        run: Callable[[], Any] = lambda: backend.execute(plan.program, buffers, plan)  # noqa: E731
        run()
        how = "; ".join(line.strip() for line in plan.explain().splitlines()
                        if "tiling" in line and "heuristics" not in line)
        return event_time(run) * 1e6, how[:300]

    def copy_us(nbytes: int) -> float:
        a = cp.empty(nbytes // 4, dtype=cp.float32)
        b = cp.empty_like(a)
        return event_time(lambda: cp.copyto(b, a)) * 1e6

    return cp, time_plan, copy_us


def shape_header(cp: Any, copy_us: Any, name: str, shape: tuple[int, ...], dtype: str
                 ) -> tuple[Any, float]:
    """A standard normal input of ``shape`` and ``dtype`` (a fusejit tensor) and the time of a
    copy of its bytes (moving twice them), after a line naming the shape with both."""
    import fusejit as fj
    x = fj.asarray(cp.random.standard_normal(shape, dtype=cp.float32).astype(dtype))
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    base = copy_us(nbytes)
    print(f"== {name}: {nbytes / 1e6:.0f} MB read; a copy of it {base:.1f} us "
          f"({2 * nbytes / base / 1e6:.0f} GB/s)", flush=True)
    return x, base


def dry_cupy() -> Any:
    """NumPy under the few names of CuPy this script uses (``--dry``)."""
    import types
    ns = types.SimpleNamespace(**{k: getattr(np, k) for k in ("empty", "empty_like", "copyto",
                                                              "float32")})
    ns.random = types.SimpleNamespace(standard_normal=lambda shape, dtype: np.random.default_rng(
        0).standard_normal(shape).astype(dtype))
    ns.get_default_memory_pool = lambda: types.SimpleNamespace(free_all_blocks=lambda: None)
    return ns


if __name__ == "__main__":
    sys.exit(main())
