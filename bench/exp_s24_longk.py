"""Products of a few output tiles and a long K (issue 11), the tiles of their K loop: after the
twenty-third session's split into one chunk per SM, float16 Gram matrices ran at 53-60% of
the read rate and float32 ones far behind cuBLAS (H100: 1x16 K=2**22 700 us against 100,
128x128 K=2**16 201 against 73), and a batch of 8 at 17 chunks (a chunk not a whole number of
steps: every step masked) at 302 us against 172 at 16. Is it bytes in flight per program
(BLOCK_K 32-64 with 16x16 tiles: 2-4 KB a stage), the masked steps, or the chunk count?

For each case (``exp_s23_gram.CASES``, float16 and float32), the default plan and variants of
its gemm kernel's attributes (BLOCK_K x2 / x4 / x8 up to 256 and num_stages 3 / 5 where the stages fit
160 KB of shared memory; split_k the nearest power of two; 8 warps), edited in the fused IR
text as a user would, each timed as the plan's launches (CUDA events, median), beside cuBLAS
and the copy time of the operands' bytes (a product reads them once: the read bound is half the
copy time).

Run on the GPU machine: ``python3 bench/exp_s24_longk.py [--only REGEX] [--budget S]``.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_matmul import _error, _time_events  # noqa: E402
from exp_s23_gram import CASES, copy_time, gemm_of, operands, retiled_run  # noqa: E402

#: more shapes of the same family for ``--compare`` (batch, M, N, K): 32 tiles of 32x64, 16 of
#: 64x64, one of 16x16 at a K of 2**16 and of 100,000, a 64x64 Gram matrix of K = 2**16
MORE = {"32x2048 K=8192": (1, 32, 2048, 8192), "224x241 K=9669": (1, 224, 241, 9669),
        "16x16 K=2^16": (1, 16, 16, 1 << 16), "5x5 K=100000": (1, 5, 5, 100000),
        "gram 64x64 K=2^16": (1, 64, 64, 1 << 16), "batch 4 64x64 K=2^16": (4, 64, 64, 1 << 16)}


def variants(attrs: dict[str, int], itemsize: int) -> list[tuple[str, tuple[int, ...]]]:
    """(label, tiles) of the variants of one default config (tiles as ``_retile`` takes them)."""
    bm, bn, bk = attrs["block_m"], attrs["block_n"], attrs["block_k"]
    w, s, split = attrs["num_warps"], attrs["num_stages"], attrs.get("split_k", 1)
    out: list[tuple[str, tuple[int, ...]]] = [("default", ())]
    for mult in (2, 4, 8):
        for stages in (3, 5):
            k = bk * mult
            if k <= 256 and stages * (bm + bn) * k * itemsize <= 160 * 1024:
                out.append((f"bk{k} s{stages}", (bm, bn, k, w, stages, split)))
    pow2 = 1 << max(0, round(split).bit_length() - 1)
    for p in {pow2, 2 * pow2} - {split}:
        out.append((f"split{p}", (bm, bn, bk, w, s, p)))
        k = min(256, bk * 4)
        if 3 * (bm + bn) * k * itemsize <= 160 * 1024:
            out.append((f"split{p} bk{k} s3", (bm, bn, k, w, 3, p)))
    out.append(("w8", (bm, bn, bk, 8, s, split)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=200.0)
    p.add_argument("--compare", action="store_true",
                   help="float16: the default beside the tiles before _split_k_steps, on more "
                   "cases; float32: the GEMM beside the frontend's choice (a sum of "
                   "broadcast products for few outputs), B K-major and row-major")
    args = p.parse_args(argv)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()

    from fusejit.codegen import heuristics
    deep_steps = heuristics._split_k_steps

    def before(m: int, n: int, k: int, batch: int, dtype: str) -> tuple[int, ...]:
        """The tiles of the twenty-third session (its K steps, its warps)."""
        heuristics._split_k_steps = lambda bm, bn, bk, w, s, loads, chunk, split: (bk, w, s)
        try:
            c = heuristics.gemm_config(m, n, k, batch, dtype)
        finally:
            heuristics._split_k_steps = deep_steps
        return (c.block_m, c.block_n, c.block_k, c.num_warps, c.num_stages, c.split_k)

    cases = {**CASES, **MORE} if args.compare else CASES
    for dtype in ("float16", "float32"):
        for name, (batch, m, n, k) in cases.items():
            label = f"{name} {dtype}"
            if not re.search(args.only, label) or time.time() > deadline:
                continue
            a, bt, b = operands(cp, batch, m, n, k, dtype)
            copy_ms = copy_time(cp, a.nbytes + b.nbytes, _time_events)
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            blas_ms = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)
            y, buffers, text = gemm_of(a, b)  # (the GEMM of every case: its tiles vary)
            (kernel,) = fj.parse(text).kernels
            print(f"{label}: copy {copy_ms * 1e3:.1f} us, cuBLAS {blas_ms * 1e3:.1f} us "
                  f"({50 * copy_ms / blas_ms:.0f}% of the read bound)", flush=True)
            tried = variants(dict(kernel.attrs), a.itemsize)
            if args.compare and dtype == "float16":
                tried = [("default", ()), ("before s24", before(m, n, k, batch, dtype))]
            elif args.compare:  # (the GEMM; the frontend's choice below)
                tried = [("gemm", ())]
            for vlabel, tiles in tried:
                if time.time() > deadline:
                    break
                try:
                    run, got = retiled_run(backend, text, tiles, buffers)
                    err = _error(cp, got, ref)
                    ms = _time_events(cp, run, 0.4)
                    print(f"  {vlabel:18s} {tiles!s:28s} {ms * 1e3:8.1f} us "
                          f"{50 * copy_ms / ms:5.0f}% of the read bound, x{blas_ms / ms:.2f} cuBLAS, "
                          f"err {err:.1e}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"  {vlabel:18s} {tiles!s:28s} failed: {type(exc).__name__}: "
                          f"{str(exc)[:200]}", flush=True)
            if args.compare and dtype == "float16" and batch * m * n <= 4096 \
                    and time.time() < deadline:
                # would float16 products of few outputs gain from the float32 rule's sums too?
                # (float32 products and sums, rounded once: the GEMM's arithmetic)
                fa, fb = fj.asarray(a), fj.asarray(b)
                jf = fj.jit(lambda x, y: (fj.expand_dims(x, -1).astype(fj.float32)
                                          * fj.expand_dims(y, -3).astype(fj.float32)
                                          ).sum(-2).astype(fj.float16))
                got = cp.asarray(jf(fa, fb))
                err = _error(cp, got, ref)
                ms = _time_events(cp, lambda jf=jf, fa=fa, fb=fb: jf(fa, fb), 0.4)
                print(f"  {'sum of products':18s} {'(fj.jit)':28s} {ms * 1e3:8.1f} us "
                      f"{50 * copy_ms / ms:5.0f}% of the read bound, x{blas_ms / ms:.2f} "
                      f"cuBLAS, err {err:.1e}", flush=True)
            if args.compare and dtype == "float32":
                # what the frontend records (a sum of broadcast products for few outputs and a
                # long K: linalg.SUM_OF_PRODUCTS_MAX_OUTPUTS), B K-major and row-major
                for blabel, bx in (("default", b), ("default, B row-major", cp.ascontiguousarray(b))):
                    if time.time() > deadline:
                        break
                    fa, fb = fj.asarray(a), fj.asarray(bx)
                    jf = fj.jit(lambda x, y: x @ y)
                    got = cp.asarray(jf(fa, fb))
                    err = _error(cp, got, ref)
                    ms = _time_events(cp, lambda jf=jf, fa=fa, fb=fb: jf(fa, fb), 0.4)
                    kinds = [kk.attrs.get("kind") for kk in fj.plan(fa @ fb).program.kernels]
                    print(f"  {blabel:18s} {kinds!s:28s} {ms * 1e3:8.1f} us "
                          f"{50 * copy_ms / ms:5.0f}% of the read bound, x{blas_ms / ms:.2f} "
                          f"cuBLAS, err {err:.1e} (fj.jit)", flush=True)
            del a, b, bt, ref, y, buffers
            cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
