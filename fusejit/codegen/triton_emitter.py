"""The Triton emitter: one Kernel region -> one launched Triton function.

This module holds what every kernel kind shares and the row reduction kind itself; each
other kind is a module of its own over it (``emitter_class`` picks one per region):
``pointwise`` (no reductions), ``split_reduction`` (too few rows to fill the GPU: chunks
of the reduced extent over programs, combined by the last), ``cooperative_rows`` (rows
too wide for one program, over several that each hold a chunk) and ``gemm`` (a region
holding a ``matmul``).

The row reduction: a program instance owns a block of *rows* (flattened kept
coordinates of the domain) and walks the *columns* (flattened reduced coordinates): in
one tile when the row fits a block (persistent: the row stays in registers, so
reduce-then-broadcast reads the input once), else in a loop per reduction *stage* (a
stage is the set of reductions that depend only on earlier stages; each stage re-reads
the row), plus a final loop that stores the domain-shaped outputs.

Values are written at coordinates by ``values._Fn`` (loads through views, one statement
per IR value); this module decides the tiles, loops and stores around them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..ir.domain import SPLIT_REDUCTION, Domain, load_sites, region_domain
from ..ir.ops import REDUCE
from ..ir.program import Instr, Kernel, TensorType, contiguous_strides
from . import heuristics
from .heuristics import (
    PERSISTENT_LIMIT,
    POINTWISE_BLOCK,
    TILE_2D,
    WELFORD_STATE,
    GemmConfig,
    SplitTiles,
    choose_split,
    next_pow2,
)
from .lowering import (
    BOOL,
    EXP_F32_HELPER,
    NAN,
    PTR,
    SCALAR_ARG,
    SLOW_MATH,
    TL,
    compute_dtype,
)
from .values import (
    Coords,
    _distinct,
    _Fn,
    _instr_text,
    _same_strides,
    function_name,
    joint_mask,
    sanitize,
)

__all__ = ["EmittedKernel", "Launch", "emit_kernel", "kernel_sources", "describe_tiling",
           "choose_split",
           "PERSISTENT_LIMIT", "POINTWISE_BLOCK", "TILE_2D"]

INT32_MAX = 2**31 - 1

#: Reductions whose result does not depend on the order their tiles come in (beyond
#: rounding): a looped pass over a row that holds only these may run backwards
#: (``_Emitter._close_loop``)
ORDER_FREE_REDUCTIONS = frozenset({"sum", "prod", "any", "all", "max", "min", "sumexp"})


@dataclass(frozen=True)
class Launch:
    """One launch of a generated function.

    ``args`` lists what each argument is bound to, in order: ``("in", i)`` the i-th
    kernel parameter (a buffer's pointer, or a scalar param's value as ``SCALAR_ARG``
    says), ``("out", j)`` the j-th result, ``("scratch", k)`` the k-th scratch buffer of
    ``EmittedKernel.scratch``, ``("counters", 0)`` the buffer of ``EmittedKernel.counters``
    (zero at the start of the launch, left zero).
    """

    fn_name: str
    grid: tuple[int, int, int]
    num_warps: int
    args: tuple[tuple[str, int], ...]
    signature: dict[str, str]
    #: Triton's software-pipelining depth for the function's loops (0: Triton's default)
    num_stages: int = 0
    #: a cap on registers per thread given to ptxas (Triton's ``maxnreg``; 0: ptxas chooses),
    #: so that more programs fit on an SM
    max_registers: int = 0


@dataclass
class EmittedKernel:
    """Generated source of one region and how to launch it."""

    name: str
    source: str
    launches: tuple[Launch, ...]
    scratch: tuple[tuple[np.dtype, int], ...]
    out_types: tuple[TensorType, ...]
    uses_libdevice: bool = False
    #: the chosen tiling and why, one line per launch (``plan.explain()`` and the header show it)
    tiling: tuple[str, ...] = ()
    #: parameters the source reads through TMA descriptors: their buffers must start on a
    #: 16-byte boundary (the ``cuda`` backend checks)
    aligned: tuple[int, ...] = ()
    #: the tile configs ``FUSEJIT_AUTOTUNE=1`` may choose from (``heuristics.*_candidates``):
    #: the heuristic's first; any of them can be given back as ``emit_kernel``'s ``tiles``
    candidates: tuple[Any, ...] = ()
    #: int32 counters (a split reduction's, one per row block) that must be zero when a launch
    #: starts; the launch leaves them zero, so a backend zeroes them once and keeps them (one
    #: buffer per stream that may run the kernel: two launches at once must not share it)
    counters: int = 0
    #: a GEMM whose epilogue could read the product back from its output and does not
    #: (``gemm.GemmEmitter._relay_output``): the ``cuda`` backend emits it again with
    #: ``relay=1`` if ptxas serializes its main loop (``Compiled.serialized_mma``)
    relayable: bool = False
    #: a GEMM the heuristic made persistent with TMA loads (``gemm.GemmEmitter._default_programs``,
    #: not the kernel's attributes): the ``cuda`` backend emits it again with ``tma=0
    #: programs=0`` when a buffer it reads through TMA does not start on a 16-byte boundary,
    #: and with ``programs`` = the device's SM count when that is fewer
    auto_persistent: bool = False
    #: a GEMM the heuristic gave TMA loads, persistent or with one program per tile
    #: (``gemm.GemmEmitter._default_tma``): emitted again with ``tma=0 programs=0`` for a
    #: buffer that does not start on a 16-byte boundary, as ``auto_persistent``
    auto_tma: bool = False
    #: parameters a row kernel reads from the 16-byte word each row starts in
    #: (``_Emitter._row_window``): those loads reach up to 15 bytes before a row and after it,
    #: inside the buffer only where it starts on a 16-byte boundary, so a backend emits the
    #: kernel again with ``window=0`` for a buffer that does not
    windowed: tuple[int, ...] = ()
    #: a GEMM whose epilogue runs on the whole tile and could run in slices of its columns
    #: (``gemm.GemmEmitter._epilogue_slices``): the ``cuda`` backend emits it again with
    #: ``epilogue_split`` = ``heuristics.GEMM_EPILOGUE_SPLIT_SPILLED`` if the compiled kernel
    #: spills registers (``Compiled.stack``)
    epilogue_splittable: bool = False
    #: the slices of its columns a GEMM's epilogue runs on (``epilogue_split``; 1: the tile)
    epilogue_slices: int = 1


def _kernel_text(kernel: Kernel) -> list[str]:
    try:
        from ..ir.printer import _kernel
        return [line.replace("\n", " ") for line in _kernel(kernel)]
    except Exception:  # noqa: BLE001
        return [f"kernel @{kernel.name}"] + ["  " + _instr_text(i) for i in kernel.body]


def _sumexp_riders(stage: list[Instr]) -> dict[str, Instr]:
    """The maxes of ``stage`` over the same operand as one of its sumexps, by name, each with
    that sumexp: the sumexp computes the row's max anyway, so the max is not computed again."""
    return {m.name: e for m in stage if m.op == "max" for e in stage
            if e.op == "sumexp" and e.args[0] == m.args[0]}


def _m2_riders(stage: list[Instr], acc_dtype: Callable[[Instr], np.dtype]) -> dict[str, Instr]:
    """The sums of ``stage`` over the same operand as one of its m2s (in the same accumulator
    dtype), by name, each with that m2: a cooperative row's m2 partial is the chunk's sum
    (and its m2), so the sum's partial is that one, not a second."""
    return {s.name: m for s in stage if s.op == "sum" for m in stage
            if m.op == "m2" and m.args[0] == s.args[0] and acc_dtype(m) == acc_dtype(s)}




