"""The GPU heuristics' shape- and work-dependent choices, read from the emitted launches.

Each rule was measured on the H200 (the numbers are in ``fusejit/codegen/heuristics.py``);
these tests pin which regions a rule applies to, so that a later change to the emitter cannot
drop it silently. Emission only: nothing runs.
"""

from __future__ import annotations

import re

import numpy as np

import fusejit as fj
from fusejit.codegen import heuristics
from fusejit.codegen.heuristics import reduction_tiles, split_tiles
from fusejit.codegen.triton_emitter import emit_kernel
from fusejit.fuse import plan_for
from fusejit.fuse.rules import rule_split_reduction
from fusejit.ir.domain import region_domain


def _emitted(t: fj.Tensor) -> list:
    program = plan_for(fj.parse(fj.dump(t))).program
    return [emit_kernel(k, None, "cuda") for k in program.kernels]


def _lazy(shape: tuple[int, ...], dtype: type = np.float32) -> fj.Tensor:
    return fj.asarray(np.zeros(shape, dtype))


def test_slow_math_takes_two_elements_per_thread() -> None:
    x = _lazy((1 << 20,))
    y = x
    for _ in range(2):
        y = fj.sin(y) * 1.5 + fj.cos(y) * 0.5
    (heavy,) = _emitted(y)
    (light,) = _emitted(fj.exp(x) * 2.0 + fj.tanh(x))  # exp is not slow math; one tanh
    assert "1-D blocks of 512 elements" in heavy.source
    assert "4 calls of slow math per element: 2 elements per thread" in heavy.source
    assert heavy.launches[0].num_warps == 8
    assert "1-D blocks of 1024 elements" in light.source


def test_welford_halves_the_outer_tile_not_a_sum() -> None:
    x = _lazy((65536, 1024))
    (std,) = _emitted(x.std(axis=0))
    (total,) = _emitted(x.sum(axis=0))
    assert "32x64 tiles" in std.source
    assert "32x128 tiles" in total.source
    assert split_tiles("cuda", 1024, 65536, True, 4, state=2) == (32, 64, 8)
    assert split_tiles("cuda", 1024, 65536, True, 4) == (32, 128, 8)
    outer = reduction_tiles("cuda", 16384, 4096, True, 4, state=2)
    assert outer.block_m * outer.block_n == 2048 and "Welford" in outer.why
    # rows (inner reductions) keep their tiles: var over the last axis is at the bandwidth
    assert reduction_tiles("cuda", 16384, 4096, False, 4, state=2) == \
        reduction_tiles("cuda", 16384, 4096, False, 4)


def test_two_byte_rows_in_registers_take_half_the_warps() -> None:
    f16 = reduction_tiles("cuda", 32768, 4096, False, 2)
    f32 = reduction_tiles("cuda", 32768, 4096, False, 4)
    assert (f16.block_m, f16.block_n) == (f32.block_m, f32.block_n) == (1, 4096)
    assert (f32.num_warps, f16.num_warps) == (8, 4)
    x = _lazy((32768, 4096), np.float16)
    e = fj.exp(x - x.max(axis=-1, keepdims=True))
    (softmax,) = _emitted(e / e.sum(axis=-1, keepdims=True))
    assert softmax.launches[0].num_warps == 4
    # looped rows (too wide for registers) are not affected
    assert reduction_tiles("cuda", 256, 1 << 18, False, 2).num_warps == \
        reduction_tiles("cuda", 256, 1 << 18, False, 4).num_warps


def test_split_candidates_offer_chunks_of_whole_tiles() -> None:
    """``sum`` over axes (0, 2) of 64x4096x256 (the suite's ``sum_axes02``, 0.87-0.89x of
    torch.compile): the heuristic's 5 partials cut 16384 into 3328-element chunks, 26 tiles
    of 128 with the last chunk short and every tile masked. The autotuner may also try the
    fewest partials up to twice that which cut it into equal chunks of whole tiles (8 of
    2048); none is offered when the heuristic's chunks are already even, or none is even."""
    from fusejit.codegen.heuristics import _even_split, split_candidates
    cands = split_candidates("cuda", 4096, 16384, True, 4)
    assert cands[0].split == 5 and cands[1].why == "chunks of whole tiles"
    assert cands[1].split == 8 and 16384 % (cands[1].split * cands[1].block_n) == 0
    assert _even_split(16384, 128, 4) is None  # 32 tiles each already
    assert _even_split(1000, 128, 3) is None  # a ragged last tile anyway
    assert _even_split(128 * 7, 128, 2) is None  # 7 tiles: no count from 3 to 4 divides them
    assert _even_split(128 * 12, 128, 5) == 6


