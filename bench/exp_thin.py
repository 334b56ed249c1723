"""Experiment (tenth session): GEMMs of few rows (M <= 64), bound by reading B.

A product of M rows reads B once (K x N elements) and does 2*M flops per element of B: at
M = 2-16 it is a matrix-vector product whose time is B's bytes over the memory bandwidth.
The default tiles give such products one program per 16 x 64 tile (split-K only under half
a wave of tiles): 2x5000x10305 float16 ran 79 programs at about 1 TB/s (every peer the same)
and 5x4251x7665 TF32 67 programs at 0.51x of torch (20261209 u2 and u9). This times each
shape at its default tiles and at block_n 64 / 128 with K split 1-16 ways, beside cuBLAS
(cupy.matmul) in the same process, and reports the rate at which B (and A and the output)
move against a copy of B's size, so that a rule for the split (programs per SM) can be fitted.

Run on the GPU machine: ``python3 bench/exp_thin.py [--json FILE] [--only REGEX] [--configs REGEX]``
(GB/s for M <= 64, else TFLOP/s and us; ``CUPY_TF32=1`` times cuBLAS on the TF32 shapes); ``--dry``
checks it on the CPU (NumPy, the interpreter, sides cut to at most 64, one run each).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_matmul as bm  # noqa: E402

#: name -> (M, N, K, dtype, precision, B stored transposed, epilogue)
SHAPES: dict[str, tuple] = {
    "t1": (2, 5000, 10305, "float16", "ieee", False, "none"),  # 20261209 u2
    "t2": (5, 4251, 7665, "float32", "tf32", True, "none"),  # 20261209 u9
    "t3": (1, 8192, 8192, "float16", "ieee", False, "none"),
    "t4": (16, 4096, 14336, "float16", "ieee", True, "none"),
    "t5": (32, 11008, 4096, "float16", "ieee", True, "bias_relu"),
    "t6": (64, 8192, 8192, "float16", "ieee", False, "none"),
    "t7": (8, 4096, 4096, "float32", "ieee", False, "none"),
    "t8": (8, 256, 65536, "float16", "ieee", False, "none"),
    "t9": (48, 2000, 3000, "float16", "ieee", False, "residual"),
    "t10": (16, 6000, 2500, "float32", "tf32", False, "none"),
    "t11": (4, 30000, 2048, "float16", "ieee", True, "none"),
    # (not thin) float32 products of the 20261211 draw far behind cuBLAS: u13 TF32 0.13x
    # (191 us, split 9), u4 full precision 0.27x; x3 is x1 with its rows 16-byte aligned
    "x1": (224, 241, 9669, "float32", "tf32", False, "none"),
    "x2": (257, 3467, 585, "float32", "ieee", False, "residual"),
    "x3": (224, 256, 9664, "float32", "tf32", False, "none"),
    # x1, x2 and two more misaligned float32 products (eleventh session), each also read
    # through buffers whose rows are padded to 16 bytes ("p": what an alignment copy would
    # give the GEMM; the copy's own time is not in it)
    "x1p": (224, 241, 9669, "float32", "tf32", False, "none"),
    "x2p": (257, 3467, 585, "float32", "ieee", False, "residual"),
    "x4": (1000, 1001, 999, "float32", "ieee", False, "none"),
    "x4p": (1000, 1001, 999, "float32", "ieee", False, "none"),
    "x5": (3001, 2047, 1537, "float32", "tf32", True, "bias_relu"),
    "x5p": (3001, 2047, 1537, "float32", "tf32", True, "bias_relu"),
}

#: label -> the gemm attributes it sets (``programs=0`` always: none of these is persistent)
CONFIGS: dict[str, dict[str, int]] = {
    f"n{bn} s{split}": {"block_n": bn, "split_k": split}
    for bn in (64, 128) for split in (1, 2, 4, 8, 16)}
CONFIGS.update({f"m{m} n{n} s{split} w{w}": {"block_m": m, "block_n": n, "split_k": split,
                                             "num_warps": w}
                for m, n, split, w in ((32, 64, 8, 4), (32, 64, 16, 4), (32, 32, 16, 4),
                                       (64, 64, 4, 4), (64, 64, 9, 8), (128, 64, 4, 4),
                                       (128, 128, 1, 4), (128, 128, 1, 8), (128, 64, 1, 4),
                                       (128, 64, 1, 8), (64, 128, 1, 4), (256, 128, 1, 8))})


def _set(text: str, change: dict[str, int]) -> str:
    for name, value in {**change, "programs": 0}.items():
        text = re.sub(rf"\b{name}=\d+", f"{name}={value}", text)
    return text


def _padded(cp: Any, x: dict[str, Any]) -> dict[str, Any]:
    """``x`` with each 2-D operand and the residual copied into a buffer whose rows are
    padded to a multiple of 4 elements, under the key ``NAME_pad`` (the program slices it)."""
    out = dict(x)
    for name in ("a", "b", "bt", "r"):
        if name in x and x[name].ndim == 2 and x[name].shape[1] % 4:
            rows, cols = x[name].shape
            buf = cp.zeros((rows, -(-cols // 4) * 4), x[name].dtype)
            buf[:, :cols] = x[name]
            out[name + "_pad"] = buf
    return out


def _program(fj: Any, name: str, x: dict[str, Any]) -> Any:
    """bench_matmul's program of the case, reading padded buffers through slices."""
    if not any(key.endswith("_pad") for key in x):
        return bm._fusejit_program(fj, name, x)
    m, n, k, dtype, precision, epilogue = bm.CASES[name]

    def operand(key: str) -> Any:
        if key + "_pad" in x:
            return fj.asarray(x[key + "_pad"], name=key)[:, :x[key].shape[1]]
        return fj.asarray(x[key], name=key)
    a = operand("a")
    b = operand("bt").T if "bt" in x else operand("b")
    y = fj.matmul(a, b, precision=precision)
    named = {key: operand(key) if key == "r" else fj.asarray(x[key], name=key)
             for key in ("bias", "r") if key in x}
    return bm.epilogue_of(fj, epilogue, y, named)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="", help="regex over shape names")
    parser.add_argument("--configs", default="", help="regex over config labels (default: all)")
    args = parser.parse_args(argv)
    import numpy as np

    import fusejit as fj
    from fusejit.fuse import plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    if args.dry:
        cp: Any = np
        fj.set_backend("interpret")

        def timer(fn: Any) -> float:
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    else:
        import cupy as cp
        fj.set_backend("cuda")

        def timer(fn: Any) -> float:
            return bm._time_events(cp, fn, 0.3) / 1e3
    backend = current()
    rows: list[dict[str, Any]] = []
    if not args.dry:  # the copy rate of a buffer of B's size, for the ratios below
        src = cp.empty(1 << 27, cp.uint8)
        dst = cp.empty_like(src)
        copy_rate = 2 * src.nbytes / timer(lambda: cp.copyto(dst, src))
        print(f"copy: {copy_rate / 1e9:.0f} GB/s (128 MiB)", flush=True)
    else:
        copy_rate = 1.0
    for name, (m, n, k, dtype, precision, bt, epilogue) in SHAPES.items():
        if args.only and not re.search(args.only, name):
            continue
        if args.dry:
            n, k = min(n, 64 + n % 4), min(k, 1024 + k % 4)  # (rows as misaligned as here)
        bm.CASES[name] = (m, n, k, dtype, precision, epilogue)
        bm.EXTRA[name] = {"batch": 1, "b_t": bt, "b_shared": False}
        x = bm._inputs(cp, name)
        ref = bm._reference(cp, name, x)
        if name.endswith("p"):
            x = _padded(cp, x)
        y = _program(fj, name, x)
        text = fj.dump(y, fused=True)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        size = np.dtype(dtype).itemsize
        moved = size * (m * k + k * n + 2 * m * n)  # (A, B, the output and an epilogue's read)
        line = [f"{name:4s} {m}x{n}x{k} {dtype}{' tf32' if precision == 'tf32' else ''}"]
        cases: list[tuple[str, Any]] = [("default", None), *CONFIGS.items()]
        if args.dry and not args.configs:  # (the CPU check: the (block_n, split_k) sweep)
            cases = [c for c in cases if c[0] == "default" or len(c[1]) == 2]
        # (CuPy's TF32 is a process-wide switch: CUPY_TF32=1 times the TF32 shapes' cuBLAS)
        if not args.dry and (precision == "tf32") == (os.environ.get("CUPY_TF32") == "1"):
            cases.append(("cuBLAS", "cublas"))
        timer(lambda: None)  # (the first timing of a shape ran slow elsewhere: warm up)
        for label, cfg in cases:
            if args.configs and not re.search(args.configs, label):
                continue
            try:
                if cfg == "cublas":
                    run = partial(bm._cupy_product, cp, x, epilogue)
                    attrs: dict[str, Any] = {}
                else:
                    prog = fj.parse(text if cfg is None else _set(text, cfg))
                    plan = plan_for(prog)
                    run = partial(backend.execute, plan.program, buffers, plan)
                    gemm = next(kk for kk in plan.program.kernels if "block_m" in kk.attrs)
                    attrs = {a: v for a, v in gemm.attrs.items() if a != "kind"}
                out = run()
                err = bm._error(cp, out if cfg == "cublas" else out[0], ref)
                timer(run)
                seconds = timer(run)
                row = {"shape": name, "m": m, "n": n, "k": k, "dtype": dtype,
                       "precision": precision, "config": label, "attrs": attrs,
                       "us": seconds * 1e6, "gbs": moved / seconds / 1e9,
                       "of_copy": moved / seconds / copy_rate, "error": err,
                       "tflops": 2.0 * m * n * k / seconds / 1e12}
                rate = f"{row['gbs']:.0f}" if m <= 64 else \
                    f"{row['tflops']:.0f}T {row['us']:.0f}us"
                line.append(f"{label} {rate}" + (" ERR" if err > 1e-2 else ""))
            except Exception as exc:  # noqa: BLE001  (recorded; the sweep goes on)
                row = {"shape": name, "config": label, "failed": f"{type(exc).__name__}: {exc}"[:300]}
                line.append(f"{label} failed")
            rows.append(row)
        print(" | ".join(line), flush=True)
        del x, ref
        if not args.dry:
            cp.get_default_memory_pool().free_all_blocks()
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
