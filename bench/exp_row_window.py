"""Experiment (fourteenth session): row kernels over rows that are not 16-byte multiples,
read through a row window (``triton_emitter._Emitter._row_window``) or element by element.

A row of ``C`` elements whose ``C * itemsize`` is not a multiple of 16 starts every row off a
16-byte boundary; Triton then loads one element at a time (float16: 2-byte loads; a softmax
of 2412x25379 ran at 33% of the copy rate on the H200). With the window each row's tiles
start at the 16-byte word the row starts in and the loads move 16 bytes at a time. This
times each workload's plan (its launches alone, CUDA events) with the window on and off
(``heuristics.ROW_WINDOW``; a fresh backend for each, so each emits its own kernels), and
(fifteenth session) with the window on for kernels that store rows too
(``heuristics.ROW_WINDOW_STORES``: whole words stored 16 bytes at a time), as
microseconds and as a share of the copy rate (bytes read once and written once, against a
CuPy copy of the input's bytes in the same run), two aligned shapes beside as a check.

Run on the GPU machine: ``python3 bench/exp_row_window.py [--json FILE] [--only REGEX]``;
``--dry`` checks it on the CPU (NumPy for CuPy, the interpreter, small sides;
``tests/test_bench_experiments.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_s7b import backend_and_timer  # noqa: E402


def _softmax(fj: Any, x: Any, *_: Any) -> Any:
    return fj.softmax(x, axis=-1)


def _layer_norm(fj: Any, x: Any, w: Any, b: Any) -> Any:
    return fj.layer_norm(x, w, b)


def _sum(fj: Any, x: Any, *_: Any) -> Any:
    return x.sum(axis=-1)


def _var(fj: Any, x: Any, *_: Any) -> Any:
    return x.var(axis=-1)


#: name -> (function, rows, columns, dtype); the last two have aligned rows (a check)
WORKLOADS = {
    "softmax f16 wide": (_softmax, 2412, 25379, "float16"),  # looped, one row a program
    "softmax f16": (_softmax, 8192, 1001, "float16"),  # one tile, several rows a program
    "layer_norm f16": (_layer_norm, 4096, 5003, "float16"),
    "layer_norm f32": (_layer_norm, 8192, 3001, "float32"),
    "sum f16 short": (_sum, 262144, 77, "float16"),
    "sum f32": (_sum, 8192, 3001, "float32"),
    "var f32 wide": (_var, 2048, 40001, "float32"),  # looped Welford
    "softmax f32": (_softmax, 4096, 3001, "float32"),
    "softmax f16 aligned": (_softmax, 2412, 25376, "float16"),
    "sum f32 aligned": (_sum, 8192, 3000, "float32"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: NumPy for CuPy, the interpreter, small sides (a check)")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="", help="regex over workload names")
    args = parser.parse_args(argv)

    import fusejit as fj
    from fusejit import runtime
    from fusejit.codegen import heuristics
    from fusejit.codegen.triton_emitter import kernel_sources
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    cp, event_time = backend_and_timer(args.dry)
    rng = np.random.default_rng(0)
    rows_out: list[dict[str, Any]] = []
    for name, (fn, rows, cols, dtype) in WORKLOADS.items():
        if args.only and not re.search(args.only, name):
            continue
        if args.dry:
            rows, cols = min(rows, 5), cols % 64 + 64
        x = cp.asarray(rng.standard_normal((rows, cols)).astype(dtype))
        w = cp.asarray(rng.standard_normal(cols).astype(dtype))
        b = cp.asarray(rng.standard_normal(cols).astype(dtype))
        copy_out = cp.empty_like(x)
        copy_s = event_time(lambda o=copy_out, i=x: cp.copyto(o, i))
        copy_rate = 2 * x.nbytes / copy_s
        line = f"{name:20s} {rows}x{cols} copy {copy_rate / 1e9:6.0f} GB/s |"
        results = {}
        for window in ("off", "loads", "stores"):
            heuristics.ROW_WINDOW = window != "off"
            heuristics.ROW_WINDOW_STORES = window == "stores"
            runtime._backends.pop(runtime.get_backend(), None)  # (a fresh backend: new kernels)
            forget_plans()
            y = fn(fj, fj.asarray(x), fj.asarray(w), fj.asarray(b))
            plan = fj.plan(y)
            prog = plan.program
            buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
            backend = current()
            out = backend.execute(prog, buffers, plan)[0]
            results[window] = cp.asnumpy(out) if hasattr(cp, "asnumpy") else np.asarray(out)
            seconds = event_time(lambda p=prog, bf=buffers, pl=plan, be=backend: be.execute(p, bf, pl))
            moved = x.nbytes + out.nbytes
            windowed = any("word_at" in e.source for e in kernel_sources(prog))
            row = {"workload": name, "rows": rows, "cols": cols, "dtype": dtype,
                   "window": window, "us": seconds * 1e6,
                   "copy_share": moved / seconds / copy_rate, "kernels": len(prog.kernels),
                   "windowed_source": windowed}
            rows_out.append(row)
            line += (f" {window:6s} {seconds * 1e6:8.1f} us "
                     f"{100 * row['copy_share']:4.0f}% |")
        same = all(np.allclose(results["off"].astype(np.float64), results[w].astype(np.float64),
                               rtol=2e-2 if dtype == "float16" else 1e-5, atol=1e-3,
                               equal_nan=True) for w in ("loads", "stores"))
        print(line + (" same" if same else " DIFFERENT"), flush=True)
        for row in rows_out[-3:]:
            row["same"] = bool(same)
        del x, w, b, copy_out
        if args.json:
            Path(args.json).write_text(json.dumps(rows_out, indent=1))
    heuristics.ROW_WINDOW, heuristics.ROW_WINDOW_STORES = True, False
    return 0


if __name__ == "__main__":
    sys.exit(main())
