"""Why do the cooperative wide-row kernels run under the copy rate on the H200? (issue 9)

On the H200 the emitted cooperative softmax and layer norm over 256 rows of 2**18 float32
run at 79% and 72% of the copy rate, where the H100 runs the same kernels at 92% and 85%.
The H200 moves 40% more bytes a second with the same 132 SMs and registers, so a program
that holds its chunk while it waits for its row's other programs costs more there. This
script measures, beside a copy and against a float64 reference:

1. the emitted kernels as they are and under a register cap of 96 (not with ``--quick``);
2. the emitted kernels with **no wait** (each program writes its chunk at once with the row
   statistics found so far: wrong answers, timed only): how fast the structure would be if
   waiting cost nothing;
3. fusejit's own pipelined form (``heuristics.COOP_PIPELINE``) at 1-3 programs an SM (with
   chunks of 4096 and at 8 warps too, not with ``--quick``), and a hand-written **persistent,
   pipelined** form (``PIPELINED``): a grid of a few programs
   per SM, each taking a chunk's ticket, loading it and storing its partials before it
   waits for the row of the chunk it already holds, so that the wait overlaps the next
   load. Arrivals never wait (a chunk's partials are stored as soon as it is loaded), and a
   program waits only for a row whose tickets were all drawn before its own next ticket, or
   for its own row: with more programs than half a row's chunks no program waits for one
   that waits for it (the spin limit is a guard; a launch that hit it is reported).

Run on the GPU machine (Triton's launcher through torch views of CuPy buffers: this script
only): ``python3 bench/exp_s20_wide.py [--only REGEX]``. ``--interpret``: the pipelined
kernels on Triton's interpreter against NumPy at small shapes (2 chunks a row: sequential
programs complete a row only then).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

EPS = 1e-5
SHAPES = ((256, 1 << 18), (1024, 1 << 16), (256, 150_001))

#: the hand-written pipelined kernels; ``{exp}`` is fusejit's ``_exp_f32`` helper
PIPELINED = '''
import triton
import triton.language as tl

{exp}

@triton.jit
def _max2(a, b):
    return tl.maximum(a, b)


@triton.jit
def _sum2(a, b):
    return a + b


@triton.jit
def _wait_row(counters, row, NCHUNK: tl.constexpr, ERR: tl.constexpr, SPIN: tl.constexpr):
    arrived = tl.atomic_add(counters + 1 + row, 0, sem="acquire")
    spins = 0
    while (arrived < NCHUNK) & (spins < SPIN):
        arrived = tl.atomic_add(counters + 1 + row, 0, sem="acquire")
        spins += 1
    if arrived < NCHUNK:
        tl.atomic_add(counters + ERR, 1, sem="relaxed")
    tl.debug_barrier()


@triton.jit
def _arrive(counters, row):
    tl.debug_barrier()  # every thread's partials stored before the arrival
    tl.atomic_add(counters + 1 + row, 1, sem="acq_rel")


@triton.jit
def _softmax_part(x):
    m = tl.reduce(x, 0, _max2)
    e = _exp_f32(x - m)
    return m, e, tl.reduce(e, 0, _sum2)


@triton.jit
def pipelined_softmax(x_ptr, y_ptr, p_max, p_sum, counters, TOTAL: tl.constexpr,
                      NCHUNK: tl.constexpr, COLS: tl.constexpr, CHUNK: tl.constexpr,
                      ERR: tl.constexpr, SPIN: tl.constexpr):
    offs = tl.arange(0, CHUNK)
    parts = tl.arange(0, NCHUNK)
    c = tl.atomic_add(counters, 1, sem="relaxed")
    cc = tl.minimum(c, TOTAL - 1)  # (a ticket past the end loads the last chunk, unused)
    m_c, e_c, s_c = _softmax_part(tl.load(x_ptr + (cc // NCHUNK) * COLS + (cc % NCHUNK) * CHUNK + offs))
    if c < TOTAL:
        tl.store(p_max + c, m_c)
        tl.store(p_sum + c, s_c)
        _arrive(counters, c // NCHUNK)
    while c < TOTAL:
        n = tl.atomic_add(counters, 1, sem="relaxed")
        nn = tl.minimum(n, TOTAL - 1)
        m_n, e_n, s_n = _softmax_part(tl.load(x_ptr + (nn // NCHUNK) * COLS + (nn % NCHUNK) * CHUNK + offs))
        if n < TOTAL:
            tl.store(p_max + n, m_n)
            tl.store(p_sum + n, s_n)
            _arrive(counters, n // NCHUNK)
        row = c // NCHUNK
        _wait_row(counters, row, NCHUNK, ERR, SPIN)
        pm = tl.load(p_max + row * NCHUNK + parts, cache_modifier=".cg")
        ps = tl.load(p_sum + row * NCHUNK + parts, cache_modifier=".cg")
        row_max = tl.reduce(pm, 0, _max2)
        row_sum = tl.reduce(ps * _exp_f32(pm - row_max), 0, _sum2)
        out = (e_c * _exp_f32(m_c - row_max)) / row_sum
        tl.store(y_ptr + row * COLS + (c % NCHUNK) * CHUNK + offs, out)
        c = n
        m_c = m_n
        e_c = e_n


@triton.jit
def _ln_part(x, CHUNK: tl.constexpr):
    s = tl.reduce(x, 0, _sum2)
    d = x - s / CHUNK
    return s, tl.reduce(d * d, 0, _sum2)


@triton.jit
def pipelined_layer_norm(x_ptr, w_ptr, b_ptr, y_ptr, p_sum, p_m2, counters, eps,
                         TOTAL: tl.constexpr, NCHUNK: tl.constexpr, COLS: tl.constexpr,
                         CHUNK: tl.constexpr, ERR: tl.constexpr, SPIN: tl.constexpr):
    offs = tl.arange(0, CHUNK)
    parts = tl.arange(0, NCHUNK)
    c = tl.atomic_add(counters, 1, sem="relaxed")
    cc = tl.minimum(c, TOTAL - 1)
    x_c = tl.load(x_ptr + (cc // NCHUNK) * COLS + (cc % NCHUNK) * CHUNK + offs)
    s_c, m2_c = _ln_part(x_c, CHUNK)
    if c < TOTAL:
        tl.store(p_sum + c, s_c)
        tl.store(p_m2 + c, m2_c)
        _arrive(counters, c // NCHUNK)
    while c < TOTAL:
        n = tl.atomic_add(counters, 1, sem="relaxed")
        nn = tl.minimum(n, TOTAL - 1)
        x_n = tl.load(x_ptr + (nn // NCHUNK) * COLS + (nn % NCHUNK) * CHUNK + offs)
        s_n, m2_n = _ln_part(x_n, CHUNK)
        if n < TOTAL:
            tl.store(p_sum + n, s_n)
            tl.store(p_m2 + n, m2_n)
            _arrive(counters, n // NCHUNK)
        row = c // NCHUNK
        _wait_row(counters, row, NCHUNK, ERR, SPIN)
        ps = tl.load(p_sum + row * NCHUNK + parts, cache_modifier=".cg")
        pm2 = tl.load(p_m2 + row * NCHUNK + parts, cache_modifier=".cg")
        mean = tl.reduce(ps, 0, _sum2) / COLS
        d = ps / CHUNK - mean
        var = tl.reduce(pm2 + CHUNK * d * d, 0, _sum2) / COLS
        rstd = 1 / tl.sqrt_rn(var + eps)
        col = (c % NCHUNK) * CHUNK + offs
        w = tl.load(w_ptr + col)
        b = tl.load(b_ptr + col)
        tl.store(y_ptr + row * COLS + col, (x_c - mean) * rstd * w + b)
        c = n
        x_c = x_n
'''

#: the interpreter's exp (it runs no inline PTX)
INTERPRETED_EXP = """
@triton.jit
def _exp_f32(x):
    return tl.exp(x)
