"""Can softmax over very wide rows beat the two-read cap? (issue 9's wide-rows target.)

Softmax over 256 rows of 2**18 float32 (the suite's ``softmax_wide``, 268 MB) needs each
row's max and sum before any output. fusejit's plan (one program per row, a looped pass
for the statistics, then a second pass that re-reads the row, normalizes and writes) reads
the input twice: three memory passes where a copy makes two, so it cannot pass 67% of copy
bandwidth (it measures 61%; torch.compile 37%). One row is 1 MB, so a row fits on chip
when it is spread over a few programs. This experiment holds each chunk of a row in
registers across a wait:

* every program takes a ticket (an atomic counter: tickets follow the order in which
  programs start, so the programs of the lowest unfinished row are always resident and
  the wait below always ends, the rule CUB's single-pass scan relies on);
  ticket ``t`` is chunk ``t % chunks_per_row`` of row ``t // chunks_per_row``;
* it loads its chunk once, writes the chunk's (max, sum of exp) to a scratch buffer and
  arrives at its row's counter (release);
* it waits until all ``chunks_per_row`` programs of the row have arrived (acquire), combines
  the row's partials, normalizes the chunk it still holds and writes it;
* a program that waits past a bound gives its chunk up (a flag) rather than wait on: the
  row's last program to settle normalizes given-up chunks again from memory. So every
  schedule gives the right answer (Triton's interpreter, which runs programs one after
  another, takes this path for all but the last program of a row), and the GPU takes it
  only if a row's programs cannot all be resident at once (the run reports how often);
* the counters clean themselves (the row's last to settle zeroes the row's, the grid's
  last program the ticket), so the next launch finds zeros and nothing is memset.

Memory traffic is a copy's: one read, one write. Each variant (chunks per row, warps) is
checked against NumPy and timed with CUDA events beside a CuPy copy of the same bytes and
fusejit's own plan for the same program: its looped row kernel, whose second pass over a
row runs backwards (``heuristics.ALTERNATE_PASSES``: the tiles read last may still be in
L2) or forwards, and its cooperative row kernel (``heuristics.COOPERATIVE_ROWS``, this
experiment's design in the emitter).

Run (GPU machine): ``python3 bench/exp_wide_softmax.py [--rows R] [--cols C]``.
Without a GPU: ``python3 bench/exp_wide_softmax.py --compile-only`` compiles every
variant for sm_90 and prints its registers and spills (``cuobjdump``), and
``--interpret`` runs it in Triton's interpreter with 1 to 8 chunks per row (the given-up
path for all but the last chunk). Triton's own launcher is used for the hand-written kernel,
through torch views of the CuPy buffers (this script only).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import triton
import triton.language as tl

#: spins before a program gives its chunk up (then the row's last program normalizes it
#: from memory: right, but a second read)
SPIN_LIMIT = 1 << 20

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
def _row_stats(partials_ptr, row, chunks_per_row: tl.constexpr):
    """The row's max and sum of exp(x - max), from its chunks' partials (read from L2)."""
    which = (row * chunks_per_row + tl.arange(0, chunks_per_row)) * 2
    maxes = tl.load(partials_ptr + which, cache_modifier=".cg")
    sums = tl.load(partials_ptr + which + 1, cache_modifier=".cg")
    row_max = tl.reduce(maxes, 0, _larger)
    return row_max, tl.reduce(sums * tl.exp(maxes - row_max), 0, _add)


@triton.jit
def coop_softmax_rows(x_ptr, y_ptr, partials_ptr, sync_ptr, n_rows, n_cols,
                      chunks_per_row: tl.constexpr, block: tl.constexpr, spin_limit: tl.constexpr,
                      redo_block: tl.constexpr):
    """Softmax of each row of a contiguous ``n_rows x n_cols`` array, one read per element.

    ``sync_ptr`` (int32, zeros before the first launch, zeros after each): [0] ticket,
    [1] programs done, [2] chunks that took the slow path (a count kept for the report:
    never reset), then per row its arrivals, per row its settled programs, and per chunk
    a flag: given up waiting. ``redo_block`` (at most ``block``, dividing it): the tile a
    given-up chunk is normalized in.

    A program that waits longer than ``spin_limit`` gives its chunk up (flags it) instead
    of waiting on: the row's last program to settle, which finds every partial and flag
    final, normalizes the given-up chunks again from memory. So the kernel is right in any
    schedule, Triton's interpreter included (its programs run one after another: all but
    the last of a row give up), and a GPU takes the slow path only if a row's programs
    could not all be resident at once."""
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    row = ticket // chunks_per_row
    chunk = ticket % chunks_per_row
    arrivals = sync_ptr + 3 + row
    settled = sync_ptr + 3 + n_rows + row
    given_up = sync_ptr + 3 + 2 * n_rows + row * chunks_per_row
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
    arrived = tl.atomic_add(arrivals, 1, sem="acq_rel") + 1
    spins = 0
    while (arrived < chunks_per_row) & (spins < spin_limit):
        arrived = tl.atomic_add(arrivals, 0, sem="acquire")
        spins += 1
    tl.debug_barrier()
    if arrived >= chunks_per_row:  # every partial of the row is written: the fast path
        row_max, row_sum = _row_stats(partials_ptr, row, chunks_per_row)
        tl.store(y_ptr + row_start + cols, tl.exp(x - row_max) / row_sum, mask=in_row)
    else:
        tl.store(given_up + chunk, 1)
        tl.atomic_add(sync_ptr + 2, 1, sem="relaxed")
    tl.debug_barrier()  # (the flag is written before this program settles)
    if tl.atomic_add(settled, 1, sem="acq_rel") == chunks_per_row - 1:
        # the row's last to settle: the chunks given up are normalized here, from memory
        tl.debug_barrier()
        row_max, row_sum = _row_stats(partials_ptr, row, chunks_per_row)
        for c in range(0, chunks_per_row):
            if tl.load(given_up + c, cache_modifier=".cg") != 0:
                for start in range(0, block, redo_block):  # (a small tile: few registers)
                    other = c * block + start + tl.arange(0, redo_block)
                    in_other = other < n_cols
                    xc = tl.load(x_ptr + row_start + other, mask=in_other, other=float("-inf"))
                    tl.store(y_ptr + row_start + other, tl.exp(xc - row_max) / row_sum,
                             mask=in_other)
                tl.store(given_up + c, 0)
        tl.atomic_xchg(arrivals, 0, sem="relaxed")  # the row's counters are zero again
        tl.atomic_xchg(settled, 0, sem="relaxed")
    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel") == n_rows * chunks_per_row - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")  # every ticket is taken: reset
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


def redo_for(block: int) -> int:
    """The tile in which a given-up chunk is normalized again (few registers)."""
    return min(block, 1024)


def sync_words(rows: int, chunks: int) -> int:
    """int32 words of ``coop_softmax_rows``'s sync buffer."""
    return 3 + 2 * rows + rows * chunks


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
                 "chunks_per_row": "constexpr", "block": "constexpr", "spin_limit": "constexpr",
                 "redo_block": "constexpr"}
    for chunks, warps in VARIANTS:
        block = block_for(n_cols, chunks)
        src = ASTSource(coop_softmax_rows, signature,
                        {"chunks_per_row": chunks, "block": block, "spin_limit": SPIN_LIMIT,
                         "redo_block": redo_for(block)})
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
    """The kernel in Triton's interpreter against NumPy, 1 to 8 chunks per row, twice each
    (the second launch finds the counters the first left): all programs of a row but the
    last give their chunk up there, so this checks the slow path and the counters."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import importlib.util
    # a fresh copy of this module, its kernels decorated for the interpreter
    spec = importlib.util.spec_from_file_location("exp_wide_softmax_interpreted", __file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    interpret = triton.knobs.runtime.interpret
    triton.knobs.runtime.interpret = True  # (read when a kernel is decorated)
    try:
        spec.loader.exec_module(module)
    finally:
        triton.knobs.runtime.interpret = interpret
    from fusejit.runtime.interpret_backend import HostBuffer
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
    want = reference(x)
    failed = 0
    for chunks in (1, 2, 4, 8):
        block = block_for(cols, chunks)
        partials = np.zeros(rows * chunks * 2, np.float32)
        sync = np.zeros(sync_words(rows, chunks), np.int32)
        for launch in range(2):
            y = np.full_like(x, np.nan)
            module.coop_softmax_rows[(rows * chunks,)](
                HostBuffer(x), HostBuffer(y), HostBuffer(partials), HostBuffer(sync), rows, cols,
                chunks_per_row=chunks, block=block, spin_limit=1, redo_block=redo_for(block))
            # (relative to the float64 softmax: the interpreter adds a reduction's terms one
            # after another in float32, about sqrt(n) ulps off for n of 5000)
            err = float((np.abs(y - want) / want).max())
            clean = not sync[:2].any() and not sync[3:].any()
            print(f"interpret, {chunks} chunk(s) of {block}, launch {launch}: max rel error "
                  f"{err:.2e}, counters zero: {clean}, chunks given up so far: {sync[2]}")
            failed += not (err <= 5e-5 and clean and sync[2] == (launch + 1) * rows * (chunks - 1))
    return int(failed > 0)


def direct_launch(emitted: Any, arrays: list[Any], fp_fusion: bool = False,
                  zero_counters: bool = False, maxnreg: int | None = None,
                  num_warps: int | None = None) -> tuple[Callable[[], None], list[Any]]:
    """One launch of an emitted single-launch kernel through Triton's own launcher (torch
    views of CuPy buffers: this script only), as a closure, and its output buffers (holding
    the last launch's results): inputs ``arrays`` in order, fresh outputs and scratch,
    zeroed counters (the kernel leaves them zero). fusejit compiles without floating-point
    contraction (``fp_fusion`` False: its compile options); the hand-written kernel above is
    compiled with it (Triton's default). Python numbers in ``arrays`` are the kernel's scalar
    parameters; ``zero_counters``: a memset of the counters before each launch (timed with
    it), for variants that do not leave them zero; ``maxnreg``: Triton's register cap per
    thread (ptxas fits the kernel under it); ``num_warps``: in place of the launch's."""
    import cupy as cp
    import torch

    from fusejit.runtime import kernel_cache
    (launch,) = emitted.launches
    module = kernel_cache.import_source(kernel_cache.write_source(emitted), interpret=False)
    fn = getattr(module, launch.fn_name)
    outs = [cp.empty(t.shape, t.dtype) for t in emitted.out_types]
    scratch = [cp.empty(n, d) for d, n in emitted.scratch]
    counters = cp.zeros(max(emitted.counters, 1), cp.int32)
    groups = {"in": arrays, "out": outs, "scratch": scratch, "counters": [counters]}
    args = [v if isinstance(v, (int, float)) else torch.from_dlpack(v)
            for v in (groups[kind][i] for kind, i in launch.args)]
    grid = launch.grid
    options = {"num_warps": num_warps or launch.num_warps, "enable_fp_fusion": fp_fusion}
    if maxnreg:
        options["maxnreg"] = maxnreg
    if launch.num_stages:
        options["num_stages"] = launch.num_stages

    def run() -> None:
        if zero_counters:
            counters.fill(0)
        fn[grid](*args, **options)
    return run, outs


def direct_launch_us(emitted: Any, arrays: list[Any], events: Any,
                     fp_fusion: bool = False, outputs: list[Any] | None = None,
                     zero_counters: bool = False, maxnreg: int | None = None) -> float:
    """Microseconds per launch of ``direct_launch``'s closure (``events`` times it);
    ``outputs``, when given, receives the output buffers."""
    run, outs = direct_launch(emitted, arrays, fp_fusion, zero_counters, maxnreg)
    if outputs is not None:
        outputs.extend(outs)
    return float(events(run))


def gpu_run(rows: int, cols: int, backend: str = "cuda",
            coop_tiles: tuple[tuple[int, int], ...] = ((8192, 8),),
            fusejit_only: bool = False) -> int:
    """Time every variant beside a copy and fusejit's plan (GPU machine). (``backend``
    "interpret" with ``cupy`` standing for NumPy: a dry run of fusejit's part on the CPU.)
    ``fusejit_only``: fusejit's plans alone (no checks at other shapes, no hand-written
    kernel)."""
    import cupy as cp
    from exp_reductions import event_time

    import fusejit as fj

    def events(fn: Any) -> float:
        """Microseconds per call (CUDA events, median of rounds: ``exp_reductions``)."""
        return event_time(fn) * 1e6

    x = (cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4)
    y = cp.empty_like(x)
    nbytes = 2 * x.nbytes
    copy_us = events(lambda: cp.copyto(y, x))
    print(f"{rows}x{cols} float32: copy {copy_us:8.1f} us  {nbytes / copy_us / 1e3:7.0f} GB/s",
          flush=True)
    want = reference(cp.asnumpy(x))

    fj.set_backend(backend)
    from fusejit import runtime
    from fusejit.codegen import heuristics
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import kernel_cache
    from fusejit.testing import assert_matches_numpy

    def plan_of(fn: Any, arrays: list[Any], alternate: bool, cooperative: bool,
                coop_tile: tuple[int, int] = (8192, 8)) -> Any:
        """Plan ``fn`` afresh under the switches; a function running its launches alone."""
        heuristics.ALTERNATE_PASSES = alternate
        heuristics.COOPERATIVE_ROWS = cooperative
        heuristics.COOP_CHUNK["cuda"], heuristics.COOP_MAX_WARPS = coop_tile
        heuristics.COOP_MIN_ROW_BYTES = 0  # (the crossover is what the narrow shapes measure)
        runtime.forget_plans()
        out = fn(fj, *[fj.asarray(a) for a in arrays])
        plan = fj.plan(out)
        bufs = [leaf.buffer for leaf in structural_key([out._node])[1]]
        backend = runtime.current()
        return plan, lambda: backend.execute(plan.program, bufs, plan)[0]

    w = cp.random.standard_normal(cols, dtype=cp.float32)
    b = cp.random.standard_normal(cols, dtype=cp.float32)
    programs = {
        "softmax": (lambda xp, a: xp.softmax(a, axis=-1), [x], want),
        "layer_norm": (lambda xp, a, w, b: xp.layer_norm(a, w, b), [x, w, b], None),
    }
    # fusejit's plans: the looped row kernel with its second pass backwards (the default) and
    # forwards, then the cooperative row kernel (heuristics.COOPERATIVE_ROWS) with each of
    # ``coop_tiles`` (elements per program, most warps); the tiling line of the emitted source
    # shows which kernel ran
    variants = [(True, False, (8192, 8)), (False, False, (8192, 8))]
    variants += [(True, True, tile) for tile in coop_tiles]
    for name, (fn, arrays, expected) in programs.items():
        for alternate, cooperative, tile in variants:
            plan, run = plan_of(fn, arrays, alternate, cooperative, tile)
            got = cp.asnumpy(run())
            if expected is None:  # (the looped kernel's answer is the reference here)
                expected = got
            err = float(np.abs(got - expected).max())
            us = events(run)
            tiling = "; ".join(line.split("tiling:", 1)[1].strip()[:110]  # as emitted
                               for e in kernel_cache._emit_cache.values()
                               for line in e.source.splitlines()[:4] if "# tiling:" in line)
            kind = f"cooperative rows, at most {tile[0]} elements and {tile[1]} warps" \
                if cooperative else f"second pass {'backwards' if alternate else 'forwards'}"
            print(f"fusejit {name} {rows}x{cols} ({len(plan.kernels)} kernel(s), {kind}) "
                  f"{us:8.1f} us  {100 * copy_us / us:5.1f}% of copy  max abs difference "
                  f"{err:.1e}  [{tiling}]", flush=True)
            if backend == "cuda" and len(kernel_cache._emit_cache) == 1 and not fusejit_only:
                # the same emitted kernel launched by Triton itself, without fusejit's runtime
                # (is a gap to the hand-written kernel in the kernel or around it?)
                (emitted,) = kernel_cache._emit_cache.values()
                for fusion in (False, True):
                    try:
                        direct = direct_launch_us(emitted, arrays, events, fusion)
                        print(f"    the same source launched by Triton directly, fp fusion "
                              f"{'on ' if fusion else 'off'} {direct:8.1f} us  "
                              f"{100 * copy_us / direct:5.1f}% of copy", flush=True)
                    except Exception as exc:  # noqa: BLE001  (report, go on)
                        print(f"    direct launch failed: {type(exc).__name__}: {exc}"[:300])
    heuristics.COOP_CHUNK["cuda"], heuristics.COOP_MAX_WARPS = 8192, 8
    if fusejit_only:
        heuristics.ALTERNATE_PASSES, heuristics.COOPERATIVE_ROWS = True, False
        return 0
    # the cooperative kernel against NumPy at other shapes and dtypes (waits on the GPU)
    rng = np.random.default_rng(3)
    for shape, dtype in (((3, 100003), np.float32), ((64, 1 << 17), np.float32),
                         ((1, 1 << 19), np.float32), ((16, 1 << 18), np.float16),
                         ((8, 40000), np.float64)):
        host = (rng.standard_normal(shape) * 3).astype(dtype)
        hw = rng.standard_normal(shape[1]).astype(dtype)
        for name, fn in (("softmax", lambda xp, a, w: xp.softmax(a, axis=-1)),
                         ("layer_norm", lambda xp, a, w: xp.layer_norm(a, w)),
                         ("rms_norm", lambda xp, a, w: xp.rms_norm(a, w))):
            try:
                plan, run = plan_of(fn, [cp.asarray(host), cp.asarray(hw)], True, True)
                coop = any("cooperative" in line for line in plan.explain().splitlines())
                got = cp.asnumpy(run())
                with fj.using_backend("numpy"):
                    want_np = fn(fj, fj.asarray(host), fj.asarray(hw)).numpy()
                assert_matches_numpy(got, want_np)
                print(f"cooperative {name} {shape} {np.dtype(dtype).name}: matches NumPy "
                      f"(cooperative kernel: {coop})", flush=True)
            except Exception as exc:  # noqa: BLE001  (report it, check the rest)
                print(f"cooperative {name} {shape} {np.dtype(dtype).name}: FAILED "
                      f"{type(exc).__name__}: {exc}"[:400], flush=True)
    heuristics.ALTERNATE_PASSES, heuristics.COOPERATIVE_ROWS = True, False
    if backend != "cuda":
        return 0

    import torch  # (after fusejit's part: its threads would slow fusejit's host work)
    tx_, ty_ = torch.from_dlpack(x), torch.from_dlpack(y)
    for chunks, warps in VARIANTS:
        block = block_for(cols, chunks)
        if (chunks - 1) * block >= cols:
            print(f"chunks {chunks}: a chunk would be empty, skipped")
            continue
        partials = torch.zeros(rows * chunks * 2, dtype=torch.float32, device="cuda")
        sync = torch.zeros(sync_words(rows, chunks), dtype=torch.int32, device="cuda")

        def run(chunks: int = chunks, block: int = block, warps: int = warps,
                partials: Any = partials, sync: Any = sync) -> None:
            coop_softmax_rows[(rows * chunks,)](tx_, ty_, partials, sync, rows, cols,
                                                chunks_per_row=chunks, block=block,
                                                spin_limit=SPIN_LIMIT, redo_block=redo_for(block),
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
                  f"counters clean: {not state[:2].any() and not state[3:].any()}  "
                  f"chunks given up: {int(state[2])} in the first launch, "
                  f"{int(state_after[2])} in all", flush=True)
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
    parser.add_argument("--coop-tiles", default="8192x8",
                        help="fusejit's cooperative tiles to time: ELEMENTSxWARPS,...")
    parser.add_argument("--fusejit-only", action="store_true",
                        help="time fusejit's plans alone")
    args = parser.parse_args()
    if args.compile_only:
        return compile_only(args.cols)
    if args.interpret:
        return interpret_check(min(args.rows, 8), min(args.cols, 5000))
    tiles = tuple(tuple(int(v) for v in t.split("x")) for t in args.coop_tiles.split(","))
    return gpu_run(args.rows, args.cols, coop_tiles=tiles,  # type: ignore[arg-type]
                   fusejit_only=args.fusejit_only)


if __name__ == "__main__":
    sys.exit(main())
