"""Tile shapes, warps and split counts, chosen from a region's shape and dtypes.

One place for every number the emitter launches with, so that tuning is one
file and each choice carries the reason that ``plan.explain()`` and the kernel
header print. The GPU numbers are for an H100/H200 (132 SMs, 4.3-4.8 TB/s):

* A kernel reaches the memory bandwidth when every SM has several programs in
  flight (``TARGET_PROGRAMS``) and every warp's loads are contiguous 16-byte
  vectors. Tiles of about 4096 elements (2048 for 8-byte types) with 8 warps
  give each thread 16 elements, enough independent loads to cover latency.
* Inner reductions (reduced axes contiguous) put the reduced axis across the
  tile; outer reductions (kept axis contiguous, ``x.sum(axis=0)``) put the kept
  axis across it, 32 or more kept points wide so a warp's row is at least 128
  bytes.
* When the kept extent alone cannot give enough programs, the reduced axis is
  split across programs (a split reduction: partials, which the last program
  of each row block combines, in the same launch).

The ``interpret`` target runs on the CPU, where each program instance costs
Python time: it gets the largest blocks that stay within a memory budget.

Candidates (``FUSEJIT_AUTOTUNE=1``, ``fusejit/runtime/autotune.py``): each kernel kind has a
``*_candidates`` function returning a short list of configs, the heuristic's choice first,
then a few neighbours (half or double the block, other warp counts, other stage counts or
split factors). The emitter takes any of them in place of the heuristic's (``emit_kernel``'s
``tiles``), so a candidate changes numbers, never code paths. The ``interpret`` target
has one candidate: the heuristic's.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

#: SMs of the GPU the heuristics are tuned for (H100/H200).
SMS = 132
#: Programs to aim for: 4 per SM, so that every SM has work and the tail is short.
TARGET_PROGRAMS = 4 * SMS

#: Whether a looped pass over a row that follows a forward pass runs backwards, so that
#: the tiles read last, the likeliest still in L2, are re-read first
#: (``triton_emitter._Emitter._close_loop``; ``bench/exp_wide_softmax.py`` times both).
ALTERNATE_PASSES = True
#: Whether a row reduction whose rows do not start on 16-byte boundaries reads each row from
#: the 16-byte word it starts in (``triton_emitter._Emitter._row_window``), so its loads move
#: 16 bytes at a time, not one element (``bench/exp_row_window.py`` times both).
ROW_WINDOW = True
#: Whether row kernels that store rows (softmax) read them through a row window too where
#: that pays (``triton_emitter._Emitter._window_stores_pay``: 2-byte elements, no operand read
#: along the columns alone), storing whole words 16 bytes at a time and the row's shared first
#: and last words one element at a time.
ROW_WINDOW_STORES = True
#: Largest row (next power of two) kept in registers by one program, by target.
PERSISTENT_LIMIT = {"cuda": 16384, "interpret": 1 << 16}
#: Elements per program of a 1-D pointwise kernel.
POINTWISE_BLOCK = {"cuda": 1024, "interpret": 1 << 14}
#: Tile edge of a 2-D pointwise kernel (an input read transposed): 64x64 on a GPU.
TILE_2D = {"cuda": 64, "interpret": 128}

#: Elements in one tile step of a looped or outer reduction on the GPU (4-byte types).
TILE_ELEMENTS = 4096
#: Fewest kept points across an outer-reduction tile: 32 x 4 bytes = one 128-byte line.
OUTER_MIN_KEPT = 32
#: Most kept points across an outer-reduction tile.
OUTER_MAX_KEPT = 256
#: Longest reduced extent (next power of two) an outer reduction over many kept points holds
#: in one tile (``reduction_tiles``). H200, exp_tiles.py --set outer256, 32x256 tiles with 4
#: warps against 256 kept points by 8 or 16 reduced: normalize over 144 (x 129955) 55.7 ->
#: 24.3 us, var over 250 40.0 -> 27.6, softmax over 230 46.2 -> 28.1, max over 160 34.6 ->
#: 34.2, float64 sum over 180 38.9 -> 37.0, float32 sum over 200 32.6 -> 34.2 (the one loss).
OUTER_SHORT_EXTENT = 256
#: Largest tile (elements) of 4-byte rows in registers that takes half the warps.
SMALL_ROW_TILE = 2048

#: Fewest elements one partial program of a split reduction combines (when choosing).
SPLIT_MIN_CHUNK = 4096
#: Most partials per output: the last program of a row block combines them in one tile.
SPLIT_MAX = 1024
#: Most partials per output of a split var/std (Welford's count, mean and m2 per partial):
#: one per SM. H200, exp_tiles.py, var over axis 0 of 200000x50 (2 row blocks): 264 partials
#: 23.8 us, 132 14.3 us.
SPLIT_MAX_WELFORD = SMS
#: Kept points across a split outer reduction's tile (one row block): 32, one 128-byte line of
#: float32. The last program of each row block combines that block's partials, so narrower
#: blocks finish in parallel; measured on the H200 (kernel us, 64 -> 32 kept points): std over
#: axis 0 of 262144x256 79 -> 76, batch norm of 16384x4096 238 -> 230, of 262144x256 220 ->
#: 216 (the two-launch split before: 76, 234, 217).
SPLIT_OUTER_KEPT = 32

#: Calls of libdevice's slow math (sin, cos, tanh...: tens of instructions each) per element
#: from which a pointwise kernel is compute-bound: it takes 2 elements per thread (blocks of
#: 512, 8 warps) instead of 8, so that fewer registers stay live across the calls and more
#: warps hide their latency. H200, six rounds of ``sin(y) * 1.5 + cos(y) * 0.5`` on 2**26
#: float32 (bench/exp_sin.py), us per block/warps: 1024/4 915, 512/4 791, 256/4 747, 128/4
#: 718, 256/8 728, 512/8 688 (torch.compile's kernel: 670).
HEAVY_MATH_CALLS = 4
#: Values a reduction keeps per element of its tile: Welford's count, mean and m2 are three
#: (the count is one tile row, but mean and m2 are two full tiles against a sum's one), so an
#: outer reduction holding them takes half the tile to keep its registers. H200, std over
#: axis 0 of 65536x1024 float32, split in 17 (bench/autotune_check.py): 75 us with 32x128
#: tiles, 69 us with 32x64.
WELFORD_STATE = 2

#: Most candidates a kernel's tiling is chosen from (the heuristic's and its neighbours).
MAX_CANDIDATES = 6
#: Largest tile (elements) a reduction candidate may hold in registers.
CANDIDATE_MAX_TILE = 16384


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def warps_for(tile: int) -> int:
    """``num_warps`` for a tile of ``tile`` elements: about 16 elements per thread."""
    return 16 if tile >= 8192 else 8 if tile >= 2048 else 4 if tile >= 512 else 2


@dataclass(frozen=True)
class ReductionTiles:
    """How one reduction region is tiled: ``block_m`` kept points (rows) by ``block_n``
    reduced elements per step, ``num_warps``, and whether a row stays in registers."""

    block_m: int
    block_n: int
    num_warps: int
    persistent: bool
    why: str = field(default="", compare=False)


def reduction_tiles(target: str, rows: int, cols: int, outer: bool, itemsize: int,
                    state: int = 1, inner: int = 0) -> ReductionTiles:
    """Tiles of a (non-split) reduction with ``rows`` outputs of ``cols`` elements each.

    ``outer``: the kept axis is the contiguous one. ``itemsize``: the widest
    element size in the region (8-byte types halve the tile to bound registers).
    ``state``: accumulator tiles per reduction step (``WELFORD_STATE`` for var/std:
    an outer reduction then halves its tile). ``inner``: a short inner kept run's
    points padded to a power of two (``Domain.short_inner_kept``; ``rows`` counts the
    padded points), which a tile holds across (``short_run_tiles``).
    """
    if target == "interpret":
        bn = next_pow2(cols)
        persistent = bn <= PERSISTENT_LIMIT["interpret"]
        bn = min(bn, PERSISTENT_LIMIT["interpret"])
        bm = max(1, min(next_pow2(rows), (1 << 16) // bn))
        return ReductionTiles(bm, bn, 4, persistent, "interpreter: largest blocks")
    tile = TILE_ELEMENTS // (2 if itemsize >= 8 else 1)
    if not outer:
        bn = next_pow2(cols)
        limit = PERSISTENT_LIMIT["cuda"] // (2 if itemsize >= 8 else 1)
        if itemsize == 4 and bn == 2 * limit and rows >= TARGET_PROGRAMS:
            # float32 rows of 16K-32K elements with enough of them to fill the GPU: held in
            # registers by 16 warps, one read, where a looped row reads twice (H200,
            # bench/exp_s5.py, looped -> held: softmax of 800, 1100, 2000 and 4000 rows of
            # 20000-30000 47.1 -> 58.9 ... 330.6 -> 239.9 us, 1.14-1.38x; layer norm of 1200x32000
            # 120.0 -> 80.6; log_softmax of 6000x18000 275.3 -> 215.6; var of 3000x20000 64.9 ->
            # 57.0; 500 rows 34.0 -> 33.1; 427 rows 34.5 -> 36.4, so not under TARGET_PROGRAMS)
            return ReductionTiles(1, bn, 16, True, f"row of {cols} in registers, 16 warps "
                                                   f"({rows} rows fill the GPU)")
        if bn <= limit:
            bm = max(1, min(next_pow2(rows), 2048 // bn))
            # short rows: several per program, but keep enough programs to fill the GPU
            while bm > 1 and -(-rows // bm) < TARGET_PROGRAMS and bm * bn > 512:
                bm //= 2
            warps = warps_for(bm * bn)
            why = f"row of {cols} in registers, {bm} row(s) per program"
            if itemsize <= 2 and warps > 2:
                # each thread holds 64 bytes of the row, as float32's 16 elements: H200,
                # softmax of 32768x4096 float16 (autotune_check), 149 us with 8 warps, 136 with 4
                warps //= 2
                why += f", {warps} warps for 2-byte elements"
            elif itemsize == 4 and bm * bn <= SMALL_ROW_TILE:
                # short rows: fewer warps, more programs resident per SM (H200, exp_tiles.py:
                # sums of rows of 200, 333 and 700, 8 -> 4 warps: 59.6 -> 58.7, 81.7 -> 60.5,
                # 60.9 -> 59.3 us; softmax of 700, 140.6 -> 121.8; rows of 100-1500 equal)
                warps = max(2, warps // 2)
                unaligned = (cols * itemsize) % 16 != 0
                if unaligned:
                    # rows not a multiple of 16 bytes load element by element (no 16-byte
                    # vectors): half again (rows of 141: 129.3 us with 8 warps, 75.8 with 4,
                    # 54.5 with 2; of 333: 60.5 -> 59.2, a normalize over them 36.8 -> 36.9)
                    warps = max(2, warps // 2)
                why += f", {warps} warps for short rows" + (" not 16-byte aligned" if unaligned else "")
            return ReductionTiles(bm, bn, warps, True, why)
        if rows < TARGET_PROGRAMS:
            # few programs: each keeps more bytes in flight (H200, softmax of 256 rows of
            # 65536: 55.6 us in steps of 8192 against 62.6 us in steps of 4096, autotuned)
            tile *= 2
        why = f"row of {cols} > {limit}: looped in steps of {tile // state}"
        if state > 1:
            # Welford's state per element: half the step (H200, exp_tiles.py, var of
            # 3000x30000: 127.0 -> 92.5 us, std of 1000x54452: 81.7 -> 61.8; a layer norm
            # of 4000x20000, whose output pass does not need it, 215.9 -> 220.3)
            tile //= state
            why += " (Welford: half the step)"
        return ReductionTiles(1, tile, warps_for(tile), False,
                              why + " (a pass after a forward one runs backwards)")
    # outer: kept points across the tile (coalesced), as few per program as keeps the GPU busy
    if state > 1:
        tile //= state
    if inner:
        bm, bn = short_run_tiles(inner, rows, cols, itemsize, tile)
        return ReductionTiles(bm, bn, 8, next_pow2(cols) <= bn,
                              f"outer: one short kept run of {inner} (padded) across the "
                              f"tile, {bn} reduced per step")
    bm = next_pow2(-(-rows // TARGET_PROGRAMS))
    bm = min(max(OUTER_MIN_KEPT, min(OUTER_MAX_KEPT, bm)), next_pow2(rows))
    full = next_pow2(cols)
    bn = max(1, min(full, tile // bm))
    persistent = full <= bn
    if not persistent and full <= OUTER_SHORT_EXTENT and rows >= TARGET_PROGRAMS * OUTER_MIN_KEPT:
        # a short reduced extent under many kept points: the whole extent in one tile, fewer
        # kept points across it, 4 warps (H200, exp_tiles.py, 109 reduced x 184950 kept: sum
        # 30.3 -> 23.4 us, min in float64 53.5 -> 44.7; softmax over 96 x 133000: the
        # statistics 25.2 -> 17.3 us)
        bm = max(OUTER_MIN_KEPT, min(bm, 2 * tile // full))
        return ReductionTiles(bm, full, 4, True,
                              f"outer: the reduced extent of {cols} in one tile, {bm} kept "
                              f"points across it")
    return ReductionTiles(bm, bn, warps_for(bm * bn * state), persistent,
                          f"outer: {bm} kept points across the tile, {bn} reduced per step"
                          + (" (Welford: half the tile)" if state > 1 else ""))


#: Elements of an outer reduction's tile over a short inner kept run, by element size (other
#: sizes: ``SHORT_RUN_TILE_OTHER``): the run's loads are one element per lane (masked
#: padding, no vectors), and fewer of them per thread ran faster. H200, bench/exp_s6.py, 8
#: warps, us: min over axis 1 of 374x13355x3 float64, 4x512 76.4, 4x256 48.0; sum over axis 1
#: of 512x16384x3 float32, 4x1024 33.8, 4x512 29.8; max over axis 1 of 1024x8192x6 float16,
#: 8x512 57.5, 8x256 32.6, 8x128 30.3; sum of 300x10000x12 float32, 16x256 43.7, 16x128 40.5.
SHORT_RUN_TILE = {4: 2048}
SHORT_RUN_TILE_OTHER = 1024
#: ``num_warps`` of a split reduction's partials over a short inner kept run, by element size
#: (others: 8). float64 (1024-element tiles): 4, eight elements a thread where 8 warps gave
#: four. H100, min over axis 1 of 512x16384x3 float64 (``bench/exp_s16_shortrun.py``, three
#: runs, ``bench/results/h100-s16-call4``, ``-call8``, ``-call18``), % of the copy rate with 8 /
#: 4 warps: 78.4 / 85.4, 76.2 / 81.4, 76.7 / 84.7. float32 channel sums of 128x224x224x3
#: (4x1024 tiles) lost with 4 (82.1 / 73.6); float16 and the one-launch form are unmeasured.
SHORT_RUN_SPLIT_WARPS = {8: 4}


def short_run_tiles(inner: int, rows: int, cols: int, itemsize: int, tile: int
                    ) -> tuple[int, int]:
    """(block_m, block_n) of an outer reduction over a short inner kept run of ``inner``
    points (padded to a power of two; ``Domain.short_inner_kept``; ``rows`` counts the padded
    points) of ``itemsize``-byte elements: one run across the tile, the rest of
    ``SHORT_RUN_TILE`` along the reduced axis. Each reduced point's run is contiguous, so a
    warp's lanes read ``32 // inner`` neighbouring runs, one stretch of memory; 32 kept points
    across (the tile of other outer reductions) would be runs of several outer points, far
    apart (H200, min over axis 1 of 374x13355x3 float64: 82.9 us with 32x64 tiles, 48.0 with
    4x256; 0.68x of torch.compile's 56 us before).

    A single run (channel statistics of a channels-last image: every program a chunk of one
    run's reduction) keeps the outer reductions' ``tile``: smaller ones were slower there
    (sum over (0, 1, 2) of 128x224x224x3: 4x1024 27.4 us, 4x512 30.2; var of 64x112x112x3:
    4x2048 19.7, 4x512 22.1)."""
    if rows > inner:
        tile = SHORT_RUN_TILE.get(itemsize, SHORT_RUN_TILE_OTHER)
    return inner, max(1, min(next_pow2(cols), tile // inner))


# -- cooperative rows ----------------------------------------------------------------------
#
# A row too wide for one program's registers is read twice by a looped row kernel when its
# values go back over the row (softmax, layer norm: the statistics, then the outputs), three
# memory passes where a copy makes two. A *cooperative* row kernel spreads each row over
# several programs that each hold one chunk in registers: every program writes its chunk's
# partial statistics, waits (atomic counters) until the row's other programs have, combines
# them and writes its chunk's outputs, one read per element. Programs take their row and
# chunk from a ticket counter in the order they start, so the programs of the lowest
# unfinished row are always resident and a wait ends; a program that waits past a bound
# gives its chunk to the row's last program, which reads it again (right in any schedule,
# Triton's interpreter included).
#
# Measured on the H200 (float32, ``bench/exp_wide_softmax.py --fusejit-only``, % of the copy
# rate, looped kernel -> cooperative with chunks of 8192 and 4 warps; ``bash
# bench/gpu_coop_rows.sh``): softmax 256x2**18 64 -> 80, 512x2**17 65 -> 81, 1024x2**16 64 ->
# 85, 2048x2**15 69 -> 78; layer norm 57 -> 68, 56 -> 71, 57 -> 71, 73 -> 74. Chunks of 16384
# with 16 warps: 47-80; 8 warps: 56-80 (the fewer warps, the more programs per SM, so some
# load while others wait). The emitted kernel ran at 45-65% until it lost a grid-wide count of
# programs done, a row's partials stored 256 apart, a duplicated max, a per-row flag loop and
# the softmax's second exp per element (``bench/exp_coop_gap.py``,
# ``bench/exp_wide_softmax2.py``).

#: Whether wide rows whose values go back over the row run as cooperative row kernels
#: (``FUSEJIT_COOPERATIVE_ROWS=0`` at import: the looped row kernel instead).
COOPERATIVE_ROWS = os.environ.get("FUSEJIT_COOPERATIVE_ROWS", "1") != "0"
#: Elements of a row one program of a cooperative row kernel holds (float32; 8-byte types
#: half), by target.
COOP_CHUNK = {"cuda": 8192, "interpret": 1 << 16}
#: Most warps of a cooperative row program on a GPU.
COOP_MAX_WARPS = 4
#: Most programs per row (the partials a program combines), and in all (counters per row).
COOP_MAX_CHUNKS = 64
COOP_MAX_PROGRAMS = 1 << 16
#: Spins a program waits for its row's other programs before it gives its chunk up (a GPU
#: spin is about a microsecond: a second; never reached when the row's programs are resident).
COOP_SPIN_LIMIT = 1 << 20
#: The tile in which a row's last program re-reads a chunk given up (few registers).
COOP_REDO_BLOCK = 1024
#: Narrowest row (bytes) that runs cooperatively on a GPU: rows of 128 KB (2048x2**15
#: float32) measured 78% against the looped kernel's 69% (layer norm 74 against 73); narrower
#: rows than that were not measured, and the looped kernel's re-read is likelier an L2 hit.
COOP_MIN_ROW_BYTES = 1 << 17


@dataclass(frozen=True)
class CoopTiles:
    """A cooperative row kernel: ``chunks`` programs per row, each holding ``block``
    elements of it, ``num_warps`` warps."""

    chunks: int
    block: int
    num_warps: int
    why: str = field(default="", compare=False)
    #: the chunk held as this many tiles, the epilogue finishing one before the next
    #: (``coop_sub_blocks``)
    sub_blocks: int = 1
    #: registers per thread ptxas may use (0: it chooses)
    max_registers: int = 0
    #: elements per 16-byte word when the chunks are laid from the word each row starts in
    #: (rows that are not 16-byte multiples, ``COOP_WINDOW``), else 0
    window: int = 0
    #: columns each chunk covers when fewer than ``block`` (``COOP_BALANCE``: the row split
    #: into equal chunks, each a whole number of 16-byte words), else 0
    span: int = 0


#: Cooperative rows run by a persistent grid of ``COOP_PIPELINE_PROGRAMS_PER_SM`` programs an
#: SM, each taking chunks in turn and loading the next one (and storing its partials) before
#: it waits for the row of the chunk it holds, so that the wait overlaps a load
#: (``cooperative_rows.CooperativeRowEmitter._pipeline_chunks``).
#: ``FUSEJIT_COOP_PIPELINE=1``: an experiment (``bench/exp_s20_wide.py`` times it beside a
#: hand-written form), off: on an H100 it lost (softmax over 256x2**18 at 84% of the copy rate
#: against 92% one chunk a program, layer norm 81 against 82%, ragged rows 43-58 against 70%;
#: a program holding two chunks leaves half the bytes in flight), untimed on an H200.
COOP_PIPELINE = os.environ.get("FUSEJIT_COOP_PIPELINE", "0") == "1"
COOP_PIPELINE_PROGRAMS_PER_SM = 2


#: Reductions whose cooperative chunk is held as ``COOP_SUB_BLOCKS`` tiles under a cap of
#: ``COOP_MAX_REGISTERS`` (``coop_sub_blocks``).
#: (``FUSEJIT_COOP_SUB_BLOCKS=1`` at import: one tile, no cap, as before.)
COOP_SUB_BLOCK_OPS = frozenset({"sum", "m2"})
COOP_SUB_BLOCKS = max(1, int(os.environ.get("FUSEJIT_COOP_SUB_BLOCKS", "2") or 2))
COOP_MAX_REGISTERS = 128
#: Vectors along the row the epilogue must read for the split to pay, and whether rows that
#: end in a partial chunk split (tests and experiments set 0 and True to split every chunk).
COOP_SUB_BLOCK_MIN_ROW_OPERANDS = 1
COOP_SUB_BLOCK_RAGGED = False


def coop_sub_blocks(target: str, tiles: CoopTiles, ops: frozenset[str], itemsize: int, cols: int,
                    row_operands: int) -> CoopTiles:
    """``tiles`` with its chunk held as two halves and ptxas's registers capped at 128, for a
    chunk whose widest value is 4 bytes, whose reductions are sums and m2s, whose rows split
    into whole chunks (``cols``), and whose epilogue reads ``row_operands`` >= 1 vectors along
    the row (a layer norm's weight and bias, an RMS norm's weight); else ``tiles``.

    A layer norm's cooperative program holds its 64 values a thread, then in the epilogue all
    64 of the weight and 64 of the bias at once: 167 registers, three programs of 4 warps an
    SM where four fit at 128. Held as halves, each half finished (weight, bias, store) before
    the next, it needs 149; capped at 128 it spills 0-16 bytes. H100, fraction of a copy's
    rate, one tile -> halves (``python3 bench/exp_s18_halves.py``,
    ``bench/results/h100-s18-call3``): layer norm 256x2**18 81.9 -> 84.7%, 64x2**16 64.0 ->
    67.5%, 512x2**17 84.5 -> 83.9%; RMS norm 64x2**16 73.7 -> 86.9%, 256x2**18 89.7 -> 88.6%.
    Repeated on the same machine (``-call6``): 81.4 -> 84.3%, 63.4 -> 66.4%, 84.0 -> 83.3%;
    71.9 -> 82.4%, 89.4 -> 88.4%. Left as one tile because they lost or gained nothing:
    ragged rows (a layer norm of 256x150,000: 68.4 -> 67.0%, ``-call6``; of 256x150,001: 50.3
    -> 45.7%; windowed rows are one tile), no vector along the row (``x / x.sum()`` 94.0 -> 91.9%, a
    layer norm without weight and bias 91.6 -> 91.6%), softmax's max and sumexp partials
    (level at 2**18 and 2**16, log-softmax 89.1 -> 85.1%, ragged softmax 49.3 -> 38.0%). The
    cap alone, on one tile, spills 64-96 bytes and gains nothing; 96 registers lose
    everywhere; quarters lose at 64x2**16 (``bench/exp_s16_ln.py --set registers``,
    ``bench/results/h100-s18-call1``). 8-byte values were not measured."""
    if COOP_SUB_BLOCKS == 1 or tiles.window or tiles.span or itemsize != 4 or not ops \
            or not ops <= COOP_SUB_BLOCK_OPS or tiles.block < 2 * COOP_SUB_BLOCKS \
            or (cols % tiles.block and not COOP_SUB_BLOCK_RAGGED) \
            or row_operands < COOP_SUB_BLOCK_MIN_ROW_OPERANDS:
        return tiles
    why = (f"{tiles.why}, as {COOP_SUB_BLOCKS} tiles of {tiles.block // COOP_SUB_BLOCKS}, "
           f"each written before the next")
    if target == "cuda":
        why += f", at most {COOP_MAX_REGISTERS} registers a thread (4 programs an SM)"
    return replace(tiles, sub_blocks=COOP_SUB_BLOCKS, why=why,
                   max_registers=COOP_MAX_REGISTERS if target == "cuda" else 0)


#: Lay the chunks of rows that are not 16-byte multiples from the 16-byte word each row
#: starts in (``cooperative_tiles``'s ``window``), so that they load and store 16 bytes at a
#: time, instead of leaving such rows to the looped kernel. H100, kernels alone, looped /
#: windowed, % of the copy rate (``python3 bench/exp_s18_halves.py --ways 0,3``,
#: ``bench/results/h100-s19-call1``): softmax 256x131,073 44.3 / 51.7, 256x100,003 46.4 /
#: 52.1, 256x150,001 45.7 / 53.4; layer norm 51.9 / 54.0, 53.4 / 54.1, 47.1 / 54.1.
#: ``FUSEJIT_COOP_WINDOW=0`` at import: such rows run looped.
COOP_WINDOW = os.environ.get("FUSEJIT_COOP_WINDOW", "1") == "1"
#: The chunk (float32 elements) of a windowed cooperative row on a GPU whose partials are
#: maxes and sumexps only (softmax, log-softmax): twice the programs an SM, so that some load
#: while others wait. H200, kernels alone, shipped chunks of 8192 -> 4096, % of the copy rate
#: (``python3 bench/exp_s18_halves.py --ways 5,6``, ``bench/results/h200-s19-call4``):
#: softmax 256x131,073 40.4 -> 55.3, 256x100,003 40.7 -> 54.4, 256x150,001 41.7 -> 54.7,
#: 256x50,257 36.6 -> 48.7. Not for sums and m2s (layer norm 256x131,073 40.1 -> 22.4,
#: 256x50,257 36.5 -> 33.2), nor for rows that are 16-byte multiples (softmax 256x2**18
#: 80.3 -> 77.5, 256x128,256 71.8 -> 70.1; 256x150,000 65.1 -> 69.8 and 256x151,936
#: 64.6 -> 69.9 gained, a rule for those is not made from two shapes).
COOP_WINDOW_SOFTMAX_CHUNK = 4096
#: The reductions of a row that takes ``COOP_WINDOW_SOFTMAX_CHUNK`` (softmax's partials).
COOP_SOFTMAX_OPS = frozenset({"max", "sumexp"})
#: The alignment (bytes) a cooperative row's chunks are laid from: 16, a load's widest word;
#: rows that are not multiples of it are windowed (``COOP_WINDOW``). 128 (a cache line) is
#: the experiment of rows that are 16-byte multiples but start off a line
#: (``bench/exp_s18_halves.py`` way 8; untimed).
COOP_WINDOW_BYTES = 16
#: Split a row that chunks of ``block`` do not divide into equal chunks (``CoopTiles.span``:
#: a 16-byte multiple, each program's tile masked past its span) instead of whole chunks and
#: a short last one: the other suspect of ragged rows' loss (``bench/exp_s18_halves.py``
#: way 9; untimed, ``FUSEJIT_COOP_BALANCE=1`` at import).
COOP_BALANCE = os.environ.get("FUSEJIT_COOP_BALANCE", "0") == "1"


def coop_row_capacity(itemsize: int, target: str = "cuda") -> int:
    """Elements of the widest row a cooperative row kernel holds (``COOP_MAX_CHUNKS`` chunks
    of the most elements a program holds: ``cooperative_tiles``' limit), 0 when cooperative
    rows are off. The fuser keeps a wider row's broadcast back out of its reduction's kernel
    when there are too few rows to fill the GPU
    (``fuse.rules.rule_broadcast_back_fills_gpu``)."""
    if not COOPERATIVE_ROWS:
        return 0
    halved = 2 if itemsize >= 8 else 1
    return COOP_MAX_CHUNKS * (min(COOP_CHUNK[target], PERSISTENT_LIMIT[target]) // halved)


def cooperative_tiles(target: str, rows: int, cols: int, itemsize: int,
                      row_items: tuple[int, ...] = (), window: int = 0,
                      ops: frozenset[str] = frozenset()) -> CoopTiles | None:
    """The chunks of a cooperative row kernel for ``rows`` rows of ``cols`` elements, or None
    when one does not pay (rows under ``COOP_MIN_ROW_BYTES`` on a GPU, or rows of an input or
    output whose element sizes ``row_items`` do not make them 16-byte multiples, where the
    emitter cannot window them) or does not fit (more than ``COOP_MAX_CHUNKS`` per row, or
    too many programs).

    Rows that are not 16-byte multiples start off a 16-byte boundary, and chunks laid from
    the row's start have a column mask that is not constant over 4 elements: every load and
    store of the chunk, the weight's too, is one element (``LDG.E`` where aligned rows get
    ``LDG.E.128``, sm_90). The looped row kernel reads them twice but lost less. H200, kernels
    alone, looped / cooperative, % of the copy rate (``python3 bench/exp_s18_halves.py --ways
    0,1``, ``bench/results/h200-s18-call4``): softmax 256x131,073 38.7 / 23.5, 256x100,003 40.4
    / 36.1, 256x150,001 40.5 / 37.1; layer norm 256x131,073 43.1 / 36.9, 256x100,003 44.0 /
    37.5, 256x150,001 36.5 / 37.2. Such rows are therefore windowed (``COOP_WINDOW``), or left
    to the looped kernel where the emitter cannot window them.

    ``window``: the elements of a 16-byte word when the emitter can read the rows from the
    word each starts in (0: it cannot); the window's words are ``COOP_WINDOW_BYTES`` wide.
    With ``COOP_WINDOW`` such rows run cooperatively, their chunk ``k`` covering the row's
    columns ``k * block - s`` to ``(k + 1) * block - s`` (``s``: the row's start within its
    word), one chunk more where the shift needs it; on a GPU, chunks of
    ``COOP_WINDOW_SOFTMAX_CHUNK`` where the reductions ``ops`` are maxes and sumexps only and
    the row fits ``COOP_MAX_CHUNKS`` of them."""
    if target == "cuda" and cols * itemsize < COOP_MIN_ROW_BYTES:
        return None
    window *= COOP_WINDOW_BYTES // 16
    misaligned = any(cols * size % COOP_WINDOW_BYTES for size in row_items)
    windowed = COOP_WINDOW and window > 1 and misaligned
    if target == "cuda" and misaligned and not windowed:
        return None
    halved = 2 if itemsize >= 8 else 1  # (8-byte values: chunks of half the elements)
    limit = min(COOP_CHUNK[target], PERSISTENT_LIMIT[target]) // halved
    if windowed and target == "cuda" and ops and ops <= COOP_SOFTMAX_OPS:
        small = COOP_WINDOW_SOFTMAX_CHUNK // halved
        if -(-(cols + window - 1) // small) <= COOP_MAX_CHUNKS:
            limit = min(limit, small)
    block = max(1, min(next_pow2(-(-cols // 2)), limit))
    if windowed and block % window:
        return None
    chunks = -(-(cols + (window - 1 if windowed else 0)) // block)
    if chunks < 2 or chunks > COOP_MAX_CHUNKS or rows * chunks > COOP_MAX_PROGRAMS:
        return None
    warps = 4 if target == "interpret" else min(COOP_MAX_WARPS, warps_for(block))
    why = f"each row over {chunks} programs of {block} elements held in registers"
    span = 0
    if COOP_BALANCE and not windowed and cols % block:
        word = 16 // min(row_items or (itemsize,))
        even = -(-cols // chunks)  # (the columns of equal chunks, then whole words)
        span = -(-even // word) * word
        if span >= block or -(-cols // span) != chunks:
            span = 0
        else:
            why += f", each covering {span} of the row's columns (equal chunks)"
    if windowed:
        why += (f", laid from the {COOP_WINDOW_BYTES}-byte word each row starts in ({window} "
                f"elements a word; rows of {cols} are not {COOP_WINDOW_BYTES}-byte multiples)")
    return CoopTiles(chunks, block, warps, why, window=window if windowed else 0, span=span)


def split_tiles(target: str, rows: int, cols: int, outer: bool, itemsize: int,
                state: int = 1, inner: int = 0) -> tuple[int, int, int]:
    """(block_m, block_n, num_warps) of a split reduction's launch (its partials' tiles);
    ``state`` and ``inner`` as ``reduction_tiles``'s."""
    if target == "interpret":
        bm = min(next_pow2(rows), 64)
        return bm, max(1, min(next_pow2(cols), (1 << 16) // bm)), 4
    tile = TILE_ELEMENTS // (2 if itemsize >= 8 else 1)
    if outer and inner:
        bm, bn = short_run_tiles(inner, rows, cols, itemsize, tile // state)
        return bm, bn, SHORT_RUN_SPLIT_WARPS.get(itemsize, 8)
    if outer:
        bm = max(1, min(next_pow2(rows), SPLIT_OUTER_KEPT))
        bn = max(1, min(next_pow2(cols), tile // state // bm))
        return bm, bn, warps_for(bm * bn * state)
    return 1, min(next_pow2(cols), tile), 8


def choose_split(rows: int, reduce_size: int, row_blocks: int | None = None,
                 kept_per_program: int = 1, state: int = 1) -> int:
    """Partials per output of a split reduction whose region has no ``split`` attribute.

    Enough partial programs to fill the GPU several times (``row_blocks``
    programs per chunk index, default ``rows``; about ``TARGET_PROGRAMS`` in
    all), each combining at least ``SPLIT_MIN_CHUNK`` elements
    (``kept_per_program`` outputs times its chunk of the reduced extent), at
    most ``SPLIT_MAX`` (``SPLIT_MAX_WELFORD`` when ``state`` > 1: the last program combines
    Welford triples). E.g. ``sum`` of 2**26 elements: 528 partials of
    127100 elements; of 2**16 elements: 16 partials of 4096.
    """
    blocks = max(1, rows if row_blocks is None else row_blocks)
    by_programs = -(-TARGET_PROGRAMS // blocks)
    by_size = max(1, reduce_size * max(1, kept_per_program) // SPLIT_MIN_CHUNK)
    most = SPLIT_MAX if state == 1 else SPLIT_MAX_WELFORD
    return max(1, min(by_programs, by_size, most))



# -- pointwise tiles and candidates ------------------------------------------------------

#: Kernels over fewer elements (read or written) than this are not tuned: their time is the
#: launch, whatever the tiles.
TUNE_MIN_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class PointwiseTiles:
    """A 1-D pointwise kernel: ``block`` elements of the flat output per program."""

    block: int
    num_warps: int
    why: str = field(default="", compare=False)


@dataclass(frozen=True)
class Tiles2D:
    """A 2-D pointwise kernel (an input read transposed): ``tile_m x tile_n`` output tiles."""

    tile_m: int
    tile_n: int
    num_warps: int
    why: str = field(default="", compare=False)


@dataclass(frozen=True)
class SplitTiles:
    """A split reduction's partials launch: ``block_m x block_n`` tiles, ``num_warps``, and
    ``split`` partials per output (the last program of each row block combines them)."""

    block_m: int
    block_n: int
    num_warps: int
    split: int
    why: str = field(default="", compare=False)


def _pointwise_warps(block: int) -> int:
    return 4 if block >= 512 else max(1, block // 128)


#: Elements per thread of a 1-D pointwise kernel whose loads and stores cannot be 16-byte
#: vectors (``pointwise_tiles``): blocks of 512 with 4 warps, where 1024 give each thread 8.
#: H200, bench/exp_s6.py --set chains (``x[:, ::2]`` through four ops, a bias and a column
#: broadcast; flat sizes odd), us, 1024 / 4 warps -> 512 / 4 warps: float16 327453x187 read
#: from rows of 374, 187.1 -> 120.6; the same read plainly, 155.7 -> 96.0; float32 strided,
#: 252.7 -> 178.0; float32 1001x65537, over 187.8 -> 141.3; an aligned float16 65536x2048,
#: 190.4 with 1024 (at the copy rate). Not float64 (4097x8191: 132.1 with 1024, 157.8 with 512).
UNALIGNED_POINTWISE_BLOCK = 512
#: The narrowest element sizes (bytes) ``UNALIGNED_POINTWISE_BLOCK`` applies to.
UNALIGNED_POINTWISE_ITEMSIZES = (2, 4)


def pointwise_tiles(target: str, n: int, heavy_calls: int = 0, itemsize: int = 4
                    ) -> PointwiseTiles:
    """The heuristic's tiles of a 1-D pointwise kernel over ``n`` elements whose expression
    calls libdevice's slow math ``heavy_calls`` times per element; ``itemsize``: the
    narrowest element size of its buffers.

    A flat size that is not a multiple of 16 bytes of the narrowest elements makes the
    bounds mask break every load and store into single elements (Triton vectorizes a masked
    access only where the mask is constant across the vector): fewer elements per thread
    (``UNALIGNED_POINTWISE_BLOCK``) then keep more of them in flight (float16 and float32
    buffers: measured there).
    """
    block = min(POINTWISE_BLOCK[target], next_pow2(n))
    if target == "cuda" and heavy_calls >= HEAVY_MATH_CALLS:
        block = min(512, block)
        return PointwiseTiles(block, max(1, min(8, block // 64)),
                              f"{heavy_calls} calls of slow math per element: "
                              f"2 elements per thread")
    if (target == "cuda" and itemsize in UNALIGNED_POINTWISE_ITEMSIZES
            and n % (16 // itemsize) and block > UNALIGNED_POINTWISE_BLOCK):
        block = UNALIGNED_POINTWISE_BLOCK
        return PointwiseTiles(block, 4, f"{n} elements are not a multiple of 16 bytes: no "
                                        f"vector loads, 4 elements per thread")
    return PointwiseTiles(block, _pointwise_warps(block), "heuristic")


#: Copies of libdevice's slow math one thread of a 2-D pointwise kernel may inline (calls per
#: element times elements per thread): Triton inlines each call at every element a thread
#: holds, and ptxas's time grows with them. Draw 20261207:24's u11 (sin three times over a
#: transposed float32 read, 64x128 tiles of 8 warps: 32 elements per thread, 96 sines)
#: compiled in 2.45 s on the H200's host (3.2-4.6 s on the development machine), 0.43 s at
#: 32x32 there. 64x64 tiles of 8 warps (16 elements per thread) with one call stay as they were.
HEAVY_2D_COPIES = 16


def tiles_2d(target: str, m: int, n: int, itemsize: int = 4, row_bytes: int = 0,
             heavy_calls: int = 0) -> Tiles2D:
    """The heuristic's tiles of a 2-D pointwise kernel over output axes of ``m`` and ``n``.

    ``itemsize``: the widest element; ``row_bytes``: the distance between the transposed
    input's rows (0: unknown); ``heavy_calls``: calls of libdevice's slow math per element.
    Square tiles of ``TILE_2D``, 8 warps from 4096 elements; an edge shorter than that (a
    transposed axis of 3, say) gives its share of the tile to the other edge, so that a
    program still moves a full tile's bytes. With slow math, at most ``HEAVY_2D_COPIES``
    inlined calls per thread: the longer edge halves until the tile fits.
    """
    edge = TILE_2D[target]
    tm, tn = min(edge, next_pow2(m)), min(edge, next_pow2(n))
    why = "heuristic"
    if tm < edge:
        tn = min(next_pow2(n), edge * edge // tm)
        why = "heuristic: a short transposed axis, a longer tile along the last"
    elif tn < edge:
        tm = min(next_pow2(m), edge * edge // tn)
        why = "heuristic: a short last axis, a longer tile along the transposed one"
    elif target == "cuda" and itemsize == 4 and row_bytes % 16 and n >= 2 * edge:
        # rows of the transposed input not 16-byte aligned load element by element: twice the
        # tile along the output's contiguous axis (H200, bench/exp_s5.py, transposed reads of
        # (35118, 769): 72.6 -> 62.9 us; (60000, 333): 49.9 -> 48.1; (30000, 999): level)
        tn = 2 * edge
        why = "heuristic: unaligned transposed rows, twice the tile along the last axis"
    # 8 warps for 4096 elements (H200, exp_s5.py, 64x64 tiles, 4 -> 8 warps: level or faster at
    # 7 shapes, by up to 3.7%: 769, 333, 999, 1000 and 4096 float32, 2000 float64, 1531 float16)
    warps = 8 if tm * tn >= 4096 and target == "cuda" else 4 if tm * tn >= 1024 else 1
    if target == "cuda" and heavy_calls:
        budget = max(1, HEAVY_2D_COPIES // heavy_calls)
        per_thread = 1 << (budget.bit_length() - 1)  # (a power of two, at most the budget)
        shrunk = False
        while tm * tn > 256 * per_thread and max(tm, tn) > 16:
            if tn >= tm:
                tn //= 2
            else:
                tm //= 2
            shrunk = True
        if shrunk:  # (8 warps, or fewer for a tile under 256 elements)
            warps = max(1, min(8, tm * tn // 32))
            why = (f"heuristic: {heavy_calls} call{'s' if heavy_calls > 1 else ''} of slow "
                   f"math per element, at most {per_thread} elements per thread")
    return Tiles2D(tm, tn, warps, why)


def _unique(candidates: list[Any], limit: int | None = MAX_CANDIDATES) -> list[Any]:
    """The candidates without repeats (nor Nones), at most ``limit``, in order."""
    out: list[Any] = []
    for c in candidates:
        if c is not None and c not in out:
            out.append(c)
    return out[:limit]


def _warps_ok(warps: int, tile: int) -> bool:
    return warps in (1, 2, 4, 8, 16) and warps * 32 <= max(tile, 32)


def pointwise_candidates(target: str, n: int, heavy_calls: int = 0, itemsize: int = 4
                         ) -> list[PointwiseTiles]:
    """Tiles to time for a 1-D pointwise kernel: the heuristic's, then 2x and 4x the block,
    half the block, and twice the warps."""
    h = pointwise_tiles(target, n, heavy_calls, itemsize)
    if target != "cuda" or n < TUNE_MIN_ELEMENTS:
        return [h]

    def cand(block: int, warps: int, why: str) -> PointwiseTiles | None:
        ok = 32 <= block <= next_pow2(n) and _warps_ok(warps, block)
        return PointwiseTiles(block, warps, why) if ok else None

    b, w = h.block, h.num_warps
    return _unique([h, cand(2 * b, 4, "2x the block"), cand(4 * b, 8, "4x the block, 8 warps"),
                    cand(b // 2, _pointwise_warps(b // 2), "half the block"),
                    cand(b, 2 * w, f"{2 * w} warps")])


def tiles_2d_candidates(target: str, m: int, n: int, itemsize: int = 4,
                        row_bytes: int = 0, heavy_calls: int = 0) -> list[Tiles2D]:
    """Tiles to time for a 2-D pointwise kernel (``tiles_2d``'s arguments): the heuristic's,
    twice the warps, 2x either edge, half of both edges."""
    h = tiles_2d(target, m, n, itemsize, row_bytes, heavy_calls)
    if target != "cuda" or m * n < TUNE_MIN_ELEMENTS:
        return [h]

    def cand(tm: int, tn: int, warps: int, why: str) -> Tiles2D | None:
        ok = (min(8, next_pow2(m)) <= tm <= next_pow2(m) and min(8, next_pow2(n)) <= tn
              <= next_pow2(n) and tm * tn <= 16384 and _warps_ok(warps, tm * tn))
        return Tiles2D(tm, tn, warps, why) if ok else None

    tm, tn, w = h.tile_m, h.tile_n, h.num_warps
    return _unique([h, cand(tm, tn, 2 * w, f"{2 * w} warps"),
                    cand(tm, 2 * tn, 8, "2x the tile along the last axis, 8 warps"),
                    cand(2 * tm, tn, 8, "2x the tile along the transposed axis, 8 warps"),
                    cand(tm // 2, tn // 2, 4 if tm * tn // 4 >= 1024 else 1, "half the tile")])


def reduction_candidates(target: str, rows: int, cols: int, outer: bool,
                         itemsize: int, state: int = 1, inner: int = 0) -> list[ReductionTiles]:
    """Tiles to time for a (non-split) reduction (``reduction_tiles``'s arguments).

    Rows in registers: 2x and half the rows per program, other warps. Looped rows: 2x and
    half the step. Outer reductions: 2x and half the kept points across the tile (same tile
    size), 2x and half the reduced step, other warps.
    """
    h = reduction_tiles(target, rows, cols, outer, itemsize, state, inner)
    if target != "cuda" or rows * cols < TUNE_MIN_ELEMENTS:
        return [h]
    full = next_pow2(cols)
    biggest = max(CANDIDATE_MAX_TILE, h.block_m * h.block_n)
    low_m = min(OUTER_MIN_KEPT // 2, next_pow2(rows)) if outer else 1
    if outer and inner:
        low_m = inner  # (never part of a run across: ``short_run_tiles``)

    def cand(bm: int, bn: int, warps: int, why: str) -> ReductionTiles | None:
        ok = (low_m <= bm <= next_pow2(rows) and 1 <= bn <= full and bm * bn <= biggest
              and _warps_ok(warps, bm * bn))
        return ReductionTiles(bm, bn, warps, full <= bn, why) if ok else None

    bm, bn, w = h.block_m, h.block_n, h.num_warps
    warps = [cand(bm, bn, 2 * w, f"{2 * w} warps"), cand(bm, bn, w // 2, f"{w // 2} warps")]
    if outer and inner:
        shapes = [cand(bm, 2 * bn, warps_for(2 * bm * bn), "2x the reduced step"),
                  cand(bm, bn // 2, warps_for(bm * bn // 2), "half the reduced step"),
                  cand(2 * bm, max(1, bn // 2), warps_for(bm * bn), "two runs across")]
    elif outer:
        shapes = [cand(2 * bm, max(1, bn // 2), warps_for(bm * bn), "2x the kept points"),
                  cand(bm // 2, 2 * bn, warps_for(bm * bn), "half the kept points"),
                  cand(bm, 2 * bn, warps_for(2 * bm * bn), "2x the reduced step"),
                  cand(bm, bn // 2, warps_for(bm * bn // 2), "half the reduced step")]
    elif h.persistent:
        shapes = [cand(2 * bm, bn, warps_for(2 * bm * bn), "2x the rows per program"),
                  cand(bm // 2, bn, warps_for(bm * bn // 2), "half the rows per program")]
    else:
        shapes = [cand(bm, 2 * bn, warps_for(2 * bm * bn), "2x the step"),
                  cand(bm, bn // 2, warps_for(bm * bn // 2), "half the step")]
    return _unique([h, *shapes, *warps])


def _even_split(cols: int, bn: int, s: int) -> int | None:
    """The fewest partials from ``s`` to ``2 s`` that cut ``cols`` into equal chunks of whole
    ``bn`` tiles (no masked tile, no short last chunk), or None (``s``'s chunks are already
    even, or no count in that range is)."""
    tiles = -(-cols // bn)
    if cols % bn or tiles % s == 0:
        return None
    return next((d for d in range(s + 1, 2 * s + 1) if tiles % d == 0), None)


def split_candidates(target: str, rows: int, cols: int, outer: bool, itemsize: int,
                     split: int | None = None, state: int = 1, inner: int = 0
                     ) -> list[SplitTiles]:
    """Tiles to time for a split reduction's partials launch: the heuristic's (``split_tiles``
    and ``choose_split``), then 2x and half the partials, other warps, 2x and half the step.

    ``split``: the partials a user wrote (``split=N``): kept, and then nothing is tuned.
    """
    bm, bn, w = split_tiles(target, rows, cols, outer, itemsize, state, inner)
    row_blocks = -(-rows // bm)
    s = choose_split(rows, cols, row_blocks, bm, state) if split is None else min(split, SPLIT_MAX)

    def step(bn: int, s: int) -> int:
        return max(1, min(bn, next_pow2(-(-cols // max(1, s)))))  # as the emitter clamps it

    def cand(bm: int, bn: int, warps: int, s: int | None, why: str) -> SplitTiles | None:
        if s is None:
            return None
        bn = step(bn, s)
        ok = 1 <= s <= SPLIT_MAX and bm * bn <= CANDIDATE_MAX_TILE and _warps_ok(warps, bm * bn)
        return SplitTiles(bm, bn, warps, s, why) if ok else None

    h = SplitTiles(bm, step(bn, s), w, s, "heuristic")
    if target != "cuda" or split is not None or rows * cols < TUNE_MIN_ELEMENTS:
        return [h]
    bn = h.block_n
    return _unique([h, cand(bm, bn, w, _even_split(cols, bn, s), "chunks of whole tiles"),
                    cand(bm, bn, w, 2 * s, "2x the partials"),
                    cand(bm, bn, w, s // 2, "half the partials") if s >= 4 else None,
                    cand(bm, bn, 4 if w >= 8 else 8, s, f"{4 if w >= 8 else 8} warps"),
                    cand(bm, 2 * bn, warps_for(2 * bm * bn), s, "2x the step"),
                    cand(bm, bn // 2, warps_for(bm * bn // 2), s, "half the step")])

# -- GEMM tiles ------------------------------------------------------------------------
#
# A GEMM kernel computes one block_m x block_n tile of the product per program, stepping K
# by block_k with num_stages loads in flight (Triton's software pipeline); programs are
# ordered in groups of group_m tile rows so that neighbours share A and B tiles in L2, and
# split_k > 1 cuts K into that many chunks (float32 partials, then a combine launch that
# adds them in a fixed order and runs the epilogue: deterministic, no atomics). The fused
# IR writes the choice as the kernel's attributes; a user may edit them and run again.
#
# Hopper (sm_90) facts behind the defaults: a warpgroup MMA (wgmma) is 64 rows, so tiles of
# 128 x 128 or 128 x 256 with 8 warps keep two warpgroups busy; 3-4 stages of 64-deep float16
# tiles (48-64 KB each at 128 x 256) fit the 227 KB of shared memory; float32 "ieee" products
# run on the FMA units (no tensor cores), so they take 32-deep tiles.

#: When a GEMM's epilogue reads the product through an output of its shape instead of the
#: MMA's registers (``gemm.GemmEmitter._relay_output``; a kernel's ``relay=0|1`` attribute
#: overrides): "serialized" (the default: when ptxas reports that it serialized the main
#: loop's wgmma for the epilogue, the ``cuda`` backend compiles the kernel again with
#: ``relay=1``), "special" (whenever the epilogue computes a special function), "always"
#: (any epilogue) or "never". Measured on the H200 (MLP layer 1, TFLOP/s, never / relayed):
#: GELU 457 / 519 (serialized without), tanh 579 / 527 and GELU in float32 434 / 379 (not).
#: Under "serialized", a full-precision float32 product (FMA units, no wgmma) with a special
#: function in its epilogue is relayed on cuda: H100, 6400x1552x3336 with bias and GELU, 1855
#: us as read from the accumulator, 1518 relayed (bare 1504).
GEMM_RELAY_PRODUCT = os.environ.get("FUSEJIT_GEMM_RELAY", "serialized")
GEMM_RELAY_MODES = ("serialized", "special", "always", "never")


def gemm_relay_mode() -> str:
    """``GEMM_RELAY_PRODUCT``, checked (``FUSEJIT_GEMM_RELAY`` may hold anything)."""
    if GEMM_RELAY_PRODUCT not in GEMM_RELAY_MODES:
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_GEMM_RELAY={GEMM_RELAY_PRODUCT!r} is not one of "
                           f"{', '.join(GEMM_RELAY_MODES)}")
    return GEMM_RELAY_PRODUCT


#: The names of a gemm kernel's tile attributes, in the order ``fusejit plan`` explains them.
GEMM_ATTRS = ("block_m", "block_n", "block_k", "num_warps", "num_stages", "group_m", "split_k")
#: Attributes a gemm kernel may also carry: ``tma=1`` loads plain operand tiles through TMA
#: descriptors (``codegen/gemm.py``), off unless written; ``relay=1`` (``relay=0``) has the
#: epilogue read the product back from its output (or not) whatever ``GEMM_RELAY_PRODUCT``
#: says; ``programs=P`` (P > 0) launches P programs that each loop over every P-th tile (a
#: persistent GEMM: Triton's ``tl.range(..., flatten=True)`` lets the next tile's loads
#: start during this tile's epilogue); unless written, ``GEMM_PERSISTENT`` decides both;
#: ``stream_k=1`` (with ``programs``) splits the tiles' K steps evenly between the programs
#: (``gemm.GemmEmitter._stream_k_loop``), ``stream_k=0`` keeps whole tiles per program; unless
#: written, ``GEMM_STREAM_K`` decides for a launch the heuristic made persistent.
#: ``epilogue_split=S`` (2 or 4) runs the epilogue on S slices of the tile's columns in turn
#: (``gemm.GemmEmitter._epilogue_slices``), so that one slice's addresses and loaded values are
#: live at a time, not the whole tile's.
GEMM_OPTIONAL_ATTRS = ("tma", "relay", "programs", "stream_k", "epilogue_split")
#: The values ``epilogue_split`` takes, and the fewest columns a slice may have.
GEMM_EPILOGUE_SPLITS = (1, 2, 4)
GEMM_EPILOGUE_MIN_SLICE = 16
#: The ``epilogue_split`` the ``cuda`` backend gives a GEMM whose compiled kernel spills
#: registers (kept where it spills less). ptxas -v for sm_90a, spill bytes a thread in 1 / 2 /
#: 4 slices (``bench/spill_audit.py``, the twenty-ninth session): float16 16 x 3911x13805x384
#: with ``b.T`` and a residual (persistent, TMA) 368 / 316 / 0; 4943x15497x2215 with a residual
#: read through pointers 552 / 44 / 0; 4 x 701x3342x127 with a bias and GELU 272 / 0 / 0;
#: 6251x2010x211 with ``b.T``, a bias and ReLU 632 / 368 / 146. Timed (H100, thirtieth
#: session, bench/results/h100-s30-call1/exp_s29_epilogue.txt): the first 1.58x faster
#: (4,298.5 -> 2,722.2 us), 4 x 701x3342x127 1.05x, four other spilling GEMMs -2% to +4%.
GEMM_EPILOGUE_SPLIT_SPILLED = 4
#: Flag attributes among ``GEMM_OPTIONAL_ATTRS`` (0 or 1).
GEMM_FLAG_ATTRS = ("tma", "relay", "stream_k")
#: Most programs a persistent GEMM may launch.
GEMM_MAX_PROGRAMS = 65535
#: Whether a float16 GEMM on ``cuda`` whose attributes do not say (no ``tma``, no
#: ``programs``) and whose operands are not computed (no prologue) is persistent with TMA
#: loads when every operand tile of its K loop is a TMA box and it has more than
#: ``GEMM_PERSISTENT_AFTER_WAVES`` waves of tiles: one program per SM (``SMS``), each looping
#: over the tiles. Measured on the H200 (float16, 128x256x64 tiles, TFLOP/s, one program
#: per tile / tma=1 alone / programs=132 tma=1): 8192^3 643 / 642 / 666,
#: 8192x8192x2048 597 / 579 / 620, 8192x2048x8192 641 / 641 / 660, 16384x1024x4096 616 / 603
#: / 634; with ``relu(+ bias)`` 2-5% more; persistent with pointer loads: 300-330 (the
#: flattened loop of pointer loads is not pipelined), hence never without TMA
#: (``bench/results/h200-persistent-2026-12-02.txt``). ``FUSEJIT_GEMM_PERSISTENT=0`` turns it
#: off; ``always`` (for tests and the fuzzer) makes every GEMM of two or more tiles persistent
#: on every target, with a third as many programs as tiles, with pointer loads where TMA
#: cannot read an operand.
GEMM_PERSISTENT = os.environ.get("FUSEJIT_GEMM_PERSISTENT", "1")
GEMM_PERSISTENT_MODES = ("0", "1", "always")
#: The default goes persistent with more tiles than this many waves (``SMS`` tiles each). Set
#: from two waves to one by the eighth session's H200 sweep (``bench/exp_s8.py``, float16,
#: 128x256x64 tiles, TFLOP/s one program per tile with pointer loads / persistent with TMA):
#: 430x13368x5000 (212 tiles) 347 / 396, 440x13376x5000 421 against 368, 600x9000x6000 (180)
#: 378 / 412, 320x16384x4096 (192) 399 / 468; from two waves on it was already the default.
#: At one wave or less each program has one tile, and there is nothing to overlap.
GEMM_PERSISTENT_AFTER_WAVES = 1
#: A TF32 product whose operands both load K-major (A row-major, B a transposed view of a
#: contiguous [N, K] buffer, as the fuser writes a row-major B for a large product:
#: ``fuse/rules.py``, ``rule_tf32_k_major_b``) loads them through TMA, persistent with one
#: program per SM, from this many tiles (one wave). Measured on the H200 at 4096^3 (256x128x32
#: tiles, 512 tiles): 328.1 TFLOP/s persistent with TMA, 328.0 with TMA and one program per
#: tile (``bench/results/h200-persistent-2026-12-02.txt``), against 275-297 with pointer
#: loads (``h200-experiments-2026-12-01.txt``): the gain is TMA's, so it does not wait for two
#: waves as float16 does (from one wave to two, the persistent loop gives each program the
#: same one or two tiles as one program per tile would; under one wave, unmeasured).
GEMM_TF32_TMA_MIN_TILES = SMS


def gemm_persistent_mode() -> str:
    """``GEMM_PERSISTENT``, checked (``FUSEJIT_GEMM_PERSISTENT`` may hold anything)."""
    if GEMM_PERSISTENT not in GEMM_PERSISTENT_MODES:
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_GEMM_PERSISTENT={GEMM_PERSISTENT!r} is not one of "
                           f"{', '.join(GEMM_PERSISTENT_MODES)}")
    return GEMM_PERSISTENT


#: A float16 GEMM of this many waves of tiles or more, up to one, loads through TMA with one
#: program per tile when the heuristic chooses its loads (``gemm_default_tma``). H200,
#: TFLOP/s with pointer loads / TMA (``bench/exp_s8.py``, eighth session's fifth call):
#: 1024x4096x8192 (128 tiles) 748 / 707, 896x3584x8192 (98) 548 / 552, 640x5120x8192 (100)
#: 525 / 559, 1536x2560x8192 (120) 677 / 717, 384x8192x8192 (96) 533 / 560, 1200x3000x6000
#: (120) 486 / 583, 1000x2000x10000 (128 of 128x128) 443 / 547, 300x7000x7000 (84) 311 /
#: 361; 200x12000x8000 (94) 341 / 451 in the second call. Under half a wave, unmeasured.
GEMM_TMA_MIN_WAVES = 0.5


def gemm_default_tma(tiles: int, split_k: int, dtype: str) -> bool:
    """Whether a GEMM the heuristic does not make persistent loads its operands through TMA
    with one program per tile: float16, no split K, ``GEMM_TMA_MIN_WAVES`` waves of tiles or
    more (up to one: past it, ``gemm_default_programs`` makes it persistent), mode "1" of
    ``GEMM_PERSISTENT`` (``0`` turns off both)."""
    return (gemm_persistent_mode() == "1" and dtype == "float16" and split_k == 1
            and tiles >= GEMM_TMA_MIN_WAVES * SMS)


def gemm_default_programs(tiles: int, split_k: int, dtype: str, tf32_k_major: bool = False
                          ) -> int:
    """The ``programs`` of a gemm kernel whose attributes do not say (see
    ``GEMM_PERSISTENT``): ``SMS`` for a float16 product of enough tiles, or for a TF32 product
    of K-major operands (``tf32_k_major``) of ``GEMM_TF32_TMA_MIN_TILES`` or more (on
    ``cuda``: the caller checks), a third of the tiles for any product of two or more in mode
    "always", else 0."""
    mode = gemm_persistent_mode()
    if mode == "0" or split_k != 1:
        return 0
    if mode == "always":
        return max(1, tiles // 3) if tiles >= 2 else 0
    if dtype == "float32" and tf32_k_major:
        return SMS if tiles >= GEMM_TF32_TMA_MIN_TILES else 0
    if dtype != "float16":
        return 0
    return SMS if tiles > GEMM_PERSISTENT_AFTER_WAVES * SMS else 0


#: Whether a GEMM the heuristic made persistent (``gemm_default_programs``) computes its tiles
#: stream-K (``gemm_default_stream_k``): "0" (never: the default), "1" (the rule below) or
#: "always" (every such launch, on every target: for tests and the fuzzer). Off by default
#: since the ninth session's H200 run (``bench/exp_s8.py``, float16, 128x256x64 tiles, TFLOP/s
#: persistent over whole tiles / stream-K): 430x13368x5000 ``b.T`` (1.6 waves) 371 / 276,
#: 2609x3787x10946 (2.4) 426 / 293, 600x9000x6000 (1.4) 412 / 335, 1024x8192x8192 (1.9, a
#: balanced split) 653 / 516: stream-K's programs walk the K steps of different tiles at
#: different times, so the tiles that share a row of A or a column of B no longer load it
#: together from L2 (the grouped order's reuse), and every K step costs more than the idle
#: SMs of the last round did. ``stream_k=1`` on a kernel still asks for it.
GEMM_STREAM_K = os.environ.get("FUSEJIT_GEMM_STREAM_K", "0")
GEMM_STREAM_K_MODES = ("0", "1", "always")
#: Stream-K where the whole-tile rounds of a persistent launch would be at most this busy
#: (tiles / (programs x rounds)) ...
GEMM_STREAM_K_BELOW = 0.9
#: ... for at most this many waves of tiles (past it the last round's idle SMs are a small part
#: of the time) ...
GEMM_STREAM_K_MAX_WAVES = 4
#: ... and tiles of at least this many K steps (a program's stretch should hold whole tiles'
#: worth of steps, so that the partial products stay a small part of its work).
GEMM_STREAM_K_MIN_STEPS = 8


def gemm_default_stream_k(tiles: int, programs: int, steps: int) -> bool:
    """Whether a persistent GEMM of ``tiles`` tiles of ``steps`` K steps on ``programs``
    programs, made so by the heuristic, is stream-K (see ``GEMM_STREAM_K``)."""
    mode = GEMM_STREAM_K
    if mode not in GEMM_STREAM_K_MODES:
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_GEMM_STREAM_K={mode!r} is not one of "
                           f"{', '.join(GEMM_STREAM_K_MODES)}")
    if mode == "0" or programs >= tiles:
        return False
    if mode == "always":
        return True
    rounds = -(-tiles // programs)
    return (tiles <= GEMM_STREAM_K_MAX_WAVES * programs and steps >= GEMM_STREAM_K_MIN_STEPS
            and tiles / (programs * rounds) <= GEMM_STREAM_K_BELOW)


#: Shared memory one program may use on an H100/H200 (227 KB), in bytes.
GEMM_SHARED_LIMIT = 232448
#: Most accumulator elements one thread may hold (past this the registers spill).
GEMM_MAX_ACC_PER_THREAD = 256
#: Most K chunks of a split-K GEMM that has tiles enough for a program per SM at this many
#: chunks; a product of fewer tiles (M and N at most a tile or two, K long: a Gram matrix of
#: a few long vectors) takes as many chunks as give every SM a program (``gemm_config``).
GEMM_MAX_SPLIT_K = 16
#: Most K chunks an edited ``split_k`` may ask for (a launch's second grid axis).
GEMM_SPLIT_K_LIMIT = 1024
#: K steps (of ``block_k``) a GEMM needs before it splits K, and that each chunk keeps.
GEMM_SPLIT_MIN_STEPS = 16
GEMM_STEPS_PER_CHUNK = 8
#: Dtypes ``tl.dot`` multiplies (float32 per ``precision``); others use multiply-and-sum.
GEMM_DOT_DTYPES = ("float16", "float32", "float64", "int8")
#: Smallest ``block_k`` of a ``tl.dot`` by operand dtype: Triton's int8 dot needs K >= 32
#: ("Input shapes should have M >= 1, N >= 1 and K >= 32"; an int8 product of K = 1 or 2 failed
#: to compile in a cuda fuzz run), the others 16.
GEMM_MIN_BLOCK_K = {"int8": 32}


@dataclass(frozen=True)
class GemmConfig:
    """How one GEMM kernel is tiled (see the section comment above)."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int
    split_k: int
    why: str = field(default="", compare=False)

    def attrs(self) -> dict[str, int]:
        """The kernel attributes that spell this choice in the IR text."""
        return {name: getattr(self, name) for name in GEMM_ATTRS}


def gemm_uses_dot(dtype: str) -> bool:
    """Whether a product of ``dtype`` (a NumPy dtype name) runs on ``tl.dot``."""
    return dtype in GEMM_DOT_DTYPES


def _clamp(block: int, extent: int, low: int = 16) -> int:
    return max(low, min(block, next_pow2(extent)))


def gemm_shared_bytes(block_m: int, block_n: int, block_k: int, num_stages: int,
                      loads: tuple[int, int]) -> int:
    """Shared memory of the operand tiles in flight: ``num_stages`` A and B tiles, of the
    bytes per element each operand loads (``loads``, wider than the product's dtype when a
    prologue casts)."""
    return num_stages * (block_m * block_k * loads[0] + block_k * block_n * loads[1])


def _waves(batch: int, m: int, n: int, bm: int, bn: int) -> int:
    """Rounds of ``SMS`` programs that the ``bm`` x ``bn`` tiles of a GEMM take."""
    return -(-batch * -(-m // bm) * -(-n // bn) // SMS)


def _fill_split(tiles: int, steps: int, thin: bool) -> int:
    """K chunks of a GEMM of ``tiles`` output tiles and ``steps`` K steps each (``thin``: at
    most 16 rows), so that its programs fill the GPU."""
    # K split over more programs where the tiles under-fill the GPU. A product of at most 16
    # rows reads B at the memory's rate or not at all: about three programs per SM (H100,
    # bench/results/h100-s10-call2-exp_thin.txt, then -call3-exp_thin_default.txt, GB/s
    # moved at the old / this split: 2x5000x10305 834 (79 tiles) -> 2356, TF32 5x4251x7665
    # b.T 1087 -> 1902, float32 8x4096x4096 2016 (s3) -> 2294, 16x6000x2500 TF32 1448 -> 2064;
    # 1x8192x8192, 128 tiles, 2509 -> 2689; copy 2902-2918; 4x30000x2048, 235 tiles, 2550
    # unsplit, 2403 at s2: a full wave is not split). Wider products keep one program per SM
    # and no more programs than SMs: a few programs past a wave run as a second round that
    # the others wait for (H100, TF32 224x241x9669 on 16 tiles read through 16-byte rows,
    # bench/results/h100-s11-call1-exp_thin_x1.txt: 8 chunks, 128 programs, 35 us; 9 chunks,
    # 144 programs, 53 us; 16, 256 programs, 38 us; as read, 4-byte rows: 113 / 193 / 116).
    # (no tiles: an empty product, whose launch writes nothing, splits nothing)
    if not (tiles and (tiles < SMS // 2 or (thin and tiles < SMS)) and steps >= GEMM_SPLIT_MIN_STEPS):
        return 1
    per_tile = -(-3 * SMS // tiles) if thin else SMS // tiles
    # (at most 16 chunks where that fills the SMs, as measured above; fewer tiles take one
    # program per SM: 16 chunks of one 16x16 tile of a Gram matrix of K = 2**20 were 16
    # programs moving 64 MB. No more than one wave: a batch of 8 float32 16x16 products of
    # K = 2**17 in 17 chunks (136 programs) took 300 us, in 16 chunks 172, H100,
    # bench/results/h100-s24/call2/exp_s24_longk.txt)
    most = max(GEMM_MAX_SPLIT_K, SMS // tiles)
    return max(1, min(most, per_tile, steps // GEMM_STEPS_PER_CHUNK))


#: Outputs of a split-K GEMM that one program of its combine adds up, and elements (chunks x
#: outputs) it loads at once. H100, the launches replayed from a CUDA graph, us with this
#: combine / the GEMM's tiles and warps adding one chunk after another, a scalar-indexed loop
#: (bench/exp_s25_check.py, bench/results/h100-s27/call2 and call1): float16 64x64 Gram matrix
#: of K = 2**16 12.5 / 29.4, 2x64 of K = 2**18 14.7 / 35.2, 128x128 of K = 2**16 12.8 / 18.4;
#: float32 64x64 Gram matrix of K = 2**16 (B K-major) 49.1 / 238.7, 128x128 of K = 2**16
#: 111.5 / 187.1, 224x241 of K = 9669 (B row-major) 51.9 / 117.4; only 16x16 tiles ran faster
#: that way (K = 2**16: float16 10.6 / 6.6). The twenty-fifth session had replaced this
#: combine by that loop after timing a different stand-in for it (this code with the GEMM's
#: tiles, one chunk a step, on 4 warps: level with this one, then and in call 2).
GEMM_COMBINE_OUTPUTS = 256
GEMM_COMBINE_BLOCK = 8192


def gemm_combine_tiles(block_m: int, block_n: int, split: int, span_row: bool
                       ) -> tuple[int, int, int]:
    """(rows, columns, chunks at once) of a program of a split-K GEMM's combine.

    Its tiles are smaller than the GEMM's (``GEMM_COMBINE_OUTPUTS``), so that the partials
    spread over many programs, and each step loads a block of chunks (a power of two, up to
    ``GEMM_COMBINE_BLOCK`` elements) whose sum is a fixed tree: the result does not depend on
    the schedule. A combine whose epilogue reduces rows keeps the GEMM's whole row."""
    cols = block_n if span_row else min(block_n, 64)
    rows = max(1, min(block_m, GEMM_COMBINE_OUTPUTS // cols))
    chunks = max(1, min(next_pow2(split), GEMM_COMBINE_BLOCK // (rows * cols)))
    return rows, cols, chunks


def _split_k_steps(bm: int, bn: int, bk: int, warps: int, stages: int,
                   loads: tuple[int, int], chunk: int, split: int) -> tuple[int, int, int]:
    """(block_k, num_warps, num_stages) of a float16 product whose few tiles split K into
    ``split`` chunks of ``chunk`` elements, one program per SM (products of a few rows that
    run several an SM keep their tiles).

    A 16x16 tile's program streams its chunk through 2 KB steps (64 deep): too few bytes in
    flight to read at the memory's rate. Where the chunk holds 8 steps of 256 or more, they
    are 256 deep in 5 stages. 64x64 tiles split 16 ways or more run on 8 warps.
    H100, us at the old / these tiles (bench/exp_s24_longk.py --compare,
    bench/results/h100-s24/call3): 16x16 tiles, a Gram matrix of K = 2**20 43.9 / 31.2
    (cuBLAS 34.1), 1x16 of K = 2**22 140.1 / 68.9 (105.5), a batch of 8 of K = 2**17 42.6 /
    28.9; 64x64 tiles, Gram matrices of K = 2**18 and 2**16 76.7 / 54.2 and 54.3 / 30.8,
    128x128 of K = 2**16 in 33 chunks 23.9 / 20.4, a batch of 4 42.1 / 37.0. What lost is
    left out: 128-deep steps of 16x64 and 32x64 tiles (2x64 of K = 2**18 36.0 / 34.8, 8x256
    of K = 2**16 25.1 / 25.8, 32x2048 of K = 8192 16.9 / 24.3), of 16x16 tiles over chunks of
    512 (17.6 / 18.4), 8 warps at 8 chunks (224x241 of K = 9669 22.2 / 25.5). (float32 in full
    precision ran the same at every K step and slower on 8 warps: its FMA loop, not its
    loads, bounds it.)"""
    if bm * bn >= 64 * 64:
        return bk, 8 if split >= GEMM_MAX_SPLIT_K else warps, stages
    if bm + bn > 32 or chunk < 8 * 256:
        return bk, warps, stages
    stages = 5
    while stages > 2 and gemm_shared_bytes(bm, bn, 256, stages, loads) > GEMM_SHARED_LIMIT:
        stages -= 1
    return 256, warps, stages


def gemm_config(m: int, n: int, k: int, batch: int, dtype: str, precision: str = "ieee",
                span_row: bool = False, loads: tuple[int, int] | None = None) -> GemmConfig:
    """The default tiles of a GEMM of ``[batch, m, k] @ [batch, k, n]`` in ``dtype``.

    ``span_row``: the kernel reduces rows of the product, so ``block_n`` covers all of N.
    ``loads``: bytes per element loaded for A and B (default: the dtype's size).
    """
    if not gemm_uses_dot(dtype):
        # integers other than int8: a [block_m, block_k, block_n] multiply-and-sum per step
        bm, bn = _clamp(32, m), _clamp(32, n) if not span_row else next_pow2(max(n, 16))
        split = _fill_split(batch * -(-m // bm) * -(-n // bn), -(-k // 8), m <= 16)
        return GemmConfig(bm, bn, 8, 4, 1, 8, split, "heuristic")
    if dtype == "float64":
        bm, bn, bk, warps, stages = 64, 64, 16, 4, 3
    elif dtype == "float32" and precision == "ieee":
        # FMA units: 64x64 tiles, 4 warps (32 accumulators a thread). H100, the GEMM alone with
        # B row-major (bench/exp_s15.py --precision ieee-row, bench/results/h100-s15-call4),
        # us with 128x128x32 (the earlier default) / 64x64x32: 4096^3 3267 / 3100 (cuBLAS 2674),
        # 6400x1552x3336 2282 / 1513 (1445), 512x4096x4096 840 / 405 (384), 2048x512x8192
        # 662 / 441 (351), 1000x3000x700 214 / 117 (111): 0.46-0.82x of cuBLAS -> 0.80-0.96x.
        # 128x64 and 64x128 ran between them, block_k=16 no better, 2 stages slower.
        bm, bn, bk, warps, stages = 64, 64, 32, 4, 3
    elif dtype == "float32":
        # TF32: H200, 4096^3 (bench/exp_matmul.py), TFLOP/s of 128x128 / 256x128 tiles: a
        # row-major B (the swapped product, whose wgmma is then 128 x 256) 210 / 270, a
        # K-major B 275 / 297 (4 stages)
        # 256x128 at every size: on an H100 (bench/results/h100-s14-call1-exp_s13.txt) 128x128
        # tiles were slower even where they take fewer rounds' worth of time (6000x3000x4001:
        # 1100 against 710 us; 5183x1023x15402 1407 against 1233); only 3001x2047x1537 ran
        # faster in 128x128 (bench/results/h100-s11-call1-exp_thin_x2.txt: 118 against 132 us)
        bm, bn, bk, warps, stages = 256, 128, 32, 8, 3
    elif n >= 256 and (m >= 256 or (m > 128 and _waves(batch, m, n, 128, 256)
                                     < _waves(batch, m, n, 128, 128))):
        # 129-255 rows: two tile rows either way; 128x256 tiles where they take fewer waves
        # (H100, bench/results/h100-s10-call1-exp_s8_mb.txt, TFLOP/s 128x128 / 128x256:
        # 200x12000x8000 307 / 409, 160x16384x8192 239 / 396, 136x14000x5000 132 / 207; one
        # wave both, 192x8192x4096: 342 / 283)
        bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
    else:
        bm, bn, bk, warps, stages = 128, 128, 64, 8, 4
    bm, bn, bk = _clamp(bm, m), _clamp(bn, n), _clamp(bk, k, GEMM_MIN_BLOCK_K.get(dtype, 16))
    if span_row:
        bn = max(16, next_pow2(n))
        while bm > 16 and bm * bn > 128 * 256:
            bm //= 2
    # halve tiles (N first, unless a tile spans the row) while twice the tiles still fit in one
    # wave: each halving then halves the time of the one round. Past half a wave, half-size
    # tiles take two rounds at a lower rate (H200, 200x12000x8000: 94 tiles of 128x256 ran
    # 396 TFLOP/s, 188 of 128x128 324, bench/exp_s8.py)
    while not span_row and 2 * batch * -(-m // bm) * -(-n // bn) <= SMS and bn > 64:
        bn //= 2
    while 2 * batch * -(-m // bm) * -(-n // bn) <= SMS and bm > 64:
        bm //= 2
    if bm * bn <= 64 * 64:
        warps = 4
    # (full precision over rows not 16-byte aligned: its 128x128 tiles on 4 warps spilled, 1572
    # bytes a thread at 257x3467x585, 0.27x of cuBLAS on an H100, and took 8 warps; its 64x64
    # tiles hold 32 accumulators a thread: tests/test_cubin.py checks that nothing spills)
    size = np.dtype(dtype).itemsize
    loads = loads or (size, size)
    while stages > 2 and gemm_shared_bytes(bm, bn, bk, stages, loads) > GEMM_SHARED_LIMIT:
        stages -= 1
    tiles = batch * -(-m // bm) * -(-n // bn)
    steps = -(-k // bk)
    thin = m <= 16
    split = _fill_split(tiles, steps, thin)
    if split > 1 and dtype == "float16" and tiles * split <= SMS:  # (one program an SM)
        bk, warps, stages = _split_k_steps(bm, bn, bk, warps, stages, loads, -(-k // split),
                                           split)
    rounds_from = 0  # (the split that _fma_round_split raised, if it did)
    fma = dtype == "float64" or (dtype == "float32" and precision == "ieee")
    if fma and not thin and tiles and steps >= GEMM_SPLIT_MIN_STEPS:
        if dtype == "float32":
            if split > 1 and bm * bn >= FMA_FEW_TILES_MIN_TILE:
                split, warps = _fma_few_tiles(tiles, steps)
            # the FMA units want about four 4-warp programs an SM: up to two waves of tiles
            # split K to that many programs, in at most 4 chunks. H100, B row-major, the GEMM
            # alone (bench/exp_s15.py --precision ieee-small, bench/results/h100-s16-call4),
            # us unsplit / split: 128x4096x4096 128 / 108 (4 chunks; cuBLAS 100),
            # 256x4096x4096 222 / 203 (2; 186), 2048x512x8192 441 / 408 (2; 354);
            # 512x4096x4096 (512 tiles) 404 / 393 at 2 chunks, within noise, so left whole;
            # 64x2048x8192 kept its 4 (77 us; 2: 145)
            split = max(split, min(4, 4 * SMS // tiles, steps // GEMM_STEPS_PER_CHUNK))
        # float64 runs on the FMA units too, in the same rounds of tiles. H100, B row-major,
        # the GEMM's launches replayed from a CUDA graph (bench/exp_s26_fma.py,
        # bench/results/h100-s27/call1), us unsplit / 4 / 8 chunks (cuBLAS): 2048x576x4096
        # (288 tiles) 269 / 200 / 221 (178), 768x768x8192 (144) 364 / 218 / 204 (175); the
        # rule's picks, timed in call 2: 215 at 4 chunks, 205 at 8
        chosen = _fma_round_split(tiles, steps, split)
        rounds_from, split = (split if chosen != split else 0), chosen
    if split > 1 and k % bk == 0:
        split = _whole_chunks(k // bk, split)
    why = "heuristic"
    if rounds_from:
        why = f"heuristic: {_fma_rounds_why(tiles, rounds_from, split)}"
    return GemmConfig(bm, bn, bk, warps, stages, 8, split, why)


def _fma_rounds_why(tiles: int, before: int, split: int) -> str:
    """The sentence for a split ``_fma_round_split`` chose over ``before`` chunks."""
    def share(chunks: int) -> float:
        work, of = _fma_rounds(tiles, chunks)
        return work / of / (tiles / SMS)
    return (f"K in {split} chunks, not {before}: {tiles} tiles over {SMS} SMs leave the busiest "
            f"SM {share(before):.2f}x the even share of the work, {share(split):.2f}x so "
            f"(heuristics._fma_round_split)")


#: Most K chunks ``_fma_round_split`` splits a full-precision float32 (or float64) GEMM into,
#: the fewest K steps of a chunk (the partials' stores and the combine's launch against a
#: chunk's FMA work) and the least share of the busiest SM's work a split must save to be
#: taken
FMA_ROUND_SPLIT_MAX = 8
FMA_ROUND_SPLIT_MIN_STEPS = 32
FMA_ROUND_SPLIT_GAIN = 0.05


def _fma_rounds(tiles: int, split: int) -> tuple[int, int]:
    """Tiles' worth of work the busiest SM runs where ``tiles`` tiles are split in ``split``
    chunks of K each over ``SMS`` SMs, as a fraction (numerator, denominator):
    ``ceil(tiles * split / SMS) / split``."""
    return -(-tiles * split // SMS), split


def _fma_round_split(tiles: int, steps: int, split: int) -> int:
    """K chunks of a full-precision float32 (or float64) GEMM of ``tiles`` tiles and ``steps``
    K steps (``split`` so far): the FMA units are shared by an SM's programs, so the GEMM
    takes as long as its busiest SM's work, ``ceil(tiles * split / SMS) / split`` tiles. The
    split of up to ``FMA_ROUND_SPLIT_MAX`` chunks of ``FMA_ROUND_SPLIT_MIN_STEPS`` steps or more with
    the least such work (the fewest chunks among equals) is taken where it saves
    ``FMA_ROUND_SPLIT_GAIN`` or more.

    288 tiles (2047x513x8191) left 24 SMs three tiles and the others two, 1.375x the even
    share; in 4 chunks the busiest SM runs 9 quarter tiles, 1.03x. H100, B row-major, the
    GEMM's launches replayed from a CUDA graph (bench/exp_s26_fma.py,
    bench/results/h100-s26/call1), us unsplit (or as split before) / at this split
    (cuBLAS): 2048x576x8192 (288 tiles) 606 / 437 at 4 (451), 2047x513x8191 (rows of 4 bytes)
    959 / 593 at 4 (451), 2048x576x8191 641 / 478 at 4 (451), 1024x1088x8192 (272) 606 / 421 at
    8 (384), 1280x1280x4096 (400) 399 / 319 at 4 (304), 768x768x16384 (144; 3 chunks before)
    531 / 439 at 8 (387), 767x769x16383 (156; 3 before) 716 / 667 at 4, 1279x1281x4095 492 /
    445 at 4 (307), 2048x577x8192 (320) 626 / 532 at 4 (452). The model undersells more
    chunks by a few percent where it calls them even (400 tiles: 3 and 4 chunks 335 / 319),
    and where the rounds are even already chunks only cost: 2048x2048x4096 (1024 tiles) 781
    unsplit, 795 / 810 / 834 at 2 / 4 / 8; 1001x3001x701 (752 tiles, 22 steps) 137 / 158 at 2.
    Splitting K does not change the arithmetic's error bound (the chunks' partials add in a
    fixed order)."""
    before, before_of = _fma_rounds(tiles, split)
    best, best_work, best_of = split, before, before_of
    for chunks in range(split + 1, FMA_ROUND_SPLIT_MAX + 1):
        if steps < chunks * FMA_ROUND_SPLIT_MIN_STEPS:
            break
        work, of = _fma_rounds(tiles, chunks)
        if work * best_of < best_work * of:
            best, best_work, best_of = chunks, work, of
    saves = best_work * before_of <= (1 - FMA_ROUND_SPLIT_GAIN) * before * best_of
    return best if saves else split


#: Smallest tile (block_m x block_n) of a full-precision float32 product of few tiles that
#: runs 2-warp programs, four an SM (``_fma_few_tiles``).
FMA_FEW_TILES_MIN_TILE = 32 * 64


def _fma_few_tiles(tiles: int, steps: int) -> tuple[int, int]:
    """(split_k, num_warps) of a full-precision float32 product of ``tiles`` tiles of 2048
    elements or more (32x64, 64x32 or 64x64; fewer tiles than half the SMs) and ``steps`` K
    steps: K split to four 2-warp programs an
    SM (64 accumulators a thread), chunks of 8 steps or more.

    One 4-warp program an SM, as the split of every few-tile product gives, ran these
    products at 0.33-0.66x of cuBLAS with B read K-major; 4-warp programs ran no faster at 2
    or 4 an SM, 2-warp ones did (bench/exp_s25_occupancy.py, h100-s25/call1). H100, us at
    one 4-warp program an SM / four 2-warp ones (cuBLAS), the GEMM's launches alone replayed
    from a CUDA graph (bench/exp_s25_check.py, bench/results/h100-s25/call3), B K-major: a
    64x64 Gram matrix of K = 2**18 176 / 128 (108), of K = 2**16 63 / 49 (41), 128x128 of
    K = 2**16 186 / 112 (73), a batch of 4 64x64 183 / 110, 224x241 of K = 9669 (16 tiles)
    123 / 78 (51), 32x2048 of K = 8192 (32 tiles of 32x64) 151 / 86 (50), 64x2048 of K = 8192
    170 / 106 (76); B row-major: 128x128 75 / 65 (67), 32x2048 51 / 33 (46), 64x2048 72 / 58
    (63), 224x241 55 / 52 (40), the batch of 4 71 / 68, but a single 64x64 tile lost: Gram
    matrices of K = 2**18 80 / 85 (89) and of K = 2**16 33 / 37 (34), so the emitter keeps one
    4-warp program an SM there (``fma_single_tile_row_major``). Tiles of 16 rows gained
    nothing (2x64 of K = 2**18 93 / 103; 16x16 Gram matrices 174 / 193, call 1)."""
    return max(1, min(GEMM_SPLIT_K_LIMIT, 4 * SMS // tiles, steps // GEMM_STEPS_PER_CHUNK)), 2


def fma_single_tile_row_major(k: int, block_k: int) -> tuple[int, int]:
    """(split_k, num_warps) of a full-precision float32 product of one 64x64 (or 32x64) tile
    whose B loads row-major (N contiguous), where ``_fma_few_tiles`` gave four 2-warp programs
    an SM: one 4-warp program an SM, as before it. The emitter decides, from B's strides.

    H100, CUDA graphs (bench/exp_s25_check.py, bench/results/h100-s25/call3), us at one 4-warp
    program an SM / four 2-warp ones: Gram matrices ``x @ x.T`` (whose B the fuser writes
    row-major first, rule ``fma_n_major_b``) of K = 2**18 79.9 / 85.1 and of K = 2**16 32.7 /
    37.1, where B K-major gained (176 / 128, 63 / 49) and products of 4-32 tiles gained either
    way."""
    # (the split of any single tile, not rounded to whole steps: the split measured, 132
    # chunks; for float32 the rounding gained and lost a few percent by shape)
    return _fill_split(1, -(-k // block_k), False), 4


def _whole_chunks(steps: int, split: int) -> int:
    """``split`` rounded down to a divisor of ``steps`` within three quarters of it, if one
    is: chunks of whole steps that add up to K exactly leave no step masked.

    A split that does not divide the steps masks every load of every step (the last chunk
    may run past K). H100, us at 132 / 128 chunks, one program an SM, the launches alone
    replayed from a CUDA graph (bench/exp_s25_check.py, bench/results/h100-s25/call3):
    float16 64x64 Gram matrix of K = 2**18 41.1 / 34.7, 1x16 of K = 2**22 70.9 / 61.7, 2x64
    of K = 2**18 16.3 / 14.9, 16x16 Gram matrix of K = 2**20 34.9 / 33.2, 128x128 of
    K = 2**16 (4 tiles, 33 / 32 chunks) 14.7 / 13.1; float32 16x16 of K = 2**16 21.2 / 19.7,
    2x64 of K = 2**18 with B row-major 45.3 / 42.3, but 16x16 Gram matrices of K = 2**20
    lost 2-6% (169.7 / 172.8 B K-major, 107.1 / 113.9 row-major), as did the 1x16 of
    K = 2**22 (699 / 727; the frontend makes those float32 products sums of products)."""
    if steps % split == 0:
        return split
    for chunks in range(split - 1, (3 * split + 3) // 4 - 1, -1):
        if steps % chunks == 0:
            return chunks
    return split


def gemm_config_problem(attrs: dict, m: int, n: int, k: int, dtype: str,
                        loads: tuple[int, int], span_row: bool = False) -> str | None:
    """Why a gemm kernel's tile attributes cannot work, or None (checked on edited IR).

    ``loads``: bytes per element loaded for A and B (``gemm_shared_bytes``).
    """
    itemsize = np.dtype(dtype).itemsize
    for name in ("block_m", "block_n", "block_k"):
        v = attrs[name]
        low = 16 if gemm_uses_dot(dtype) or name != "block_k" else 1
        if name == "block_k" and gemm_uses_dot(dtype):
            low = GEMM_MIN_BLOCK_K.get(dtype, 16)
        if not isinstance(v, int) or v < low or v > 256 or v & (v - 1):
            return f"{name}={v} is not a power of two from {low} to 256"
    for flag in GEMM_FLAG_ATTRS:
        if attrs.get(flag, 0) not in (0, 1):
            return f"{flag}={attrs[flag]} is not 0 or 1"
    programs = attrs.get("programs", 0)
    if not isinstance(programs, int) or not 0 <= programs <= GEMM_MAX_PROGRAMS:
        return f"programs={programs} is not an integer from 0 to {GEMM_MAX_PROGRAMS}"
    if programs and attrs["split_k"] > 1:
        return f"programs={programs} with split_k={attrs['split_k']}: a split-K GEMM is not persistent"
    if attrs.get("stream_k", 0) and not programs:
        return "stream_k=1 without programs=P: stream-K splits the K steps between P programs"
    split = attrs.get("epilogue_split", 1)
    if split not in GEMM_EPILOGUE_SPLITS:
        return f"epilogue_split={split} is not 1, 2 or 4"
    if split > 1:
        if attrs["block_n"] // split < GEMM_EPILOGUE_MIN_SLICE:
            return (f"epilogue_split={split} of block_n={attrs['block_n']} leaves slices of "
                    f"{attrs['block_n'] // split} columns (at least {GEMM_EPILOGUE_MIN_SLICE})")
        if attrs["split_k"] > 1:
            return (f"epilogue_split={split} with split_k={attrs['split_k']}: a split-K GEMM "
                    f"runs its epilogue in the combine, on tiles of its own")
        if span_row:
            return (f"epilogue_split={split} in a kernel that reduces the product's rows: a "
                    f"row reduction needs the whole tile's columns at once")
        if attrs.get("relay", 0):
            return (f"epilogue_split={split} with relay=1: the relayed product is read back "
                    f"as one tile")
    if attrs["num_warps"] not in (1, 2, 4, 8, 16):
        return f"num_warps={attrs['num_warps']} is not 1, 2, 4, 8 or 16"
    for name, low, high in (("num_stages", 1, 8), ("group_m", 1, 1024),
                            ("split_k", 1, GEMM_SPLIT_K_LIMIT)):
        v = attrs[name]
        if not isinstance(v, int) or not low <= v <= high:
            return f"{name}={v} is not an integer from {low} to {high}"
    bm, bn, bk = attrs["block_m"], attrs["block_n"], attrs["block_k"]
    if span_row and bn < n:
        return (f"block_n={bn} does not span the rows of {n} columns that the kernel reduces "
                f"(block_n >= {next_pow2(n)})")
    steps = -(-k // bk)
    if attrs["split_k"] > max(1, steps):
        return (f"split_k={attrs['split_k']} is more chunks than the {steps} steps of block_k={bk} "
                f"over K={k}")
    acc = bm * bn * (2 if itemsize == 8 else 1) // (32 * attrs["num_warps"])
    if acc > GEMM_MAX_ACC_PER_THREAD:
        return (f"a {bm} x {bn} accumulator over {attrs['num_warps']} warps is {acc} registers per "
                f"thread (at most {GEMM_MAX_ACC_PER_THREAD}: more warps or smaller tiles)")
    if not gemm_uses_dot(dtype) and bm * bn * bk // (32 * attrs["num_warps"]) > 1024:
        return (f"a {dtype} product multiplies a {bm} x {bk} x {bn} block per step, "
                f"{bm * bn * bk // (32 * attrs['num_warps'])} values per thread (at most 1024)")
    shared = gemm_shared_bytes(bm, bn, bk, attrs["num_stages"], loads)
    if shared > GEMM_SHARED_LIMIT:
        return (f"{attrs['num_stages']} stages of {bm} x {bk} and {bk} x {bn} tiles need {shared} "
                f"bytes of shared memory (at most {GEMM_SHARED_LIMIT} on an H100/H200)")
    return None


#: GEMMs of fewer multiply-adds (batch x M x N x K) than this are not tuned.
GEMM_TUNE_MIN = 1 << 21


def gemm_candidates(m: int, n: int, k: int, batch: int, dtype: str, precision: str = "ieee",
                    span_row: bool = False, loads: tuple[int, int] | None = None
                    ) -> list[GemmConfig]:
    """Tiles to time for a GEMM (``gemm_config``'s arguments): the heuristic's, then the other
    warp count (4/8), one stage more and one less (2 to 4), 2x and half of ``split_k`` when
    it splits, half of ``block_n`` and of ``block_m``, 2x ``block_k``; each one that
    ``gemm_config_problem`` accepts (at most ``MAX_CANDIDATES``, in that order)."""
    h = gemm_config(m, n, k, batch, dtype, precision, span_row, loads)
    if batch * m * n * k < GEMM_TUNE_MIN:
        return [h]
    size = np.dtype(dtype).itemsize
    loads = loads or (size, size)

    def cand(why: str, **change: int) -> GemmConfig | None:
        c = GemmConfig(**{**h.attrs(), **change}, why=why)
        fits = c.block_m <= max(16, next_pow2(m)) and c.block_k <= max(16, next_pow2(k))
        ok = fits and gemm_config_problem(c.attrs(), m, n, k, dtype, loads, span_row) is None
        return c if ok else None

    warps = 8 if h.num_warps == 4 else 4
    stages = [cand(f"{s} stages", num_stages=s) for s in (h.num_stages + 1, h.num_stages - 1)
              if 2 <= s <= 4]
    splits = [cand(f"split_k={s}", split_k=s) for s in (h.split_k * 2, h.split_k // 2)] \
        if h.split_k > 1 else []
    return _unique([h, cand(f"{warps} warps", num_warps=warps), *stages, *splits,
                    None if span_row else cand("half of block_n", block_n=h.block_n // 2),
                    cand("half of block_m", block_m=h.block_m // 2),
                    cand("2x block_k", block_k=h.block_k * 2)])


def config_fields(config: Any) -> dict[str, Any]:
    """A candidate config as plain data (its type and numbers, not its ``why``): how the
    autotune cache records a choice."""
    out: dict[str, Any] = {"type": type(config).__name__}
    out.update({f.name: getattr(config, f.name) for f in fields(config) if f.name != "why"})
    return out
