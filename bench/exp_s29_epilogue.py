"""GEMM epilogues on slices of the tile's columns, timed: what the spill fallback gives (issue 11).

The twenty-ninth session (no GPU) found float16 and TF32 GEMMs whose 128 x 256 tiles spill
registers in their epilogue where it loads and stores one element at a time (rows not 16-byte
aligned, a residual): ptxas -v for sm_90a, bytes a thread, epilogue whole / in 4 slices
(``bench/results/cpu-s29/spill_audit_as_run_*.txt``). The ``cuda`` backend now emits such a
kernel again with ``epilogue_split=4`` (``cuda_backend._epilogue_split_if_spilled``). This
times each case's GEMM kernel with the epilogue written whole (``epilogue_split=1``, which the
fallback leaves alone), in 2 and in 4 slices, and the default (the backend's choice), as CUDA
graphs of the plan's launches, beside cuBLAS's bare product (CuPy) for scale. The cases are
draws of ``bench_matmul.py --unseen`` (the first draw of the short-K batched residual ran at
0.69x of torch.compile on the H100) and two that do not spill (the slices' cost where they
are not needed).

Run on the GPU machine: ``python3 bench/exp_s29_epilogue.py [--only REGEX] [--budget S]``;
``--dry`` (any machine): plan each variant and emit its GEMM for ``cuda``, nothing timed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_matmul as bm  # noqa: E402
from exp_s25_check import time_graph  # noqa: E402

#: (seed:count of bench_matmul.draw_unseen, the draw's case name) or a case of bm.CASES
CASES = [
    ("20261209:16", "u0"),   # f16 16 x 3911x13805x384 b.T residual: 368 B a thread -> 0
    ("20261301:16", "u0"),   # f16 4 x 701x3342x127 bias_gelu: 272 -> 0
    ("20261301:16", "u1"),   # f16 3239x7990x15853 residual: 48 -> 0
    ("20261212:16", "u5"),   # f16 641x6470x164 b.T residual: 44 -> 0
    ("20261212:16", "u13"),  # tf32 5183x1023x15402 residual: 560 -> 0
    ("20261209:16", "u3"),   # tf32 5027x1023x100 b.T bias_gelu: 564 -> 0
    (None, "f16 8192^3 relu(ab+bias)"),  # no spill: the slices' cost where not needed
    (None, "f16 16384x1024x4096 relu(ab+bias)"),
]


def variants() -> list[tuple[str, str]]:
    """(label, the edit of the gemm kernel's attributes): whole, slices, the default."""
    return [("whole", " epilogue_split=1"), ("2 slices", " epilogue_split=2"),
            ("4 slices", " epilogue_split=4"), ("default", "")]


def case_inputs(cp: Any, seed: str | None, name: str) -> tuple[str, str, dict[str, Any]]:
    """The case's label, its key in ``bm.CASES`` and inputs (drawn as ``bench_matmul``
    draws them)."""
    if seed:  # (a draw names its cases "u0 f16 16x3911x13805x384 b.T residual", ...)
        s, count = (int(p) for p in seed.split(":"))
        drawn = bm.draw_unseen(s, count)
        bm.CASES.update(drawn)
        name = next(case for case in drawn if case.split()[0] == name)
    return (f"{seed} {name}" if seed else name), name, bm._inputs(cp, name)


def dry_run(only: str) -> int:
    """Each case's variants planned (their text IR verified) and their GEMM emitted for
    ``cuda``, on zeros: the summary line of the epilogue says how it is sliced."""
    from types import SimpleNamespace

    import numpy as np

    import fusejit as fj
    from fusejit.codegen import emit_kernel
    from fusejit.fuse import plan_for
    zeros = SimpleNamespace(float32=np.float32, random=SimpleNamespace(
        default_rng=lambda seed: SimpleNamespace(
            standard_normal=lambda shape, dtype: np.zeros(shape, dtype))))
    fj.set_backend("numpy")
    for seed, name in CASES:
        label, key, x = case_inputs(zeros, seed, name)
        if not re.search(only, label):
            continue
        text = fj.dump(bm._fusejit_program(fj, key, x), fused=True)
        for tag, edit in variants():
            plan = plan_for(fj.parse(text.replace("kind=gemm", "kind=gemm" + edit, 1)))
            gemm = next(k for k in plan.program.kernels if k.kind == "gemm")
            emitted = emit_kernel(gemm, None, "cuda")
            how = next((line.strip() for line in emitted.tiling if "epilogue in" in line),
                       "epilogue whole")
            print(f"{label}: {tag}: {how}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=240.0)
    p.add_argument("--dry", action="store_true", help="plan and emit only (no GPU)")
    args = p.parse_args(argv)
    if args.dry:
        return dry_run(args.only)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.fuse import plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    fj.set_backend("cuda")
    backend = current()
    for seed, name in CASES:
        if time.time() > deadline:
            break
        label, key, x = case_inputs(cp, seed, name)
        if not re.search(args.only, label):
            continue
        y = bm._fusejit_program(fj, key, x)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        text = fj.dump(y, fused=True)
        a = x["a"]
        b = x["bt"].swapaxes(-1, -2) if "bt" in x else x["b"]
        blas = bm._time_events(cp, lambda a=a, b=b: a @ b, 0.3)
        print(f"{label}: cuBLAS bare {blas * 1e3:.1f} us", flush=True)
        reference = None
        for tag, edit in variants():
            plan = plan_for(fj.parse(text.replace("kind=gemm", "kind=gemm" + edit, 1)))

            def run(plan: Any = plan, buffers: list[Any] = buffers) -> Any:
                return backend.execute(plan.program, buffers, plan)
            try:
                got = run()[0]
                ms = time_graph(cp, run)
            except Exception as exc:  # noqa: BLE001 (reported; the other variants go on)
                print(f"  {tag:9s} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
                continue
            if reference is None:
                reference = got
                same = "reference"
            else:
                diff = float(cp.abs(got.astype(cp.float32) - reference.astype(cp.float32)).max())
                same = f"max |diff| from whole {diff:.2e}"
            print(f"  {tag:9s} {ms * 1e3:9.1f} us (x{blas / ms:.2f} of cuBLAS bare), {same}",
                  flush=True)
        del x, y
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
