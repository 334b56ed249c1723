"""Experiment: a wide grid of reduction tiles timed for the programs the unseen suite found slow.

``python3 bench/exp_tiles.py [--only NAME,...]`` on the GPU machine (lark importable). The
autotuner (``FUSEJIT_AUTOTUNE=1``, a fresh cache) times each kernel's candidates; here the
candidate lists are replaced by wide grids (rows per program and warps for rows held in
registers; the step and warps for looped rows; kept points, step and warps for outer
reductions; partials, step and warps for split ones), so the times show how far the
heuristic's choice is from the best of the grid at shapes it was not tuned on. Prints, per
kernel, the heuristic's tiles and time, the five fastest of the grid, and the whole grid as
JSON lines (``grid {...}``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

os.environ["FUSEJIT_AUTOTUNE"] = "1"
os.environ.setdefault("FUSEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="fusejit-exp-tiles-"))

import numpy as np  # noqa: E402

import fusejit as fj  # noqa: E402
from fusejit.codegen import heuristics as heur  # noqa: E402
from fusejit.runtime import autotune  # noqa: E402

EPS = 1e-5
WARPS = (2, 4, 8, 16)


def _normalize(axis: int) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        d = x - x.mean(axis=axis, keepdims=True)
        return d / fj.sqrt((d * d).mean(axis=axis, keepdims=True) + EPS)
    return fn


#: name -> (shape, dtype, program): the unseen suite's slowest kernels (seed 20261202) and
#: short rows of other widths
PROGRAMS: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "mean_rows141": ((393, 939, 141), "float32", lambda x: x.mean(axis=2)),
    "sum_rows100": ((600000, 100), "float32", lambda x: x.sum(axis=1)),
    "sum_rows200": ((300000, 200), "float32", lambda x: x.sum(axis=1)),
    "sum_rows333": ((180000, 333), "float32", lambda x: x.sum(axis=1)),
    "sum_rows700": ((90000, 700), "float32", lambda x: x.sum(axis=1)),
    "sum_rows1500": ((40000, 1500), "float32", lambda x: x.sum(axis=1)),
    "sum_rows3000": ((20000, 3000), "float32", lambda x: x.sum(axis=1)),
    "sum_rows128": ((500000, 128), "float32", lambda x: x.sum(axis=1)),
    "normalize_rows333": ((103, 495, 333), "float32", _normalize(2)),
    "softmax_rows700": ((90000, 700), "float32", lambda x: fj.softmax(x, axis=-1)),
    "std_rows54452": ((1000, 54452), "float32", lambda x: x.std(axis=1)),
    "sum_rows54452": ((1000, 54452), "float32", lambda x: x.sum(axis=1)),
    "min_axis0_f64": ((109, 6850, 9, 3), "float64", lambda x: x.min(axis=0)),
    "sum_axis0_f32": ((109, 184950), "float32", lambda x: x.sum(axis=0)),
    "normalize_axis0": ((65385, 106), "float32", _normalize(0)),
    "logsumexp_mid": ((12, 3001, 702), "float32", lambda x: fj.logsumexp(x, axis=1)),
    "normalize_mid": ((25, 20682, 12), "float32", _normalize(1)),
    "softmax_axis0": ((96, 133000), "float32", lambda x: fj.softmax(x, axis=0)),
}


def _batch_stats(x: Any) -> Any:
    return x.mean(axis=0), x.var(axis=0)


#: ``--set check``: shapes the rules of the first set were not measured on (short rows,
#: short outer extents), and more looped rows and split outer reductions
CHECK: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "sum_rows77": ((400000, 77), "float32", lambda x: x.sum(axis=1)),
    "softmax_rows257": ((150000, 257), "float32", lambda x: fj.softmax(x, axis=-1)),
    "layer_norm_rows999": ((60000, 999), "float32", lambda x: fj.layer_norm(x)),
    "var_rows500": ((100000, 500), "float32", lambda x: x.var(axis=1)),
    "log_softmax_rows1023": ((48000, 1023), "float32", lambda x: fj.log_softmax(x, axis=-1)),
    "max_rows45": ((800000, 45), "float32", lambda x: x.max(axis=1)),
    "sum_axis0_short50": ((50, 500000), "float32", lambda x: x.sum(axis=0)),
    "var_axis0_short120": ((120, 300000), "float32", lambda x: x.var(axis=0)),
    "max_axis0_short30": ((30, 1000000), "float32", lambda x: x.max(axis=0)),
    "sum_axis0_short77_f64": ((77, 200000), "float64", lambda x: x.sum(axis=0)),
    "mean_mid_short100": ((100, 100, 3000), "float32", lambda x: x.mean(axis=1)),
    "sum_rows20000": ((4000, 20000), "float32", lambda x: x.sum(axis=1)),
    "var_rows30000": ((3000, 30000), "float32", lambda x: x.var(axis=1)),
    "sum_rows100000": ((600, 100000), "float32", lambda x: x.sum(axis=1)),
    "layer_norm_rows20000": ((4000, 20000), "float32", lambda x: fj.layer_norm(x)),
    "std_cols": ((65536, 1024), "float32", lambda x: x.std(axis=0)),
    "batch_stats_256": ((262144, 256), "float32", _batch_stats),
    "batch_stats_4096": ((16384, 4096), "float32", _batch_stats),
    "sum_axes02": ((64, 4096, 256), "float32", lambda x: x.sum(axis=(0, 2))),
    "var_axis0_50": ((200000, 50), "float32", lambda x: x.var(axis=0)),
    "logsumexp_axis0": ((30000, 300), "float32", lambda x: fj.logsumexp(x, axis=0)),
}
#: ``--set outer256``: outer extents of 129 to 256 (the one-tile rule stops at 128)
OUTER256: dict[str, tuple[tuple[int, ...], str, Callable[[Any], Any]]] = {
    "normalize_axis0_144": ((144, 79 * 1645), "float32", _normalize(0)),
    "sum_axis0_200": ((200, 150000), "float32", lambda x: x.sum(axis=0)),
    "var_axis0_250": ((250, 100000), "float32", lambda x: x.var(axis=0)),
    "max_axis0_160": ((160, 200000), "float32", lambda x: x.max(axis=0)),
    "sum_axis0_180_f64": ((180, 100000), "float64", lambda x: x.sum(axis=0)),
    "softmax_axis0_230": ((230, 100000), "float32", lambda x: fj.softmax(x, axis=0)),
}
SETS = {"first": PROGRAMS, "check": CHECK, "outer256": OUTER256}

def _pow2(low: int, high: int) -> list[int]:
    out, v = [], max(1, low)
    while v <= high:
        out.append(v)
        v *= 2
    return out


def reduction_grid(target: str, rows: int, cols: int, outer: bool, itemsize: int,
                   state: int = 1) -> list[Any]:
    h = heur.reduction_tiles(target, rows, cols, outer, itemsize, state)
    full = heur.next_pow2(cols)
    grid = [h]
    if not outer and h.persistent:
        for bm in _pow2(1, min(heur.next_pow2(rows), 16384 // h.block_n)):
            for w in WARPS:
                if heur._warps_ok(w, bm * h.block_n):
                    grid.append(heur.ReductionTiles(bm, h.block_n, w, True, f"bm {bm} w {w}"))
    elif not outer:
        for bn in _pow2(1024, min(full, 16384)):
            for w in WARPS:
                grid.append(heur.ReductionTiles(1, bn, w, full <= bn, f"bn {bn} w {w}"))
    else:
        for bm in _pow2(16, min(256, heur.next_pow2(rows))):
            for bn in _pow2(1, full):
                if 512 <= bm * bn <= 8192:
                    for w in (4, 8):
                        if heur._warps_ok(w, bm * bn):
                            grid.append(heur.ReductionTiles(bm, bn, w, full <= bn,
                                                         f"bm {bm} bn {bn} w {w}"))
    return heur._unique(grid, limit=None)


def split_grid(target: str, rows: int, cols: int, outer: bool, itemsize: int,
               split: int | None = None, state: int = 1) -> list[Any]:
    bm, bn, w = heur.split_tiles(target, rows, cols, outer, itemsize, state)
    row_blocks = -(-rows // bm)
    s = heur.choose_split(rows, cols, row_blocks, bm) if split is None else split
    step = lambda b, k: max(1, min(b, heur.next_pow2(-(-cols // max(1, k)))))  # noqa: E731
    grid = [heur.SplitTiles(bm, step(bn, s), w, s, "heuristic")]
    for k in sorted({max(1, s // 4), max(1, s // 2), s, 2 * s, 4 * s}):
        for b in sorted({max(1, bn // 2), bn, 2 * bn}):
            for ww in (4, 8):
                if bm * step(b, k) <= 16384 and heur._warps_ok(ww, bm * step(b, k)) and k <= heur.SPLIT_MAX:
                    grid.append(heur.SplitTiles(bm, step(b, k), ww, k, f"s {k} bn {b} w {ww}"))
    return heur._unique(grid, limit=None)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default=None)
    p.add_argument("--set", default="first", choices=sorted(SETS))
    args = p.parse_args()
    programs = SETS[args.set]
    names = args.only.split(",") if args.only else list(programs)
    heur.reduction_candidates = reduction_grid
    heur.split_candidates = split_grid
    import cupy as cp
    fj.set_backend("cuda")
    measured: list[tuple[str, tuple[Any, ...], tuple[float | None, ...]]] = []
    measure = autotune._measure

    def recording(backend: Any, kernel: Any, spec: Any, dev: Any, emitted: Any,
                  strides: Any) -> Any:
        choice = measure(backend, kernel, spec, dev, emitted, strides)
        if choice is not None:
            measured.append((kernel.name, emitted.candidates, choice.times))
        return choice

    autotune._measure = recording
    for name in names:
        shape, dtype, fn = programs[name]
        x = fj.asarray(cp.random.standard_normal(shape, dtype=np.float32).astype(dtype))
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        t0 = time.perf_counter()
        measured.clear()
        out = fn(x)
        fj.realize(*(out if isinstance(out, tuple) else (out,)))
        cp.cuda.get_current_stream().synchronize()
        print(f"== {name} {shape} {dtype} ({time.perf_counter() - t0:.1f} s)")
        for kernel, grid, ts in measured:
            base = ts[0]
            if base is None:
                continue
            timed = [i for i, t in enumerate(ts) if t is not None]
            order = sorted(timed, key=lambda i: ts[i])
            print(f"  {kernel}: heuristic {grid[0]!r}: {base * 1e6:.1f} us "
                  f"({nbytes / base / 1e9:.0f} GB/s of the input)")
            for i in order[:5]:
                print(f"    {ts[i] * 1e6:8.1f} us  {ts[i] / base:5.2f}x  {grid[i]!r}")
            for c, t in zip(grid, ts):
                print("  grid " + json.dumps({"program": name, "kernel": kernel, "tiles": repr(c),
                                              "us": None if t is None else round(t * 1e6, 2)}))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
