"""Random row-normalizing programs (softmax, norms, centring, logsumexp...) with random
prologues, epilogues, dtypes and special values, on wide rows, against the ``numpy`` backend:
the looped and cooperative row kernels' own fuzz (``fusejit fuzz`` draws rows far narrower
than a cooperative kernel needs on a GPU).

Run: ``python3 bench/fuzz_rows.py [--backend cuda|interpret] [--seconds S] [--seed N]
[--cooperative 0|1] [--compile-only]``. On ``interpret`` the rows are short and the persistent limit is made
small (2-16 elements), so they loop or run cooperatively; on ``cuda`` they are 64K-600K
elements wide. Prints one line per failure (what to rerun) and a summary line; exit status 1
if anything failed. ``--compile-only`` (no GPU needed) draws the ``cuda`` sizes, emits each
program's kernels for ``cuda`` and compiles them for sm_90 with the installed Triton (this
found a ragged layer norm's cooperative kernel that Triton 3.6 could not compile, which the
H200's run had met first). Comparisons use ``fusejit.testing.tolerance`` of the output's dtype, the
absolute part scaled by the largest output (centring cancels: an output near 0 is off by
ulps of what was subtracted).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fusejit as fj
import fusejit.codegen.heuristics as heuristics
from fusejit.testing import assert_matches_numpy, tolerance

PROLOGUES: list[Callable[[Any], Any]] = [
    lambda a: a, lambda a: fj.exp(a * 0.3), lambda a: fj.tanh(a), lambda a: a * 2.5 - 1,
    lambda a: fj.abs(a), lambda a: a * a]
EPILOGUES: list[Callable[[Any], Any]] = [
    lambda y: y, lambda y: y * 3 + 1, lambda y: fj.exp(y * 0.1), lambda y: fj.maximum(y, 0)]
FAMILIES: list[Callable[[Any, Any, Any], Any]] = [
    lambda a, w, b: fj.softmax(a, axis=-1),
    lambda a, w, b: fj.log_softmax(a, axis=-1),
    lambda a, w, b: fj.layer_norm(a, w, b),
    lambda a, w, b: fj.rms_norm(a, w),
    lambda a, w, b: a - a.mean(axis=-1, keepdims=True),
    lambda a, w, b: a / (fj.abs(a).sum(axis=-1, keepdims=True) + 1),
    lambda a, w, b: a * a.max(axis=-1, keepdims=True) + a.min(axis=-1, keepdims=True),
    lambda a, w, b: (a - a.mean(axis=-1, keepdims=True))
    / fj.sqrt(a.var(axis=-1, keepdims=True) + 1e-3),
    lambda a, w, b: fj.exp(a - fj.logsumexp(a, axis=-1, keepdims=True)),
]


def exp_condition(out: np.ndarray) -> float:
    """The condition number of the ``exp`` epilogue at its largest finite output: exp(z)'s
    relative error is |z| times z's (for the seed-84 find on the H200, exp(88.6) of a value 2
    ulp off is 2.1e-5 off: a ratio of 88.6 to the rtol of float32), so the comparison's
    rtol scales by max(1, max |z|) = max(1, max |log(out)|)."""
    with np.errstate(all="ignore"):
        z = np.abs(np.log(np.abs(out.astype(np.float64))))
    z = z[np.isfinite(z)]
    return max(1.0, float(z.max(initial=0.0)))


def _compiles_for_sm90(program: Callable[..., Any], *arrays_and_what: Any) -> int:
    """1 (and a line saying what) if a kernel of ``program`` fails to compile for sm_90."""
    from fusejit.codegen import emit_kernel
    from fusejit.runtime import forget_plans
    from fusejit.runtime.compile import compile_all
    *arrays, what = arrays_and_what
    forget_plans()
    with fj.using_backend("interpret"):  # (planned, never run)
        kernels = fj.plan(program(*[fj.asarray(a) for a in arrays])).program.kernels
    try:
        for k in kernels:
            for _ in compile_all(emit_kernel(k, None, "cuda"), 90, True):
                pass
    except Exception as exc:  # noqa: BLE001 (any compile failure is the finding)
        print(f"FAIL to compile: {what}: {type(exc).__name__}: {str(exc)[-300:]}", flush=True)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """Draw and check programs until the time is up."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="interpret", choices=("interpret", "cuda"))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cooperative", type=int, default=1, choices=(0, 1))
    parser.add_argument("--compile-only", action="store_true",
                        help="emit for cuda and compile for sm_90; run nothing")
    args = parser.parse_args(argv)
    from fusejit import runtime
    heuristics.COOPERATIVE_ROWS = bool(args.cooperative)
    rng = np.random.default_rng(args.seed)
    start, n, failures = time.time(), 0, 0
    while time.time() - start < args.seconds:
        if args.backend == "interpret" and not args.compile_only:
            heuristics.PERSISTENT_LIMIT["interpret"] = int(rng.choice([2, 4, 8, 16]))
            rows, cols = int(rng.integers(1, 6)), int(rng.integers(3, 220))
        else:
            rows, cols = int(rng.integers(1, 9)), int(rng.integers(1 << 16, 600_000))
        dtype = rng.choice([np.float32, np.float32, np.float16, np.float64])
        x = (rng.standard_normal((rows, cols)) * rng.choice([0.5, 2.0, 10.0])).astype(dtype)
        if rng.random() < 0.2:
            x[rng.integers(rows), rng.integers(cols)] = rng.choice([np.nan, np.inf, -np.inf])
        w = rng.standard_normal(cols).astype(dtype)
        b = rng.standard_normal(cols).astype(dtype)
        which = (int(rng.integers(len(FAMILIES))), int(rng.integers(len(PROLOGUES))),
                 int(rng.integers(len(EPILOGUES))))
        family, pro, epi = FAMILIES[which[0]], PROLOGUES[which[1]], EPILOGUES[which[2]]

        def program(a: Any, w: Any, b: Any, family: Any = family, pro: Any = pro,
                    epi: Any = epi) -> Any:
            return epi(family(pro(a), w, b))
        if args.compile_only:
            n += 1
            failures += _compiles_for_sm90(program, x, w, b, f"rows {rows} cols {cols} "
                                           f"{np.dtype(dtype).name} family/prologue/epilogue "
                                           f"{which}")
            continue
        with np.errstate(all="ignore"):
            with fj.using_backend("numpy"):
                want = program(fj.asarray(x), fj.asarray(w), fj.asarray(b)).numpy()
            runtime.forget_plans()  # (the persistent limit may have changed: plan afresh)
            with fj.using_backend(args.backend):
                got = program(fj.asarray(x), fj.asarray(w), fj.asarray(b)).numpy()
        n += 1
        # centring cancels: an output near 0 is off by ulps of what was subtracted, so the
        # absolute tolerance scales with the largest output (as the fuzzer's does for sums)
        rtol, atol = tolerance(want.dtype)
        finite = np.abs(want[np.isfinite(want)].astype(np.float64))
        atol = max(atol, rtol * float(finite.max(initial=0.0)))
        rtol *= exp_condition(want) if epi is EPILOGUES[2] else 1.0
        try:
            assert_matches_numpy(got, want, rtol=rtol, atol=atol)
        except AssertionError as exc:
            failures += 1
            print(f"FAIL rows {rows} cols {cols} {np.dtype(dtype).name} family/prologue/"
                  f"epilogue {which} limit {heuristics.PERSISTENT_LIMIT['interpret']}: "
                  f"{str(exc)[:300]}", flush=True)
    mode = "--compile-only (cuda sizes, sm_90)" if args.compile_only else f"--backend {args.backend}"
    print(f"fuzz_rows {mode} --seed {args.seed} --cooperative "
          f"{args.cooperative}: {n} programs in {time.time() - start:.0f} s, {failures} failures",
          flush=True)
    return int(failures > 0)


if __name__ == "__main__":
    sys.exit(main())