"""


def pipelined_module(interpret: bool) -> Any:
    """``PIPELINED`` imported (its ``_exp_f32`` fusejit's own helper on a GPU)."""
    from fusejit.codegen.lowering import EXP_F32_HELPER
    from fusejit.runtime.kernel_cache import import_source
    path = Path(tempfile.mkdtemp()) / f"exp_s20_pipelined_{int(interpret)}.py"
    path.write_text(PIPELINED.replace("{exp}", INTERPRETED_EXP if interpret else EXP_F32_HELPER))
    return import_source(path, interpret=interpret)


def run_pipelined(xp: Any, kind: str, x: Any, w: Any, b: Any, chunk: int, programs: int,
                  warps: int, spin: int = 1 << 20) -> tuple[Any, Any]:
    """One launch's closure and its output: softmax or layer norm of ``x`` (rows x cols) in
    chunks of ``chunk`` over ``programs`` persistent programs; counters zeroed before each
    launch (timed with it). ``xp`` is CuPy (torch views for Triton's launcher) or NumPy
    (interpreter)."""
    rows, cols = x.shape
    nchunk = cols // chunk
    total = rows * nchunk
    err = 1 + rows
    mod = pipelined_module(xp is np)
    y = xp.empty_like(x)
    p0 = xp.empty(total, xp.float32)
    p1 = xp.empty(total, xp.float32)
    counters = xp.zeros(2 + rows, xp.int32)
    if xp is np:
        from fusejit.runtime.interpret_backend import HostBuffer
        view: Any = HostBuffer
    else:
        import torch
        view = torch.from_dlpack
    args = [view(a) for a in ((x, y, p0, p1, counters) if kind == "softmax"
                             else (x, w, b, y, p0, p1, counters))]
    consts = {"TOTAL": total, "NCHUNK": nchunk, "COLS": cols, "CHUNK": chunk, "ERR": err,
              "SPIN": spin}
    fn = mod.pipelined_softmax if kind == "softmax" else mod.pipelined_layer_norm
    scalars: list[Any] = [] if kind == "softmax" else [EPS]
    options: dict[str, Any] = {"num_warps": warps}
    if xp is not np:
        options["enable_fp_fusion"] = False  # (as fusejit compiles)

    def launch() -> None:
        counters.fill(0)
        fn[(programs,)](*args, *scalars, **consts, **options)
    launch.counters = counters  # type: ignore[attr-defined]
    return launch, y


def reference(kind: str, x: Any, w: Any, b: Any, xp: Any = np) -> Any:
    """float64 softmax or layer norm over the last axis (``xp``: NumPy or CuPy)."""
    x = x.astype(xp.float64)
    if kind == "softmax":
        e = xp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    mu = x.mean(axis=1, keepdims=True)
    return (x - mu) / xp.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + EPS) * w + b


