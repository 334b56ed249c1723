"""Split reductions on the GPU: launches, the same bits on every run, counters left zero, time.

Usage (GPU machine): python3 bench/split_check.py [--runs N] [--time-only] [--only A,B]

Per workload: the plan's kernels and launches; ``N`` runs alternating two inputs (``x``
and ``x + 1``: a run that finished early, on another run's partials, would show), each
compared bit for bit with the first result for its input; the plan runner's counters read
back zero after a sync; two non-blocking streams running the plan at once (each with its
own counters) give the same bits; and the kernel time (CUDA events over the cached plan's
launches, median of 7 rounds of 20 calls). ``--time-only`` (for a checkout without the
one-launch split) prints launches and times alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_reductions import event_time  # noqa: E402

#: name -> (shape, dtype, what): functions of (xp, x) below
WORKLOADS: dict[str, tuple[tuple[int, ...], str, str]] = {
    "batchnorm_262144x256": ((262144, 256), "float32", "bn"),
    "batchnorm_16384x4096": ((16384, 4096), "float32", "bn"),
    "sum_axis0_65536x1024": ((65536, 1024), "float32", "sum0"),
    "sum_axis0_16384x4096": ((16384, 4096), "float32", "sum0"),
    "sum_axis0_1048576x32": ((1 << 20, 32), "float32", "sum0"),
    "sum_all_2e26": ((1 << 26,), "float32", "sum"),
    "sum_all_int32_2e26": ((1 << 26,), "int32", "sum"),
    "max_all_nan_2e26": ((1 << 26,), "float32", "max"),
    "mean_axis0_f16_16384x4096": ((16384, 4096), "float16", "mean0"),
    "std_axis0_262144x256": ((262144, 256), "float32", "std0"),
    "logsumexp_rows_4x2e20": ((4, 1 << 20), "float32", "lse"),
    "softmax_rows_4x2e20": ((4, 1 << 20), "float32", "softmax"),
}


def program(what: str, xp: Any, x: Any) -> Any:
    if what == "bn":
        mean, var = x.mean(axis=0), x.var(axis=0)
        return (x - mean) / xp.sqrt(var + np.float32(1e-5))
    if what == "sum0":
        return x.sum(axis=0)
    if what == "sum":
        return x.sum()
    if what == "max":
        return x.max()
    if what == "mean0":
        return x.mean(axis=0)
    if what == "std0":
        return x.std(axis=0)
    if what == "lse":
        m = x.max(axis=-1, keepdims=True)
        return xp.log(xp.exp(x - m).sum(axis=-1)) + m[..., 0]
    if what == "softmax":
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    raise KeyError(what)


def _bits(a: Any) -> Any:
    return a.view(f"u{a.itemsize}")


def check(name: str, shape: tuple[int, ...], dtype: str, what: str, runs: int,
          time_only: bool) -> dict[str, Any]:
    import cupy as cp

    import fusejit as fj
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import _plans, current
    rng = np.random.default_rng(0)
    host = rng.standard_normal(shape) * 3
    host = host.astype(dtype)
    if what == "max":
        host[rng.integers(0, host.size, 3)] = np.nan
    x = cp.asarray(host)
    x2 = x + 1
    y = program(what, fj, fj.asarray(x))
    plan = fj.plan(y)
    y.realize()
    y = program(what, fj, fj.asarray(x))  # a realized tensor's node is its buffer now
    key, leaves = structural_key([y._node])
    p = _plans[key]
    be = current()
    bufs = [leaf.buffer for leaf in leaves]
    bufs2 = [x2 if b is x else b for b in bufs]
    r: dict[str, Any] = {"kernels": len(plan.regions), "launches": plan.num_launches,
                         "kinds": [k.kind for k in plan.regions]}
    r["us"] = event_time(lambda: be.execute(p.program, bufs, p)) * 1e6
    if time_only:
        return r
    refs = [be.execute(p.program, b, p)[0] for b in (bufs, bufs2)]
    got = refs[0].astype(np.float64).get()
    with np.errstate(all="ignore"):
        want = np.asarray(program(what, np, host.astype(np.float64)))
    r["rel_err_vs_f64"] = float(np.nanmax(np.abs(got - want)) / max(np.nanmax(np.abs(want)), 1e-30))
    differ = cp.zeros((), cp.int64)
    for i in range(runs):
        out = be.execute(p.program, (bufs, bufs2)[i % 2], p)[0]
        differ += (_bits(out) != _bits(refs[i % 2])).sum()
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    pending = []
    for _ in range(max(2, runs // 4)):
        for s in (s1, s2):
            with s:
                pending.append((s, be.execute(p.program, bufs, p)[0]))
    s1.synchronize()
    s2.synchronize()
    for _, out in pending:
        differ += (_bits(out) != _bits(refs[0])).sum()
    cp.cuda.Device().synchronize()
    r["bits_differing"] = int(differ.get())
    counters = []
    for runner in p.program.__dict__.get(be._slot, {}).values():
        for bufs_of in getattr(runner, "counters", {}).values():
            counters += [int(abs(c).sum().get()) for c in bufs_of]
    r["counter_sets"] = len(counters)
    r["counters_nonzero"] = sum(c != 0 for c in counters)
    return r


def main() -> None:
    import fusejit as fj
    fj.set_backend("cuda")
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 100
    time_only = "--time-only" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
    bad = 0
    for name, (shape, dtype, what) in WORKLOADS.items():
        if only is not None and name not in only:
            continue
        try:
            r = check(name, shape, dtype, what, runs, time_only)
        except Exception as exc:  # noqa: BLE001
            r = {"error": repr(exc)[:400]}
        bad += bool(r.get("error") or r.get("bits_differing") or r.get("counters_nonzero"))
        print(name, json.dumps(r), flush=True)
    print("FAILED" if bad else "ok", flush=True)


if __name__ == "__main__":
    main()
