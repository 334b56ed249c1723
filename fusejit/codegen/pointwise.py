"""The pointwise kernel kind: a region without reductions, over its flattened output.

A program computes one 1-D block of the flat output (a view's coordinates unravelled
from the flat index where it needs them, a contiguous operand read at the flat index
itself: vectorizable loads). Two layouts replace the flat block where it would not
coalesce: ``[TILE, TILE]`` tiles over an output axis and the last when an input is read
transposed (contiguous along that axis, ``_transposed_axis``), so that both the read and
the write coalesce; and a copy in 8-byte words when the region only copies a buffer to
rows a multiple of 16 bytes apart (``row_pitch``: the GEMM's aligned operands).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.program import Kernel, contiguous_strides, pitched
from . import heuristics
from .heuristics import next_pow2
from .triton_emitter import Launch, _Emitter
from .values import Coords, _Fn, _same_strides, joint_mask


class PointwiseEmitter(_Emitter):
    """Emits a region without reductions: flat blocks, transposed tiles or a pitched copy."""

    def __init__(self, kernel: Kernel, strides: list[tuple[int, ...]], target: str,
                 tiles: Any = None, origin: str | None = None) -> None:
        super().__init__(kernel, strides, target, tiles, origin)
        #: bytes between the rows of an input read transposed (``_transposed_axis``; 0: none)
        self.transposed_row_bytes = 0

    def functions(self) -> tuple[list[_Fn], list[Launch]]:
        """The region's one launch (``pointwise``)."""
        return self.pointwise()

    def pointwise(self) -> tuple[list[_Fn], list[Launch]]:
        """One launch: a pitched copy or 2-D tiles where they apply (``row_pitch``, an input
        read transposed), else 1-D blocks of the flat output (``heuristics``' block and
        warps: wider for slow math, narrower where the flat size breaks vector loads)."""
        if self.row_pitch:  # rows stored apart: a word copy, else 2-D tiles over the last axes
            copied = self._pitched_copy_source()
            if copied is not None:
                return self.pitched_copy(copied)
            axis: int | None = len(self.domain.shape) - 2
        else:
            axis = self._transposed_axis()
        if axis is not None:
            return self.pointwise_2d(axis)
        self.scratch: list[tuple[np.dtype, int]] = []
        d = self.domain
        n = math.prod(d.shape)
        t = self.choose(heuristics.pointwise_candidates(self.target, n, self._heavy_calls(),
                                                        self._narrowest_item()))
        block, num_warps = t.block, t.num_warps
        fn = _Fn(self)
        programs = max(1, -(-n // block))
        fn.out.append(self._ordered_pid(programs))
        fn.out.append(f"offs = pid * {block} + tl.arange(0, {block})  # flat output index")
        fn.level["offs"] = 2
        fn.used.update({"pid", "offs", "mask"})
        if n % block:
            fn.out.append(f"mask = offs < {n}")
            fn.masks = {0: None, 1: None, 2: "mask"}
        coords = Coords(d.shape, "offs", None)
        for j, y in enumerate(self.kernel.yields):
            v = fn.value(y, coords)
            mask = ", mask=mask" if n % block else ""
            fn.out.append(f"tl.store({self.out_name[j]} + offs, "
                          f"{self.store_expr(v, self.types[y].dtype)}{mask})  # yield %{y}")
        self.tiling = [f"1-D blocks of {block} elements over the flat output "
                       f"({programs} programs, {num_warps} warps)"
                       + ("" if t.why in ("", "heuristic") else f": {t.why}"), *self._order_line()]
        return self._single_launch(fn, (programs, 1, 1), num_warps)

    def _ordered_pid(self, programs: int, program_id: str | None = None) -> str:
        """The line defining ``pid``, the block a program computes: its program id
        (``program_id``, default ``_pid()``), or counted from the last block with
        ``order=reversed``."""
        program_id = program_id or self._pid()
        if not self._reversed():
            return f"pid = {program_id}"
        return (f"pid = {programs - 1} - {program_id}  # last block first (order=reversed): "
                f"the launch before left that end in L2")

    def _order_line(self) -> list[str]:
        """The tiling line of ``order=reversed`` (none in order)."""
        return (["programs run last block first (order=reversed): the launch before streamed "
                 "through an input, whose end L2 still holds"] if self._reversed() else [])

    def _transposed_axis(self) -> int | None:
        """An output axis along which some input is contiguous while it is not along the last.

        Such a region gets 2-D tiles over (that axis, the last axis): Triton's
        layout conversion then coalesces both the transposed read and the write. The axis
        may be short (an input of [N, 3] written as [3, N]): flat blocks would read such an
        input 3 elements apart, fetching each sector three times.
        """
        shape = self.domain.shape
        if len(shape) < 2 or shape[-1] < 8 or math.prod(shape) < 1024:
            return None
        origin = tuple(0 for _ in shape)
        axes = [axis for axis in range(len(shape) - 1) if shape[axis] >= 2]
        points = (origin, origin[:-1] + (1,),
                  *(tuple(1 if i == axis else 0 for i in range(len(shape))) for axis in axes))
        sites = self._load_sites(points)
        for j, axis in enumerate(axes):
            for param, offsets in sites:
                o0, o1, o2 = offsets[0], offsets[1], offsets[2 + j]
                if abs(o1 - o0) > 1 and o2 - o0 == 1:
                    # the distance between the input's rows along the output's last axis
                    self.transposed_row_bytes = \
                        abs(o1 - o0) * self.kernel.params[param].type.dtype.itemsize
                    return axis
        return None

    def pointwise_2d(self, axis: int) -> tuple[list[_Fn], list[Launch]]:
        """A pointwise region in ``[TILE, TILE]`` tiles over output axes ``axis`` and the last.

        Other axes are enumerated by the program id (outermost), so one program
        writes one tile; loads and stores use each buffer's own strides.
        """
        self.scratch = []
        d = self.domain
        shape = d.shape
        last = len(shape) - 1
        t = self.choose(heuristics.tiles_2d_candidates(
            self.target, shape[axis], shape[last], self._itemsize(), self.transposed_row_bytes,
            self._heavy_calls()))
        tm, tn = t.tile_m, t.tile_n
        n_m, n_n = -(-shape[axis] // tm), -(-shape[last] // tn)
        batch = [i for i in range(len(shape)) if i not in (axis, last)]
        n_batch = math.prod(shape[i] for i in batch)
        fn = _Fn(self)
        fn.used.update({"pid", "tile_m", "tile_n", "b", "i_m", "i_n", "mask_m", "mask_n", "mask"})
        out = fn.out
        out.append(self._ordered_pid(n_batch * n_m * n_n))
        out.append(f"tile_n = pid % {n_n}  # tile along output axis {last}")
        if n_m > 1:
            out.append(f"tile_m = (pid // {n_n}) % {n_m}  # tile along output axis {axis}")
        fn.level.update({"tile_n": 1, "tile_m": 1})
        dims: list[str] = ["0"] * len(shape)
        if n_batch > 1:
            out.append(f"b = pid // {n_m * n_n}  # the other axes {batch}, flattened")
            fn.level["b"] = 1
            bdims = fn.unravel("b", tuple(shape[i] for i in batch))
            for i, bd in zip(batch, bdims):
                dims[i] = bd
        first_m = f"tile_m * {tm} + " if n_m > 1 else ""  # (one tile along the axis)
        out.append(f"i_m = {first_m}tl.arange(0, {tm})[:, None]  # index along axis {axis}")
        out.append(f"i_n = tile_n * {tn} + tl.arange(0, {tn})[None, :]  # index along axis {last}")
        fn.level.update({"i_m": 2, "i_n": 2})
        dims[axis], dims[last] = "i_m", "i_n"
        masks = []
        if shape[axis] % tm:
            out.append(f"mask_m = i_m < {shape[axis]}")
            masks.append("mask_m")
        if shape[last] % tn:
            out.append(f"mask_n = i_n < {shape[last]}")
            masks.append("mask_n")
        mask = joint_mask(out, masks)
        fn.masks = {0: None, 1: None, 2: mask}
        fn.axis_masks = {"i_m": "mask_m" if "mask_m" in masks else None,
                         "i_n": "mask_n" if "mask_n" in masks else None}
        coords = Coords(shape, None, tuple(dims))
        # (results with rows row_pitch elements apart: their strides, as the backends allocate)
        strides = contiguous_strides(pitched(shape, self.row_pitch))
        for j, y in enumerate(self.kernel.yields):
            v = fn.value(y, coords)
            if self.row_pitch:
                at = fn.emit(2, " + ".join(f"{d} * {st}" if st != 1 else d
                                           for d, n, st in zip(dims, shape, strides)
                                           if n != 1 and d != "0") or "0", "at",
                             f"rows {self.row_pitch} elements apart (row_pitch)")
            else:
                at = fn.flat_of(coords)
            m = f", mask={mask}" if mask else ""
            out.append(f"tl.store({self.out_name[j]} + {at}, "
                       f"{self.store_expr(v, self.types[y].dtype)}{m})  # yield %{y}")
        if self.row_pitch:
            self.tiling = [f"2-D tiles {tm}x{tn} over output axes {axis} and {last}: rows "
                           f"written {self.row_pitch} elements apart (row_pitch), so each row "
                           f"starts on a 16-byte boundary"]
        else:
            self.tiling = [f"2-D tiles {tm}x{tn} over output axes {axis} and {last}: an input "
                           f"is contiguous along axis {axis}, so both its reads and the writes "
                           f"coalesce" + (f" ({t.why})" if t.why.startswith("heuristic:") else "")]
        self.tiling += self._order_line()
        return self._single_launch(fn, (n_batch * n_m * n_n, 1, 1), t.num_warps)

    def _pitched_copy_source(self) -> int | None:
        """The param a ``row_pitch`` kernel only copies, read contiguously, to rows a multiple
        of 16 bytes apart (as the GEMM's alignment copies are: ``fuse/layout.py``,
        ``align_operand``; a pitch the user wrote may be any), else None."""
        body, shape = self.kernel.body, self.domain.shape
        if len(body) != 1 or body[0].op != "permute" or len(self.kernel.yields) != 1 or \
                body[0].attrs.get("perm") != tuple(range(len(shape))) or \
                self.kernel.yields[0] != body[0].name or len(shape) < 1:
            return None
        param = self.param_index.get(body[0].args[0])
        if param is None or self.kernel.params[param].type.shape != shape or \
                not _same_strides(self.strides[param], shape):
            return None
        item = self.types[body[0].name].dtype.itemsize
        return param if item in (1, 2, 4) and self.row_pitch * item % 16 == 0 else None

    def pitched_copy(self, param: int) -> tuple[list[_Fn], list[Launch]]:
        """A contiguous buffer copied to rows ``row_pitch`` elements apart, in 8-byte words.

        The source rows start at any element (a float16 row of 3787 elements: at 2-byte
        boundaries), so element-wise loads move 2 bytes each: the H200 copied 10946x3787 that
        way at 0.8 TB/s (CuPy's ``view[...] = x`` too; a contiguous copy runs at 3.6). Here
        each output word is two aligned 8-byte loads of the source, funnel-shifted by the
        row's misalignment, and one 8-byte store (the output rows are 16-byte aligned). A
        word is stored only when both loads lie wholly inside the source; the source's last
        16 bytes, which may lie in a partial word, are copied element by element by program 0
        (a word that overlaps them and is stored holds the same values). The aligned word under
        a misaligned first row starts up to 7 bytes before the source: inside its allocation,
        which starts 8-byte aligned (CUDA's and NumPy's do).
        """
        self.scratch = []
        shape, pitch = self.domain.shape, self.row_pitch
        item = self.types[self.kernel.yields[0]].dtype.itemsize
        rows, n = math.prod(shape[:-1]), shape[-1]
        words = pitch * item // 8  # per output row (its rows are 16-byte aligned)
        tw = min(128, next_pow2(words))
        tm = max(1, min(1024 // tw, next_pow2(rows)))
        n_w, n_r = -(-words // tw), -(-rows // tm)
        tail = min(16 // item, rows * n)
        src, dst = self.ptr_name[param], self.out_name[0]
        fn = _Fn(self)
        tile_r, tile_w = (f"pid // {n_w}", f"(pid % {n_w}) * {tw} + ") if n_w > 1 else ("pid", "")
        fn.out += [
            self._ordered_pid(n_r * n_w, "tl.program_id(0)"),
            f"r = ({tile_r}).to(tl.int64) * {tm} + tl.arange(0, {tm})[:, None]  # row",
            f"j = {tile_w}tl.arange(0, {tw})[None, :]  # word of the output row",
            f"row_at = {src}.to(tl.int64) + r * {n * item}  # byte address of the source row",
            f"end = {src}.to(tl.int64) + {rows * n * item}  # past the source's last byte",
            "word_at = row_at - row_at % 8 + j * 8  # the aligned source word under word j",
            "shift = (row_at % 8 * 8).to(tl.uint64)  # the row's misalignment, in bits",
            f"store_mask = (r < {rows}) & (j < {words})",
            "lo_in = word_at + 8 <= end",
            "hi_in = word_at + 16 <= end",
            "lo = tl.load(word_at.to(tl.pointer_type(tl.uint64)), mask=store_mask & lo_in, "
            "other=0)",
            "hi = tl.load((word_at + 8).to(tl.pointer_type(tl.uint64)), mask=store_mask & hi_in, "
            "other=0)",
            "word = tl.where(shift == 0, lo, (lo >> shift) | (hi << ((64 - shift) & 63)))",
            "whole = lo_in & (hi_in | (shift == 0))",
            f"tl.store({dst}.to(tl.pointer_type(tl.uint64)) + r * {words} + j, word, "
            f"mask=store_mask & whole)  # yield %{self.kernel.yields[0]}",
            "if pid == 0:  # the source's last bytes, element by element",
            f"    f = {rows * n - tail} + tl.arange(0, {next_pow2(tail)})",
            f"    last = tl.load({src} + f, mask=f < {rows * n})",
            f"    tl.store({dst} + f // {n} * {pitch} + f % {n}, last, mask=f < {rows * n})",
        ]
        self.tiling = [f"a copy in 8-byte words, {tm} rows x {tw} words per program: rows "
                       f"written {pitch} elements apart (row_pitch), so each row starts on a "
                       f"16-byte boundary; each source word read aligned and shifted",
                       *self._order_line()]
        return self._single_launch(fn, (n_r * n_w, 1, 1), 4)
