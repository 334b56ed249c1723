"""The fusion pass's cost model: limits, recompute-or-materialize, split reductions and the
GEMM operand layout passes (TF32 transposes, copies to aligned rows).

Everything numeric the fuser decides with lives here, so that tuning it is
one file. The model is deliberately small:

* A kernel is bounded (``MAX_REGION_INSTRS`` instructions, ``MAX_REGION_INPUTS``
  parameters): beyond that, compile time (measured below), register pressure and
  argument lists hurt more than one more launch.
* A value that several regions read is either *recomputed* in each consumer
  region or *materialized* (written once, read by each). Recomputing is
  chosen only when the value is free (no reduction in its cone) and cheap:
  its cone costs at most ``MAX_RECOMPUTE_COST`` (see ``op_cost``) and reads
  at most ``MAX_RECOMPUTE_LOADS`` buffers. Writing and re-reading a
  materialized value costs two memory passes, recomputing costs its loads,
  so up to two loads and a few flops is never worse. Anything with a
  reduction in its cone, or expensive, is materialized.
* A reduction whose output is small and whose reductions are large runs as
  a *split reduction* (one launch: many programs write partials, the last
  program of each row block combines them), so that the whole GPU
  works on it (``should_split``; how many partials is the emitter's choice, since
  it depends on its tiles).
* A GEMM kernel loads each operand tile once per tile of the other output axis
  (A's tiles for every column of tiles, B's for every row), so a *prologue* (the
  pointwise producers of an operand, computed while its tiles load) is recomputed
  that many times: it may read at most ``GEMM_PROLOGUE_MAX_FULL_LOADS`` buffers of
  the operand's size (scales, vectors and constants are free), and cost at most
  ``GEMM_PROLOGUE_MAX_COST`` per element unless the other axis fits one tile
  (``GEMM_TILE_SPAN``), where it is computed once. A row reduction of the product
  (``sum(a @ b, -1)``) fuses when one tile spans the row (``GEMM_ROW_MAX_N``).
* A TF32 product of an N-major B gets B transposed to K-major by a pass of its own when
  the time a K-major product saves (``TF32_N_MAJOR_B_FLOPS`` against
  ``TF32_K_MAJOR_B_FLOPS``) exceeds the pass's (``TRANSPOSE_BYTES_PER_S``,
  ``EXTRA_LAUNCH_S``): ``tf32_transpose_gain``.
"""

from __future__ import annotations

import os

from ..ir.ops import LEAF, VIEW

#: Instructions in one region (clones of recomputed values included): the ``region_size``
#: rule splits longer chains. Chosen from ``bench/bench_deep.py --compile-sizes`` (Triton
#: 3.9, one pointwise kernel to an sm_90 cubin, CPU seconds on a shared 2-core machine):
#:
#: ================  =====  =====  =====  =====  ======  ==============
#: instructions        ~67   ~131   ~259   ~515   ~1027           ~1538
#: arithmetic        0.1 s  0.1 s  0.3 s  0.6 s   1.2 s           2.2 s
#: 1 op in 6 ``sin``  1.5 s  3.7 s  9.2 s   22 s    65 s  447 s (wall)
#: ================  =====  =====  =====  =====  ======  ==============
#:
#: Arithmetic compiles in about 1 ms an instruction at any length, but libdevice math
#: (inlined) costs 23, 28, 35, 44 and 63 ms an instruction (about 290 ms of wall time
#: at 1538): compile time grows faster than the kernel. A smaller cap compiles such
#: chains a little faster (128: 28 ms an instruction) but pays a launch and a write and
#: read of the intermediate twice as often; 256 keeps a kernel under ten seconds to
#: compile and the boundaries to one per 256 ops. (The interpreter runs any of these
#: kernels in well under a second.)
MAX_REGION_INSTRS = 256
#: Parameters (buffers read) of one region.
MAX_REGION_INPUTS = 16
#: Largest cone cost (``op_cost`` summed) that is recomputed rather than materialized.
MAX_RECOMPUTE_COST = 4
#: Most buffers a recomputed cone may read (a materialized value is one read plus one write).
MAX_RECOMPUTE_LOADS = 2

#: Ops that cost like a transcendental function (several flops, often a libdevice call).
EXPENSIVE_OPS = frozenset({
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "sigmoid", "erf", "pow", "atan2", "div", "floordiv", "mod", "reciprocal"})