def test_short_rows_take_fewer_warps_and_unaligned_ones_fewer_still() -> None:
    """Rows held in registers, tiles of at most ``SMALL_ROW_TILE`` 4-byte elements: half the
    warps; rows whose length in bytes is not a multiple of 16 (no 16-byte vector loads):
    a quarter (``bench/exp_tiles.py``: rows of 141, 129 -> 55 us)."""
    from fusejit.codegen.heuristics import SMALL_ROW_TILE
    aligned = reduction_tiles("cuda", 90000, 700, False, 4)  # 2800 bytes
    unaligned = reduction_tiles("cuda", 369027, 141, False, 4)  # 564 bytes
    assert (aligned.block_m * aligned.block_n, aligned.num_warps) == (SMALL_ROW_TILE, 4)
    assert (unaligned.block_m, unaligned.block_n, unaligned.num_warps) == (8, 256, 2)
    assert "not 16-byte aligned" in unaligned.why and "aligned" not in aligned.why
    # wider rows, 2-byte rows and looped rows keep their warps
    assert reduction_tiles("cuda", 16384, 4096, False, 4).num_warps == 8
    assert reduction_tiles("cuda", 16384, 4095, False, 4).num_warps == 8
    assert reduction_tiles("cuda", 300000, 141, False, 2).num_warps == 4
    assert reduction_tiles("cuda", 4096, 141, False, 4).num_warps == 2  # (never 1 warp)
    x = _lazy((100000, 141))
    (mean,) = _emitted(x.mean(axis=1))
    assert mean.launches[0].num_warps == 2 and "2 warps for short rows" in mean.source


def test_a_short_outer_extent_under_many_kept_points_is_one_tile() -> None:
    """``x.sum(axis=0)`` of 109x184950: the 109 reduced rows in one tile of 128, 64 kept
    points across it, 4 warps (was 256x16, a loop of 7 steps, 8 warps: 30.3 -> 23.4 us)."""
    t = reduction_tiles("cuda", 184950, 109, True, 4)
    assert (t.block_m, t.block_n, t.num_warps, t.persistent) == (64, 128, 4, True)
    assert "in one tile" in t.why
    f64 = reduction_tiles("cuda", 184950, 109, True, 8)  # half the tile for 8-byte types
    assert (f64.block_m, f64.block_n) == (32, 128)
    # a longer extent, or few kept points, keep the looped tiles
    wider = reduction_tiles("cuda", 129955, 144, True, 4)  # up to 256: 32 kept points
    assert (wider.block_m, wider.block_n, wider.num_warps) == (32, 256, 4)
    assert not reduction_tiles("cuda", 184950, 300, True, 4).persistent
    few = reduction_tiles("cuda", 4096, 109, True, 4)
    assert "in one tile" not in few.why and few.num_warps == 8
    x = _lazy((96, 16384 * 2))
    (total,) = _emitted(x.sum(axis=0))
    assert "the reduced extent of 96 in one tile" in total.source


def test_welford_halves_a_looped_rows_step_and_caps_its_partials() -> None:
    """var/std over rows too wide for registers (over 32768 float32) step 2048 float32 at a
    time (4096 for a sum); a split var/std keeps at most one partial per SM (its last program combines
    Welford triples)."""
    from fusejit.codegen.heuristics import SMS, choose_split, split_candidates
    var = reduction_tiles("cuda", 3000, 40000, False, 4, state=2)
    total = reduction_tiles("cuda", 3000, 40000, False, 4)
    assert (var.block_n, total.block_n) == (2048, 4096) and "Welford" in var.why
    assert choose_split(50, 200000, 2, 32) == 264
    assert choose_split(50, 200000, 2, 32, state=2) == SMS
    assert split_candidates("cuda", 50, 200000, True, 4, state=2)[0].split == SMS
    x = _lazy((1000, 54452))
    (v,) = _emitted(x.var(axis=1))
    assert "looped in steps of 2048 (Welford: half the step)" in v.source


