"""Can softmax over very wide rows beat the two-read cap? (issue 9's wide-rows target.)

Softmax over 256 rows of 2**18 float32 (the suite's ``softmax_wide``, 268 MB) needs each
row's max and sum before any output. fusejit's plan (a split row reduction, then a kernel
that re-reads the row, normalizes and writes) reads the input twice: three memory passes
where a copy makes two, so it cannot pass 67% of copy bandwidth (it measures 61%;
torch.compile 37%). One row is 1 MB, so a row fits on chip when it is spread over a few
programs. This experiment holds each chunk of a row in registers across a wait:

* every program takes a ticket (an atomic counter: tickets follow the order in which
  programs start, so the programs of the lowest unfinished row are always resident and
  the wait below always ends, the rule CUB's single-pass scan relies on);
  ticket ``t`` is chunk ``t % chunks_per_row`` of row ``t // chunks_per_row``;
* it loads its chunk once, writes the chunk's (max, sum of exp) to a scratch buffer and
  arrives at its row's counter (release);
* it waits until all ``chunks_per_row`` programs of the row have arrived (acquire; a bounded spin
  that raises an error flag instead of hanging), combines the row's partials, normalizes
  the chunk it still holds and writes it;
* the counters clean themselves (the row's last leaver zeroes the row's counters, the
  grid's last program the ticket), so the next launch finds zeros and nothing is memset.

Memory traffic is a copy's: one read, one write. Each variant (chunks per row, warps) is
checked against NumPy and timed with CUDA events beside a CuPy copy of the same bytes and
fusejit's own plan for the same program, whose second pass over a row runs backwards
(``heuristics.ALTERNATE_PASSES``: the tiles read last may still be in L2), and forwards.

Run (GPU machine): ``python3 bench/exp_wide_softmax.py [--rows R] [--cols C]``.
Without a GPU: ``python3 bench/exp_wide_softmax.py --compile-only`` compiles every
variant for sm_90 and prints its registers and spills (``cuobjdump``), and
``--interpret`` runs the one-chunk variant in Triton's interpreter (its programs run one
after another, so only ``chunks_per_row=1`` can finish there). Triton's own launcher is used for
the hand-written kernel, through torch views of the CuPy buffers (this script only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np
import triton
import triton.language as tl

#: spins before a program gives up its wait and raises the error flag (a GPU never hangs
#: on this experiment; a run that hits it reports the variant as broken)
SPIN_LIMIT = 1 << 22

#: (chunks per row, warps) tried for 2**18-wide rows: 8 chunks hold 128 KB per program
#: (one program per SM), 32 chunks 32 KB (several per SM, so one waits while another loads)
VARIANTS = ((8, 8), (8, 16), (16, 8), (16, 16), (32, 4), (32, 8), (64, 4), (64, 8))


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _larger(a, b):
    return tl.maximum(a, b)


@triton.jit
def coop_softmax_rows(x_ptr, y_ptr, partials_ptr, sync_ptr, n_rows, n_cols,
                      chunks_per_row: tl.constexpr, block: tl.constexpr, spin_limit: tl.constexpr):
    """Softmax of each row of a contiguous ``n_rows x n_cols`` array, one read per element.

    ``sync_ptr`` (int32, zeros before the first launch): [0] ticket, [1] programs done,
    [2] error flag, then per row its arrivals and its leavers."""
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    row = ticket // chunks_per_row
    chunk = ticket % chunks_per_row
    arrivals = sync_ptr + 3 + row
    leavers = sync_ptr + 3 + n_rows + row
    cols = chunk * block + tl.arange(0, block)
    in_row = cols < n_cols
    row_start = row.to(tl.int64) * n_cols
    x = tl.load(x_ptr + row_start + cols, mask=in_row, other=float("-inf"))
    chunk_max = tl.reduce(x, 0, _larger)  # (tl.max and tl.sum: not in the interpreter)
    chunk_sum = tl.reduce(tl.where(in_row, tl.exp(x - chunk_max), 0.0), 0, _add)
    partial = partials_ptr + (row * chunks_per_row + chunk) * 2
    tl.store(partial, chunk_max)
    tl.store(partial + 1, chunk_sum)
    tl.debug_barrier()  # the partials are written before the arrival is published
    tl.atomic_add(arrivals, 1, sem="release")
    arrived = tl.atomic_add(arrivals, 0, sem="acquire")
    spins = 0
    while (arrived < chunks_per_row) & (spins < spin_limit):
        arrived = tl.atomic_add(arrivals, 0, sem="acquire")
        spins += 1
    tl.debug_barrier()
    which = (row * chunks_per_row + tl.arange(0, chunks_per_row)) * 2
    maxes = tl.load(partials_ptr + which, cache_modifier=".cg")
    sums = tl.load(partials_ptr + which + 1, cache_modifier=".cg")
    row_max = tl.reduce(maxes, 0, _larger)
    row_sum = tl.reduce(sums * tl.exp(maxes - row_max), 0, _add)
    y = tl.exp(x - row_max) / row_sum
    tl.store(y_ptr + row_start + cols, y, mask=in_row)
    if spins >= spin_limit:
        tl.atomic_add(sync_ptr + 2, 1, sem="relaxed")
    if tl.atomic_add(leavers, 1, sem="acq_rel") == chunks_per_row - 1:  # the row's last: reset it
        tl.atomic_xchg(arrivals, 0, sem="relaxed")
        tl.atomic_xchg(leavers, 0, sem="relaxed")
    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel") == n_rows * chunks_per_row - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")  # every ticket is taken: reset
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


def block_for(n_cols: int, chunks: int) -> int:
    """The chunk width: the power of two that covers ``n_cols`` in ``chunks`` pieces (every
    chunk must hold at least one column: checked by the caller)."""
    return triton.next_power_of_2(triton.cdiv(n_cols, chunks))


def reference(x: np.ndarray) -> np.ndarray:
    """NumPy's softmax over the last axis, in float64, rounded to float32."""
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def compile_only(n_cols: int) -> int:
    """Compile every variant for sm_90 (no GPU) and print registers and spills."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "partials_ptr": "*fp32",
                 "sync_ptr": "*i32", "n_rows": "i32", "n_cols": "i32",
                 "chunks_per_row": "constexpr", "block": "constexpr", "spin_limit": "constexpr"}
    for chunks, warps in VARIANTS:
        block = block_for(n_cols, chunks)
        src = ASTSource(coop_softmax_rows, signature,
                        {"chunks_per_row": chunks, "block": block, "spin_limit": SPIN_LIMIT})
        compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                  options={"num_warps": warps})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(compiled.asm["cubin"])
            f.flush()
            usage = subprocess.run([os.path.join(bin_dir, "cuobjdump"),
                                    "--dump-resource-usage", f.name],
                                   capture_output=True, text=True).stdout
        line = next((ln.strip() for ln in usage.splitlines() if "REG:" in ln), usage.strip())
        print(f"chunks {chunks:3d} block {block:6d} warps {warps:2d}: {line}", flush=True)
    return 0


def interpret_check(rows: int, cols: int) -> int:
    """The one-chunk variant in Triton's interpreter against NumPy (its programs run one
    after another, so a row split over several programs would wait forever there)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import importlib
    triton.knobs.runtime.interpret = True  # (read when the module's kernel is decorated)
    module = importlib.import_module("exp_wide_softmax")
    from fusejit.runtime.interpret_backend import HostBuffer
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    y = np.empty_like(x)
    partials = np.zeros(rows * 2, np.float32)
    sync = np.zeros(3 + 2 * rows, np.int32)
    kernel = module.coop_softmax_rows
    for launch in range(2):  # the second launch finds the counters the first left
        kernel[(rows,)](HostBuffer(x), HostBuffer(y), HostBuffer(partials), HostBuffer(sync),
                        rows, cols, chunks_per_row=1, block=triton.next_power_of_2(cols), spin_limit=4)
        err = float(np.abs(y - reference(x)).max())
        print(f"interpret, launch {launch}: max abs error {err:.2e}, counters after "
              f"{sync.tolist()[:3]} + rows all zero: {not sync[3:].any()}")
        if err > 1e-6 or sync.any():
            return 1
    return 0