def interpret_check() -> int:
    """The pipelined kernels on the interpreter against float64 NumPy (2 chunks a row)."""
    failed = 0
    rng = np.random.default_rng(0)
    for kind in ("softmax", "layer_norm"):
        for rows, chunk, programs in ((3, 64, 2), (5, 128, 3), (1, 64, 4)):
            x = (rng.standard_normal((rows, 2 * chunk)) * 4 + 1).astype(np.float32)
            w = rng.standard_normal(2 * chunk).astype(np.float32)
            b = rng.standard_normal(2 * chunk).astype(np.float32)
            launch, y = run_pipelined(np, kind, x, w, b, chunk, programs, 4, spin=4)
            launch()
            err = int(launch.counters[1 + rows])
            got = np.abs(y - reference(kind, x, w, b)).max()
            ok = err == 0 and got < 1e-5
            failed += not ok
            print(f"{kind} {rows}x{2 * chunk} chunk {chunk}, {programs} programs: max abs "
                  f"error {got:.1e}, waits given up {err}: {'ok' if ok else 'FAILED'}")
    return 1 if failed else 0


def no_wait(source: str) -> str:
    """The emitted source with its wait removed: every program writes its chunk at once."""
    out, n = re.subn(r"while \(arrived < (\d+)\)", "while (arrived < 0)", source)
    out, m = re.subn(r"if arrived >= (\d+):", "if arrived >= 0:", out)
    if not (n and m):
        raise ValueError("the wait is not in the source")
    return out


