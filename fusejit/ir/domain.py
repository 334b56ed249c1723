"""The iteration domain of a kernel region, and whether a region can be one kernel.

Both the fuser (to decide what may join a region) and the emitter (to index
every value) rely on this one definition, and the verifier uses it to reject
user-edited regions that cannot run as one kernel.

A region has a domain shape ``D`` and reduced axes ``R`` (empty for a
pointwise region). Every reduction in it reduces a value of shape ``D`` over
exactly ``R``. Values are of two sorts:

* *free* values depend on no reduction of the region (only on params,
  constants and iota through elementwise ops, casts and views). They can be
  evaluated at any coordinates, so views of them (transpose, slices, any
  reshape) are index arithmetic: the emitter recomputes them where needed.
* *row-dependent* values are reductions and everything computed from them.
  They exist only at their canonical coordinates: shape ``D`` or ``D`` with
  some dims 1 (indexed by the domain coordinates, 0 along size-1 dims), or the
  kept shape ``D`` without ``R`` (indexed by the kept coordinates). Views that
  would move them (permute, slice, other reshapes) need a materialized buffer.

Region outputs have shape ``D``, or, in a reduction region, the kept shape or
its keepdims form.

A *gemm* region holds one ``matmul``: its domain ``D`` is the product's shape
``[..., M, N]`` (the contraction over K happens inside the op). Free values
feed the operands (the *prologue*, evaluated at operand coordinates while the
tiles are loaded); values computed from the product (the *epilogue*) stay at
``D`` (or, without reductions, a reshape of ``D`` that only adds or drops
size-1 dims); reductions reduce a value of shape ``D`` over its last axis
(``R`` = that axis), with their results row-dependent as above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .ops import REDUCE
from .program import Instr, Kernel, contiguous_strides

POINTWISE = "pointwise"
INNER_REDUCTION = "inner_reduction"
OUTER_REDUCTION = "outer_reduction"
SPLIT_REDUCTION = "split_reduction"
GEMM = "gemm"
KINDS = (POINTWISE, INNER_REDUCTION, OUTER_REDUCTION, SPLIT_REDUCTION, GEMM)

#: A reduction's kept axes after its last reduced axis, when their points number fewer than
#: this, are a *short inner kept run* (``Domain.short_inner_kept``): a 128-byte line of
#: float32 holds 32 of them.
SHORT_INNER_KEPT_MAX = 32
#: ... when each output combines at least this many elements (a tile of one run's points
#: across and this many reduced ones fills a program).
SHORT_INNER_MIN_REDUCED = 256


class RegionError(Exception):
    """A region that cannot be one kernel; ``instr`` is where the rule broke (or None)."""

    def __init__(self, reason: str, instr: Instr | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.instr = instr


@dataclass(frozen=True)
class Domain:
    """Iteration domain of a region: shape ``D``, reduced axes ``R``, and its kind."""

    shape: tuple[int, ...]
    reduced: tuple[int, ...]
    kind: str
    row_dependent: frozenset[str]
    #: gemm regions: the ``matmul`` instruction's name, and every value computed from it
    matmul: str | None = None
    product: frozenset[str] = frozenset()

    @property
    def kept(self) -> tuple[int, ...]:
        """Axes of ``D`` that are not reduced."""
        return tuple(i for i in range(len(self.shape)) if i not in self.reduced)

    @property
    def kept_shape(self) -> tuple[int, ...]:
        """``D`` without the reduced axes: the shape of a reduction's result."""
        return tuple(self.shape[i] for i in self.kept)

    @property
    def keepdims_shape(self) -> tuple[int, ...]:
        """``D`` with the reduced axes set to 1: a reduction's result with ``keepdims``."""
        return tuple(1 if i in self.reduced else d for i, d in enumerate(self.shape))

    @property
    def rows(self) -> int:
        """Number of output points (product of the kept dims)."""
        n = 1
        for i in self.kept:
            n *= self.shape[i]
        return n

    @property
    def reduce_size(self) -> int:
        """Number of elements each reduction combines (product of the reduced dims)."""
        n = 1
        for i in self.reduced:
            n *= self.shape[i]
        return n

    @property
    def short_inner_kept(self) -> int:
        """The points of the kept axes after the last reduced one when they are a short run
        (2 to ``SHORT_INNER_KEPT_MAX - 1``) under a long reduction (at least
        ``SHORT_INNER_MIN_REDUCED`` elements per output), else 0.

        E.g. ``min(axis=1)`` of ``[374, 13355, 3]`` (3), channel sums of an NHWC image
        (``C``). Such a reduction reads runs of a few contiguous elements, one per reduced
        point: a tile must hold one run (padded to a power of two) across and reduced
        points along, or its loads scatter over many rows (``codegen.triton_emitter``).
        """
        if self.kind != OUTER_REDUCTION or not self.reduced:
            return 0
        n = 1
        for d in self.shape[max(self.reduced) + 1:]:
            n *= d
        short = 2 <= n < SHORT_INNER_KEPT_MAX and self.reduce_size >= SHORT_INNER_MIN_REDUCED
        return n if short else 0

    def is_domain_like(self, shape: tuple[int, ...]) -> bool:
        """``D``, or ``D`` with some dims 1: indexed by the domain coordinates."""
        return len(shape) == len(self.shape) and all(
            s == d or s == 1 for s, d in zip(shape, self.shape))


