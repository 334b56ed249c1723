"""Experiment (fifteenth session, second call): two findings of the first call's float32
sweep (``bench/exp_s15.py``, ``bench/results/h200-s15-call1``).

1. A TF32 product of K-major operands, 6000x3000x4000 (``a @ bt.T``), failed on the H200 with
   an illegal memory access in its default plan (persistent, TMA loads), where 4096x4096x4096
   and 8192x4096x4096 ran. Each case here runs in a process of its own (an illegal access
   ends the CUDA context) and prints its error against a float64 product or how it failed:
   the failing shape, then one change at a time (M and N multiples of the tiles, K a multiple
   of 64 steps, one program per tile), to find what the failure needs.
2. Full-precision float32 of a K-major B (``a @ bt.T``, a linear layer's ``x @ w.T``) ran at
   24 TFLOP/s (0.49x of cuBLAS) at 4096^3. This times the GEMM kernel for every operand layout
   (A row-major or a transposed view, B row-major or a transposed view) and a copy of the
   operand to the other layout, to see which layouts the FMA kernel wants.

``--part rule`` (third call): the whole plan of ``a @ bt.T`` in full precision with the pass
that writes B row-major first (``rules.rule_fma_n_major_b``) as the default decides, off and
forced, beside cuBLAS.

Run on the GPU machine: ``python3 bench/exp_s15b.py [--json FILE] [--part ...]``; ``--dry`` checks it on
the CPU (NumPy for CuPy, the interpreter, sides cut to at most 48).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: name -> (M, N, K, settings): TF32 products of K-major operands, each in its own process
CRASH_CASES = {
    "6000x3000x4000": (6000, 3000, 4000, {}),
    "6144x3072x4000": (6144, 3072, 4000, {}),
    "6000x3000x4096": (6000, 3000, 4096, {}),
    "6000x3072x4096": (6000, 3072, 4096, {}),
    "6144x3000x4096": (6144, 3000, 4096, {}),
    "6000x3000x4000 one program a tile": (6000, 3000, 4000, {"FUSEJIT_GEMM_PERSISTENT": "0"}),
    "4000x4000x4000": (4000, 4000, 4000, {}),
}

#: name -> (M, N, K): full-precision float32 products, every operand layout
LAYOUT_SHAPES = {"4096^3": (4096, 4096, 4096), "6400x1552x3336": (6400, 1552, 3336)}


def _operands(cp: Any, m: int, n: int, k: int, dry: bool, seed: int, b_stored_nk: bool
              ) -> tuple[int, int, int, Any, Any]:
    """(M, N, K, A [M, K], B [K, N] or, with ``b_stored_nk``, bt [N, K]) of standard normal
    float32 values on the device, the sides cut to at most 48 (N 40) in a dry run."""
    if dry:
        m, n, k = min(m, 48), min(n, 40), min(k, 48)
    rng = np.random.default_rng(seed)
    a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
    b = cp.asarray(rng.standard_normal((n, k) if b_stored_nk else (k, n), dtype=np.float32))
    return m, n, k, a, b


def _one(m: int, n: int, k: int, dry: bool) -> dict[str, Any]:
    """A child: the TF32 product ``a @ bt.T`` of the case, its error and time."""
    from exp_s7b import backend_and_timer

    import fusejit as fj
    cp, event_time = backend_and_timer(dry)
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
    bt = cp.asarray(rng.standard_normal((n, k), dtype=np.float32))
    y = fj.matmul(fj.asarray(a), fj.asarray(bt).T, precision="tf32")
    explain = fj.plan(y).explain()
    out = y.numpy().astype(np.float64)
    ref = np.asarray(a.get() if hasattr(a, "get") else a, np.float64) @ \
        np.asarray(bt.get() if hasattr(bt, "get") else bt, np.float64).T
    err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    y2 = fj.matmul(fj.asarray(a), fj.asarray(bt).T, precision="tf32")
    plan = fj.plan(y2)
    buffers = [leaf.buffer for leaf in structural_key([y2._node])[1]]
    backend = current()
    us = event_time(lambda: backend.execute(plan.program, buffers, plan)) * 1e6
    tiling = [line.strip() for line in explain.splitlines() if "tiling" in line or "kernel @" in line]
    return {"error": err, "us": us, "tflops": 2 * m * n * k / us / 1e6, "plan": tiling}


def _crashes(dry: bool) -> list[dict[str, Any]]:
    rows = []
    for name, (m, n, k, settings) in CRASH_CASES.items():
        if dry:
            m, n, k = min(m, 48), min(n, 40), min(k, 48)
        env = {**os.environ, **settings}
        cmd = [sys.executable, __file__, "--child", f"{m},{n},{k}"] + (["--dry"] if dry else [])
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            row = json.loads(lines[-1]) if done.returncode == 0 and lines else \
                {"failed": (done.stdout + done.stderr)[-600:]}
        except subprocess.TimeoutExpired:
            row = {"failed": "timeout"}
        row.update(case=name, m=m, n=n, k=k, settings=settings)
        rows.append(row)
        if "failed" in row:
            print(f"tf32 {name:36s} FAILED: {row['failed'][-300:]!r}", flush=True)
        else:
            print(f"tf32 {name:36s} err {row['error']:.1e} {row['us']:8.1f} us "
                  f"{row['tflops']:5.0f} TFLOP/s | {' | '.join(row['plan'][:3])}", flush=True)
    return rows


def _layouts(dry: bool) -> list[dict[str, Any]]:
    """Full-precision float32: the GEMM kernel alone for each operand layout, and the copy
    that would change a K-major B (or an M-major A) to the layout the kernel reads fastest."""
    from exp_s7b import backend_and_timer, kernel_times

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    cp, event_time = backend_and_timer(dry)
    backend = current()
    rows = []
    for name, (m, n, k) in LAYOUT_SHAPES.items():
        m, n, k, a, b = _operands(cp, m, n, k, dry, 1, False)
        at, bt = cp.ascontiguousarray(a.T), cp.ascontiguousarray(b.T)
        copy_us = event_time(lambda x=bt: cp.ascontiguousarray(x.T)) * 1e6
        cublas = event_time(lambda x=a, w=b: cp.matmul(x, w)) * 1e6
        ref = np.asarray(a.get() if hasattr(a, "get") else a, np.float64) @ \
            np.asarray(b.get() if hasattr(b, "get") else b, np.float64)
        flops = 2.0 * m * n * k
        print(f"ieee {name}: cuBLAS {cublas:8.1f} us {flops / cublas / 1e6:5.1f} TFLOP/s; "
              f"a copy of B to the other layout {copy_us:6.1f} us", flush=True)
        for layout, (xa, xb) in {"A row, B row": (a, b), "A row, B K-major": (a, bt.T),
                                 "A M-major, B row": (at.T, b),
                                 "A M-major, B K-major": (at.T, bt.T)}.items():
            y = fj.asarray(xa) @ fj.asarray(xb)
            plan = fj.plan(y)
            buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
            out = backend.execute(plan.program, buffers, plan)[0]
            out = np.asarray(out.get() if hasattr(out, "get") else out, np.float64)
            err = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
            parts = kernel_times(backend, plan.program, buffers, event_time)
            total = sum(us for _, us, _ in parts)
            row = {"shape": name, "layout": layout, "us": total, "tflops": flops / total / 1e6,
                   "error": err, "kernels": [(kn.name, round(us, 1)) for kn, us, _ in parts],
                   "cublas_us": cublas, "copy_us": copy_us}
            rows.append(row)
            print(f"ieee {name} {layout:22s} {total:8.1f} us {flops / total / 1e6:5.1f} TFLOP/s "
                  f"({cublas / total:4.2f}x cuBLAS) err {err:.1e} | "
                  + " | ".join(f"{kn} {us}" for kn, us in row["kernels"]), flush=True)
    return rows


#: name -> (M, N, K): full-precision float32 ``a @ bt.T`` with and without the pass that
#: writes B row-major first (``rules.rule_fma_n_major_b``), whole plans
RULE_SHAPES = {"4096^3": (4096, 4096, 4096), "6400x1552x3336": (6400, 1552, 3336),
               "512x4096x4096": (512, 4096, 4096), "128x4096x4096": (128, 4096, 4096),
               "256x1024x1024": (256, 1024, 1024), "2048x512x8192": (2048, 512, 8192),
               "1000x3000x700": (1000, 3000, 700)}


def _rule(dry: bool) -> list[dict[str, Any]]:
    """The whole plan of ``a @ bt.T`` in full precision, the rule's pass on (as the default
    decides, and forced) and off, against cuBLAS's bare product of the same operands."""
    from exp_s7b import backend_and_timer, kernel_times

    import fusejit as fj
    from fusejit.fuse import cost
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    cp, event_time = backend_and_timer(dry)
    backend = current()
    rate = cost.FMA_K_MAJOR_B_FLOPS
    rows = []
    for name, (m, n, k) in RULE_SHAPES.items():
        m, n, k, a, bt = _operands(cp, m, n, k, dry, 2, True)
        cublas = event_time(lambda x=a, w=bt: cp.matmul(x, w.T)) * 1e6
        flops = 2.0 * m * n * k
        line = f"ieee a @ bt.T {name:16s} cuBLAS {cublas:8.1f} us |"
        for variant, k_rate in (("default", rate), ("pass off", cost.FMA_N_MAJOR_B_FLOPS),
                                ("pass forced", 1.0)):
            cost.FMA_K_MAJOR_B_FLOPS = k_rate
            forget_plans()
            y = fj.asarray(a) @ fj.asarray(bt).T
            plan = fj.plan(y)
            buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
            us = event_time(lambda p=plan, b=buffers: backend.execute(p.program, b, p)) * 1e6
            parts = [(kn.name, round(t, 1)) for kn, t, _ in
                     kernel_times(backend, plan.program, buffers, event_time)]
            rows.append({"shape": name, "m": m, "n": n, "k": k, "variant": variant, "us": us,
                         "tflops": flops / us / 1e6, "cublas_us": cublas, "kernels": parts})
            line += f" {variant} {us:8.1f} us ({len(parts)} kernels, {cublas / us:4.2f}x cuBLAS) |"
        cost.FMA_K_MAJOR_B_FLOPS = rate
        print(line, flush=True)
    forget_plans()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--part", choices=("crash", "layouts", "both", "rule"), default="both")
    args = parser.parse_args(argv)
    if args.child:
        m, n, k = (int(v) for v in args.child.split(","))
        print(json.dumps(_one(m, n, k, args.dry)), flush=True)
        return 0
    rows: dict[str, Any] = {}
    if args.part in ("crash", "both"):
        rows["crash"] = _crashes(args.dry)
    if args.part in ("layouts", "both"):
        rows["layouts"] = _layouts(args.dry)
    if args.part == "rule":
        rows["rule"] = _rule(args.dry)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0




if __name__ == "__main__":
    sys.exit(main())
