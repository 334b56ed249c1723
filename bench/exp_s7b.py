"""Experiment (seventh session): where do a GEMM's alignment copies pay, kernel by kernel?

The unseen GEMM draws gained from copying misaligned float16 operands to padded rows at
some shapes (7453x3898x5000: 377 -> 524 TFLOP/s) and lost at others (5000x721x2185: 132 ->
84; 32 batches of 257x521x1000: 76 -> 38). This times each kernel of the plan alone (the
copies and the GEMM) and the whole plan, with the copies off (``FUSEJIT_GEMM_ALIGN=0``) and
on (``always``), by CUDA events, so the cost model (``fuse/cost.py``, ``align_gain``) can be
checked against the copy's real rate and the product's real gain.

``--set tf32`` (twelfth session): the same for float32 products in TF32 whose rows start on
4 (or 8) bytes, which the rule copies when they have at least ``cost.TF32_ALIGN_MIN_FLOPS``
flops and ``cost.TF32_ALIGN_MIN_INTENSITY`` flops per byte copied; each line also says what
the default (``FUSEJIT_GEMM_ALIGN=1``) chooses, and cuBLAS's bare TF32 product
(``CUPY_TF32=1``, set before CuPy is imported) is timed beside it.

``--set ieee`` (sixteenth session): full-precision float32 products whose rows are not 16-byte
aligned (the 20261212 draw's u12, 6410x1550x3337 with bias and GELU, ran at 0.71x of
torch.compile on an H100 where the aligned 6400x1552x3336 runs at 0.97x of cuBLAS), with the
copies forced on (the rule makes them for full precision only under ``always``), beside
cuBLAS's bare product. TF32 and full precision also time the default's plan
(``FUSEJIT_GEMM_ALIGN=1``) between the two.

Run on the GPU machine: ``python3 bench/exp_s7b.py [--set tf32|ieee]``; ``--dry`` checks it on the
CPU (NumPy for CuPy, the interpreter, sides cut to at most 40, one wall-clock run each;
``tests/test_bench_matmul.py`` runs it).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_matmul as bm  # noqa: E402

#: name -> (M, N, K, batch, B stored transposed, epilogue): the draws' cases with copies
SHAPES = {
    "old u2": (7453, 3898, 5000, 1, False, "none"),
    "old u5": (1548, 11932, 3183, 1, True, "bias_gelu"),
    "old u8": (1023, 1486, 9171, 1, True, "bias_gelu"),
    "old u10": (5000, 721, 2185, 1, False, "residual"),
    "old u13": (257, 521, 1000, 32, False, "none"),
    "new u2": (4943, 15497, 2215, 1, False, "bias_relu"),
    "new u8": (1891, 5000, 10246, 1, False, "bias_gelu"),
    "new u10": (2609, 3787, 10946, 1, False, "bias_relu"),
    "new u12": (2321, 2782, 515, 1, False, "bias_relu"),
    "new u13": (223, 1649, 4703, 3, False, "bias_gelu"),
    # (thirteenth session) the 20261212 draw's u7 (0.56x of jax.jit: under the 2e10 flops from
    # which the copies are made) and two more short-K products of 2-byte-aligned rows
    "d12 u7": (7423, 2185, 257, 1, True, "none"),
    "short1": (8000, 4000, 513, 1, True, "residual"),
    "short2": (4000, 3001, 1001, 1, False, "bias_relu"),
    # (twenty-fifth session) drawn products that the 2-byte rate of 0.15 (was 0.22) now copies,
    # never timed: the 20261210:24 draw's u12 and the 20261212:24 draw's u19
    "d10 u12": (7654, 219, 2063, 1, True, "residual"),
    "d12 u19": (127, 5181, 5000, 16, False, "none"),
}
#: the same for TF32 products (H100 before: x1 193 us as read, 53 through padded rows; x5 181
#: and 132), sizes from 3e7 to 1.4e11 flops, a decode-like product (bound by reading B), a
#: short K, a batch, and A's rows 8-byte aligned (K % 4 == 2)
TF32_SHAPES = {
    "x1": (224, 241, 9669, 1, False, "none"),
    "x5": (3001, 2047, 1537, 1, True, "bias_relu"),
    "t2 decode": (5, 4251, 7665, 1, True, "none"),
    "d1 decode": (16, 12289, 8191, 1, False, "none"),
    "s1": (500, 501, 503, 1, False, "none"),
    "s2": (1000, 1001, 999, 1, False, "none"),
    "s3": (2000, 2001, 2003, 1, False, "bias_relu"),
    "s4": (4095, 4097, 4093, 1, True, "none"),
    "s5": (128, 4097, 4093, 1, False, "none"),
    "s6": (257, 521, 1001, 8, False, "none"),
    "s7": (8192, 1023, 257, 1, False, "residual"),
    "s8 8-byte": (4096, 4096, 4094, 1, False, "none"),
    "s9": (64, 1001, 250, 1, False, "none"),
    "s10": (1023, 1023, 8191, 1, True, "none"),
}
#: the same for full-precision float32 (sixteenth session): the draw's u12, its aligned
#: neighbour, misaligned A alone and B alone, a short K, a small M and a batch
IEEE_SHAPES = {
    "u12": (6410, 1550, 3337, 1, False, "bias_gelu"),
    "u12 aligned": (6400, 1552, 3336, 1, False, "bias_gelu"),
    "f1 A": (4096, 4096, 4093, 1, False, "none"),
    "f2 B": (4096, 4093, 4096, 1, False, "none"),
    "f3": (257, 3467, 585, 1, False, "none"),
    "f4": (1001, 3001, 701, 1, False, "residual"),
    "f5": (2047, 513, 8191, 1, False, "none"),
    "f6": (257, 521, 1001, 16, False, "none"),
    # (twenty-seventh session) both operands' rows 4-byte aligned, K split by rounds of tiles
    # (``heuristics._fma_round_split``), and their one-operand neighbours
    "g1 both": (1279, 1281, 4095, 1, False, "none"),
    "g2 both": (767, 769, 16383, 1, False, "bias_relu"),
    "g3 both": (4095, 4097, 4093, 1, False, "none"),
    "g4 A": (2048, 576, 8191, 1, False, "none"),
    "g5 B": (2048, 577, 8192, 1, False, "none"),
}


def backend_and_timer(dry: bool) -> tuple[Any, Any]:
    """The array module and a timer (seconds per call) for a run, the fusejit backend set:
    CuPy, CUDA events and ``cuda``; or with ``dry`` NumPy, one wall-clock call and
    ``interpret``."""
    import fusejit as fj
    if not dry:
        import cupy as cp
        from exp_reductions import event_time
        fj.set_backend("cuda")
        return cp, event_time

    def wall_time(fn: Any) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    fj.set_backend("interpret")
    return np, wall_time


def kernel_times(backend: Any, prog: Any, buffers: list[Any], timer: Any
                 ) -> list[tuple[Any, float, int]]:
    """Each kernel of ``prog`` run alone on its inputs (computed in order from ``buffers``):
    (the kernel, microseconds a call by ``timer``, bytes it reads and writes)."""
    env: dict[str, Any] = dict(zip([p.name for p in prog.inputs], buffers))
    out = []
    for kernel in prog.kernels:
        kargs = [env[a] for a in kernel.args]
        env.update(zip(kernel.results, backend.run_kernel(kernel, list(kargs))))
        us = timer(lambda k=kernel, a=kargs: backend.run_kernel(k, list(a))) * 1e6
        moved = sum(env[a].nbytes for a in kernel.args if hasattr(env[a], "nbytes")) + \
            sum(env[r].nbytes for r in kernel.results)
        out.append((kernel, us, moved))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: NumPy for CuPy, the interpreter, small sides (a check)")
    parser.add_argument("--set", choices=("f16", "tf32", "ieee"), default="f16")
    parser.add_argument("--only", default="", help="regex over shape names")
    args = parser.parse_args(argv)
    tf32, ieee = args.set == "tf32", args.set == "ieee"
    if tf32:
        os.environ["CUPY_TF32"] = "1"  # (read by CuPy: before it is imported)
    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    cp, event_time = backend_and_timer(args.dry)
    backend = current()
    dtype, precision = ("float32", "tf32") if tf32 else \
        ("float32", "ieee") if ieee else ("float16", "ieee")
    shapes = TF32_SHAPES if tf32 else IEEE_SHAPES if ieee else SHAPES
    for name, (m, n, k, batch, bt, epilogue) in shapes.items():
        if args.only and not re.search(args.only, name):
            continue
        if args.dry:
            m, n, k, batch = min(m, 40), min(n, 40), min(k, 40) | 1, min(batch, 2)
        bm.CASES[name] = (m, n, k, dtype, precision, epilogue)
        bm.EXTRA[name] = {"batch": batch, "b_t": bt}
        x = bm._inputs(cp, name)
        flops = bm._flops(name)
        if tf32 or ieee:
            os.environ["FUSEJIT_GEMM_ALIGN"] = "1"
            forget_plans()
            chosen = fj.plan(bm._fusejit_program(fj, name, x)).program.kernels
            copies = sum(1 for kernel in chosen if kernel.row_pitch)
            b = x["bt"].swapaxes(-1, -2) if bt else x["b"]
            cublas = event_time(lambda a=x["a"], b=b: cp.matmul(a, b)) * 1e6
            print(f"{name:10s} {m}x{n}x{k} batch {batch}: the default makes {copies} copies; "
                  f"cuBLAS bare {cublas:8.1f} us {flops / cublas / 1e6:5.0f} TFLOP/s", flush=True)
        for mode in ("0", "1", "always") if tf32 or ieee else ("0", "always"):
            os.environ["FUSEJIT_GEMM_ALIGN"] = mode
            forget_plans()
            y = bm._fusejit_program(fj, name, x)
            plan = fj.plan(y)
            prog = plan.program
            buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
            parts = []
            for kernel, us, moved in kernel_times(backend, prog, buffers, event_time):
                rate = f"{moved / us / 1e3:6.0f} GB/s" if kernel.row_pitch else \
                    f"{flops / us / 1e6:6.0f} TFLOP/s"
                parts.append(f"{kernel.name} {us:8.1f} us ({rate})")
            total = event_time(lambda p=prog, b=buffers, pl=plan: backend.execute(p, b, pl)) * 1e6
            print(f"{name:10s} align={mode:6s} plan {total:8.1f} us {flops / total / 1e6:5.0f} "
                  f"TFLOP/s | " + " | ".join(parts), flush=True)
        del x
        if not args.dry:
            cp.get_default_memory_pool().free_all_blocks()
    os.environ.pop("FUSEJIT_GEMM_ALIGN", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
