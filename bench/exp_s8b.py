"""Experiment (eighth session): a float16 copy to rows padded to 16 bytes, at the bandwidth?

``bench/exp_s7b.py`` timed the GEMM alignment copies (``row_pitch`` pointwise kernels) at
0.8 TB/s for rows 2-byte aligned (10946x3787: 209 us) and 1.5 TB/s for rows 4-byte aligned,
where a plain copy runs near 3.6 TB/s: the copies cost as much as the GEMM gains. CuPy's own
``view[...] = x`` ran at 0.8 TB/s too (first attempt of this script, whose Triton kernels
failed to launch). This times hand-written Triton variants of the same copy (not fusejit's
emitter: the question is which shape of kernel the emitter should write) beside CuPy's:

- ``tile2d``: what the emitter wrote before ``pitched_copy``, 2-D tiles over (rows, columns).
- ``flat_out``: 1-D blocks over the padded output (Inductor's form of a pad): each store is a
  whole aligned vector, each load a gather of ``row * N + column`` masked to the row.
- ``flat_in``: 1-D blocks over the input (vector loads), stores to ``row * P + column``.

fusejit's own copy (8-byte words, ``pointwise.PointwiseEmitter.pitched_copy``) is timed by exp_s7b.py.
Run on the GPU machine: ``python3 bench/exp_s8b.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import triton
import triton.language as tl


@triton.jit
def tile2d(src, dst, rows, n, pitch, tm: tl.constexpr, tn: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(n, tn)
    r = (pid // tiles_n) * tm + tl.arange(0, tm)[:, None]
    c = (pid % tiles_n) * tn + tl.arange(0, tn)[None, :]
    mask = (r < rows) & (c < n)
    v = tl.load(src + r * n + c, mask=mask)
    tl.store(dst + r * pitch + c, v, mask=mask)


@triton.jit
def flat_out(src, dst, total, n, pitch, block: tl.constexpr):
    f = tl.program_id(0).to(tl.int64) * block + tl.arange(0, block)
    r = f // pitch
    c = f % pitch
    v = tl.load(src + r * n + c, mask=(c < n) & (f < total), other=0)
    tl.store(dst + f, v, mask=f < total)


@triton.jit
def flat_in(src, dst, total, n, pitch, block: tl.constexpr):
    f = tl.program_id(0).to(tl.int64) * block + tl.arange(0, block)
    mask = f < total
    v = tl.load(src + f, mask=mask)
    r = f // n
    tl.store(dst + f + r * (pitch - n), v, mask=mask)


class _Ptr:
    """A CuPy array as Triton's launcher takes a buffer (it asks for ``data_ptr()``)."""

    def __init__(self, a: Any) -> None:
        self.a = a
        self.dtype = a.dtype

    def data_ptr(self) -> int:
        return int(self.a.data.ptr)


def _variants(cp: Any, x: Any, out: Any) -> list[tuple[str, Callable[[], Any]]]:
    rows, n = x.shape
    pitch = out.shape[1]
    view = out[:, :n]
    xp, op = _Ptr(x), _Ptr(out)

    def cupy_pad() -> None:
        view[...] = x
    variants: list[tuple[str, Callable[[], Any]]] = [("cupy view[...] = x", cupy_pad)]
    for tm, tn, w in ((64, 64, 4), (32, 128, 4), (16, 256, 4), (8, 512, 4), (32, 256, 8)):
        grid = (triton.cdiv(rows, tm) * triton.cdiv(n, tn),)
        variants.append((f"tile2d {tm}x{tn} w{w}", lambda g=grid, a=tm, b=tn, w=w: tile2d[g](
            xp, op, rows, n, pitch, tm=a, tn=b, num_warps=w)))
    for block, w in ((1024, 4), (2048, 4), (4096, 8)):
        total = rows * pitch
        g = (triton.cdiv(total, block),)
        variants.append((f"flat_out {block} w{w}", lambda g=g, b=block, w=w, t=total: flat_out[g](
            xp, op, t, n, pitch, block=b, num_warps=w)))
        g2 = (triton.cdiv(rows * n, block),)
        variants.append((f"flat_in {block} w{w}", lambda g=g2, b=block, w=w: flat_in[g](
            xp, op, rows * n, n, pitch, block=b, num_warps=w)))
    return variants


def main() -> int:
    import cupy as cp
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from exp_reductions import event_time
    shapes = [(10946, 3787), (2215, 15497), (2609, 10946), (11932, 3183), (4943, 2215),
              (4096, 4093)]
    for rows, n in shapes:
        pitch = -(-n // 8) * 8
        x = cp.random.standard_normal((rows, n), dtype=cp.float32).astype(cp.float16)
        moved = 2 * x.nbytes
        ref = cp.empty_like(x)
        copy_us = event_time(lambda r=ref, s=x: cp.copyto(r, s)) * 1e6
        out = cp.empty((rows, pitch), dtype=cp.float16)
        lines = [f"{rows}x{n} f16 (pitch {pitch}): copy {copy_us:6.1f} us "
                 f"({moved / copy_us / 1e6:4.2f} TB/s)"]
        for label, fn in _variants(cp, x, out):
            out.fill(0)
            try:
                fn()
                ok = bool(cp.array_equal(out[:, :n], x))
                us = event_time(fn) * 1e6
                lines.append(f"    {label:22s} {us:7.1f} us {moved / us / 1e6:4.2f} TB/s"
                             + ("" if ok else "  WRONG"))
            except Exception as exc:  # noqa: BLE001
                lines.append(f"    {label:22s} failed: {type(exc).__name__}: {exc}"[:200])
        print("\n".join(lines), flush=True)
        del x, out, ref
        cp.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    sys.exit(main())
