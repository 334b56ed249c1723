"""The ``gemm`` kernel kind: a region holding one ``matmul`` -> a tiled Triton GEMM.

A program owns one ``block_m x block_n`` tile of the product ``C = A @ B``
(``[..., M, N]``; batch dimensions are flattened into the program id, tiles are
ordered in groups of ``group_m`` tile rows so that programs running together
share tiles in L2). It walks K in steps of ``block_k``: each step evaluates the
operands at their tile coordinates (``A`` at ``(rows_m, k_a)``, ``B`` at ``(k_b,
cols_n)``) through the shared value machinery (``values._Fn``), so views
of an operand (transposes, slices, broadcast batch dimensions) are index math in
the load and its pointwise producers (the *prologue*: casts, scales) are
computed on the tile as it loads; then ``tl.dot`` adds the step's product into
an accumulator (float32 for float16 and float32, float64 for float64, int32 for
int8; other integers multiply and sum in registers, without tensor cores, and
wrap as NumPy's products do).

After the loop the accumulator is rounded once to the product's dtype (NumPy's
float16 ``matmul`` also adds in float32 and rounds once) and the *epilogue* is
evaluated on the tile, as in a persistent reduction whose rows are the tile's
rows and whose columns are its columns: pointwise consumers of the product
(bias, activation, residual, cast) and row reductions (the fuser lets them in
only when ``block_n`` spans N). Every output is stored once.

With the optional attribute ``tma=1``, operand tiles that are plain 2-D buffers (or
transposes of them: any view whose tile is a box of the buffer with a contiguous inner
axis, rows 16-byte aligned) load through Hopper's tensor memory accelerator
(``tl.make_tensor_descriptor``; the box past the edges reads zeros, so no masks), and the
buffer must start on a 16-byte boundary (the ``cuda`` backend checks). Other operands keep
pointer loads.

With ``programs=P`` the kernel is persistent: P programs, program p computing tiles p,
p + P, ... in one ``tl.range(..., flatten=True)`` loop that Triton pipelines together with
the K loop (the next tile's loads overlap this tile's epilogue). By default on ``cuda`` a
float16 GEMM of more than one wave of tiles is persistent with TMA loads, one program per SM,
when every load of its K loop is a TMA box (``_default_programs``; measured 3-5% faster, 13%
with GELU, 9-17% between one and two waves); from half a wave to one it loads through TMA
with one program per tile (``_default_tma``: 5-23% faster on seven of eight shapes); so is a
TF32 product of a wave of tiles or more whose operands both load K-major persistent (328
TFLOP/s at 4096^3 against 275-297 with pointer loads: the fuser writes a row-major B K-major
for a large product, ``fuse/rules.py``, ``rule_tf32_k_major_b``); otherwise it is emitted
again with one program per tile and pointer loads, since a persistent loop of pointer loads
ran at half speed.

With ``stream_k=1`` (and ``programs=P``) the tiles' K steps are split evenly between the P
programs, a tile cut between programs finished by the last of them (``_stream_k_loop``; off
by default: measured slower on the H200). Operands with batch axes load as TMA boxes of their
whole rank; a B shared by the batch folds the batch into M (``_fold_batch``).

With ``split_k > 1`` the region is two functions: ``<name>_partials`` computes
the product over one chunk of K per program into a float32 (accumulator-typed)
scratch buffer, and ``<name>_combine`` adds the chunks (so the result is deterministic; no
atomics) and runs the epilogue, on tiles smaller than the GEMM's that each load a block of
chunks a step and sum it in a fixed tree (``heuristics.gemm_combine_tiles``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Generator
from typing import Any

import numpy as np

from ..ir.domain import operand_itemsizes
from ..ir.program import Kernel
from . import heuristics
from .heuristics import GEMM_ATTRS, GemmConfig, gemm_candidates, gemm_uses_dot
from .lowering import PTR, SLOW_MATH, TL
from .triton_emitter import INT32_MAX, Launch, _Emitter
from .values import Coords, _Fn, _instr_text, joint_mask

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a product of ``dtype`` accumulates in.

    float16 and float32 add in float32, float64 in float64; int8 in int32 (``tl.dot``);
    other integers in a 32- or 64-bit integer of their signedness, whose wrap-around
    gives NumPy's wrapped product once cast back.
    """
    if dtype.kind == "f":
        return F64 if dtype == F64 else F32
    if dtype == np.dtype(np.int8):
        return np.dtype(np.int32)
    bits = 64 if dtype.itemsize == 8 else 32
    return np.dtype(f"{'u' if dtype.kind == 'u' else ''}int{bits}")


#: ops lowered to the multi-function unit (or a libdevice call of it): in a GEMM's epilogue they
#: make the product go through an output first (``_relay_output``)
SPECIAL_FUNCTIONS = SLOW_MATH | {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "reciprocal",
                                 "div", "sigmoid", "erf", "cbrt", "sumexp"}


#: Whether the K loop's pointer loads of an edge tile read A's rows past M as row M - 1 (and
#: B's columns past N as column N - 1) instead of masking them: the loads then need only K's
#: mask, as in a tile inside the product; what those rows and columns compute is never stored
#: (the store and the partials keep the tile's mask). See ``GemmEmitter._edge_indices``. Off
#: unless ``FUSEJIT_GEMM_CLAMP_EDGES=1`` (read on import): not yet timed on a GPU (the
#: twenty-eighth session's timing, level, ran the default's cached kernels; taken out on it,
#: back in the thirtieth: Nsight Compute has these kernels issue-bound). Why it may
#: pay: full-precision 2047x513x8191 read through 16-byte rows ran as slowly as through 4-byte
#: ones (602 against 600 us on an H100), where 2048x576x8191, whose M and N fill whole tiles,
#: ran 475 (bench/results/h100-s27/call1/exp_s26_fma.txt, ``pad AB``).
CLAMP_EDGE_LOADS = os.environ.get("FUSEJIT_GEMM_CLAMP_EDGES", "0") == "1"

#: Whether a split-K program's K loop runs its whole steps unmasked and its partial step
#: apart (``GemmEmitter._split_k_peeled``), as a kernel of one program per tile does, instead
#: of masking every step along K. Off unless ``FUSEJIT_GEMM_PEEL_SPLIT=1`` (read on import):
#: not yet timed on a GPU (as ``CLAMP_EDGE_LOADS``). Why it may pay: the mask along K of
#: 2048x576 with K = 8191 hides the alignment of A's rows from Triton, rows padded to 16
#: bytes (the alignment copies) included, so A's tiles load 4 bytes at a time (sm_90 PTX: 48
#: of A's 60 ``cp.async``), and the pad above gained nothing. Against it: under Triton 3.6 (the
#: GPU image's) the 2-warp kernel of 2047x513x8191 with B K-major spills 148 bytes a thread
#: with the peel (136 with the clamps too) where it spills 4 without (B row-major, 4 warps: 0
#: either way; Triton 3.9's ptxas spills none of them), thirty-first session.
PEEL_SPLIT_K = os.environ.get("FUSEJIT_GEMM_PEEL_SPLIT", "0") == "1"


class _GemmFn(_Fn):
    """A function of a GEMM kernel: the product is its accumulator tile; loads are recorded."""

    def __init__(self, em: GemmEmitter) -> None:
        super().__init__(em)
        self.gemm = em
        #: the variable holding the product tile (set when the epilogue opens)
        self.product: str | None = None
        #: indices of the parameters this function loads
        self.loaded: set[int] = set()

    def _value(self, name: str, coords: Coords) -> Generator[Any, str, str]:
        # the product is the accumulator tile, wherever an epilogue value reaches it (the
        # iterative evaluation goes through ``_value``, so the hook is here, not in ``value``)
        if name == self.gemm.mm.name:
            if self.product is None:
                raise AssertionError(f"the product %{name} is used before the K loop ends")
            self.gemm.check_tile_coords(coords)
            return self.product
        return (yield from super()._value(name, coords))

    def load(self, name: str, coords: Coords) -> str:
        self.loaded.add(self.em.param_index[name])
        if self.gemm.tma and self.body is not None:
            found = self.gemm.tma_load(self, name, coords)
            if found is not None:
                return found
        if self.body is not None:
            self.gemm.k_pointer_loads += 1
        return super().load(name, coords)