def streaming(source: str) -> str:
    """The emitted source with the chunk's loads marked evict-first and its output stores
    streaming (``.cs``): each element is read once and written once, so neither needs to
    stay in L2 (the weight and bias of a layer norm, read by every row, keep the default)."""
    out, n = re.subn(r"tl\.load\((p_in0 \+ idx)\)", r'tl.load(\1, eviction_policy="evict_first")',
                     source)
    out, m = re.subn(r"tl\.store\((out\d+ \+ idx), (\w+)\)", r'tl.store(\1, \2, cache_modifier=".cs")',
                     out)
    if not (n and m):
        raise ValueError("the chunk's load or store is not in the source")
    return out


def report(ctx: dict[str, Any], name: str, run: Any, out: Any, checked: bool = True,
           counters: Any = None) -> None:
    """Time ``run``, check its output ``out`` against ``ctx["want"]`` (relative to the
    largest value) and print one line."""
    import cupy as cp
    from exp_reductions import event_time
    kind, rows, copy_us = ctx["kind"], ctx["rows"], ctx["copy_us"]
    try:
        us = event_time(run) * 1e6
        run()
        cp.cuda.get_current_stream().synchronize()
        err = float(cp.abs(out - ctx["want"]).max()) / ctx["scale"]
        note = ""
        if counters is not None:
            note = f"  waits given up {int(counters[1 + rows])}"
        verdict = ("ok" if err < 1e-5 else "WRONG") if checked else "(unchecked)"
        print(f"  {kind:10s} {name:44s} {us:8.1f} us {100 * copy_us / us:5.1f}% "
              f"rel err {err:.1e} {verdict}{note}", flush=True)
    except Exception as exc:  # noqa: BLE001  (report, go on)
        print(f"  {kind:10s} {name}: failed {type(exc).__name__}: {exc}"[:300], flush=True)


def emit_plan(kind: str, x: Any, w: Any, b: Any, pipeline: int = 0, chunk: int = 0) -> Any:
    """fusejit's cuda kernel of softmax or layer norm over ``x``'s shape: as the heuristics
    choose, or pipelined with ``pipeline`` programs an SM (``COOP_PIPELINE``) in chunks of at
    most ``chunk`` elements (0: the heuristic's)."""
    import fusejit as fj
    from fusejit.codegen import emit_kernel, heuristics
    from fusejit.runtime import forget_plans
    saved = (heuristics.COOP_PIPELINE, heuristics.COOP_PIPELINE_PROGRAMS_PER_SM,
             heuristics.COOP_CHUNK)
    try:
        heuristics.COOP_PIPELINE = pipeline > 0
        heuristics.COOP_PIPELINE_PROGRAMS_PER_SM = pipeline or saved[1]
        if chunk:
            heuristics.COOP_CHUNK = {**saved[2], "cuda": chunk}
        forget_plans()
        with fj.using_backend("interpret"):  # (planned only)
            zeros = [fj.asarray(np.zeros(a.shape, np.float32)) for a in (x, w, b)]
            t = (fj.softmax(zeros[0], axis=-1) if kind == "softmax"
                 else fj.layer_norm(zeros[0], zeros[1], zeros[2], eps=EPS))
            (kernel,) = fj.plan(t).program.kernels
        return emit_kernel(kernel, None, "cuda")
    finally:
        (heuristics.COOP_PIPELINE, heuristics.COOP_PIPELINE_PROGRAMS_PER_SM,
         heuristics.COOP_CHUNK) = saved
        forget_plans()


def time_emitted(ctx: dict[str, Any], name: str, xwb: tuple[Any, Any, Any], arrays: list[Any],
                 warps: int = 0, programs: bool = False, **plan: int) -> None:
    """Emit ``ctx["kind"]`` over ``xwb``'s shapes with ``emit_plan``'s ``plan`` settings, launch
    it on ``warps`` warps (0: the emitted count) and ``report`` it (``programs``: the grid's
    size in the label)."""
    from exp_wide_softmax import direct_launch
    try:
        variant = emit_plan(ctx["kind"], *xwb, **plan)
        if programs:
            name += f" ({variant.launches[0].grid[0]} programs)"
        run, (out,) = direct_launch(variant, arrays, zero_counters=True,
                                    num_warps=warps or None)
    except Exception as exc:  # noqa: BLE001  (report, go on)
        print(f"  {ctx['kind']} {name}: failed {type(exc).__name__}: {exc}"[:300])
        return
    report(ctx, name, run, out)


