"""Products of a few output tiles and a long K (issue 11): a Gram matrix of a few long vectors,
matrix-vector products, narrow batched products. They split K into at most 16 chunks (16-64
programs on a 132-SM GPU) before the twenty-third session; now into one chunk per SM or more
(``heuristics._fill_split``). Each case timed through ``fj.jit`` (CUDA events, median) under
both plans (``16 chunks``: the cap of before, patched in; ``default``: this session's), beside
CuPy's ``a @ b`` (cuBLAS) and the copy time of the operands' bytes; the two plans' results
compared to the float64 product (relative Frobenius error).

Run on the GPU machine: ``python3 bench/exp_s23_gram.py [--only REGEX]``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_matmul import _error  # noqa: E402

#: name -> (batch, M, N, K); the product is ``a @ b`` with b K-major (``a @ a.T`` for a Gram)
CASES = {"gram 16x16 K=2^20": (1, 16, 16, 1 << 20), "gram 64x64 K=2^18": (1, 64, 64, 1 << 18),
         "2x64 K=2^18": (1, 2, 64, 1 << 18), "8x256 K=2^16": (1, 8, 256, 1 << 16),
         "1x16 K=2^22": (1, 1, 16, 1 << 22), "batch 8 16x16 K=2^17": (8, 16, 16, 1 << 17),
         "128x128 K=2^16": (1, 128, 128, 1 << 16)}


def operands(cp: Any, batch: int, m: int, n: int, k: int, dtype: str) -> tuple[Any, Any, Any]:
    """A case's A ``[batch, m, k]``, B stored ``[batch, n, k]`` and B as its K-major view
    ``[batch, k, n]`` on the device (float16 scaled by 1/64: sums of 2**20 squares stay
    finite)."""
    lead = (batch,) if batch > 1 else ()
    scale = 1 / 64 if dtype == "float16" else 1.0
    a = (cp.random.standard_normal((*lead, m, k), dtype=cp.float32) * scale).astype(dtype)
    bt = (cp.random.standard_normal((*lead, n, k), dtype=cp.float32) * scale).astype(dtype)
    return a, bt, bt.swapaxes(-1, -2)


def gemm_of(a: Any, b: Any) -> tuple[Any, list[Any], str]:
    """``a @ b`` recorded as a GEMM even where the frontend would make it a sum of products
    (``linalg.SUM_OF_PRODUCTS_MIN_K``): the lazy product, its leaves' buffers in the plan's
    input order, and its fused IR text (whose tiles the experiments edit)."""
    import fusejit as fj
    from fusejit.frontend import linalg
    from fusejit.ir.graph import structural_key
    kept = linalg.SUM_OF_PRODUCTS_MIN_K
    linalg.SUM_OF_PRODUCTS_MIN_K = 1 << 62
    try:
        y = fj.asarray(a) @ fj.asarray(b)
    finally:
        linalg.SUM_OF_PRODUCTS_MIN_K = kept
    return y, [leaf.buffer for leaf in structural_key([y._node])[1]], fj.dump(y, fused=True)


def retiled_run(backend: Any, text: str, tiles: tuple[int, ...], buffers: list[Any]
                ) -> tuple[Any, Any]:
    """The plan of the fused IR ``text`` with its GEMM's tiles replaced by ``tiles``
    (``bench_matmul._retile``; ``()`` keeps them), as a function of no arguments that executes
    it over ``buffers`` on ``backend``, and its first result (the kernels are emitted on that
    first run). Emitted kernels are kept by IR text (``kernel_cache._emit_cache``), plans by
    program text (``fuse.plan_for``, the backend's built kernels on them) and the backend's
    built kernels by kernel text (``_runners``): all three are cleared first, so that an
    emitter or heuristic patched by the caller is not hidden by a kernel built before the
    patch. The twenty-fifth session's first call lost its "old combine" rows so; with the
    emit cache alone cleared, every variant that patched a module and kept the text timed
    the default's kernels (the twenty-eighth session's clamp, peel and spread combine, found
    in the thirtieth: no -r96 cubin was ever compiled for exp_s30_maxnreg's cap)."""
    import functools

    from bench_matmul import _retile

    import fusejit as fj
    from fusejit.fuse import clear_cache, plan_for
    from fusejit.runtime import kernel_cache
    kernel_cache._emit_cache.clear()
    clear_cache()
    getattr(backend, "_runners", {}).clear()
    plan = plan_for(fj.parse(_retile(text, tiles)))
    run = functools.partial(backend.execute, plan.program, buffers, plan)
    return run, run()[0]


def copy_time(cp: Any, nbytes: int, time_events: Any) -> float:
    """Milliseconds of a device copy of ``nbytes`` (``time_events``: the experiment's timer)."""
    src = cp.empty(nbytes // 4, cp.float32)
    dst = cp.empty_like(src)
    return time_events(cp, lambda: cp.copyto(dst, src), 0.3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    args = p.parse_args(argv)
    import cupy as cp
    from exp_reductions import event_time

    import fusejit as fj
    from fusejit.codegen import heuristics
    from fusejit.runtime import forget_plans
    fj.set_backend("cuda")
    fill_split = heuristics._fill_split

    @contextlib.contextmanager
    def capped(cap: bool) -> Iterator[None]:
        heuristics._fill_split = (lambda *a: min(16, fill_split(*a))) if cap else fill_split
        forget_plans()
        try:
            yield
        finally:
            heuristics._fill_split = fill_split
            forget_plans()
    for dtype in ("float16", "float32"):
        for name, (batch, m, n, k) in CASES.items():
            label = f"{name} {dtype}"
            if not re.search(args.only, label):
                continue
            a, bt, b = operands(cp, batch, m, n, k, dtype)
            moved = a.nbytes + b.nbytes
            src = cp.empty(moved // 4, cp.float32)
            dst = cp.empty_like(src)
            copy_us = event_time(lambda src=src, dst=dst: cp.copyto(dst, src)) * 1e6
            ref = a.astype(cp.float64) @ b.astype(cp.float64)
            cells = []
            for plan in ("16 chunks", "default"):
                with capped(plan == "16 chunks"):
                    jf = fj.jit(lambda x, y: x @ y)
                    out = cp.asarray(jf(a, b))
                    err = _error(cp, out, ref)
                    us = event_time(lambda jf=jf, a=a, b=b: jf(a, b)) * 1e6
                    (kernel,) = fj.plan(fj.asarray(a) @ fj.asarray(b)).program.kernels
                split = kernel.attrs.get("split_k", kernel.attrs.get("kind"))  # (or a reduction)
                cells.append(f"{plan} {us:7.1f} us {100 * copy_us / us:5.1f}% "
                             f"(split_k={split}, err {err:.1e})")
            blas_us = event_time(lambda a=a, b=b: a @ b) * 1e6
            print(f"{label:28s} copy {copy_us:7.1f} us | {' | '.join(cells)} | cupy {blas_us:7.1f} "
                  f"us {100 * copy_us / blas_us:5.1f}%", flush=True)
            del a, b, bt, src, dst, ref
            cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
