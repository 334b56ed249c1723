"""Cold compile time of every suite workload's kernels, for sm_90, on any machine (no GPU).

Issue 9's target: at most 0.5 s per kernel. The suite's "compile s" column on the H200 is the
first call minus a warm call, which includes loading the cubin; this script times the parts
that run on the host alone, per kernel: planning, emitting the Triton source, and
``triton.compile`` to a cubin (Triton's front end, its MLIR passes, ``ptxas``), with Triton's
and fusejit's disk caches in a fresh directory, so nothing is reused. A first compile of a
one-op kernel loads Triton's backends before any workload's is timed (the seventh session's
first H200 figures charged that to the first workload: 0.88 s for ``sum_rows``, 1.38 s for
draw e's u08).

Run: ``python bench/compile_time.py [--only REGEX] [--size L] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    """Time each kernel's emit and compile; print a table, optionally write JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="regular expression over workload names")
    ap.add_argument("--size", default=None, help="size label (default: each one's largest)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="fj-compile-")
    os.environ["FUSEJIT_CACHE_DIR"] = str(Path(scratch) / "fusejit")
    os.environ["TRITON_CACHE_DIR"] = str(Path(scratch) / "triton")

    import suite

    import fusejit as fj
    from fusejit.codegen import emit_kernel
    from fusejit.runtime.compile import compile_all

    fj.set_backend("numpy")  # (planning only: nothing runs)
    # a first compile loads Triton's backends (about 0.5-0.9 s): not any workload's
    warm = fj.plan(fj.asarray(np.empty(1024, np.float32)) + 1).program.kernels[0]
    compile_all(emit_kernel(warm, None, "cuda"), 90, True)
    rows = []
    for w, size in suite.select(args.only, [args.size] if args.size else None,
                                quick=args.size is None):
        # np.empty: the shapes and dtypes are what matter, the pages are never touched
        arrays = [np.empty(a.shape, dtype=w.dtype) for a in w.args(size)]
        t0 = time.perf_counter()
        outs = w.fj(fj, *[fj.asarray(a) for a in arrays])
        outs = outs if isinstance(outs, tuple) else (outs,)
        kernels = fj.plan(*outs).program.kernels
        t_plan = time.perf_counter() - t0
        for k in kernels:
            t0 = time.perf_counter()
            emitted = emit_kernel(k, None, "cuda")
            t_emit = time.perf_counter() - t0
            t0 = time.perf_counter()
            compiled = compile_all(emitted, 90, True)
            t_compile = time.perf_counter() - t0
            row = {"workload": w.name, "size": size, "kernel": k.name,
                   "launches": len(compiled), "plan_s": t_plan, "emit_s": t_emit,
                   "compile_s": t_compile, "total_s": t_plan + t_emit + t_compile}
            t_plan = 0.0  # (counted with the first kernel)
            rows.append(row)
            print(f"{w.name:22s} {size:2s} {k.name:42s} launches {row['launches']}  "
                  f"emit {t_emit:6.3f} s  compile {t_compile:6.3f} s  total {row['total_s']:6.3f} s",
                  flush=True)
    worst = max(rows, key=lambda r: r["total_s"])
    print(f"\n{len(rows)} kernels; slowest {worst['workload']} {worst['kernel']}: "
          f"{worst['total_s']:.3f} s; over 0.5 s: "
          f"{sum(r['total_s'] > 0.5 for r in rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
