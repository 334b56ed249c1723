"""Products of a few output tiles and a long K (issue 11): programs per SM of their split K.

Since the twenty-third session such a product splits K into ``SMS // tiles`` chunks: one
program per SM. Full-precision float32 products then run their FMA ``tl.dot`` on one 4-warp
program an SM, a quarter of what the large float32 GEMMs run at (their rule in
``heuristics.gemm_config``: "the FMA units want about four 4-warp programs an SM"), and they
measured 0.35-0.49x of cuBLAS (H100, bench/results/h100-s24/call3: a 64x64 Gram matrix of
K = 2**18 221 us against 109). Does splitting K further (2, 4, 8 programs an SM) close it, for
float32 and for float16 (whose 16x64 and 64x64 tiles trail cuBLAS 0.56-0.68x)?

For each case (``exp_s23_gram.CASES`` and ``exp_s24_longk.MORE``), the default plan and its
gemm kernel edited to ``split_k`` chunks giving P programs an SM (the chunk count rounded down
to one that divides K's steps, so that no step is masked), float32 also on 2 warps, each timed
as the plan's launches (CUDA events, median) beside cuBLAS and the copy time of the operands.
The combine's share: the default and the 4-an-SM split are timed again on a K of one step a
chunk (``probe``: the partials then read almost nothing; what is left is the combine reading
``split`` partial tiles and two launches).

In the run kept (bench/results/h100-s25/call1) a variant "default, old combine" was meant to
time the combine of before (the GEMM's tiles, one chunk after another) against one of smaller
tiles adding blocks of chunks, but the emitted kernels were cached by IR text, so both ran the
new one; ``exp_s25_check.py`` made the comparison (no difference) and the new combine was
taken out.

Run on the GPU machine: ``python3 bench/exp_s25_occupancy.py [--only REGEX] [--budget S]``.
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
from exp_s24_longk import MORE  # noqa: E402

SMS = 132


def whole_split(steps: int, target: int) -> int:
    """The largest chunk count at most ``target`` that divides ``steps`` (no masked step), or
    ``target`` itself where the nearest divisor is under half of it."""
    for s in range(min(target, steps), 0, -1):
        if steps % s == 0:
            return s if 2 * s >= target else min(target, steps)
    return 1


def variants(attrs: dict[str, int], k: int, tiles: int, dtype: str) -> list[tuple[str, tuple]]:
    """(label, tiles for ``_retile``) of the default and the denser splits."""
    bm, bn, bk = attrs["block_m"], attrs["block_n"], attrs["block_k"]
    w, s = attrs["num_warps"], attrs["num_stages"]
    steps = -(-k // bk)
    out: list[tuple[str, tuple]] = [("default", ())]
    for per_sm in (1, 2, 4, 8):
        split = whole_split(steps, max(1, per_sm * SMS // tiles))
        if split < 2 or (per_sm == 1 and split == attrs.get("split_k", 1)):
            continue
        out.append((f"{per_sm}/SM split{split}", (bm, bn, bk, w, s, split)))
        if dtype == "float32" and w != 2:
            out.append((f"{per_sm}/SM split{split} w2", (bm, bn, bk, 2, s, split)))
        if dtype == "float16" and bk != 64 and per_sm > 1:
            out.append((f"{per_sm}/SM split{split} bk64 s4",
                        (bm, bn, 64, w, 4, whole_split(-(-k // 64), per_sm * SMS // tiles))))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=200.0)
    args = p.parse_args(argv)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()

    for dtype in ("float32", "float16"):
        for name, (batch, m, n, k) in {**CASES, **MORE}.items():
            label = f"{name} {dtype}"
            if not re.search(args.only, label) or time.time() > deadline:
                continue
            a, bt, b = operands(cp, batch, m, n, k, dtype)
            copy_ms = copy_time(cp, a.nbytes + b.nbytes, _time_events)
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            blas_ms = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)
            y, buffers, text = gemm_of(a, b)  # (the GEMM of every case)
            (kernel,) = fj.parse(text).kernels
            attrs = dict(kernel.attrs)
            tiles = batch * -(-m // attrs["block_m"]) * -(-n // attrs["block_n"])
            print(f"{label}: {tiles} tiles of {attrs['block_m']}x{attrs['block_n']}, default "
                  f"bk{attrs['block_k']} w{attrs['num_warps']} s{attrs['num_stages']} "
                  f"split{attrs.get('split_k', 1)}; copy {copy_ms * 1e3:.1f} us, cuBLAS "
                  f"{blas_ms * 1e3:.1f} us", flush=True)
            def probe(tried: tuple, attrs: dict = attrs, batch: int = batch, m: int = m,
                      n: int = n, dtype: str = dtype) -> str:
                """The same tiles over a K of one step a chunk: the combine's time, nearly."""
                bk, split = (tried[2], tried[5]) if tried else (attrs["block_k"],
                                                                attrs.get("split_k", 1))
                pa, _, pb = operands(cp, batch, m, n, bk * split, dtype)
                _, bufs, ptext = gemm_of(pa, pb)
                full = tried or (attrs["block_m"], attrs["block_n"], bk, attrs["num_warps"],
                                 attrs["num_stages"], split)
                run, _ = retiled_run(backend, ptext, full, bufs)
                ms = _time_events(cp, run, 0.3)
                return f"; K={bk * split} (a step a chunk) {ms * 1e3:.1f} us"

            for vlabel, tried in variants(attrs, k, tiles, dtype):
                if time.time() > deadline:
                    break
                try:
                    run, got = retiled_run(backend, text, tried, buffers)
                    extra = probe(tried) if vlabel == "default" or (
                        vlabel.startswith("4/SM") and len(vlabel.split()) == 2) else ""
                    err = _error(cp, got, ref)
                    ms = _time_events(cp, run, 0.4)
                    print(f"  {vlabel:24s} {tried!s:30s} {ms * 1e3:8.1f} us "
                          f"{50 * copy_ms / ms:5.0f}% of the read bound, x{blas_ms / ms:.2f} "
                          f"cuBLAS, err {err:.1e}{extra}", flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"  {vlabel:24s} {tried!s:30s} failed: {type(exc).__name__}: "
                          f"{str(exc)[:200]}", flush=True)
            del a, b, bt, ref, y, buffers
            cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
