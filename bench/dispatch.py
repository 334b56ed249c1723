"""Per-call cost of small programs beside the peers (issue 10's targets), on the GPU machine.

Run: ``python3 bench/dispatch.py [--json OUT]``. Programs:

- ``five``: ``maximum(a * s + b, 0) * 0.5 - 1`` on 1,024 float32 elements, ``s`` a Python float
  passed as an argument (a new value each call would not recompile anything);
- ``layer_norm``: layer norm (mean, centered variance, normalize, scale and shift) of a
  256x1024 float32 array;
- ``adam``: one Adam step on 2**24 float32 parameters (4 inputs, 3 outputs; GB/s reported
  against the device copy rate measured in the same run).

Implementations: ``fj.jit`` and plain ``realize`` (measured first, in this process, before
torch or jax is imported), then in one child process each: CuPy (one kernel per op),
``cupy.fuse`` (pointwise programs only), ``jax.jit``, torch eager and ``torch.compile``.
Each figure is microseconds per call: back-to-back calls timed by the wall clock until the
device is done (best of 5 rounds), so a call costs the larger of its host time and its GPU time.

``--paired N``: then, in this process, ``fj.jit`` and ``cupy.fuse`` of ``five`` timed in turn
N times (the host's speed drifts between runs and processes by up to 2x; side by side,
each pair sees the same host), printing each pair and the ratio of their medians;
``--paired-only N``: those pairs alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

N_FIVE, LN_SHAPE, N_ADAM = 1024, (256, 1024), 1 << 24
EPS = 1e-5


def five(xp: Any, a: Any, b: Any, s: Any) -> Any:
    """The 5-op pointwise program (torch spells ``maximum(v, 0.0)`` as ``clamp_min``)."""
    v = a * s + b
    v = v.clamp_min(0.0) if xp.__name__ == "torch" else xp.maximum(v, 0.0)
    return v * 0.5 - 1.0


def layer_norm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """Layer norm over the last axis (written out, as a user would in any of the libraries)."""
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS) * w + b


def adam(xp: Any, p: Any, g: Any, m: Any, v: Any, lr: Any) -> tuple[Any, Any, Any]:
    """One Adam step at step 10 (the bias corrections as Python floats)."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * (g * g)
    p2 = p - lr * (m2 / (1 - b1 ** 10)) / (xp.sqrt(v2 / (1 - b2 ** 10)) + eps)
    return p2, m2, v2


def inputs(cp: Any) -> dict[str, list[Any]]:
    """The same device inputs in every process (fixed seeds)."""
    rng = cp.random.default_rng(7)
    f32 = cp.float32
    return {"five": [rng.standard_normal(N_FIVE, dtype=f32), rng.standard_normal(N_FIVE, dtype=f32)],
            "layer_norm": [rng.standard_normal(LN_SHAPE, dtype=f32),
                           rng.standard_normal(LN_SHAPE[1], dtype=f32),
                           rng.standard_normal(LN_SHAPE[1], dtype=f32)],
            "adam": [rng.standard_normal(N_ADAM, dtype=f32) for _ in range(3)]
            + [rng.random(N_ADAM, dtype=f32)]}


#: Seconds of back-to-back calls before a process times its first figure. The host speeds up
#: over the first second or two of work: in one process on the H200 machine
#: (``bench/results/h200-s19-call2/dispatch.txt``), the first figure timed, ``fj.jit``'s 5-op
#: call, took 17.5 us and the 20-op layer norm timed after it 11.5 us; the paired rounds that
#: followed took 17.3, 16.8, then 11.5, 11.3, 11.1 us for the 5-op call.
HOST_WARM_S = 2.0
_warm = [False]


def per_call_us(fn: Callable[[], Any], sync: Callable[[], None], seconds: float = 0.4) -> float:
    """Best of 5 rounds of back-to-back calls, microseconds per call (device finished); the
    process's first call of this warms the host first (``HOST_WARM_S``)."""
    fn()
    sync()
    if not _warm[0]:
        _warm[0] = True
        end = time.perf_counter() + HOST_WARM_S
        while time.perf_counter() < end:
            for _ in range(100):
                fn()
            sync()
    t = time.perf_counter()
    fn()
    sync()
    one = time.perf_counter() - t
    reps = max(5, min(20000, int(seconds / 5 / max(one, 1e-6))))
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / reps * 1e6)
    return best


