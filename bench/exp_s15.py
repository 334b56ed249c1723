"""Experiment (fifteenth session): the float32 GEMM kernel's tiles, TF32 and full precision.

The GEMM issue's float32 targets are 0.9x of jax.jit in TF32 and 0.8x of cuBLAS in full
precision. The last timed figures at 4096^3: TF32 265 TFLOP/s against jax.jit's 351 (H200,
the plan with its transposing pass), 456 us against cuBLAS's 357 on an H100; full precision
42 against 51 (H200), and 6410x1550x3337 0.79x of cuBLAS (H100). No sweep of the float32
tiles beyond block_m x block_n was ever timed, so this times the GEMM kernel alone (CUDA
events; B stored [N, K] and multiplied as ``bt.T``, so both operands are K-major and no
transposing pass runs) with the tile attributes edited in the fused text: tiles, block_k,
warps, stages and the persistent form (``programs=``), against cuBLAS's bare product of the
same operands (``CUPY_TF32=1`` for TF32, read by CuPy at import: one precision a process).

``--precision ieee-row`` (third call): full precision with B row-major, as the GEMM reads it
once ``rule_fma_n_major_b`` has written a K-major B so, at the shapes that ran at 0.40-0.65x
of cuBLAS.

``--precision ieee-small`` (sixteenth session): full precision with B row-major where the tiles
under-fill the GPU (the sixteenth session's first call, H100, whole plans: 128x4096x4096 at
0.60x of cuBLAS, 512x4096x4096 and 2048x512x8192 at 0.79x): split K, smaller tiles, fewer
warps, so that more programs share each SM's FMA units.

``--precision ieee-epi`` (sixteenth session): full precision, B row-major, the GEMM kernel with
each epilogue at 6400x1552x3336 (the second call timed the plan with bias and GELU at 1860 us
where the GEMM alone had run 1513 in the fifteenth session), at the default tiles and two others.

Run on the GPU machine: ``python3 bench/exp_s15.py --precision P [--json FILE]`` (P one of
tf32, ieee, ieee-row, ieee-small, ieee-epi);
``--dry`` checks it on the CPU (NumPy for CuPy, the interpreter, sides cut to at most 64;
``tests/test_bench_matmul.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_matmul as bm  # noqa: E402
from exp_s7b import backend_and_timer, kernel_times  # noqa: E402

#: precision -> name -> (M, N, K)
SHAPES = {
    "tf32": {"k0": (4096, 4096, 4096), "k1": (8192, 4096, 4096), "k2": (6000, 3000, 4000),
             "k3": (2048, 2048, 8192)},
    "ieee": {"k0": (4096, 4096, 4096), "k4": (6400, 1552, 3336), "k5": (2048, 2048, 2048)},
    # (third call) B row-major, as the full-precision GEMM reads it (``rule_fma_n_major_b``
    # writes a K-major B so first); shapes where the third call's plans ran at 0.40-0.65x of
    # cuBLAS
    "ieee-row": {"k0": (4096, 4096, 4096), "k4": (6400, 1552, 3336), "k6": (512, 4096, 4096),
                 "k7": (2048, 512, 8192), "k8": (1000, 3000, 700)},
    "ieee-epi": {"e0 none": (6400, 1552, 3336, "none"), "e1 bias_gelu": (6400, 1552, 3336, "bias_gelu"),
                 "e2 bias_relu": (6400, 1552, 3336, "bias_relu"),
                 "e3 residual": (6400, 1552, 3336, "residual")},
    "ieee-small": {"s1": (128, 4096, 4096), "s2": (256, 4096, 4096), "s3": (512, 4096, 4096),
                   "s4": (2048, 512, 8192), "s5": (64, 2048, 8192),
                   # (third call) 0.47x of cuBLAS in the second call's exp_s7b (967 us as read,
                   # 951 through padded rows; cuBLAS 456): 288 tiles, the ninth column of
                   # tiles one column wide
                   "s6": (2047, 513, 8191)},
}

#: precision -> variant -> attributes edited into the gemm kernel (the rest as planned)
VARIANTS: dict[str, dict[str, dict[str, int]]] = {
    "tf32": {
        "default": {},
        "256x128x32 s4": {"block_m": 256, "block_n": 128, "block_k": 32, "num_stages": 4},
        "128x256x32 s3": {"block_m": 128, "block_n": 256, "block_k": 32, "num_stages": 3},
        "128x256x32 s4": {"block_m": 128, "block_n": 256, "block_k": 32, "num_stages": 4},
        "256x128x64 s2": {"block_m": 256, "block_n": 128, "block_k": 64, "num_stages": 2},
        "128x128x64 s3": {"block_m": 128, "block_n": 128, "block_k": 64, "num_stages": 3},
        "128x128x32 s4": {"block_m": 128, "block_n": 128, "block_k": 32, "num_stages": 4},
        "128x128x32 s4 w4": {"block_m": 128, "block_n": 128, "block_k": 32, "num_stages": 4,
                             "num_warps": 4},
        "256x128x32 s3 persistent": {"block_m": 256, "block_n": 128, "block_k": 32,
                                     "num_stages": 3, "programs": 132},
        "256x128x32 s4 persistent": {"block_m": 256, "block_n": 128, "block_k": 32,
                                     "num_stages": 4, "programs": 132},
        "256x128x32 s3 group16": {"block_m": 256, "block_n": 128, "block_k": 32,
                                  "num_stages": 3, "group_m": 16},
    },
    "ieee": {
        "default": {},
        "128x128x32 w4 s2": {"num_stages": 2},
        "128x128x32 w4 s4": {"num_stages": 4},
        "128x128x16 w4 s3": {"block_k": 16},
        "128x128x16 w4 s4": {"block_k": 16, "num_stages": 4},
        "128x128x32 w8 s3": {"num_warps": 8},
        "128x64x32 w4 s3": {"block_n": 64},
        "64x128x32 w4 s3": {"block_m": 64},
        "128x128x64 w4 s2": {"block_k": 64, "num_stages": 2},
        "64x64x32 w4 s4": {"block_m": 64, "block_n": 64, "num_stages": 4},
    },
    "ieee-row": {
        "default": {},
        "128x128x16 w4 s3": {"block_m": 128, "block_n": 128, "block_k": 16, "num_stages": 3},
        "128x128x16 w4 s4": {"block_m": 128, "block_n": 128, "block_k": 16, "num_stages": 4},
        "128x128x32 w8 s3": {"block_m": 128, "block_n": 128, "num_warps": 8},
        "128x64x32 w4 s3": {"block_m": 128, "block_n": 64, "num_warps": 4},
        "64x128x32 w4 s3": {"block_m": 64, "block_n": 128, "num_warps": 4},
        "64x64x32 w4 s3": {"block_m": 64, "block_n": 64, "num_warps": 4},
        "128x64x16 w4 s4": {"block_m": 128, "block_n": 64, "block_k": 16, "num_stages": 4,
                            "num_warps": 4},
        "64x64x16 w2 s4": {"block_m": 64, "block_n": 64, "block_k": 16, "num_stages": 4,
                           "num_warps": 2},
        "128x128x32 w4 s2": {"block_m": 128, "block_n": 128, "num_stages": 2},
    },
    "ieee-epi": {
        "default": {},
        "relay": {"relay": 1},
        "128x64x32 w8": {"block_m": 128, "block_n": 64, "num_warps": 8},
        "64x64x32 w4 s4": {"num_stages": 4},
    },
    "ieee-small": {
        "default": {},
        "split 2": {"split_k": 2},
        "split 4": {"split_k": 4},
        "32x64x32 w2": {"block_m": 32, "block_n": 64, "num_warps": 2},
        "32x64x32 w4": {"block_m": 32, "block_n": 64, "num_warps": 4},
        "64x32x32 w2": {"block_m": 64, "block_n": 32, "num_warps": 2},
        "64x64x32 w2": {"num_warps": 2},
        "32x64x32 w2 split 2": {"block_m": 32, "block_n": 64, "num_warps": 2, "split_k": 2},
        "64x64x16 w4 s4": {"block_k": 16, "num_stages": 4},
    },
}


def edit_gemm(text: str, change: dict[str, int]) -> str:
    """``text`` (a fused program) with the gemm kernel's attributes in ``change`` set (added
    where the kernel line lacks them)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "kind=gemm" not in line:
            continue
        for key, value in change.items():
            if re.search(rf"\b{key}=\d+", line):
                line = re.sub(rf"\b{key}=\d+", f"{key}={value}", line)
            else:
                line = line.replace("kind=gemm", f"kind=gemm {key}={value}", 1)
        lines[i] = line
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: NumPy for CuPy, the interpreter, small sides (a check)")
    parser.add_argument("--precision", choices=("tf32", "ieee", "ieee-row", "ieee-small",
                                                "ieee-epi"),
                        default="tf32")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="", help="regex over shape and variant names")
    args = parser.parse_args(argv)
    if args.precision == "tf32":
        os.environ["CUPY_TF32"] = "1"  # (read by CuPy: before it is imported)

    import fusejit as fj
    from fusejit.fuse import plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    cp, event_time = backend_and_timer(args.dry)
    backend = current()
    rows: list[dict[str, Any]] = []
    for name, (m, n, k, *epilogue) in SHAPES[args.precision].items():
        if args.dry:
            m, n, k = min(m, 64), min(n, 64), min(k, 64)
        case = f"{name} {args.precision}"
        precision = args.precision.split("-")[0]
        bm.CASES[case] = (m, n, k, "float32", precision, epilogue[0] if epilogue else "none")
        bm.EXTRA[case] = {"batch": 1, "b_t": args.precision in ("tf32", "ieee")}
        x = bm._inputs(cp, case)
        ref = bm._reference(cp, case, x)
        flops = bm._flops(case)
        operand_b = bm.operand_b(cp, x)
        cublas = event_time(lambda a=x["a"], b=operand_b: cp.matmul(a, b)) * 1e6
        print(f"{case} {m}x{n}x{k}: cuBLAS bare {cublas:8.1f} us "
              f"{flops / cublas / 1e6:5.0f} TFLOP/s", flush=True)
        forget_plans()
        y = bm._fusejit_program(fj, case, x)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        text = fj.dump(y, fused=True)
        for variant, change in VARIANTS[args.precision].items():
            if args.only and not re.search(args.only, f"{case} {variant}"):
                continue
            if args.dry:  # tiles the small sides can take
                change = {key: min(v, 32) if key.startswith("block") else
                          min(v, 2) if key == "split_k" else v
                          for key, v in change.items() if key != "programs"}
            try:
                plan = plan_for(fj.parse(edit_gemm(text, change)))
                prog = plan.program
                err = bm._error(cp, backend.execute(prog, buffers, plan)[0], ref)
                # (each kernel on its own arguments: the first call ran the GEMM on the plan's
                # inputs in their order, not the kernel's, which read out of bounds where the
                # two operands' shapes differ: an illegal address at 6000x3000x4000)
                gemm, us = next((kernel, t) for kernel, t, _ in
                                kernel_times(backend, prog, buffers, event_time)
                                if kernel.kind == "gemm")
                row = {"shape": name, "m": m, "n": n, "k": k, "precision": args.precision,
                       "variant": variant, "attrs": dict(gemm.attrs), "us": us,
                       "tflops": flops / us / 1e6, "cublas_us": cublas, "error": err}
                print(f"{case} {variant:26s} {us:8.1f} us {flops / us / 1e6:5.0f} TFLOP/s "
                      f"({cublas / us:4.2f}x cuBLAS) err {err:.1e}", flush=True)
            except Exception as exc:  # noqa: BLE001  (recorded; the sweep goes on)
                row = {"shape": name, "variant": variant,
                       "failed": f"{type(exc).__name__}: {exc}"[:300]}
                print(f"{case} {variant:26s} failed: {row['failed']}", flush=True)
            rows.append(row)
        del x, ref, y, buffers
        if not args.dry:
            cp.get_default_memory_pool().free_all_blocks()
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    forget_plans()
    return 0


if __name__ == "__main__":
    sys.exit(main())
