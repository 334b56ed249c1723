"""Experiment (thirteenth session): a TF32 B transposed to K-major rows padded to 16 bytes.

The twelfth session's GEMM draw left ``5183x1023x15402`` (TF32, row-major B, a residual
epilogue) at 0.49x of torch.compile: K % 4 = 2, so ``rule_tf32_k_major_b`` refused to write
B K-major (its rows would not start on 16-byte boundaries), and B was copied N-major to
padded rows instead and multiplied as ``(B^T A^T)^T``. The rule now writes B^T with rows
``ceil(K/4)*4`` apart (a ``row_pitch`` pass). This times, for TF32 products of a row-major B
(most with K % 4 != 0, two with K % 4 == 0 as a check of the rule's H200 model on this card),
the whole plan (CUDA events) and each of its kernels alone under:

* ``default``: the plan as the fuser now makes it;
* ``no transpose``: the transposing pass made never to pay (as before this session for
  K % 4 != 0; for K % 4 == 0 the product as read N-major);
* ``transpose``: the pass made always to pay;
* ``transpose+align``: the pass always, and every misaligned operand copied
  (``FUSEJIT_GEMM_ALIGN=always``: A's rows too, so both operands load through TMA);
* ``tiles MxN``: the default plan with the GEMM's tiles edited in its fused text (8 warps);

and cuBLAS's bare TF32 product (``CUPY_TF32=1``) beside them.

Run on the GPU machine: ``python3 bench/exp_s13.py [--json FILE]``; ``--dry`` checks it on the
CPU (NumPy for CuPy, the interpreter, sides cut to at most 40; ``tests/test_bench_matmul.py``
runs it).
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

#: name -> (M, N, K, batch, epilogue); B row-major [K, N] in every one
SHAPES = {
    "u13": (5183, 1023, 15402, 1, "residual"),
    "s2": (1000, 1001, 999, 1, "none"),
    "s3": (2000, 2001, 2003, 1, "bias_relu"),
    "s7": (8192, 1023, 257, 1, "residual"),
    "s8": (4096, 4096, 4094, 1, "none"),
    "p1": (3000, 5000, 3003, 1, "bias_gelu"),
    "p2": (6000, 3000, 4001, 1, "residual"),
    "p3": (2048, 2048, 2050, 1, "none"),
    "p4": (8000, 1024, 8190, 1, "none"),
    "p5": (1000, 1000, 1001, 8, "none"),
    "k0": (4096, 4096, 4096, 1, "none"),
}

VARIANTS = ("default", "no transpose", "transpose", "transpose+align")
#: the default plan's fused text with the GEMM's tiles edited (``block_m`` x ``block_n``, 8
#: warps): the eleventh session's H100 sweep ran 3001x2047x1537 ``b.T`` at 134 us in 128x128
#: tiles against 181 in the default 256x128 (padded: 118 against 132)
TILES = {"tiles 128x128": (128, 128), "tiles 256x128": (256, 128),
         "tiles 128x256": (128, 256)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: NumPy for CuPy, the interpreter, small sides (a check)")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="", help="comma-separated shape names")
    args = parser.parse_args(argv)
    os.environ["CUPY_TF32"] = "1"  # (read by CuPy: before it is imported)

    import fusejit as fj
    from fusejit.fuse import cost, plan_for
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, forget_plans
    cp, event_time = backend_and_timer(args.dry)
    backend = current()
    rate, launch = cost.TRANSPOSE_BYTES_PER_S, cost.EXTRA_LAUNCH_S
    rows: list[dict[str, Any]] = []
    for name, (m, n, k, batch, epilogue) in SHAPES.items():
        if args.only and name not in args.only.split(","):
            continue
        if args.dry:
            m, n, k, batch = min(m, 40), min(n, 40), min(k, 40) | 1, min(batch, 2)
        bm.CASES[name] = (m, n, k, "float32", "tf32", epilogue)
        bm.EXTRA[name] = {"batch": batch, "b_t": False}
        x = bm._inputs(cp, name)
        ref = bm._reference(cp, name, x)
        flops = bm._flops(name)
        cublas = event_time(lambda a=x["a"], b=x["b"]: cp.matmul(a, b)) * 1e6
        print(f"{name:4s} {batch}x{m}x{n}x{k} {epilogue}: cuBLAS bare {cublas:8.1f} us "
              f"{flops / cublas / 1e6:5.0f} TFLOP/s", flush=True)
        for variant in (*VARIANTS, *TILES):
            forced = variant.startswith("transpose")
            # (the tiles variants edit the default plan: its transposing pass as it decides; the
            # fourteenth session's call ran them with the pass off, as "no transpose")
            cost.TRANSPOSE_BYTES_PER_S = 1e30 if forced else 1.0 if variant == "no transpose" \
                else rate
            cost.EXTRA_LAUNCH_S = 0.0 if forced else launch
            os.environ["FUSEJIT_GEMM_ALIGN"] = "always" if variant == "transpose+align" else "1"
            forget_plans()
            try:
                y = bm._fusejit_program(fj, name, x)
                plan = fj.plan(y)
                buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
                if variant in TILES:
                    bm_, bn_ = TILES[variant] if not args.dry else (16, 32)
                    text = fj.dump(y, fused=True)
                    for key, value in (("block_m", bm_), ("block_n", bn_), ("num_warps", 8)):
                        text = re.sub(rf"(kind=gemm[^\n]*\b{key}=)\d+", rf"\g<1>{value}", text)
                    plan = plan_for(fj.parse(text))
                prog = plan.program
                err = bm._error(cp, backend.execute(prog, buffers, plan)[0], ref)
                parts = [(kernel.name, round(us, 1)) for kernel, us, _ in
                         kernel_times(backend, prog, buffers, event_time)]
                total = event_time(lambda p=prog, b=buffers, pl=plan: backend.execute(p, b, pl))
                total *= 1e6
                row = {"shape": name, "m": m, "n": n, "k": k, "batch": batch,
                       "variant": variant, "us": total, "tflops": flops / total / 1e6,
                       "error": err, "kernels": parts, "cublas_us": cublas}
                print(f"{name:4s} {variant:16s} plan {total:8.1f} us {flops / total / 1e6:5.0f} "
                      f"TFLOP/s err {err:.1e} | "
                      + " | ".join(f"{kn} {us}" for kn, us in parts), flush=True)
            except Exception as exc:  # noqa: BLE001  (recorded; the sweep goes on)
                row = {"shape": name, "variant": variant,
                       "failed": f"{type(exc).__name__}: {exc}"[:300]}
                print(f"{name:4s} {variant:16s} failed: {row['failed']}", flush=True)
            rows.append(row)
        cost.TRANSPOSE_BYTES_PER_S, cost.EXTRA_LAUNCH_S = rate, launch
        del x, ref
        if not args.dry:
            cp.get_default_memory_pool().free_all_blocks()
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    os.environ.pop("FUSEJIT_GEMM_ALIGN", None)
    forget_plans()
    return 0


if __name__ == "__main__":
    sys.exit(main())
