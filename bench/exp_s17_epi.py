"""Experiment (seventeenth session): what does a float16 GEMM's bias + ReLU epilogue cost?

The GEMM issue's anchors on an H100 (sixteenth session, ``h100-s16-call1/anchors``): the
persistent float16 GEMM alone at 16384x1024x4096 ran 653 TFLOP/s and with ``relu(a @ b +
bias)`` 603 (0.91x of jax.jit's 664, the target is 0.95x; the issue also asks for an epilogue
under 5% of the bare GEMM); at 8192^3 689 against 651. The persistent kernel runs each tile's
epilogue between two main loops, so whatever the epilogue waits on is not hidden. This
launches the emitted kernel and edits of its source, one difference at a time:

* ``emitted``: as fusejit emits it (the bias loaded after the K loop; ``maximum`` written
  ``where(v != v, v, where(v >= s, v, s))``, NumPy's NaN-propagating maximum);
* ``hoist``: the bias tile loaded before the K loop (its latency overlaps the loop);
* ``nanmax``: ``tl.maximum(v, s, propagate_nan=tl.PropagateNan.ALL)`` (one ``max.NaN``
  instruction; the same values, NaN included);
* ``maxfix``: ``where(v == s, v, tl.maximum(v, s, propagate_nan=ALL))``: NumPy's float16
  choice on equal operands (the first: a signed zero's sign) kept, still one select fewer;
* ``ws``: the persistent loop warp-specialized (``tl.range(..., warp_specialize=True)``);
* ``tma_store``: the output tile written by a TMA descriptor store (asynchronous, from shared
  memory) in place of ``tl.store`` of the pointer tile; ``tma_store_sub``: the same in two
  halves of 128 x 128 (less shared memory, as Triton's persistent tutorial's
  ``EPILOGUE_SUBTILE``);
* combinations of those, and ``bare`` (the plan of ``a @ b`` alone, as emitted) with and
  without ``tma_store``.

Every variant's output is compared with the emitted kernel's: the edits do not change any
value, so equality is exact (``same_signs``: the signs of zeros too). Each variant is timed
in 3 passes over all of them (CUDA events, median of rounds; the median pass reported): the
card's clock drifts over a run of GEMMs at full power. Each line gives microseconds, TFLOP/s
and the share of the bare emitted kernel's time.

First, a probe of what the hardware's ``max.NaN`` gives on zeros of both signs: fusejit's
pointwise ``maximum(a, b)`` kernel with ``nanmax`` applied, on a = [-0, +0, nan, 1],
b = [+0, -0, 1, nan], float16 and float32 (NumPy keeps the first of equal float16 operands
and the second of equal float32 ones).

Run on the GPU machine: ``python3 bench/exp_s17_epi.py [--json FILE] [--only REGEX]``;
``--dry`` emits every variant for small sides and compiles it for sm_90 on the CPU
(``tests/test_bench_experiments.py`` runs it).
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

#: name -> (M, N, K)
SHAPES = {"w16k": (16384, 1024, 4096), "sq8k": (8192, 8192, 8192), "m4k": (8192, 4096, 4096)}
DRY_SHAPES = {"dry": (4096, 2048, 256)}  # persistent with TMA loads, as the GPU shapes

VARIANTS = ("emitted", "hoist", "nanmax", "maxfix", "tma_store_sub", "nanmax+tma_store_sub",
            "maxfix+tma_store_sub", "ws", "maxfix+ws")
#: each variant timed in this many passes over all of them (the median reported)
PASSES = 3


def _plan(m: int, n: int, k: int, epilogue: bool) -> Any:
    import fusejit as fj
    a = fj.asarray(np.zeros((m, k), np.float16))
    b = fj.asarray(np.zeros((k, n), np.float16))
    c = fj.asarray(np.zeros(n, np.float16))
    out = fj.maximum(a @ b + c, 0) if epilogue else a @ b
    (kernel,) = [kk for kk in fj.plan(out).program.kernels if kk.kind == "gemm"]
    return kernel


def hoist(src: str) -> str:
    """Move the epilogue's loads of 1-D operands along N (``tl.load(p + cols)``) to the top of
    the tile, before the K loop, indexed by ``cols_n``."""
    loads = re.findall(r"\n( +)(v_in\d+ = tl\.load\(p_in\d+ \+ cols\))(  # [^\n]*)?", src)
    assert loads, "no epilogue load along N"
    for _, stmt, _ in loads:
        src = re.sub(r"\n +" + re.escape(stmt) + r"[^\n]*", "", src, count=1)
    indent_cols = re.search(r"\n( +)cols_n = [^\n]*", src)
    if indent_cols is None:  # (unread, so pruned since the twentieth session: put it back)
        cols = re.search(r"\n +cols = (pid_n \* \d+ \+ tl\.arange\(0, \d+\)\[None, :\])", src)
        rows = re.search(r"\n( +)rows_m = [^\n]*", src)
        assert cols and rows
        src = src[:rows.end()] + f"\n{rows.group(1)}cols_n = {cols.group(1)}" + src[rows.end():]
        indent_cols = re.search(r"\n( +)cols_n = [^\n]*", src)
    assert indent_cols
    moved = "".join(f"\n{indent_cols.group(1)}{stmt.replace('+ cols)', '+ cols_n)')}  # hoisted"
                    for _, stmt, _ in loads)
    return src[:indent_cols.end()] + moved + src[indent_cols.end():]


def nanmax(src: str) -> str:
    """NumPy's maximum as one NaN-propagating ``tl.maximum``."""
    out, n = re.subn(r"tl\.where\((\w+) != \1, \1, tl\.where\(\1 >=? (\w+), \1, \2\)\)",
                     r"tl.maximum(\1, \2, propagate_nan=tl.PropagateNan.ALL)", src)
    assert n, "no maximum"
    return out


