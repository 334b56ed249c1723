"""The twenty-fifth session's GEMM defaults for products of few output tiles and a long K,
against the twenty-fourth's, timed on the GPU alone (issue 11).

Changed (``fusejit/codegen/heuristics.py``, ``fusejit/codegen/gemm.py``): the split-K combine
runs on tiles of 256 outputs adding blocks of chunks a step (it took the GEMM's tiles and added
one chunk after another); a split rounds down to a divisor of the K steps (no masked step);
full-precision float32 products of few 32x64 or 64x64 tiles split K to four 2-warp programs an
SM (one 4-warp program an SM before). ``exp_s25_occupancy.py`` chose them from B read K-major
(B = A^T) only, and timed back-to-back calls whose host part (about 15 us a call on the H100)
hid every product under it. Here each case runs with B K-major and row-major, and is timed
both ways:

- ``graph``: 20 calls captured in a CUDA graph, replayed between CUDA events (the launches
  alone, without the host);
- ``calls``: back-to-back calls between events (``bench_matmul._time_events``), host included.

Variants: ``default`` (this session's), ``spread`` (``spread_combine``: the combine on fewer
outputs a program where 256 leave SMs idle), ``s24 tiles`` (the twenty-fourth session's split
and warps), ``old combine`` (the default tiles with the combine on the GEMM's tiles adding one
chunk a step, on 4 warps). Level with the default in the twenty-fifth session's call 3 and
the twenty-seventh's call 2; the twenty-fifth session then replaced the combine by a
different one on the GEMM's tiles and warps (a scalar-indexed loop of adds), never timed,
which the twenty-seventh's call 1 found 1.4-4.9x slower on products of one to four 64x64
tiles (``heuristics.GEMM_COMBINE_OUTPUTS`` has the figures); the combine of smaller tiles is
back. ``exp_s23_gram.retiled_run`` emits every variant afresh (emitted kernels are cached by
IR text). **Void for ``spread`` and ``old combine``** (thirtieth session): both keep the
default's IR text, and ``retiled_run`` cleared only the emit cache, so the cached plan ran the
default's kernels ("level with the default"); it now clears the plan cache and the backend's
built kernels too. The tile variants (another text) stand.

``--large``: full-precision float32 products of many tiles (the large products' default of
64x64 tiles on 4 warps, which the few-tile products found slower than 2 warps) against 2
warps, 4 stages, and 64x128 / 128x64 tiles on 4 warps (64 accumulators a thread, as 2 warps
of 64x64 hold), B row-major and K-major, timed by calls.

Run on the GPU machine: ``python3 bench/exp_s25_check.py [--only REGEX] [--budget S]
[--large]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_matmul import _error, _time_events  # noqa: E402
from exp_s23_gram import CASES, gemm_of, operands, retiled_run  # noqa: E402
from exp_s24_longk import MORE  # noqa: E402

#: 32 tiles of 64x64: split in 4 chunks on 4 warps by the large float32 products' rule before
EXTRA = {"64x2048 K=8192": (1, 64, 2048, 8192)}
#: ``--large``: the shapes of ``gemm_config``'s float32 rule (bench/exp_s15.py) and README's
#: 2047x513x8191 (0.46x of cuBLAS, cause unknown)
LARGE = {"4096^3": (1, 4096, 4096, 4096), "6400x1552x3336": (1, 6400, 1552, 3336),
         "512x4096x4096": (1, 512, 4096, 4096), "2048x512x8192": (1, 2048, 512, 8192),
         "1000x3000x700": (1, 1000, 3000, 700), "2047x513x8191": (1, 2047, 513, 8191)}


def large_variants(mine: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """The default and its neighbours for ``--large`` (tiles as ``_retile`` takes them)."""
    bm, bn, bk, w, st, split = mine
    out = [("default", ()), ("w2", (bm, bn, bk, 2, st, split)),
           ("w2 s4", (bm, bn, bk, 2, 4, split)), ("s4", (bm, bn, bk, w, 4, split))]
    if (bm, bn) == (64, 64):
        out += [("64x128 w4", (64, 128, bk, 4, st, split)),
                ("128x64 w4", (128, 64, bk, 4, st, split))]
    return out


def spread_combine(outputs: int) -> Any:
    """``gemm_combine_tiles`` with fewer outputs a program where 256 leave SMs idle: a
    power of two from 16 to 256, about the outputs over the SMs (a 16x16 product's combine
    on 16 programs of 16 outputs, not one of 256; a 64x64 Gram matrix's on 128 of 32)."""
    def tiles(bm: int, bn: int, split: int, span: bool) -> tuple[int, int, int]:
        from fusejit.codegen import heuristics as h
        share = max(16, min(h.GEMM_COMBINE_OUTPUTS, 1 << max(0, (outputs // h.SMS).bit_length() - 1)))
        cols = bn if span else min(bn, 64, share)
        rows = max(1, min(bm, share // cols))
        chunks = max(1, min(h.next_pow2(split), h.GEMM_COMBINE_BLOCK // (rows * cols)))
        return rows, cols, chunks
    return tiles


def time_graph(cp: Any, run: Any, reps: int = 20) -> float:
    """Milliseconds per call of ``run`` replayed from a CUDA graph of ``reps`` calls (median
    of 7 replays)."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        run()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(reps):
            run()
        graph = stream.end_capture()
        graph.launch(stream)
        stream.synchronize()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for _ in range(7):
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / reps)
    times.sort()
    return times[len(times) // 2]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=200.0)
    p.add_argument("--large", action="store_true", help=__doc__.split("``--large``: ")[1][:60])
    args = p.parse_args(argv)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.codegen import heuristics
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    combine_tiles = getattr(heuristics, "gemm_combine_tiles", None)
    whole, min_tile = heuristics._whole_chunks, heuristics.FMA_FEW_TILES_MIN_TILE

    def s24_tiles(m: int, n: int, k: int, batch: int, dtype: str) -> tuple[int, ...]:
        heuristics._whole_chunks = lambda steps, split: split
        heuristics.FMA_FEW_TILES_MIN_TILE = 1 << 40
        try:
            c = heuristics.gemm_config(m, n, k, batch, dtype)
        finally:
            heuristics._whole_chunks, heuristics.FMA_FEW_TILES_MIN_TILE = whole, min_tile
        return (c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages, c.split_k)

    for dtype in ("float32",) if args.large else ("float32", "float16"):
        for name, (batch, m, n, k) in (LARGE if args.large else {**CASES, **MORE, **EXTRA}).items():
            for layout in ("B K-major", "B row-major"):
                label = f"{name} {dtype} {layout}"
                if not re.search(args.only, label) or time.time() > deadline:
                    continue
                a, _, b = operands(cp, batch, m, n, k, dtype)
                if layout == "B row-major":
                    b = cp.ascontiguousarray(b)
                ref = a.astype(cp.float64) @ b.astype(cp.float64)
                blas = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)  # (cuBLAS: no capture)
                y, buffers, text = gemm_of(a, b)  # (the GEMM of every case)
                gemm = next(kk for kk in fj.parse(text).kernels if "block_m" in kk.attrs)
                at = gemm.attrs
                mine = (at["block_m"], at["block_n"], at["block_k"], at["num_warps"],
                        at["num_stages"], at.get("split_k", 1))
                print(f"{label}: default {mine}, cuBLAS {blas * 1e3:.1f} us (calls)", flush=True)
                old = s24_tiles(m, n, k, batch, dtype)
                tried = large_variants(mine) if args.large else [("default", ())]
                if old != mine and not args.large:
                    tried.append(("s24 tiles", old))
                if mine[5] > 1 and combine_tiles is not None:
                    tried.append(("old combine", ()))
                    tried.append(("spread", ()))
                for vlabel, tiles in tried:
                    if time.time() > deadline:
                        break
                    try:
                        if vlabel == "old combine":
                            heuristics.gemm_combine_tiles = lambda bm, bn, split, span: (bm, bn, 1)
                        elif vlabel == "spread":
                            heuristics.gemm_combine_tiles = spread_combine(batch * m * n)
                        try:  # (a kernel is emitted at its first run)
                            run, got = retiled_run(backend, text, tiles, buffers)
                        finally:
                            heuristics.gemm_combine_tiles = combine_tiles
                        err = _error(cp, got, ref)
                        c_ms = _time_events(cp, run, 0.3)
                        g_ms = c_ms if args.large else time_graph(cp, run)
                        print(f"  {vlabel:12s} {tiles!s:28s} graph {g_ms * 1e3:7.1f} us "
                              f"(x{blas / g_ms:.2f} cuBLAS), calls {c_ms * 1e3:7.1f} us, "
                              f"err {err:.1e}", flush=True)
                    except Exception as exc:  # noqa: BLE001
                        print(f"  {vlabel:12s} {tiles!s:28s} failed: {type(exc).__name__}: "
                              f"{str(exc)[:300]}", flush=True)
                del a, b, ref, y, buffers
                cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
