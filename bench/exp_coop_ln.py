"""Why does the cooperative layer norm trail the cooperative softmax? (issue 9, wide rows)

On the H200 the cooperative row kernel runs softmax over 256 rows of 2**18 float32 at
80-85% of the copy rate and layer norm with a weight and a bias at 68-74%
(``bench/results/h200-coop-rows-2026-12-02.txt``). Layer norm differs in three ways: it loads
the weight and the bias after the row's wait (L2 reads on the path from the wait to the
store), it keeps four partials per chunk (the sum, and the count, mean and M2 of the
variance) where softmax keeps two, and it needs more registers (166 against 127 with
CUDA 13's ptxas: three programs of 4 warps per SM, against four). This launches the emitted
kernel as it is and with one change at a time (edits of the source, each checked against a
float64 layer norm), and emitted at other tiles:

* ``hoisted``: the weight and the bias loaded before the wait (latency hidden, registers up);
* ``8 warps`` / ``4096 elements``: emitted with ``COOP_MAX_WARPS`` 8 or ``COOP_CHUNK`` 4096;
* ``L1 prefetch``: the weight's and bias's lines prefetched into L1 right after the arrival,
  (``x .cg``: and the chunk's own load kept out of L1);
* ``no weight or bias``: the layer norm without its affine step (is it the weight's and the
  bias's reads from L2, 8 bytes per element, that hold it back?).

First run (``bench/results/h200-s3-2026-12-02.md``, on a77418e's source, where the
variance's partials were (count, mean, m2) beside a partial of the sum: two more edits, no
partial of the sum and the count as a constant, which the emitter has since made its own
and which no longer apply): hoisting cost 13-14 points (the arrival's release waits for
the loads), the sum and count partials gained 2-3. Second run: the L1 prefetch gained
nothing (67-73% against 70-74% as emitted), 8 warps and chunks of 4096 neither (each better
at one shape, worse at the other). Tenth session (an H100, ``bench/gpu_s10.sh``, results
``bench/results/h100-s10-call1-exp_coop_ln.txt``): a program holding the same chunk of 2 or
4 rows, the weight and bias read once for them (emitted; since removed), ran slower at every
shape (256x2**18: 81.1% of copy with one row, 80.0 with 2, 76.9 with 4; no weight or bias
91.5%): the affine step's cost is not its L2 traffic.

Run (GPU machine, torch installed: Triton's launcher takes torch views):
``python3 bench/exp_coop_ln.py [--shapes 256x262144,1024x65536]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _hoist(src: str) -> str:
    """The main kernel's loads of the weight and the bias moved before the wait."""
    loads = re.findall(r"^        (v_in[12] = tl\.load\(p_in[12] \+ cols\)  # load %in[12])\n",
                       src, flags=re.M)
    if len(loads) != 2:
        raise ValueError("weight and bias loads not found")
    for line in loads:
        src = src.replace(f"        {line}\n", "", 1)
    wait = "    tl.debug_barrier()  # every thread's partials are stored before the arrival\n"
    return src.replace(wait, "".join(f"    {line}\n" for line in loads) + wait, 1)


def _prefetch(src: str, chunk: int, l1_only: bool = False) -> str:
    """After the arrival (its release waits for earlier loads, so loads before it delay the
    row), the weight's and bias's lines of the chunk prefetched into L1 (no registers held
    over the wait); ``l1_only``: the chunk's own load of x bypasses L1 (``.cg``), leaving L1
    to the prefetched lines."""
    arrive = re.search(r"^    arrived = tl\.atomic_add\(.*\n", src, flags=re.M)
    if arrive is None or "p_in1" not in src or "p_in2" not in src:
        raise ValueError("arrival or weight/bias not found")
    lines = "".join(
        f'    tl.inline_asm_elementwise("prefetch.global.L1 [$1]; mov.u32 $0, 0;", "=r,l", '
        f"[{p} + chunk * {chunk} + tl.arange(0, {chunk // 32}) * 32], dtype=tl.int32, "
        f"is_pure=False, pack=1)  # prefetch\n" for p in ("p_in1", "p_in2"))
    src = src[:arrive.end()] + lines + src[arrive.end():]
    if l1_only:
        src = src.replace("v_in0 = tl.load(p_in0 + idx)  # load %in0",
                          'v_in0 = tl.load(p_in0 + idx, cache_modifier=".cg")  # load %in0', 1)
    return src


VARIANTS: dict[str, Any] = {
    "as emitted": lambda s, c: s,
    "hoisted": lambda s, c: _hoist(s),
    "L1 prefetch": _prefetch,
    "L1 prefetch, x .cg": lambda s, c: _prefetch(s, c, True),
}


