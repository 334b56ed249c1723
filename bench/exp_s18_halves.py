"""Cooperative rows held as halves under 128 registers, against one tile (eighteenth session;
issue 9, wide rows).

``heuristics.coop_sub_blocks`` holds the chunk of a cooperative row whose reductions are
sums and m2s as two tiles, each finished before the next, with ptxas capped at 128 registers
(four programs an SM). The "halves" way here splits every workload's chunk, also where
``coop_sub_blocks`` chose one tile after this experiment's first run (H100,
``bench/results/h100-s18-call3``: ragged rows, rows without a vector along them, softmax).
``bench/exp_s16_ln.py --set registers`` measured that edit of the
emitted float32 layer norm at three shapes; this times what fusejit emits, both ways, on the
families the choice reaches and on shapes that experiment did not: float32 layer norm with a
weight and a bias (also ragged rows of 150,001), without them, RMS norm, a normalization by
the row's sum; and softmax and log-softmax, whose partials (max, sumexp) are held as tiles
only when asked (``COOP_SUB_BLOCK_OPS`` with max and sumexp: the "halves" way of the softmax
workloads here), to decide whether they should be by default. (A float16
layer norm over rows of 2**16 or 2**18 is planned as the looped row kernel, not the
cooperative one: nothing to compare; rows of 2**15 float32, 128 KB, run in one program.)

For each workload and each way (``COOP_SUB_BLOCKS`` 1: one tile, no cap; 2: today's
default), the plan is made fresh (``runtime.forget_plans``) and its launches alone are timed
by CUDA events (``exp_reductions.event_time``: median of 7 rounds of 20 launches) in 3
interleaved passes (the two ways A B, B A, A B), the median reported, as a
share of a copy's rate measured in the same run (``suite.copy_bandwidth``, bytes read plus
written; a workload's bytes are its inputs read once and its outputs written once). Both
outputs are checked against a float64 reference computed by CuPy (max abs error at most
``TOLERANCE`` of the output's dtype, scaled by the largest output).

    python3 bench/exp_s18_halves.py [--json FILE] [--only REGEX] [--ways 1,2]
    python3 bench/exp_s18_halves.py --ways 0,1 --only 'x1[05]'   # looped against one tile
    python3 bench/exp_s18_halves.py --ways 0,3 --only 'x(150001|131073|100003)$'  # windowed
    python3 bench/exp_s18_halves.py --dry   # no GPU: each workload planned and emitted
    python3 bench/exp_s18_halves.py --ways 0,1 --cols 147456,150000,155648  # around 18x8192
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

EPS = 1e-5
TOLERANCE = {"float32": 2e-5, "float16": 4e-3}


def _ln(xp: Any, x: Any, w: Any = None, b: Any = None) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    y = (x - mu) / xp.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + EPS)
    return y if w is None else y * w + b


def _rms(xp: Any, x: Any, w: Any) -> Any:
    return x / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


#: name -> (shape, dtype, inputs "x" / "xwb" / "xw", fusejit, reference on float64 arrays)
WORKLOADS: dict[str, tuple[tuple[int, int], str, str, Callable[..., Any], Callable[..., Any]]] = {}
for _shape in ((256, 1 << 18), (64, 1 << 16), (512, 1 << 17), (256, 150_001)):
    WORKLOADS[f"layer_norm {_shape[0]}x{_shape[1]}"] = (
        _shape, "float32", "xwb", lambda fj, x, w, b: fj.layer_norm(x, w, b, eps=EPS), _ln)
for _cols in (150_000, 131_073, 100_003):  # (ragged; rows 16-byte aligned, or not: those
    # run looped since this call, ``cooperative_tiles``, whatever the way)
    WORKLOADS[f"layer_norm 256x{_cols}"] = (
        (256, _cols), "float32", "xwb", lambda fj, x, w, b: fj.layer_norm(x, w, b, eps=EPS), _ln)
    WORKLOADS[f"softmax 256x{_cols}"] = (
        (256, _cols), "float32", "x", lambda fj, x: fj.softmax(x, axis=-1), _softmax)
WORKLOADS["layer_norm no w/b 256x262144"] = (
    (256, 1 << 18), "float32", "x", lambda fj, x: fj.layer_norm(x, eps=EPS), _ln)
for _shape in ((256, 1 << 18), (64, 1 << 16)):
    WORKLOADS[f"rms_norm {_shape[0]}x{_shape[1]}"] = (
        _shape, "float32", "xw", lambda fj, x, w: fj.rms_norm(x, w), _rms)
WORKLOADS["x / sum 256x262144"] = (
    (256, 1 << 18), "float32", "x", lambda fj, x: x / x.sum(axis=-1, keepdims=True),
    lambda xp, x: x / x.sum(axis=-1, keepdims=True))
for _shape in ((256, 1 << 18), (64, 1 << 16), (256, 150_001)):
    WORKLOADS[f"softmax {_shape[0]}x{_shape[1]}"] = (
        _shape, "float32", "x", lambda fj, x: fj.softmax(x, axis=-1), _softmax)
WORKLOADS["log_softmax 256x262144"] = (
    (256, 1 << 18), "float32", "x", lambda fj, x: fj.log_softmax(x, axis=-1),
    lambda xp, x: x - x.max(axis=-1, keepdims=True) - xp.log(
        xp.exp(x - x.max(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True)))


def inputs(xp: Any, shape: tuple[int, int], dtype: str, kinds: str, seed: int = 0) -> list[Any]:
    """x ~ 4 N(0, 1) + 1 (rows x cols); w, b ~ N(0, 1) (cols)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape, dtype=np.float32) * 4 + 1]
    arrays += [rng.standard_normal(shape[1], dtype=np.float32) for _ in kinds[1:]]
    return [xp.asarray(a.astype(dtype)) for a in arrays]


