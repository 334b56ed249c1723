"""Full-precision float32 (and float64) products as whole plans, under five settings each in a
process of its own: what making the clamped edge loads, the peeled split-K loop and alignment
copies of both operands the default would give (issue 11; thirty-first session).

``exp_s26_fma.py`` times the GEMM kernel alone with each setting patched in, and padded
operands as views of wider buffers beside a separate copy's time. This times what a user
gets: the plan ``a @ b`` becomes under each setting, its alignment copies included, as a
CUDA graph of its launches (``exp_s25_check.time_graph``), beside cuBLAS (by calls). The
settings are environment variables read when the package is imported, so each runs in a
fresh process and no cache can hand one setting's kernels to another:

- ``default``: as shipped;
- ``clamp+peel``: ``FUSEJIT_GEMM_CLAMP_EDGES=1 FUSEJIT_GEMM_PEEL_SPLIT=1``;
- ``copies``: ``FUSEJIT_GEMM_ALIGN=always`` (every misaligned operand row copied to 16-byte
  rows whatever the size; for full precision the default copies A alone, from
  ``cost.FMA_ALIGN_MIN_FLOPS``);
- ``copies+c+p``: both;
- ``copies+clamp``: the copies with the clamps alone (the peel spills in one kernel under
  Triton 3.6, above).

Cases: both operands' rows misaligned (B row-major, and ``b.T``: K-major), one of them,
edge tiles only, aligned (the settings must not cost there), small products (where copies
were measured to lose), float64.

Run on the GPU machine: ``python3 bench/exp_s31_fma_plans.py [--only REGEX] [--budget S]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: name -> (M, N, K, dtype, B read K-major (``b.T`` of a [N, K] buffer))
CASES: dict[str, tuple[int, int, int, str, bool]] = {
    "both 2047x513x8191": (2047, 513, 8191, "float32", False),
    "both 767x769x16383": (767, 769, 16383, "float32", False),
    "both 1279x1281x4095": (1279, 1281, 4095, "float32", False),
    "both 4095x4097x4093": (4095, 4097, 4093, "float32", False),
    "both bT 2047x513x8191": (2047, 513, 8191, "float32", True),
    "both bT 3001x2999x3003": (3001, 2999, 3003, "float32", True),
    "A 2048x576x8191": (2048, 576, 8191, "float32", False),
    "B 2048x577x8192": (2048, 577, 8192, "float32", False),
    "B 4096x4093x4096": (4096, 4093, 4096, "float32", False),
    "edge 2047x576x8192": (2047, 576, 8192, "float32", False),
    "aligned 2048x576x8192": (2048, 576, 8192, "float32", False),
    "aligned 4096^3": (4096, 4096, 4096, "float32", False),
    "small both 1001x3001x701": (1001, 3001, 701, "float32", False),
    "small both 257x3467x585": (257, 3467, 585, "float32", False),
    "small both 1000x1001x999": (1000, 1001, 999, "float32", False),
    "f64 both 2047x513x4095": (2047, 513, 4095, "float64", False),
    "f64 aligned 2048x576x4096": (2048, 576, 4096, "float64", False),
}

SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "clamp+peel": {"FUSEJIT_GEMM_CLAMP_EDGES": "1", "FUSEJIT_GEMM_PEEL_SPLIT": "1"},
    "copies": {"FUSEJIT_GEMM_ALIGN": "always"},
    "copies+c+p": {"FUSEJIT_GEMM_ALIGN": "always", "FUSEJIT_GEMM_CLAMP_EDGES": "1",
                   "FUSEJIT_GEMM_PEEL_SPLIT": "1"},
    # (the peel spills 136-148 bytes a thread in the 2-warp kernel of a K-major B under Triton
    # 3.6, the GPU image's; the clamps alone none)
    "copies+clamp": {"FUSEJIT_GEMM_ALIGN": "always", "FUSEJIT_GEMM_CLAMP_EDGES": "1"},
}


def child(names: list[str], deadline: float) -> None:
    """Time each case's plan under this process's settings; one JSON line per case."""
    import cupy as cp
    from bench_matmul import _error, _time_events
    from exp_s23_gram import gemm_of, retiled_run
    from exp_s25_check import time_graph

    import fusejit as fj
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    for name in names:
        if time.time() > deadline:
            break
        m, n, k, dt, b_t = CASES[name]
        rng = cp.random.default_rng(31)
        a = rng.standard_normal((m, k), dtype=cp.float32).astype(dt)
        if b_t:
            b = rng.standard_normal((n, k), dtype=cp.float32).astype(dt).T
        else:
            b = rng.standard_normal((k, n), dtype=cp.float32).astype(dt)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        blas = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)
        y, buffers, text = gemm_of(a, b)
        run, got = retiled_run(backend, text, (), buffers)
        ms = time_graph(cp, run)
        kernels = [kk.name for kk in fj.parse(text).kernels]
        print(json.dumps({"case": name, "us": ms * 1e3, "cublas_us": blas * 1e3,
                          "err": _error(cp, got, ref), "kernels": kernels}), flush=True)
        del a, b, ref, y, buffers, got, run
        cp.get_default_memory_pool().free_all_blocks()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=240.0)
    p.add_argument("--child", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child.split("|"), args.deadline)
        return 0
    names = [name for name in CASES if re.search(args.only, name)]
    deadline = time.time() + args.budget
    rows: dict[str, dict[str, Any]] = {name: {} for name in names}
    for label, env in SETTINGS.items():
        # (each setting's share of what is left, so a slow one cannot starve the rest)
        left = deadline - time.time()
        share = time.time() + left / (len(SETTINGS) - list(SETTINGS).index(label))
        proc = subprocess.run(
            [sys.executable, __file__, "--child", "|".join(names), "--deadline", str(share)],
            env={**os.environ, **env}, capture_output=True, text=True,
            timeout=max(30.0, share - time.time() + 60))
        for line in proc.stdout.splitlines():
            if line.startswith("{"):
                got = json.loads(line)
                rows[got["case"]][label] = got
        if proc.returncode:
            print(f"{label}: exit {proc.returncode}: {proc.stderr[-600:]}", flush=True)
    print(f"{'case':28s} {'cuBLAS':>8s} " + " ".join(f"{label:>18s}" for label in SETTINGS))
    for name, by in rows.items():
        blas = next((got["cublas_us"] for got in by.values()), float("nan"))
        cells = []
        for label in SETTINGS:
            got = by.get(label)
            cells.append(f"{got['us']:8.1f} (x{blas / got['us']:.2f})" if got else "-")
        print(f"{name:28s} {blas:8.1f} " + " ".join(f"{c:>18s}" for c in cells), flush=True)
    for name, by in rows.items():
        for label, got in by.items():
            print(f"  {name} {label}: {len(got['kernels'])} kernels {got['kernels']}, "
                  f"err {got['err']:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