class _Emitter:
    """Emits the source of one region."""

    def __init__(self, kernel: Kernel, strides: list[tuple[int, ...]], target: str,
                 tiles: Any = None, origin: str | None = None) -> None:
        self.kernel = kernel
        self.target = target
        #: a pointwise kernel's results are stored with their rows this many elements apart
        #: (the ``row_pitch`` attribute; 0: contiguous), as the backends allocate them
        self.row_pitch = kernel.row_pitch
        self.tiling: list[str] = []
        #: a candidate config that replaces the heuristic's choice (``emit_kernel``'s ``tiles``)
        self.tiles = tiles
        #: where the tiles came from, for the header and explain() (default: the heuristics)
        self.origin = origin
        self.candidates: tuple[Any, ...] = ()
        #: the row max each sumexp computed, by name (a max of the same operand reuses it)
        self.row_max: dict[str, str | None] = {}
        #: the per-row shift each looped m2 accumulates against, by name
        self.shift: dict[str, str | None] = {}
        #: elements per 16-byte word when a cooperative row's chunks are laid from the word
        #: each row starts in (``CoopTiles.window``), else 0
        self._coop_window = 0
        self.name = function_name(kernel.name)
        self.domain: Domain = region_domain(kernel)
        self.types = {p.name: p.type for p in kernel.params}
        self.types.update({i.name: i.type for i in kernel.body})
        self.defs = {i.name: i for i in kernel.body}
        self.param_index = {p.name: i for i, p in enumerate(kernel.params)}
        #: params passed by value (``s_<name>`` arguments), not pointers (``p_<name>``)
        self.scalars = frozenset(p.name for p in kernel.params if p.scalar)
        self.strides = [tuple(int(s) for s in st) for st in strides]
        # params "0" and "k_0" would both be p_k_0 (and clipped long names could meet);
        # scalar params (passed by value) are s_..., buffers p_...
        self.ptr_name = _distinct([f"{'s' if p.scalar else 'p'}_{sanitize(p.name)}"
                                   for p in kernel.params])
        self.out_name = [f"out{j}" for j in range(len(kernel.yields))]
        self._names: dict[str, str] = {}
        self.idx64 = self._needs_int64()
        #: a short inner kept run's points and their padded count (``Domain.short_inner_kept``;
        #: the row blocks then index padded kept points, ``_kept_rows``), or None
        run = self.domain.short_inner_kept  # (0 but for outer reductions)
        self.kept_run: tuple[int, int] | None = (run, next_pow2(run)) if run else None
        #: the kept points the row blocks cover: ``domain.rows``, padded when ``kept_run`` is
        self.padded_rows = (self.domain.rows // run * next_pow2(run) if run
                            else self.domain.rows)
        #: elements per 16-byte word when the row kernel's tiles are row windows
        #: (``_open_window``), else 0
        self._window = 0
        self.windowed = set()

    def var_name(self, name: str) -> str:
        if name not in self._names:
            self._names[name] = sanitize(("v" if name.isdigit() else "v_") + name)
        return self._names[name]

    def _needs_int64(self) -> bool:
        reach = [self.domain.rows * max(1, self.domain.reduce_size) + 1 << 1]
        for p, st in zip(self.kernel.params, self.strides):
            reach.append(sum(abs(s) * max(d - 1, 0) for s, d in zip(st, p.type.shape)))
        for t in self.kernel.result_types:
            reach.append(t.size)
        for i in self.kernel.body:
            reach.append(i.type.size)
        return max(reach) + (1 << 16) > INT32_MAX

    def is_row_level(self, name: str, shape: tuple[int, ...]) -> bool:
        d = self.domain
        if not d.reduced or shape == d.shape:
            return False
        return shape in (d.kept_shape, d.keepdims_shape)

    def row_coords(self, fn: _Fn, shape: tuple[int, ...]) -> Coords:
        d = self.domain
        kept_dims = fn.row_dims
        if shape == d.kept_shape:
            return Coords(shape, fn.rows, kept_dims)
        it = iter(kept_dims)
        dims = tuple("0" if i in d.reduced else next(it) for i in range(len(d.shape)))
        return Coords(shape, fn.rows, dims)

    # -- pointers ------------------------------------------------------------------
    def arg_type(self, i: int) -> str:
        """Triton signature type of param ``i``: a pointer, or a scalar param's carrier type."""
        p = self.kernel.params[i]
        return SCALAR_ARG[p.type.dtype][1] if p.scalar else PTR[p.type.dtype]

    def signature(self, scratch: list[np.dtype] | None = None) -> dict[str, str]:
        sig = {p: self.arg_type(i) for i, p in enumerate(self.ptr_name)}
        for o, t in zip(self.out_name, self.kernel.result_types):
            sig[o] = PTR[t.dtype]
        return sig

    def store_expr(self, v: str, dtype: np.dtype) -> str:
        return f"{v}.to(tl.uint8)" if dtype == BOOL else v

    def choose(self, candidates: list[Any]) -> Any:
        """The tiles of this emission: ``self.tiles`` when given (a candidate of this kind),
        else the heuristic's (the first candidate). Records the candidates."""
        self.candidates = tuple(candidates)
        if self.tiles is None:
            return candidates[0]
        if type(self.tiles) is not type(candidates[0]):
            raise ValueError(f"kernel {self.kernel.name} takes {type(candidates[0]).__name__} "
                             f"tiles, not {self.tiles!r}")
        return self.tiles

    def origin_line(self) -> str:
        """Where the tiles came from (the header's last ``# tiling:`` line)."""
        if self.origin:
            return self.origin
        n = len(self.candidates)
        if n > 1:
            return f"from the heuristics (FUSEJIT_AUTOTUNE=1 times {n} candidates on first use)"
        return "from the heuristics"

    # -- kinds ------------------------------------------------------------------------
    def emit(self) -> EmittedKernel:
        """The region's source and launches (``functions`` of its kind, then ``assemble``)."""
        fns, launches = self.functions()
        return self.assemble(fns, launches)

    def functions(self) -> tuple[list[_Fn], list[Launch]]:
        """The functions of the region's kind and their launches: here a row reduction's
        (``reduction``); the other kinds override this (``emitter_class``)."""
        return self.reduction()

    #: lines the kind adds to the header comment, after the target (how it tiles the region)
    summary: tuple[str, ...] = ()
    #: parameters read through TMA descriptors (``EmittedKernel.aligned``)
    aligned: frozenset[int] | set[int] = frozenset()
    #: int32 counters the launch counts finished programs on (``EmittedKernel.counters``)
    counters: int = 0
    #: a GEMM that could relay its product and does not (``EmittedKernel.relayable``)
    relayable: bool = False
    #: a GEMM made persistent with TMA loads by the heuristic (``EmittedKernel.auto_persistent``)
    auto_persistent: bool = False
    #: a GEMM given TMA loads by the heuristic (``EmittedKernel.auto_tma``)
    auto_tma: bool = False
    #: parameters read through a row window (``EmittedKernel.windowed``)
    windowed: frozenset[int] | set[int] = frozenset()
    #: a GEMM whose epilogue could run in slices (``EmittedKernel.epilogue_splittable``)
    epilogue_splittable: bool = False
    #: the slices a GEMM's epilogue runs on (``EmittedKernel.epilogue_slices``)
    epilogue_slices: int = 1
    #: a GEMM's loads in its K loop that are not TMA boxes (``gemm.GemmEmitter``)
    k_pointer_loads: int = 0
    #: the ``programs`` of such a GEMM emitted again without TMA (0 but in a test mode)
    programs_without_tma: int = 0

    def assemble(self, fns: list[_Fn], launches: list[Launch]) -> EmittedKernel:
        """The module source: header comment (the region's IR), imports, constants, functions."""
        k = self.kernel
        origin = self.origin_line()
        head = ["# Generated by fusejit: Triton source for one fused region.",
                f"# target: {self.target}", *("# tiling: " + line for line in self.tiling),
                *("# " + line for line in self.summary), f"# tiling: {origin}", "#"]
        head += ["# " + line for line in _kernel_text(k)]
        lines = head + ["", "import triton", "import triton.language as tl"]
        uses_lib = any(f.low.uses_libdevice for f in fns)
        if uses_lib:
            lines.append("from triton.language.extra import libdevice")
        lines += ["", "INF = tl.constexpr(float(\"inf\"))", ""]
        if any(f.low.uses_exp_f32 for f in fns):
            lines += EXP_F32_HELPER.splitlines()
        for i, f in enumerate(fns):
            f.prune_unread_indices()
            lines += ["", "", *f.source] if i else ["", *f.source]
        source = "\n".join(lines) + "\n"
        return EmittedKernel(self.name, source, tuple(launches), tuple(self.scratch),
                             tuple(k.result_types), uses_lib,
                             (*self.tiling, *self.summary, origin),
                             tuple(sorted(self.aligned)), self.candidates, self.counters,
                             self.relayable, self.auto_persistent, self.auto_tma,
                             tuple(sorted(self.windowed)), self.epilogue_splittable,
                             self.epilogue_slices)

    def _header(self, fn_name: str, args: list[str]) -> list[str]:
        return ["@triton.jit", f"def {fn_name}({', '.join(args)}):"]

    def _pid(self, axis: int = 0) -> str:
        return f"tl.program_id({axis}).to(tl.int64)" if self.idx64 else f"tl.program_id({axis})"

    def _reversed(self) -> bool:
        """Whether the programs run last first (``order=reversed``, a pointwise kernel's
        blocks or a split reduction's chunks: ``fuse.rules.rule_reverse_reread``)."""
        return self.kernel.attrs.get("order") == "reversed"

    # -- 2-D tiles for transposed reads ---------------------------------------------------
    def _load_sites(self, points: tuple[tuple[int, ...], ...], roots: tuple[str, ...] | None = None
                    ) -> dict[tuple[int, tuple[int, ...]], None]:
        """Every load the outputs (or ``roots``) make at ``points``, with this kernel's
        strides (``ir.domain.load_sites``)."""
        return load_sites(self.kernel, self.strides, points, roots)

    def _single_launch(self, fn: _Fn, grid: tuple[int, int, int],
                       num_warps: int) -> tuple[list[_Fn], list[Launch]]:
        """Close ``fn`` as the region's one function, launched once over all params and outputs."""
        fn.source = self._header(self.name, self.ptr_name + self.out_name) + \
            ["    " + line for line in fn.out]
        launch = Launch(self.name, grid, num_warps,
                        tuple([("in", i) for i in range(len(self.ptr_name))]
                              + [("out", j) for j in range(len(self.out_name))]),
                        self.signature())
        return [fn], [launch]

    # -- reductions -------------------------------------------------------------------
    def _stages(self) -> list[list[Instr]]:
        dep: dict[str, int] = {}
        stages: dict[int, list[Instr]] = {}
        for instr in self.kernel.body:
            s = max([dep.get(a, 0) for a in instr.args] + [0])
            if instr.op in REDUCE:
                s += 1
                stages.setdefault(s, []).append(instr)
            dep[instr.name] = s
        return [stages[s] for s in sorted(stages)]

    def _blocks(self) -> tuple[int, int, int, bool]:
        """(BLOCK_M rows, BLOCK_N columns, num_warps, persistent), from ``heuristics``."""
        d = self.domain
        t = self.choose(heuristics.reduction_candidates(
            self.target, self.padded_rows, d.reduce_size, d.kind == "outer_reduction",
            self._itemsize(), self._state(), self._run_pad()))
        self.tiling = [f"{t.block_m}x{t.block_n} tiles (kept x reduced), {t.num_warps} warps, "
                       f"{-(-self.padded_rows // t.block_m)} programs: {t.why}"]
        return t.block_m, t.block_n, t.num_warps, t.persistent

    def _run_pad(self) -> int:
        """The padded points of a short inner kept run (``kept_run``), else 0."""
        return self.kept_run[1] if self.kept_run else 0

    def _state(self) -> int:
        """Accumulator tiles per reduction step: ``WELFORD_STATE`` when a var/std (m2) is
        among the region's reductions, else 1 (``heuristics.reduction_tiles``)."""
        return WELFORD_STATE if any(i.op == "m2" for i in self.kernel.body) else 1

    def _heavy_calls(self) -> int:
        """Calls of libdevice's slow math per element (``heuristics.HEAVY_MATH_CALLS``)."""
        return sum(1 for i in self.kernel.body if i.op in SLOW_MATH)

    def _narrowest_item(self) -> int:
        """The narrowest element size of the region's buffers (its params and outputs)."""
        types = [p.type for p in self.kernel.params if not p.scalar]
        types += list(self.kernel.result_types)
        return min([t.dtype.itemsize for t in types] + [8])

    def _itemsize(self) -> int:
        """The widest element size of any value in the region (bounds tile registers)."""
        return max([t.dtype.itemsize for t in self.types.values()] + [1])

    def reduction(self) -> tuple[list[_Fn], list[Launch]]:
        self.scratch = []
        d = self.domain
        rows, cols = self.padded_rows, d.reduce_size
        bm, bn, num_warps, persistent = self._blocks()
        self._bm, self._bn = bm, bn
        stages = self._stages()
        fn = _Fn(self)
        fn.used.update({"pid", "rows", "row_mask", "cols", "col_mask", "mask", "k", "k_up"})
        out = fn.out
        out.append(f"pid = {self._pid()}")
        row_mask = self._open_rows(fn, bm, rows)
        window = self._row_window(bn, persistent)
        # a window starts up to window - 1 elements before the row: its tiles reach further
        reach = cols + window - 1 if window else cols
        col_masked = bool(window) or cols % bn != 0 or cols == 0
        if window:
            self._open_window(fn, bm, window)

        def open_tile(looped: bool) -> Coords:
            return self._open_tile(fn, "k + " if looped else "", looped, col_masked, row_mask)

        straight_coords = open_tile(False) if persistent else None
        # a pass over the row after a forward one runs backwards (``_close_loop``) when its
        # reductions do not care about the order (argmax/argmin keep the first index of a
        # tie, Welford's counts assume the ragged tile comes last)
        backwards = True  # (so the first pass runs forwards)

        def close_pass(stage_ops: set[str]) -> None:
            nonlocal backwards
            backwards = (heuristics.ALTERNATE_PASSES and not backwards
                         and stage_ops <= ORDER_FREE_REDUCTIONS)
            self._close_loop(fn, reach, bn, backwards=backwards)

        for stage in stages:
            riders = _sumexp_riders(stage)
            stage = [r for r in stage if r.name not in riders]
            if persistent:
                coords = straight_coords
            else:
                accs = [self._acc_init(fn, r, bm, bn) for r in stage]
                fn.body = []
                fn.memo_tile = {}
                coords = open_tile(True)
            for i, r in enumerate(stage):
                x = fn.value(r.args[0], coords)
                if persistent:
                    fn.rowvals[r.name] = self._reduce_tile(fn, r, x, None)
                else:
                    self._acc_update(fn, r, x, accs[i])
            if not persistent:
                close_pass({r.op for r in stage})
                for i, r in enumerate(stage):
                    fn.rowvals[r.name] = self._reduce_tile(fn, r, None, accs[i])
                    self.row_max[r.name] = accs[i][0] if r.op == "sumexp" else None
            self._ride_on_sumexps(fn, riders)
        self._store_row_outputs(fn, row_mask)
        if any(self.types[y].shape == d.shape for y in self.kernel.yields):
            if persistent:
                coords = straight_coords
            else:
                fn.body = []
                fn.memo_tile = {}
                coords = open_tile(True)
            self._store_domain_outputs(fn, coords)
            if not persistent:
                close_pass(set())
        self._describe_run()
        return self._single_launch(fn, (max(1, -(-rows // bm)), 1, 1), num_warps)

    def _store_row_outputs(self, fn: _Fn, row_mask: str | None) -> None:
        """Store the yields of a row's shape (kept or keepdims) at ``fn``'s rows."""
        m = f", mask={row_mask}" if row_mask else ""
        for j, y in enumerate(self.kernel.yields):
            shape = self.types[y].shape
            if shape != self.domain.shape:
                v = fn.value(y, self.row_coords(fn, shape))
                fn.out.append(f"tl.store({self.out_name[j]} + rows, "
                              f"{self.store_expr(v, self.types[y].dtype)}{m})  # yield %{y}")

    def _store_domain_outputs(self, fn: _Fn, coords: Coords) -> None:
        """Store the yields of the domain's shape at the open tile ``coords`` (in the loop body
        when ``fn`` is in one)."""
        for j, y in enumerate(self.kernel.yields):
            if self.types[y].shape != self.domain.shape:
                continue
            v = fn.value(y, coords)
            flat = fn.flat_of(coords)
            if fn.lvl(flat) < 2:  # every dim has size 1: a tile-shaped pointer all the same
                flat = fn.emit(2, f"rows * 0 + cols * 0 + {flat}", "same")
            value = self.store_expr(v, self.types[y].dtype)
            if self._window:
                whole, edges = self._window_store_masks(fn, flat)
                fn._target(2).append(f"tl.store({self.out_name[j]} + {flat}, {value}, "
                                     f"mask={whole})  # yield %{y}: the row's whole words")
                fn._target(2).append(f"tl.store({self.out_name[j]} + {flat}, {value}, "
                                     f"mask={edges})  # yield %{y}: its first and last words")
                continue
            m = f", mask={fn.masks[2]}" if fn.masks[2] else ""
            fn._target(2).append(f"tl.store({self.out_name[j]} + {flat}, "
                                 f"{value}{m})  # yield %{y}")

    def _window_store_masks(self, fn: _Fn, flat: str) -> tuple[str, str]:
        """The masks of a row window's stores: the words wholly inside the row (one mask value
        a word, so that Triton stores 16 bytes at a time) and the row's elements in the words
        it shares with its neighbours (one element at a time)."""
        key = ("window_store_masks", flat)
        if key in fn.memo_tile:
            return fn.memo_tile[key]
        per_word, n = self._window, self.domain.reduce_size
        row_mask = fn.masks[1]
        words = fn.emit(2, f"{flat} // {per_word}", "words",
                        "the 16-byte word of each lane: one value a word")
        first = fn.emit(1, f"(row_at + {per_word - 1}) // {per_word}", "first_whole",
                        "the row's first word wholly inside it")
        end = fn.emit(1, f"(row_at + {n}) // {per_word}", "end_whole",
                      "the end of its words wholly inside it")
        whole = f"({words} >= {first}) & ({words} < {end})"
        whole = fn.emit(2, f"{whole} & {row_mask}" if row_mask else whole, "whole_words")
        edges = fn.emit(2, f"{fn.masks[2]} & (({words} < {first}) | ({words} >= {end}))",
                        "edge_words")
        fn.memo_tile[key] = (whole, edges)
        return whole, edges

    # -- split reductions -------------------------------------------------------------
    def _describe_run(self) -> None:
        """Add the short inner kept run's padding (``kept_run``) to the tiling lines."""
        if self.kept_run:
            c, p = self.kept_run
            pad = f" padded to {p}" if p != c else ""
            self.tiling.append(f"each output's inner kept run of {c} point(s){pad}: a tile "
                               f"holds runs across, contiguous in memory")

    def _partial_slots(self, stage: list[Instr], n_split: int, cooperative: bool = False
                       ) -> tuple[dict[str, list[str]], list[str]]:
        """One scratch buffer per partial value of ``stage``'s reductions (``n_split`` per
        row, in the accumulator dtype; m2's partials are (count, mean, m2) triples, a
        ``cooperative`` row's (sum, m2) pairs, its chunks' counts known from their places;
        sumexp's are (max, sum) pairs), set as the kernel's scratch: the buffer names by
        reduction, and all of them in order."""
        parts = {"m2": ("sum", "m2") if cooperative else ("n", "mean", "m2"),
                 "sumexp": ("max", "sum"), "argmax": ("best", "index"),
                 "argmin": ("best", "index")}
        slots = {r.name: ([f"part_{self.var_name(r.name)}_{s}" for s in parts[r.op]]
                          if r.op in parts else [f"part_{self.var_name(r.name)}"]) for r in stage}
        part_names = [p for r in stage for p in slots[r.name]]
        # (an argmax's index partials are int64, as its result; every other partial is in
        # the accumulator dtype)
        self.scratch = [(np.dtype(np.int64) if kind == "index" else self._acc_dtype(r),
                         n_split * self.domain.rows)
                        for r in stage for kind in parts.get(r.op, ("value",))]
        return slots, part_names

    def _partials_launch(self, fn: _Fn, part_names: list[str], grid: tuple[int, int, int],
                         num_warps: int) -> Launch:
        """Close ``fn`` as the region's kernel over the params it reads, its partials, its
        counters and the outputs (a split or cooperative reduction); its one launch."""
        used = self._used_params(fn.out)
        fn.source = self._header(self.name, [self.ptr_name[i] for i in used] + part_names
                                 + ["counters"] + self.out_name)
        fn.source += ["    " + line for line in fn.out]
        sig = {self.ptr_name[i]: self.arg_type(i) for i in used}
        sig.update({p: PTR[dt] for p, (dt, _) in zip(part_names, self.scratch)})
        sig["counters"] = PTR[np.dtype(np.int32)]
        sig.update({o: PTR[t.dtype] for o, t in zip(self.out_name, self.kernel.result_types)})
        return Launch(self.name, grid, num_warps,
                      tuple([("in", i) for i in used]
                            + [("scratch", j) for j in range(len(part_names))]
                            + [("counters", 0)]
                            + [("out", j) for j in range(len(self.out_name))]), sig)

    # -- partials: shared by split reductions and cooperative rows (cooperative_rows.py) --
    def _ride_on_sumexps(self, fn: _Fn, riders: dict[str, Instr]) -> None:
        """Each max of ``riders`` (``_sumexp_riders``) as its sumexp's row max in ``fn``, cast
        to the max's dtype (a float16 max of float32-accumulated values is exact in float16)."""
        for name, e in riders.items():
            m, out = self.row_max[e.name], self.types[name].dtype
            fn.rowvals[name] = m if self._acc_dtype(e) == out else \
                fn.emit(1, f"{m}.to({TL[out]})", self.var_name(name), "max shared with sumexp")

    def _open_partials(self, g: _Fn, first: str, fbm: int, ragged: bool, n_split: int
                       ) -> str | None:
        """Start ``g`` on ``fbm`` rows from ``first`` (``ragged``: the last may pass the end)
        across the ``n_split`` partials of each (``parts``); returns the row mask."""
        g.used.update({"rows", "row_mask", "parts", "part_mask", "mask"})
        sb = next_pow2(n_split)
        self._bm, self._bn = fbm, sb
        out = g.out
        row_mask = self._kept_rows(g, first, fbm, ragged)
        out.append(f"parts = tl.arange(0, {sb})[None, :]  # partial index (chunk)")
        g.level["parts"] = 2
        part_mask = "part_mask" if sb != n_split else None
        if part_mask:
            out.append(f"part_mask = parts < {n_split}")
        g.masks = {0: None, 1: row_mask, 2: joint_mask(out, [row_mask, part_mask])}
        return row_mask

    def _combine_partials(self, g: _Fn, stage: list[Instr], slots: dict[str, list[str]],
                          n_split: int, row_major: bool = False, chunk: int = 0
                          ) -> dict[str, str]:
        """Load every partial of ``g``'s rows (``_open_partials``) in chunk order and combine
        them in one fixed tree: each reduction's row value in ``g.rowvals``. (``row_major``:
        a row's partials are side by side, a cooperative row's layout; else each chunk's
        rows are, a split reduction's. ``chunk``: a cooperative row's chunk size, whose m2
        partials are (sum, m2) pairs: the count of partial ``p`` is its share of the row's
        columns and its mean sum / count, the bits the chunk's own division gave.) Returns
        the loaded sums of those m2s, by name."""
        rows = self.domain.rows
        tile_mask = g.masks[2]
        sums: dict[str, str] = {}
        if row_major:
            at = f"rows * {n_split} + parts"
        else:
            at = "parts" if rows == 1 else f"parts * {rows} + rows"
        for r in stage:
            # masked partials load as neutral values: (0, 0, 0) for m2, (-inf, 0) for sumexp;
            # .cg: from L2, where every program's release put them
            xs = []
            for k, part in enumerate(slots[r.name]):
                other = "-INF" if r.op == "sumexp" and k == 0 else "0"
                if r.op in ("argmax", "argmin"):  # (no chunk: the worst value, no index)
                    other = self._identity(r, self._acc_dtype(r)) if k == 0 else str(INT32_MAX)
                lm = f", mask={tile_mask}, other={other}" if tile_mask else ""
                xs.append(g.emit(2, f'tl.load({part} + {at}{lm}, cache_modifier=".cg")',
                                 f"{part}_all", f"partials of %{r.name}"))
            if r.op == "sumexp":
                g.rowvals[r.name] = self._online_reduce(g, r, tuple(xs), partial=False,
                                                        shared_max=False)
            elif r.op == "m2" and chunk:
                total, m2 = xs
                sums[r.name] = total
                hint, dt = f"part_{self.var_name(r.name)}", TL[self._acc_dtype(r)]
                shift = None
                if self._coop_window:  # (chunks laid from the row's first 16-byte word)
                    shift = g.emit(1, f"rows * {self.domain.reduce_size} % {self._coop_window}",
                                   "shift", "the row's start in its 16-byte word")
                n = g.emit(2, f"{self._chunk_count('parts', chunk, shift)}.to({dt})",
                           f"{hint}_n", "each chunk's count")
                mean = g.emit(2, f"{total} / tl.where({n} == 0, 1, {n})", f"{hint}_mean",
                              "each chunk's mean, as the chunk divided")
                g.rowvals[r.name] = self._chan_reduce(g, r, (n, mean, m2), partial=False)
            elif r.op == "m2":
                g.rowvals[r.name] = self._chan_reduce(g, r, tuple(xs), partial=False)
            elif r.op in ("argmax", "argmin"):  # the best of the chunks', its first index
                g.rowvals[r.name] = self._reduce_tile(g, r, None, tuple(xs),
                                                      src=self._acc_dtype(r))
            else:
                g.rowvals[r.name] = self._reduce_tile(g, r, xs[0], None, src=self._acc_dtype(r))
        return sums

    def _used_params(self, lines: list[str]) -> list[int]:
        """Indices of the parameters whose pointer a function body mentions."""
        text = "\n".join(lines)
        return [i for i, p in enumerate(self.ptr_name) if re.search(rf"\b{p}\b", text)]

    def _open_rows(self, fn: _Fn, bm: int, rows: int) -> str | None:
        """Start ``fn`` on its block of ``bm`` rows (flat kept indices); returns the row mask name.

        The mask is None when the block size divides the number of rows.
        """
        row_mask = self._kept_rows(fn, f"pid * {bm}", bm, rows % bm != 0)
        fn.masks = {0: None, 1: row_mask, 2: None}
        return row_mask

    def _kept_rows(self, fn: _Fn, first: str, bm: int, ragged: bool) -> str | None:
        """Define ``rows`` in ``fn``: the flat kept indices of ``bm`` kept points from ``first``,
        their kept coordinates (``fn.row_dims``) and their mask (returned; None: no mask).
        ``ragged``: the block may pass the last point.

        With a short inner kept run (``kept_run``) the block indexes padded points: the run's
        index is ``% P`` and the rest ``// P`` (P a power of two), so Triton sees the run's
        points as contiguous (``rows % 3`` would hide it) and lays a warp's lanes along them.
        """
        out = fn.out
        fn.used.update({"rows", "row_mask"})
        kept = self.domain.kept_shape
        if self.kept_run is None:
            out.append(f"rows = {first} + tl.arange(0, {bm})[:, None]  # flat kept index")
            fn.level["rows"] = 1
            fn.rows = "rows"
            row_mask = None
            if ragged:
                out.append(f"row_mask = rows < {self.domain.rows}")
                row_mask = "row_mask"
            fn.row_dims = fn.unravel("rows", kept) if kept else ()
            return row_mask
        c, p = self.kept_run
        fn.used.update({"kept_pad", "run", "run_outer"})
        n_run = len(self.domain.shape) - 1 - max(self.domain.reduced)  # (the run's axes)
        out.append(f"kept_pad = {first} + tl.arange(0, {bm})[:, None]  "
                   f"# kept index, each run of {c} padded to {p}")
        out.append(f"run = kept_pad % {p}  # index in the inner kept run")
        out.append(f"run_outer = kept_pad // {p}")
        out.append(f"rows = run_outer * {c} + run  # flat kept index")
        for v in ("kept_pad", "run", "run_outer", "rows"):
            fn.level[v] = 1
        fn.rows = "rows"
        masks = [f"run < {c}"] if c != p else []
        if ragged:
            masks.append(f"run_outer < {self.domain.rows // c}")
        row_mask = None
        if masks:
            out.append(f"row_mask = {' & '.join(f'({m})' for m in masks)}"
                       if len(masks) > 1 else f"row_mask = {masks[0]}")
            row_mask = "row_mask"
        outer, inner = kept[:len(kept) - n_run], kept[len(kept) - n_run:]
        fn.row_dims = ((fn.unravel("run_outer", outer) if outer else ())
                       + fn.unravel("run", inner))
        return row_mask

    def _row_window(self, bn: int, persistent: bool) -> int:
        """Elements per 16-byte word when the row kernel reads its rows from the word each
        starts in (a row window), else 0.

        A row of ``C`` elements that is not a multiple of 16 bytes starts every row but the
        first off a 16-byte boundary, so Triton cannot prove any load aligned and loads one
        element at a time. A window starts each row's tiles at the 16-byte word the row starts in
        (``tl.multiple_of`` says so) and masks loads by whole words, so the loads move 16
        bytes at a time; the columns before and after the row are loaded and dropped by the
        exact column mask, which reductions take. Only inner reductions over buffers in the
        domain's own layout that store no values of the domain's shape, where a single tile
        (not looped) has room for the ``V - 1`` more columns, and not with ``window=0`` on
        the kernel (a backend's choice for a buffer that does not start on a 16-byte
        boundary). H100, ``bench/exp_row_window.py`` (``bench/results/h100-s14-call*``): a
        float16 sum of 262144x77 45.3 -> 14.9 us (34% -> 104% of the copy rate), a looped
        float32 variance of 2048x40001 134 -> 117 us. A kernel that also stores the rows
        stores the words wholly inside a row 16 bytes at a time and the row's first and last
        words an element at a time (``_window_store_masks``), where ``_window_stores_pay``.
        """
        d = self.domain
        per_word = self._window_words()
        if not per_word:
            return 0
        stored = any(self.types[y].shape == d.shape for y in self.kernel.yields)
        cols = d.reduce_size
        if cols % per_word == 0 or cols < 2 * per_word or (persistent and bn < cols + per_word - 1):
            return 0
        if bn % per_word:  # (a step narrower than a word: a row's first column may come after
            return 0       # the first step, which Welford's late lanes do not allow for)
        if stored and not self._window_stores_pay(per_word):
            return 0
        self.tiling.append(f"rows read from the 16-byte word each starts in ({per_word} elements "
                           f"a word; rows of {cols} are not 16-byte multiples)")
        return per_word

    def _window_words(self) -> int:
        """Elements per 16-byte word of a row window (the narrowest element of the inputs of
        the domain's shape in its own layout and of the outputs of its shape), or 0 where no
        row kernel may read through one: windows off, not an inner reduction, a short kept
        run, ``window=0`` on the kernel (a backend's choice for a buffer that does not start on
        a 16-byte boundary), or no such input. ``_row_window`` and the cooperative rows'
        ``CoopTiles.window`` decide from it."""
        d = self.domain
        if (not heuristics.ROW_WINDOW or d.kind != "inner_reduction" or self.kept_run
                or not self.kernel.attrs.get("window", 1)):
            return 0
        items = [p.type.dtype.itemsize for p, st in zip(self.kernel.params, self.strides)
                 if not p.scalar and p.type.shape == d.shape and _same_strides(st, d.shape)]
        if not items:
            return 0
        items += [self.types[y].dtype.itemsize for y in self.kernel.yields
                  if self.types[y].shape == d.shape]
        return 16 // min(items)

    def _window_stores_pay(self, per_word: int) -> bool:
        """Whether a row kernel that stores rows gains from a row window: its elements are
        2 bytes or less (``per_word`` >= 8), where element-wise loads and stores move 64 bytes a
        warp instruction or less, and it reads no operand along the columns alone (a layer
        norm's weight and bias: aligned as the plain kernel reads them, shifted by each row's
        offset in the window). H200, ``bench/exp_row_window.py``
        (``bench/results/h200-s15-call1``), plain / windowed: float16 softmax of 2412x25379
        178 -> 140 us (36% -> 46% of the copy rate), 8192x1001 17.7 -> 17.3; slower where
        the rule says no: float32 softmax of 4096x3001 27.5 -> 35.3 (element-wise float32
        was at the copy rate already, and the window's edge stores cost a predicated store
        an element), layer norm float16 4096x5003 66 -> 95, float32 8192x3001 71 -> 88."""
        if not heuristics.ROW_WINDOW_STORES or per_word < 8:
            return False
        return not self._row_vectors()

    def _row_vectors(self) -> int:
        """Inputs read along the reduced columns alone (a layer norm's weight and bias)."""
        d = self.domain
        return sum(1 for p in self.kernel.params if not p.scalar and p.type.shape != d.shape
                   and p.type.shape and p.type.shape[-1] == d.reduce_size)

    def _open_window(self, fn: _Fn, bm: int, per_word: int, row: str = "pid") -> None:
        """Define each row's first element, the 16-byte word it starts in and the end of the
        word it ends in (``_row_window``), before the row's tiles open (``row``: the scalar
        row index when ``bm`` is 1)."""
        n = self.domain.reduce_size
        cast = ".to(tl.int64)" if self.idx64 else ""
        # (a [1, 1] tensor's multiple_of failed Triton's passes: one row is a scalar)
        row, hint = (row, str(per_word)) if bm == 1 else ("rows", f"[{per_word}, {per_word}]")
        fn.out.append(f"row_at = {row}{cast} * {n}  # the row's first element")
        fn.out.append(f"word_at = tl.multiple_of(row_at - row_at % {per_word}, {hint})  "
                      f"# the 16-byte word the row starts in")
        fn.out.append(f"words_end = tl.multiple_of((row_at + {n + per_word - 1}) // {per_word} "
                      f"* {per_word}, {hint})  # the end of the word it ends in")
        for name in ("row_at", "word_at", "words_end"):
            fn.level[name] = 1
        fn.used.update({"row_at", "word_at", "words_end", "in_words"})
        self._window = per_word

    def _open_tile(self, fn: _Fn, start: str, looped: bool, col_masked: bool,
                   row_mask: str | None, suffix: str = "", limit: str | None = None) -> Coords:
        """Open a ``[BLOCK_M, BLOCK_N]`` tile at reduced offset ``start``; its domain coordinates.
        ``suffix``: on the names of its index and masks (one of several tiles held at once);
        ``limit``: the reduced index the tile's columns stop at, where not the row's end (a
        cooperative chunk of ``CoopTiles.span`` columns)."""
        if suffix and self._window:
            raise AssertionError("a row window is one tile")
        d = self.domain
        cols_, col_mask, mask = f"cols{suffix}", f"col_mask{suffix}", f"mask{suffix}"
        bn, cols = self._bn, d.reduce_size
        tgt = fn.body if looped else fn.out
        cast = ".to(tl.int64)" if self.idx64 else ""
        window = self._window
        flat = ""
        if window:
            flat = fn.emit(2, f"word_at + {start}tl.arange(0, {bn})[None, :]", "idx",
                           "flat domain index, from the row's first 16-byte word")
            tgt.append(f"{cols_} = {flat} - row_at  # flat reduced index (outside the row at "
                       f"the window's ends)")
            within = f"({flat} < words_end) & {row_mask}" if row_mask else f"{flat} < words_end"
            tgt.append(f"in_words = {within}  # whole words: the loads' mask")
        else:
            tgt.append(f"{cols_} = {start}tl.arange(0, {bn})[None, :]{cast}  # flat reduced index")
        fn.level[cols_] = 2
        col_masked = col_masked or limit is not None
        if col_masked:
            tgt.append(f"{col_mask} = ({cols_} >= 0) & ({cols_} < {cols})" if window
                       else f"{col_mask} = {cols_} < {limit or cols}")
        tile_mask = joint_mask(tgt, [row_mask, col_mask if col_masked else None], mask)
        fn.masks = {0: None, 1: row_mask, 2: tile_mask}
        fn.col_mask = col_mask if col_masked else None
        if d.kind != "outer_reduction" and not window:
            # an input along the reduced axes alone (a layer norm's weight) loads one row of
            # the tile under the columns' mask, not once for each of the program's rows
            fn.axis_masks = {cols_: col_mask if col_masked else None}
            fn.rows_vary = True
        red_shape = tuple(d.shape[i] for i in d.reduced)
        red_dims = fn.unravel(cols_, red_shape) if red_shape else ()
        it_k, it_r = iter(fn.row_dims), iter(red_dims)
        dims = tuple(next(it_r) if i in d.reduced else next(it_k) for i in range(len(d.shape)))
        if d.kind == "outer_reduction":
            return Coords(d.shape, None, dims)
        fn.window = flat if window else None
        if window:
            return Coords(d.shape, flat, dims)
        flat = fn.emit(2, f"rows * {cols} + {cols_}" if cols != 1 else "rows", "idx",
                       "flat domain index")
        return Coords(d.shape, flat, dims)

    def _close_loop(self, fn: _Fn, cols: int, bn: int, backwards: bool = False) -> None:
        """Close the loop over the reduced extent whose body ``fn.body`` holds (``k``: the
        tile's offset). A row too wide for registers is read once per pass; when a pass
        follows another, it runs the other way: the tiles the previous pass read last are
        the likeliest to be in L2 still, so some of the re-read comes from L2 rather than
        from memory (about the L2's share per program: 50 MB over 256 programs of 1 MB rows
        is a fifth of each row). A reduction pass that runs backwards adds its tiles in
        the other order, the same on every run; only ``ORDER_FREE_REDUCTIONS`` run
        backwards (argmax's ties and Welford's per-step counts need the forward order)."""
        if backwards:
            last = (cols - 1) // bn * bn
            fn.out.append(f"for k_up in range(0, {cols}, {bn}):  # backwards: L2 still holds "
                          f"the last tiles read")
            fn.out.append(f"    k = {last} - k_up")
        else:
            fn.out.append(f"for k in range(0, {cols}, {bn}):")
        fn.out.extend("    " + line for line in fn.body)
        if not fn.body:
            fn.out.append("    pass")
        fn.body = None
        fn.memo_tile = {}

    # accumulators ------------------------------------------------------------------
    def _acc_dtype(self, r: Instr) -> np.dtype:
        """The accumulator dtype of reduction ``r``, in loops, tiles and split partials alike:
        float32 for float16/float32 (blocked sums beat NumPy's row-by-row float32 adds over
        a leading axis: ``tests/test_moments.py``), the operand's for float64 and integers."""
        src = self.types[r.args[0]].dtype
        if r.op in ("any", "all") or src == BOOL:
            return np.dtype(np.int8) if r.op in ("any", "all", "max", "min") else r.dtype
        return compute_dtype(src)

    def _identity(self, r: Instr, dt: np.dtype) -> str:
        op = r.op
        if op in ("sum", "any", "m2"):
            return "0"
        if op in ("prod", "all"):
            return "1"
        big = op in ("min", "argmin")
        if op == "sumexp":  # masked lanes: exp(-inf - max) adds 0
            return "-INF"
        if dt.kind == "f":
            return "INF" if big else "-INF"
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return str(info.max if big else info.min)
        return "0"

    def _acc_init(self, fn: _Fn, r: Instr, bm: int, bn: int) -> tuple[str, ...]:
        dt = self._acc_dtype(r)
        if r.op == "sumexp":  # per lane: running max, sum of exp(x - running max)
            m, s = (fn.fresh(f"acc_{self.var_name(r.name)}_{part}") for part in ("max", "sum"))
            fn.out.append(f"{m} = tl.full([{bm}, 1], -INF, {TL[dt]})")  # one per row
            fn.out.append(f"{s} = tl.full([{bm}, {bn}], 0, {TL[dt]})")
            return (m, s)
        if r.op == "m2":  # per lane: count, running mean, sum of squared deviations
            names = tuple(fn.fresh(f"acc_{self.var_name(r.name)}_{part}")
                          for part in ("n", "mean", "m2"))
            # the count depends on the reduced coordinate alone (which columns a lane has
            # seen), so it is one row of the tile: a quarter or less of the per-element work
            # (a row window shifts each row's columns by its own offset: a count per row)
            fn.out.append(f"{names[0]} = tl.full([{bm if self._window else 1}, {bn}], 0, "
                          f"{TL[dt]})")
            fn.out.extend(f"{n} = tl.full([{bm}, {bn}], 0, {TL[dt]})" for n in names[1:])
            self.shift[r.name] = self._row_shift(fn, r, dt)
            return names
        name = fn.fresh(f"acc_{self.var_name(r.name)}")
        fn.out.append(f"{name} = tl.full([{bm}, {bn}], {self._identity(r, dt)}, {TL[dt]})")
        if r.op in ("argmax", "argmin"):
            idx = fn.fresh(f"acci_{self.var_name(r.name)}")
            it = "tl.int64" if self.idx64 else "tl.int32"
            fn.out.append(f"{idx} = tl.full([{bm}, {bn}], {INT32_MAX}, {it})")
            return (name, idx)
        return (name,)

    def _masked(self, fn: _Fn, r: Instr, x: str, dt: np.dtype, src: np.dtype | None = None) -> str:
        src = self.types[r.args[0]].dtype if src is None else src
        xa = x
        if src != dt:
            xa = f"{x}.to({TL[dt]})"
        if fn.lvl(x) < 2:
            # constant along the reduced axes (a stride-0 read, a row value): every column of
            # the tile still counts once, so widen it to the tile before masking and reducing
            xa = f"tl.broadcast_to({xa}, [{self._bm}, {self._bn}])"
        mask = fn.masks[2]
        if mask:
            return fn.emit(2, f"tl.where({mask}, {xa}, {self._identity(r, dt)})",
                           f"x_{self.var_name(r.name)}")
        if xa in fn.level:
            return xa
        return fn.emit(2, xa, f"x_{self.var_name(r.name)}")

    def _acc_update(self, fn: _Fn, r: Instr, x: str, acc: tuple[str, ...]) -> None:
        dt = self._acc_dtype(r)
        if r.op == "m2":
            self._welford_update(fn, r, x, dt, acc)
            return
        if r.op == "sumexp":
            self._online_update(fn, r, x, dt, acc)
            return
        t = self._masked(fn, r, x, dt)
        a = acc[0]
        body = fn.body
        op = r.op
        if op in ("sum", "any"):
            body.append(f"{a} = {a} + {t}" if op == "sum" else f"{a} = tl.maximum({a}, {t})")
        elif op in ("prod", "all"):
            body.append(f"{a} = {a} * {t}" if op == "prod" else f"{a} = tl.minimum({a}, {t})")
        elif op in ("max", "min"):
            nan = ", propagate_nan=tl.PropagateNan.ALL" if dt.kind == "f" else ""
            fname = "maximum" if op == "max" else "minimum"
            body.append(f"{a} = tl.{fname}({a}, {t}{nan})")
        else:  # argmax / argmin: per lane, the first index of the best value (NaN is best)
            i = acc[1]
            cmp = ">" if op == "argmax" else "<"
            take = f"({i} == {INT32_MAX}) | ({t} {cmp} {a})"
            if dt.kind == "f":
                take += f" | (({t} != {t}) & ({a} == {a}))"
            mask = fn.masks[2]
            if mask:
                take = f"{mask} & ({take})"
            tk = fn.emit(2, take, f"take_{self.var_name(r.name)}")
            body.append(f"{a} = tl.where({tk}, {t}, {a})")
            body.append(f"{i} = tl.where({tk}, cols, {i})")

    def _row_shift(self, fn: _Fn, r: Instr, dt: np.dtype) -> str | None:
        """The operand's first element of the row (reduced coordinates 0), or None (empty rows).

        Welford's running mean is rounded at the data's magnitude (an ulp of 1000 is 6e-5 in
        float32), which costs m2 accuracy when the mean dwarfs the spread; accumulating
        ``x - shift`` keeps the running values at the spread's magnitude (m2 is shift-free).
        """
        d = self.domain
        if d.reduce_size == 0:
            return None
        it = iter(fn.row_dims)
        dims = tuple("0" if i in d.reduced else next(it) for i in range(len(d.shape)))
        k = fn.value(r.args[0], Coords(d.shape, None, dims))
        src = self.types[r.args[0]].dtype
        return fn.emit(1, k if src == dt else f"{k}.to({TL[dt]})", f"shift_{self.var_name(r.name)}",
                       "the row's first element: Welford runs on x - shift")

    def _welford_update(self, fn: _Fn, r: Instr, x: str, dt: np.dtype,
                        acc: tuple[str, ...]) -> None:
        """One tile step of Welford's update per lane on ``y = x - shift``: ``n += 1``,
        ``mean += d / n``, ``m2 += d * (y - new mean)`` with ``d = y - mean``.

        A lane outside the columns' mask takes ``y = mean``, so ``d`` is 0 and its mean and
        m2 stay as they are with no select per update (NaN and inf propagate as before: a
        lane whose mean is not finite has a NaN m2 already). Rows outside the row mask are
        never stored, so the count follows the columns' mask alone."""
        n, mean, m2 = acc
        hint = self.var_name(r.name)
        src = self.types[r.args[0]].dtype
        xv = x if src == dt else f"{x}.to({TL[dt]})"
        if fn.lvl(x) < 2:  # constant along the reduced axes: every column still counts once
            xv = f"tl.broadcast_to({xv}, [{self._bm}, {self._bn}])"
        shift = self.shift.get(r.name)
        if shift is not None:
            xv = f"{xv} - {shift}"
        col_mask = fn.col_mask
        if col_mask:
            y = fn.emit(2, f"tl.where({col_mask}, {xv}, {mean})", f"y_{hint}")
        else:
            y = fn.emit(2, xv, f"y_{hint}")
        body = fn.body
        delta = fn.emit(2, f"{y} - {mean}", f"delta_{hint}")
        # lanes are valid in a prefix of the steps, so a valid lane's count at step k is k + 1
        # for all of them: one reciprocal per step instead of a division per element
        inv = fn.emit(2, f"tl.full([], 1.0, {TL[dt]}) / (k // {self._bn} + 1)", f"inv_{hint}")
        if self._window:
            # in a row window the lanes before the row's first column join one step late
            # (their count at step k is k): the other reciprocal, chosen per lane (at step 0
            # such a lane's delta is 0, so its reciprocal only has to be finite)
            late = fn.memo_row.get("late")
            if late is None:
                late = fn.memo_row["late"] = fn.emit(
                    1, f"tl.arange(0, {self._bn})[None, :] < row_at - word_at", "late",
                    "lanes before the row's first column in the first step")
            later = fn.emit(2, f"tl.full([], 1.0, {TL[dt]}) / tl.maximum(k // {self._bn}, 1)",
                            f"inv_late_{hint}")
            inv = fn.emit(2, f"tl.where({late}, {later}, {inv})", f"inv_lane_{hint}")
        body.append(f"{n} = {n} + {col_mask}.to({TL[dt]})" if col_mask else f"{n} = {n} + 1")
        body.append(f"{mean} = {mean} + {delta} * {inv}")
        body.append(f"{m2} = {m2} + {delta} * ({y} - {mean})")

    def _chan_reduce(self, fn: _Fn, r: Instr, parts: tuple[str, ...], partial: bool) -> Any:
        """Combine (count, mean, m2) triples along the tile (Chan et al. for many groups):
        ``N = sum(n)``, ``mean = sum(n * mean_i) / N``, ``m2 = sum(m2_i + n_i (mean_i - mean)^2)``.
        Built-in sums only, so it is one pass on a GPU and vectorized in the interpreter."""
        n, mean, m2 = parts
        hint = ("part_" if partial else "") + self.var_name(r.name)
        total = "tl.reduce({}, 1, tl.standard._sum_combine)[:, None]"
        # the count as a reshape, not [:, None]: when the lanes' counts are constants (a chunk
        # of one unmasked step), Triton 3.6 folds the sum and its expand_dims into IR that
        # fails to compile ("operand #0 does not dominate this use": var of 2**20 on the H200)
        count = fn.emit(1, f"tl.reshape(tl.reduce({n}, 1, tl.standard._sum_combine), "
                           f"({n}.shape[0], 1))", f"{hint}_n")
        safe = fn.emit(1, f"tl.where({count} == 0, 1, {count})", f"{hint}_safe_n")
        avg = fn.emit(1, total.format(f"{n} * {mean}") + f" / {safe}", f"{hint}_mean")
        dev = fn.emit(2, f"tl.where({n} == 0, 0, {mean} - {avg})", f"{hint}_dev")
        v = fn.emit(1, total.format(f"{m2} + {n} * {dev} * {dev}"), f"{hint}_m2",
                    _instr_text(r) + (" (partial)" if partial else ""))
        if partial:
            return count, avg, v
        dt = self._acc_dtype(r)
        return v if dt == r.dtype else fn.emit(1, f"{v}.to({TL[r.dtype]})", hint)

    def _two_pass_tile(self, fn: _Fn, r: Instr, x: str) -> Any:
        """m2 of a row held in registers: its mean, then the squared deviations (no re-read).
        (A cooperative chunk's partial: ``_chunk_m2``.)"""
        dt = self._acc_dtype(r)
        hint = self.var_name(r.name)
        t = self._masked(fn, r, x, dt)
        mask = fn.masks[2]
        total = "tl.reduce({}, 1, tl.standard._sum_combine)[:, None]"
        mean = fn.emit(1, total.format(t) + f" / {self.domain.reduce_size}", f"{hint}_mean")
        dev = f"{t} - {mean}"
        d = fn.emit(2, f"tl.where({mask}, {dev}, 0)" if mask else dev, f"{hint}_dev")
        v = total.format(f"{d} * {d}")
        if dt != r.dtype:
            v = f"({v}).to({TL[r.dtype]})"
        return fn.emit(1, v, hint, _instr_text(r))

    def _chunk_count(self, index: str, chunk: int, shift: str | None) -> str:
        """The row's columns in cooperative chunk ``index`` of ``chunk`` columns (the last
        chunk's fewer, the chunks past the row's end none); ``shift``: the row's start in its
        word, where the chunks are laid from it (``CoopTiles.window``: the first chunk holds
        ``shift`` columns before the row's)."""
        size = self.domain.reduce_size
        if shift is None:
            return f"tl.minimum(tl.maximum({size} - {index} * {chunk}, 0), {chunk})"
        return (f"tl.maximum(tl.minimum({size} + {shift} - {index} * {chunk}, {chunk}) - "
                f"tl.maximum({shift} - {index} * {chunk}, 0), 0)")

    def _exp(self, fn: _Fn, arg: str, dt: np.dtype, level: int, hint: str) -> str:
        """exp of an expression in ``dt``, lowered as the ``exp`` op is on this target."""
        fn._cur_level, fn._hint = level, hint
        return fn.emit(level, fn.low.lower("exp", [arg], [dt], dt), hint)

    def _row_max(self, fn: _Fn, t: str, dt: np.dtype, hint: str, level: int = 1) -> str:
        """Max along the tile, NaN-propagating as NumPy's max (``level`` 2: inside the loop)."""
        v = f"tl.reduce({t}, 1, tl.standard._elementwise_max)[:, None]"
        if self.target == "cuda":
            self.helpers.add("max")
            return fn.emit(level, f"tl.reduce({t}, 1, _max_nan)[:, None]", hint)
        m = fn.emit(level, v, f"{hint}_nonan")
        return fn.emit(level, f"tl.where({self._anynan(t)}, {NAN}, {m})", hint)

    def _sumexp_tile(self, fn: _Fn, r: Instr, x: str) -> Any:
        """sumexp of a row held in registers: its max, then sum(exp(x - max)) (no re-read).
        (A cooperative chunk's partial: ``_chunk_sumexp``.)"""
        dt = self._acc_dtype(r)
        hint = self.var_name(r.name)
        t = self._masked(fn, r, x, dt)
        m = self._row_max(fn, t, dt, f"{hint}_max")
        self.row_max[r.name] = m
        e = self._exp(fn, f"{t} - {m}", dt, 2, f"{hint}_exp")
        mask = fn.masks[2]
        if mask:
            e = fn.emit(2, f"tl.where({mask}, {e}, 0)", f"{hint}_exp")
        v = f"tl.reduce({e}, 1, tl.standard._sum_combine)[:, None]"
        if dt != r.dtype:
            v = f"({v}).to({TL[r.dtype]})"
        return fn.emit(1, v, hint, _instr_text(r))

    def _online_update(self, fn: _Fn, r: Instr, x: str, dt: np.dtype,
                       acc: tuple[str, ...]) -> None:
        """One tile step of the online softmax sum: the row's running max grows by the tile's
        max and rescales the per-lane running sums (one exp per element, one per row); equal
        values (both -inf or both +inf) scale by 1, not by exp(nan)."""
        m, s = acc
        hint = self.var_name(r.name)
        t = self._masked(fn, r, x, dt)  # masked lanes hold -inf: they add exp(-inf) = 0
        tile_max = self._row_max(fn, t, dt, f"{hint}_tile_max", level=2)
        new = fn.emit(2, f"tl.maximum({m}, {tile_max}, propagate_nan=tl.PropagateNan.ALL)",
                      f"{hint}_max")
        scale = self._exp(fn, f"{m} - {new}", dt, 2, f"{hint}_scale")
        term = self._exp(fn, f"{t} - {new}", dt, 2, f"{hint}_term")
        fn.body.append(f"{s} = {s} * tl.where({m} == {new}, 1, {scale}) + "
                       f"tl.where({t} == {new}, 1, {term})")
        fn.body.append(f"{m} = {new}")

    def _online_reduce(self, fn: _Fn, r: Instr, parts: tuple[str, ...], partial: bool,
                       shared_max: bool) -> Any:
        """Combine (max, sum) pairs along the tile: ``M = max(m)``, ``S = sum(s * exp(m - M))``
        (``shared_max``: a loop's accumulators, whose ``m`` is already the row's max). A row
        whose max is infinite has exp(inf - inf) = NaN in NumPy's composite: NaN too."""
        m, s = parts
        dt = self._acc_dtype(r)
        hint = ("part_" if partial else "") + self.var_name(r.name)
        if shared_max:
            big, weighted = m, s
        else:
            big = self._row_max(fn, m, dt, f"{hint}_max")
            w = self._exp(fn, f"{m} - {big}", dt, 2, f"{hint}_w")
            weighted = f"{s} * tl.where({m} == {big}, 1, {w})"
        total = fn.emit(1, f"tl.reduce({weighted}, 1, tl.standard._sum_combine)[:, None]",
                        f"{hint}_sum", _instr_text(r) + (" (partial)" if partial else ""))
        if partial:
            return big, total
        self.row_max[r.name] = big  # (a max of the same operand reuses it)
        v = fn.emit(1, f"tl.where(({big} == INF) | ({big} == -INF), {NAN}, {total})", hint)
        return v if dt == r.dtype else fn.emit(1, f"{v}.to({TL[r.dtype]})", hint)

    def _anynan(self, t: str) -> str:
        return f"tl.reduce(({t} != {t}).to(tl.int8), 1, tl.standard._elementwise_max)[:, None] > 0"

    def _reduce_tile(self, fn: _Fn, r: Instr, x: str | None, acc: tuple[str, ...] | None,
                     partial: bool = False, src: np.dtype | None = None) -> str:
        """The row value of reduction ``r`` from a tile (persistent) or an accumulator.

        ``partial``: the combined value stays in the accumulator dtype (a split
        reduction's partial); ``src``: dtype of ``x`` when it is not the
        reduction's operand (partials loaded by a split reduction's last program).
        """
        dt = self._acc_dtype(r)
        if r.op == "m2":
            if acc is not None:
                return self._chan_reduce(fn, r, acc, partial)
            assert not partial, "a chunk's m2 partial is _chunk_m2's"
            return self._two_pass_tile(fn, r, x)
        if r.op == "sumexp":
            if acc is not None:
                return self._online_reduce(fn, r, acc, partial, shared_max=True)
            assert not partial, "a chunk's sumexp partial is _chunk_sumexp's"
            return self._sumexp_tile(fn, r, x)
        t = self._masked(fn, r, x, dt, src) if acc is None else acc[0]
        op = r.op
        comment = _instr_text(r) + (" (partial)" if partial else "")
        hint = ("part_" if partial else "") + self.var_name(r.name)
        out_dt = dt if partial else r.dtype
        level = 1
        if op == "sum":
            v = f"tl.reduce({t}, 1, tl.standard._sum_combine)[:, None]"
        elif op == "prod":
            v = f"tl.reduce({t}, 1, _mul)[:, None]"
            self.need_mul = True
        elif op in ("any", "all"):
            fname = "max" if op == "any" else "min"
            v = f"tl.reduce({t}, 1, tl.standard._elementwise_{fname})[:, None]"
            if not partial:
                v += " != 0"
        elif op in ("max", "min"):
            v = f"tl.reduce({t}, 1, tl.standard._elementwise_{op})[:, None]"
            if dt.kind == "f" and self.target == "cuda":
                # one pass: a combine that propagates NaN (the interpreter runs custom
                # combines element by element, so it gets the two-reduction form below)
                v = f"tl.reduce({t}, 1, _{op}_nan)[:, None]"
                self.helpers.add(op)
            elif dt.kind == "f":
                m = fn.emit(level, v, f"{hint}_nonan")
                v = f"tl.where({self._anynan(t)}, {NAN}, {m})"
        else:
            m = fn.emit(level, f"tl.reduce({t}, 1, tl.standard._elementwise_{op[3:]})[:, None]",
                        f"{hint}_best")
            if dt.kind == "f":
                m = fn.emit(level, f"tl.where({self._anynan(t)}, {NAN}, {m})", f"{hint}_best")
                hit = f"({t} == {m}) | (({t} != {t}) & ({m} != {m}))"
            else:
                hit = f"{t} == {m}"
            mask = fn.masks[2] if acc is None else None
            if mask:
                # a lane outside the tile holds the identity, which ties a row of infinities
                # (or of the dtype's extreme), and a row window's lanes before the row have
                # negative columns: only the row's own lanes give an index
                hit = f"{mask} & ({hit})"
            idx = acc[1] if acc is not None else "cols"
            v = (f"tl.reduce(tl.where({hit}, {idx}, {INT32_MAX}), 1, "
                 f"tl.standard._elementwise_min)[:, None].to(tl.int64)")
            if partial:  # a chunk's (best value, its first index), for the combine
                return m, fn.emit(level, v, f"{hint}_index", comment)
        if out_dt != dt and op not in ("any", "all", "argmax", "argmin"):
            v = f"({v}).to({TL[out_dt]})"
        return fn.emit(level, v, hint, comment)


def emitter_class(kernel: Kernel) -> type[_Emitter]:
    """The emitter of ``kernel``'s kind: each kind is a module of its own over this one."""
    # (imported here: those modules build on this one)
    from .cooperative_rows import CooperativeRowEmitter
    from .gemm import GemmEmitter
    from .pointwise import PointwiseEmitter
    from .split_reduction import SplitReductionEmitter
    if any(i.op == "matmul" for i in kernel.body):
        return GemmEmitter
    domain = region_domain(kernel)
    if not domain.reduced:
        return PointwiseEmitter
    if kernel.kind == SPLIT_REDUCTION:
        return SplitReductionEmitter
    if domain.kind == "inner_reduction":
        return CooperativeRowEmitter  # (rows that fit a program run as ``reduction``)
    return _Emitter


def emit_kernel(kernel: Kernel, strides: list[tuple[int, ...]] | None = None,
                target: str = "cuda", tiles: Any = None, origin: str | None = None
                ) -> EmittedKernel:
    """Triton source and launches for one Kernel region.

    ``strides`` gives, per parameter, the element strides of the buffer that
    will be bound to it (default: contiguous); they are specialized into the
    source. ``target`` is ``cuda`` (libdevice math) or ``interpret``.
    ``tiles``: one of the ``candidates`` of the kernel's emission (default: the
    heuristic's choice); a GEMM's and a split reduction's are written into the
    kernel's attributes (its tiles, ``split``), as a user would. ``origin``:
    where the tiles came from, for the header's last ``# tiling:`` line.
    """
    if strides is None:
        strides = [contiguous_strides(p.type.shape) for p in kernel.params]
    if isinstance(tiles, GemmConfig):
        kernel, tiles = replace(kernel, attrs={**kernel.attrs, **tiles.attrs()}), None
    elif isinstance(tiles, SplitTiles):
        kernel = replace(kernel, attrs={**kernel.attrs, "split": tiles.split})
    em = emitter_class(kernel)(kernel, list(strides), target, tiles, origin)
    em.need_mul = False
    em.helpers = set()
    em._bm = em._bn = 0
    emitted = em.emit()
    if em.auto_tma and em.k_pointer_loads:
        # a persistent GEMM of pointer loads ran at half speed (gemm.py, _default_programs),
        # and TMA was chosen for its loads: an operand tile that is not a TMA box keeps
        # pointer loads, one program per tile (persistent still in the test mode
        # GEMM_PERSISTENT="always")
        plain = {**kernel.attrs, "tma": 0, "programs": em.programs_without_tma}
        return emit_kernel(replace(kernel, attrs=plain), strides, target, None, origin)
    helper = ""
    for op in sorted(em.helpers):
        fname = "maximum" if op == "max" else "minimum"
        helper += (f"\n@triton.jit\ndef _{op}_nan(a, b):\n"
                   f"    return tl.{fname}(a, b, propagate_nan=tl.PropagateNan.ALL)\n\n")
    if em.need_mul:
        helper += "\n@triton.jit\ndef _mul(a, b):\n    return a * b\n\n"

    if helper:
        marker = 'INF = tl.constexpr(float("inf"))\n'
        emitted.source = emitted.source.replace(marker, marker + helper, 1)
    return emitted


def describe_tiling(kernel: Kernel, target: str = "cuda", tiles: Any = None,
                    origin: str | None = None) -> list[str]:
    """How ``kernel`` is tiled on ``target`` (contiguous buffers) and why, one line per launch,
    then where the tiles came from (``emit_kernel``'s ``tiles`` and ``origin``)."""
    return [line.strip() for line in emit_kernel(kernel, None, target, tiles, origin).tiling]


def kernel_sources(program: Any, target: str = "cuda") -> list[EmittedKernel]:
    """Emitted kernels of every Kernel block of a fused Program (contiguous buffers)."""
    return [emit_kernel(k, None, target) for k in program.kernels]

