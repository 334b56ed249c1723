"""GEMM benchmark (issue 11): fusejit's gemm kernels beside cuBLAS, torch and jax, on one GPU.

Usage (on the GPU machine, from the repository root)::

    python3 bench/bench_matmul.py --out DIR [--quick] [--only REGEX] [--impls LIST]
                                  [--budget SECONDS] [--torch-max-autotune]

Cases (M x N x K): float16 8192^3, 16384x1024x4096 and 128x4096x4096, each as a plain
product and as ``relu(a @ b + bias)`` (the epilogue fused by fusejit, torch.compile and XLA);
float32 4096^3 in full precision (``ieee``: FMA units, as cuBLAS SGEMM) and TF32 (and
fusejit's ``tf32x3``, alone); and a two-layer MLP, ``gelu(x @ w1 + b1) @ w2 + b2`` with x
8192x2048, a hidden width of 8192 and GELU's tanh form (2 kernels in fusejit: each GEMM with
its epilogue). TFLOP/s count 2*M*N*K per call (twice that for the MLP's two products).

Every implementation runs in its own process, fusejit first (this process imports none of
CuPy, torch or jax): ``fusejit`` times the default tiles (the heuristics' choice, as a user
gets them) and a small sweep of candidate tiles per case (the fused IR text edited, as a user
would edit a .fir file), each as the plan's launches alone, plus the whole ``realize`` path of
the default; ``fusejit-tma`` the same with ``tma=1`` (operand tiles through TMA descriptors,
an opt-in experiment, in its own process); ``cupy`` is cuBLAS (``cupy.matmul``; TF32 in a
second process started with ``CUPY_TF32=1``); ``torch`` is eager (cuBLAS) and
``torch.compile`` (default mode; with ``--torch-max-autotune`` also
``max-autotune-no-cudagraphs``, whose autotuning takes minutes); ``jax`` is ``jax.jit``
(``Precision.HIGHEST`` for ieee, ``DEFAULT`` for TF32).
Inputs are drawn with CuPy from fixed seeds in every process (torch and jax take them through
DLPack) and every result is checked against a float64 CuPy product of the same inputs
(``||out - ref|| / ||ref||``). Timing: CUDA events around rounds of back-to-back calls (jax:
wall clock until ``block_until_ready``), the median round's time per call.

Writes ``DIR/results.json`` (per case and implementation: ms, TFLOP/s, the tiles, the error)
and ``DIR/results.md`` (a table with the ratios the issue's targets name). ``--budget``
(default 420 s) bounds the whole run: the sweep stops early when its share is spent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: name -> (M, N, K, dtype, precision, epilogue)
CASES: dict[str, tuple[int, int, int, str, str, str]] = {
    "f16 8192^3": (8192, 8192, 8192, "float16", "ieee", "none"),
    "f16 8192^3 relu(ab+bias)": (8192, 8192, 8192, "float16", "ieee", "bias_relu"),
    "f16 16384x1024x4096": (16384, 1024, 4096, "float16", "ieee", "none"),
    "f16 16384x1024x4096 relu(ab+bias)": (16384, 1024, 4096, "float16", "ieee", "bias_relu"),
    "f16 128x4096x4096": (128, 4096, 4096, "float16", "ieee", "none"),
    "f16 128x4096x4096 relu(ab+bias)": (128, 4096, 4096, "float16", "ieee", "bias_relu"),
    "f16 mlp 8192x2048 h8192": (8192, 8192, 2048, "float16", "ieee", "mlp"),
    "f32 4096^3 ieee": (4096, 4096, 4096, "float32", "ieee", "none"),
    "f32 4096^3 tf32": (4096, 4096, 4096, "float32", "tf32", "none"),
    "f32 4096^3 tf32x3": (4096, 4096, 4096, "float32", "tf32x3", "none"),
}

#: per case beyond ``CASES``' tuple (drawn cases): ``batch`` (a leading batch dimension of
#: both operands), ``b_t`` (B stored [N, K] and passed as the view ``bt.T``, as ``x @ w.T``)
#: and ``b_shared`` (B without the batch dimension: one weight broadcast over the batch)
EXTRA: dict[str, dict[str, Any]] = {}

#: epilogues a drawn case may have: on the product ``y`` of [batch, M, N]
UNSEEN_EPILOGUES = (("none", 3), ("bias_relu", 2), ("bias_gelu", 2), ("residual", 2))
#: (dtype, precision) of drawn cases, with weights
UNSEEN_DTYPES = ((("float16", "ieee"), 6), (("float32", "ieee"), 1), (("float32", "tf32"), 1))
#: extents that tile heuristics written for powers of two get wrong if they can
UNSEEN_ODD = (1, 7, 100, 127, 257, 384, 769, 1000, 1023, 3001, 5000)


def draw_unseen(seed: int, count: int) -> dict[str, tuple[int, int, int, str, str, str]]:
    """``count`` GEMM cases drawn from ``seed`` (also filling ``EXTRA``): shapes nobody tuned
    for, from decode-like M of 1-64 to 16384, odd and prime extents, batched products,
    transposed weights, four epilogues; float16 mostly, float32 in full precision and TF32.
    Each case's work is 2e8 to 1e12 flops (float32 in full precision: at most 1e11)."""
    import math
    import random
    rng = random.Random(seed)

    def extent(low: int, high: int) -> int:
        if rng.random() < 1 / 5:
            fits = [e for e in UNSEEN_ODD if low <= e <= high]
            if fits:
                return rng.choice(fits)
        e = int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
        return max(low, min(high, e | 1 if rng.random() < 1 / 3 else e))

    def pick(weighted: tuple) -> Any:
        return rng.choices([v for v, _ in weighted], [w for _, w in weighted])[0]

    cases: dict[str, tuple[int, int, int, str, str, str]] = {}
    while len(cases) < count:
        dtype, precision = pick(UNSEEN_DTYPES)
        batch = 1 if rng.random() < 0.75 else rng.choice((2, 3, 4, 8, 12, 16, 32, 64))
        m = extent(1, 64) if rng.random() < 0.2 else extent(64, 16384)
        n, k = extent(64, 16384), extent(32, 16384)
        flops = 2.0 * batch * m * n * k
        if not 2e8 <= flops <= (1e11 if (dtype, precision) == ("float32", "ieee") else 1e12):
            continue
        epilogue = pick(UNSEEN_EPILOGUES)
        b_t = rng.random() < 0.3
        name = (f"u{len(cases)} {'f16' if dtype == 'float16' else precision} "
                f"{batch}x{m}x{n}x{k}{' b.T' if b_t else ''} {epilogue}")
        cases[name] = (m, n, k, dtype, precision, epilogue)
        EXTRA[name] = {"batch": batch, "b_t": b_t}
    return cases


