"""The fusejit tour: softmax, layer_norm and rms_norm on random data, checked against NumPy.

Run it with ``python -m fusejit demo`` (or ``python -c "import fusejit.demo as d;
raise SystemExit(d.main())"``). It realizes the three programs together on the
default backend (``fj.get_backend()``: ``cuda`` with a GPU, else ``numpy``;
``FUSEJIT_BACKEND`` overrides), prints the maximum absolute error of each
against NumPy with OK or FAIL, then the IR text (and the fused plan where the
fuser provides one). The exit status is 0 only when every check passes.
"""

from __future__ import annotations

import sys
from typing import TextIO

import numpy as np

import fusejit as fj

#: Accepted max abs error against NumPy, per result dtype (float32 here).
TOLERANCE = 1e-4


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """The same three programs written in plain NumPy."""
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return {
        "softmax": e / e.sum(axis=-1, keepdims=True),
        "layer_norm": (x - mu) / np.sqrt(var + 1e-5) * w + b,
        "rms_norm": x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w,
    }


def main(rows: int = 256, cols: int = 1024, seed: int = 0, out: TextIO | None = None) -> int:
    """Build, realize and check the demo programs; returns the exit status (0: all OK)."""
    out = out or sys.stdout
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal((rows, cols), dtype=np.float32)
    w_np = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    b_np = rng.uniform(-0.5, 0.5, cols).astype(np.float32)

    x = fj.asarray(x_np, name="x")
    w = fj.asarray(w_np, name="w")
    b = fj.asarray(b_np, name="b")
    results = {
        "softmax": fj.softmax(x, axis=-1),
        "layer_norm": fj.layer_norm(x, w, b, eps=1e-5),
        "rms_norm": fj.rms_norm(x, w, eps=1e-6),
    }
    print(f"fusejit {fj.__version__} demo: backend {fj.get_backend()!r}, x: float32[{rows},{cols}]",
          file=out)
    for name, t in results.items():
        print(f"  {name:<10} -> {t!r}", file=out)

    ir_text = fj.dump(*results.values()) if hasattr(fj, "dump") else None
    plan = fj.plan(*results.values()) if hasattr(fj, "plan") else None

    fj.realize(*results.values())  # one plan for all three outputs; x is read by each
    expected = _reference(x_np, w_np, b_np)
    failed = 0
    print("\ncheck against NumPy:", file=out)
    for name, t in results.items():
        got = t.numpy()
        ok = got.shape == expected[name].shape and got.dtype == expected[name].dtype
        err = float(np.max(np.abs(got.astype(np.float64) - expected[name]))) if ok else float("inf")
        ok = ok and err <= TOLERANCE
        failed += not ok
        print(f"  {name:<10} {str(got.dtype)}{list(got.shape)}  max abs error {err:.3e}  "
              f"{'OK' if ok else 'FAIL'}", file=out)
        print(f"  {'':<10} mean {got.mean():+.5f}  min {got.min():+.5f}  max {got.max():+.5f}",
              file=out)

    if ir_text is not None:
        print("\nIR (fj.dump, before fusion):", file=out)
        print(ir_text, file=out)
    if plan is not None:
        print(f"\nfused plan (fj.plan): {len(getattr(plan, 'kernels', []))} kernel(s)", file=out)
        print(plan, file=out)
    elif hasattr(fj, "dump"):
        try:
            fused = fj.dump(*[fj.softmax(x), fj.layer_norm(x, w, b), fj.rms_norm(x, w)], fused=True)
        except Exception as exc:  # noqa: BLE001  (fusion may not be wired yet: show why)
            print(f"\n(fused IR not available yet: {exc})", file=out)
        else:
            print("\nIR after fusion (fj.dump(..., fused=True)):", file=out)
            print(fused, file=out)

    print(f"\n{'all checks passed' if not failed else f'{failed} check(s) FAILED'}", file=out)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