def gpu_run(rows: int, cols: int) -> int:
    """Time every variant beside a copy and fusejit's plan (GPU machine)."""
    import cupy as cp
    import torch

    import fusejit as fj

    def events(fn: Any, reps: int = 20) -> float:
        fn()
        cp.cuda.get_current_stream().synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()
        best = float("inf")
        for _ in range(7):
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end) / reps * 1e3)
        return best

    x = (cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4)
    y = cp.empty_like(x)
    nbytes = 2 * x.nbytes
    copy_us = events(lambda: cp.copyto(y, x))
    print(f"{rows}x{cols} float32: copy {copy_us:8.1f} us  {nbytes / copy_us / 1e3:7.0f} GB/s",
          flush=True)
    want = reference(cp.asnumpy(x))

    fj.set_backend("cuda")
    from fusejit import fuse, runtime
    from fusejit.codegen import heuristics
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import kernel_cache
    # fusejit's plan with its second pass backwards (the default) and forwards
    for alternate in (True, False):
        heuristics.ALTERNATE_PASSES = alternate
        fuse.clear_cache()
        runtime._plans.clear()
        kernel_cache._emit_cache.clear()
        out = fj.softmax(fj.asarray(x), axis=-1)
        plan = fj.plan(out)
        _, leaves = structural_key([out._node])
        bufs = [leaf.buffer for leaf in leaves]
        backend = runtime.current()
        got = backend.execute(plan.program, bufs, plan)[0]
        err = float(np.abs(cp.asnumpy(got) - want).max())
        us = events(lambda b=backend, p=plan, f=bufs: b.execute(p.program, f, p))
        print(f"fusejit plan ({len(plan.kernels)} kernel{'s' * (len(plan.kernels) > 1)}, second "
              f"pass {'backwards' if alternate else 'forwards'}) {us:8.1f} us  "
              f"{100 * copy_us / us:5.1f}% of copy  max abs error {err:.1e}", flush=True)
    heuristics.ALTERNATE_PASSES = True

    tx_, ty_ = torch.from_dlpack(x), torch.from_dlpack(y)
    for chunks, warps in VARIANTS:
        block = block_for(cols, chunks)
        if (chunks - 1) * block >= cols:
            print(f"chunks {chunks}: a chunk would be empty, skipped")
            continue
        partials = torch.zeros(rows * chunks * 2, dtype=torch.float32, device="cuda")
        sync = torch.zeros(3 + 2 * rows, dtype=torch.int32, device="cuda")

        def run(chunks: int = chunks, block: int = block, warps: int = warps,
                partials: Any = partials, sync: Any = sync) -> None:
            coop_softmax_rows[(rows * chunks,)](tx_, ty_, partials, sync, rows, cols,
                                                chunks_per_row=chunks, block=block, spin_limit=SPIN_LIMIT,
                                                num_warps=warps)
        try:
            y.fill(np.nan)
            run()
            torch.cuda.synchronize()
            err = float(np.abs(cp.asnumpy(y) - want).max())
            state = sync.cpu().numpy()
            us = events(run)
            state_after = sync.cpu().numpy()
            print(f"coop chunks {chunks:2d} block {block:6d} warps {warps:2d} {us:8.1f} us  "
                  f"{100 * copy_us / us:5.1f}% of copy  max abs error {err:.1e}  "
                  f"counters clean: {not state.any() and not state_after[:2].any()}  "
                  f"gave up waiting: {int(state_after[2])}", flush=True)
        except Exception as exc:  # noqa: BLE001  (report the variant, try the next)
            print(f"coop chunks {chunks} warps {warps}: failed {type(exc).__name__}: "
                  f"{exc}"[:300], flush=True)
    return 0


def main() -> int:
    """Parse the arguments and run the chosen mode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--cols", type=int, default=1 << 18)
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--interpret", action="store_true")
    args = parser.parse_args()
    if args.compile_only:
        return compile_only(args.cols)
    if args.interpret:
        return interpret_check(min(args.rows, 8), min(args.cols, 1000))
    return gpu_run(args.rows, args.cols)


if __name__ == "__main__":
    sys.exit(main())