#: tiles tried beside the default: (block_m, block_n, block_k, num_warps, num_stages, split_k)
SWEEP: dict[str, list[tuple[int, int, int, int, int, int]]] = {
    "f16_large": [(128, 256, 64, 8, 3, 1), (128, 256, 64, 8, 4, 1), (256, 128, 64, 8, 3, 1),
                  (128, 128, 64, 8, 4, 1), (128, 128, 64, 4, 4, 1), (128, 128, 128, 8, 3, 1)],
    "f16_small_m": [(128, 32, 64, 4, 4, 1), (64, 64, 64, 4, 4, 1), (128, 64, 128, 4, 3, 1),
                    (64, 128, 64, 4, 4, 2), (128, 128, 64, 8, 4, 4), (64, 64, 128, 4, 3, 2)],
    "f32_ieee": [(128, 128, 32, 4, 3, 1), (128, 128, 16, 4, 4, 1), (128, 256, 16, 8, 2, 1),
                 (256, 128, 16, 8, 2, 1), (128, 64, 32, 2, 3, 1), (128, 128, 32, 8, 3, 1)],
    "f32_tf32": [(128, 128, 32, 8, 3, 1), (128, 256, 32, 8, 3, 1), (128, 128, 64, 8, 3, 1),
                 (64, 128, 32, 4, 4, 1), (256, 128, 32, 8, 3, 1)],
}