#: A split reduction is used when fewer than this many outputs are computed ...
SPLIT_MAX_ROWS = 1024
#: ... and each of them combines at least this many elements.
SPLIT_MIN_REDUCE = 2 ** 16
#: Kept points one program of an outer reduction (kept axis contiguous) covers across its tile.
OUTER_KEPT_PER_PROGRAM = 64
#: An outer reduction with fewer programs than this (two per SM of a 132-SM GPU) splits ...
OUTER_SPLIT_MAX_PROGRAMS = 256
#: ... when it reads at least this many elements in all (below, one launch is fast anyway).
OUTER_SPLIT_MIN_ELEMENTS = 2 ** 20
#: An outer reduction over a short inner kept run (``Domain.short_inner_kept``: one run per
#: program) splits when it has fewer runs than this (four per SM); with more, the emitter would
#: give each run one partial, a partials launch that only adds a write and a combine (H200,
#: bench/exp_s6.py, split in one chunk -> not split: sum over axis 1 of 2000x4000x8 71.0 ->
#: 61.0 us, max of 1024x8192x6 float16 57.5 -> 51.2; split where 512 runs are fewer: sum of
#: 512x16384x3, not split 57.3 us, split in 2 chunks 34.6).
SHORT_RUN_SPLIT_BELOW = 528


def op_cost(op: str) -> int:
    """Relative cost of one instruction when recomputed: 0 for index math, 4 for heavy math."""
    if op in VIEW or op in LEAF or op == "cast":
        return 0
    return 4 if op in EXPENSIVE_OPS else 1