def gpu_main(only: str, shapes: tuple[tuple[int, int], ...] = SHAPES,
             quick: bool = False) -> int:
    import cupy as cp
    from exp_reductions import event_time
    from exp_wide_softmax import direct_launch

    sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    for rows, cols in shapes:
        rng = cp.random.default_rng(0)
        x = (rng.standard_normal((rows, cols), dtype=cp.float32) * 4 + 1)
        w = rng.standard_normal(cols, dtype=cp.float32)
        b = rng.standard_normal(cols, dtype=cp.float32)
        y = cp.empty_like(x)
        copy_us = event_time(lambda x=x, y=y: cp.copyto(y, x)) * 1e6
        print(f"{rows}x{cols} float32: copy {copy_us:.1f} us ({sms} SMs)", flush=True)
        for kind in ("softmax", "layer_norm"):
            want = reference(kind, x, w, b, cp)
            scale = float(cp.abs(want).max())

            ctx = {"kind": kind, "want": want, "scale": scale, "rows": rows,
                   "copy_us": copy_us}
            if re.search(only, f"{kind} emitted"):
                emitted = emit_plan(kind, x, w, b)
                arrays = [x] if kind == "softmax" else [x, EPS, w, b]  # (eps: a scalar param)
                waitless = dataclasses.replace(emitted, source=no_wait(emitted.source))
                streamed = dataclasses.replace(emitted, source=streaming(emitted.source))
                for name, variant, cap, checked in (
                        ("emitted", emitted, None, True),
                        ("emitted, streaming hints", streamed, None, True),
                        *([] if quick else [("emitted, maxnreg 96", emitted, 96, True)]),
                        ("emitted, no wait", waitless, None, False)):
                    try:
                        run, (out,) = direct_launch(variant, arrays, zero_counters=True,
                                                    maxnreg=cap)
                    except Exception as exc:  # noqa: BLE001
                        print(f"  {kind} {name}: failed {type(exc).__name__}: {exc}"[:300])
                        continue
                    report(ctx, name, run, out, checked)
                # the emitted form at other chunks and warps (more, smaller programs an SM
                # keep more loads in flight while some wait; fewer, larger ones wait less)
                for chunk, warps in ((4096, 0), (4096, 2), (8192, 8), (16384, 8)):
                    name = f"emitted, chunks {chunk}" + (f", {warps} warps" if warps else "")
                    time_emitted(ctx, name, (x, w, b), arrays, warps, programs=True,
                                 chunk=chunk)
                # fusejit's own pipelined form (heuristics.COOP_PIPELINE), by programs an SM,
                # chunk and warps
                for per_sm, chunk, warps in ((1, 0, 0), (2, 0, 0), (3, 0, 0), (2, 4096, 0),
                                             (2, 0, 8))[:3 if quick else 5]:
                    name = (f"emitted pipelined {per_sm}/SM" + (f", chunks {chunk}" if chunk
                                                                   else "")
                            + (f", {warps} warps" if warps else ""))
                    time_emitted(ctx, name, (x, w, b), arrays, warps, pipeline=per_sm,
                                 chunk=chunk)
            if re.search(only, f"{kind} pipelined"):
                for chunk, warps, per_sm in ((8192, 4, 2), (8192, 8, 2), (8192, 4, 1),
                                             (4096, 4, 3))[:2 if quick else 4]:
                    if cols % chunk or cols // chunk < 2:
                        continue
                    run, out = run_pipelined(cp, kind, x, w, b, chunk, per_sm * sms, warps)
                    report(ctx, f"pipelined {chunk} x {warps} warps, {per_sm}/SM", run, out,
                           counters=run.counters)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--interpret", action="store_true")
    parser.add_argument("--shapes", default="", help="comma-separated RxC (default: SHAPES)")
    parser.add_argument("--quick", action="store_true", help="fewer variants")
    args = parser.parse_args(argv)
    shapes = tuple(tuple(int(v) for v in sh.split("x")) for sh in args.shapes.split(",")
                   if sh) or SHAPES
    return interpret_check() if args.interpret else gpu_main(args.only, shapes, args.quick)


if __name__ == "__main__":
    sys.exit(main())