_BASE_OPS: Any = None


#: way -> its label: 0 the looped row kernel (no cooperative rows), 1 the cooperative chunk as
#: one tile, 2 as halves, 3 windowed, 4 one tile with every chunk's columns masked, 5 the
#: shipped settings, 6 and 7 those with chunks of 4096 and 2048 elements, 8 those with rows
#: laid from the 128-byte line each starts in (``heuristics.COOP_WINDOW_BYTES``), 9 those
#: with rows that chunks do not divide in equal chunks (``heuristics.COOP_BALANCE``)
WAY_NAMES = {0: "looped", 1: "one tile", 2: "halves", 3: "windowed", 4: "masked",
             5: "shipped", 6: "chunk 4096", 7: "chunk 2048", 8: "lines", 9: "equal chunks"}
_OPEN_TILE: Any = None
_BASE: dict[str, Any] = {}


def set_ways(n: int, softmax: bool = False) -> None:
    """Way ``n`` (``WAY_NAMES``) for what is planned next (plans and emissions forgotten);
    ``softmax``: softmax's partials (max, sumexp) held as tiles too (off by default)."""
    global _BASE_OPS, _OPEN_TILE
    from fusejit.codegen import heuristics, triton_emitter
    emitter = triton_emitter._Emitter
    if _OPEN_TILE is None:
        _OPEN_TILE = emitter._open_tile
    # way 4: one tile with the column mask on every chunk, as a ragged row's (a width that
    # chunks divide, masked: does the mask cost, or the short last chunk?)
    emitter._open_tile = _OPEN_TILE if n != 4 else (
        lambda self, fn, start, looped, col_masked, *rest: _OPEN_TILE(
            self, fn, start, looped, True, *rest))
    from fusejit.runtime import forget_plans
    if _BASE_OPS is None:
        _BASE_OPS = heuristics.COOP_SUB_BLOCK_OPS
    names = ("COOP_CHUNK", "COOP_SUB_BLOCKS", "COOP_WINDOW", "COOP_SUB_BLOCK_MIN_ROW_OPERANDS",
             "COOP_SUB_BLOCK_RAGGED", "COOP_WINDOW_BYTES", "COOP_BALANCE")
    if not _BASE:
        _BASE.update({name: getattr(heuristics, name) for name in names})
    if n >= 5:  # the shipped settings (whatever the halves and the window choose), by chunk
        for name in names:
            setattr(heuristics, name, _BASE[name])
        heuristics.COOPERATIVE_ROWS = True
        heuristics.COOP_SUB_BLOCK_OPS = _BASE_OPS
        heuristics.COOP_CHUNK = {**_BASE["COOP_CHUNK"],
                                 "cuda": {5: 8192, 6: 4096, 7: 2048, 8: 8192, 9: 8192}[n]}
        if n == 8:  # rows laid from the 128-byte line each starts in
            heuristics.COOP_WINDOW_BYTES = 128
        heuristics.COOP_BALANCE = n == 9  # rows that chunks do not divide in equal chunks
        forget_plans()
        return
    heuristics.COOP_CHUNK = _BASE["COOP_CHUNK"]
    heuristics.COOP_WINDOW_BYTES = _BASE["COOP_WINDOW_BYTES"]
    heuristics.COOP_BALANCE = _BASE["COOP_BALANCE"]
    heuristics.COOPERATIVE_ROWS = n > 0
    heuristics.COOP_SUB_BLOCKS = 2 if n == 2 else 1
    heuristics.COOP_WINDOW = n == 3  # (rows that are not 16-byte multiples: cooperative)
    heuristics.COOP_SUB_BLOCK_OPS = _BASE_OPS | ({"max", "sumexp"} if softmax else set())
    # (the halves everywhere, where coop_sub_blocks would keep one tile too)
    heuristics.COOP_SUB_BLOCK_MIN_ROW_OPERANDS = 0 if n > 1 else 1
    heuristics.COOP_SUB_BLOCK_RAGGED = n > 1
    forget_plans()


