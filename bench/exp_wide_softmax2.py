"""What holds the one-read cooperative softmax under the copy rate? (issue 9, wide rows)

The hand-written cooperative softmax of ``bench/exp_wide_softmax.py`` (each row over several
programs holding their chunk in registers across a wait on the row's other programs) reached
72% of the copy rate at best with Triton's fast ``tl.exp``, and fusejit's emitted form 45%
with libdevice's ``exp`` (NumPy's rounding). This kernel has one switch per suspect, so one
run says which matter:

* ``spin_volatile``: wait with plain volatile loads of the row's counter and one acquiring
  read at the end, instead of an atomic read-modify-write per spin (every waiting program
  of a row hammers one L2 atomic unit, which the arriving programs need too);
* ``exp_once``: keep ``exp(x - chunk_max)`` from the partial and write ``e * (exp(chunk_max
  - row_max) / row_sum)``: one ``exp`` per element instead of two (two roundings instead of
  one: within 2 ulp of the one-exp form);
* ``fast_exp``: ``tl.exp`` (ex2.approx, not NumPy's rounding) instead of libdevice's;
* ``reread``: hold nothing across the wait and read the chunk again after it (from L2:
  small register footprint, more programs per SM);
* ``no_wait``: skip the wait (wrong answers; how fast the structure is without it).

Counters never need resetting: each launch passes its epoch, tickets and arrivals count on
across launches (launch ``L``'s tickets are ``L * programs ...``, its rows complete at
``(L + 1) * chunks``).

Run on the GPU machine (Triton's launcher through torch views of CuPy buffers: this
script only): ``python3 bench/exp_wide_softmax2.py [--rows R --cols C]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, str(Path(__file__).resolve().parent))

SPIN_LIMIT = 1 << 22


@triton.jit
def coop_softmax_v2(x_ptr, y_ptr, partials_ptr, sync_ptr, n_rows, n_cols, epoch,
                    chunks_per_row: tl.constexpr, block: tl.constexpr,
                    spin_volatile: tl.constexpr, exp_once: tl.constexpr,
                    fast_exp: tl.constexpr, reread: tl.constexpr, no_wait: tl.constexpr,
                    spin_limit: tl.constexpr):
    """Softmax of each row of a contiguous ``n_rows x n_cols`` float32 array; ``sync_ptr``:
    [0] tickets, [1] chunks given up, [2 + row] arrivals (all counting on across epochs)."""
    programs = n_rows * chunks_per_row
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed") - epoch * programs
    row = ticket // chunks_per_row
    chunk = ticket % chunks_per_row
    arrivals = sync_ptr + 2 + row
    cols = chunk * block + tl.arange(0, block)
    in_row = cols < n_cols
    row_start = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + row_start + cols, mask=in_row, other=float("-inf"))
    chunk_max = tl.max(x, 0)
    if fast_exp:
        e = tl.exp(x - chunk_max)
    else:
        e = libdevice.exp(x - chunk_max)
    e = tl.where(in_row, e, 0.0)
    chunk_sum = tl.sum(e, 0)
    partial = partials_ptr + (row * chunks_per_row + chunk) * 2
    tl.store(partial, chunk_max)
    tl.store(partial + 1, chunk_sum)
    tl.debug_barrier()
    target = (epoch + 1) * chunks_per_row
    arrived = tl.atomic_add(arrivals, 1, sem="acq_rel") + 1
    if not no_wait:
        spins = 0
        while (arrived < target) & (spins < spin_limit):
            if spin_volatile:
                arrived = tl.load(arrivals, volatile=True)
            else:
                arrived = tl.atomic_add(arrivals, 0, sem="acquire")
            spins += 1
        if spin_volatile:
            arrived = tl.atomic_add(arrivals, 0, sem="acquire")  # (orders the reads below)
        tl.debug_barrier()
        if arrived < target:
            tl.atomic_add(sync_ptr + 1, 1, sem="relaxed")
    which = (row * chunks_per_row + tl.arange(0, chunks_per_row)) * 2
    maxes = tl.load(partials_ptr + which, cache_modifier=".cg")
    sums = tl.load(partials_ptr + which + 1, cache_modifier=".cg")
    row_max = tl.max(maxes, 0)
    if fast_exp:
        row_sum = tl.sum(sums * tl.exp(maxes - row_max), 0)
    else:
        row_sum = tl.sum(sums * libdevice.exp(maxes - row_max), 0)
    if reread:
        x = tl.load(x_ptr + row_start + cols, mask=in_row, other=float("-inf"))
    if exp_once and not reread:
        if fast_exp:
            scale = tl.exp(chunk_max - row_max) / row_sum
        else:
            scale = libdevice.exp(chunk_max - row_max) / row_sum
        y = e * scale
    else:
        if fast_exp:
            y = tl.exp(x - row_max) / row_sum
        else:
            y = libdevice.exp(x - row_max) / row_sum
    tl.store(y_ptr + row_start + cols, y, mask=in_row)


MODES = {
    "atomic spin, exp twice (as emitted)": dict(spin_volatile=False, exp_once=False),
    "volatile spin": dict(spin_volatile=True, exp_once=False),
    "exp once": dict(spin_volatile=False, exp_once=True),
    "volatile spin, exp once": dict(spin_volatile=True, exp_once=True),
    "volatile spin, exp once, fast exp": dict(spin_volatile=True, exp_once=True, fast_exp=True),
    "volatile spin, reread from L2": dict(spin_volatile=True, reread=True),
    "no wait (wrong answers: the structure's bound)": dict(spin_volatile=True, exp_once=True,
                                                           no_wait=True),
}


def main() -> int:
    """Time every (chunks, warps, mode) beside a copy; check against NumPy in float64."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=1 << 18)
    args = parser.parse_args()
    import cupy as cp
    import torch
    from exp_reductions import event_time
    rows, cols = args.rows, args.cols
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4
    y = cp.empty_like(x)
    copy_us = event_time(lambda: cp.copyto(y, x)) * 1e6
    print(f"{rows}x{cols} float32: copy {copy_us:8.1f} us  {2 * x.nbytes / copy_us / 1e3:7.0f} GB/s",
          flush=True)
    x64 = cp.asnumpy(x).astype(np.float64)
    e64 = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want = e64 / e64.sum(axis=1, keepdims=True)
    tx, ty = torch.from_dlpack(x), torch.from_dlpack(y)
    for chunks, warps in ((16, 16), (32, 8), (32, 4), (64, 4), (64, 2)):
        block = triton.next_power_of_2(-(-cols // chunks))
        if (chunks - 1) * block >= cols:
            continue
        for mode, flags in MODES.items():
            options = dict(spin_volatile=False, exp_once=False, fast_exp=False, reread=False,
                           no_wait=False)
            options.update(flags)
            partials = torch.zeros(rows * chunks * 2, dtype=torch.float32, device="cuda")
            sync = torch.zeros(2 + rows, dtype=torch.int32, device="cuda")
            epoch = [0]

            def run(chunks: int = chunks, block: int = block, warps: int = warps,
                    partials: Any = partials, sync: Any = sync, options: Any = options,
                    epoch: list[int] = epoch) -> None:
                coop_softmax_v2[(rows * chunks,)](tx, ty, partials, sync, rows, cols, epoch[0],
                                                  chunks_per_row=chunks, block=block,
                                                  spin_limit=SPIN_LIMIT, num_warps=warps,
                                                  **options)
                epoch[0] += 1
            try:
                y.fill(np.nan)
                run()
                torch.cuda.synchronize()
                got = cp.asnumpy(y).astype(np.float64)
                rel = float(np.nanmax(np.abs(got - want) / want))
                us = event_time(run) * 1e6
                given_up = int(sync[1].item())
                print(f"chunks {chunks:2d} of {block:6d}, {warps:2d} warps, {mode:48s} "
                      f"{us:8.1f} us {100 * copy_us / us:5.1f}% of copy  max rel err {rel:.1e}  "
                      f"given up {given_up}", flush=True)
            except Exception as exc:  # noqa: BLE001  (report the variant, try the next)
                print(f"chunks {chunks} warps {warps} {mode}: failed {type(exc).__name__}: "
                      f"{exc}"[:300], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