def test_float32_rows_of_16k_to_32k_are_held_by_16_warps_when_they_fill_the_gpu() -> None:
    """``bench/exp_s5.py``: a looped row reads twice; held in registers by 16 warps, softmax of
    1100x24000 79.1 -> 62.1 us, layer norm of 1200x32000 120.0 -> 80.6. Under
    ``TARGET_PROGRAMS`` rows (427: 34.5 -> 36.4 us held) and for other types it stays looped."""
    from fusejit.codegen.heuristics import TARGET_PROGRAMS
    held = reduction_tiles("cuda", TARGET_PROGRAMS, 24000, False, 4)
    assert (held.block_m, held.block_n, held.num_warps, held.persistent) == (1, 32768, 16, True)
    assert reduction_tiles("cuda", 6000, 32768, False, 4, state=2).persistent  # Welford too
    assert not reduction_tiles("cuda", TARGET_PROGRAMS - 1, 24000, False, 4).persistent
    assert not reduction_tiles("cuda", 6000, 32769, False, 4).persistent
    assert not reduction_tiles("cuda", 6000, 24000, False, 2).persistent
    assert not reduction_tiles("cuda", 6000, 12000, False, 8).persistent
    assert reduction_tiles("cuda", 6000, 16384, False, 4).num_warps == 16  # (as before)
    (softmax,) = _emitted(fj.softmax(_lazy((1100, 24000)), axis=-1))
    assert softmax.launches[0].num_warps == 16 and "for k in range" not in softmax.source


def test_2d_tiles_with_slow_math_bound_the_calls_each_thread_inlines() -> None:
    """Draw 20261207:24's u11 (three sines over a transposed float32 read with rows not
    16-byte aligned) had 64x128 tiles of 8 warps: 32 elements per thread, 96 inlined sines,
    2.45 s of cold compile on the H200's host. At most ``HEAVY_2D_COPIES`` (16) calls per
    thread now: 32x32 there; one call keeps 64x64 (16 per thread); no call keeps 64x128."""
    from fusejit.codegen.heuristics import HEAVY_2D_COPIES, tiles_2d
    for heavy, (tm, tn) in ((0, (64, 128)), (1, (64, 64)), (2, (64, 32)), (3, (32, 32)),
                            (6, (32, 16)), (12, (16, 16)), (40, (16, 16))):
        t = tiles_2d("cuda", 25578, 395, 4, 102312, heavy)
        assert (t.tile_m, t.tile_n, t.num_warps) == (tm, tn, 8), heavy
        assert heavy * t.tile_m * t.tile_n // 256 <= max(HEAVY_2D_COPIES, heavy)
    assert tiles_2d("interpret", 25578, 395, 4, 102312, 3) == tiles_2d("interpret", 25578, 395)
    x = _lazy((395, 25578)).T
    y = fj.sin(fj.sin(x))
    (k,) = _emitted(fj.where(y > 0, y, y * 0.1) + fj.sin(y))
    assert "tl.arange(0, 32)[:, None]" in k.source and "tl.arange(0, 32)[None, :]" in k.source
    assert "3 calls of slow math per element, at most 4 elements per thread" in k.source


def test_transposed_reads_get_2d_tiles_even_along_a_short_axis() -> None:
    """An [N, 3] input written as [3, N] ran as flat blocks reading it 3 elements apart
    (``bench/exp_s5.py``: 247.8 us for float64 N = 10313439, 128.9 in 4x1024 tiles); rows of a
    transposed input not 16-byte aligned take tiles twice as long along the output's last
    axis (769: 72.6 -> 62.9 us); tiles of 4096 elements take 8 warps."""
    from fusejit.codegen.heuristics import tiles_2d
    short = tiles_2d("cuda", 3, 10313439, 8, 24)
    assert (short.tile_m, short.tile_n, short.num_warps) == (4, 1024, 8)
    odd = tiles_2d("cuda", 769, 35118, 4, 3076)
    assert (odd.tile_m, odd.tile_n, odd.num_warps) == (64, 128, 8)
    for m, itemsize, row in ((1000, 4, 4000), (769, 8, 6152), (4096, 4, 16384)):
        even = tiles_2d("cuda", m, 30000, itemsize, row)
        assert (even.tile_m, even.tile_n, even.num_warps) == (64, 64, 8)
    (k,) = _emitted(fj.sqrt(fj.abs(_lazy((100000, 3), np.float64).T)))
    assert "tl.arange(0, 4)[:, None]" in k.source and "i_n * 3 + i_m" in k.source
    assert k.launches[0].num_warps == 8
    x = _lazy((20000, 769))
    (k,) = _emitted(x.T * 2.0 + _lazy((20000,)) - _lazy((769, 1)))
    assert "tl.arange(0, 128)[None, :]" in k.source
    # the bias along the last axis and the column along the other load a row and a column
    assert re.search(r"tl\.load\(p_\w+ \+ i_n, mask=mask_n, other=0\)", k.source), k.source
    assert re.search(r"tl\.load\(p_\w+ \+ i_m, mask=mask_m, other=0\)", k.source), k.source
    # an output whose last axis is short still runs flat (the input rows are then contiguous
    # runs of the output's last axis)
    (k,) = _emitted(_lazy((3, 100000)).T * 2.0)
    assert "tile_n" not in k.source


