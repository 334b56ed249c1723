"""Full-precision float32 GEMMs of many tiles: how the tiles fall into rounds over the SMs,
and what loading rows 4 bytes at a time costs (issue 11; the twenty-sixth session).

Two findings on the CPU (ptxas -v of the default 64x64x32 kernel on 4 warps, sm_90a) set
this up:

- where both A's rows (K) and B's rows (N) are not 16-byte multiples, every load is a 4-byte
  ``cp.async`` with its own address, and the kernel takes 190 registers a thread (96 with
  aligned rows, 128 with A's alone misaligned): two programs an SM, not four. At K by 16
  it takes 114 (four an SM); on 8 warps 80.
- 2047x513x8191 (288 tiles) ran at 0.46x of cuBLAS, 2048x512x8192 (256 tiles) at 0.8x: 288
  tiles at two an SM take two rounds (264 + 24), split in 4 chunks (603 against 965 us, H100,
  sixteenth session) five rounds of a quarter.

So each case runs its default tiles (``default``: split by rounds, ``heuristics.
_fma_round_split``), the twenty-fifth session's (``s25``), K split 1-8 ways (``sN``), K by 16
(``bk16``) and 8 warps (``w8``), B row-major (a contiguous ``[K, N]``), timed as CUDA graphs
of the plan's launches (``exp_s25_check.time_graph``) beside cuBLAS (by calls). Aligned
shapes whose tiles run just past whole rounds (``NNNt``: tiles of 64x64) say whether the
split should follow the rounds everywhere; misaligned ones whether K by 16 pays.

``clamp`` (twenty-seventh session): the default tiles with ``gemm.CLAMP_EDGE_LOADS`` on
(edge tiles load rows and columns past the product's edges as row M - 1 and column N - 1,
masked along K only, instead of masked along M and N too). ``peel`` (twenty-eighth): with
``gemm.PEEL_SPLIT_K`` on (a split-K program's whole steps unmasked along K, its partial step
apart), ``peel+clamp`` both; ``pad ... peel``: the padded operands below with the peel,
``pad ... p+c`` with both.

The twenty-eighth session timed them level (H100, bench/results/h100-s28/call1/
exp_s26_peel.txt: every case within 0.5% of the default, 2047x513x8191 602.2 us, clamp
602.0, peel 601.8, both 604.6) and took them out. **That timing was void** (thirtieth
session): each variant patched a module and kept the IR text, and ``retiled_run`` then
cleared only the emit cache, so the cached plan ran the default's kernels every time
(``retiled_run`` now clears the plan cache and the backend's built kernels too). Nsight
Compute (H100, bench/results/h100-s30-call2) has these kernels' time follow their
instruction count over an issue rate of 73-82%, and the peel with clamps cuts the K loop of
2047x513x8191 from 1,513 instructions to 1,262 (``sass_gemm_loop.py``): both are back, off
until timed (``FUSEJIT_GEMM_CLAMP_EDGES=1``, ``FUSEJIT_GEMM_PEEL_SPLIT=1``).

Cases where both operands' rows are misaligned also run the GEMM with one operand read from
rows padded to 16 bytes (``pad A``, ``pad B``, both: ``pad AB``), beside device copies of
those operands: what copying one of them, or both, would give.

Found (H100, bench/results/h100-s26/call1): the split by rounds gains 1.1-1.6x wherever the
tiles fall unevenly; K by 16 gained only unsplit (2047x513x8191 959 -> 717 us) and nothing
once split (593 both), so it was not made a rule.

Run on the GPU machine: ``python3 bench/exp_s26_fma.py [--only REGEX] [--variants REGEX] [--budget S]``.
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
from exp_s23_gram import gemm_of, retiled_run  # noqa: E402
from exp_s25_check import time_graph  # noqa: E402

#: M x N x K (float32 unless a dtype follows), B row-major; the tile count (64x64 tiles) leads
#: aligned names
CASES = {
    "288t 2048x576x8192": (2048, 576, 8192),
    "272t 1024x1088x8192": (1024, 1088, 8192),
    "400t 1280x1280x4096": (1280, 1280, 4096),
    "144t 768x768x16384": (768, 768, 16384),
    "256t 2048x512x8192": (2048, 512, 8192),
    "1024t 2048x2048x4096": (2048, 2048, 4096),
    "both 2047x513x8191": (2047, 513, 8191),
    "both 767x769x16383": (767, 769, 16383),
    "both 1279x1281x4095": (1279, 1281, 4095),
    "both 1001x3001x701": (1001, 3001, 701),
    "both 4095x4097x4093": (4095, 4097, 4093),
    "A 2048x576x8191": (2048, 576, 8191),
    "B 2048x577x8192": (2048, 577, 8192),
    # float64 (64x64x16 tiles on the FMA units too; split by rounds since the twenty-seventh
    # session)
    "f64 288t 2048x576x4096": (2048, 576, 4096, "float64"),
    "f64 144t 768x768x8192": (768, 768, 8192, "float64"),
    # (twenty-seventh session) edge tiles clamped (``clamp``) or masked along M and N
    "edge 2047x576x8192": (2047, 576, 8192),
    "f16 both 1001x3001x701": (1001, 3001, 701, "float16"),
    "f64 both 2047x513x4095": (2047, 513, 4095, "float64"),
}


def variants(mine: tuple[int, ...], old: tuple[int, ...]) -> list[tuple[str, tuple[int, ...]]]:
    """The default (``mine``: the IR's tiles), the twenty-fifth session's (``old``), and their
    neighbours (tiles as ``bench_matmul._retile`` takes them)."""
    bm, bn, bk, w, st, split = old
    out: list[tuple[str, tuple[int, ...]]] = [("default", ()), ("clamp", ()), ("peel", ()),
                                              ("peel+clamp", ()), ("s25", old)]
    out += [(f"s{s}", (bm, bn, bk, w, st, s)) for s in (1, 2, 3, 4, 8) if s != split]
    out += [("bk16", (bm, bn, 16, w, st, split)), ("bk16 s4", (bm, bn, 16, w, st, 4)),
            ("bk16 s8", (bm, bn, 16, w, st, 8)), ("w8", (bm, bn, bk, 8, st, split))]
    return out


def s25_tiles(m: int, n: int, k: int, dtype: str = "float32") -> tuple[int, ...]:
    """The twenty-fifth session's tiles of an ``m x n x k`` product (no split by rounds,
    ``heuristics._fma_round_split``)."""
    from fusejit.codegen import heuristics
    kept = heuristics._fma_round_split
    heuristics._fma_round_split = lambda tiles, steps, split: split
    try:
        c = heuristics.gemm_config(m, n, k, 1, dtype)
    finally:
        heuristics._fma_round_split = kept
    return (c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages, c.split_k)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=240.0)
    p.add_argument("--variants", default="", help="only the variants whose label matches")
    args = p.parse_args(argv)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.codegen import gemm
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    for name, (m, n, k, *dtype) in CASES.items():
        if not re.search(args.only, name) or time.time() > deadline:
            continue
        dt = dtype[0] if dtype else "float32"
        a = cp.random.standard_normal((m, k), dtype=cp.float32).astype(dt)
        b = cp.random.standard_normal((k, n), dtype=cp.float32).astype(dt)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        blas = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)
        y, buffers, text = gemm_of(a, b)
        kernels = fj.parse(text).kernels
        at = next(kk for kk in kernels if "block_m" in kk.attrs).attrs
        mine = (at["block_m"], at["block_n"], at["block_k"], at["num_warps"],
                at["num_stages"], at.get("split_k", 1))
        flops = 2 * m * n * k
        print(f"{name}: default {mine}, {len(kernels)} kernels, cuBLAS {blas * 1e3:.1f} us "
              f"({flops / blas / 1e9:.1f} TFLOP/s, calls)", flush=True)
        for label, tiles in variants(mine, s25_tiles(m, n, k, dt)):
            if time.time() > deadline:
                break
            if not re.search(args.variants, label):
                continue
            try:
                kept = gemm.CLAMP_EDGE_LOADS, gemm.PEEL_SPLIT_K
                gemm.CLAMP_EDGE_LOADS = kept[0] or "clamp" in label
                gemm.PEEL_SPLIT_K = kept[1] or "peel" in label
                try:  # (retiled_run emits afresh)
                    run, got = retiled_run(backend, text, tiles, buffers)
                finally:
                    gemm.CLAMP_EDGE_LOADS, gemm.PEEL_SPLIT_K = kept
                ms = time_graph(cp, run)
                print(f"  {label:10s} {tiles!s:26s} {ms * 1e3:8.1f} us (x{blas / ms:.2f} "
                      f"cuBLAS), err {_error(cp, got, ref):.1e}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"  {label:8s} {tiles!s:26s} failed: {type(exc).__name__}: "
                      f"{str(exc)[:300]}", flush=True)
        if name.startswith("both") and re.search(args.variants, "pad"):
            padded_operands(cp, backend, a, b, ref, blas)
            for tag, clamp in (("peel", False), ("p+c", True)):
                # (Triton 3.6, sass_gemm_loop.py: padded rows with the peel and the clamps load
                # 16 bytes at a time along K, a loop of 1,245 instructions on 96 registers
                # against the default's 1,460 on 124 and the aligned twin's 1,182 on 92)
                if not re.search(args.variants, f"pad {tag}"):
                    continue
                kept = gemm.PEEL_SPLIT_K, gemm.CLAMP_EDGE_LOADS
                gemm.PEEL_SPLIT_K, gemm.CLAMP_EDGE_LOADS = True, clamp or kept[1]
                try:
                    padded_operands(cp, backend, a, b, ref, blas, tag)
                finally:
                    gemm.PEEL_SPLIT_K, gemm.CLAMP_EDGE_LOADS = kept
        del a, b, ref, y, buffers
        cp.get_default_memory_pool().free_all_blocks()
    return 0


def padded_operands(cp: Any, backend: Any, a: Any, b: Any, ref: Any, blas: float,
                    tag: str = "") -> None:
    """Where both operands' rows are 4-byte aligned: the default GEMM of A, of B, then of both
    read from rows padded to 16 bytes (a view of a wider buffer: the product then loads that
    operand 16 bytes at a time), beside device copies of those operands (what alignment
    copies would add). ``tag`` names the setting the caller changed (``peel``)."""
    from exp_s23_gram import copy_time

    def padded(x: Any) -> Any:
        rows, cols = x.shape
        wide = cp.zeros((rows, -(-cols // 4) * 4), x.dtype)
        wide[:, :cols] = x
        return wide[:, :cols]

    for which in ("A", "B", "AB"):
        left = padded(a) if "A" in which else a
        right = padded(b) if "B" in which else b
        y, buffers, text = gemm_of(left, right)
        run, got = retiled_run(backend, text, (), buffers)
        ms = time_graph(cp, run)
        copy = sum(copy_time(cp, x.nbytes, _time_events) for x, name in ((a, "A"), (b, "B"))
                   if name in which)
        print(f"  pad {which:2s} {tag:5s} {'(default tiles)':26s} {ms * 1e3:8.1f} us + copies of "
              f"{which} {copy * 1e3:.1f} us (x{blas / (ms + copy):.2f} cuBLAS), err "
              f"{_error(cp, got, ref):.1e}", flush=True)
        del left, right, y, buffers


if __name__ == "__main__":
    raise SystemExit(main())