def tiling(plan: Any) -> str:
    """The plan's tiling lines, joined."""
    return " | ".join(ln.strip() for ln in plan.explain().splitlines() if "tiling:" in ln)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="")
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--cols", default="",
                        help="comma-separated widths: softmax and layer norm (with weight and "
                             "bias) over 256 rows of each, in place of the table's workloads")
    parser.add_argument("--ways", default="1,2",
                        help="two of 0 (looped), 1 (one tile), 2 (halves), 3 (one tile, rows "
                             "that are not 16-byte multiples laid from their first word), 4 "
                             "(one tile, every chunk's columns masked), 5 (the shipped settings), 6 "
                             "and 7 (those with chunks of 4096 and 2048), 8 (rows laid from their "
                             "128-byte line), 9 (equal chunks), first the baseline")
    args = parser.parse_args(argv)
    ways = tuple(int(w) for w in args.ways.split(","))
    passes = [tuple(ways[i] for i in order) for order in ((0, 1), (1, 0), (0, 1))]
    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    table = WORKLOADS
    if args.cols:  # (widths around a chunk multiple: is a ragged last chunk what costs?)
        table = {}
        for cols in (int(c) for c in args.cols.split(",")):
            table[f"softmax 256x{cols}"] = (
                (256, cols), "float32", "x", lambda fj, x: fj.softmax(x, axis=-1), _softmax)
            table[f"layer_norm 256x{cols}"] = (
                (256, cols), "float32", "xwb",
                lambda fj, x, w, b: fj.layer_norm(x, w, b, eps=EPS), _ln)
    picked = {k: v for k, v in table.items() if re.search(args.only, k)}
    t_start = time.perf_counter()
    failed = 0
    if args.dry:
        for name, (shape, dtype, kinds, fn, _) in picked.items():
            for n in ways:
                set_ways(n, "softmax" in name)
                with fj.using_backend("interpret"):
                    zs = [fj.asarray(np.zeros(shape if k == "x" else shape[1], dtype))
                          for k in kinds]
                    plan = fj.plan(fn(fj, *zs))
                text = tiling(plan)
                # (rows that are not 16-byte multiples run looped on cuda but with way 3)
                aligned = shape[1] * np.dtype(dtype).itemsize % 16 == 0
                ok = ("cooperative rows" in text) == (n > 0 and (aligned or n >= 3)) \
                    if n < 6 else "cooperative rows" in text
                if n == 4:  # (the mask on every chunk: the cuda source says so)
                    from fusejit.codegen.triton_emitter import emit_kernel
                    src = emit_kernel(plan.program.body[0], target="cuda").source
                    ok = ok and "col_mask = cols <" in src
                failed += not ok
                print(f"{name:30s} ways {n}: {text}", flush=True)
        print(f"done in {time.perf_counter() - t_start:.1f} s, {failed} failed")
        return 1 if failed else 0

    import cupy as cp
    from exp_reductions import event_time
    from suite import copy_bandwidth
    fj.set_backend("cuda")
    backend = current()
    copy = copy_bandwidth(cp)
    rate = max(v for k, v in copy.items() if k.endswith("_gbps"))
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    dev = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    print(f"{dev}: copy {rate:.0f} GB/s (read + written)", flush=True)
    rows: list[dict[str, Any]] = []
    for name, (shape, dtype, kinds, fn, ref) in picked.items():
        xs = inputs(cp, shape, dtype, kinds)
        want = ref(cp, *[a.astype(cp.float64) for a in xs])
        scale = float(cp.abs(want).max())
        bound: dict[int, Any] = {}
        times: dict[int, list[float]] = {n: [] for n in ways}
        rec: dict[str, Any] = {"workload": name, "dtype": dtype}
        try:
            for n in ways:
                set_ways(n, "softmax" in name)
                ts = [fj.asarray(a) for a in xs]
                out = fn(fj, *ts)
                plan = fj.plan(out)
                rec[f"tiling_{n}"] = tiling(plan)
                buffers = [leaf.buffer for leaf in structural_key([out._node])[1]]
                got = backend.execute(plan.program, buffers, plan)[0]
                err = float(cp.abs(got.astype(cp.float64) - want).max())
                rec[f"err_{n}"] = err
                ok = err <= TOLERANCE[dtype] * max(scale, 1.0)
                rec[f"ok_{n}"] = ok
                failed += not ok
                bound[n] = (plan, buffers)
                moved = sum(a.nbytes for a in xs) + got.nbytes
            for order in passes:
                for n in order:
                    plan, buffers = bound[n]
                    times[n].append(event_time(
                        lambda plan=plan, buffers=buffers: backend.execute(plan.program,
                                                                           buffers, plan)))
            for n in ways:
                t = float(np.median(times[n]))
                rec[f"us_{n}"] = t * 1e6
                rec[f"share_{n}"] = moved / t / 1e9 / rate
            a, b = ways
            rec["gain"] = rec[f"us_{a}"] / rec[f"us_{b}"]
            print(f"{name:30s} " + "   ".join(
                f"{WAY_NAMES[n]} {rec[f'us_{n}']:8.1f} us {100 * rec[f'share_{n}']:5.1f}%"
                for n in ways) + f"   x{rec['gain']:.3f}   err {rec[f'err_{a}']:.1e} / "
                f"{rec[f'err_{b}']:.1e} {'ok' if rec[f'ok_{a}'] and rec[f'ok_{b}'] else 'WRONG'}",
                flush=True)
            print(f"    {WAY_NAMES[b]}: {rec[f'tiling_{b}']}", flush=True)
        except Exception as exc:  # noqa: BLE001  (report, go on)
            rec["error"] = f"{type(exc).__name__}: {exc}"[:400]
            print(f"{name:30s} failed: {rec['error']}", flush=True)
            failed += 1
        rows.append(rec)
        if args.json:
            Path(args.json).write_text(json.dumps({"device": dev, "copy_gbps": rate,
                                                   "rows": rows}, indent=1))
    print(f"done in {time.perf_counter() - t_start:.1f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
