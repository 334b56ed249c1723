"""Why is the sin-heavy workload (six rounds of ``sin(y) * 1.5 + cos(y) * 0.5``, 2**26
float32) slower than torch.compile's kernel? (issue 9's compute-heavy row.)

Run on the GPU machine: ``python3 bench/exp_sin.py [--inductor]`` (``--inductor``: first
torch.compile's kernel of the same program, timed, and its Triton source).
Times, with CUDA events, fusejit's plan and hand-written Triton kernels of the same math
that differ in one thing each:
``tl.sin`` against libdevice ``sin``, FMA contraction on or off (fusejit compiles with it off,
so that ``a * b + c`` rounds as NumPy's), constants against scalar arguments, and the block
size per program. The hand-written kernels go through Triton's own launcher, which needs
torch (this script only: the package never imports it).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import triton
import triton.language as tl

try:
    from triton.language.extra.cuda import libdevice
except ImportError:  # older layouts
    from triton.language.extra import libdevice


@triton.jit
def sin_heavy(x_ptr, y_ptr, n, a, b, block: tl.constexpr, libdevice_math: tl.constexpr,
              scalar_args: tl.constexpr):
    """Six rounds of ``sin(y) * a + cos(y) * b``: ``tl.sin``/``tl.cos`` or libdevice's, and
    1.5 / 0.5 as constants or as the scalar arguments ``a`` and ``b`` (as fusejit passes them)."""
    offs = tl.program_id(0) * block + tl.arange(0, block)
    mask = offs < n
    y = tl.load(x_ptr + offs, mask=mask)
    ka = a if scalar_args else 1.5
    kb = b if scalar_args else 0.5
    for _ in tl.static_range(6):
        if libdevice_math:
            y = libdevice.sin(y) * ka + libdevice.cos(y) * kb
        else:
            y = tl.sin(y) * ka + tl.cos(y) * kb
    tl.store(y_ptr + offs, y, mask=mask)


def main() -> None:
    """Print one line per variant."""
    import cupy as cp

    import fusejit as fj
    fj.set_backend("cuda")
    n = 1 << 26
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.empty_like(x)

    def events(fn, reps: int = 20) -> float:
        fn()
        cp.cuda.get_current_stream().synchronize()
        s, e = cp.cuda.Event(), cp.cuda.Event()
        best = float("inf")
        for _ in range(5):
            s.record()
            for _ in range(reps):
                fn()
            e.record()
            e.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(s, e) / reps * 1e3)
        return best

    tx = fj.asarray(x)
    t = tx
    for _ in range(6):
        t = fj.sin(t) * 1.5 + fj.cos(t) * 0.5
    plan = fj.plan(t)
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current
    _, leaves = structural_key([t._node])
    bufs = [leaf.buffer for leaf in leaves]
    backend = current()
    ref = backend.execute(plan.program, bufs, plan)[0]
    print(f"fusejit plan: {events(lambda: backend.execute(plan.program, bufs, plan)):8.1f} us",
          flush=True)

    # Triton's own launcher (used for the hand-written kernels only) takes torch tensors and
    # torch's current stream: both views of the same CuPy buffers, on the default stream
    import torch
    x, y = torch.from_dlpack(x), torch.from_dlpack(y)
    ref = torch.from_dlpack(ref)

    if "--inductor" in sys.argv:  # torch.compile's kernel: its time and its source
        import torch._inductor.utils as inductor_utils

        def torch_fn(v: Any) -> Any:
            for _ in range(6):
                v = torch.sin(v) * 1.5 + torch.cos(v) * 0.5
            return v
        compiled = torch.compile(torch_fn, dynamic=False)
        out, codes = inductor_utils.run_and_get_code(compiled, x)
        torch.cuda.synchronize()
        print(f"torch.compile: {events(lambda: compiled(x)):8.1f} us, max diff to fusejit "
              f"{float((out - ref).abs().max()):.1e}", flush=True)
        for code in codes:
            start = code.find("@triton.jit")
            print(code[max(0, start - 600):start + 4000] if start >= 0 else code[:3000])

    # (measured before: tl.sin and libdevice's sin are the same code; scalar arguments and
    # constants time alike; FMA contraction saves 1-2%: elements per thread are what matter)
    for name, lib, args in (("tl.sin", False, False),):
        for block, warps in ((128, 4), (256, 8), (256, 4), (512, 8), (128, 2), (256, 2),
                             (512, 4), (1024, 8), (1024, 4)):
            for fuse in (False,):
                grid = (triton.cdiv(n, block),)
                t0 = time.perf_counter()

                def run(lib=lib, args=args, block=block, warps=warps, fuse=fuse,
                        grid=grid) -> None:
                    sin_heavy[grid](x, y, n, 1.5, 0.5, block=block, libdevice_math=lib,
                                    scalar_args=args, num_warps=warps, enable_fp_fusion=fuse)
                try:
                    us = events(run)
                    err = float((y - ref).abs().max())
                    print(f"{name:24s} block {block:5d} warps {warps} fp_fusion {fuse!s:5s}: "
                          f"{us:8.1f} us  max diff {err:.1e}  (compile {time.perf_counter() - t0:.1f} s)",
                          flush=True)
                except Exception as exc:  # noqa: BLE001
                    print(f"{name} {block} {warps} {fuse}: failed {type(exc).__name__}: {exc}"[:300])


if __name__ == "__main__":
    main()
