"""Launches for Nsight Compute: full-precision float32 GEMMs whose rows are aligned or not.

Full-precision float32 products whose operands' rows are both 4-byte aligned run at 0.69-0.76x
of cuBLAS where their aligned twins run at 0.97 (2047x513x8191 602 us, 2048x576x8192 437, on
an H100), and neither padded rows, clamped edge loads nor unmasked K steps change that
(bench/results/h100-s28/call1). Run under ``ncu`` on the GPU machine (``bash
bench/gpu_s28.sh g``), this runs each case's plan once through ``realize`` (kernels named
``matmul_f32_MxN_partials``), so that the profile shows their instruction mix, issue stalls
and occupancy side by side.

``python3 bench/ncu_gemm.py``
"""

from __future__ import annotations

import sys

#: label: (M, N, K, row pitch of A, row pitch of B); a pitch past K (N) reads a view of
#: padded rows
CASES = {
    "aligned": (2048, 576, 8192, 8192, 576),
    "both misaligned": (2047, 513, 8191, 8191, 513),
    "both padded": (2047, 513, 8191, 8192, 516),
    "A misaligned": (2048, 576, 8191, 8191, 576),
    # (twenty-ninth session) one operand at a time, and the edge along M alone: in the SASS,
    # the same K loop as the aligned kernel's (bench/sass_gemm_loop.py), 7% slower on an H100
    "B misaligned": (2048, 577, 8192, 8192, 577),
    "edge M": (2047, 576, 8192, 8192, 576),
}


def main() -> int:
    import cupy as cp

    import fusejit as fj
    fj.set_backend("cuda")
    rng = cp.random.default_rng(0)
    for label, (m, n, k, pa, pb) in CASES.items():
        a = rng.standard_normal((m, pa), dtype=cp.float32)[:, :k]
        b = rng.standard_normal((k, pb), dtype=cp.float32)[:, :n]
        y = (fj.asarray(a) @ fj.asarray(b)).realize()
        cp.cuda.get_current_stream().synchronize()
        print(f"{label}: {m}x{n}x{k}, pitches {pa} and {pb}: ran "
              f"({float(abs(y.numpy()).max()):.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
