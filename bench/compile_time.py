"""Cold compile time of every suite workload's kernels, for sm_90, on any machine (no GPU).

Issue 9's target: at most 0.5 s per kernel. The suite's "compile s" column on the H200 is the
first call minus a warm call, which includes loading the cubin; this script times the parts
that run on the host alone, per kernel: planning, emitting the Triton source, and
``triton.compile`` to a cubin (Triton's front end, its MLIR passes, ``ptxas``), with Triton's
and fusejit's disk caches in a fresh directory, so nothing is reused. A first compile of a
one-op kernel loads Triton's backends before any workload's is timed (the seventh session's
first H200 figures charged that to the first workload: 0.88 s for ``sum_rows``, 1.38 s for
draw e's u08).

``--gemm``: the GEMMs of issue 11's anchors and of unseen draws' misaligned and split-K
shapes instead, each realized once through the ``cuda`` backend's host code on
``tests/fake_cupy.py`` (no GPU; the kernels do not run), so that every kernel is emitted and
compiled as on the GPU: alignment copies, the strides they give, the check for ptxas
serializing a main loop and the relay that follows. Each ``triton.compile`` is timed. Then,
beside them, the plain pointer GEMM of Triton's matrix-multiplication tutorial (our own copy
of its form: grouped tiles, masked K loop, one ``tl.dot`` a step, a masked store) at the
tiles of the float16 and float32 cases: Triton's own cost of such a kernel on this machine.

Run: ``python bench/compile_time.py [--only REGEX] [--size L] [--json OUT] [--gemm]``.
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
    ap.add_argument("--gemm", action="store_true", help="the GEMM cases (GEMM_CASES) instead")
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="fj-compile-")
    os.environ["FUSEJIT_CACHE_DIR"] = str(Path(scratch) / "fusejit")
    os.environ["TRITON_CACHE_DIR"] = str(Path(scratch) / "triton")
    if args.gemm:
        rows = gemm_compile_times(args.only)
        _report(rows, args.json)
        return 0

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
    _report(rows, args.json)
    return 0


def _report(rows: list[dict], json_path: str | None) -> None:
    worst = max(rows, key=lambda r: r["total_s"])
    print(f"\n{len(rows)} kernels; slowest {worst['workload']} {worst['kernel']}: "
          f"{worst['total_s']:.3f} s; over 0.5 s: "
          f"{sum(r['total_s'] > 0.5 for r in rows)}")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=1))


#: label: (M, N, K, dtype, epilogue, B read K-major, precision): issue 11's anchors, then
#: shapes of the unseen draws (misaligned rows: alignment copies; split K; float64)
GEMM_CASES = {
    "f16 8192^3": (8192, 8192, 8192, "float16", False, False, None),
    "f16 8192^3 bias relu": (8192, 8192, 8192, "float16", True, False, None),
    "f16 16384x1024x4096 bias relu": (16384, 1024, 4096, "float16", True, False, None),
    "f16 128x4096x4096 bias relu": (128, 4096, 4096, "float16", True, False, None),
    "f32 4096^3": (4096, 4096, 4096, "float32", False, False, None),
    "tf32 4096^3": (4096, 4096, 4096, "float32", False, False, "tf32"),
    "f16 4943x15497x2215 bias relu": (4943, 15497, 2215, "float16", True, False, None),
    "f16 1548x11932x3183 b.T": (1548, 11932, 3183, "float16", False, True, None),
    "f32 2047x513x8191": (2047, 513, 8191, "float32", False, False, None),
    "f64 2048x576x4096": (2048, 576, 4096, "float64", False, False, None),
}


def gemm_compile_times(only: str | None) -> list[dict]:
    """Each GEMM case realized once on the fake CuPy; every compile it makes, timed."""
    import re

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.fake_cupy import FakeCupy
    fake = FakeCupy(raw_launch=True)
    sys.modules["cupy"] = fake

    import fusejit as fj
    from fusejit.runtime import compile as compile_module
    fj.set_backend("cuda")
    (fj.asarray(fake.asarray(np.zeros(1024, np.float32))) + 1).realize()  # (Triton's backends)
    compiled: list[tuple[str, float]] = []
    timed = compile_module._compile

    def timing(emitted: object, launch: object, *args: object) -> object:
        t0 = time.perf_counter()
        out = timed(emitted, launch, *args)
        compiled.append((launch.fn_name, time.perf_counter() - t0))  # type: ignore[attr-defined]
        return out
    compile_module._compile = timing  # type: ignore[assignment]
    rows = []
    for label, (m, n, k, dtype, epilogue, bt, precision) in GEMM_CASES.items():
        if only and not re.search(only, label):
            continue
        a = fj.asarray(fake.asarray(np.zeros((m, k), dtype)))
        b = fj.asarray(fake.asarray(np.zeros((n, k) if bt else (k, n), dtype)))
        y = fj.matmul(a, b.T if bt else b, precision=precision) if precision else \
            a @ (b.T if bt else b)
        if epilogue:
            y = fj.maximum(y + fj.asarray(fake.asarray(np.zeros(n, dtype))), 0)
        compiled.clear()
        t0 = time.perf_counter()
        y.realize()
        total = time.perf_counter() - t0
        print(f"{label:32s} realize {total:6.3f} s: " + ", ".join(
            f"{name} {s:.3f} s" for name, s in compiled), flush=True)
        rows += [{"workload": label, "kernel": name, "compile_s": s, "total_s": s}
                 for name, s in compiled]
    for label, tiles in REFERENCE_TILES.items():
        if only and not re.search(only, label):
            continue
        seconds = reference_gemm_compile(*tiles)
        print(f"{label:32s} compile {seconds:6.3f} s", flush=True)
        rows.append({"workload": label, "kernel": "reference", "compile_s": seconds,
                     "total_s": seconds})
    return rows


#: the reference GEMM's tiles: (dtype, block_m, block_n, block_k, num_warps, num_stages,
#: input_precision), those fusejit's heuristics give the float16 8192^3 and the float32
#: 4096^3 full-precision cases
REFERENCE_TILES = {
    "reference f16 128x256x64 w8 s3": ("fp16", 128, 256, 64, 8, 3, "tf32"),
    "reference f32 ieee 64x64x32 w4 s3": ("fp32", 64, 64, 32, 4, 3, "ieee"),
}


def reference_gemm_compile(dtype: str, bm: int, bn: int, bk: int, warps: int, stages: int,
                           precision: str) -> float:
    """Seconds to compile, for sm_90, a plain pointer GEMM in the form of Triton's tutorial
    (grouped tiles, a K loop masked along K, a masked store) at these tiles."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget

    @triton.jit
    def plain_gemm(a, b, c, m, n, k, a_row, b_row, c_row, block_m: tl.constexpr,
                   block_n: tl.constexpr, block_k: tl.constexpr, group_m: tl.constexpr,
                   precision_: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(m, block_m), tl.cdiv(n, block_n)
        group = pid // (group_m * tiles_n)
        first_m = group * group_m
        height = min(tiles_m - first_m, group_m)
        pid_m = first_m + (pid % (group_m * tiles_n)) % height
        pid_n = (pid % (group_m * tiles_n)) // height
        rows = pid_m * block_m + tl.arange(0, block_m)
        cols = pid_n * block_n + tl.arange(0, block_n)
        ks = tl.arange(0, block_k)
        acc = tl.zeros((block_m, block_n), tl.float32)
        for step in range(0, tl.cdiv(k, block_k)):
            kk = step * block_k + ks
            x = tl.load(a + (rows % m)[:, None] * a_row + kk[None, :], mask=kk[None, :] < k,
                        other=0)
            y = tl.load(b + kk[:, None] * b_row + (cols % n)[None, :], mask=kk[:, None] < k,
                        other=0)
            acc = tl.dot(x, y, acc, input_precision=precision_)
        tl.store(c + rows[:, None] * c_row + cols[None, :], acc.to(c.dtype.element_ty),
                 mask=(rows[:, None] < m) & (cols[None, :] < n))

    pointer = f"*{dtype}"
    signature = {"a": pointer, "b": pointer, "c": pointer, **{x: "i32" for x in (
        "m", "n", "k", "a_row", "b_row", "c_row")}, **{x: "constexpr" for x in (
            "block_m", "block_n", "block_k", "group_m", "precision_")}}
    constants = {"block_m": bm, "block_n": bn, "block_k": bk, "group_m": 8,
                 "precision_": precision}
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(9)}
    source = triton.compiler.ASTSource(fn=plain_gemm, signature=signature,
                                       constexprs=constants, attrs=aligned)
    t0 = time.perf_counter()
    triton.compile(source, target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": warps, "num_stages": stages})
    return time.perf_counter() - t0


if __name__ == "__main__":
    sys.exit(main())