def layer_norm_reference(x: Any, w: Any, b: Any, eps: float = 1e-5) -> Any:
    """``(x - mean) / sqrt(var + eps) * w + b`` over the last axis, in float64 (CuPy)."""
    import cupy as cp
    x64 = x.astype(cp.float64)
    mu = x64.mean(axis=1, keepdims=True)
    return (x64 - mu) / cp.sqrt(((x64 - mu) ** 2).mean(axis=1, keepdims=True) + eps) * w + b


def main() -> int:
    """Time each variant beside a copy (CUDA events) and check it against float64."""
    import cupy as cp
    from exp_reductions import event_time
    from exp_wide_softmax import direct_launch_us

    import fusejit as fj
    import fusejit.codegen.heuristics as heuristics
    from fusejit.codegen import emit_kernel

    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="256x262144,1024x65536")
    p.add_argument("--emitted-only", action="store_true",
                   help="time the kernel as emitted (and without the affine step) only")
    args = p.parse_args()

    def events(fn: Any) -> float:
        return event_time(fn) * 1e6

    heuristics.COOPERATIVE_ROWS = True
    for shape in args.shapes.split(","):
        rows, cols = (int(v) for v in shape.split("x"))
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4 + 1
        w = cp.random.standard_normal(cols, dtype=cp.float32)
        b = cp.random.standard_normal(cols, dtype=cp.float32)
        y = cp.empty_like(x)
        copy_us = events(lambda x=x, y=y: cp.copyto(y, x))
        want = layer_norm_reference(x, w, b)
        print(f"{rows}x{cols} float32 layer norm (weight, bias): copy {copy_us:8.1f} us",
              flush=True)
        # without the weight and the bias: if the affine loads (2 x 4 bytes per element, read
        # from L2 by every row) are what holds layer norm under softmax, this runs near it
        heuristics.COOP_CHUNK["cuda"], heuristics.COOP_MAX_WARPS = 8192, 4
        with fj.using_backend("interpret"):  # (planned only)
            (kernel,) = fj.plan(fj.layer_norm(fj.asarray(np.zeros(x.shape, np.float32)))
                                ).program.kernels
        bare = emit_kernel(kernel, None, "cuda")
        outs = []
        us = direct_launch_us(bare, [x, 1e-5], events, outputs=outs)
        x64 = x.astype(cp.float64)
        mu = x64.mean(axis=1, keepdims=True)
        err = float(cp.abs(outs[0] - (x64 - mu) / cp.sqrt(((x64 - mu) ** 2).mean(
            axis=1, keepdims=True) + 1e-5)).max())
        print(f"   8192 elements, 4 warps, {'no weight or bias':24s} {us:8.1f} us  "
              f"{100 * copy_us / us:5.1f}% of copy  max abs err {err:.1e}", flush=True)
        every = list(VARIANTS)
        other = [name for name in every if name != "hoisted"]  # (hoisting: 4 warps only)
        tiles = [(8192, 4, every), (8192, 8, other), (4096, 4, other)]
        if args.emitted_only:
            tiles = [(8192, 4, ["as emitted"])]
        for chunk, warps, names in tiles:
            heuristics.COOP_CHUNK["cuda"], heuristics.COOP_MAX_WARPS = chunk, warps
            with fj.using_backend("interpret"):  # (planned only)
                zeros = [np.zeros(a.shape, np.float32) for a in (x, w, b)]
                (kernel,) = fj.plan(fj.layer_norm(*[fj.asarray(z) for z in zeros])).program.kernels
            emitted = emit_kernel(kernel, None, "cuda")
            if "cooperative rows" not in emitted.source:
                print(f"  {chunk} elements, {warps} warps: not cooperative, skipped")
                continue
            for name in names:
                try:
                    variant = dataclasses.replace(emitted, source=VARIANTS[name](emitted.source,
                                                                                 chunk))
                    outs: list[Any] = []
                    us = direct_launch_us(variant, [x, 1e-5, w, b], events, outputs=outs)
                    err = float(cp.abs(outs[0] - want).max())
                    print(f"  {chunk:5d} elements, {warps} warps, {name:24s} {us:8.1f} us  "
                          f"{100 * copy_us / us:5.1f}% of copy  max abs err {err:.1e}",
                          flush=True)
                except Exception as exc:  # noqa: BLE001  (report, go on)
                    print(f"  {chunk} elements, {warps} warps, {name}: failed "
                          f"{type(exc).__name__}: {exc}"[:300], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
