"""Reduction families on the GPU: fusejit's kernels beside torch.compile and jax.jit.

Usage (GPU machine): python3 bench/exp_reductions.py OUT_DIR
Runs fusejit first in this process (torch is imported only in a child process
afterwards, so its threads never slow fusejit's host work), then torch.compile
and jax.jit on the same workloads in children. Kernel time is the cached plan's
launches alone, measured with CUDA events over 20 back-to-back calls, median of
7 rounds. GB/s counts each input read once and each output written once.
(Tiles are compared by ``FUSEJIT_AUTOTUNE=1`` and ``bench/autotune_check.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

# name -> (shape, dtype, function of (xp, x)); functions use only names numpy/cupy/torch/jax share
WORKLOADS: dict[str, tuple[tuple[int, ...], str, str]] = {
    "sum_axis0_16384x4096": ((16384, 4096), "float32", "sum0"),
    "sum_axis0_4096x16384": ((4096, 16384), "float32", "sum0"),
    "sum_axis0_65536x1024": ((65536, 1024), "float32", "sum0"),
    "sum_axis1_256x512x512": ((256, 512, 512), "float32", "sum1"),
    "sum_axis1_16x4096x1024": ((16, 4096, 1024), "float32", "sum1"),
    "sum_axis02_64x1024x1024": ((64, 1024, 1024), "float32", "sum02"),
    "mean_axis0_f16_16384x4096": ((16384, 4096), "float16", "mean0"),
    "sum_axis0_f64_8192x4096": ((8192, 4096), "float64", "sum0"),
    "var_axis0_16384x4096": ((16384, 4096), "float32", "var0"),
    "batchnorm_16384x4096": ((16384, 4096), "float32", "bn"),
    "sum_inner_16384x4096": ((16384, 4096), "float32", "sum_last"),
    "sum_rows_256x262144": ((256, 262144), "float32", "sum_last"),
    "softmax_256x262144": ((256, 262144), "float32", "softmax"),
    "softmax_1024x65536": ((1024, 65536), "float32", "softmax"),
    "layernorm_f16_16384x4096": ((16384, 4096), "float16", "layernorm"),
    "softmax_f16_16384x4096": ((16384, 4096), "float16", "softmax"),
    "logsumexp_16384x4096": ((16384, 4096), "float32", "lse"),
}


def program(kind: str, xp: Any, x: Any) -> Any:
    """The workload ``kind`` written once for every array module."""
    if kind == "sum0":
        return x.sum(axis=0)
    if kind == "sum1":
        return x.sum(axis=1)
    if kind == "sum02":
        return x.sum(axis=(0, 2))
    if kind == "mean0":
        return x.mean(axis=0)
    if kind == "sum_last":
        return x.sum(axis=-1)
    if kind == "var0":
        return x.var(axis=0)
    if kind == "bn":
        m = x.mean(axis=0, keepdims=True)
        c = x - m
        v = (c * c).mean(axis=0, keepdims=True)
        return c / xp.sqrt(v + 1e-5)
    if kind == "softmax":
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if kind == "layernorm":
        m = x.mean(axis=-1, keepdims=True)
        c = x - m
        v = (c * c).mean(axis=-1, keepdims=True)
        return c / xp.sqrt(v + 1e-5)
    if kind == "lse":
        m = x.max(axis=-1, keepdims=True)
        return xp.log(xp.exp(x - m).sum(axis=-1)) + m[..., 0]
    raise KeyError(kind)


def moved_bytes(shape: tuple[int, ...], dtype: str, out_size: int) -> int:
    item = np.dtype(dtype).itemsize
    return (int(np.prod(shape)) + out_size) * item


def event_time(fn: Callable[[], Any], rounds: int = 7, reps: int = 20) -> float:
    """Median seconds per call of ``fn`` over ``rounds`` of ``reps`` calls (CUDA events)."""
    import cupy as cp
    for _ in range(3):
        fn()
    cp.cuda.get_current_stream().synchronize()
    times = []
    for _ in range(rounds):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / reps)
    return float(np.median(times))


def fusejit_side(out_dir: str) -> dict[str, Any]:
    import cupy as cp

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import _plans, current
    fj.set_backend("cuda")
    results: dict[str, Any] = {}
    n = 1 << 28
    src, dst = cp.ones(n, cp.float32), cp.empty(n, cp.float32)
    copy_s = event_time(lambda: cp.copyto(dst, src))
    results["copy_GBps"] = 2 * n * 4 / copy_s / 1e9
    print(f"copy bandwidth {results['copy_GBps']:.0f} GB/s", flush=True)

    def measure(name: str, shape: tuple[int, ...], dtype: str, kind: str) -> dict[str, Any]:
        rng = np.random.default_rng(0)
        host = rng.standard_normal(shape).astype(dtype)
        x = cp.asarray(host)
        t = fj.asarray(x)
        y = program(kind, fj, t)
        plan = fj.plan(y)
        y.realize()
        got = y.numpy().astype(np.float64)
        ref = program(kind, np, host.astype(np.float64))
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
        y = program(kind, fj, t)
        key, leaves = structural_key([y._node])
        p = _plans[key]
        be = current()
        bufs = [leaf.buffer for leaf in leaves]
        s = event_time(lambda: be.execute(p.program, bufs, p))
        out_size = int(np.prod(y.shape))
        gbps = moved_bytes(shape, dtype, out_size) / s / 1e9
        return {"us": s * 1e6, "GBps": gbps, "frac_copy": gbps / results["copy_GBps"],
                "kernels": len(plan.kernels), "rel_err_vs_f64": err}

    for name, (shape, dtype, kind) in WORKLOADS.items():
        try:
            r = measure(name, shape, dtype, kind)
        except Exception as exc:  # noqa: BLE001
            r = {"error": repr(exc)[:300]}
        results[name] = r
        print(name, json.dumps(r), flush=True)
    return results


def peer_side(peer: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, (shape, dtype, kind) in WORKLOADS.items():
        try:
            host = np.random.default_rng(0).standard_normal(shape).astype(dtype)
            if peer == "torch":
                import torch
                x = torch.from_numpy(host).cuda()
                f = torch.compile(lambda x, kind=kind: program(kind, torch, x))
                y = f(x)
                torch.cuda.synchronize()
                s = event_time(lambda f=f, x=x: f(x))
            else:
                import jax
                import jax.numpy as jnp
                x = jax.device_put(host)
                f = jax.jit(lambda x, kind=kind: program(kind, jnp, x))
                y = f(x).block_until_ready()
                s = event_time(lambda f=f, x=x: f(x).block_until_ready())
            out_size = int(np.prod(y.shape))
            out[name] = {"us": s * 1e6, "GBps": moved_bytes(shape, dtype, out_size) / s / 1e9}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"error": repr(exc)[:300]}
        print(peer, name, json.dumps(out[name]), flush=True)
    return out


def main() -> int:
    if len(sys.argv) >= 3 and sys.argv[1] == "--peer":
        res = peer_side(sys.argv[2])
        print("RESULT " + json.dumps(res))
        return 0
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    res = {"fusejit": fusejit_side(out_dir)}
    for peer in ("torch", "jax"):
        p = subprocess.run([sys.executable, __file__, "--peer", peer], capture_output=True,
                           text=True, timeout=420)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        res[peer] = json.loads(lines[-1][7:]) if lines else {"error": p.stderr[-2000:]}
    with open(os.path.join(out_dir, "reductions.json"), "w") as f:
        json.dump(res, f, indent=1)
    copy = res["fusejit"]["copy_GBps"]
    print("\n| workload | fusejit us | % copy | kernels | torch.compile us | jax.jit us | best/fj |")
    print("|---|---|---|---|---|---|---|")
    for name in WORKLOADS:
        f = res["fusejit"].get(name, {})
        t = res["torch"].get(name, {}) if isinstance(res["torch"], dict) else {}
        j = res["jax"].get(name, {}) if isinstance(res["jax"], dict) else {}
        best = min(t.get("us", 1e30), j.get("us", 1e30))
        ratio = best / f["us"] if "us" in f and best < 1e30 else float("nan")
        print(f"| {name} | {f.get('us', float('nan')):.1f} | {100 * f.get('GBps', 0) / copy:.0f} | "
              f"{f.get('kernels', '-')} | {t.get('us', float('nan')):.1f} | "
              f"{j.get('us', float('nan')):.1f} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
