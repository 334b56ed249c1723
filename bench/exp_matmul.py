"""GEMM experiments behind issue 11's misses (one process, fusejit and cuBLAS only).

Run on the GPU machine: ``python3 bench/exp_matmul.py OUT_DIR [--budget SECONDS]
[--skip-epilogue] [--no-small-m] [--mlp] [--persistent] [--tf32-plan]`` (``--mlp``: the MLP's
first layer alone, with and without the product relayed before its epilogue;
``--persistent``: GEMMs with ``programs=P`` against one program per tile; ``--tf32-plan``:
the default plan of a TF32 product of a row-major B, whole, where the fuser may transpose B
to K-major first, ``tf32_plan``).

Three questions, each timed with CUDA events on the plan's launches alone:

- **epilogue cost**: float16 8192^3 bare, ``+ bias``, ``relu``, ``relu(+ bias)`` at the default
  tiles and a few others (is the 20% in the epilogue's arithmetic, its registers, or the tile?);
- **TF32**: float32 4096^3 with B row-major (N contiguous) and with B a transposed view of a
  contiguous [N, K] array (K contiguous): Hopper's TF32 wgmma has no transpose, so only a
  K-major B can use it;
- **small M**: float16 128x4096x4096, a sweep of tiles and split-K.

Writes ``OUT_DIR/exp_matmul.json`` and prints one line per variant.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_matmul import _retile, _tiles_of, _time_events, gelu  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "exp-matmul-out")
    budget = float(sys.argv[sys.argv.index("--budget") + 1]) if "--budget" in sys.argv else 240.0
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.time() + budget
    import cupy as cp

    import fusejit as fj
    from fusejit.fuse import plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    rows: list[dict[str, Any]] = []

    def timed(label: str, y: Any, ref: Any, flops: float, tiles: tuple[int, ...] = (),
              tma: bool = False, extra: str = "") -> None:
        if time.time() > deadline:
            rows.append({"label": label, "skipped": "budget"})
            return
        try:
            text = fj.dump(y, fused=True)
            text = _retile(text, tiles, tma)
            if extra:  # more attributes on every gemm kernel (programs=P, relay=1)
                text = text.replace("kind=gemm", f"kind=gemm {extra}")
            prog = fj.parse(text)
            plan = plan_for(prog)
            # the recorded program's inputs in order: its leaves' arrays and scalar values
            buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
            assert len(buffers) == len(prog.inputs)

            def run() -> Any:
                return backend.execute(plan.program, buffers, plan)
            got = run()[0]
            err = float(cp.linalg.norm(got.astype(cp.float64) - ref) / cp.linalg.norm(ref))
            ms = _time_events(cp, run, 0.6)
            row = {"label": label, "ms": ms, "tflops": flops / ms / 1e9, "error": err,
                   "tiles": _tiles_of(plan.program.kernels), "kernels": len(plan.kernels),
                   "tma": tma, "extra": extra}
        except Exception as exc:  # noqa: BLE001
            row = {"label": label, "tiles": str(tiles), "failed": f"{type(exc).__name__}: {exc}"[:300]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    rng = cp.random.default_rng(1)

    # -- epilogue cost ------------------------------------------------------------------
    if "--skip-epilogue" not in sys.argv:
        epilogue_cost(timed, rng, cp, fj, rows)

    if "--persistent-tiles" in sys.argv:
        persistent_tiles(timed, rng, cp, fj, rows, backend)
        (out / "exp_matmul.json").write_text(json.dumps(rows, indent=1))
        return 0

    if "--persistent" in sys.argv:
        persistent(timed, rng, cp, fj, rows)
        (out / "exp_matmul.json").write_text(json.dumps(rows, indent=1))
        return 0

    if "--tf32-plan" in sys.argv:
        tf32_plan(timed, rng, cp, fj, rows)
        (out / "exp_matmul.json").write_text(json.dumps(rows, indent=1))
        return 0

    if "--mlp" in sys.argv:
        mlp_layer(timed, rng, cp, fj)
        (out / "exp_matmul.json").write_text(json.dumps(rows, indent=1))
        return 0

    # -- TF32 -----------------------------------------------------------------------------
    tf32(timed, rng, cp, fj, rows, backend)

    # -- small M ----------------------------------------------------------------------------
    if "--no-small-m" not in sys.argv:
        small_m(timed, rng, cp, fj, rows)
    (out / "exp_matmul.json").write_text(json.dumps(rows, indent=1))
    return 0


def _f16_operands(rng: Any, cp: Any, fj: Any, m: int, n: int, k: int) -> tuple[Any, ...]:
    """float16 A [m, k] (scaled: products of unit size), B [k, n] and a bias [n] on the
    device, the same as fusejit tensors, and their product in float64."""
    a = (rng.standard_normal((m, k), dtype=cp.float32) / k ** 0.5).astype(cp.float16)
    b = rng.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
    bias = rng.standard_normal(n, dtype=cp.float32).astype(cp.float16)
    fa, fb, fbias = fj.asarray(a, name="a"), fj.asarray(b, name="b"), fj.asarray(bias, name="bias")
    return a, b, bias, fa, fb, fbias, a.astype(cp.float64) @ b.astype(cp.float64)


def epilogue_cost(timed: Any, rng: Any, cp: Any, fj: Any,
                  rows: list[dict[str, Any]]) -> None:
    """float16 8192^3: bare against each epilogue, default tiles and 128x128x64."""
    m = n = k = 8192
    a, b, bias, fa, fb, fbias, prod = _f16_operands(rng, cp, fj, m, n, k)
    flops = 2.0 * m * n * k
    t0 = time.perf_counter()
    variants = {
        "bare": (fa @ fb, prod),
        "bias": (fa @ fb + fbias, prod + bias.astype(cp.float64)),
        "relu": (fj.maximum(fa @ fb, 0), cp.maximum(prod, 0)),
        "bias_relu": (fj.maximum(fa @ fb + fbias, 0), cp.maximum(prod + bias.astype(cp.float64), 0)),
        "bias_relu_f32": (fj.maximum((fa @ fb).astype(fj.float32) + fbias, 0),
                          cp.maximum(prod + bias.astype(cp.float64), 0)),
        "relu_where": (fj.where(fa @ fb > 0, fa @ fb, 0), cp.maximum(prod, 0)),
        "x2": ((fa @ fb) * 2, prod * 2),
        "abs": (fj.abs(fa @ fb), cp.abs(prod)),
    }
    for tiles in [(), (128, 128, 64, 8, 4, 1)]:
        for name, (y, ref) in variants.items():
            timed(f"f16 8192^3 {name} {tiles or 'default'}", y, ref, flops, tiles)
    for name in ("bare", "bias_relu"):
        y, ref = variants[name]
        timed(f"f16 8192^3 {name} default tma", y, ref, flops, (), tma=True)
    print(f"epilogue part: {time.perf_counter() - t0:.0f} s", flush=True)
    cp.matmul(a, b)  # warm-up
    cp.cuda.get_current_stream().synchronize()
    ms = _time_events(cp, lambda: cp.matmul(a, b), 0.6)
    rows.append({"label": "cuBLAS f16 8192^3", "ms": ms, "tflops": flops / ms / 1e9})
    print(json.dumps(rows[-1]), flush=True)


def mlp_layer(timed: Any, rng: Any, cp: Any, fj: Any) -> None:
    """The MLP's first layer (float16 8192x2048 @ 2048x8192, K short): bare, + bias, GELU's
    tanh form, and its pieces, at the default tiles, with the product relayed through its
    output when ptxas serializes the main loop's wgmma otherwise (C7514;
    ``heuristics.GEMM_RELAY_PRODUCT``: the default "serialized"), never and before every
    epilogue ("always")."""
    from fusejit.codegen import heuristics
    from fusejit.runtime import forget_plans
    m, n, k = 8192, 8192, 2048
    a, b, bias, fa, fb, fbias, prod = _f16_operands(rng, cp, fj, m, n, k)
    pre = prod + bias.astype(cp.float64)
    flops = 2.0 * m * n * k
    y = fa @ fb + fbias
    variants = {
        "bare": (fa @ fb, prod),
        "bias": (y, pre),
        "bias_relu": (fj.maximum(y, 0), cp.maximum(pre, 0)),
        "bias_tanh": (fj.tanh(y), cp.tanh(pre)),
        "bias_gelu": (gelu(fj, y), gelu(cp, pre)),
        "bias_gelu_f32": (gelu(fj, y.astype(fj.float32)), gelu(cp, pre)),
        "bias_exp_times": (y * fj.exp(fa @ fb), pre * cp.exp(prod)),
    }
    for mode in ("serialized", "never", "always"):
        heuristics.GEMM_RELAY_PRODUCT = mode
        forget_plans()
        for name, (v, ref) in variants.items():
            timed(f"mlp layer 1 {name} relay={mode}", v, ref, flops, ())
    heuristics.GEMM_RELAY_PRODUCT = "serialized"
    forget_plans()


def persistent(timed: Any, rng: Any, cp: Any, fj: Any, rows: list[dict[str, Any]]) -> None:
    """Persistent GEMMs (``programs=P``: P programs loop over the tiles, the next tile's
    loads overlapping this tile's epilogue) against one program per tile, on the shapes of
    issue 11's misses: 16384x1024x4096 (3.9 waves of 128x256 tiles), the MLP's two layers
    (K = 2048 with a relayed GELU; 8192x2048x8192), and 8192^3."""
    cases = [(16384, 1024, 4096), (8192, 8192, 2048), (8192, 2048, 8192), (8192, 8192, 8192)]
    for m, n, k in cases:
        a, b, bias, fa, fb, fbias, prod = _f16_operands(rng, cp, fj, m, n, k)
        pre = prod + bias.astype(cp.float64)
        flops = 2.0 * m * n * k
        shape = f"f16 {m}x{n}x{k}"
        variants = {"bare": (fa @ fb, prod), "relu_bias": (fj.maximum(fa @ fb + fbias, 0),
                                                           cp.maximum(pre, 0))}
        if (m, n, k) == (8192, 8192, 2048):
            variants["bias_gelu"] = (gelu(fj, fa @ fb + fbias), gelu(cp, pre))
        for name, (y, ref) in variants.items():
            for tiles, extra in (((), ""), ((), "programs=132"), ((), "programs=132 tma=1"),
                                 ((), "tma=1"), ((128, 128, 64, 8, 3, 1), ""),
                                 ((128, 128, 64, 8, 3, 1), "programs=264")):
                if name == "bias_gelu" and "tma" in extra:
                    continue
                timed(f"{shape} {name} {tiles or 'default'} {extra or 'one program per tile'}",
                      y, ref, flops, tiles, extra=extra)
        cp.matmul(a, b)
        cp.cuda.get_current_stream().synchronize()
        ms = _time_events(cp, lambda a=a, b=b: cp.matmul(a, b), 0.6)
        rows.append({"label": f"cuBLAS {shape}", "ms": ms, "tflops": flops / ms / 1e9})
        print(json.dumps(rows[-1]), flush=True)
        del a, b, bias, fa, fb, fbias, prod, pre, variants
        cp.get_default_memory_pool().free_all_blocks()


def persistent_tiles(timed: Any, rng: Any, cp: Any, fj: Any, rows: list[dict[str, Any]],
                     backend: Any) -> None:
    """Tiles of the default persistent GEMM (float16: TMA loads, one program per SM) on the
    misses left: 16384x1024x4096 with ``relu(+ bias)`` and the MLP's first layer with GELU;
    then TF32 4096^3 with a K-major B, persistent with TMA (is a transposing pass plus that
    faster than the row-major product?)."""
    sweep = [(), (128, 256, 64, 8, 4, 1), (256, 128, 64, 8, 3, 1), (256, 128, 64, 8, 4, 1),
             (128, 128, 64, 4, 4, 1), (128, 128, 64, 8, 4, 1), (128, 256, 32, 8, 6, 1)]
    for (m, n, k), name in (((16384, 1024, 4096), "relu_bias"), ((8192, 8192, 2048), "bias_gelu")):
        a, b, bias, fa, fb, fbias, prod = _f16_operands(rng, cp, fj, m, n, k)
        pre = prod + bias.astype(cp.float64)
        if name == "relu_bias":
            y, ref = fj.maximum(fa @ fb + fbias, 0), cp.maximum(pre, 0)
        else:
            y, ref = gelu(fj, fa @ fb + fbias), gelu(cp, pre)
        flops = 2.0 * m * n * k
        for tiles in sweep:
            timed(f"f16 {m}x{n}x{k} {name} {tiles or 'default'}", y, ref, flops, tiles)
        timed(f"f16 {m}x{n}x{k} {name} (128, 128, 64, 8, 3, 1) programs=264 tma=1", y, ref,
              flops, (128, 128, 64, 8, 3, 1), extra="programs=264 tma=1")
        timed(f"f16 {m}x{n}x{k} {name} default, one program per tile", y, ref, flops, (),
              extra="programs=0 tma=0")
        del a, b, bias, fa, fb, fbias, prod, pre, y, ref
        cp.get_default_memory_pool().free_all_blocks()
    m = n = k = 4096
    a = rng.standard_normal((m, k), dtype=cp.float32)
    b = rng.standard_normal((k, n), dtype=cp.float32)
    bt = cp.ascontiguousarray(b.T)
    prod = a.astype(cp.float64) @ b.astype(cp.float64)
    flops = 2.0 * m * n * k
    fa, fbt = fj.asarray(a, name="a"), fj.asarray(bt, name="bt")
    y = fj.matmul(fa, fbt.T, precision="tf32")
    for tiles in [(), (128, 256, 32, 8, 3, 1), (128, 256, 32, 8, 4, 1), (256, 128, 32, 8, 3, 1),
                  (128, 128, 32, 8, 4, 1), (128, 128, 64, 8, 3, 1), (128, 256, 16, 8, 6, 1)]:
        timed(f"tf32 4096^3 B K-major programs=132 tma=1 {tiles or 'default'}", y, prod, flops,
              tiles, extra="programs=132 tma=1")
    timed("tf32 4096^3 B K-major tma=1 (one program per tile)", y, prod, flops, (),
          extra="tma=1")
    fb = fj.asarray(b, name="b")
    tplan = fj.plan(fj.transpose(fb) * 1.0)
    tbuf = [1.0 if p.scalar else b for p in tplan.program.inputs]
    ms = _time_events(cp, lambda: backend.execute(tplan.program, tbuf, tplan), 0.6)
    rows.append({"label": "transpose copy of B (4096^2 f32, x*1.0)", "ms": ms})
    print(json.dumps(rows[-1]), flush=True)


def tf32(timed: Any, rng: Any, cp: Any, fj: Any,
         rows: list[dict[str, Any]], backend: Any) -> None:
    """float32 4096^3 in TF32: B row-major (the swapped product) and K-major, a few tiles."""
    m = n = k = 4096
    a = rng.standard_normal((m, k), dtype=cp.float32)
    b = rng.standard_normal((k, n), dtype=cp.float32)
    bt = cp.ascontiguousarray(b.T)  # [N, K], K contiguous
    prod = a.astype(cp.float64) @ b.astype(cp.float64)
    flops = 2.0 * m * n * k
    fa, fb, fbt = fj.asarray(a, name="a"), fj.asarray(b, name="b"), fj.asarray(bt, name="bt")
    for tiles in [(), (128, 256, 32, 8, 3, 1), (256, 128, 32, 8, 3, 1), (128, 128, 32, 4, 4, 1),
                  (128, 128, 64, 8, 3, 1), (64, 256, 32, 4, 4, 1)]:
        timed(f"tf32 4096^3 B row-major {tiles or 'default'}", fj.matmul(fa, fb, precision="tf32"),
              prod, flops, tiles)
    for tiles in [(), (128, 256, 32, 8, 3, 1), (128, 256, 32, 8, 4, 1), (256, 128, 32, 8, 4, 1),
                  (128, 256, 16, 8, 6, 1)]:
        timed(f"tf32 4096^3 B K-major (bt.T) {tiles or 'default'}",
              fj.matmul(fa, fbt.T, precision="tf32"), prod, flops, tiles)
        timed(f"tf32 4096^3 B K-major tma {tiles or 'default'}",
              fj.matmul(fa, fbt.T, precision="tf32"), prod, flops, tiles, tma=True)
    tcopy = fj.asarray(b, name="b")
    tplan = fj.plan(fj.transpose(tcopy) * 1.0)
    tbuf = [1.0 if p.scalar else b for p in tplan.program.inputs]

    def transpose_copy() -> Any:
        return backend.execute(tplan.program, tbuf, tplan)
    ms = _time_events(cp, transpose_copy, 0.6)
    rows.append({"label": "transpose copy of B (4096^2 f32, x*1.0)", "ms": ms})
    print(json.dumps(rows[-1]), flush=True)
    timed("ieee 4096^3 B K-major", fj.matmul(fa, fbt.T), prod, flops)
    import os
    os.environ["CUPY_TF32"] = "1"
    ms = _time_events(cp, lambda: cp.matmul(a, b), 0.6)
    rows.append({"label": "cuBLAS f32 4096^3 (CUPY_TF32=1 set late: may be ieee)", "ms": ms,
                 "tflops": flops / ms / 1e9})
    print(json.dumps(rows[-1]), flush=True)


def tf32_plan(timed: Any, rng: Any, cp: Any, fj: Any, rows: list[dict[str, Any]],
              shapes: list[tuple[int, int, int]] | None = None) -> None:
    """The default plan of ``fj.matmul(a, b, precision="tf32")`` with B row-major, timed whole
    (every launch: B's transposing pass, when the fuser's ``tf32_k_major_b`` rule adds one, and
    the GEMM), at MxNxK 4096^3, 8192x4096x4096, 2048x4096x4096 and 1024x4096x4096 (the rule's
    threshold is M of about 1650 at N = K = 4096: the last one keeps B N-major, as
    (B^T A^T)^T); each row gives its kernels, TFLOP/s and relative error against the float64
    product. Then the same product with B K-major (``a @ bt.T``: the GEMM alone, as the plan
    runs it after the pass), and cuBLAS (CUPY_TF32 set late, as in ``tf32``)."""
    import os
    shapes = shapes or [(4096, 4096, 4096), (8192, 4096, 4096), (2048, 4096, 4096),
                        (1024, 4096, 4096)]
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=cp.float32)
        b = rng.standard_normal((k, n), dtype=cp.float32)
        prod = a.astype(cp.float64) @ b.astype(cp.float64)
        flops = 2.0 * m * n * k
        fa, fb = fj.asarray(a, name="a"), fj.asarray(b, name="b")
        y = fj.matmul(fa, fb, precision="tf32")
        layout = [line.strip() for line in fj.plan(y).explain().splitlines()
                  if "tf32_k_major_b" in line and line.strip().startswith("@")]
        print(f"tf32 {m}x{n}x{k}: {layout[0] if layout else 'no layout decision'}", flush=True)
        timed(f"tf32 plan {m}x{n}x{k} B row-major default plan", y, prod, flops)
        fbt = fj.asarray(cp.ascontiguousarray(b.T), name="bt")
        timed(f"tf32 plan {m}x{n}x{k} B K-major (bt.T) default plan",
              fj.matmul(fa, fbt.T, precision="tf32"), prod, flops)
        del a, b, prod, fa, fb, fbt, y
        cp.get_default_memory_pool().free_all_blocks()
    os.environ["CUPY_TF32"] = "1"
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=cp.float32)
        b = rng.standard_normal((k, n), dtype=cp.float32)
        prod = a.astype(cp.float64) @ b.astype(cp.float64)
        got = cp.matmul(a, b)
        err = float(cp.linalg.norm(got.astype(cp.float64) - prod) / cp.linalg.norm(prod))
        ms = _time_events(cp, lambda a=a, b=b: cp.matmul(a, b), 0.6)
        rows.append({"label": f"cuBLAS f32 {m}x{n}x{k} (CUPY_TF32=1 set late: may be ieee)",
                     "ms": ms, "tflops": 2.0 * m * n * k / ms / 1e9, "error": err})
        print(json.dumps(rows[-1]), flush=True)
        del a, b, prod, got
        cp.get_default_memory_pool().free_all_blocks()


def small_m(timed: Any, rng: Any, cp: Any, fj: Any,
            rows: list[dict[str, Any]]) -> None:
    """float16 128x4096x4096: a sweep of tiles and split-K."""
    m, n, k = 128, 4096, 4096
    a = (rng.standard_normal((m, k), dtype=cp.float32) / k ** 0.5).astype(cp.float16)
    b = rng.standard_normal((k, n), dtype=cp.float32).astype(cp.float16)
    prod = a.astype(cp.float64) @ b.astype(cp.float64)
    flops = 2.0 * m * n * k
    fa, fb = fj.asarray(a, name="a"), fj.asarray(b, name="b")
    for tiles in [(), (64, 64, 64, 4, 6, 1), (64, 64, 128, 4, 3, 1), (64, 32, 64, 4, 6, 1),
                  (128, 32, 64, 4, 6, 1), (64, 64, 64, 4, 4, 1)]:
        timed(f"f16 128x4096x4096 {tiles or 'default'}", fa @ fb, prod, flops, tiles)
    ms = _time_events(cp, lambda: cp.matmul(a, b), 0.6)
    rows.append({"label": "cuBLAS f16 128x4096x4096", "ms": ms, "tflops": flops / ms / 1e9})
    print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