class GemmEmitter(_Emitter):
    """Emits the source of one gemm region (see the module docstring)."""

    def __init__(self, kernel: Kernel, strides: list[tuple[int, ...]], target: str,
                 tiles: Any = None, origin: str | None = None) -> None:
        super().__init__(kernel, strides, target, tiles, origin)
        if tiles is not None:  # a GemmConfig arrives as the kernel's attributes (emit_kernel)
            raise ValueError(f"gemm kernel {kernel.name} takes GemmConfig tiles, not {tiles!r}")
        d = self.domain
        self.mm = self.defs[d.matmul]
        self.a_name, self.b_name = self.mm.args
        self.a_shape = self.types[self.a_name].shape
        self.b_shape = self.types[self.b_name].shape
        shape = d.shape
        self.m, self.n, self.k = shape[-2], shape[-1], self.a_shape[-1]
        self.batch_shape = shape[:-2]
        self.batch = math.prod(self.batch_shape)
        self.dtype = self.mm.dtype
        self.acc_dtype = accumulator_dtype(self.dtype)
        self.precision = str(self.mm.attrs.get("precision", "ieee"))
        self.cfg = self._config()
        self.aligned: set[int] = set()
        #: values a persistent kernel makes once, before its tile loop (TMA descriptors)
        self.hoisted: set[str] = set()
        #: the tile variables of the operand being loaded: (row variable, column variable)
        self._context: tuple[str, str] = ("", "")
        self.edge_dims: tuple[str, str] = ("rows_m", "cols_n")  # (set by _edge_indices)
        #: the batch's products computed as one of batch x M rows (``_fold_batch``)
        self.fold = self._fold_batch()
        self._count_tiles(self.cfg)
        fma_warps = self._fma_layout_tiles()  # (keeps the block sizes, so the counts above)
        #: programs of a launch made persistent with TMA loads by the heuristic's choice, not
        #: the kernel's attributes (0: not so), and of its emission without TMA
        heuristic_loads = self._heuristic_loads()
        self.auto_programs = self._default_programs() if heuristic_loads else 0
        self.auto_persistent = self.auto_programs > 0
        self.programs_without_tma = self.auto_programs \
            if heuristics.gemm_persistent_mode() == "always" else 0  # (a test mode's loop)
        #: TMA loads by the heuristic's choice: persistent, or one program per tile
        self.auto_tma = self.auto_persistent or (heuristic_loads and self._default_tma())
        self.tma = bool(self.kernel.attrs.get("tma", 0)) or self.auto_tma
        #: loads in the K loop that are not TMA boxes (``auto_tma`` needs none)
        self.k_pointer_loads = 0
        self.idx64 = self.idx64 or self._scratch_reach() > INT32_MAX
        c = self.cfg
        split = f", K in {c.split_k} chunks (partials + combine)" if c.split_k > 1 else ""
        split += ", TMA loads" if self.tma else ""
        self.summary = (
            f"gemm: C{list(shape)} = A{list(self.a_shape)} @ B{list(self.b_shape)} in "
            f"{c.block_m} x {c.block_n} tiles, K by {c.block_k}{split}",
            f"      {c.num_warps} warps, {c.num_stages} stages, tiles grouped by {c.group_m} "
            f"along M; {self._how()}")
        if fma_warps:
            self.summary = (*self.summary, fma_warps)
        if self.heuristic_why:
            self.summary = (*self.summary, f"      {self.heuristic_why}")
        if self.fold:
            self.summary = (*self.summary, f"      the batch's {self.batch} products as one of "
                            f"{self.batch * self.m} rows: B is the same for every batch index, "
                            f"so tiles run across the matrices of A (no ragged tile row per "
                            f"matrix)")
        if self.auto_tma and not self.auto_persistent:
            self.summary = (*self.summary, "      TMA loads, one program per tile "
                            "(GEMM_TMA_MIN_WAVES: float16, half a wave of tiles to one, every "
                            "operand tile a TMA box)")

    # -- choices ------------------------------------------------------------------------
    def _config(self) -> GemmConfig:
        """The kernel's tile attributes (the fuser writes the heuristic's), missing ones from
        the heuristic. Only the heuristic's own tiles have candidates to tune: a kernel whose
        attributes were edited keeps them."""
        attrs = self.kernel.attrs
        candidates = gemm_candidates(self.m, self.n, self.k, self.batch, self.dtype.name,
                                     self.precision, bool(self.domain.reduced),
                                     operand_itemsizes(self.kernel, self.mm.name))
        default = candidates[0]
        cfg = GemmConfig(**{name: int(attrs.get(name, getattr(default, name)))
                            for name in GEMM_ATTRS})
        if cfg != default:
            candidates = [cfg]
            self.origin = self.origin or "from the kernel's tile attributes (edited: not tuned)"
        self.candidates = tuple(candidates)
        #: the tiles are the heuristic's, from the shapes alone (``_fma_layout_tiles`` may
        #: adjust them to the operands' layout)
        self.heuristic_tiles = cfg == default
        #: why the heuristic chose them, where it says more than "heuristic" and they are
        #: the kernel's (``_fma_layout_tiles`` clears it where it changes the split)
        self.heuristic_why = default.why.removeprefix("heuristic: ") \
            if self.heuristic_tiles and default.why.startswith("heuristic: ") else ""
        return cfg

    def _fma_layout_tiles(self) -> str:
        """The heuristic's tiles of a full-precision float32 product adjusted to how B loads
        (the fuser chose them from the shapes; the strides are known here). 64x64 tiles on 4
        warps whose B loads K-major (a ``[K, N]`` view of a row-major ``[N, K]`` array: ``x @
        w.T`` where the fuser does not write ``w`` row-major first, rule ``fma_n_major_b``, or
        an input that arrives so) run on 2 warps; a single tile that the shapes split into
        four 2-warp programs an SM keeps one 4-warp program an SM where B loads row-major
        (``heuristics.fma_single_tile_row_major``). Returns the header's sentence, or "".

        ``tl.dot`` on the FMA units has each thread read B's tile along N from shared memory;
        a K-major B is stored along K, and on 2 warps a thread holds 64 accumulators to the 32
        of 4, twice the products per load. H100, us at 4 / 2 warps (cuBLAS), B K-major, the
        GEMM's launches alone (bench/exp_s25_check.py --large, bench/results/h100-s25/call4):
        4096^3 9786 / 6259 (2732), 6400x1552x3336 4837 / 3123 (1479), 512x4096x4096 1244 / 790
        (351), 2048x512x8192 1261 / 781 (356), 1000x3000x700 329 / 272 (114), 2047x513x8191
        2649 / 1600 (466). With B row-major 2 warps lost (1000x3000x700 116 / 153,
        6400x1552x3336 1505 / 1608) or tied, so the shapes' default stays 4."""
        c = self.cfg
        if not (self.heuristic_tiles and self.dtype == F32 and self.precision == "ieee"):
            return ""
        k_major = self._k_contiguous(1)
        if (c.block_m, c.block_n, c.num_warps) == (64, 64, 4) and k_major:
            self.cfg = dataclasses.replace(c, num_warps=2)
            why = ("      2 warps, not the shapes' 4: B loads K-major, and the FMA tiles read it "
                   "along N (twice the accumulators a thread per load of B)")
        elif c.split_k > 1 and c.num_warps == 2 and self.grid_tiles == 1 and not k_major:
            split, warps = heuristics.fma_single_tile_row_major(self.k, c.block_k)
            self.cfg = dataclasses.replace(c, split_k=split, num_warps=warps)
            self.heuristic_why = ""
            why = (f"      {warps} warps in {split} chunks, not the shapes' {c.num_warps} in "
                   f"{c.split_k}: one tile whose B loads row-major "
                   f"(heuristics.fma_single_tile_row_major)")
        else:
            return ""
        self.candidates = (self.cfg, *self.candidates[1:])
        return why

    def _fold_batch(self) -> bool:
        """Whether the batch's products are computed as one product of ``batch x M`` rows: B
        (with its prologue) is the same for every batch index (a weight broadcast over a
        batch, as in ``x @ w`` for activations ``x`` of ``[batch, tokens, features]``), every
        load of A steps over the batch as it steps over M (A's batch and M axes merge into
        one axis of rows: a contiguous ``[..., M, K]`` buffer or a view of one that keeps
        them so), and K is not split. Tiles then run across the matrices of A: 32 matrices
        of 257 rows fill 65 tile rows of 128 where they took 96 (a ragged last one each), and
        A's tiles load as boxes of one 2-D TMA descriptor. The rows' batch indices are per
        row (``b = rows_bm // M``), so the epilogue's index math holds as it is."""
        if self.batch <= 1 or self.cfg.split_k > 1:
            return False
        nb = len(self.batch_shape)
        axes = [ax for ax in range(nb) if self.batch_shape[ax] > 1]

        def step(nd: int, ax: int) -> tuple[int, ...]:
            return tuple(1 if i == ax else 0 for i in range(nd))
        b_nd = len(self.b_shape)
        b_sites = self._load_sites(((0,) * b_nd, *(step(b_nd, ax) for ax in axes)),
                                   roots=(self.b_name,))
        if any(len(set(offsets)) > 1 for _, offsets in b_sites):
            return False  # B varies along the batch
        a_nd = len(self.a_shape)
        # a step of each batch axis moves A's loads as that many rows of M would
        rows_per = [math.prod(self.batch_shape[ax + 1:]) * self.m for ax in axes]
        a_sites = self._load_sites(((0,) * a_nd, step(a_nd, a_nd - 2),
                                    *(step(a_nd, ax) for ax in axes)), roots=(self.a_name,))
        return bool(a_sites) and all(
            offsets[2 + j] - offsets[0] == rows * (offsets[1] - offsets[0])
            for _, offsets in a_sites for j, rows in enumerate(rows_per))

    def _default_programs(self) -> int:
        """The programs of a launch this emission makes persistent with TMA loads by itself,
        or 0, where the heuristic chooses the loads (``_heuristic_loads``):
        ``heuristics.gemm_default_programs`` (see
        ``GEMM_PERSISTENT``; a TF32 product: when both operands load K-major,
        ``GEMM_TF32_TMA_MIN_TILES``). If an operand tile then cannot load as a TMA box,
        ``emit_kernel`` emits the kernel again with ``tma=0 programs=0``; the ``cuda`` backend
        does too for a buffer that does not start on a 16-byte boundary."""
        tf32_k_major = self.dtype == F32 and self.precision == "tf32" and all(
            self._k_contiguous(i) for i in (0, 1))
        return heuristics.gemm_default_programs(self.grid_tiles, self.cfg.split_k,
                                                self.dtype.name, tf32_k_major)

    def _heuristic_loads(self) -> bool:
        """Whether the heuristic chooses this kernel's loads (TMA, persistence): its attributes
        say neither ``tma`` nor ``programs``, and on ``cuda`` neither operand is computed (a
        prologue: the measured kernels had none; any target in mode "always")."""
        attrs = self.kernel.attrs
        if "tma" in attrs or "programs" in attrs:
            return False
        return heuristics.gemm_persistent_mode() == "always" or (
            self.target == "cuda" and not any(self._has_prologue(n) for n in self.mm.args))

    def _default_tma(self) -> bool:
        """Whether a GEMM that is not persistent loads through TMA with one program per tile,
        where the heuristic chooses the loads (``heuristics.gemm_default_tma``: float16, from
        half a wave of tiles to one). As for a persistent one, ``emit_kernel`` and the
        ``cuda`` backend emit it again with pointer loads where TMA cannot read an operand."""
        return heuristics.gemm_default_tma(self.grid_tiles, self.cfg.split_k,
                                           self.dtype.name)

    def _k_contiguous(self, index: int) -> bool:
        """Whether every load of operand ``index`` (0: A, 1: B) is contiguous along K (a
        TF32 operand that Hopper's wgmma can read from shared memory as TMA writes it)."""
        name = self.mm.args[index]
        shape = self.types[name].shape
        nd = len(shape)
        if nd < 2:
            return False
        axis = nd - 1 if index == 0 else nd - 2
        origin = (0,) * nd
        along_k = tuple(1 if i == axis else 0 for i in range(nd))
        sites = self._load_sites((origin, along_k), roots=(name,))
        return bool(sites) and all(o[1] - o[0] == 1 for _, o in sites)

    def _how(self) -> str:
        acc = TL[self.acc_dtype]
        if not gemm_uses_dot(self.dtype.name):
            return f"{self.dtype.name} products multiplied and summed in {acc} (no tensor cores)"
        if self.dtype == F32:
            return f"tl.dot with input_precision={self.precision}, {acc} accumulator"
        return f"tl.dot, {acc} accumulator"

    def _scratch_reach(self) -> int:
        return self.cfg.split_k * self.batch * self.m * self.n + (1 << 16)

    def check_tile_coords(self, coords: Coords) -> None:
        """The product exists only at its tile's coordinates (size-1 dims may read 0)."""
        want = self._tile_dims
        dims = coords.dims if coords.dims is not None else ()
        ok = coords.shape == self.domain.shape and len(dims) == len(want) and all(
            d == w or (d == "0" and n == 1) for d, w, n in zip(dims, want, coords.shape))
        if not ok:
            raise AssertionError(f"product %{self.mm.name} evaluated off its tile: {coords}")

    # -- functions ----------------------------------------------------------------------
    def functions(self) -> tuple[list[_Fn], list[Launch]]:
        """One GEMM function, or the partials and combine functions of a split-K GEMM."""
        self.scratch = []
        self._bm, self._bn = self.cfg.block_m, self.cfg.block_n
        if self.cfg.split_k > 1:
            return self._split_k()
        fn = _GemmFn(self)
        self._open_program(fn, grouped=True)
        self._k_loop(fn, None)
        epilogue_at = len(fn.out)
        self._epilogue(fn, "acc")
        tiles = self.grid_tiles
        programs = self._programs(tiles)
        scratch: list[int] = []
        if programs and self._stream_k(tiles, programs):
            self._stream_k_loop(fn, tiles, programs, epilogue_at)
            scratch = [0]
        elif programs:
            self._loop_over_tiles(fn, tiles, programs)
        params = list(range(len(self.ptr_name)))
        launch = self._launch(fn, self.name, params, scratch, (programs or tiles, 1, 1),
                              self.cfg.num_warps, self.cfg.num_stages,
                              counters=bool(scratch))
        return [fn], [launch]

    def _programs(self, tiles: int) -> int:
        """How many programs a persistent launch has (0: one program per tile): the kernel's
        ``programs`` attribute, else ``heuristics.gemm_default_programs``; never ``tiles`` or
        more (a program per tile needs no loop)."""
        given = self.kernel.attrs.get("programs")
        programs = int(given) if given is not None else self.auto_programs
        return programs if 0 < programs < tiles else 0

    def _tile_lines(self, fn: _GemmFn, end: int) -> tuple[list[str], list[str], list[str], str]:
        """``fn``'s lines split for a loop over tiles: those before the program id, the TMA
        descriptors (made once, before the loop), the tile's lines up to ``end`` (the rest
        in order), and the program id's expression."""
        at = next(i for i, line in enumerate(fn.out) if line.startswith("pid = "))
        hoisted: list[str] = []
        looped: list[str] = []
        for line in fn.out[at + 1:end]:
            (hoisted if line.split(" = ", 1)[0] in self.hoisted else looped).append(line)
        return fn.out[:at], hoisted, looped, fn.out[at][len("pid = "):]

    def _loop_over_tiles(self, fn: _GemmFn, tiles: int, programs: int) -> None:
        """Make ``fn`` persistent: program ``p`` computes tiles ``p``, ``p + programs``, ...
        (the tile order is unchanged, so grouped tiles still run together). Triton flattens
        the tile loop and the K loop into one pipeline (``flatten=True``): the next tile's
        first loads are in flight while this tile's epilogue runs. TMA descriptors do not
        depend on the tile and are made once, before the loop. (The interpreter's loop has
        constant bounds: see below.)"""
        before, hoisted, looped, start = self._tile_lines(fn, len(fn.out))
        if self.target == "interpret":
            # Triton 3.6's interpreter cannot take a program id in range(): constant bounds,
            # and a program past the last tile computes the last one again (the same values)
            header = [f"for step in range(0, {-(-tiles // programs)}):  # this program's tiles: "
                      f"one in every {programs} of {tiles} (programs={programs})",
                      f"    pid = tl.minimum({start} + step * {programs}, {tiles - 1})"]
        else:
            header = [f"for pid in tl.range({start}, {tiles}, {programs}, flatten=True):  # this "
                      f"program's tiles: one in every {programs} of {tiles} (programs={programs})"]
        fn.out = before + hoisted + header + ["    " + line for line in looped]
        why = "programs=" + str(programs)
        if self.auto_persistent:
            why = ("GEMM_PERSISTENT=always" if heuristics.gemm_persistent_mode() == "always" else
                   "GEMM_PERSISTENT: float16, more than one wave of tiles, every operand tile "
                   "a TMA box" if self.dtype == F16 else
                   "GEMM_TF32_TMA_MIN_TILES: TF32, both operands K-major, a wave of tiles or "
                   "more, every operand tile a TMA box")
        self.summary = (*self.summary, f"      persistent: {programs} programs, each computing "
                        f"one in every {programs} of the {tiles} tiles ({why})")

    def _stream_k(self, tiles: int, programs: int) -> bool:
        """Whether a persistent launch of ``programs`` programs over ``tiles`` tiles splits the
        tiles' K steps evenly between its programs (stream-K, ``_stream_k_loop``): the kernel's
        ``stream_k`` attribute, else ``heuristics.gemm_default_stream_k`` for a launch the
        heuristic made persistent (off by default: measured slower, see ``GEMM_STREAM_K``).
        Never where a program's stretch of K steps times the programs overflows 32 bits (the
        kernel's index math)."""
        steps = -(-self.k // self.cfg.block_k)
        if steps < 1 or (tiles * steps + 1) * programs >= 2 ** 31:
            return False
        given = self.kernel.attrs.get("stream_k")
        if given is not None:
            return bool(given)
        return self.auto_persistent and heuristics.gemm_default_stream_k(tiles, programs, steps)

    def _stream_k_loop(self, fn: _GemmFn, tiles: int, programs: int, epilogue_at: int) -> None:
        """Make ``fn`` a stream-K GEMM: the ``tiles x steps`` K steps of the product (tile-major,
        in the grouped tile order) are cut into ``programs`` equal stretches, program ``p``
        taking steps ``[p * total // programs, (p + 1) * total // programs)``. A tile whose
        steps all fall in one program's stretch is computed and stored as in a persistent
        GEMM; a tile cut between programs gets from each of them a partial product (its
        stretch of K) stored to scratch (two tile-sized slots per program: its first tile and
        its last), and the program that counts itself last on the tile's counter (an
        ``acq_rel`` atomic, as in a split reduction) adds the partials in program order (the
        same bits whichever program is last), runs the epilogue, stores the outputs and zeroes
        the counter. No program waits for another. Against a persistent loop over whole tiles,
        every program does the same work, so a partial last wave of tiles (1.6 waves: the
        second round 60% busy) leaves no SM idle, for a partial tile's store and load per
        program; but the programs walk different tiles' K steps at different times, so tiles
        that share operand tiles no longer load them together from L2: on the H200 it ran
        20-30% slower than the persistent loop, hence off by default (``GEMM_STREAM_K``).
        (The interpreter's loops have constant bounds: Triton 3.6's cannot take a
        program id in ``range()``; its steps outside the program's stretch are skipped by an
        ``if``.)"""
        c = self.cfg
        bm, bn, bk = c.block_m, c.block_n, c.block_k
        steps = -(-self.k // bk)
        total = tiles * steps
        per = total // programs  # (the stretches hold per or per + 1 steps)
        interpret = self.target == "interpret"
        self.scratch = [(self.acc_dtype, 2 * programs * bm * bn)]
        self.counters = tiles
        fn.used.update({"sk_prog", "sk_first", "sk_end", "k_lo", "k_hi", "seg", "done", "finish",
                        "first_q", "last_q", "q", "tile_at", "counters", "part0"})
        before, hoisted, tile_lines, start = self._tile_lines(fn, epilogue_at)
        epilogue = fn.out[epilogue_at:]
        k_at = next(i for i, line in enumerate(tile_lines) if line.startswith("for k in range("))
        k_end = k_at + 1
        while k_end < len(tile_lines) and tile_lines[k_end].startswith("    "):
            k_end += 1
        pre_k, k_body, post_k = tile_lines[:k_at], tile_lines[k_at + 1:k_end], tile_lines[k_end:]

        def slot(q: str) -> str:  # a program's slot for this tile: 0 its first tile, 1 its last
            return (f"(2 * {q} + (pid != ({q} * {total} // {programs}) // {steps})) "
                    f"* {bm * bn} + tile_at")

        out = [*before, *hoisted,
               f"sk_prog = {start}",
               f"sk_first = sk_prog * {total} // {programs}  # this program's stretch of the "
               f"{tiles} tiles x {steps} K steps (stream-K, of {programs} programs)",
               f"sk_end = (sk_prog + 1) * {total} // {programs}",
               f"tile_at = tl.arange(0, {bm})[:, None] * {bn} + tl.arange(0, {bn})[None, :]"
               f"  # a partial product's place in its slot"]
        body: list[str] = []
        if interpret:
            most = -(-(per + 1) // steps) + 1  # tiles one stretch can touch
            out.append(f"for seg in range(0, {most}):  # the tiles of this program's stretch")
            out.append(f"    pid = sk_first // {steps} + seg")
            out.append(f"    if pid * {steps} < sk_end:")
            indent = "        "
        else:
            out.append(f"for pid in range(sk_first // {steps}, (sk_end + {steps - 1}) // {steps}):"
                       f"  # the tiles of this program's stretch")
            indent = "    "
        body.append(f"k_lo = tl.maximum(sk_first - pid * {steps}, 0) * {bk}  # this program's "
                    f"part of the tile's K")
        body.append(f"k_hi = tl.minimum(sk_end - pid * {steps}, {steps}) * {bk}")
        body.extend(pre_k)
        if interpret:
            body.append(f"for k in range(0, {steps * bk}, {bk}):")
            body.append("    if (k >= k_lo) & (k < k_hi):")
            body.extend("    " + line for line in k_body)
        else:
            body.append(f"for k in range(k_lo, k_hi, {bk}):  # this program's steps of the tile")
            body.extend(k_body)
        body.extend(post_k)
        body.append(f"finish = (k_lo == 0) & (k_hi == {steps * bk})  # the whole tile's K here")
        body.append(f"if (k_lo > 0) | (k_hi < {steps * bk}):  # the tile is cut between programs")
        body.append(f"    tl.store(part0 + {slot('sk_prog')}, acc)  # this program's partial "
                    f"product")
        body.append("    tl.debug_barrier()  # every thread's part is stored before the count")
        body.append('    done = tl.atomic_add(counters + pid, 1, sem="acq_rel")  # programs of '
                    'this tile done before this one')
        body.append(f"    first_q = ((pid * {steps} + 1) * {programs} - 1) // {total}  # the "
                    f"programs whose stretches cut the tile")
        body.append(f"    last_q = ((pid * {steps} + {steps}) * {programs} - 1) // {total}")
        body.append("    finish = done == last_q - first_q  # the last of them: every partial "
                    "is stored")
        body.append("    if finish:")
        body.append(f'        acc = tl.load(part0 + {slot("first_q")}, cache_modifier=".cg")'
                    f"  # partials added in program order")
        most_q = -(-steps // max(per, 1)) + 1  # programs one tile's steps can span
        if interpret:
            body.append(f"        for q in range(1, {most_q}):")
            body.append("            if first_q + q <= last_q:")
            body.append(f'                acc += tl.load(part0 + {slot("(first_q + q)")}, '
                        f'cache_modifier=".cg")')
        else:
            body.append("        for q in range(first_q + 1, last_q + 1):")
            body.append(f'            acc += tl.load(part0 + {slot("q")}, cache_modifier=".cg")')
        body.append("        tl.store(counters + pid, 0)  # zero again for the next launch")
        body.append("if finish:  # the tile's whole product: epilogue and outputs")
        body.extend("    " + line for line in epilogue)
        fn.out = out + [indent + line for line in body]
        why = "stream_k=1" if self.kernel.attrs.get("stream_k") else \
            f"GEMM_STREAM_K: {tiles} tiles are {tiles / programs:.2f} waves of {programs}"
        self.summary = (*self.summary, f"      stream-K: {programs} programs, each computing "
                        f"{per}-{per + 1} of the {total} K steps ({tiles} tiles x {steps}); a "
                        f"tile cut between programs is finished by the last of them from their "
                        f"partial products ({why})")

    def _reads(self, fn: _GemmFn) -> list[int]:
        """The params a function reads: the buffers it loads and the scalars it takes."""
        return sorted(fn.loaded | {self.param_index[n] for n in fn.scalar_vars})

    def _launch(self, fn: _GemmFn, fn_name: str, params: list[int], scratch: list[int],
                grid: tuple[int, int, int], num_warps: int, num_stages: int,
                outputs: bool = True, counters: bool = False) -> Launch:
        """Close ``fn`` as ``fn_name(params..., scratch..., [counters,] outputs...)`` and its
        launch."""
        names = [self.ptr_name[i] for i in params] + [f"part{j}" for j in scratch]
        names += ["counters"] if counters else []
        outs = self.out_name if outputs else []
        fn.source = self._header(fn_name, names + outs) + ["    " + line for line in fn.out]
        sig = {self.ptr_name[i]: self.arg_type(i) for i in params}
        sig.update({f"part{j}": PTR[self.scratch[j][0]] for j in scratch})
        if counters:
            sig["counters"] = PTR[np.dtype(np.int32)]
        if outputs:
            sig.update({o: PTR[t.dtype] for o, t in zip(self.out_name, self.kernel.result_types)})
        args = ([("in", i) for i in params] + [("scratch", j) for j in scratch]
                + ([("counters", 0)] if counters else [])
                + ([("out", j) for j in range(len(self.out_name))] if outputs else []))
        return Launch(fn_name, grid, num_warps, tuple(args), sig, num_stages)

    def _split_k(self) -> tuple[list[_Fn], list[Launch]]:
        """``<name>_partials`` (one chunk of K per program) and ``<name>_combine``."""
        c = self.cfg
        size = self.batch * self.m * self.n
        self.scratch = [(self.acc_dtype, c.split_k * size)]
        fn = _GemmFn(self)
        fn.out.append(f"split = {self._pid(1)}  # the chunk of K, of {c.split_k}")
        fn.level["split"] = 0
        fn.used.add("split")
        self._open_program(fn, grouped=True)
        self._k_loop(fn, "split")
        coords = self._open_epilogue(fn)
        flat = self._tile_flat(fn, coords)
        mask = f", mask={fn.masks[2]}" if fn.masks[2] else ""
        fn.out.append(f"tl.store(part0 + split * {size} + {flat}, acc{mask})  "
                      f"# this chunk's partial product")
        partials = self._launch(fn, f"{self.name}_partials", self._reads(fn), [0],
                                (self.grid_tiles, c.split_k, 1), c.num_warps,
                                c.num_stages, outputs=False)
        rows, cols, chunks = heuristics.gemm_combine_tiles(
            c.block_m, c.block_n, c.split_k, bool(self.domain.reduced))
        with self._tiles_of(dataclasses.replace(c, block_m=rows, block_n=cols)):
            g = _GemmFn(self)
            self._open_program(g, grouped=False)
            g.body = None
            coords = self._open_epilogue(g)
            flat = self._tile_flat(g, coords)
            grid = self.grid_tiles
            g.out.append(f"acc = tl.full([{rows}, {cols}], 0, {TL[self.acc_dtype]})")
            g.out.append(f"for first in range(0, {c.split_k}, {chunks}):  # {chunks} chunks a "
                         f"step, summed in a fixed tree")
            g.out.append(f"    split = first + tl.arange(0, {chunks})[:, None, None]")
            masks = [f"(split < {c.split_k})"] if c.split_k % chunks else []
            if g.masks[2]:
                masks.append(f"{g.masks[2]}[None, :, :]")
            mask = f", mask={' & '.join(masks)}, other=0" if masks else ""
            g.out.append(f"    partials = tl.load(part0 + split * {size} + {flat}[None, :, :]"
                         f"{mask})")
            g.out.append("    acc += tl.reduce(partials, 0, tl.standard._sum_combine)")
            self._epilogue(g, "acc", coords)
        combine = self._launch(g, f"{self.name}_combine", self._reads(g), [0],
                               (grid, 1, 1), 4, 0)
        return [fn, g], [partials, combine]

    def _count_tiles(self, cfg: GemmConfig) -> None:
        """The tile counts of ``cfg``'s block sizes: ``tiles_m`` and ``tiles_n`` along M
        (the batch's rows, folded) and N, ``tiles`` of one matrix of the batch (of all of
        them, folded) and ``grid_tiles`` of the whole launch."""
        self.tiles_m = -(-(self.batch * self.m if self.fold else self.m) // cfg.block_m)
        self.tiles_n = -(-self.n // cfg.block_n)
        self.tiles = self.tiles_m * self.tiles_n
        self.grid_tiles = self.tiles if self.fold else self.batch * self.tiles

    @contextlib.contextmanager
    def _tiles_of(self, cfg: GemmConfig) -> Generator[None, None, None]:
        """Emit with ``cfg``'s tiles (a combine's, smaller than the GEMM's), then restore."""
        kept = self.cfg
        self.cfg = cfg
        self._count_tiles(cfg)
        try:
            yield
        finally:
            self.cfg = kept
            self._count_tiles(kept)

    # -- the program's tile ---------------------------------------------------------------
    def _open_program(self, fn: _GemmFn, grouped: bool) -> None:
        """Program id -> batch index, tile row and column; the tile's row/column indices."""
        c, out = self.cfg, fn.out
        bm, bn, tm, tn = c.block_m, c.block_n, self.tiles_m, self.tiles_n
        fn.used.update({"pid", "b", "tile", "group", "first_m", "group_rows", "pid_m", "pid_n",
                        "rows_m", "cols_n", "mask_m", "mask_n", "cols", "rows", "mask", "acc",
                        "k", "k_first", "k_step", "k_a", "k_b", "mask_ka", "mask_kb", "mask_a",
                        "mask_b", "part0"})
        out.append(f"pid = {self._pid()}")
        tile = "pid"
        bdims: tuple[str, ...] = ()
        if self.batch_shape and not self.fold:  # (a folded batch's indices are per row: below)
            nb = len(self.batch_shape)
            if self.batch > 1:
                out.append(f"b = pid // {self.tiles}  # batch index (axes 0..{nb - 1} flattened)")
                out.append(f"tile = pid % {self.tiles}")
                fn.level.update({"b": 0, "tile": 0})
                tile = "tile"
                bdims = fn.unravel("b", self.batch_shape)
            else:
                bdims = ("0",) * nb
        if grouped and c.group_m > 1 and tm > 1 and tn > 1:
            width = c.group_m * tn
            out.append(f"group = {tile} // {width}  # {c.group_m} tile rows at a time, so that "
                       f"running programs share tiles in L2")
            out.append(f"first_m = group * {c.group_m}")
            out.append(f"group_rows = tl.minimum({tm} - first_m, {c.group_m})")
            out.append(f"pid_m = first_m + ({tile} % {width}) % group_rows  # tile row, of {tm}")
            out.append(f"pid_n = ({tile} % {width}) // group_rows  # tile column, of {tn}")
        elif tn == 1:
            out.append(f"pid_m = {tile}  # tile row, of {tm}")
            out.append("pid_n = 0  # one tile column")
        elif tm == 1:
            out.append("pid_m = 0  # one tile row")
            out.append(f"pid_n = {tile}  # tile column, of {tn}")
        else:
            out.append(f"pid_m = {tile} // {tn}  # tile row, of {tm}")
            out.append(f"pid_n = {tile} % {tn}  # tile column, of {tn}")
        nd = len(self.domain.shape)
        rows = self.batch * self.m if self.fold else self.m
        if self.fold:
            fn.used.add("rows_bm")
            out.append(f"rows_bm = pid_m * {bm} + tl.arange(0, {bm})[:, None]  # row of the "
                       f"batch's products stacked ({self.batch} x {self.m})")
            out.append(f"b = rows_bm // {self.m}  # batch index of each row")
            out.append(f"rows_m = rows_bm % {self.m}  # index along M (axis {nd - 2})")
            fn.level.update({"rows_bm": 1, "b": 1})
            bdims = fn.unravel("b", self.batch_shape)
        else:
            out.append(f"rows_m = pid_m * {bm} + tl.arange(0, {bm})[:, None]  # index along M "
                       f"(axis {nd - 2})")
        out.append(f"cols_n = pid_n * {bn} + tl.arange(0, {bn})[None, :]  # index along N "
                   f"(axis {nd - 1})")
        fn.level.update({"pid": 0, "pid_m": 0, "pid_n": 0, "rows_m": 1, "cols_n": 1})
        self.mask_m = self.mask_n = None
        if rows % bm:
            out.append(f"mask_m = {'rows_bm' if self.fold else 'rows_m'} < {rows}")
            self.mask_m = "mask_m"
        if self.n % bn:
            out.append(f"mask_n = cols_n < {self.n}")
            self.mask_n = "mask_n"
        fn.masks = {0: None, 1: self.mask_m, 2: None}
        self.bdims = bdims

    # -- the K loop --------------------------------------------------------------------
    def _k_loop(self, fn: _GemmFn, split: str | None) -> None:
        """``acc`` = the product of the tile's rows of A and columns of B (over one chunk of K
        with ``split``): each step loads (and computes) both operand tiles, then multiplies.

        A K that ``block_k`` does not divide, in a kernel of one program per tile loading
        through pointers, runs its whole steps without a mask along K and the last, partial
        step after the loop, masked (``_peel_k``): a mask along K at every step hides the
        loads' alignment from Triton when K is not a multiple of 8 elements, so every load
        moved 2 bytes (H200, 1023x1486x9171 float16 with 16-byte aligned rows: 48 TFLOP/s)."""
        c = self.cfg
        bm, bn, bk = c.block_m, c.block_n, c.block_k
        k = self.k
        acc_t = TL[self.acc_dtype]
        self._edge_indices(fn)
        acc_line = len(fn.out)  # (the operands may emit per-row values after it)
        fn.out.append(f"acc = tl.full([{bm}, {bn}], 0, {acc_t})")
        if k == 0:  # (a loop body over no K still compiles, and the operands' views of no
            # elements have no strides to index them by: compile fuzz, seed 30004)
            fn.out[-1] += "  # K = 0: the product is zeros"
            fn.body, fn.memo_tile = None, {}
            return
        fn.level.update({"k": 2, "k_a": 2, "k_b": 2})
        if split is None:
            header = f"for k in range(0, {k}, {bk}):"
            k_masked = k % bk != 0
        else:
            steps = -(-k // bk)
            chunk = -(-steps // c.split_k) * bk  # whole steps per chunk
            # constant bounds, the chunk's start added in the body: Triton 3.6's interpreter
            # cannot take a program id in range()
            fn.out.append(f"k_first = {split} * {chunk}  # this chunk's first index along K")
            header = f"for k_step in range(0, {chunk}, {bk}):"
            k_masked = k % bk != 0 or chunk * c.split_k != k
        swapped = self._swap_for_tf32()
        if swapped:
            fn.out[acc_line] = f"acc = tl.full([{bn}, {bm}], 0, {acc_t})  # the product's transpose"
        whole = k - k % bk
        if split is None and k_masked and self._peel_k() and whole:
            # (each step's lines first: values the same along the tile's rows go out before it)
            main = self._k_step(fn, False, swapped, split)
            fn.out.append(f"for k in range(0, {whole}, {bk}):  # whole steps: no mask along K")
            fn.out.extend("    " + line for line in main)
            fn.out.append(f"k = tl.full([], {whole}, tl.int32)  # the last, partial step along K")
            fn.out.extend(self._k_step(fn, True, swapped, split))
        elif split is not None and k_masked and PEEL_SPLIT_K and self._peel_k():
            self._split_k_peeled(fn, split, chunk, swapped)
        else:
            body = self._k_step(fn, k_masked, swapped, split)
            fn.out.append(header)
            fn.out.extend("    " + line for line in body)
        if swapped:
            fn.out.append("acc = tl.trans(acc)")
        fn.body = None
        fn.memo_tile = {}

    def _split_k_peeled(self, fn: _GemmFn, split: str, chunk: int, swapped: bool) -> None:
        """The K loop of a split-K program whose chunks K does not fill: the chunks before
        the one that holds K's end run whole steps without a mask along K; that one runs its
        whole steps, then its partial step masked; chunks past K's end add nothing.

        A mask along K at every step hides the loads' alignment from Triton where K is not a
        multiple of 4 (8 for 2-byte types): A's rows, 16-byte aligned, loaded 4 bytes at a
        time (sm_90 PTX of 2048x576 with K = 8191, A's rows 8192 apart: 48 of A's 60
        ``cp.async`` moved 4 bytes, none once peeled), and every element's load carried its
        own predicate. The loop bounds stay constants (Triton 3.6's interpreter takes no
        program id in ``range()``): one loop per kind of chunk, chosen by the chunk's index."""
        bk = self.cfg.block_k
        step_count = chunk // bk
        whole_steps = self.k // bk
        last = whole_steps // step_count  # the chunk that holds K's end
        tail_steps = whole_steps - last * step_count  # its whole steps
        partial = self.k % bk != 0
        main = self._k_step(fn, False, swapped, split)
        end = self._k_step(fn, True, swapped, split) if partial else []
        branch = "if"
        if last > 0:
            fn.out.append(f"if {split} < {last}:  # chunks within K: whole steps, no mask along K")
            fn.out.append(f"    for k_step in range(0, {chunk}, {bk}):")
            fn.out.extend("        " + line for line in main)
            branch = "elif"
        if tail_steps or partial:
            fn.out.append(f"{branch} {split} == {last}:  # the chunk that holds K's end")
            if tail_steps:
                fn.out.append(f"    for k_step in range(0, {tail_steps * bk}, {bk}):  # its "
                              f"whole steps: no mask along K")
                fn.out.extend("        " + line for line in main)
            if partial:
                fn.out.append(f"    k_step = {tail_steps * bk}  # its last, partial step")
                fn.out.extend("    " + line for line in end)

    def _edge_indices(self, fn: _GemmFn) -> None:
        """The row index of A's tile and the column index of B's in the K loop
        (``edge_dims``): ``rows_m`` and ``cols_n``, or, where the product's M (N) does not
        fill its last tile, those clamped to M - 1 (N - 1) (``CLAMP_EDGE_LOADS``), so that the
        loads need no mask along M (N). Products on the FMA units only (full-precision float32,
        float64): float16 ones of 128x256 tiles spilled 112-552 bytes a thread so under Triton
        3.6's ptxas (none masked). Not where the tiles load through TMA (boxes read zeros past
        the edges), a batch folds into M (its rows past the end are not one matrix's) or the
        kernel reduces the product's rows (the columns past N would join the reduction)."""
        rows_a, cols_b = "rows_m", "cols_n"
        if CLAMP_EDGE_LOADS and not self.tma and (self._fma() or self.dtype == F64):
            if self.mask_m and not self.fold and self._clamp_keeps_loads(0):
                fn.out.append(f"rows_a = tl.minimum(rows_m, {self.m - 1})  # A's rows past M "
                              f"load row {self.m - 1}, never stored: no mask along M")
                rows_a = "rows_a"
            if self.mask_n and not self.domain.reduced and self._clamp_keeps_loads(1):
                fn.out.append(f"cols_b = tl.minimum(cols_n, {self.n - 1})  # B's columns past N "
                              f"load column {self.n - 1}, never stored: no mask along N")
                cols_b = "cols_b"
        for clamped in {rows_a, cols_b} - {"rows_m", "cols_n"}:
            fn.level[clamped] = 1  # (per program, like the indices they clamp)
            fn.used.add(clamped)
        self.edge_dims = (rows_a, cols_b)

    def _clamp_keeps_loads(self, index: int) -> bool:
        """Whether operand ``index`` (0: A, 1: B) loads as wide with its M (N) index clamped:
        no buffer it reads is contiguous along that axis with 16-byte aligned steps along K
        (a clamped index hides the contiguity that 16-byte loads need: a row-major B of
        16-byte rows keeps its mask along N). A read row-major and a B of misaligned rows
        lose nothing."""
        name = self.mm.args[index]
        nd = len(self.types[name].shape)
        outer, along_k = (nd - 2, nd - 1) if index == 0 else (nd - 1, nd - 2)
        origin = (0,) * nd
        points = (origin, *(tuple(1 if i == ax else 0 for i in range(nd))
                            for ax in (outer, along_k)))
        for (param, offsets), _ in self._load_sites(points, roots=(name,)).items():
            size = self.kernel.params[param].type.dtype.itemsize
            if offsets[1] - offsets[0] == 1 and ((offsets[2] - offsets[0]) * size) % 16 == 0:
                return False
        return True

    def _peel_k(self) -> bool:
        """Whether the K loop's partial last step runs after it (``_k_loop``): one program per
        tile, pointer loads (TMA boxes read zeros past K without a mask; a persistent loop is
        flattened with the K loop into one pipeline)."""
        return not self.tma and self._programs(self.grid_tiles) == 0

    def _k_step(self, fn: _GemmFn, masked: bool, swapped: bool, split: str | None) -> list[str]:
        """The lines of one K step: both operand tiles (masked past K or not), then the
        product's update."""
        fn.body = []
        fn.memo_tile = {}
        body = fn.body
        if split is not None:
            body.append("k = k_first + k_step")
        body.append(f"k_a = k + tl.arange(0, {self.cfg.block_k})[None, :]  # index along K in "
                    f"A's tile")
        body.append(f"k_b = k + tl.arange(0, {self.cfg.block_k})[:, None]  # index along K in "
                    f"B's tile")
        mask_ka = mask_kb = None
        if masked:
            body.append(f"mask_ka = k_a < {self.k}")
            body.append(f"mask_kb = k_b < {self.k}")
            mask_ka, mask_kb = "mask_ka", "mask_kb"
        rows_a, cols_b = self.edge_dims
        a = self._operand(fn, 0, None if rows_a != "rows_m" else self.mask_m, mask_ka, "mask_a")
        b = self._operand(fn, 1, None if cols_b != "cols_n" else self.mask_n, mask_kb, "mask_b")
        if swapped:
            body.append("one = tl.where(k >= 0, 1.0, 0.0)  # 1, which the compiler cannot fold")
            body.append(f'acc = tl.dot(tl.trans({b}) * one, tl.trans({a}), acc, '
                        f'input_precision="{self.precision}")  # %{self.mm.name} = matmul, '
                        f'as (B^T A^T)^T: one block_k step')
        else:
            body.append(self._dot(a, b) + f"  # %{self.mm.name} = matmul: one block_k step")
        return body

    def _swap_for_tf32(self) -> bool:
        """Whether a TF32 product is computed as ``(B^T A^T)^T``: Hopper's TF32 wgmma reads
        both operands K-major from shared memory, so a B loaded with N contiguous (a row-major
        [K, N] array) is copied there 4 bytes at a time (81 TFLOP/s at 4096^3 on the H200,
        where a K-major B gives 267-305). As the left operand of the transposed product, B^T
        goes through registers (the ``* one``, an elementwise step Triton cannot fold), which
        take any layout: B's tiles are then copied 16 bytes at a time and pipelined."""
        if self.dtype != F32 or not self.precision.startswith("tf32") or self.tma:
            return False
        name = self.mm.args[1]
        if self._has_prologue(name):
            return False  # computed in registers anyway
        nd = len(self.b_shape)
        if nd < 2 or self.b_shape[-1] < 2:
            return False
        origin = (0,) * nd
        along_n = tuple(1 if i == nd - 1 else 0 for i in range(nd))
        sites = self._load_sites((origin, along_n), roots=(name,))
        return any(offsets[1] - offsets[0] == 1 for _, offsets in sites)

    def _operand(self, fn: _GemmFn, index: int, mask_outer: str | None, mask_k: str | None,
                 mask_name: str) -> str:
        """Operand ``index`` (0: A, 1: B) evaluated on its ``[block_m, block_k]`` (or
        ``[block_k, block_n]``) tile of this step, zero outside K."""
        name = self.mm.args[index]
        shape = self.types[name].shape
        c = self.cfg
        tile_mask = joint_mask(fn.body, [mask_outer, mask_k], mask_name)
        fn.masks = {0: None, 1: mask_outer, 2: tile_mask}
        if index == 0:
            dims = (*self.bdims, self.edge_dims[0], "k_a")
            tile = [c.block_m, c.block_k]
        else:
            dims = (*self.bdims, "k_b", self.edge_dims[1])
            tile = [c.block_k, c.block_n]
        self._context = (dims[-2], dims[-1])
        v = fn.value(name, Coords(shape, None, dims))
        hint = f"{'a' if index == 0 else 'b'}_tile"
        spans = self._spans_tile(name, index)
        if mask_k and (self._has_prologue(name) or not spans):
            # zeros past K: a prologue of the zeros loaded there need not give 0 (exp(0) = 1),
            # and a value constant along K was loaded without K's mask
            v = fn.emit(2, f"tl.where({mask_k}, {v}, 0)", hint)
        if not spans:
            v = fn.emit(2, f"tl.broadcast_to({v}, {tile})", hint)
        return v

    def tma_load(self, fn: _GemmFn, name: str, coords: Coords) -> str | None:
        """Parameter ``name`` at the operand tile's coordinates as one TMA box, or None when
        its layout does not allow it (see the module docstring).

        The tile's two axes may be any two axes of the parameter, one of them contiguous
        (a transposed view reads the box and transposes it in registers); every other axis
        must be indexed by a value of the program (a batch index: the box is one deep along
        it, and reshaped to the tile), with a stride of a multiple of 16 bytes, as the outer
        tile axis's. Past the edges of the parameter (and so of a batch's matrix) the box
        reads zeros."""
        shape = self.types[name].shape
        dims = coords.dims
        dtype = self.types[name].dtype
        nd = len(shape)
        if not 2 <= nd <= 5 or dims is None or dtype.kind == "b":
            return None
        if self.fold and name == self.a_name and tuple(dims) == (*self.bdims, "rows_m", "k_a"):
            return self._folded_tma_load(fn, name)
        context = set(self._context)
        tile_axes = [ax for ax, d in enumerate(dims) if d in context]
        if len(tile_axes) != 2 or {dims[ax] for ax in tile_axes} != context:
            return None
        batch_axes = [ax for ax in range(nd) if ax not in tile_axes]
        if any(fn.lvl(dims[ax]) > 0 for ax in batch_axes):
            return None  # (a batch index that varies along the tile)
        i = self.param_index[name]
        strides = self.strides[i]
        if 0 in strides:
            return None
        inner = next((ax for ax in reversed(tile_axes) if strides[ax] == 1), None)
        if inner is None:
            return None
        outer = tile_axes[0] if inner == tile_axes[1] else tile_axes[1]
        order = [*batch_axes, outer]
        if any((strides[ax] * dtype.itemsize) % 16 for ax in order):
            return None
        c = self.cfg
        size = {"rows_m": c.block_m, "cols_n": c.block_n, "k_a": c.block_k, "k_b": c.block_k}
        start = {"rows_m": f"pid_m * {c.block_m}", "cols_n": f"pid_n * {c.block_n}",
                 "k_a": "k", "k_b": "k"}
        v_outer, v_inner = dims[outer], dims[inner]
        if size[v_inner] * dtype.itemsize < 16:
            return None
        order.append(inner)
        desc = self._descriptor(fn, name, [shape[ax] for ax in order],
                                [strides[ax] for ax in order],
                                [1] * len(batch_axes) + [size[v_outer], size[v_inner]])
        at = ", ".join([dims[ax] for ax in batch_axes] + [start[v_outer], start[v_inner]])
        to_tile = f".reshape({size[v_outer]}, {size[v_inner]})" if batch_axes else ""
        flip = ".T" if v_outer == self._context[1] else ""
        return fn.emit(2, f"{desc}.load([{at}]){to_tile}{flip}", self.var_name(name),
                       f"load %{name} (TMA)")

    def _descriptor(self, fn: _GemmFn, name: str, shape: list[int], strides: list[int],
                    box: list[int], why: str = "") -> str:
        """The TMA descriptor of parameter ``name`` laid out as ``shape`` / ``strides`` in
        boxes of ``box``: made once per layout (before a persistent loop over tiles); its
        buffer must start 16-byte aligned (the ``cuda`` backend checks)."""
        key = ("tma", name, tuple(shape), tuple(strides), tuple(box))
        desc = fn.memo_row.get(key)
        if desc is None:
            desc = fn.emit(0, f"tl.make_tensor_descriptor({self.ptr_name[self.param_index[name]]}"
                              f", shape={shape}, strides={strides}, block_shape={box})",
                           f"desc_{self.var_name(name)}", f"%{name} in TMA boxes{why}")
            fn.memo_row[key] = desc
            self.hoisted.add(desc)
        self.aligned.add(self.param_index[name])
        return desc

    def _folded_tma_load(self, fn: _GemmFn, name: str) -> str | None:
        """A's tile of a folded batch (``_fold_batch``) as a box of one 2-D descriptor over the
        ``batch x M`` rows (its batch and M axes merge), or None where TMA cannot read it."""
        i = self.param_index[name]
        strides, shape = self.strides[i], self.types[name].shape
        dtype = self.types[name].dtype
        c = self.cfg
        row = strides[-2]
        merged = all(shape[ax] == 1 or strides[ax] == row * math.prod(shape[ax + 1:-1])
                     for ax in range(len(shape) - 2))
        if strides[-1] != 1 or not merged or (row * dtype.itemsize) % 16 or \
                c.block_k * dtype.itemsize < 16:
            return None
        desc = self._descriptor(fn, name, [self.batch * self.m, shape[-1]], [row, 1],
                                [c.block_m, c.block_k], ", its batch and M axes as one")
        return fn.emit(2, f"{desc}.load([pid_m * {c.block_m}, k])", self.var_name(name),
                       f"load %{name} (TMA)")

    def _has_prologue(self, name: str) -> bool:
        """Whether an operand is computed (not only a view of a parameter)."""
        while name not in self.param_index:
            instr = self.defs[name]
            if instr.op not in ("reshape", "permute", "expand", "slice"):
                return True
            name = instr.args[0]
        return False

    def _spans_tile(self, name: str, index: int) -> bool:
        """Whether the operand's loads vary along both axes of its tile (so its value has the
        tile's shape without a broadcast)."""
        shape = self.types[name].shape
        nd = len(shape)
        if nd < 2 or shape[nd - 2] < 2 or shape[nd - 1] < 2:
            return False
        origin = (0,) * nd
        steps = tuple(tuple(1 if i == axis else 0 for i in range(nd)) for axis in (nd - 2, nd - 1))
        sites = self._load_sites((origin, *steps), roots=(name,))
        if not sites:
            return False
        # each axis: some load's offset moves along it
        return all(any(offsets[0] != offsets[j] for _, offsets in sites) for j in (1, 2))

    def _dot(self, a: str, b: str) -> str:
        if not gemm_uses_dot(self.dtype.name):
            acc_t = TL[self.acc_dtype]
            return (f"acc += tl.reduce({a}[:, :, None].to({acc_t}) * {b}[None, :, :].to({acc_t}), "
                    f"1, tl.standard._sum_combine)")
        if self.dtype == F32:
            return f'acc = tl.dot({a}, {b}, acc, input_precision="{self.precision}")'
        if self.acc_dtype.name != "float32":
            # Triton 3.6 checks the accumulator against out_dtype (float32 unless given)
            return f"acc = tl.dot({a}, {b}, acc, out_dtype={TL[self.acc_dtype]})"
        return f"acc = tl.dot({a}, {b}, acc)"

    # -- the epilogue ------------------------------------------------------------------
    @property
    def _tile_dims(self) -> tuple[str, ...]:
        return (*self.bdims, "rows_m", "cols")

    def _open_epilogue(self, fn: _GemmFn, part: int = 0, parts: int = 1) -> Coords:
        """The tile's coordinates over the product's domain, with its masks and rows (``part``
        of ``parts``: that slice of the tile's columns, ``_epilogue_slices``)."""
        out = fn.out
        bn = self.cfg.block_n
        width = bn // parts
        col_mask = self.mask_n
        if parts == 1:
            out.append(f"cols = pid_n * {bn} + tl.arange(0, {bn})[None, :]  # index along N")
        else:
            start = f" + {part * width}" if part else ""
            out.append(f"cols = pid_n * {bn}{start} + tl.arange(0, {width})[None, :]"
                       f"  # index along N: slice {part + 1} of {parts}")
            if col_mask:
                col_mask = "mask_slice"
                out.append(f"mask_slice = cols < {self.n}")
        fn.level["cols"] = 2
        tile_mask = joint_mask(out, [self.mask_m, col_mask])
        fn.masks = {0: None, 1: self.mask_m, 2: tile_mask}
        # an input along N alone (a bias) loads one row under the columns' mask: under the
        # tile's it is a load at every point of the tile (float16 4943x15497 with a bias: 128
        # loads a thread, 255 registers and a spill; one row: 167 and none)
        fn.axis_masks = {"cols": col_mask}
        fn.rows_vary = True
        if part:
            fn.memo_tile = {}  # (the slice's values: the same names, other columns)
            return Coords(self.domain.shape, None, self._tile_dims)
        if self.fold:
            fn.rows = "rows_bm"
        elif self.batch > 1:
            out.append(f"rows = b * {self.m} + rows_m  # flat index of the row (batch and M)")
            fn.level["rows"] = 1
            fn.rows = "rows"
        else:
            fn.rows = "rows_m"
        fn.row_dims = (*self.bdims, "rows_m")
        return Coords(self.domain.shape, None, self._tile_dims)

    def _tile_flat(self, fn: _GemmFn, coords: Coords, widen: bool = False) -> str:
        """The flat index of every point of the tile, as a tile-shaped tensor (``widen``: the
        coordinates drop size-1 dims of the product, so the index may miss an axis of it)."""
        flat = fn.flat_of(coords)
        if widen or 1 in (self.m, self.n) or fn.lvl(flat) < 2:  # give the pointer the tile's shape
            flat = fn.emit(2, f"rows_m * 0 + cols * 0 + {flat}", "same")
        return flat

    def _coords_for(self, shape: tuple[int, ...], coords: Coords) -> Coords:
        """Tile coordinates of a value that drops or adds size-1 dims of the product's shape."""
        if shape == coords.shape:
            return coords
        kept = iter([d for d, n in zip(coords.dims or (), coords.shape) if n != 1])
        return Coords(shape, None, tuple("0" if n == 1 else next(kept) for n in shape))

    def _relay_output(self) -> int | None:
        """The output the product is relayed through before the epilogue reads it, or None.

        On sm_90 the main loop's product lives in the asynchronous MMA's (wgmma's) accumulator
        registers. An epilogue that computes a special function (``tanh``, ``exp``, a division,
        a square root: multi-function-unit instructions) with another value of the product
        live across it, as GELU's tanh form ``y * (1 + tanh(...))`` does, makes ptxas
        serialize every wgmma of the main loop (its warning C7514: "wgmma.mma_async
        instructions are serialized due to non wgmma instructions reading accumulator
        registers"). The MLP's first layer with GELU then ran at 459 TFLOP/s against 599 bare on
        the H200. Reordering or splitting the epilogue's source fixed one spelling of GELU and
        not another; what removes the warning for each (Triton 3.6's ptxas and CUDA 13's) is
        to cut the epilogue off the accumulator: the product is stored to an output of its
        tile's shape, read back after a barrier (from L2, where it was just written), and the
        epilogue overwrites it. The relay costs a store and a load of the tile: tanh alone
        (not serialized) ran at 527 relayed against 579, so by default (``GEMM_RELAY_PRODUCT``
        "serialized") the kernel is emitted without it and marked ``relayable``; the ``cuda``
        backend compiles it again with ``relay=1`` when ptxas reports the serialization. A
        kernel's ``relay`` attribute decides when written; "always" relays any epilogue, on
        every target (tested on the interpreter)."""
        relay = self._relay_candidate()
        if relay is None:
            return None
        given = self.kernel.attrs.get("relay")
        if given is not None:
            return relay if given else None
        mode = heuristics.gemm_relay_mode()
        if mode == "always" or (mode == "special" and self.target == "cuda"):
            return relay
        if mode == "serialized" and self.target == "cuda" and self._fma():
            # (no wgmma to serialize: the FMA main loop itself ran slower with the special
            # function's code reading the accumulator's registers. H100, 6400x1552x3336 with
            # bias and GELU, the GEMM alone (bench/exp_s15.py --precision ieee-epi,
            # bench/results/h100-s16-call18): 1855 us, relayed 1518; bare 1504, cuBLAS 1431)
            return relay
        self.relayable = self.target == "cuda" and mode == "serialized"
        return None

    def _fma(self) -> bool:
        """Whether the product runs on the FMA units: float32 in full precision."""
        return self.dtype == F32 and self.precision == "ieee"

    def _relay_candidate(self) -> int | None:
        """The output a relay would go through: a ``tl.dot`` product (tensor cores, or the FMA
        units in full precision) with an epilogue (one
        with a special function, unless ``GEMM_RELAY_PRODUCT`` is "always"), and an output of
        the product's shape whose dtype holds the product exactly; else None."""
        if not gemm_uses_dot(self.dtype.name):
            return None
        if len(self.kernel.yields) == 1 and self.kernel.yields[0] == self.mm.name:
            return None  # (a bare product: no epilogue)
        if heuristics.gemm_relay_mode() != "always" and \
                not any(i.op in SPECIAL_FUNCTIONS for i in self.kernel.body):
            return None
        for j, y in enumerate(self.kernel.yields):
            t = self.types[y]
            if t.shape == self.domain.shape and t.dtype.kind == "f" \
                    and t.dtype.itemsize >= self.dtype.itemsize:
                return j
        return None

    def _sliceable(self, relay: int | None, parts: int) -> bool:
        """Whether the tile's epilogue can run on ``parts`` slices of its columns: not where
        it reduces rows (a row needs every column) or relays the product (read back as one
        tile), nor in slices under ``heuristics.GEMM_EPILOGUE_MIN_SLICE`` columns."""
        return (relay is None and not self._stages()
                and self.cfg.block_n // parts >= heuristics.GEMM_EPILOGUE_MIN_SLICE)

    def _epilogue_parts(self, relay: int | None) -> int:
        """How many slices of its columns the tile's epilogue runs on: the ``epilogue_split``
        attribute where ``_sliceable``, else 1."""
        split = int(self.kernel.attrs.get("epilogue_split", 1))
        return split if split > 1 and self._sliceable(relay, split) else 1

    def _epilogue_slices(self, fn: _GemmFn, acc: str, parts: int) -> None:
        """The epilogue on ``parts`` slices of the tile's columns in turn: the accumulator is
        cut into them (``tl.reshape``, ``tl.permute``, ``tl.split``, halving each time), and
        each slice's outputs are computed and stored before the next slice's, so that only
        one slice's addresses and loaded values are live at a time. A 128 x 256 tile on 8
        warps holds 128 values a thread; where its epilogue loads and stores them one at a
        time (rows not 16-byte aligned, a residual), each with its own address, the kernel
        spilled (16 x 3911x13805x384 with ``b.T`` and a residual: 368 bytes a thread; in 4
        slices, none)."""
        bm, bn = self.cfg.block_m, self.cfg.block_n
        pieces, width = [acc], bn
        while len(pieces) < parts:
            halves = []
            for piece in pieces:
                width_half = width // 2
                pair = fn.fresh("acc_pair")
                fn.out.append(f"{pair} = tl.permute(tl.reshape({piece}, [{bm}, 2, "
                              f"{width_half}]), [0, 2, 1])  # columns in two halves")
                low, high = fn.fresh("acc_slice"), fn.fresh("acc_slice")
                fn.out.append(f"{low}, {high} = tl.split({pair})")
                halves += [low, high]
            pieces, width = halves, width // 2
        self.summary = (*self.summary, f"      epilogue in {parts} slices of {width} columns "
                        f"(epilogue_split={parts})")
        self.epilogue_slices = parts
        for part, piece in enumerate(pieces):
            coords = self._open_epilogue(fn, part, parts)
            self._epilogue_body(fn, piece, coords, None)

    def _epilogue(self, fn: _GemmFn, acc: str, coords: Coords | None = None) -> None:
        """Round the product, then compute and store every output of the region on the tile."""
        relay = self._relay_output() if acc == "acc" and coords is None else None
        if coords is None:
            parts = self._epilogue_parts(relay)
            if parts > 1:
                self._epilogue_slices(fn, acc, parts)
                return
            self.epilogue_splittable = (
                self.target == "cuda" and "epilogue_split" not in self.kernel.attrs
                and self._sliceable(relay, heuristics.GEMM_EPILOGUE_SPLIT_SPILLED))
        coords = self._open_epilogue(fn) if coords is None else coords
        self._epilogue_body(fn, acc, coords, relay)

    def _epilogue_body(self, fn: _GemmFn, acc: str, coords: Coords, relay: int | None) -> None:
        """The product rounded, then every output of the region computed and stored at
        ``coords``."""
        mm = self.mm
        expr = acc if self.acc_dtype == self.dtype else f"{acc}.to({TL[self.dtype]})"
        fn.product = fn.emit(2, expr, self.var_name(mm.name), _instr_text(mm))
        if relay is not None:
            out, dtype = self.out_name[relay], self.types[self.kernel.yields[relay]].dtype
            why = "relay=1" if self.kernel.attrs.get("relay") else \
                f"GEMM_RELAY_PRODUCT={heuristics.GEMM_RELAY_PRODUCT}"
            cause = "its special functions slowed the FMA main loop when they read the " \
                "accumulator" if self._fma() else "ptxas would serialize the main loop's wgmma"
            self.summary = (*self.summary, f"      the epilogue reads the product back from "
                            f"{out} ({why}: {cause})")
            flat = self._tile_flat(fn, coords, 1 in (self.m, self.n))
            mask = fn.masks[2]
            store_mask, load_mask = (f", mask={mask}", f", mask={mask}, other=0") if mask \
                else ("", "")
            cast = "" if dtype == self.dtype else f".to({TL[dtype]})"
            fn.out.append(f"tl.store({out} + {flat}, {fn.product}{cast}{store_mask})"
                          "  # the product relayed through L2: the epilogue does not read the "
                          "MMA's registers (gemm.py, _relay_output)")
            fn.out.append("tl.debug_barrier()  # every thread's part is stored")
            fn.out.append(f"{fn.product} = tl.load({out} + {flat}{load_mask})"
                          + ("" if dtype == self.dtype else f".to({TL[self.dtype]})"))
        d = self.domain
        for stage in self._stages():  # row reductions: the whole row is in the tile
            for r in stage:
                x = fn.value(r.args[0], coords)
                fn.rowvals[r.name] = self._reduce_tile(fn, r, x, None)
        for j, y in enumerate(self.kernel.yields):
            shape = self.types[y].shape
            dtype = self.types[y].dtype
            if d.reduced and shape != d.shape and shape in (d.kept_shape, d.keepdims_shape):
                v = fn.value(y, self.row_coords(fn, shape))
                at, mask = fn.rows, self.mask_m
                if fn.lvl(v) >= 2:
                    # a product of one column (the reduced extent is 1, so the keepdims shape
                    # is the product's): a value of the tile reshaped to the row's shape, as a
                    # softmax over that column is; its one column stores, from a pointer of
                    # the tile's shape (interpret fuzz, seed 29001, program 9303)
                    at = self._tile_flat(fn, self.row_coords(fn, shape), widen=True)
                    mask = fn.masks[2]
                m = f", mask={mask}" if mask else ""
                fn.out.append(f"tl.store({self.out_name[j]} + {at}, "
                              f"{self.store_expr(v, dtype)}{m})  # yield %{y}")
                continue
            at = self._coords_for(shape, coords)
            v = fn.value(y, at)
            flat = self._tile_flat(fn, at, at is not coords or 1 in (self.m, self.n))
            m = f", mask={fn.masks[2]}" if fn.masks[2] else ""
            fn.out.append(f"tl.store({self.out_name[j]} + {flat}, "
                          f"{self.store_expr(v, dtype)}{m})  # yield %{y}")