def sweep_for(case: str) -> list[tuple[int, int, int, int, int, int]]:
    """The candidate tiles of a case."""
    m, n, k, dtype, precision, _ = CASES[case]
    if dtype == "float32":
        return SWEEP["f32_ieee" if precision == "ieee" else "f32_tf32"]
    return SWEEP["f16_small_m" if m <= 256 else "f16_large"]


# -- shared by the worker processes ---------------------------------------------------------

def _inputs(cp: Any, case: str) -> dict[str, Any]:
    """The case's inputs on the device, from fixed seeds (the same in every process)."""
    m, n, k, dtype, _, epilogue = CASES[case]
    extra = EXTRA.get(case, {})
    lead = (extra["batch"],) if extra.get("batch", 1) > 1 else ()
    rng = cp.random.default_rng(abs(hash_case(case)) % (2 ** 31))
    scale = 1.0 / k ** 0.5  # products of unit size
    a = (rng.standard_normal((*lead, m, k), dtype=cp.float32) * scale).astype(dtype)
    out = {"a": a}
    b_lead = () if extra.get("b_shared") else lead
    if extra.get("b_t"):  # stored [N, K]; every implementation multiplies by its view bt.T
        out["bt"] = rng.standard_normal((*b_lead, n, k), dtype=cp.float32).astype(dtype)
    else:
        out["b"] = rng.standard_normal((*b_lead, k, n), dtype=cp.float32).astype(dtype)
    if epilogue in ("bias_relu", "bias_gelu", "mlp"):
        out["bias"] = rng.standard_normal(n, dtype=cp.float32).astype(dtype)
    if epilogue == "residual":
        out["r"] = rng.standard_normal((*lead, m, n), dtype=cp.float32).astype(dtype)
    if epilogue == "mlp":  # the second layer: [hidden, K] back to the model width
        out["w2"] = (rng.standard_normal((n, k), dtype=cp.float32) / n ** 0.5).astype(dtype)
        out["b2"] = rng.standard_normal(k, dtype=cp.float32).astype(dtype)
    return out


def hash_case(case: str) -> int:
    """A stable seed for a case (Python's hash of str is salted per process)."""
    h = 0
    for ch in case:
        h = (h * 131 + ord(ch)) % (2 ** 61 - 1)
    return h


def _reference(cp: Any, case: str, x: dict[str, Any]) -> Any:
    a, b = x["a"].astype(cp.float64), operand_b(cp, x).astype(cp.float64)
    y = a @ b
    if "w2" in x:
        h = gelu(cp, y + x["bias"].astype(cp.float64))
        return h @ x["w2"].astype(cp.float64) + x["b2"].astype(cp.float64)
    return epilogue_of(cp, CASES[case][5], y, {name: v.astype(cp.float64)
                                                for name, v in x.items()})


def operand_b(xp: Any, x: dict[str, Any]) -> Any:
    """The case's B: its array, or the view ``bt.T`` of a B stored [N, K]."""
    return x["b"] if "b" in x else xp.swapaxes(x["bt"], -1, -2)


def epilogue_of(xp: Any, epilogue: str, y: Any, x: dict[str, Any]) -> Any:
    """A case's epilogue on its product ``y`` (any array module; ``mlp``'s second layer is
    the caller's)."""
    if epilogue == "bias_relu":
        t = y + x["bias"]
        return xp.relu(t) if xp.__name__ == "torch" else xp.maximum(t, 0)
    if epilogue == "bias_gelu":
        return gelu(xp, y + x["bias"])
    if epilogue == "residual":
        return y * 0.5 + x["r"]
    return y


def gelu(xp: Any, h: Any) -> Any:
    """GELU's tanh form (jax.nn.gelu's default; torch's approximate="tanh")."""
    return 0.5 * h * (1.0 + xp.tanh(0.7978845608028654 * (h + 0.044715 * (h * h * h))))


def _error(cp: Any, out: Any, ref: Any) -> float:
    d = out.astype(cp.float64) - ref
    return float(cp.linalg.norm(d) / max(float(cp.linalg.norm(ref)), 1e-300))


def _flops(case: str) -> float:
    m, n, k = CASES[case][:3]
    batch = EXTRA.get(case, {}).get("batch", 1)
    return 2.0 * batch * m * n * k * (2 if CASES[case][5] == "mlp" else 1)