def reduction_kind(shape: tuple[int, ...], reduced: tuple[int, ...]) -> str:
    """Inner when the reduced axes are the trailing ones (contiguous rows), else outer."""
    if not reduced:
        return POINTWISE
    trailing = tuple(range(len(shape) - len(reduced), len(shape)))
    return INNER_REDUCTION if tuple(sorted(reduced)) == trailing else OUTER_REDUCTION


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its size-1 dims."""
    return tuple(d for d in shape if d != 1)


def region_domain(kernel: Kernel) -> Domain:
    """The domain of a region, or RegionError saying why it cannot be one kernel."""
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    matmuls = [i for i in kernel.body if i.op == "matmul"]
    if matmuls:
        return _gemm_domain(kernel, matmuls, types)
    reductions = [i for i in kernel.body if i.op in REDUCE]
    if reductions:
        first = reductions[0]
        shape = types[first.args[0]].shape
        reduced = tuple(first.attrs["axes"])
        for r in reductions[1:]:
            other = types[r.args[0]].shape, tuple(r.attrs["axes"])
            if other != (shape, reduced):
                raise RegionError(
                    f"reductions over different domains in one kernel: %{first.name} reduces "
                    f"{list(shape)} over axes {list(reduced)}, %{r.name} reduces {list(other[0])} "
                    f"over axes {list(other[1])}", r)
    else:
        shapes = {types[y].shape for y in kernel.yields}
        if len(shapes) > 1:
            raise RegionError("a pointwise kernel's outputs must share one shape, got "
                              + ", ".join(str(list(s)) for s in sorted(shapes)))
        shape = shapes.pop() if shapes else ()
        reduced = ()
    domain = Domain(shape, reduced, reduction_kind(shape, reduced), frozenset())
    row_dependent = _check_row_dependent(kernel, domain)
    domain = Domain(shape, reduced, domain.kind, frozenset(row_dependent))
    allowed = {shape}
    if reduced:
        allowed |= {domain.kept_shape, domain.keepdims_shape}
    for y in kernel.yields:
        if types[y].shape not in allowed:
            raise RegionError(
                f"output %{y} of shape {list(types[y].shape)} does not fit the kernel's domain "
                f"{list(shape)}" + (f" reduced over axes {list(reduced)}" if reduced else ""))
    return domain


#: Fewest bytes per element a buffer read into a float64 ``tl.dot`` operand may have: Triton 3.6
#: (the GPU image's) gives an operand computed from a narrower load a "large K" layout that it
#: cannot lower ("Currently fp64 don't support largeK MMA"; any 1- or 2-byte load: bool, int8,
#: float16; found by ``fusejit fuzz --backend cuda --products``).
FLOAT64_DOT_MIN_LOAD = 4


def float64_dot_cannot_load(product: Any, itemsize: int) -> bool:
    """Whether a product of dtype ``product`` cannot compute an operand from a buffer of
    ``itemsize``-byte elements while its tiles load (``FLOAT64_DOT_MIN_LOAD``)."""
    return product.kind == "f" and product.itemsize == 8 and itemsize < FLOAT64_DOT_MIN_LOAD


def _check_float64_operand_loads(kernel: Kernel, mm: Instr, types: dict) -> None:
    """A float64 product's operands must not be computed in its kernel from buffers of
    elements narrower than ``FLOAT64_DOT_MIN_LOAD``. The fusion pass writes such operands as
    float64 first (``rules.gemm_prologue_unsupported``); a kernel block written so is
    refused here."""
    scalars = {p.name for p in kernel.params if p.scalar}  # (passed by value: no loads)
    for operand in mm.args:
        for name in operand_params(kernel, operand):
            if name not in scalars and name != operand and \
                    float64_dot_cannot_load(mm.dtype, types[name].dtype.itemsize):
                raise RegionError(
                    f"the float64 product %{mm.name} computes an operand from %{name} "
                    f"({types[name].dtype.name}) while its tiles load, which Triton 3.6 cannot "
                    f"compile; write that operand as float64 in a kernel of its own", mm)


def _gemm_domain(kernel: Kernel, matmuls: list[Instr], types: dict) -> Domain:
    """The domain of a region holding a matrix product (see the module docstring)."""
    if len(matmuls) > 1:
        raise RegionError(f"a kernel computes one matrix product, this one has %{matmuls[0].name} "
                          f"and %{matmuls[1].name}", matmuls[1])
    mm = matmuls[0]
    _check_float64_operand_loads(kernel, mm, types)
    shape = mm.shape
    last = (len(shape) - 1,)
    product: set[str] = {mm.name}
    reductions: list[Instr] = []
    for instr in kernel.body:
        if instr is mm or not any(a in product for a in instr.args):
            if instr.op in REDUCE:
                raise RegionError(
                    f"%{instr.name} = {instr.op} reduces a value the product %{mm.name} does not "
                    f"depend on; a GEMM kernel reduces only rows of its product", instr)
            continue
        product.add(instr.name)
        if instr.op in REDUCE:
            src, axes = types[instr.args[0]].shape, tuple(instr.attrs["axes"])
            if src != shape or axes != last:
                raise RegionError(
                    f"%{instr.name} = {instr.op} reduces {list(src)} over axes {list(axes)}; a GEMM "
                    f"kernel reduces only rows of its product {list(shape)} (axes {list(last)})",
                    instr)
            if shape[-1] == 0:  # (no column tile to hold the rows' identity: interpret fuzz)
                raise RegionError(
                    f"%{instr.name} = {instr.op} reduces rows of no columns (the product %{mm.name} "
                    f"is {list(shape)}); a GEMM kernel has no tile there, a reduction kernel "
                    f"gives each row the identity", instr)
            reductions.append(instr)
    reduced = last if reductions else ()
    domain = Domain(shape, reduced, GEMM, frozenset(), mm.name, frozenset(product))
    row = _check_row_dependent(kernel, domain)
    for instr in kernel.body:
        if instr.name not in product or instr is mm or instr.name in row:
            continue
        # a value of the product tile: it exists at the tile's coordinates only
        if instr.op in ("permute", "slice", "expand"):
            raise RegionError(
                f"%{instr.name} = {instr.op} moves the product of %{mm.name}; that needs the product "
                f"written to memory first", instr)
        if instr.shape == shape:
            continue
        if reductions or squeezed(instr.shape) != squeezed(shape):
            raise RegionError(
                f"%{instr.name} of shape {list(instr.shape)} is computed from the product "
                f"{list(shape)} of %{mm.name} but is not of its shape"
                + ("" if reductions else " (or a reshape of it that only adds or drops size-1 dims)"),
                instr)
    domain = Domain(shape, reduced, GEMM, frozenset(row), mm.name, frozenset(product))
    allowed = {shape}
    if reductions:
        allowed |= {domain.kept_shape, domain.keepdims_shape}
    for y in kernel.yields:
        t = types[y].shape
        if t not in allowed and (reductions or squeezed(t) != squeezed(shape)):
            raise RegionError(
                f"output %{y} of shape {list(t)} does not fit the GEMM kernel's domain "
                f"{list(shape)}" + (f" reduced over axes {list(reduced)}" if reduced else ""))
    return domain


def operand_params(kernel: Kernel, operand: str) -> list[str]:
    """The params of ``kernel`` that ``operand`` is computed from (itself if it is one)."""
    defs = {i.name: i for i in kernel.body}
    params = {p.name for p in kernel.params}
    found, stack, seen = [], [operand], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in params:
            found.append(name)
        elif name in defs:
            stack.extend(defs[name].args)
    return found


def operand_itemsizes(kernel: Kernel, matmul: str) -> tuple[int, int]:
    """Bytes per element that a GEMM region loads for each operand of ``matmul``: the widest
    parameter its prologue reads (a float32 buffer cast to float16 while loading counts 4)."""
    types = {p.name: p.type for p in kernel.params}
    mm = next(i for i in kernel.body if i.name == matmul)
    a, b = (max([1, *(types[n].dtype.itemsize for n in operand_params(kernel, operand))])
            for operand in mm.args)
    return a, b


def _check_row_dependent(kernel: Kernel, domain: Domain) -> set[str]:
    """Names of row-dependent values, checking that each stays at its canonical coordinates."""
    row: set[str] = set()
    kept, keepdims = domain.kept_shape, domain.keepdims_shape
    for instr in kernel.body:
        if instr.op in REDUCE:
            row.add(instr.name)
            continue
        if not any(a in row for a in instr.args):
            continue
        row.add(instr.name)
        shape = instr.shape
        if instr.op in ("permute", "slice"):
            raise RegionError(
                f"%{instr.name} = {instr.op} moves a value computed from a reduction of this "
                f"kernel; that needs it materialized, so it cannot be in the same kernel", instr)
        if instr.op == "reshape":
            pair = ({kept, keepdims} if kept != keepdims else {kept})
            src = next(a for a in instr.args if a in row)
            src_shape = _shape_of(kernel, src)
            if not (src_shape == shape or {src_shape, shape} <= pair):
                raise RegionError(
                    f"%{instr.name} reshapes a value computed from a reduction from "
                    f"{list(src_shape)} to {list(shape)}; inside one kernel only the reduced "
                    f"shape {list(kept)} and its keepdims form {list(keepdims)} are possible",
                    instr)
        if not (domain.is_domain_like(shape) or shape == kept):
            raise RegionError(
                f"%{instr.name} of shape {list(shape)} is computed from a reduction but is "
                f"neither the domain {list(domain.shape)} broadcast-compatible nor the reduced "
                f"shape {list(kept)}", instr)
    return row


def _shape_of(kernel: Kernel, name: str) -> tuple[int, ...]:
    for instr in kernel.body:
        if instr.name == name:
            return instr.shape
    for p in kernel.params:
        if p.name == name:
            return p.type.shape
    raise KeyError(name)


# -- load sites: which element of which buffer a region value reads ----------------------------

#: Load sites per value that ``load_sites`` looks at (past them a value's other sites are not
#: followed: the sites only inform choices of tiles and layouts, never correctness).
MAX_LOAD_SITES = 256

Point = tuple[int, ...]


def _site_operands(instr: Instr, src_shape: tuple[int, ...], ats: tuple[Point, ...]
                   ) -> list[tuple[str, tuple[Point, ...]]]:
    """The operands that computing ``instr`` at each point of ``ats`` reads, with their points
    (``src_shape``: its first operand's shape)."""
    op = instr.op
    src = instr.args[0] if instr.args else ""
    if op == "permute":
        perm = instr.attrs["perm"]
        moved = []
        for at in ats:
            src_at = [0] * len(at)
            for i, p in enumerate(perm):
                src_at[p] = at[i]
            moved.append(tuple(src_at))
        return [(src, tuple(moved))]
    if op == "expand":
        return [(src, tuple(tuple(0 if n == 1 else c for c, n in
                                  zip(at[len(at) - len(src_shape):], src_shape)) for at in ats))]
    if op == "slice":
        start, step = instr.attrs["start"], instr.attrs["step"]
        return [(src, tuple(tuple(a + st * c for c, a, st in zip(at, start, step))
                            for at in ats))]
    if op == "reshape":
        strides, src_strides = contiguous_strides(instr.shape), contiguous_strides(src_shape)
        moved = []
        for at in ats:
            flat = sum(c * s for c, s in zip(at, strides))
            src_at = []
            for s in src_strides:
                # (an empty source, the operand of a product over K = 0, has strides of 0 and
                # is never read: its points are the origin; ``fusejit fuzz --products``, seed
                # 14431)
                src_at.append(flat // s if s else 0)
                flat = flat % s if s else flat
            moved.append(tuple(src_at))
        return [(src, tuple(moved))]
    # elementwise ops and casts read their operands at the same coordinates
    return [(a, ats) for a in instr.args]


def load_sites(kernel: Kernel, strides: Any, points: tuple[Point, ...],
               roots: tuple[str, ...] | None = None) -> dict[tuple[int, tuple[int, ...]], None]:
    """Every load that ``kernel``'s outputs (or ``roots``) make, as (param index, its element
    offset at each of ``points``), each buffer param ``i`` laid out by ``strides[i]``.

    Both the emitter (the actual strides: 2-D tiles, operand layouts) and the fuser (fresh,
    contiguous buffers: ``fuse/layout.py``) ask this. All points are traced at once, so each
    load site carries its offsets at every point. The walk is iterative (a region may be a
    long chain) and a value's sites are a set: a value read twice (``y * y``) is one site, so
    a chain of squarings does not double its list at every step.
    """
    defs = {i.name: i for i in kernel.body}
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    params = {p.name: (i, p.scalar) for i, p in enumerate(kernel.params)}
    memo: dict[Any, dict[tuple[int, tuple[int, ...]], None]] = {}
    roots = tuple(kernel.yields) if roots is None else roots
    stack: list[tuple[Any, list[Any] | None]] = [((y, points), None) for y in reversed(roots)]
    while stack:
        key, operands = stack.pop()
        if key in memo:
            continue
        name, ats = key
        if name in params:
            i, scalar = params[name]
            memo[key] = {} if scalar else {  # (a scalar is passed by value: no load)
                (i, tuple(sum(c * s for c, s in zip(at, strides[i])) for at in ats)): None}
            continue
        if operands is None:
            instr = defs[name]
            src_shape = types[instr.args[0]].shape if instr.args else ()
            operands = _site_operands(instr, src_shape, ats)
            stack.append((key, operands))
            stack.extend((o, None) for o in reversed(operands) if o not in memo)
            continue
        sites: dict[tuple[int, tuple[int, ...]], None] = {}
        for o in operands:
            for site in memo[o]:
                if len(sites) < MAX_LOAD_SITES:
                    sites[site] = None
        memo[key] = sites
    out: dict[tuple[int, tuple[int, ...]], None] = {}
    for y in roots:
        out.update(memo[(y, points)])
    return out
