"""GPU check of FUSEJIT_AUTOTUNE: heuristic tiles against tuned ones, and what tuning costs.

Usage (repo root on the GPU machine, with lark importable, e.g. after ../shared/gpu/prepare):
    python3 bench/autotune_check.py OUT_DIR [--only NAME,NAME] [--budget SECONDS]

Three child processes run the same workloads on the ``cuda`` backend, in this order:

* ``heuristic``: ``FUSEJIT_AUTOTUNE=0``, an empty fusejit cache;
* ``tuned``: ``FUSEJIT_AUTOTUNE=1``, another empty fusejit cache: every kernel with
  candidates is timed on its first call and the choice written to that cache;
* ``reuse``: ``FUSEJIT_AUTOTUNE=1`` on the ``tuned`` run's cache: every choice must come
  from disk (nothing is timed again).

The three share one fresh Triton cache (``TRITON_CACHE_DIR``), so the ``tuned`` run's extra
first-call time is what tuning adds (the other candidates' compiles and the timing).
Per workload: the first call's seconds (recording, compiles, tuning), the steady time of a
call (``fj.jit`` replays; CUDA events, best of 5 rounds), and a fingerprint of the outputs
(float64 sum and sum of magnitudes; the tuned run must agree with the heuristic one). Per
tuned kernel: the tuner's own time of every candidate (the heuristic's first) and its pick:
GPU time of back-to-back launches on scratch arrays, where the steady time of a call also
carries the host's cost of a call (about 10-20 us for ``fj.jit``).
Prints a table and writes ``OUT_DIR/autotune_check.json``. The default budget (150 s in all)
skips the last workloads rather than run over; ``--only`` picks workloads by name.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

F16, F32 = np.float16, np.float32


def _chain(xp: Any, x: Any) -> Any:
    return xp.maximum(x * F32(2) + F32(1), F32(0)) * F32(0.5) - xp.exp(-x)


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    d = x - x.mean(axis=-1, keepdims=True)
    return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + F32(1e-5)) * w + b


def _normal(cp: Any, shape: tuple[int, ...], dtype: Any = F32) -> Any:
    return cp.random.standard_normal(shape, dtype=F32).astype(dtype)


#: name -> (program of (xp, *arrays), inputs builder of cupy), most telling first (a budget
#: that runs out skips the last ones)
WORKLOADS: dict[str, tuple[Callable[..., Any], Callable[[Any], list[Any]]]] = {
    "gemm_f16_4096": (lambda xp, a, b: a @ b,
                      lambda cp: [_normal(cp, (4096, 4096), F16), _normal(cp, (4096, 4096), F16)]),
    "softmax_16384x4096": (_softmax, lambda cp: [_normal(cp, (16384, 4096))]),
    "pointwise_2^26": (_chain, lambda cp: [_normal(cp, (1 << 26,))]),
    "sum_2^26": (lambda xp, x: x.sum(), lambda cp: [_normal(cp, (1 << 26,))]),
    "colsum_65536x1024": (lambda xp, x: x.sum(axis=0), lambda cp: [_normal(cp, (65536, 1024))]),
    "layernorm_16384x2048": (_layernorm, lambda cp: [_normal(cp, (16384, 2048)),
                                                     _normal(cp, (2048,)), _normal(cp, (2048,))]),
    "softmax_looped_256x65536": (_softmax, lambda cp: [_normal(cp, (256, 65536))]),
    "gemm_f16_split_k_512x512x65536": (
        lambda xp, a, b: a @ b,
        lambda cp: [_normal(cp, (512, 65536), F16), _normal(cp, (65536, 512), F16)]),
    "transpose_add_8192": (lambda xp, x, y: x.T + y,
                           lambda cp: [_normal(cp, (8192, 8192)), _normal(cp, (8192, 8192))]),
    "std_cols_65536x1024": (lambda xp, x: x.std(axis=0), lambda cp: [_normal(cp, (65536, 1024))]),
    "softmax_f16_32768x4096": (_softmax, lambda cp: [_normal(cp, (32768, 4096), F16)]),
    "sum_axes02_64x4096x256": (lambda xp, x: x.sum(axis=(0, 2)),
                               lambda cp: [_normal(cp, (64, 4096, 256))]),
    "gelu_f64_2^25": (lambda xp, x: 0.5 * x * (1.0 + xp.tanh(
        0.7978845608028654 * (x + 0.044715 * (x * x * x)))),
        lambda cp: [_normal(cp, (1 << 25,), np.float64)]),
    # split reductions of shapes no heuristic was tuned on (the split-count question: whole
    # equal chunks or the heuristic's count)
    "sum_mid_96x3000x640": (lambda xp, x: x.sum(axis=1), lambda cp: [_normal(cp, (96, 3000, 640))]),
    "mean_cols_150000x768": (lambda xp, x: x.mean(axis=0),
                             lambda cp: [_normal(cp, (150000, 768))]),
    "max_axes02_48x2000x1000": (lambda xp, x: x.max(axis=(0, 2)),
                                lambda cp: [_normal(cp, (48, 2000, 1000))]),
    "var_cols_300000x200": (lambda xp, x: x.var(axis=0), lambda cp: [_normal(cp, (300000, 200))]),
    "sum_cols_f16_131072x512": (lambda xp, x: x.sum(axis=0, dtype=F32),
                                lambda cp: [_normal(cp, (131072, 512), F16)]),
}

#: seconds each run may start workloads for (the whole script stays within --budget)
SHARES = {"heuristic": 0.25, "tuned": 0.6, "reuse": 0.15}


# -- one run (a child process) ------------------------------------------------------------------

def _time_calls(cp: Any, call: Callable[[], Any]) -> float:
    """Seconds per call: CUDA events around back-to-back calls, best of 5 rounds."""
    stream = cp.cuda.get_current_stream()
    call()
    stream.synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()

    def batch(reps: int) -> float:
        start.record(stream)
        for _ in range(reps):
            call()
        end.record(stream)
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) * 1e-3 / reps

    reps = max(3, min(200, int(0.03 / max(batch(1), 1e-6))))
    return min(batch(reps) for _ in range(5))


def _fingerprint(cp: Any, outs: Any) -> list[list[float]]:
    outs = outs if isinstance(outs, tuple) else (outs,)
    prints = []
    for t in outs:
        a = cp.asarray(t).astype(cp.float64)
        prints.append([float(a.sum()), float(cp.abs(a).sum())])
    return prints


def _jitted(fj: Any, fn: Callable[..., Any]) -> Any:
    return fj.jit(lambda *arrays: fn(fj, *arrays))


def child(mode: str, out_file: str, seconds: float, only: list[str]) -> int:
    import cupy as cp

    import fusejit as fj
    from fusejit.runtime import autotune
    fj.set_backend("cuda")
    deadline = time.perf_counter() + seconds
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    device = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    results = []
    for name, (fn, make) in WORKLOADS.items():
        if only and name not in only:
            continue
        if time.perf_counter() > deadline:
            results.append({"name": name, "skipped": "budget"})
            continue
        cp.random.seed(0)
        args = make(cp)
        jf = _jitted(fj, fn)
        before = dict(autotune.stats)
        t0 = time.perf_counter()
        out = jf(*args)
        cp.cuda.get_current_stream().synchronize()
        first = time.perf_counter() - t0
        steady = _time_calls(cp, partial(jf, *args))
        plan = fj.plan(fn(fj, *[fj.asarray(a) for a in args]))
        results.append({
            "name": name, "first_call_s": first, "steady_us": steady * 1e6,
            "fingerprint": _fingerprint(cp, out),
            "kernels": [k.name for k in plan.program.kernels],
            "tiling": [line.strip() for line in plan.explain().splitlines()
                       if "tiling:" in line],
            "tuned": autotune.stats["tuned"] - before["tuned"],
            "reused": autotune.stats["reused"] - before["reused"],
            "tuning_s": autotune.stats["seconds"] - before["seconds"]})
        print(f"[{mode}] {name}: first call {first:.2f} s, {steady * 1e6:.1f} us per call",
              flush=True)
        args = out = jf = None  # free the workload's memory before the next one
        cp.get_default_memory_pool().free_all_blocks()
    with open(out_file, "w") as f:
        json.dump({"mode": mode, "device": device, "workloads": results,
                   "entries": autotune.entries(), "stats": autotune.stats}, f, indent=1)
    return 0


# -- the three runs and the report ------------------------------------------------------------

def _run(mode: str, tune: str, cache: Path, triton_cache: Path, out_file: Path, seconds: float,
         only: list[str]) -> dict[str, Any] | None:
    env = dict(os.environ, FUSEJIT_AUTOTUNE=tune, FUSEJIT_CACHE_DIR=str(cache),
               TRITON_CACHE_DIR=str(triton_cache), FUSEJIT_BACKEND="cuda")
    cmd = [sys.executable, __file__, "--child", mode, str(out_file), "--seconds", str(seconds)]
    if only:
        cmd += ["--only", ",".join(only)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, timeout=seconds + 90)
    except subprocess.TimeoutExpired:
        print(f"[{mode}] timed out", file=sys.stderr)
        return None
    if proc.returncode != 0 or not out_file.exists():
        print(f"[{mode}] failed with exit status {proc.returncode}", file=sys.stderr)
        return None
    data = json.loads(out_file.read_text())
    data["wall_s"] = time.perf_counter() - t0
    return data


def _agree(a: list[list[float]], b: list[list[float]]) -> float:
    """The largest relative difference of two fingerprints (inf when their shapes differ)."""
    if len(a) != len(b):
        return math.inf
    worst = 0.0
    for (s1, m1), (s2, m2) in zip(a, b):
        scale = max(abs(m1), abs(m2), 1e-30)
        worst = max(worst, abs(s1 - s2) / scale, abs(m1 - m2) / scale)
    return worst


def report(runs: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """Combine the runs per workload and per kernel; print the tables."""
    base = {w["name"]: w for w in (runs["heuristic"] or {}).get("workloads", [])}
    tuned = {w["name"]: w for w in (runs["tuned"] or {}).get("workloads", [])}
    reuse = {w["name"]: w for w in (runs["reuse"] or {}).get("workloads", [])}
    entries = (runs["tuned"] or {}).get("entries", [])
    rows = []
    print(f"\n{'workload':32s} {'heuristic us':>12s} {'tuned us':>10s} {'speedup':>8s} "
          f"{'1st call h/t s':>15s} {'tuning s':>9s} {'reuse 1st s':>11s} {'agree':>8s}")
    for name in WORKLOADS:
        h, t, r = base.get(name), tuned.get(name), reuse.get(name)
        if not h or not t or "skipped" in h or "skipped" in t:
            continue
        row = {"name": name, "heuristic_us": h["steady_us"], "tuned_us": t["steady_us"],
               "speedup": h["steady_us"] / t["steady_us"],
               "first_call_heuristic_s": h["first_call_s"], "first_call_tuned_s": t["first_call_s"],
               "tuning_s": t["tuning_s"], "extra_first_call_s": t["first_call_s"] - h["first_call_s"],
               "kernels_tuned": t["tuned"], "agree_rel": _agree(h["fingerprint"], t["fingerprint"]),
               "tiling_tuned": t["tiling"]}
        if r and "skipped" not in r:
            row.update(reuse_first_call_s=r["first_call_s"], reuse_us=r["steady_us"],
                       reused=r["reused"], retuned=r["tuned"])
        rows.append(row)
        flag = "" if row["agree_rel"] < 2e-3 else "  MISMATCH"
        print(f"{name:32s} {row['heuristic_us']:12.1f} {row['tuned_us']:10.1f} "
              f"{row['speedup']:8.3f} {row['first_call_heuristic_s']:7.2f}/{row['first_call_tuned_s']:<7.2f}"
              f" {row['tuning_s']:9.2f} {row.get('reuse_first_call_s', math.nan):11.2f} "
              f"{row['agree_rel']:8.1e}{flag}")
    kernels = []
    print(f"\n{'kernel (the tuner own times)':44s} {'heuristic us':>12s} {'chosen us':>10s} "
          f"{'pick':>5s}  candidates: us")
    for e in entries:
        times = e.get("times", [])
        i = e.get("index", 0)
        h_us = times[0] * 1e6 if times and times[0] is not None else math.nan
        c_us = times[i] * 1e6 if times and times[i] is not None else math.nan
        kernels.append({"kernel": e.get("kernel"), "heuristic_us": h_us, "chosen_us": c_us,
                        "index": i, "chosen": e.get("chosen"), "times_us": [
                            None if x is None else x * 1e6 for x in times],
                        "candidates": e.get("candidates"), "tuning_s": e.get("seconds")})
        cands = " ".join("fail" if x is None else f"{x * 1e6:.0f}" for x in times)
        print(f"{str(e.get('kernel'))[:44]:44s} {h_us:12.1f} {c_us:10.1f} {'#' + str(i + 1):>5s}  "
              f"{cands}")
    reuse_ok = all(row.get("retuned", 0) == 0 and row.get("reused", 0) >= row["kernels_tuned"]
                   for row in rows if "reused" in row)
    print(f"\nreuse run: every choice read from the disk cache, nothing timed again: {reuse_ok}")
    for mode, data in runs.items():
        if data:
            print(f"{mode} run: {data['wall_s']:.1f} s wall, autotune stats {data['stats']}")
    return {"workloads": rows, "kernels": kernels, "reuse_ok": reuse_ok,
            "device": next((d["device"] for d in runs.values() if d), None),
            "runs": runs}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir", nargs="?", default="autotune-out")
    p.add_argument("--only", default="", help="comma-separated workload names")
    p.add_argument("--budget", type=float, default=150.0, help="seconds for all three runs")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    only = [n for n in args.only.split(",") if n]
    unknown = [n for n in only if n not in WORKLOADS]
    if unknown:
        p.error(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}")
    if args.child:  # child mode: out_dir is the JSON file to write
        return child(args.child, args.out_dir, args.seconds, only)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="fusejit-autotune-") as tmp:
        root = Path(tmp)
        plan = [("heuristic", "0", root / "cache-heuristic"), ("tuned", "1", root / "cache-tuned"),
                ("reuse", "1", root / "cache-tuned")]
        runs: dict[str, dict[str, Any] | None] = {}
        for mode, tune, cache in plan:
            # each run starts workloads within its share of the budget (children take a few
            # seconds to start; a workload started late still finishes)
            seconds = max(5.0, SHARES[mode] * args.budget - 5)
            runs[mode] = _run(mode, tune, cache, root / "triton", root / f"{mode}.json", seconds,
                              only)
        result = report(runs)
    result["script_s"] = time.perf_counter() - started
    (out / "autotune_check.json").write_text(json.dumps(result, indent=1))
    print(f"\nwrote {out / 'autotune_check.json'} ({result['script_s']:.0f} s in all)")
    return 0 if result["reuse_ok"] and runs["tuned"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