def _time_events(cp: Any, fn: Any, budget_s: float = 1.0) -> float:
    """Milliseconds per call: median of rounds of back-to-back calls between CUDA events."""
    fn()
    cp.cuda.get_current_stream().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    one = max(cp.cuda.get_elapsed_time(start, stop), 1e-3)
    reps = int(max(3, min(200, 0.05 * 1000 / one)))
    rounds = []
    t0 = time.perf_counter()
    for _ in range(7):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        rounds.append(cp.cuda.get_elapsed_time(start, stop) / reps)
        if time.perf_counter() - t0 > budget_s:
            break
    rounds.sort()
    return rounds[len(rounds) // 2]


#: seconds of float16 products each worker runs before it times anything (``_heat_soak``)
HEAT_SOAK_S = float(os.environ.get("BENCH_HEAT_SOAK_S", "4"))
#: passes over a worker's cases, each case timed once a pass; the median is reported
PASSES = 3


def _heat_soak(cp: Any, seconds: float = HEAT_SOAK_S) -> None:
    """Run 8192^3 float16 products for ``seconds`` so that the GPU's clocks settle where
    sustained GEMM work leaves them before any worker times anything. On an H100 a run's
    first GEMM cases ran 4-9% faster than its later ones, whatever they were
    (``bench/results/h100-s17-call1/exp_s17_epi.txt``), and each implementation runs in its
    own process, one after another: the first would be timed on a cooler, faster GPU."""
    if seconds <= 0:
        return
    a = cp.ones((8192, 8192), dtype=cp.float16)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(8):
            a @ a
        cp.cuda.get_current_stream().synchronize()


def _interleaved(cp: Any, runs: list[tuple[Any, Any]]) -> list[float | None]:
    """Milliseconds per call of each ``(fn, budget)`` of ``runs``: ``PASSES`` passes over all
    of them, each timed once a pass (``_time_events``), the median of its passes; so that a
    drift of the clocks during the worker does not read as a difference between cases."""
    times: list[list[float]] = [[] for _ in runs]
    failed: set[int] = set()
    for _ in range(PASSES):
        for i, (fn, budget) in enumerate(runs):
            if i in failed:
                continue
            try:
                times[i].append(_time_events(cp, fn, budget))
            except Exception as exc:  # noqa: BLE001  (this run's result: None)
                print(f"timing failed: {type(exc).__name__}: {exc}"[:300], flush=True)
                failed.add(i)
    return [None if i in failed else sorted(t)[len(t) // 2] for i, t in enumerate(times)]


def _entry(case: str, ms: float, err: float, **extra: Any) -> dict[str, Any]:
    return {"ms": ms, "tflops": _flops(case) / (ms * 1e-3) / 1e12, "error": err, **extra}


# -- workers ----------------------------------------------------------------------------

def _fusejit_program(fj: Any, case: str, x: dict[str, Any]) -> Any:
    m, n, k, dtype, precision, epilogue = CASES[case]
    a = fj.asarray(x["a"], name="a")
    b = operand_b(fj, {name: fj.asarray(x[name], name=name) for name in ("b", "bt") if name in x})
    y = fj.matmul(a, b, precision=precision)
    named = {name: fj.asarray(v, name=name) for name, v in x.items() if name in ("bias", "r")}
    y = epilogue_of(fj, epilogue, y, named)
    if epilogue == "mlp":
        h = gelu(fj, y + fj.asarray(x["bias"], name="bias"))
        y = h @ fj.asarray(x["w2"], name="w2") + fj.asarray(x["b2"], name="b2")
    return y


def _realize(fj: Any, case: str, x: dict[str, Any]) -> Any:
    """The whole user path: record the program on the inputs, realize it (plan cached)."""
    return _fusejit_program(fj, case, x).realize()


def _retile(text: str, tiles: tuple[int, ...], tma: bool = False) -> str:
    names = ("block_m", "block_n", "block_k", "num_warps", "num_stages", "split_k")
    for name, value in zip(names, tiles):
        text = re.sub(rf"\b{name}=\d+", f"{name}={value}", text)
    return text.replace("kind=gemm", "kind=gemm tma=1") if tma else text


def _tiles_of(kernels: Any) -> str:
    """The tiles of a plan's GEMM kernel (a TF32 plan may run a transposing pass first), or
    the kinds of its kernels where it has none (a float32 product of few outputs and a long
    K is a sum of products: ``linalg.SUM_OF_PRODUCTS_MAX_OUTPUTS``)."""
    a = next((k.attrs for k in kernels if "block_m" in k.attrs), None)
    if a is None:
        return "no gemm: " + " + ".join(str(k.attrs.get("kind")) for k in kernels)
    return (f"{a['block_m']}x{a['block_n']}x{a['block_k']} w{a['num_warps']} s{a['num_stages']}"
            + (f" split{a['split_k']}" if a.get("split_k", 1) > 1 else ""))


def worker_fusejit_tma(cases: list[str], deadline: float, quick: bool) -> dict[str, Any]:
    """The same with ``tma=1`` on every gemm kernel (its own process: an experiment)."""
    return worker_fusejit(cases, deadline, quick, tma=True)


def worker_fusejit(cases: list[str], deadline: float, quick: bool,
                   tma: bool = False) -> dict[str, Any]:
    """Default tiles (launches alone and the realize path), then the sweep."""
    import cupy as cp

    import fusejit as fj
    from fusejit.fuse import plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    _heat_soak(cp)
    results: dict[str, Any] = {}
    #: (case, label, fn, budget, entry fields) of the default tiles, timed after the loop
    defaults: list[tuple[str, str, Any, float, dict[str, Any]]] = []
    for i, case in enumerate(cases):
        x = _inputs(cp, case)
        ref = _reference(cp, case, x)
        y = _fusejit_program(fj, case, x)
        label = "fusejit tma" if tma else "fusejit"
        try:  # (a failure is this case's result: the other cases still run)
            text = fj.dump(y, fused=True)
            base = fj.parse(_retile(text, (), tma))
        except Exception as exc:  # noqa: BLE001
            results[case] = {label: {"failed": f"{type(exc).__name__}: {exc}"[:300]}}
            print(f"fusejit {case}: failed: {results[case][label]['failed']}", flush=True)
            continue
        # the recorded program's inputs in order: the arrays, and relu's 0 (a scalar param)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        assert len(buffers) == len(base.inputs)

        def launches(program: Any, buffers: list[Any] = buffers) -> Any:
            plan = plan_for(program)
            return partial(backend.execute, plan.program, buffers, plan)

        res: dict[str, Any] = {}
        try:
            run = launches(base)
            err = _error(cp, run()[0], ref)
            defaults.append((case, label, run, 1.0, {
                "err": err, "tiles": _tiles_of(plan_for(base).program.kernels),
                "kernels": len(plan_for(base).kernels)}))
            if not tma:
                realize = partial(_realize, fj, case, x)
                defaults.append((case, "fusejit realize", realize, 1.0, {"err": err}))
        except Exception as exc:  # noqa: BLE001  (recorded, the run goes on)
            res[label] = {"failed": f"{type(exc).__name__}: {exc}"[:300]}
        sweep = []
        share = (deadline - time.time()) / max(1, len(cases) - i)
        stop_at = time.time() + share
        gemm = "block_m=" in text  # (a sum of products has no tiles to sweep)
        for tiles in ([] if quick or not gemm else sweep_for(case)):
            if time.time() > stop_at:
                sweep.append({"tiles": str(tiles), "skipped": "time budget"})
                continue
            try:
                prog = fj.parse(_retile(text, tiles, tma))
                run = launches(prog)
                err = _error(cp, run()[0], ref)
                sweep.append(_entry(case, _time_events(cp, run, 0.5), err,
                                    tiles=_tiles_of(plan_for(prog).program.kernels)))
            except Exception as exc:  # noqa: BLE001
                sweep.append({"tiles": str(tiles), "failed": f"{type(exc).__name__}: {exc}"[:300]})
        ok = [s for s in sweep if "tflops" in s and s["error"] < 1e-2]
        if ok:
            res[f"{label} best tiles"] = max(ok, key=lambda s: s["tflops"])
        res["sweep tma" if tma else "sweep"] = sweep
        results[case] = res
    # the default tiles of every case, in interleaved passes (the sweeps above are single)
    times = _interleaved(cp, [(fn, budget) for _, _, fn, budget, _ in defaults])
    for (case, label, _, _, info), ms in zip(defaults, times):
        err = info.pop("err")
        results[case][label] = (_entry(case, ms, err, **info, passes=PASSES) if ms is not None
                                else {"failed": "timing failed"})
    for case in cases:
        res = results.get(case, {})
        print(f"fusejit {case}: " + json.dumps({k: v.get("tflops") for k, v in res.items()
                                                if isinstance(v, dict)}), flush=True)
    return results


def _cupy_product(cp: Any, x: dict[str, Any], epilogue: str) -> Any:
    y = cp.matmul(x["a"], operand_b(cp, x))
    if "w2" in x:
        return gelu(cp, y + x["bias"]) @ x["w2"] + x["b2"]
    return epilogue_of(cp, epilogue, y, x)


def worker_cupy(cases: list[str], deadline: float, quick: bool) -> dict[str, Any]:
    """cuBLAS through cupy.matmul (and CuPy's unfused epilogue)."""
    import cupy as cp
    tf32 = os.environ.get("CUPY_TF32") == "1"
    label = "cuBLAS (cupy)"
    _heat_soak(cp)
    results: dict[str, Any] = {}
    runs: list[tuple[str, Any, float]] = []
    for case in cases:
        precision = CASES[case][4]
        if (precision == "tf32") != tf32 or precision == "tf32x3":
            continue
        x = _inputs(cp, case)
        ref = _reference(cp, case, x)
        run = partial(_cupy_product, cp, x, CASES[case][5])
        try:
            runs.append((case, run, _error(cp, run(), ref)))
        except Exception as exc:  # noqa: BLE001
            results[case] = {label: {"failed": f"{type(exc).__name__}: {exc}"[:300]}}
    for (case, _, err), ms in zip(runs, _interleaved(cp, [(run, 1.0) for _, run, _ in runs])):
        results[case] = {label: _entry(case, ms, err, passes=PASSES) if ms is not None
                         else {"failed": "timing failed"}}
    return results


def worker_torch(cases: list[str], deadline: float, quick: bool) -> dict[str, Any]:
    """torch eager (cuBLAS) and torch.compile."""
    import cupy as cp
    import torch
    _heat_soak(cp)
    results: dict[str, Any] = {}
    modes = ["default"] + (["max-autotune-no-cudagraphs"]
                           if os.environ.get("BENCH_TORCH_MAX_AUTOTUNE") == "1" else [])
    for case in cases:
        precision = CASES[case][4]
        if precision == "tf32x3":
            continue
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
        x = _inputs(cp, case)
        ref = _reference(cp, case, x)
        tx = {name: torch.from_dlpack(v) for name, v in x.items()}
        names = [name for name in ("a", "b", "bt", "bias", "r", "w2", "b2") if name in tx]
        args = [tx[name] for name in names]

        def fn(*xs: Any, names: list[str] = names, epilogue: str = CASES[case][5]) -> Any:
            v = dict(zip(names, xs))
            y = v["a"] @ operand_b(torch, v)
            if epilogue == "mlp":
                return gelu(torch, y + v["bias"]) @ v["w2"] + v["b2"]
            return epilogue_of(torch, epilogue, y, v)

        res: dict[str, Any] = {}
        variants: list[tuple[str, Any]] = [("torch eager", fn)]
        if time.time() < deadline:
            for mode in modes:
                torch._dynamo.reset()
                label = "torch.compile" + ("" if mode == "default" else f" {mode}")
                variants.append((label, torch.compile(fn, mode=None if mode == "default"
                                                      else mode, dynamic=False)))
        for label, f in variants:
            try:
                out = f(*args)
                err = _error(cp, cp.from_dlpack(out.detach()), ref)
                res[label] = _entry(case, _time_events(cp, partial(f, *args)), err)
            except Exception as exc:  # noqa: BLE001
                res[label] = {"failed": f"{type(exc).__name__}: {exc}"[:300]}
        results[case] = res
    return results


def worker_jax(cases: list[str], deadline: float, quick: bool) -> dict[str, Any]:
    """jax.jit (XLA); HIGHEST precision for ieee float32, DEFAULT (TF32) for tf32."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy as cp
    import jax
    import jax.numpy as jnp
    _heat_soak(cp)
    results: dict[str, Any] = {}
    for case in cases:
        precision = CASES[case][4]
        if precision == "tf32x3":
            continue
        x = _inputs(cp, case)
        ref = _reference(cp, case, x)
        try:
            jx = {name: jax.dlpack.from_dlpack(v) for name, v in x.items()}
        except Exception:  # noqa: BLE001  (an older jax: through the host)
            jx = {name: jnp.asarray(cp.asnumpy(v)) for name, v in x.items()}
        names = [name for name in ("a", "b", "bt", "bias", "r", "w2", "b2") if name in jx]
        args = [jx[name] for name in names]
        prec = jax.lax.Precision.HIGHEST if precision == "ieee" else jax.lax.Precision.DEFAULT

        def fn(*xs: Any, names: list[str] = names, epilogue: str = CASES[case][5],
               prec: Any = prec) -> Any:
            v = dict(zip(names, xs))
            y = jnp.matmul(v["a"], operand_b(jnp, v), precision=prec)
            if epilogue == "mlp":
                return jnp.matmul(gelu(jnp, y + v["bias"]), v["w2"], precision=prec) + v["b2"]
            return epilogue_of(jnp, epilogue, y, v)

        jfn = jax.jit(fn)
        try:
            out = jfn(*args).block_until_ready()
            err = _error(cp, cp.asarray(jax.device_get(out)), ref)
            for _ in range(2):
                jfn(*args).block_until_ready()
            t0 = time.perf_counter()
            n = 0
            while n < 5 or time.perf_counter() - t0 < 0.3:
                out = jfn(*args)
                n += 1
            out.block_until_ready()
            ms = (time.perf_counter() - t0) / n * 1e3
            results[case] = {"jax.jit": _entry(case, ms, err)}
        except Exception as exc:  # noqa: BLE001
            results[case] = {"jax.jit": {"failed": f"{type(exc).__name__}: {exc}"[:300]}}
    return results


WORKERS = {"fusejit": worker_fusejit, "fusejit-tma": worker_fusejit_tma, "cupy": worker_cupy,
           "cupy-tf32": worker_cupy, "torch": worker_torch, "jax": worker_jax}


# -- the driver -------------------------------------------------------------------------

def _run_worker(name: str, cases: list[str], out: Path, deadline: float, quick: bool,
                env_extra: dict[str, str], unseen: str = "") -> dict[str, Any]:
    path = out / f"{name}.json"
    env = {**os.environ, **env_extra, "PYTHONPATH": f"{ROOT}{os.pathsep}"
           + os.environ.get("PYTHONPATH", "")}
    if name == "cupy-tf32":
        env["CUPY_TF32"] = "1"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--out", str(out),
           "--deadline", str(deadline), *(["--quick"] if quick else []),
           *(["--unseen", unseen] if unseen else []),
           "--only", "|".join(re.escape(c) for c in cases)]
    timeout = max(10.0, deadline - time.time() + 30)
    with open(out / f"{name}.log", "w") as log:
        try:
            proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            status = "timeout"
    if path.exists():
        return json.loads(path.read_text())
    return {"_failed": f"worker {name} exited with {status} (see {name}.log)"}


def _tflops_of(result: dict[str, Any], column: str) -> float | None:
    v = result.get(column)
    return v.get("tflops") if isinstance(v, dict) else None


def _markdown(results: dict[str, dict[str, Any]]) -> str:
    cols = ["fusejit", "fusejit best tiles", "fusejit tma", "fusejit tma best tiles",
            "fusejit realize", "cuBLAS (cupy)", "torch eager",
            "torch.compile", "torch.compile max-autotune-no-cudagraphs", "jax.jit"]
    present = [c for c in cols if any(c in r for r in results.values())]
    lines = ["| case | " + " | ".join(present) + " | fusejit / cuBLAS | fusejit / best of "
             "torch.compile, jax.jit | default tiles | best tiles |",
             "| --- | " + " | ".join("---:" for _ in present) + " | ---: | ---: | --- | --- |"]
    for case, r in results.items():
        tf = partial(_tflops_of, r)
        cells = []
        for c in present:
            v = tf(c)
            cells.append(f"{v:.0f}" if v is not None else ("fail" if c in r else ""))
        ours = max([v for v in (tf("fusejit"), tf("fusejit best tiles"), tf("fusejit tma"),
                                tf("fusejit tma best tiles")) if v] or [0.0])
        blas = tf("cuBLAS (cupy)") or tf("torch eager")
        peers = [v for v in (tf("torch.compile"),
                             tf("torch.compile max-autotune-no-cudagraphs"), tf("jax.jit")) if v]
        ratio_blas = f"{ours / blas:.2f}" if ours and blas else ""
        ratio_peer = f"{ours / max(peers):.2f}" if ours and peers else ""
        default = r.get("fusejit", {}).get("tiles", "")
        best = r.get("fusejit best tiles", {}).get("tiles", "")
        lines.append(f"| {case} | " + " | ".join(cells)
                     + f" | {ratio_blas} | {ratio_peer} | {default} | {best} |")
    lines.append("")
    lines.append("TFLOP/s (2*M*N*K per call). `fusejit`: default tiles, the plan's launches alone; "
                 "`fusejit best tiles`: the best of the sweep (error < 1e-2); `fusejit realize`: "
                 "the whole user path per call; `fusejit tma`: the same with `tma=1` (operand "
                 "tiles through TMA descriptors). Ratios use the best fusejit column.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench-matmul-out")
    p.add_argument("--quick", action="store_true", help="default tiles only, no sweep")
    p.add_argument("--only", default="", help="regex over case names")
    p.add_argument("--impls", default="fusejit,fusejit-tma,cupy,cupy-tf32,torch,jax")
    p.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run")
    p.add_argument("--torch-max-autotune", action="store_true")
    p.add_argument("--unseen", default="", metavar="SEED:COUNT",
                   help="COUNT cases drawn from SEED (draw_unseen) instead of the fixed ones")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.unseen:
        seed, count = (int(v) for v in args.unseen.split(":"))
        CASES.clear()
        CASES.update(draw_unseen(seed, count))
    cases = [c for c in CASES if re.search(args.only, c)] if args.only else list(CASES)
    if args.worker:
        result = WORKERS[args.worker](cases, args.deadline, args.quick)
        (out / f"{args.worker}.json").write_text(json.dumps(result, indent=2))
        return 0
    start = time.time()
    deadline = start + args.budget
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    # fusejit gets half the budget (its sweep compiles), the peers share the rest
    shares = {"fusejit": 0.35, "fusejit-tma": 0.2, "cupy": 0.05, "cupy-tf32": 0.05,
              "torch": 0.2, "jax": 0.15}
    merged: dict[str, dict[str, Any]] = {c: {} for c in cases}
    failures = {}
    env = {"BENCH_TORCH_MAX_AUTOTUNE": "1"} if args.torch_max_autotune else {}
    for name in impls:
        if name not in WORKERS:
            raise SystemExit(f"unknown implementation {name!r}: choose from {', '.join(WORKERS)}")
        left = deadline - time.time()
        rest = sum(shares.get(i, 0.1) for i in impls[impls.index(name):])
        worker_deadline = time.time() + left * shares.get(name, 0.1) / rest
        t = time.time()
        result = _run_worker(name, cases, out, worker_deadline, args.quick, env, args.unseen)
        print(f"{name}: {time.time() - t:.0f} s", flush=True)
        if "_failed" in result:
            failures[name] = result["_failed"]
            continue
        for case, res in result.items():
            merged.setdefault(case, {}).update(res)
    (out / "results.json").write_text(json.dumps({"results": merged, "failures": failures,
                                                  "seconds": time.time() - start}, indent=2))
    table = _markdown(merged)
    if failures:
        table += "\nFailed: " + "; ".join(f"{k}: {v}" for k, v in failures.items()) + "\n"
    (out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