def test_a_short_inner_kept_run_is_held_across_the_tile_and_split_only_when_few() -> None:
    # a middle axis reduced before a last axis of 3: one run (padded to 4) across the tile,
    # 2048 float32 (1024 float64 or float16) per tile; a split while there are fewer than 528
    # runs (one partial per run past that would only add a launch's write and combine)
    (k,) = _emitted(_lazy((512, 16384, 3)).sum(axis=1))
    assert "kept_pad % 4" in k.source and "tl.arange(0, 4)[:, None]" in k.source
    assert "tl.arange(0, 512)[None, :]" in k.source and "_final" in k.source  # split
    (k,) = _emitted(_lazy((1024, 8192, 6), np.float16).max(axis=1))
    assert "kept_pad % 8" in k.source and "tl.arange(0, 128)[None, :]" in k.source
    assert "_final" not in k.source  # 1024 runs fill the GPU: no split
    (k,) = _emitted(_lazy((374, 13355, 3), np.float64).min(axis=1))
    assert "tl.arange(0, 256)[None, :]" in k.source
    (kernel,) = plan_for(fj.parse(fj.dump(_lazy((1024, 8192, 6), np.float16).max(axis=1)))
                         ).program.kernels
    why = rule_split_reduction(kernel, region_domain(kernel))
    assert why is not None and "1024 runs of 6 kept points fill the GPU" in why, why
    # channel sums of a channels-last image (one run): the outer reductions' tile
    (k,) = _emitted(_lazy((128, 224, 224, 3)).sum(axis=(0, 1, 2)))
    assert "tl.arange(0, 1024)[None, :]" in k.source and "_final" in k.source
    # a run of 32 or more points, or a short reduction: the usual outer tiles
    for shape in ((64, 4096, 32), (4000, 100, 3)):
        (k,) = _emitted(_lazy(shape).sum(axis=1))
        assert "kept_pad" not in k.source


def test_pointwise_blocks_halve_when_the_flat_size_breaks_vector_loads() -> None:
    # a flat size that is not a multiple of 16 bytes of the narrowest element: the bounds mask
    # breaks every access into single elements; 4 elements per thread instead of 8
    x = _lazy((32749, 187), np.float16)
    (k,) = _emitted((x * 1.5 - 0.25) * x)
    assert "tl.arange(0, 512)" in k.source and "not a multiple of 16 bytes" in k.source
    assert _launch_warps(k) == 4
    # float32 needs a multiple of 4 elements; aligned sizes keep blocks of 1024, and so does
    # float64 (measured slower with 512 at an odd size)
    for shape, dtype, block in (((1000, 187), np.float32, 1024), ((1001, 187), np.float32, 512),
                                ((1001, 186), np.float64, 1024), ((1001, 187), np.float64, 1024),
                                ((4096, 2048), np.float16, 1024)):
        (k,) = _emitted(fj.exp(_lazy(shape, dtype)) + 1.0)
        assert f"tl.arange(0, {block})" in k.source, (shape, dtype)
    # a float32 result of float16 inputs: the float16 buffers decide
    (k,) = _emitted(_lazy((1001, 187), np.float16).astype(np.float32) * 2.0)
    assert "tl.arange(0, 512)" in k.source


def _launch_warps(kernel: object) -> int:
    return kernel.launches[0].num_warps