def maxfix(src: str) -> str:
    """NumPy's maximum as one NaN-propagating ``tl.maximum`` with NumPy's choice on equal
    operands kept (float16 keeps the first: the sign of a zero): ``where(a == b, a, max)``."""
    out, n = re.subn(r"tl\.where\((\w+) != \1, \1, tl\.where\(\1 >= (\w+), \1, \2\)\)",
                     r"tl.where(\1 == \2, \1, tl.maximum(\1, \2, propagate_nan=tl.PropagateNan.ALL))",
                     src)
    assert n, "no maximum"
    return out


def tma_store(src: str, m: int, n: int, halves: bool) -> str:
    """The output tile stored through a TMA descriptor (``out0``)."""
    bm = int(re.search(r"rows_m = pid_m \* (\d+)", src).group(1))
    bn = int(re.search(r"cols(?:_n)? = pid_n \* (\d+)", src).group(1))  # (cols_n: pruned if unread)
    store = re.search(r"\n( +)flat = rows_m \* \d+ \+ cols\n +tl\.store\(out0 \+ flat, (\w+)\)[^\n]*",
                      src)
    assert store, "no plain output store"
    ind, value = store.group(1), store.group(2)
    box = [bm, bn // 2] if halves else [bm, bn]
    desc = (f"    desc_out0 = tl.make_tensor_descriptor(out0, shape=[{m}, {n}], strides=[{n}, 1], "
            f"block_shape={box})  # output in TMA boxes\n")
    if halves:
        body = (f"\n{ind}halves = tl.permute(tl.reshape({value}, ({bm}, 2, {bn // 2})), (0, 2, 1))"
                f"\n{ind}left, right = tl.split(halves)"
                f"\n{ind}desc_out0.store([pid_m * {bm}, pid_n * {bn}], left)"
                f"\n{ind}desc_out0.store([pid_m * {bm}, pid_n * {bn} + {bn // 2}], right)")
    else:
        body = f"\n{ind}desc_out0.store([pid_m * {bm}, pid_n * {bn}], {value})"
    src = src[:store.start()] + body + src[store.end():]
    body_start = src.index("\n", src.index("\ndef ") + 1) + 1
    return src[:body_start] + desc + src[body_start:]


def warp_specialized(src: str) -> str:
    out, n = re.subn(r"flatten=True\)", "flatten=True, warp_specialize=True)", src)
    assert n
    return out


def variant_source(src: str, name: str, m: int, n: int) -> str:
    for part in name.split("+"):
        if part == "hoist":
            src = hoist(src)
        elif part == "nanmax":
            src = nanmax(src)
        elif part == "maxfix":
            src = maxfix(src)
        elif part in ("tma_store", "tma_store_sub"):
            src = tma_store(src, m, n, part.endswith("_sub"))
        elif part == "ws":
            src = warp_specialized(src)
    return src


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--only", help="regex over 'shape variant'")
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    import dataclasses

    from fusejit.codegen import emit_kernel
    shapes = DRY_SHAPES if args.dry else SHAPES
    results: list[dict[str, Any]] = []
    if args.dry:
        from fusejit.runtime.compile import compile_all
        for name, (m, n, k) in shapes.items():
            for epi, names in ((True, VARIANTS), (False, ("emitted", "tma_store"))):
                kernel = _plan(m, n, k, epi)
                emitted = emit_kernel(kernel, None, "cuda")
                for v in names:
                    src = variant_source(emitted.source, v, m, n)
                    e = dataclasses.replace(emitted, source=src)
                    for c in compile_all(e, 90, True):
                        assert c.cubin[:4] == b"\x7fELF"
                    print(f"{name} {'bias_relu' if epi else 'bare'} {v}: compiled")
        return 0

    import cupy as cp
    from exp_reductions import event_time

    import fusejit as fj
    from fusejit.runtime import current
    from fusejit.runtime.cuda_backend import array_spec, scalar_arg
    fj.set_backend("cuda")
    backend = current()
    dev = backend.device()
    for dt in (np.float16, np.float32):  # the probe
        x = cp.asarray(np.array([-0.0, 0.0, np.nan, 1.0], dt))
        y = cp.asarray(np.array([0.0, -0.0, 1.0, np.nan], dt))
        (kernel,) = fj.plan(fj.maximum(fj.asarray(x), fj.asarray(y))).program.kernels
        e = emit_kernel(kernel, None, "cuda")
        e = dataclasses.replace(e, source=nanmax(e.source))
        info = backend.kernel_info(kernel, e, (array_spec(x), array_spec(y)), dev)
        outs, launch = backend.bind_launches(info, [x, y])
        launch()
        got = cp.asnumpy(outs[0])
        want = np.maximum(cp.asnumpy(x), cp.asnumpy(y))
        print(f"probe {np.dtype(dt).name}: max.NaN gives {got.tolist()} signbit "
              f"{np.signbit(got).tolist()}, NumPy {want.tolist()} signbit "
              f"{np.signbit(want).tolist()}", flush=True)
        results.append({"probe": np.dtype(dt).name, "got": [str(v) for v in got.tolist()],
                        "signbit": np.signbit(got).tolist(), "numpy_signbit": np.signbit(want).tolist()})
    rng = np.random.default_rng(0)
    for name, (m, n, k) in shapes.items():
        a = cp.asarray(rng.standard_normal((m, k), np.float32) / 8, dtype=cp.float16)
        b = cp.asarray(rng.standard_normal((k, n), np.float32) / 8, dtype=cp.float16)
        c = cp.asarray(rng.standard_normal(n, np.float32), dtype=cp.float16)
        flops = 2.0 * m * n * k
        reference = None
        mine: list[tuple[dict[str, Any], Any]] = []
        for epi, names in ((False, ("emitted", "tma_store")), (True, VARIANTS)):
            kernel = _plan(m, n, k, epi)
            emitted = emit_kernel(kernel, None, "cuda")
            inputs = [a, b, c, np.float16(0)] if epi else [a, b]
            for v in names:
                label = f"{name} {'bias_relu' if epi else 'bare'} {v}"
                if args.only and not re.search(args.only, label):
                    continue
                row: dict[str, Any] = {"shape": name, "mnk": [m, n, k], "epilogue": epi,
                                       "variant": v, "label": label, "times": []}
                try:
                    src = variant_source(emitted.source, v, m, n)
                    e = dataclasses.replace(emitted, source=src)
                    spec = tuple(None if p.scalar else array_spec(x)
                                 for p, x in zip(kernel.params, inputs))
                    bound = [scalar_arg(x, p.type.dtype) if p.scalar else x
                             for p, x in zip(kernel.params, inputs)]
                    info = backend.kernel_info(kernel, e, spec, dev)
                    outs, launch = backend.bind_launches(info, bound)
                    launch()
                    cp.cuda.get_current_stream().synchronize()
                    if epi and v == "emitted":
                        reference = cp.asnumpy(outs[0])
                        want = np.maximum(cp.asnumpy(a @ b).astype(np.float32)
                                          + cp.asnumpy(c).astype(np.float32), 0)
                        row["max_abs_vs_cupy"] = float(np.abs(reference.astype(np.float32)
                                                              - want).max())
                    elif epi and reference is not None:
                        got = cp.asnumpy(outs[0])
                        row["equal"] = bool(np.array_equal(got, reference, equal_nan=True))
                        row["same_signs"] = bool(np.array_equal(np.signbit(got),
                                                                np.signbit(reference)))
                except Exception as exc:  # noqa: BLE001  (reported per variant)
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                    print(f"{label:40s} error {row['error']}", flush=True)
                    results.append(row)
                    continue
                mine.append((row, launch))
        for _ in range(PASSES):  # interleaved: the card's clock drift is shared by every variant
            for row, launch in mine:
                row["times"].append(event_time(launch, rounds=5, reps=10) * 1e6)
        base_us = float(np.median(mine[0][0]["times"])) if mine else 0.0
        for row, _ in mine:
            us = float(np.median(row["times"]))
            row.update(us=us, tflops=flops / us / 1e6, of_bare=base_us / us)
            extra = "".join(f" {key}={row[key]}" for key in ("equal", "same_signs", "max_abs_vs_cupy")
                            if key in row)
            print(f"{row['label']:40s} {us:9.1f} us {row['tflops']:6.1f} TFLOP/s "
                  f"{row['of_bare']:6.3f} of bare{extra}", flush=True)
            results.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
