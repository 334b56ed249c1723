"""Values at coordinates: how every kernel kind writes one IR value as Triton statements.

A kernel function under construction is a ``_Fn``: its lines, the names it has used, and
the values it has computed, memoized by the coordinates they were computed at. Values are
evaluated *at coordinates*: a parameter is loaded at ``sum(coord_i * stride_i)``; a view
maps the coordinates backward (permute reorders them, slice is ``start + step * i``,
expand gives 0, reshape goes through the flat index), so views cost index arithmetic
only. When a flat index reaches a parameter whose strides are contiguous, the offset *is*
the flat index: no div/mod and vectorizable loads; consecutive axes that a buffer lays out
contiguously read through one coordinate (``_Fn.offset_terms``). Row-dependent values
(reductions and what is computed from them at the kept shape) are computed once per row
block (``[BLOCK_M, 1]`` tensors) and broadcast over the tile. Each op becomes one
statement through ``lowering.Lowering``; the kernel kinds (``triton_emitter`` and the
modules over it) decide the tiles, loops and stores around them.

Also here: the identifiers the generated source may use (``sanitize``), and the pruning of
index assignments nothing reads.
"""

from __future__ import annotations

import builtins
import hashlib
import keyword
import math
import re
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..ir.ops import REDUCE
from ..ir.program import Instr, contiguous_strides
from .lowering import BOOL, NAN, SCALAR_ARG, TL, Lowering, float_literal

if TYPE_CHECKING:
    from .triton_emitter import _Emitter


#: Longest identifier the emitter writes: a longer IR name is cut, and a hash of the whole
#: name is appended (so distinct names stay distinct, and file and symbol names stay short).
MAX_IDENTIFIER = 64
#: What the generated module binds or reads at module level: a kernel function named like
#: one of them would rebind it (``def tl(...)`` hides triton.language from the kernel).
_MODULE_NAMES = frozenset({"triton", "tl", "libdevice", "INF", "NAN"})
_RESERVED = _MODULE_NAMES | frozenset(dir(builtins)) | frozenset(keyword.kwlist)