def test_gemm_tiles_of_129_to_255_rows_follow_the_waves() -> None:
    """Float16 GEMMs of 129-255 rows (two tile rows either way) take 128x256 tiles where those
    need fewer waves of the GPU's programs than 128x128 tiles, else 128x128 (H100 figures in
    ``gemm_config``); 256 rows or more keep 128x256, 128 or fewer 128-row tiles."""
    def tile(m, n, batch=1):
        c = heuristics.gemm_config(m, n, 4096, batch, "float16")
        return c.block_m, c.block_n
    sms = heuristics.SMS
    assert tile(200, 12000) == (128, 256)  # 94 tiles (one wave) against 188 (two)
    assert tile(136, 14000) == (128, 256)
    assert tile(192, 8192) == (128, 128)  # 64 against 128 tiles: one wave both
    assert tile(192, 128 * sms // 2) == (128, 128)  # 132 tiles of 128x128: one wave
    assert tile(192, 128 * sms // 2 + 128) == (128, 256)  # 134 of 128x128: two waves
    assert tile(192, 8192, batch=3) == (128, 256)  # 192 tiles against 384: 2 waves against 3
    assert tile(512, 8192) == (128, 256)


def test_tf32_tiles_are_256x128_at_every_size() -> None:
    """TF32 GEMMs take 256x128 tiles (8 warps), also where 128x128 tiles would take fewer
    rounds' worth of time at a rate 8% lower: on an H100 128x128 ran 1.1-1.5x slower there
    (``gemm_config``'s comment); only the halving under half a wave shrinks them."""
    for m, n in ((3001, 2047), (6000, 3000), (5183, 1023), (4096, 4096), (2000, 2001)):
        c = heuristics.gemm_config(m, n, 4096, 1, "float32", "tf32")
        assert (c.block_m, c.block_n, c.num_warps) == (256, 128, 8), (m, n, c)


def test_gemms_of_few_rows_split_k_to_fill_the_gpu_three_times() -> None:
    """A product of at most 16 rows (bound by reading B) under a wave of tiles splits K so
    that about three programs run per SM (at most 16 chunks, each of 8 K steps or more, or one
    program per SM where 16 chunks are fewer programs than SMs); a
    wave of tiles or more is not split, and wider products keep the rule of one program per
    SM, and no more programs than SMs, under half a wave (H100 figures in ``gemm_config``)."""
    def split(m, n, k, dtype="float16", precision="ieee"):
        return heuristics.gemm_config(m, n, k, 1, dtype, precision).split_k
    sms = heuristics.SMS
    assert split(2, 5000, 10305) == -(-3 * sms // 79)  # 79 tiles of 16x64
    assert split(5, 4251, 7665, "float32", "tf32") == -(-3 * sms // 67)
    assert split(8, 4096, 4096, "float32") == -(-3 * sms // 64)
    # 4 tiles: past 16 chunks, one program per SM (33), rounded to whole steps (1024 of 64)
    assert split(8, 256, 65536) == heuristics._whole_chunks(1024, -(-sms // 4)) == 32
    assert split(16, 16, 1 << 20) == 128  # one tile: one program per SM, in whole steps
    assert split(1000, 16, 65536) == sms // 16  # 16 tiles: 8 chunks fill the SMs
    assert split(16, 64 * sms, 8192) == 1  # a whole wave of tiles
    assert split(4, 30000, 2048) == 1  # 235 tiles of 16x128
    assert split(2, 5000, 640) == 1  # 10 K steps: not split
    assert split(17, 4352, 8192) == 1  # 68 tiles of 32x64: half a wave, not under it
    assert split(32, 2048, 8192) == sms // 32  # 32 tiles: one program per SM, no more
    # 16 tiles of 64x64: 8 chunks, 128 programs (9 chunks, 144 programs: 53 us against 35 on
    # an H100, TF32 224x241x9669 read through 16-byte rows)
    assert split(224, 241, 9669, "float32", "tf32") == sms // 16
    assert 16 * split(224, 241, 9669, "float32", "tf32") <= sms


def test_full_precision_gemms_split_k_to_four_programs_an_sm() -> None:
    """Full-precision float32 (FMA) over fewer than two waves of 64x64 tiles splits K so that
    about four 4-warp programs run per SM, in at most 4 chunks (H100 figures in
    ``gemm_config``); products of at most 16 rows keep their own rule."""
    def split(m, n, k):
        return heuristics.gemm_config(m, n, k, 1, "float32", "ieee").split_k
    sms = heuristics.SMS
    assert split(128, 4096, 4096) == min(4, 4 * sms // 128)
    assert split(256, 4096, 4096) == 4 * sms // 256 == 2
    assert split(2048, 512, 8192) == 2
    assert split(512, 4096, 4096) == 1  # 512 tiles
    assert split(4096, 4096, 4096) == 1
    assert split(64, 2048, 8192) == 16  # 32 64x64 tiles: four 2-warp programs an SM
    assert split(128, 4096, 512) == 2  # 16 K steps: 8 in each of 2 chunks
    assert split(128, 4096, 480) == 1  # 15 K steps: not split
    assert split(8, 4096, 4096) == -(-3 * sms // 64)  # the few-rows rule
    # float16 is not touched by it
    assert heuristics.gemm_config(128, 4096, 4096, 1, "float16").split_k == 1


def test_full_precision_gemms_split_k_so_that_tiles_fill_whole_rounds() -> None:
    """Full-precision float32 products whose 64x64 tiles leave some SMs a tile more than the
    rest split K so that the busiest SM's work is near the even share
    (``heuristics._fma_round_split``, measured 1.1-1.6x faster on an H100): 288 tiles
    (2047x513x8191) are 3 tiles on 24 SMs and 2 on the others, 1.375x the even share; in 4
    chunks 1.03x. Whole rounds, short chunks and small gains are left as they are."""
    def split(m, n, k):
        return heuristics.gemm_config(m, n, k, 1, "float32", "ieee").split_k
    sms = heuristics.SMS

    def rounds(tiles, chunks):
        work, of = heuristics._fma_rounds(tiles, chunks)
        return work / of
    assert sms == 132
    assert rounds(288, 1) == 3 and rounds(288, 4) == 9 / 4
    assert split(2048, 576, 8192) == 4  # 288 tiles: 5 chunks least, 4 whole steps
    assert split(2047, 513, 8191) == 5  # (K not whole steps: not rounded)
    assert split(1024, 1088, 8192) == 8  # 272 tiles
    assert split(1280, 1280, 4096) == 4  # 400 tiles; 128 steps: at most 4 chunks of 32
    assert split(768, 768, 16384) == 8  # 144 tiles: 3 chunks by the occupancy rule, then 8
    assert split(1280, 1280, 2048) == 2  # 64 steps: 2 chunks of 32 at most
    assert split(1280, 1280, 1024) == 1  # 32 steps: one chunk
    assert split(2048, 512, 8192) == 2  # 256 tiles: the occupancy rule's 2, even rounds
    assert split(2048, 2048, 4096) == 1  # 1024 tiles: 8 on the busiest SM, 7.76 even
    assert split(4096, 4096, 4096) == 1
    assert split(257, 3467, 585) == 1  # 275 tiles but 19 steps
    for tiles in range(1, 3000, 7):
        for steps in (16, 64, 256, 4096):
            before = min(4, max(1, 4 * sms // tiles))
            chosen = heuristics._fma_round_split(tiles, steps, before)
            assert before <= chosen <= heuristics.FMA_ROUND_SPLIT_MAX
            assert all(rounds(tiles, chosen) <= rounds(tiles, c) for c in range(before, chosen))
            assert chosen == before or (
                chosen * heuristics.FMA_ROUND_SPLIT_MIN_STEPS <= steps
                and rounds(tiles, chosen) <= (1 - heuristics.FMA_ROUND_SPLIT_GAIN)
                * rounds(tiles, before) + 1e-12)
    # the choice's sentence (the kernel header's): where the rounds raised the split only
    why = heuristics.gemm_config(2048, 576, 8192, 1, "float32").why
    assert why.startswith("heuristic: K in 4 chunks, not 1: 288 tiles over 132 SMs"), why
    assert heuristics.gemm_config(4096, 4096, 4096, 1, "float32").why == "heuristic"
    whole = heuristics.gemm_config(512, 1024, 3168, 1, "float32")  # 128 tiles, 99 steps
    assert (whole.split_k, whole.why) == (3, "heuristic")  # (4 rounded to whole steps)
    # float64 (64x64x16 tiles on the FMA units too; measured 1.3-1.8x on an H100) by the
    # same rounds, from no split
    f64 = heuristics.gemm_config(2048, 576, 4096, 1, "float64")  # 288 tiles, 256 steps
    assert f64.split_k == 4 and f64.why.startswith("heuristic: K in 4 chunks, not 1"), f64
    assert heuristics.gemm_config(768, 768, 8192, 1, "float64").split_k == 8  # 144 tiles
    assert heuristics.gemm_config(4096, 4096, 4096, 1, "float64").split_k == 1
    assert heuristics.gemm_config(1280, 1280, 256, 1, "float64").split_k == 1  # 16 steps
    # float16 and TF32 keep their rules
    assert heuristics.gemm_config(2047, 513, 8191, 1, "float16").split_k == 1
    assert heuristics.gemm_config(2047, 513, 8191, 1, "float32", "tf32").split_k == 1


def test_int8_products_take_k_tiles_of_at_least_32() -> None:
    """Triton's int8 ``tl.dot`` needs K >= 32: the heuristic's tiles and an edited block_k."""
    assert heuristics.gemm_config(4, 5, 1, 1, "int8").block_k == 32
    assert heuristics.gemm_config(4, 5, 1, 1, "float16").block_k == 16
    attrs = {**heuristics.gemm_config(64, 64, 64, 1, "int8").attrs(), "block_k": 16}
    assert "block_k=16 is not a power of two from 32 to 256" in \
        heuristics.gemm_config_problem(attrs, 64, 64, 64, "int8", (1, 1))


def test_float64_short_run_partials_take_four_warps() -> None:
    """A split reduction's partials over a short inner kept run: float64 tiles (1024
    elements) on 4 warps, eight elements a thread (H100, min over axis 1 of 512x16384x3: 76-78%
    of the copy rate on 8 warps, 81-85% on 4, three runs); float32 keeps 8 (channel sums of
    128x224x224x3: 82% on 8, 74% on 4)."""
    bm, bn, warps = heuristics.split_tiles("cuda", 2048, 16384, True, 8, inner=4)
    assert (bm, bn, warps) == (4, 256, 4)
    assert heuristics.split_tiles("cuda", 4, 6422528, True, 4, inner=4)[2] == 8
    assert heuristics.split_tiles("cuda", 2048, 16384, True, 2, inner=4)[2] == 8
    # the interpreter's tiles do not change
    assert heuristics.split_tiles("interpret", 2048, 16384, True, 8, inner=4)[2] == 4


def test_float16_products_split_k_one_program_an_sm_stream_deep_k_steps() -> None:
    """A float16 product of 16x16 tiles split into one program per SM streams chunks of 8
    steps of 256 or more 256 deep in 5 stages; 64x64 tiles split 16 ways or more run on 8
    warps; other tiles, shorter chunks, float32 in full precision and products of a few rows
    that run several programs an SM keep their tiles; no split passes one wave (H100 figures
    in ``heuristics._split_k_steps`` and ``_fill_split``)."""
    sms = heuristics.SMS

    def config(m, n, k, batch=1, dtype="float16"):
        return heuristics.gemm_config(m, n, k, batch, dtype)
    gram = config(16, 16, 1 << 20)  # (132 chunks rounded to whole steps: 128)
    assert (gram.block_k, gram.num_stages, gram.num_warps, gram.split_k) == (256, 5, 4, 128)
    assert config(1, 16, 1 << 22).block_k == 256
    assert config(16, 16, 1 << 17, batch=8).block_k == 256
    assert heuristics.gemm_shared_bytes(16, 16, 256, 5, (2, 2)) <= heuristics.GEMM_SHARED_LIMIT
    for short in (config(16, 16, 1 << 16), config(16, 16, 4096)):  # chunks of 512
        assert (short.block_k, short.num_stages) == (64, 4)
    for wider in (config(2, 64, 1 << 18), config(32, 2048, 8192)):  # 16x64, 32x64 tiles
        assert (wider.block_k, wider.num_stages) == (64, 4)
    wide = config(64, 64, 1 << 18)
    assert (wide.block_k, wide.num_warps, wide.split_k) == (64, 8, 128)
    assert config(128, 128, 1 << 16).num_warps == 8  # 4 tiles, 33 chunks
    assert config(224, 241, 9669).num_warps == 4  # 16 tiles, 8 chunks
    several = config(2, 5000, 10305)  # 79 tiles, 6 chunks each: several programs an SM
    assert (several.block_k, several.num_stages, several.split_k) == (64, 4, 6)
    f32 = config(16, 16, 1 << 20, dtype="float32")
    assert (f32.block_k, f32.num_warps, f32.num_stages) == (32, 4, 3)
    # a batch of 8 tiles: 16 chunks (128 programs), not 17 (136: a second round)
    assert config(16, 16, 1 << 17, batch=8, dtype="float32").split_k == sms // 8
    assert config(16, 16, 1 << 17, batch=8).split_k == sms // 8


def test_split_k_combine_tiles_spread_the_partials() -> None:
    """A split-K GEMM's combine runs on tiles of ``GEMM_COMBINE_OUTPUTS`` outputs (64 columns
    at most, so rows stay 256-byte runs), loading a power-of-two block of chunks a step within
    ``GEMM_COMBINE_BLOCK`` elements; a combine whose epilogue reduces rows keeps the whole
    row (one row a program where the row is 256 wide or more)."""
    tiles = heuristics.gemm_combine_tiles
    assert tiles(64, 64, 128, False) == (4, 64, 32)  # a Gram matrix: 16 programs, 4 steps
    assert tiles(16, 16, 128, False) == (16, 16, 32)
    assert tiles(128, 128, 4, False) == (4, 64, 4)  # few chunks: one step
    assert tiles(16, 256, 8, True) == (1, 256, 8)  # a row reduction keeps the row
    assert tiles(16, 1024, 40, True) == (1, 1024, 8)
    for bm, bn, split, span in ((64, 64, 132, False), (16, 512, 64, True), (1, 16, 3, False)):
        rows, cols, chunks = tiles(bm, bn, split, span)
        assert rows * cols <= max(heuristics.GEMM_COMBINE_OUTPUTS, bn)
        assert chunks & (chunks - 1) == 0 and chunks * rows * cols <= max(
            heuristics.GEMM_COMBINE_BLOCK, rows * cols)


def test_splits_round_down_to_whole_steps() -> None:
    """A split K whose chunks do not add up to K exactly masks every step: the split rounds
    down to a divisor of the steps within three quarters of it, else stays."""
    whole = heuristics._whole_chunks
    assert whole(4096, 132) == 128 and whole(2048, 128) == 128 and whole(303, 33) == 33
    assert whole(1563, 132) == 132  # 3 x 521: no divisor from 99 to 132
    assert whole(1000, 132) == 125 and whole(1000, 7) == 7 and whole(96, 5) == 4
    config = heuristics.gemm_config
    assert config(5, 5, 100000, 1, "float16").split_k == 132  # 1563 steps of 64
    c = config(16, 16, 100000, 1, "float32")  # 3125 steps of 32: 125 chunks of 25
    assert c.split_k == 125 and 3125 % c.split_k == 0
    assert config(224, 241, 9669, 1, "float32").split_k == 33  # K ragged: every step masked


def test_full_precision_products_of_few_wide_tiles_run_four_two_warp_programs_an_sm() -> None:
    """float32 in full precision, fewer than half the SMs' worth of 32x64 or 64x64 tiles:
    K splits to four programs an SM (chunks of 8 steps or more) on 2 warps; tiles of 16 rows,
    TF32, float16 and products of more tiles keep their warps."""
    sms, config = heuristics.SMS, heuristics.gemm_config
    gram = config(64, 64, 1 << 18, 1, "float32")
    assert (gram.num_warps, gram.split_k) == (2, 512)
    assert (config(128, 128, 1 << 16, 1, "float32").split_k, config(64, 64, 1 << 16, 4,
                                                                     "float32").split_k) == (128, 128)
    assert config(64, 64, 1 << 16, 1, "float32").split_k == 256  # chunks of 8 steps
    odd = config(224, 241, 9669, 1, "float32")  # 16 tiles
    assert (odd.num_warps, odd.split_k) == (2, 4 * sms // 16)
    assert config(32, 2048, 8192, 1, "float32").num_warps == 2
    for keeps in (config(2, 64, 1 << 18, 1, "float32"), config(16, 16, 1 << 20, 1, "float32"),
                  config(64, 64, 1 << 18, 1, "float32", "tf32"), config(64, 64, 1 << 18, 1, "float16"),
                  config(512, 4096, 4096, 1, "float32"), config(64, 64, 300, 1, "float32")):
        assert keeps.num_warps != 2
