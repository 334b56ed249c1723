"""Full-precision float32 GEMMs with ptxas's registers capped at 96 a thread (issue 11).

Nsight Compute on the H100 (thirtieth session, ``bench/results/h100-s30-call2``) showed these
FMA kernels issuing on 73-82% of a scheduler's cycles, with their time following their
instruction count over that rate: the aligned 2048x576x8192 kernel, 350M instructions, 92
registers, 5 programs an SM, 435 us; the same shape with M = 2047 (edge tiles along M), the
same K loop (352M) but 128 registers under Triton 3.6, 4 programs an SM, 463 us; both rows
misaligned, 461M and 140 registers (3 an SM), 597 us. Capped at 96, 5 programs fit; Triton
3.6's ptxas spills nothing for the edge tile and 40 bytes for the misaligned one
(``bench/sass_gemm_loop.py --maxnreg 96``). This times each case's default plan uncapped,
capped (the launches of a float32 GEMM on 4 warps given ``max_registers``, patched in here)
and uncapped again (the drift between the two), as CUDA graphs of the plan's launches,
beside cuBLAS (by calls).

Found (H100, ``bench/results/h100-s30-call5``; calls 3 and 4 timed the uncapped build all
three times, the plan cache and the backend's kernels kept by IR text): capped, the edge tile
along M ran 463.9 against 468.4 us, the 4096^3 cases 1-3% faster, and every split-K case with
misaligned rows slower (2047x513x8191 666.1 against 604.9 us, 767x769x16383 818.8 against
650.1: ptxas spills there), the aligned 2048x576x8192 452.9 against 436.7. The edge tile's
loss is not its registers. No cap was made a rule.

Run on the GPU machine: ``python3 bench/exp_s30_maxnreg.py [--only REGEX] [--budget S]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_matmul import _error, _time_events  # noqa: E402
from exp_s23_gram import gemm_of, retiled_run  # noqa: E402
from exp_s25_check import time_graph  # noqa: E402

#: M x N x K, float32, B row-major
CASES = {
    "aligned 2048x576x8192": (2048, 576, 8192),
    "edge M 2047x576x8192": (2047, 576, 8192),
    "A 2048x576x8191": (2048, 576, 8191),
    "B 2048x577x8192": (2048, 577, 8192),
    "both 2047x513x8191": (2047, 513, 8191),
    "both 767x769x16383": (767, 769, 16383),
    "both 1279x1281x4095": (1279, 1281, 4095),
    "both 4095x4097x4093": (4095, 4097, 4093),
    "edge 4095x4096x4096": (4095, 4096, 4096),
    "aligned 4096x4096x4096": (4096, 4096, 4096),
}

CAPS = (("uncapped", 0), ("cap 96", 96), ("uncapped", 0))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--budget", type=float, default=150.0)
    args = p.parse_args(argv)
    deadline = time.time() + args.budget
    import cupy as cp

    import fusejit as fj
    from fusejit.runtime import current
    from fusejit.runtime import kernel_cache as kc
    fj.set_backend("cuda")
    backend = current()
    emitted_for = kc.emitted_for
    cap_now = [0]

    def capped(*args: Any, **kwargs: Any) -> Any:
        emitted = emitted_for(*args, **kwargs)
        fma = [launch for launch in emitted.launches
               if launch.fn_name.startswith("matmul_f32") and launch.num_warps == 4]
        if not cap_now[0] or not fma:
            return emitted
        return dataclasses.replace(emitted, launches=tuple(
            dataclasses.replace(launch, max_registers=cap_now[0]) if launch in fma else launch
            for launch in emitted.launches))
    kc.emitted_for = capped
    for name, (m, n, k) in CASES.items():
        if not re.search(args.only, name) or time.time() > deadline:
            continue
        a = cp.random.standard_normal((m, k), dtype=cp.float32)
        b = cp.random.standard_normal((k, n), dtype=cp.float32)
        ref = a.astype(cp.float64) @ b.astype(cp.float64)
        blas = _time_events(cp, lambda a=a, b=b: a @ b, 0.3)
        y, buffers, text = gemm_of(a, b)
        print(f"{name}: cuBLAS {blas * 1e3:.1f} us ({2 * m * n * k / blas / 1e9:.1f} TFLOP/s, "
              f"calls)", flush=True)
        for label, cap in CAPS:
            cap_now[0] = cap
            try:
                run, got = retiled_run(backend, text, (), buffers)  # (emitted afresh)
                ms = time_graph(cp, run)
                print(f"  {label:9s} {ms * 1e3:8.1f} us (x{blas / ms:.2f} cuBLAS), err "
                      f"{_error(cp, got, ref):.1e}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"  {label:9s} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
            finally:
                cap_now[0] = 0
        del a, b, ref, y, buffers
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
