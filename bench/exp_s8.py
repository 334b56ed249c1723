"""Experiment (eighth session): what GEMM tiles cost when the tiles do not fill whole waves.

The unseen GEMM draws left float16 products of one to four waves of 128 x 256 tiles behind
cuBLAS (through torch.compile): 430x13368x5000 at 0.67x (4 x 53 = 212 tiles, two rounds of
132 programs of which the second is 61% full, and the fourth tile row 46 of 128 rows),
2609x3787x10946 at 0.64x (315 tiles: 2.4 waves), 1891x5000x10246 at 0.81x (300 tiles). This
times the GEMM kernel alone (its plan's launches, CUDA events) at a set of aligned shapes of
1-5 waves and the draws' weak cases, for each candidate tile shape (persistent with TMA loads,
one program per SM, as the default was at two waves or more, and one program per tile), so a
model of round count x tile cost can be fitted and checked.

Run on the GPU machine: ``python3 bench/exp_s8.py [--json FILE] [--only REGEX] [--configs REGEX]``; ``--dry``
checks it on the CPU (NumPy for CuPy, the interpreter, sides cut to at most 48, one wall-clock
run each; ``tests/test_bench_matmul.py`` runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_matmul as bm  # noqa: E402

#: name -> (M, N, K, B stored transposed, epilogue[, batch, B shared by the batch])
SHAPES: dict[str, tuple] = {
    # the draws' weak cases (20261208 u15, u10, u8, u2; 20261207 u2)
    "d8u15": (430, 13368, 5000, True, "residual"),
    "d8u10": (2609, 3787, 10946, False, "bias_relu"),
    "d8u8": (1891, 5000, 10246, False, "bias_gelu"),
    "d8u2": (4943, 15497, 2215, False, "bias_relu"),
    "d7u2": (7453, 3898, 5000, False, "none"),
    # aligned shapes of 1-5 waves of 128 x 256 tiles, partial tile rows or columns or neither
    "a1": (440, 13376, 5000, True, "none"),
    "a2": (2616, 3792, 8192, False, "none"),
    "a3": (1896, 5000, 8192, False, "none"),
    "a4": (1024, 8192, 8192, False, "none"),
    "a5": (2048, 8192, 4096, False, "none"),
    "a6": (3072, 4096, 4096, False, "none"),
    "a7": (600, 9000, 6000, False, "bias_relu"),
    "a8": (1500, 2800, 8000, False, "none"),
    "a9": (320, 16384, 4096, True, "none"),
    "a10": (5120, 5120, 2048, False, "bias_gelu"),
    "a11": (200, 12000, 8000, False, "none"),
    "a12": (3800, 3800, 3800, False, "none"),
    # one wave or less of 128 x 256 tiles (132 SMs): pointer loads (the default) against TMA
    "w1": (1024, 4096, 8192, False, "none"),          # 128 tiles
    "w2": (896, 3584, 8192, False, "bias_relu"),      # 98
    "w3": (640, 5120, 8192, True, "none"),            # 100
    "w4": (1536, 2560, 8192, False, "none"),          # 120
    "w5": (384, 8192, 8192, False, "residual"),       # 96
    "w6": (1200, 3000, 6000, False, "none"),          # 120
    "w7": (1000, 2000, 10000, True, "bias_gelu"),     # 64 -> halved to 128 x 128
    "w8": (300, 7000, 7000, False, "none"),           # 84
    # (ninth session) M from 129 to 255: 128x128 tiles by default (M < 256), against 128x256
    "m1": (200, 12000, 8000, False, "none"),
    "m2": (160, 16384, 8192, False, "none"),
    "m3": (250, 9000, 6000, True, "bias_relu"),
    "m4": (192, 8192, 4096, False, "none"),
    "m5": (136, 14000, 5000, False, "residual"),
    # batched: a weight shared by the batch (the batch folded into M) and both batched (3-D
    # TMA boxes)
    "b1": (257, 520, 1000, False, "none", 32, True),
    "b2": (257, 520, 1000, False, "none", 32, False),
    "b3": (1000, 1024, 512, True, "bias_relu", 8, True),
    "b4": (1000, 1024, 512, True, "bias_relu", 8, False),
    "b5": (3000, 4096, 1024, False, "none", 4, True),
    "b6": (3000, 4096, 1024, False, "none", 4, False),
    # (tenth session) short K: a few K steps per tile, the epilogue's loads and stores a large
    # part of each tile's time (20261209 u0 0.69x of torch.compile)
    "k1": (3911, 13805, 384, True, "residual", 16, False),
    "k2": (8192, 8192, 256, False, "none"),
    "k3": (4096, 16384, 128, False, "residual"),
    "k4": (16384, 4096, 512, True, "bias_relu"),
    "k5": (2048, 2048, 320, False, "residual", 8, False),
}

#: label -> (block_m, block_n, block_k, num_warps, num_stages, programs or 0: one per tile[,
#: stream_k]); "s": stream-K over the programs (ninth session)
CONFIGS = {
    "128x256 p": (128, 256, 64, 8, 3, 132),
    "128x256 s": (128, 256, 64, 8, 3, 132, 1),
    "128x128 s": (128, 128, 64, 8, 4, 132, 1),
    "128x256 t": (128, 256, 64, 8, 3, 0),
    "256x128 p": (256, 128, 64, 8, 3, 132),
    "128x128 p": (128, 128, 64, 8, 4, 132),
    "128x128 t": (128, 128, 64, 8, 4, 0),
    "64x256 p": (64, 256, 64, 4, 4, 132),
    "64x256 w8 p": (64, 256, 64, 8, 4, 132),
    "64x128 p": (64, 128, 64, 4, 4, 132),
    # two programs per SM (their shared memory fits twice): one's epilogue beside the other's
    # main loop
    "128x128 p2": (128, 128, 64, 8, 3, 264),
    "128x256 s2 p2": (128, 256, 64, 8, 2, 264),
    "128x128 w4 p2": (128, 128, 64, 4, 3, 264),
}


def _set(text: str, cfg: tuple[int, ...]) -> str:
    bm_, bn, bk, warps, stages, programs = cfg[:6]
    stream_k = cfg[6] if len(cfg) > 6 else 0
    for name, value in (("block_m", bm_), ("block_n", bn), ("block_k", bk), ("num_warps", warps),
                        ("num_stages", stages)):
        text = re.sub(rf"\b{name}=\d+", f"{name}={value}", text)
    extra = f" tma=1 programs={programs} stream_k={stream_k}" if programs else " tma=1 programs=0"
    return text.replace("kind=gemm", "kind=gemm" + extra, 1)


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
            return bm._time_events(cp, fn, 0.4) / 1e3
    backend = current()
    rows: list[dict[str, Any]] = []
    for name, (m, n, k, bt, epilogue, *batched) in SHAPES.items():
        if args.only and not re.search(args.only, name):
            continue
        if args.dry:
            m, n, k = min(m, 48), min(n, 48), min(k, 48)
        batch, shared = batched or (1, False)
        bm.CASES[name] = (m, n, k, "float16", "ieee", epilogue)
        bm.EXTRA[name] = {"batch": batch, "b_t": bt, "b_shared": shared}
        x = bm._inputs(cp, name)
        ref = bm._reference(cp, name, x)
        y = bm._fusejit_program(fj, name, x)
        text = fj.dump(y, fused=True)
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        flops = bm._flops(name)
        line = [f"{name:6s} {f'{batch} x ' if batch > 1 else ''}{m}x{n}x{k}"]
        warmed = False  # the first config timed per shape ran ~10% slow (clocks): time it twice
        for label, cfg in [("default", None), *CONFIGS.items()]:
            if args.configs and not re.search(args.configs, label):
                continue
            if args.dry and cfg is not None:
                cfg = (16, 16, 16, 4, 2, 2 if cfg[5] else 0, *cfg[6:])
            try:
                prog = fj.parse(text if cfg is None else _set(text, cfg))
                plan = plan_for(prog)
                run = partial(backend.execute, plan.program, buffers, plan)
                err = bm._error(cp, run()[0], ref)
                if not warmed:
                    timer(run)
                    warmed = True
                seconds = timer(run)
                gemm = next(kk for kk in plan.program.kernels if "block_m" in kk.attrs)
                tiles = -(-m // int(gemm.attrs["block_m"])) * -(-n // int(gemm.attrs["block_n"]))
                row = {"shape": name, "m": m, "n": n, "k": k, "config": label,
                       "attrs": {a: v for a, v in gemm.attrs.items() if a != "kind"},
                       "kernels": len(plan.program.kernels), "tiles": tiles, "us": seconds * 1e6,
                       "tflops": flops / seconds / 1e12, "error": err}
                line.append(f"{label} {row['tflops']:.0f}" + (" ERR" if err > 1e-2 else ""))
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
