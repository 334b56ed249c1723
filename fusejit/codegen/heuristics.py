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
  split across programs (a split reduction: partials, then a final launch).

The ``interpret`` target runs on the CPU, where each program instance costs
Python time: it gets the largest blocks that stay within a memory budget.
"""

from __future__ import annotations

from dataclasses import dataclass

#: SMs of the GPU the heuristics are tuned for (H100/H200).
SMS = 132
#: Programs to aim for: 4 per SM, so that every SM has work and the tail is short.
TARGET_PROGRAMS = 4 * SMS

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

#: Fewest elements one partial program of a split reduction combines (when choosing).
SPLIT_MIN_CHUNK = 4096
#: Most partials per output: the final launch combines them in one tile.
SPLIT_MAX = 1024


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
    why: str


def reduction_tiles(target: str, rows: int, cols: int, outer: bool, itemsize: int) -> ReductionTiles:
    """Tiles of a (non-split) reduction with ``rows`` outputs of ``cols`` elements each.

    ``outer``: the kept axis is the contiguous one. ``itemsize``: the widest
    element size in the region (8-byte types halve the tile to bound registers).
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
        if bn <= limit:
            bm = max(1, min(next_pow2(rows), 2048 // bn))
            # short rows: several per program, but keep enough programs to fill the GPU
            while bm > 1 and -(-rows // bm) < TARGET_PROGRAMS and bm * bn > 512:
                bm //= 2
            return ReductionTiles(bm, bn, warps_for(bm * bn), True,
                                  f"row of {cols} in registers, {bm} row(s) per program")
        return ReductionTiles(1, tile, warps_for(tile), False,
                              f"row of {cols} > {limit}: looped in steps of {tile}")
    # outer: kept points across the tile (coalesced), as few per program as keeps the GPU busy
    bm = next_pow2(-(-rows // TARGET_PROGRAMS))
    bm = max(OUTER_MIN_KEPT, min(OUTER_MAX_KEPT, bm, next_pow2(rows)))
    bm = min(bm, next_pow2(rows))
    bn = max(1, min(next_pow2(cols), tile // bm))
    persistent = next_pow2(cols) <= bn
    return ReductionTiles(bm, bn, warps_for(bm * bn), persistent,
                          f"outer: {bm} kept points across the tile, {bn} reduced per step")


def split_tiles(target: str, rows: int, cols: int, outer: bool, itemsize: int) -> tuple[int, int, int]:
    """(block_m, block_n, num_warps) of a split reduction's partials launch."""
    if target == "interpret":
        bm = min(next_pow2(rows), 64)
        return bm, max(1, min(next_pow2(cols), (1 << 16) // bm)), 4
    tile = TILE_ELEMENTS // (2 if itemsize >= 8 else 1)
    if outer:
        bm = max(1, min(next_pow2(rows), 64))
        bn = max(1, min(next_pow2(cols), tile // bm))
        return bm, bn, warps_for(bm * bn)
    return 1, min(next_pow2(cols), tile), 8


def choose_split(rows: int, reduce_size: int, row_blocks: int | None = None,
                 kept_per_program: int = 1) -> int:
    """Partials per output of a split reduction whose region has no ``split`` attribute.

    Enough partial programs to fill the GPU several times (``row_blocks``
    programs per chunk index, default ``rows``; about ``TARGET_PROGRAMS`` in
    all), each combining at least ``SPLIT_MIN_CHUNK`` elements
    (``kept_per_program`` outputs times its chunk of the reduced extent), at
    most ``SPLIT_MAX``. E.g. ``sum`` of 2**26 elements: 528 partials of
    127100 elements; of 2**16 elements: 16 partials of 4096.
    """
    blocks = max(1, rows if row_blocks is None else row_blocks)
    by_programs = -(-TARGET_PROGRAMS // blocks)
    by_size = max(1, reduce_size * max(1, kept_per_program) // SPLIT_MIN_CHUNK)
    return max(1, min(by_programs, by_size, SPLIT_MAX))