def run_fusejit(cp: Any) -> dict[str, dict[str, float]]:
    """fj.jit and realize."""
    import fusejit as fj
    fj.set_backend("cuda")
    sync = cp.cuda.get_current_stream().synchronize
    x = inputs(cp)
    out: dict[str, dict[str, float]] = {"fj.jit": {}, "fusejit realize": {}}
    jfive = fj.jit(lambda a, b, s: five(fj, a, b, s))
    jln = fj.jit(lambda a, w, b: layer_norm(fj, a, w, b))
    jadam = fj.jit(lambda p, g, m, v, lr: adam(fj, p, g, m, v, lr))
    out["fj.jit"]["five"] = per_call_us(lambda: jfive(*x["five"], 2.0), sync)
    out["fj.jit"]["layer_norm"] = per_call_us(lambda: jln(*x["layer_norm"]), sync)
    out["fj.jit"]["adam"] = per_call_us(lambda: jadam(*x["adam"], 1e-3), sync)
    t = {k: [fj.asarray(a) for a in v] for k, v in x.items()}
    out["fusejit realize"]["five"] = per_call_us(lambda: five(fj, *t["five"], 2.0).realize(), sync)
    out["fusejit realize"]["layer_norm"] = per_call_us(
        lambda: layer_norm(fj, *t["layer_norm"]).realize(), sync)
    out["fusejit realize"]["adam"] = per_call_us(
        lambda: fj.realize(*adam(fj, *t["adam"], 1e-3)), sync)
    return out


def run_cupy(cp: Any) -> dict[str, dict[str, float]]:
    """CuPy (a kernel per op) and cupy.fuse."""
    sync = cp.cuda.get_current_stream().synchronize
    x = inputs(cp)
    out: dict[str, dict[str, float]] = {"cupy": {}, "cupy.fuse": {}}
    out["cupy"]["five"] = per_call_us(lambda: five(cp, *x["five"], 2.0), sync)
    out["cupy"]["layer_norm"] = per_call_us(lambda: layer_norm(cp, *x["layer_norm"]), sync)
    out["cupy"]["adam"] = per_call_us(lambda: adam(cp, *x["adam"], 1e-3), sync)
    # cupy.fuse names the kernel after the function: a def, not a lambda
    def five_cupy(a: Any, b: Any, s: Any) -> Any:
        return five(cp, a, b, s)

    def adam_cupy(p: Any, g: Any, m: Any, v: Any, lr: Any) -> Any:
        return adam(cp, p, g, m, v, lr)
    ffive, fadam = cp.fuse()(five_cupy), cp.fuse()(adam_cupy)
    out["cupy.fuse"]["five"] = per_call_us(lambda: ffive(*x["five"], 2.0), sync)
    out["cupy.fuse"]["adam"] = per_call_us(lambda: fadam(*x["adam"], 1e-3), sync)
    return out