def sanitize(name: str) -> str:
    """A Python identifier made from any name (never trusted as code), at most
    ``MAX_IDENTIFIER`` characters."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", str(name))
    if not s or s[0].isdigit():
        s = "k_" + s
    if len(s) > MAX_IDENTIFIER:
        digest = hashlib.sha256(s.encode()).hexdigest()[:12]
        s = f"{s[:MAX_IDENTIFIER - 13]}_{digest}"
    return s


def function_name(name: str) -> str:
    """The name of a region's generated function: its IR name made an identifier, with a
    ``k_`` prefix when that would be a keyword, a builtin, a name the module itself uses
    (``tl``, ``triton``, ``INF``...) or start with ``_`` (the helpers' names)."""
    s = sanitize(name)
    if s in _RESERVED or s.startswith("_"):
        s = sanitize("k_" + s)
    return s


def _distinct(names: list[str]) -> list[str]:
    """``names`` with a suffix added where one repeats an earlier one."""
    seen: set[str] = set()
    out = []
    for base in names:
        name, i = base, 1
        while name in seen:
            name = f"{base}_{i}"
            i += 1
        seen.add(name)
        out.append(name)
    return out


def _as_int64(value: int) -> int:
    """The int64 with the low 64 bits of ``value`` (itself when it is in the int64 range)."""
    return (int(value) + 2**63) % 2**64 - 2**63


def _same_strides(strides: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a buffer of ``shape`` with ``strides`` is C-contiguous (size-1 dims ignored)."""
    return all(s == c for s, c, d in zip(strides, contiguous_strides(shape), shape) if d != 1)


def joint_mask(lines: list[str], masks: list[str | None], name: str = "mask") -> str | None:
    """A tile's mask from the masks of its two axes (either may be None): None, the one
    given, or both joined as ``name`` (its assignment appended to ``lines``)."""
    given = [m for m in masks if m]
    if len(given) == 2:
        lines.append(f"{name} = {given[0]} & {given[1]}")
        return name
    return given[0] if given else None


@dataclass
class Coords:
    """Coordinates of a value: a flat (row-major) index and/or one index per dim."""

    shape: tuple[int, ...]
    flat: str | None = None
    dims: tuple[str, ...] | None = None

    def key(self) -> tuple[Any, ...]:
        """Hashable identity of the coordinates, for memoizing values computed at them."""
        return (self.shape, self.flat) if self.flat is not None else (self.shape, self.dims)


def _instr_text(instr: Instr) -> str:
    try:
        from ..ir.printer import _instr
        text = _instr(instr)
    except Exception:  # noqa: BLE001  (the comment is cosmetic; never fail codegen on it)
        text = f"%{instr.name} = {instr.op} " + ", ".join("%" + a for a in instr.args)
        text += f" : {instr.type}"
    return text.replace("\n", " ")


#: ``indent``, ``name``, ``value`` of a line assigning one name
_ASSIGNMENT = re.compile(r"(\s*)(\w+) = (.*)")
#: Calls an index expression may make (``_Fn.prune_unread_indices``): none reads memory or has
#: an effect, so an assignment of one that nothing reads can go.
INDEX_CALLS = frozenset({"tl.arange", "tl.full", "tl.minimum", "tl.maximum", "tl.where",
                         "tl.multiple_of"})


def _index_expr(rhs: str) -> bool:
    """Whether the right-hand side ``rhs`` (its comment aside) calls only ``INDEX_CALLS`` and
    casts."""
    code = rhs.partition("  # ")[0]
    return all(call in INDEX_CALLS or call.endswith(".to")
               for call in re.findall(r"([\w.]+)\(", code))


def _only_statement(lines: list[str], k: int, indent: int) -> bool:
    """Whether ``lines[k]`` (indented ``indent``) is the only statement of its block."""
    opens = k > 0 and lines[k - 1].rstrip().split("  #")[0].endswith(":")
    after = next((ln for ln in lines[k + 1:] if ln.strip()), "")
    return opens and len(after) - len(after.lstrip()) < indent


class _Fn:
    """Builds the body of one Triton function."""

    def __init__(self, em: _Emitter) -> None:
        self.em = em
        self.out: list[str] = []          # straight code (and pre-loop code)
        self.body: list[str] | None = None  # current loop body
        self.level: dict[str, int] = {}
        self.memo_row: dict[Any, str] = {}
        self.memo_tile: dict[Any, str] = {}
        self.rowvals: dict[str, str] = {}
        #: a coordinate that ``unravel`` computed -> (the flat index, its shape, the axis);
        #: ``offset_terms`` folds runs of them back into one term of the flat index
        self.unraveled: dict[str, tuple[str, tuple[int, ...], int]] = {}
        # function arguments and module-level names are never taken by a temporary
        self.used: set[str] = {*em.ptr_name, *em.out_name, *_RESERVED}
        self.masks: dict[int, str | None] = {0: None, 1: None, 2: None}
        #: the reduced coordinates' mask of the open tile ("col_mask"), or None
        self.col_mask: str | None = None
        #: a 2-D tile's index along each of its axes -> that axis's mask (None: unmasked), so a
        #: load along one axis alone is a row or column of the tile (``load``)
        self.axis_masks: dict[str, str | None] = {}
        #: level 1 holds a row's values (a row kernel's rows, a GEMM epilogue's rows and batch
        #: index), which vary along the tile's rows, rather than a program's constants
        self.rows_vary = False
        self.scalar_vars: dict[str, str] = {}  # scalar param -> its value in this function
        #: the open tile's flat index when it is a row window (``_Emitter._open_window``):
        #: loads at that index take the whole-word mask ``in_words``, every other load and
        #: store the tile's exact mask
        self.window: str | None = None
        self.low = Lowering(em.target, self._tmp, self._raw)
        self._cur_level = 0
        self._indent = 0

    # -- statements --------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        base = sanitize(hint)
        name, i = base, 1
        while name in self.used:
            name = f"{base}_{i}"
            i += 1
        self.used.add(name)
        return name

    def lvl(self, *exprs: str) -> int:
        return max([self.level.get(e, 0) for e in exprs] + [0])

    def emit(self, level: int, expr: str, hint: str, comment: str = "") -> str:
        var = self.fresh(hint)
        line = f"{var} = {expr}" + (f"  # {comment}" if comment else "")
        self._target(level).append(line)
        self.level[var] = level
        return var

    def _target(self, level: int) -> list[str]:
        return self.body if (level >= 2 and self.body is not None) else self.out

    def _tmp(self, expr: str, hint: str) -> str:
        return self.emit(self._cur_level, expr, f"{self._hint}_{hint}")

    def _raw(self, lines: list[str]) -> None:
        self._target(self._cur_level).extend(lines)

    # -- coordinates ---------------------------------------------------------------
    def unravel(self, flat: str, shape: tuple[int, ...]) -> tuple[str, ...]:
        key = ("unravel", flat, shape)
        memo = self.memo_tile if self.lvl(flat) >= 2 else self.memo_row
        if key in memo:
            return memo[key]
        dims: list[str] = []
        strides = contiguous_strides(shape)
        first = True
        for d, s in zip(shape, strides):
            if d == 1:
                dims.append("0")
                continue
            expr = flat if s == 1 else f"{flat} // {s}"
            if not first:
                expr = f"({expr}) % {d}" if s != 1 else f"{flat} % {d}"
            first = False
            if expr == flat:
                dims.append(flat)
                continue
            var = self.emit(self.lvl(flat), expr, "i")
            self.unraveled[var] = (flat, shape, len(dims))
            dims.append(var)
        memo[key] = tuple(dims)
        return tuple(dims)

    def prune_unread_indices(self) -> None:
        """Drop the assignments of index values that no statement reads: coordinates every
        offset of which reads a merged coordinate instead (``offset_terms``), a GEMM's K
        indices where TMA loads its tiles. Only names assigned once, from arithmetic and
        ``INDEX_CALLS`` (no load, no atomic, no call of a generated function), and never the
        only statement of a block; until none is left (one may have read another)."""
        lines = self.source
        while True:
            reads = Counter(re.findall(r"\b\w+\b", "\n".join(lines)))
            keep = [line for k, line in enumerate(lines)
                    if not ((m := _ASSIGNMENT.match(line)) and reads[m.group(2)] == 1
                            and _index_expr(m.group(3))
                            and not _only_statement(lines, k, len(m.group(1))))]
            if len(keep) == len(lines):
                break
            lines = keep
        self.source = lines

    def offset_terms(self, dims: tuple[str, ...], strides: tuple[int, ...],
                     shape: tuple[int, ...]) -> list[tuple[str, int]]:
        """(coordinate, stride) of each axis an offset uses, where consecutive axes that one
        ``unravel`` produced and that the buffer lays out contiguously (a stride equal to the
        next used axis's stride times that coordinate's extent), in the unravel's own order with no axis of
        it left out between them, are one coordinate of their flat index.

        Summing ``((f // c_p) % n_p) * c_p / c_b`` over such a run ``p = a..b`` of the
        unravel of ``f`` is ``(f // c_b) % (n_a * c_a / c_b)`` (no ``%`` when ``a`` is the
        unravel's first axis, which has none): a sum over axes (0, 1, 2) of a 4-D array reads
        ``cols * 3 + run`` where it took three divisions and three remainders per element."""
        used = [(d, s) for d, s, n in zip(dims, strides, shape) if n != 1 and s != 0 and d != "0"]
        terms: list[tuple[str, int]] = []
        i = 0
        while i < len(used):
            d, s = used[i]
            src = self.unraveled.get(d)
            j = i
            while src is not None and j + 1 < len(used):
                nxt = self.unraveled.get(used[j + 1][0])
                at = self.unraveled[used[j][0]][2]
                # (in the unravel's order, no axis of it left out between (a stride 0), and
                # the coordinate's extent the unravel's: the buffer's axis may be longer, a
                # slice of it read)
                if nxt is None or nxt[:2] != src[:2] or nxt[2] <= at \
                        or any(e != 1 for e in src[1][at + 1:nxt[2]]) \
                        or used[j][1] != used[j + 1][1] * nxt[1][nxt[2]]:
                    break
                j += 1
            if j == i:
                terms.append((d, s))
                i += 1
                continue
            flat, ushape, first_axis = src  # type: ignore[misc]
            last_axis = self.unraveled[used[j][0]][2]
            inner = math.prod(ushape[last_axis + 1:])  # (c_b: the flat's stride of the last)
            extent = math.prod(ushape[first_axis:last_axis + 1])
            is_first = all(e == 1 for e in ushape[:first_axis])  # (its coordinate has no %)
            expr = flat if inner == 1 else f"{flat} // {inner}"
            if not is_first:
                expr = f"({expr}) % {extent}" if inner != 1 else f"{flat} % {extent}"
            coord = flat
            if expr != flat:
                key = ("merged", flat, inner, extent, is_first)
                memo = self.memo_tile if self.lvl(flat) >= 2 else self.memo_row
                if key not in memo:
                    memo[key] = self.emit(self.lvl(flat), expr, "i")
                coord = memo[key]
            terms.append((coord, used[j][1]))
            i = j + 1
        return terms

    def ravel(self, dims: tuple[str, ...], shape: tuple[int, ...]) -> str:
        terms = [d if s == 1 else f"{d} * {s}"
                 for d, s, n in zip(dims, contiguous_strides(shape), shape) if n != 1 and d != "0"]
        if not terms:
            return "0"
        if len(terms) == 1 and terms[0] in self.level:
            return terms[0]
        key = ("ravel", dims, shape)
        # the level of the coordinates the index uses: a tile coordinate along a size-1 axis
        # (a GEMM of M = N = 1) leaves it a scalar, which a load must not give the tile's mask
        # (``fusejit fuzz --backend interpret --seed 5 --products``, program 213)
        level = self.lvl(*(d for d, n in zip(dims, shape) if n != 1 and d != "0"))
        memo = self.memo_tile if level >= 2 else self.memo_row
        if key not in memo:
            memo[key] = self.emit(level, " + ".join(terms), "flat")
        return memo[key]

    def dims_of(self, c: Coords) -> tuple[str, ...]:
        if c.dims is None:
            c.dims = self.unravel(c.flat, c.shape) if c.shape else ()
        return c.dims

    def flat_of(self, c: Coords) -> str:
        if c.flat is None:
            c.flat = self.ravel(c.dims, c.shape)
        return c.flat

    # -- values ----------------------------------------------------------------------
    # ``value``, ``row_value`` and ``compute`` evaluate an operand before the instruction that
    # reads it. Written as plain recursion, a chain of a few hundred instructions (a long
    # region, or a user's kernel block) would overflow Python's stack, so each is a generator
    # that yields the evaluation it needs next; ``_drive`` runs them with an explicit stack,
    # in exactly the order the recursion would (the generated source is the same).
    @staticmethod
    def _drive(gen: Iterator[Any]) -> str:
        """Run a generator of ``_value``/``_row_value``/``_compute``: each one it yields is
        run to its result, which is sent back into it (depth-first, no Python recursion)."""
        stack = [gen]
        result: Any = None
        while stack:
            try:
                need = stack[-1].send(result)
            except StopIteration as done:
                stack.pop()
                result = done.value
                continue
            stack.append(need)
            result = None
        return result

    def value(self, name: str, coords: Coords) -> str:
        """The variable holding value ``name`` at ``coords`` (computed once, then memoized)."""
        return self._drive(self._value(name, coords))

    def row_value(self, name: str) -> str:
        """A value at the kept (or keepdims) shape: one per row of the block."""
        return self._drive(self._row_value(name))

    def compute(self, name: str, coords: Coords) -> str:
        """Emit the statements computing ``name`` at ``coords``; returns the variable."""
        return self._drive(self._compute(name, coords))

    def _value(self, name: str, coords: Coords) -> Generator[Any, str, str]:
        em = self.em
        if name in self.rowvals:
            return self.rowvals[name]
        shape = em.types[name].shape
        if name in em.domain.row_dependent and em.is_row_level(name, shape):
            # a reduction's result exists only at its own row: the coordinates are canonical
            return (yield self._row_value(name))
        key = (name, coords.key())
        for memo in (self.memo_tile, self.memo_row):
            if key in memo:
                return memo[key]
        var = yield self._compute(name, coords)
        memo = self.memo_tile if self.lvl(var) >= 2 else self.memo_row
        memo[key] = var
        return var

    def _row_value(self, name: str) -> Generator[Any, str, str]:
        if name in self.rowvals:
            return self.rowvals[name]
        instr = self.em.defs.get(name)
        if instr is not None and instr.op in REDUCE:
            raise AssertionError(f"reduction %{name} used before its stage was emitted")
        var = yield self._compute(name, self.em.row_coords(self, self.em.types[name].shape))
        self.rowvals[name] = var
        return var

    def _compute(self, name: str, coords: Coords) -> Generator[Any, str, str]:
        em = self.em
        if name in em.param_index:
            if name in em.scalars:
                return self.scalar(name)
            return self.load(name, coords)
        instr = em.defs[name]
        op = instr.op
        if op == "reshape":
            src = instr.args[0]
            sshape = em.types[src].shape
            squeezed = tuple(d for d in sshape if d != 1)
            if coords.dims is not None and squeezed == tuple(d for d in instr.shape if d != 1):
                kept = iter([c for c, d in zip(coords.dims, instr.shape) if d != 1])
                dims = tuple("0" if d == 1 else next(kept) for d in sshape)
                return (yield self._value(src, Coords(sshape, coords.flat, dims)))
            return (yield self._value(src, Coords(sshape, self.flat_of(coords))))
        if op == "permute":
            perm = instr.attrs["perm"]
            dims = self.dims_of(coords)
            src_dims = [""] * len(perm)
            for i, p in enumerate(perm):
                src_dims[p] = dims[i]
            src = instr.args[0]
            return (yield self._value(src, Coords(em.types[src].shape, None, tuple(src_dims))))
        if op == "expand":
            src = instr.args[0]
            sshape = em.types[src].shape
            dims = self.dims_of(coords)
            lead = len(dims) - len(sshape)
            src_dims = tuple("0" if s == 1 else d for d, s in zip(dims[lead:], sshape))
            return (yield self._value(src, Coords(sshape, None, src_dims)))
        if op == "slice":
            src = instr.args[0]
            dims = self.dims_of(coords)
            out = []
            for d, a, s in zip(dims, instr.attrs["start"], instr.attrs["step"]):
                if d == "0":
                    out.append(str(int(a)))
                elif a == 0 and s == 1:
                    out.append(d)
                else:
                    expr = d if s == 1 else f"{d} * {s}"
                    expr = f"{a} + {expr}" if a else expr
                    out.append(self.emit(self.lvl(d), expr, "i"))
            return (yield self._value(src, Coords(em.types[src].shape, None, tuple(out))))
        comment = _instr_text(instr)
        hint = em.var_name(name)
        if op == "const":
            v = instr.attrs["value"]
            dt = instr.dtype
            if dt.kind == "f":
                lit = float_literal(v)
            elif dt == BOOL:
                lit = "1" if v else "0"
            else:
                lit = str(int(v))
            return self.emit(0, f"tl.full([], {lit}, {TL[dt]})", hint, comment)
        if op == "iota":
            d = self.dims_of(coords)[0] if instr.shape[0] != 1 else "0"
            dt = instr.dtype
            wide = "tl.float64" if dt.kind == "f" else "tl.int64"
            start, step = instr.attrs["start"], instr.attrs["step"]
            # int64 arithmetic wraps like the result's: a uint64 start or step past the int64
            # range is written as the int64 of the same bits
            s = float_literal(start) if dt.kind == "f" else str(_as_int64(start))
            t = float_literal(step) if dt.kind == "f" else str(_as_int64(step))
            # INF and NAN are constexprs, which `+` with a tensor turns into a constexpr
            # again (no .to()): give a non-finite start or step as a tensor
            s, t = (f"tl.full([], {v}, tl.float64)" if v.endswith("INF") or v == NAN else v
                    for v in (s, t))
            # a coordinate fixed by a view is a literal: a Python int has no .to()
            base = f"tl.full([], {d}, tl.int64)" if d.lstrip("-").isdigit() else f"{d}.to(tl.int64)"
            expr = f"({s} + {base}.to({wide}) * {t}).to({TL[dt]})"
            return self.emit(self.lvl(d), expr, hint, comment)
        if op in REDUCE and not em.domain.reduced:
            # a reduction over no axes is the identity (argmax/argmin: index 0)
            x = yield self._value(instr.args[0], coords)
            src = em.types[instr.args[0]].dtype
            if op in ("argmax", "argmin"):
                expr = f"tl.full([], 0, tl.int64) + 0 * {self.flat_of(coords)}"
            elif op == "m2":  # one element: its squared deviation from itself (NaN for inf)
                expr = f"({x} - {x}) * ({x} - {x})"
            elif op == "sumexp":  # one element: exp(x - x), NaN for inf and NaN
                expr = f"tl.where({x} == {x} + 1, {NAN}, 1.0) + 0 * {x}"
            else:
                expr = self.low.cast(x, src, instr.dtype)
            return self.emit(max(self.lvl(x), self.lvl(self.flat_of(coords))), expr, hint, comment)
        if op in REDUCE:
            raise AssertionError(f"reduction %{name} evaluated off its canonical coordinates")
        args = []
        for a in instr.args:
            args.append((yield self._value(a, coords)))
        dtypes = [em.types[a].dtype for a in instr.args]
        level = self.lvl(*args)
        self._cur_level, self._hint = level, hint
        if op == "cast":
            expr = self.low.cast(args[0], dtypes[0], instr.dtype)
        else:
            expr = self.low.lower(op, args, dtypes, instr.dtype)
        if level <= 1 and instr.dtype == BOOL:  # (level 1 is a scalar in some kernels)
            expr = self._interpreter_safe_scalar_bool(expr)
        return self.emit(level, expr, hint, comment)

    def scalar(self, name: str) -> str:
        """A scalar param's value (an argument of the function, converted once if it travels
        as another dtype): the same at every coordinate."""
        em = self.em
        found = self.scalar_vars.get(name)
        if found is not None:
            return found
        arg = em.ptr_name[em.param_index[name]]
        dtype = em.types[name].dtype
        expr = SCALAR_ARG[dtype][2]
        if expr is None:
            var = arg
            self.level[var] = 0
        else:
            converted = expr.format(arg)
            if dtype == BOOL:
                converted = self._interpreter_safe_scalar_bool(converted)
            var = self.emit(0, converted, em.var_name(name), f"scalar %{name}")
        self.scalar_vars[name] = var
        return var

    def _interpreter_safe_scalar_bool(self, expr: str) -> str:
        # Triton's interpreter gives a scalar comparison a type that `&`/`|` with a block
        # then refuse; a round trip through int8 gives it a proper bool there. (Per-program
        # values are scalars too in a tiled pointwise kernel's other axes: a cast to bool of
        # exp of a broadcast bool, and'ed with a transposed input, failed so: fuzz seed 9620.)
        return f"({expr}).to(tl.int8) != 0" if self.em.target == "interpret" else expr

    def _one_tile_axis(self, exprs: list[str]) -> str | None:
        """The one tile axis index (of ``axis_masks``) that ``exprs`` depend on, when every name
        in them is that index or a value the same over the tile (level 0, or 1 unless
        ``rows_vary``); else None."""
        axes = set()
        for name in re.findall(r"[A-Za-z_]\w*", " ".join(exprs)):
            if name in self.axis_masks:
                axes.add(name)
            elif self.level.get(name, 2) >= (1 if self.rows_vary else 2):
                return None  # (a tile value, or a name whose dependence is not known here)
        return axes.pop() if len(axes) == 1 else None

    def load(self, name: str, coords: Coords) -> str:
        em = self.em
        i = em.param_index[name]
        shape = em.types[name].shape
        strides = em.strides[i]
        if coords.flat is not None and _same_strides(strides, shape):
            off = coords.flat if any(d != 1 for d in shape) else "0"
        else:
            dims = self.dims_of(coords) if shape else ()
            terms, used = [], []
            for d, s in self.offset_terms(dims, strides, shape):
                terms.append(d if s == 1 else f"{d} * {s}")
                used.append(d)
            off = " + ".join(terms) if terms else "0"
            if len(terms) > 1 or (terms and terms[0] not in self.level):
                # the level of the coordinates the offset really uses: a view that fixes them
                # (x[0, 1, :0]) reads one element, a scalar load that a tile mask must not touch
                off = self.emit(self.lvl(*used), off, f"off_{em.var_name(name)}")
        level = self.lvl(off)
        ptr = em.ptr_name[i]
        addr = ptr if off == "0" else f"{ptr} + {off}"
        mask = self.masks.get(level)
        if self.window is not None and off == self.window and shape == em.domain.shape:
            # (a buffer of the domain's layout, read from its rows' 16-byte words: the load
            # covers whole words so that it moves 16 bytes at a time; values outside the row
            # are loaded, never used: reductions and stores take the exact mask)
            mask = "in_words"
            em.windowed.add(i)
        if level == 2 and self.axis_masks and coords.flat is None:
            axis = self._one_tile_axis(used)
            if axis is not None:
                # an input broadcast along the tile's other axis (a bias along the last): one
                # row (or column) of loads under that axis's mask, where the tile's mask would
                # repeat the load at every point of the other axis
                mask = self.axis_masks[axis]
        m = f", mask={mask}, other=0" if (mask and level > 0) else ""
        expr = f"tl.load({addr}{m})"
        if em.types[name].dtype == BOOL:
            expr += " != 0"
            if level == 0:
                expr = self._interpreter_safe_scalar_bool(expr)
        return self.emit(level, expr, em.var_name(name), f"load %{name}")