def should_split(rows: int, reduce_size: int, outer: bool = False, short_run: int = 0) -> bool:
    """Whether a reduction with ``rows`` outputs of ``reduce_size`` elements each should split.

    Few outputs (``< SPLIT_MAX_ROWS``) leave most of the GPU idle in a
    one-program-per-output kernel; a long reduction (``>= SPLIT_MIN_REDUCE``)
    makes that idle time matter. E.g. ``sum(x)`` of 2**24 elements (1 row) or
    column sums of a 2**20 x 64 matrix (64 rows) split; softmax rows do not.

    ``outer``: the kept axis is the contiguous one, so one program covers
    ``OUTER_KEPT_PER_PROGRAM`` outputs and the count that matters is programs:
    ``x.sum(axis=0)`` of a 16384 x 4096 matrix (64 programs) splits, of a
    64 x 4096 matrix (too small to matter) does not.

    ``short_run``: the points of a short inner kept run (``Domain.short_inner_kept``), each
    run one program's: the count that matters is runs (``SHORT_RUN_SPLIT_BELOW``).
    """
    if outer and short_run:
        return (rows // short_run < SHORT_RUN_SPLIT_BELOW
                and rows * reduce_size >= OUTER_SPLIT_MIN_ELEMENTS)
    if outer:
        programs = -(-rows // OUTER_KEPT_PER_PROGRAM)
        return (programs < OUTER_SPLIT_MAX_PROGRAMS and reduce_size >= 64
                and rows * reduce_size >= OUTER_SPLIT_MIN_ELEMENTS)
    return rows < SPLIT_MAX_ROWS and reduce_size >= SPLIT_MIN_REDUCE


#: Buffers of an operand's full size (at least M x K elements for A) that its GEMM prologue
#: may read: one (the operand's data; a cast or scale of it reads no more than the product
#: of a written operand would), more only for operands of at most GEMM_SMALL_OPERAND elements.
GEMM_PROLOGUE_MAX_FULL_LOADS = 1
#: Operands this small (elements of one matrix) are cheap whatever their prologue reads.
GEMM_SMALL_OPERAND = 4096
#: Largest prologue cost per element (``op_cost`` summed: a cast and a scale are 1, one
#: transcendental function 4) recomputed for every tile along the other output axis.
GEMM_PROLOGUE_MAX_COST = 4
#: The widest GEMM tile along an output axis: an operand is loaded once per this many
#: columns (A) or rows (B) of the product.
GEMM_TILE_SPAN = 128
#: A row reduction of the product fuses into the GEMM kernel when its rows (N) are at most
#: this long: one tile then spans the row (the heuristics widen block_n to cover it).
GEMM_ROW_MAX_N = 256


def gemm_recomputes(other: int) -> int:
    """How many times a GEMM prologue is computed per element: the tiles along the other
    output axis of extent ``other`` (N for operand A, M for B), at most ``GEMM_TILE_SPAN`` wide."""
    return max(1, -(-other // GEMM_TILE_SPAN))


# -- TF32 products of a row-major B (``rules.rule_tf32_k_major_b``) ---------------------------
#
# Hopper's TF32 wgmma reads both operands K-major from shared memory. A B read with N
# contiguous (a row-major ``[K, N]`` array) is multiplied as ``(B^T A^T)^T`` with B^T
# through registers (``codegen/gemm.py``, ``_swap_for_tf32``); a K-major B (``a @ bt.T``)
# loads through TMA (``gemm.py``, ``_default_programs``). Figures of the H200, float32
# 4096^3 in TF32, default tiles 256x128x32 (8 warps, 3 stages):

#: FLOP/s of the swapped product (B row-major): 265 TFLOP/s
#: (``bench/results/h200-matmul-2026-12-02.md``, "f32 4096^3 tf32").
TF32_N_MAJOR_B_FLOPS = 265e12
#: FLOP/s with B K-major and TMA loads: 328.0 one program per tile, 328.1-330.2 persistent
#: (``bench/results/h200-persistent-2026-12-02.txt``, "tf32 4096^3 B K-major"). (Pointer
#: loads gave 275-297: ``bench/results/h200-experiments-2026-12-01.txt``.)
TF32_K_MAJOR_B_FLOPS = 330e12
#: Bytes per second a transposing copy moves (read plus write): ``fj.transpose(b) * 1.0`` of a
#: 4096x4096 float32 ``b`` took 35.9 us, 134 MB read and written
#: (``bench/results/h200-persistent-2026-12-02.txt``): 3.74e12 B/s.
TRANSPOSE_BYTES_PER_S = 2 * 4096 * 4096 * 4 / 35.9e-6
#: One more launch: cuLaunchKernel of a prepacked kernel, 5.14 us of host time
#: (``bench/results/h200-experiments-2026-12-01.txt``); an upper bound of what it adds to the
#: device's time when the GPU is busy, and what keeps a pass off products too small to gain.
EXTRA_LAUNCH_S = 5.14e-6


def layout_pass_gain(flops: float, pass_bytes: int, rate_as_is: float, rate_after: float
                     ) -> tuple[float, float, float]:
    """(seconds the pass saves, seconds of the product as it is, seconds of the pass) for a
    product of ``flops`` (2 * batch * M * N * K) running at ``rate_as_is`` FLOP/s, or at
    ``rate_after`` once a transposing pass that reads and writes ``pass_bytes`` has rewritten
    its B."""
    saved = flops * (1 / rate_as_is - 1 / rate_after)
    return saved, flops / rate_as_is, pass_bytes / TRANSPOSE_BYTES_PER_S + EXTRA_LAUNCH_S


def tf32_transpose_gain(flops: float, pass_bytes: int) -> tuple[float, float, float]:
    """``layout_pass_gain`` of a TF32 product whose N-major B a pass writes K-major."""
    return layout_pass_gain(flops, pass_bytes, TF32_N_MAJOR_B_FLOPS, TF32_K_MAJOR_B_FLOPS)


# -- full-precision float32 products of a K-major B (``rules.rule_fma_n_major_b``) -----------
#
# Full-precision float32 runs on the FMA units: ``tl.dot`` stages both tiles in shared memory
# and each thread reads rows of B's tile along N. A B read K-major (``a @ bt.T``, a linear
# layer's ``x @ w.T``) makes those reads strided. H200, the GEMM alone, default tiles
# 128x128x32, 4 warps (``bench/exp_s15b.py``, ``bench/results/h200-s15-call2``), TFLOP/s with
# B row-major / K-major: 4096^3 42.2 / 24.4, 6400x1552x3336 29.1 / 19.4 (cuBLAS 51.1, 45.8;
# an A read M-major changed little: 41.4, 34.0).

#: FLOP/s of the FMA product with B read N-major: with the 64x64 tiles chosen since
#: (``heuristics.gemm_config``; H100, ``bench/results/h100-s15-call4``) 36-44 TFLOP/s at the
#: five shapes timed, 39 at 2048x512x8192.
FMA_N_MAJOR_B_FLOPS = 39e12
#: FLOP/s with B read K-major: 19.4 at 6400x1552x3336 in 128x128 tiles; in 64x64 tiles 14
#: (H200, 4 stages, ``bench/results/h200-s15-call1/exp_s15_ieee.txt``). The larger figure is
#: kept: the model then undercounts the gain, and errs toward no pass where it is unmeasured
#: (products of 48-128 rows).
FMA_K_MAJOR_B_FLOPS = 19.4e12


def fma_n_major_gain(flops: float, pass_bytes: int) -> tuple[float, float, float]:
    """``layout_pass_gain`` of a full-precision float32 product whose K-major B a pass writes
    row-major."""
    return layout_pass_gain(flops, pass_bytes, FMA_K_MAJOR_B_FLOPS, FMA_N_MAJOR_B_FLOPS)


# -- float16 GEMM operands whose rows are not 16-byte aligned (``rules.rule_align_gemm_operands``)
#
# A row of ``C`` float16 elements that is not a multiple of 16 bytes long (``C % 8``) makes
# every row of the buffer start on a 2-, 4- or 8-byte boundary: the GEMM's tiles then load
# 2-8 bytes at a time instead of 16 and cannot use TMA. Measured on the H200 (an unseen draw
# of GEMMs, ``bench/results/h200-s7-2026-12-02.md``, default tiles, TFLOP/s):
# 7453x3898x5000 with B's rows 4-byte aligned 377 (torch.compile, which pads them, 550);
# 1548x11932x3183 with ``b.T`` and both operands' rows 2-byte aligned 122 (445); aligned
# products of that size run at 600-670.

#: FLOP/s of a float16 GEMM whose operand rows are 16-byte aligned (large products, default
#: tiles: 620-670 in ``bench/results/h200-matmul-2026-12-02.md``; rounded down for mid sizes).
GEMM_F16_ALIGNED_FLOPS = 600e12
#: The share of that rate left when the worst operand's rows start on g-byte boundaries (4:
#: 377 of 600). 2 bytes: 122 of about 550 at 1548x11932x3183 b.T, and the fifteenth session's
#: mid-size products as read (H200, ``bench/results/h200-s15-call2/exp_s7b_floor.txt``,
#: TFLOP/s): 5000x721x2185 146, 32 x 257x521x1000 77, 3 x 223x1649x4703 76, 7423x2185x257
#: b.T 68, 2321x2782x515 143; at 0.22 the model had the two batched products' copies cost
#: more than they save (27.4 against 26.0 us, 45.5 against 41.9) where they ran 111 -> 83
#: and 137 -> 83 us with them. At 0.15 (the mean of those five, 102 of 600, rounded down a
#: little for the b.T one) every decision of that file is the measured one.
GEMM_MISALIGNED_SHARE = {8: 0.8, 4: 0.6, 2: 0.15, 1: 0.15}
#: The share of the copy rate a GEMM's loads reach with rows on g-byte boundaries when it is
#: bound by memory (a decode-like product reads B once); not measured apart: assumed, so that
#: a copy of B, which reads and writes it, never pays for a product that reads it once.
GEMM_MISALIGNED_MEMORY_SHARE = {8: 0.9, 4: 0.7, 2: 0.5, 1: 0.5}
#: Bytes per second the aligning copy moves (read plus write): the word copy
#: (``pointwise.PointwiseEmitter.pitched_copy``) moved 2.8-3.3e12 B/s on the H200 at 20-166 MB
#: (``bench/results/h200-exp-s7b-copies-words-2026-12-02-s8.txt``; before it, element by
#: element, 0.8e12).
ALIGN_BYTES_PER_S = 3.0e12
#: Fewest flops (2 * batch * M * N * K) of a product whose operands are copied: the model's
#: aligned rate holds for large products only. H200, us of whole plans without -> with the
#: word copies (same file): 2.9e11 flops 715 -> 536, 2.2e11 1314 -> 494, 1.2e11 1186 -> 271,
#: 2.8e10 (1023x1486x9171) 330 -> 135; but 1.6e10 (5000x721x2185) 107 -> 136, 1.0e10 (3
#: batches of 223x1649x4703) 137 -> 180, 8.6e9 (32 batches of 257x521x1000) 111 -> 167 and
#: 6.6e9 (2321x2782x515) 46.0 -> 43.9, where the model had the copies pay. The bound sat
#: between 1.6e10 and 2.8e10 (it was 4e10 while the copies ran at 0.8e12 B/s). Fifteenth
#: session, the same shapes with today's code on the H200 (``bench/exp_s7b.py``,
#: ``bench/results/h200-s15-call2/exp_s7b_floor.txt``): 1.6e10 108 -> 70, 1.0e10 137 -> 83,
#: 8.6e9 111 -> 83, but 6.6e9 46.5 -> 56.6 (on an H100 every one of them gained:
#: ``bench/results/h100-s14-call3-exp_s7b_floor.txt``); so the bound now sits between 6.6e9
#: and 8.6e9.
GEMM_ALIGN_MIN_FLOPS = 8e9
#: The same where every operand copied is read K-major (A, or a B stored transposed): each
#: product above that lost to its copies read a misaligned B N-major, while on an H100
#: (``bench/results/h100-s14-call1-exp_s7b_short.txt``) 7423x2185x257 with ``b.T``, both
#: operands' rows 2-byte aligned and 8.3e9 flops, ran 123 us as read and 48 through the
#: copies (36 the GEMM; on the H200 122 -> 57); the model's floor for small products, not a
#: measured bound.
GEMM_ALIGN_MIN_FLOPS_K_MAJOR = 5e9
#: Fewest flops of a full-precision float32 product whose A (read row-major, K contiguous) is
#: copied to rows padded to 16 bytes; its B is never copied (no time model: the FMA kernel
#: gained a few percent where A's rows were misaligned and lost where B's were). H100, whole
#: plans, copies off -> on (``bench/exp_s7b.py --set ieee``, ``bench/results/h100-s16-call4``):
#: 6410x1550x3337 with bias and GELU (6.6e10) 2065 -> 1891 us, 4096x4096x4093 (1.4e11, A
#: alone misaligned) 3230 -> 3105; but 4096x4093x4096 (B alone) 3230 -> 3352, and each product
#: of 4.3e9 flops or less lost (257x3467x585 73 -> 84, 1001x3001x701 132 -> 144, 16 x
#: 257x521x1001 196 -> 237), as did 2047x513x8191 (1.7e10) 967 -> 1019.
FMA_ALIGN_MIN_FLOPS = 5e10
#: ``FUSEJIT_GEMM_ALIGN=1`` (default): copy misaligned operands where ``align_gain`` says it
#: pays; ``0``: never; ``always`` (for tests and the fuzzer): every float16 or float32 GEMM operand
#: with misaligned rows that the rule can copy, whatever its size (read when a plan is built).
GEMM_ALIGN_MODES = ("0", "1", "always")


def gemm_align_mode() -> str:
    """``FUSEJIT_GEMM_ALIGN``, checked (it may hold anything)."""
    mode = os.environ.get("FUSEJIT_GEMM_ALIGN", "1")
    if mode not in GEMM_ALIGN_MODES:
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_GEMM_ALIGN={mode!r} is not one of "
                           f"{', '.join(GEMM_ALIGN_MODES)}")
    return mode


def gemm_seconds(flops: float, nbytes: int, loads: int, stores: int) -> float:
    """A float16 GEMM's time, roofline-style: compute at ``GEMM_F16_ALIGNED_FLOPS`` slowed by
    the share of its worst operand's row alignment ``loads`` (bytes; 16: aligned), or moving
    ``nbytes`` (operands read once, the product written) at the copy rate slowed by the share
    of the worst alignment of its operands' and its product's rows (``stores``)."""
    def share(table: dict[int, float], align: int) -> float:
        return 1.0 if align >= 16 else table[align]
    return max(flops / (GEMM_F16_ALIGNED_FLOPS * share(GEMM_MISALIGNED_SHARE, loads)),
               nbytes / (ALIGN_BYTES_PER_S
                         * share(GEMM_MISALIGNED_MEMORY_SHARE, min(loads, stores))))


def align_gain(flops: float, nbytes: int, before: int, after: int, stores: int,
               copied: list[int]) -> tuple[float, float, float]:
    """(seconds saved, seconds of the product as it is, seconds of the copies) for a float16
    GEMM of ``flops`` moving ``nbytes`` whose worst operand alignment goes from ``before`` to
    ``after`` bytes (its product's rows: ``stores``) by copying operands of ``copied`` bytes
    each (one launch per copy)."""
    gemm = gemm_seconds(flops, nbytes, before, stores)
    saved = gemm - gemm_seconds(flops, nbytes, after, stores)
    return saved, gemm, align_copies_seconds(copied)


# -- TF32 operands whose rows are not 16-byte aligned (``rules.rule_align_gemm_operands``) --
#
# A float32 row of ``C`` elements with ``C % 4`` starts every row of its buffer on 4 or 8
# bytes: the TF32 GEMM's tiles load an element or two at a time. Measured on an H100, whole
# plans with the copies off / forced (``python3 bench/exp_s7b.py --set tf32``,
# ``bench/results/h100-s12-call1-exp_s7b_tf32.txt``, us), two cases:
# - B row-major with rows of ``N % 4`` (read N-major through registers: the swapped product,
#   ``codegen/gemm.py``, ``_swap_for_tf32``): the GEMM ran at 0.20-0.33 of its time on padded
#   rows, and the whole plan with the copies won at every size from 1e9 flops: 224x241x9669
#   116 -> 55, 1000x1001x999 101 -> 35, 2000x2001x2003 + bias + relu 379 -> 126,
#   128x4097x4093 358 -> 132, 8 x 257x521x1001 195 -> 75, 8192x1023x257 + residual 218 ->
#   91, and the decode-like 16x12289x8191 703 -> 465 (bound by its scalar loads, not by
#   reading B); at 2.5e8 and 3.2e7 flops even (32 -> 30, 25 -> 25). No roofline of the product
#   gives these (the small ones are bound by their loads' latency), so such products are
#   copied from ``TF32_ALIGN_MIN_FLOPS`` on.
# - otherwise (B K-major, ``a @ bt.T``, or only A's rows misaligned): the GEMM ran at
#   0.62-0.74 of its padded time (4095x4097x4093 b.T 729 / 451, 3001x2047x1537 b.T 178 / 131,
#   1023x1023x8191 b.T 160 / 112; A's rows 8-byte aligned, 4096x4096x4094, 0.79), and the
#   copies paid only where the product is long beside them (748 -> 587, 178 -> 163, but
#   160 -> 172 and a decode-like 5x4251x7665 b.T 69 -> 189): ``tf32_align_gain``, a
#   roofline at ``TF32_MISALIGNED_SHARE`` of the TF32 rate against the copies.
# Full precision ("ieee") float32 products gained nothing measurable from padded rows at
# small sizes (257x3467x585 + residual 72 -> 72 us, 1000x1001x999 69 -> 64 before the copies'
# ~15); large ones copy A alone (``FMA_ALIGN_MIN_FLOPS``, below). ``tf32x3`` was not
# measured: it is left as it is.

#: Fewest flops of a TF32 product whose misaligned N-major B is copied (with its A).
TF32_ALIGN_MIN_FLOPS = 5e8
#: The share of the TF32 rate left when the worst operand's rows start on g-byte boundaries
#: and B is K-major or aligned (see above: 0.62-0.74 at 4 bytes, 0.79 at 8). An operand of
#: 1- or 2-byte elements (bool, int8, float16 cast to float32 in the prologue, which the
#: rule never copies) can start rows on 2 or 1 bytes: not measured, the 4-byte share.
TF32_MISALIGNED_SHARE = {8: 0.8, 4: 0.7, 2: 0.7, 1: 0.7}


def tf32_align_gain(flops: float, nbytes: int, before: int, b_n_major: bool,
                    copied: list[int]) -> tuple[float, float, float]:
    """(seconds saved, seconds of the product as it is, seconds of the copies) for a TF32
    GEMM of ``flops`` moving ``nbytes`` whose worst operand alignment goes from ``before`` to
    16 bytes by copying operands of ``copied`` bytes: a roofline at the TF32 rate of its B's
    layout (``TF32_N_MAJOR_B_FLOPS`` or ``TF32_K_MAJOR_B_FLOPS``) times
    ``TF32_MISALIGNED_SHARE``, or moving ``nbytes`` at the copy rate times
    ``GEMM_MISALIGNED_MEMORY_SHARE``."""
    rate = TF32_N_MAJOR_B_FLOPS if b_n_major else TF32_K_MAJOR_B_FLOPS
    gemm = max(flops / (rate * TF32_MISALIGNED_SHARE[before]),
               nbytes / (ALIGN_BYTES_PER_S * GEMM_MISALIGNED_MEMORY_SHARE[before]))
    aligned = max(flops / rate, nbytes / ALIGN_BYTES_PER_S)
    return gemm - aligned, gemm, align_copies_seconds(copied)


def align_copies_seconds(copied: list[int]) -> float:
    """Seconds of the alignment copies of buffers of ``copied`` bytes: each read and written
    at ``ALIGN_BYTES_PER_S``, plus a launch."""
    return sum(2 * b / ALIGN_BYTES_PER_S + EXTRA_LAUNCH_S for b in copied)


# -- an outer reduction broadcast back over its reduced axes (``rules.rule_broadcast_back_inner_only``)
#
# Softmax over a leading axis, ``(x - x.mean(0)) / x.std(0)``: when the reduced extent fits one
# tile the emitter holds a block of columns whole in registers, reduces it and writes the
# outputs from the same tile (one read of the input, one write), where two kernels read the
# input twice. On by default for reduced extents of at most ``OUTER_BROADCAST_MAX`` elements
# of at most ``OUTER_BROADCAST_MAX_ITEMSIZE`` bytes; ``FUSEJIT_OUTER_BROADCAST=0`` (read when
# a plan is built) keeps two kernels. Timed on the H200 (``bench/exp_s7c.py``, eighth
# session; us, two kernels / one): softmax over axis 0 of 200x131072 float32 87.7 / 60.2
# (60% / 87% of a copy's rate), of 32x1048576 115.1 / 72.1, of 127x74436 float16 23.9 / 17.2,
# over axis 1 of 1000x100x300 98.8 / 67.8; a normalize over axis 0 of 256x65536 float32
# 57.3 / 38.7, of 64x262144 float16 43.9 / 28.1, over axes (0, 1) of 16x12x65536 43.3 / 29.4,
# over axis 0 of 81x256318 72.4 / 72.6 (even); float64 lost, softmax over axis 0 of
# 100x100000 78.6 / 110.1 (a tile of doubles whole in registers), hence the item size bound.

#: Most reduced elements an outer reduction broadcast back may have (the emitter's one-tile
#: outer reduction holds up to 256: ``codegen.heuristics.OUTER_SHORT_EXTENT``).
OUTER_BROADCAST_MAX = 256
#: Widest element (bytes) of a value of such a region: float64 tiles measured slower fused.
OUTER_BROADCAST_MAX_ITEMSIZE = 4


def outer_broadcast_enabled() -> bool:
    """``FUSEJIT_OUTER_BROADCAST``, checked: ``1`` (the default) fuses a short outer reduction
    with its broadcast back; ``0`` keeps two kernels."""
    mode = os.environ.get("FUSEJIT_OUTER_BROADCAST", "1")
    if mode not in ("0", "1"):
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_OUTER_BROADCAST={mode!r} is not one of 0, 1")
    return mode == "1"


# -- launch order -------------------------------------------------------------------------

#: Fewest bytes of an input that a pointwise kernel (or split reduction) reads right after
#: the launch before it read or wrote it front to back, for the kernel to run its programs
#: last first (``rules.rule_reverse_reread``): a smaller buffer sits in L2 (50 MB on the
#: H100 and H200) whole, whatever the order.
REVERSE_REREAD_MIN_BYTES = 16 << 20
#: ``FUSEJIT_REVERSE_REREADS=1`` (default): apply ``rules.rule_reverse_reread``; ``0``: every
#: launch runs its programs in order (read when a plan is built).
REVERSE_REREAD_MODES = ("0", "1")


def reverse_rereads() -> bool:
    """``FUSEJIT_REVERSE_REREADS``, checked (it may hold anything)."""
    mode = os.environ.get("FUSEJIT_REVERSE_REREADS", "1")
    if mode not in REVERSE_REREAD_MODES:
        from ..errors import FusejitError
        raise FusejitError(f"FUSEJIT_REVERSE_REREADS={mode!r} is not one of "
                           f"{', '.join(REVERSE_REREAD_MODES)}")
    return mode == "1"