def paired(cp: Any, rounds: int) -> dict[str, Any]:
    """``fj.jit`` and ``cupy.fuse`` of ``five`` in turn, ``rounds`` times (one process)."""
    import fusejit as fj
    fj.set_backend("cuda")
    sync = cp.cuda.get_current_stream().synchronize
    a, b = inputs(cp)["five"]
    jfive = fj.jit(lambda a, b, s: five(fj, a, b, s))

    def five_cupy(a: Any, b: Any, s: Any) -> Any:
        return five(cp, a, b, s)
    ffive = cp.fuse()(five_cupy)
    pairs = []
    for _ in range(rounds):
        pair = (per_call_us(lambda: jfive(a, b, 2.0), sync, 0.2),
                per_call_us(lambda: ffive(a, b, 2.0), sync, 0.2))
        pairs.append(pair)
        print(f"five: fj.jit {pair[0]:.1f} us, cupy.fuse {pair[1]:.1f} us, "
              f"ratio {pair[0] / pair[1]:.2f}", flush=True)
    med = [sorted(p[i] for p in pairs)[len(pairs) // 2] for i in (0, 1)]
    print(f"five, median of {rounds} pairs: fj.jit {med[0]:.1f} us, cupy.fuse {med[1]:.1f} us, "
          f"ratio {med[0] / med[1]:.2f}", flush=True)
    return {"pairs": pairs, "median": med}


def run_jax(cp: Any) -> dict[str, dict[str, float]]:
    """jax.jit (wall clock until block_until_ready of the last call's results)."""
    import os
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax
    import jax.numpy as jnp
    x = {k: [jax.dlpack.from_dlpack(a) for a in v] for k, v in inputs(cp).items()}
    out: dict[str, float] = {}
    last: list[Any] = [None]

    def sync() -> None:
        jax.block_until_ready(last[0])
    for name, fn, extra in (("five", five, (2.0,)), ("layer_norm", layer_norm, ()),
                            ("adam", adam, (1e-3,))):
        jf = jax.jit(lambda *a, fn=fn: fn(jnp, *a))
        args = (*x[name], *extra)

        def call(jf: Any = jf, args: tuple = args) -> None:
            last[0] = jf(*args)
        out[name] = per_call_us(call, sync)
    return {"jax.jit": out}


def run_torch(cp: Any) -> dict[str, dict[str, float]]:
    """torch eager and torch.compile (default mode)."""
    import torch
    x = {k: [torch.from_dlpack(a) for a in v] for k, v in inputs(cp).items()}
    sync = torch.cuda.synchronize
    out: dict[str, dict[str, float]] = {"torch eager": {}, "torch.compile": {}}
    for name, fn, extra in (("five", five, (2.0,)), ("layer_norm", layer_norm, ()),
                            ("adam", adam, (1e-3,))):
        args = (*x[name], *extra)
        out["torch eager"][name] = per_call_us(lambda fn=fn, args=args: fn(torch, *args), sync)
        torch._dynamo.reset()
        cf = torch.compile(lambda *a, fn=fn: fn(torch, *a), dynamic=False)
        out["torch.compile"][name] = per_call_us(lambda cf=cf, args=args: cf(*args), sync)
    return out


RUNNERS = {"cupy": run_cupy, "jax": run_jax, "torch": run_torch}


def copy_rate(cp: Any) -> float:
    """Device-to-device copy rate in GB/s (bytes read + written), 256 MB."""
    a = cp.empty(1 << 26, cp.float32)
    b = cp.empty_like(a)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    b[...] = a
    start.record()
    for _ in range(20):
        b[...] = a
    stop.record()
    stop.synchronize()
    return 2 * a.nbytes * 20 / (cp.cuda.get_elapsed_time(start, stop) * 1e-3) / 1e9


def main() -> int:
    """Run every implementation and print the table."""
    import cupy as cp
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(RUNNERS[sys.argv[2]](cp)))
        return 0
    if "--paired-only" in sys.argv:  # the pairs alone (no table, no other processes)
        paired(cp, int(sys.argv[sys.argv.index("--paired-only") + 1]))
        return 0
    results = run_fusejit(cp)
    for name in RUNNERS:
        proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                              text=True, timeout=300)
        try:
            results.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (IndexError, json.JSONDecodeError):
            print(f"{name} failed: {proc.stderr[-2000:]}", file=sys.stderr)
    rate = copy_rate(cp)
    adam_bytes = 7 * 4 * N_ADAM
    programs = ("five", "layer_norm", "adam")
    lines = ["| per call (us) | " + " | ".join(programs) + " |",
             "| --- | " + " | ".join("---:" for _ in programs) + " |"]
    for impl, row in results.items():
        cells = []
        for p in programs:
            us = row.get(p)
            if us is None:
                cells.append("-")
            elif p == "adam":
                gbs = adam_bytes / (us * 1e-6) / 1e9
                cells.append(f"{us:.1f} ({100 * gbs / rate:.0f}% of copy)")
            else:
                cells.append(f"{us:.1f}")
        lines.append(f"| {impl} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(f"copy rate {rate:.0f} GB/s\n{table}")
    if "--paired" in sys.argv:
        results["paired"] = paired(cp, int(sys.argv[sys.argv.index("--paired") + 1]))
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(
            json.dumps({"copy_GBps": rate, "us": results, "table": table}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
