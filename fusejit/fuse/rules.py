"""The legality rules of greedy fusion: each one says what it fuses, what it refuses, and why.

The greedy pass (``greedy.py``) grows a region one instruction at a time. For
each growth it builds a ``Candidate`` (the instruction plus the regions it
would join, summarized) and asks every rule of ``RULES`` in order; the first
rule that returns a sentence refuses the growth, and that sentence (with the
rule's name) is the reason recorded at the boundary that results.

Cheap rules come first. Rules ``one_reduction_domain`` to
``row_values_writable`` mirror ``fusejit.ir.domain`` incrementally (one
instruction at a time, O(1) each); ``domain_analysis`` then runs the real
``region_domain`` on the grown region whenever the growth involves a
reduction or a value computed from one, so that every region the pass builds
is exactly one the emitter accepts. Growth by a value free of reductions
skips that last call: ``region_domain`` never rejects free values (only the
shapes a kernel writes, which ``outputs_fit_domain`` checks), and skipping it
keeps the pass linear.

Rules ``one_matmul`` to ``gemm_row_reduction`` decide what joins a GEMM kernel
(a region with a ``matmul``): the pointwise producers of its operands that are
cheap to recompute per tile (the prologue, ``gemm_prologue_refusal``), the
pointwise consumers of its product (the epilogue) and row reductions of the
product when one tile spans the row.

A rule takes a ``Candidate`` and returns None (legal) or a human sentence.

Four rules decide on finished regions instead: ``rule_split_reduction`` (a reduction
region runs split), ``rule_tf32_k_major_b`` (a TF32 GEMM region gets its B transposed
to K-major by a pointwise kernel of its own first), ``rule_fma_n_major_b`` (a
full-precision float32 GEMM region gets a K-major B written row-major first) and
``rule_align_gemm_operands`` (a
float16 or TF32 GEMM's operands whose rows are not 16-byte aligned are copied to padded rows
first);
the rewrites are ``layout.py``. One rule orders the finished plan's launches:
``rule_reverse_reread`` (a pointwise kernel or split reduction reading a large buffer that
the launch before it streamed through runs its programs last first, where L2 still holds
that buffer).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..ir.domain import (
    INNER_REDUCTION,
    OUTER_REDUCTION,
    RegionError,
    float64_dot_cannot_load,
    reduction_kind,
    region_domain,
    squeezed,
)
from ..ir.ops import REDUCE, SPLITTABLE, VIEW
from ..ir.program import Instr, Kernel
from . import cost
from .layout import (
    batch_views,
    cone_params,
    operand_batch,
    operand_param,
    reads_k_major,
    reads_n_major,
)

Shape = tuple[int, ...]


@dataclass
class Prologue:
    """The producers of one operand of a ``matmul`` inside the kernel it would run in."""

    #: 0 for A (``[..., M, K]``), 1 for B (``[..., K, N]``)
    index: int
    operand: str
    #: the free instructions computing the operand (empty: the operand is loaded as is)
    instrs: list[Instr]
    #: the buffers those instructions read (outer values)
    params: list[str]
    #: a value computed from a reduction or a product that the operand needs, or None
    blocked: str | None = None


@dataclass
class Candidate:
    """One proposed growth of a region, summarized for the rules."""

    instr: Instr
    #: names of the regions that would become one (empty: a new region)
    regions: tuple[str, ...]
    #: joining a region that only shares inputs with ``instr`` (horizontal fusion)
    sibling: bool
    #: a region of the candidate is a kernel block written by the user
    frozen: bool
    size: int
    #: buffers the grown region reads (scalar params are not counted: they are no loads)
    num_inputs: int
    #: every reduction of the grown region: (value name, input shape, axes)
    reductions: list[tuple[str, Shape, tuple[int, ...]]]
    #: values of the grown region computed from a reduction, to check (in body order)
    row_instrs: list[Instr]
    #: names of all values computed from a reduction in the grown region
    row: set[str]
    #: shape of every value name the rules may look at (args, params)
    shapes: dict[str, Shape]
    #: values the grown region is known to write: requested outputs, values read elsewhere
    yields: dict[str, Shape]
    #: the shape the region iterates over before the growth (pointwise: what it writes)
    anchor: Shape | None
    #: returns a sentence when the growth would make regions depend on each other in a cycle
    cycle: Callable[[], str | None]
    #: builds the grown region as a Kernel for ``region_domain``
    probe: Callable[[], Kernel]
    needs_probe: bool
    #: why an operand from another region could be neither written there nor recomputed here
    stuck: str | None = None
    #: every matmul of the grown region: (value name, product shape)
    matmuls: list[tuple[str, Shape]] = field(default_factory=list)
    #: when ``instr`` is a matmul: its operands' producers inside the grown region
    prologue: list[Prologue] = field(default_factory=list)
    #: bytes per element of every value name the rules may look at (as ``shapes``)
    itemsizes: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def domain(self) -> tuple[Shape, tuple[int, ...]] | None:
        """(D, R) of the grown region when it holds a reduction, else None."""
        if not self.reductions:
            return None
        _, shape, axes = self.reductions[0]
        return shape, axes


def _kept(shape: Shape, axes: tuple[int, ...]) -> tuple[Shape, Shape]:
    kept = tuple(d for i, d in enumerate(shape) if i not in axes)
    keepdims = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return kept, keepdims


def _fmt(shape: Shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- the rules, cheapest first ------------------------------------------------------

def rule_user_kernels_fixed(c: Candidate) -> str | None:
    """Kernel blocks written by the user are used exactly as written: nothing joins them.

    Fuses: nothing. Why: a user who edits the regions of fused text chose
    them; the fuser only fuses the instructions left outside kernel blocks.
    """
    if c.frozen:
        return "it is a kernel block written in the program text, used as written"
    return None


def rule_operands_available(c: Candidate) -> str | None:
    """Every operand computed in another region reaches this one: recomputed here, or written there.

    Fuses: consumers of values from other kernels. Refuses: a growth where an
    operand's kernel cannot write it (its shape does not fit that kernel's
    domain) and recomputing it here would read a value computed from this
    region's reduction (the copy would no longer be free). Why: the operand
    would have no way in.
    """
    return c.stuck


def rule_region_size(c: Candidate) -> str | None:
    """A region holds at most ``cost.MAX_REGION_INSTRS`` instructions.

    Fuses: any chain up to that length. Refuses: the instruction that would make the
    kernel longer, so a long chain becomes a sequence of kernels, each reading the
    previous one's result (a 100,000-op chain: about 400 kernels). Why: Triton's
    compile time per instruction grows with the kernel's length (measured in
    ``cost.py``); a 100,000-line kernel would never finish compiling, while one more
    launch costs microseconds and one more round trip through memory.
    """
    if c.size > cost.MAX_REGION_INSTRS:
        return (f"the kernel would hold {c.size} instructions, over the limit of "
                f"{cost.MAX_REGION_INSTRS}")
    return None


def rule_region_inputs(c: Candidate) -> str | None:
    """A region reads at most ``cost.MAX_REGION_INPUTS`` buffers.

    Fuses: regions with up to that many parameters. Why: each parameter is a
    pointer, strides and a live load stream; many of them spill registers.
    """
    if c.num_inputs > cost.MAX_REGION_INPUTS:
        return (f"the kernel would read {c.num_inputs} buffers, over the limit of "
                f"{cost.MAX_REGION_INPUTS}")
    return None


def rule_one_matmul(c: Candidate) -> str | None:
    """A kernel computes at most one matrix product.

    Fuses: a product with its prologue and epilogue. Refuses: a second
    ``matmul`` in a kernel that has one (``gelu(x @ w1 + b1) @ w2`` is two
    kernels), and horizontal fusion of anything with a GEMM kernel. Why: a
    GEMM kernel is one tiled loop over K with one accumulator; the second
    product needs the first one complete (or its own loop and tiles).
    """
    if len(c.matmuls) > 1:
        return (f"the kernel already computes the product %{c.matmuls[0][0]}; a kernel computes "
                f"one matrix product (each is a GEMM kernel of its own)")
    if c.sibling and (c.matmuls or c.instr.op == "matmul"):
        return "a GEMM kernel fuses only its operands' producers and its product's consumers"
    return None


def gemm_prologue_unsupported(p: Prologue, mm: Instr, itemsizes: dict[str, int]) -> str | None:
    """Why the producers of operand ``p`` of ``mm`` cannot be compiled into its GEMM, or None.

    A float64 product whose prologue loads a buffer of elements narrower than 4 bytes (a bool,
    int8 or float16 operand converted to float64 as its tiles load), which Triton 3.6 cannot
    compile (``domain.float64_dot_cannot_load``, which the domain analysis applies to every
    GEMM kernel too). The operand is written in float64 first.
    """
    narrow = [q for q in p.params if float64_dot_cannot_load(mm.dtype, itemsizes.get(q, 8))]
    if narrow and p.instrs:
        return (f"operand %{p.operand} of the float64 product %{mm.name} would load "
                f"{', '.join('%' + q for q in narrow)} ({itemsizes[narrow[0]]}-byte elements) "
                f"while its tiles load, which Triton 3.6 cannot compile into a float64 tl.dot; "
                f"it is written as float64 first")
    return None


def gemm_prologue_refusal(p: Prologue, mm: Instr, shapes: dict[str, Shape],
                          itemsizes: dict[str, int] | None = None) -> str | None:
    """Why the producers of operand ``p`` of ``mm`` cannot run while its tiles load, or None.

    The cost rule of GEMM prologues (see ``cost.py``): the producers must be free
    (no reduction or other product in them), read at most
    ``cost.GEMM_PROLOGUE_MAX_FULL_LOADS`` buffers of the operand's size, and cost at
    most ``cost.GEMM_PROLOGUE_MAX_COST`` per element unless the other output axis
    fits one tile. The greedy pass applies the same test when it decides whether to
    recompute an operand from another kernel or to read it from memory. With ``itemsizes``,
    also ``gemm_prologue_unsupported``.
    """
    if itemsizes is not None and (reason := gemm_prologue_unsupported(p, mm, itemsizes)):
        return reason
    if p.blocked is not None:
        what = "is" if p.blocked == p.operand else f"needs %{p.blocked},"
        return (f"operand %{p.operand} of %{mm.name} {what} computed from a reduction or a "
                f"product; a GEMM recomputes only pointwise producers of its operands while "
                f"loading their tiles")
    if not p.instrs:
        return None
    shape = shapes[p.operand]
    tile = shape[-2] * shape[-1]
    full = [q for q in p.params if math.prod(shapes[q]) >= max(2, tile)]
    if len(full) > cost.GEMM_PROLOGUE_MAX_FULL_LOADS and tile > cost.GEMM_SMALL_OPERAND:
        return (f"operand %{p.operand} of %{mm.name} would be computed from {len(full)} buffers of "
                f"its size ({', '.join('%' + q for q in full)}) at every tile load; a GEMM prologue "
                f"reads at most {cost.GEMM_PROLOGUE_MAX_FULL_LOADS} (writing %{p.operand} once "
                f"reads fewer bytes)")
    total = sum(cost.op_cost(i.op) for i in p.instrs)
    other = mm.shape[-1] if p.index == 0 else mm.shape[-2]
    recomputes = cost.gemm_recomputes(other)
    if total > cost.GEMM_PROLOGUE_MAX_COST and recomputes > 1:
        axis = "N" if p.index == 0 else "M"
        ops = ", ".join(f"%{i.name} = {i.op}" for i in p.instrs[:4])
        return (f"the producers of operand %{p.operand} of %{mm.name} ({ops}) cost {total} per "
                f"element, over {cost.GEMM_PROLOGUE_MAX_COST}, and would be recomputed for each "
                f"of the {recomputes} tiles along {axis}={other}; writing %{p.operand} once is "
                f"cheaper")
    return None


def rule_gemm_prologue(c: Candidate) -> str | None:
    """A matrix product joins the kernel of its operands' producers when they are a cheap
    prologue: pointwise, reading at most one buffer of the operand's size, cheap per element.

    Fuses: ``(x * s).astype(float16) @ w`` (the scale and cast are applied to each
    tile of ``x`` as it loads), transposes and slices of operands (index math).
    Refuses: operands computed from a reduction (``softmax(x) @ v``) or from another
    product, producers reading two full-size buffers (``(x + y) @ w``), and
    expensive producers recomputed for many tiles (``exp(x) ** 3 @ w`` with a wide
    ``w``); and a product joining a kernel that already reduces. Why: a GEMM loads
    each operand tile once per tile of the other output axis, so a prologue is
    recomputed, and its loads repeated, that many times (see ``cost.py``).
    """
    if c.instr.op != "matmul":
        return None
    for p in c.prologue:
        reason = gemm_prologue_refusal(p, c.instr, c.shapes, c.itemsizes)
        if reason is not None:
            return reason
    if c.reductions:
        name = c.reductions[0][0]
        return (f"the kernel already reduces (%{name}); a GEMM kernel's reductions reduce rows of "
                f"its product, after it")
    return None


def rule_gemm_epilogue(c: Candidate) -> str | None:
    """The consumers of a product join its GEMM kernel when they keep the product's shape.

    Fuses: every pointwise consumer of the product with its shape, or with operands
    broadcast into it (bias, scale, residual, activation, cast): ``relu(a @ b + bias)``
    is one kernel, computed on the accumulator tile before the single store; reshapes
    that only add or drop size-1 dims (``matrix @ vector`` forms). Refuses: transposes,
    slices and broadcasts of the product. Why: the product exists only as the tile in
    registers, at its own coordinates; moving it needs it in memory.
    """
    if not c.matmuls:
        return None
    name, shape = c.matmuls[0]
    for instr in c.row_instrs:
        if instr.op not in VIEW:
            continue
        src = c.shapes[instr.args[0]]
        if src != shape and (c.reductions or squeezed(src) != squeezed(shape)):
            continue  # a row value of a reduction: the reduction rules decide
        if instr.op in ("permute", "slice", "expand"):
            return (f"%{instr.name} = {instr.op} moves the product of %{name} (it exists only as "
                    f"the tile in registers); that needs the product written to memory first")
        if squeezed(instr.shape) != squeezed(shape):
            return (f"%{instr.name} reshapes the product of %{name} from {_fmt(shape)} to "
                    f"{_fmt(instr.shape)}; only size-1 dims can be added or dropped in its kernel")
    return None


def rule_gemm_row_reduction(c: Candidate) -> str | None:
    """A reduction joins a GEMM kernel when it reduces rows of the product and one tile
    spans the row.

    Fuses: ``(a @ b).sum(-1)``, ``max`` of each row, softmax or layer norm of
    ``a @ b`` over its last axis when N <= ``cost.GEMM_ROW_MAX_N`` (``block_n`` then
    covers the row, so the row is in registers). Refuses: reductions over other axes,
    of values the product does not depend on, and of rows longer than a tile. Why: a
    program holds one ``block_m x block_n`` tile of the product; a row wider than the
    tile is spread over several programs.
    """
    if not c.matmuls or not c.extra.get("is_reduction"):
        return None
    instr = c.instr
    name, shape = c.matmuls[0]
    src = instr.args[0]
    axes = tuple(instr.attrs["axes"])
    if src not in c.row:
        return (f"%{instr.name} = {instr.op} reduces %{src}, which the product %{name} does not "
                f"depend on; a GEMM kernel reduces only rows of its product")
    last = (len(shape) - 1,)
    if c.shapes[src] != shape or axes != last:
        return (f"%{instr.name} reduces {_fmt(c.shapes[src])} over axes {list(axes)}; a GEMM "
                f"kernel reduces only rows of its product {_fmt(shape)} (axes {list(last)})")
    if shape[-1] > cost.GEMM_ROW_MAX_N:
        return (f"%{instr.name} reduces rows of {shape[-1]} columns of the product %{name}; a GEMM "
                f"tile spans at most {cost.GEMM_ROW_MAX_N}, so the row is not in one program")
    return None


def rule_one_reduction_domain(c: Candidate) -> str | None:
    """All reductions of one kernel reduce the same shape over the same axes.

    Fuses: reduction prologues (pointwise producers computed in the reducing
    loop), sibling reductions (``sum`` and ``max`` of one row), chains of
    reductions over one domain (layer norm's mean then variance). Why: one
    kernel has one iteration space; a reduction over another domain needs
    its own loop nest, hence its own launch.
    """
    if not c.reductions:
        return None
    first, shape, axes = c.reductions[0]
    for name, other_shape, other_axes in c.reductions[1:]:
        if (other_shape, other_axes) != (shape, axes):
            return (f"%{name} reduces {_fmt(other_shape)} over axes {list(other_axes)} but the "
                    f"kernel already reduces {_fmt(shape)} over axes {list(axes)} (%{first})")
    return None


def rule_siblings_match(c: Candidate) -> str | None:
    """Horizontal fusion: an instruction joins a region it only shares inputs with when it
    iterates over that region's domain.

    Fuses: ``sum(x, -1)`` with ``max(x, -1)``, ``mean`` with ``var`` of one
    row, ``exp(x)`` with ``sum(x, -1)`` (``x`` read once for both). Why:
    sharing the loads is the whole gain; an instruction over another shape
    would only lengthen the kernel.
    """
    if not c.sibling or c.anchor is None:
        return None
    instr = c.instr
    shape = c.shapes[instr.args[0]] if c.extra.get("is_reduction") else instr.shape
    if shape != c.anchor:
        return (f"%{instr.name} iterates over {_fmt(shape)}, the sibling kernel over "
                f"{_fmt(c.anchor)}")
    return None


def rule_row_values_stay_put(c: Candidate) -> str | None:
    """A value computed from a reduction is never moved inside the kernel that reduces.

    Fuses: epilogues and broadcasts of reduction results (``sum(x, -1) + 1``,
    ``x - max(x, -1, keepdims=True)``), reshapes between the reduced shape
    and its keepdims form. Refuses: permute, slice and other reshapes of such
    values. Why: a reduction result exists only at its own coordinates
    (one per row, in registers); moving it needs it in memory.
    """
    dom = c.domain
    if dom is None:
        return None
    kept, keepdims = _kept(*dom)
    for instr in c.row_instrs:
        if instr.op in ("permute", "slice"):
            return (f"%{instr.name} = {instr.op} moves a value computed from a reduction; that "
                    f"needs the value written to memory first")
        if instr.op == "reshape":
            src = next(a for a in instr.args if a in c.row)
            pair = {kept, keepdims}
            if not (c.shapes[src] == instr.shape or {c.shapes[src], instr.shape} <= pair):
                return (f"%{instr.name} reshapes a reduction result from {_fmt(c.shapes[src])} to "
                        f"{_fmt(instr.shape)}; only {_fmt(kept)} <-> {_fmt(keepdims)} stays in "
                        f"registers")
    return None


def rule_broadcast_back_inner_only(c: Candidate) -> str | None:
    """Reduce-then-broadcast fuses only over trailing (inner) axes.

    Fuses: softmax, log_softmax, layer_norm, rms_norm and
    ``x - x.max(-1, keepdims=True)`` over the last axes: one program owns a
    whole row, reduces it, and reuses it from registers. Refuses: a reduction
    over leading axes broadcast back (``x - x.sum(0)``). Why: there each
    program would own a strided column spanning the whole array, so the
    broadcast-back pass would re-read it uncoalesced; writing the small
    reduced vector and running a second pointwise kernel is faster. Except
    a reduced extent of at most ``cost.OUTER_BROADCAST_MAX`` (256) elements of
    at most 4 bytes: one tile holds it whole, read once, and it fuses (timed
    1.3-1.6x faster on the H200; ``FUSEJIT_OUTER_BROADCAST=0`` turns it off).
    """
    dom = c.domain
    if dom is None:
        return None
    shape, axes = dom
    if reduction_kind(shape, axes) == INNER_REDUCTION:
        return None
    if cost.outer_broadcast_enabled() and \
            math.prod(shape[a] for a in axes) <= cost.OUTER_BROADCAST_MAX and \
            all(i.dtype.itemsize <= cost.OUTER_BROADCAST_MAX_ITEMSIZE
                for i in (c.instr, *c.row_instrs)):
        return None  # (one tile holds the reduced extent: see ``cost.OUTER_BROADCAST_MAX``)
    for instr in c.row_instrs:
        s = instr.shape
        if len(s) == len(shape) and any(s[a] != 1 and shape[a] != 1 for a in axes):
            return (f"%{instr.name} broadcasts a reduction over leading axes {list(axes)} back "
                    f"over {_fmt(shape)}; only reductions over trailing axes fuse with their "
                    f"broadcast")
    return None


def rule_broadcast_back_fills_gpu(c: Candidate) -> str | None:
    """A reduction over trailing axes fuses with its broadcast back only where the fused
    kernel fills the GPU.

    Fuses: softmax, norms and ``x - x.max(-1, keepdims=True)`` where there are enough rows
    (one program each) or each row fits a cooperative row kernel (a row over up to 64
    programs that hold it in registers: ``heuristics.coop_row_capacity``). Refuses: a few
    rows too wide for that (``x / x.sum()`` of a large vector, softmax over 8 rows of
    2**22). Why: fused, one program per row streams its row twice through one SM, a handful
    of SMs for the whole array (16 MB through one: 50 times the GPU's copy time). Apart, the
    reduction splits across the GPU (``rule_split_reduction``) and the broadcast is a
    pointwise kernel over the whole array: the same bytes as the fused kernel (the input
    read twice, the output written once) at the GPU's rate, and the second read starts where
    L2 still holds the end of the first (``rule_reverse_reread``). Likewise a reduction of a
    value computed from another reduction of such rows (``abs(x - x.mean()).sum()``): no
    cooperative kernel runs two stages, so it stays apart and splits too (where the first
    stage fits a cooperative kernel, its values are written for the second: a third pass,
    still at the GPU's rate).
    """
    dom = c.domain
    if dom is None:
        return None
    shape, axes = dom
    if reduction_kind(shape, axes) != INNER_REDUCTION:
        return None
    reduce_size = math.prod(shape[a] for a in axes)
    rows = math.prod(shape) // max(1, reduce_size)
    if not cost.should_split(rows, reduce_size):
        return None
    if c.instr.op in REDUCE and any(a in c.row for a in c.instr.args):
        return (f"%{c.instr.name} = {c.instr.op} reduces a value computed from another "
                f"reduction over {rows} row(s) of {reduce_size} elements: in one kernel the "
                f"rows would each take one program (too few to fill the GPU); apart, each "
                f"reduction splits across it")
    from ..codegen.heuristics import coop_row_capacity
    itemsize = max(i.dtype.itemsize for i in (c.instr, *c.row_instrs))
    capacity = coop_row_capacity(itemsize)
    if reduce_size <= capacity:
        return None
    for instr in c.row_instrs:
        s = instr.shape
        if len(s) == len(shape) and any(s[a] != 1 and shape[a] != 1 for a in axes):
            return (f"%{instr.name} broadcasts a reduction back over {rows} row(s) of "
                    f"{reduce_size} elements: too few rows to fill the GPU one program each, "
                    f"too wide for a cooperative row kernel ({capacity} elements at most); "
                    f"the reduction splits across the GPU, and what reads it back runs in a "
                    f"kernel of its own")
    return None


def rule_row_values_writable(c: Candidate) -> str | None:
    """A value computed from a reduction has a shape the kernel could write: the domain,
    the reduced shape, or its keepdims form.

    Fuses: every common epilogue. Refuses: partial broadcasts (``[4,1,1]``
    expanded to ``[4,8,1]`` of a ``[4,8,16]`` domain). Why: every value in a
    region may later have to be written for a consumer elsewhere, and a
    kernel writes only those shapes; this keeps that always possible.
    """
    dom = c.domain
    if dom is None:
        return None
    shape, axes = dom
    allowed = {shape, *_kept(shape, axes)}
    for instr in c.row_instrs:
        if instr.shape not in allowed:
            kept, keepdims = _kept(shape, axes)
            return (f"%{instr.name} of shape {_fmt(instr.shape)} is computed from a reduction but "
                    f"is none of the domain {_fmt(shape)}, the reduced shape {_fmt(kept)} or "
                    f"{_fmt(keepdims)}")
    return None


def rule_outputs_fit_domain(c: Candidate) -> str | None:
    """Every value a kernel writes fits its one domain.

    Fuses: several outputs of one shape in one pointwise kernel; full-size
    values written by a reduction kernel next to its reduced results
    (``y = x * x`` and ``sum(y, -1)``). Refuses: writing values of two
    different shapes from one pointwise kernel. Why: a kernel's grid covers
    one domain; each output is stored at those coordinates.
    """
    dom = c.domain
    if dom is None:
        shapes = set(c.yields.values())
        if len(shapes) > 1:
            return ("the kernel would write values of different shapes: "
                    + ", ".join(f"%{n} {_fmt(s)}" for n, s in c.yields.items()))
        return None
    shape, axes = dom
    allowed = {shape, *_kept(shape, axes)}
    for name, s in c.yields.items():
        if s not in allowed:
            return (f"%{name} of shape {_fmt(s)} must be written but does not fit the domain "
                    f"{_fmt(shape)} reduced over axes {list(axes)}")
    return None


def rule_no_cycle(c: Candidate) -> str | None:
    """Regions never depend on each other in a cycle.

    Fuses: anything the other rules allow. Refuses: a growth after which a
    region would read (through another region) a value it computes itself.
    Why: kernels run one after another; a cycle has no order.
    """
    return c.cycle()


def rule_domain_analysis(c: Candidate) -> str | None:
    """The grown region passes ``fusejit.ir.domain.region_domain``: the final word.

    Fuses: exactly what the emitter can generate as one kernel. Why: the
    emitter indexes every value with this analysis; a region it rejects
    could not be emitted.
    """
    if not c.needs_probe:
        return None
    try:
        region_domain(c.probe())
    except RegionError as exc:
        return exc.reason
    return None


#: The rules in the order the pass asks them (cheap first, the domain analysis last).
RULES: tuple[Callable[[Candidate], str | None], ...] = (
    rule_user_kernels_fixed,
    rule_operands_available,
    rule_region_size,
    rule_region_inputs,
    rule_one_matmul,
    rule_gemm_prologue,
    rule_gemm_epilogue,
    rule_gemm_row_reduction,
    rule_one_reduction_domain,
    rule_siblings_match,
    rule_row_values_stay_put,
    rule_broadcast_back_inner_only,
    rule_broadcast_back_fills_gpu,
    rule_row_values_writable,
    rule_outputs_fit_domain,
    rule_no_cycle,
    rule_domain_analysis,
)


def rule_name(rule: Callable[..., Any]) -> str:
    """The short name of a rule, as printed in reasons (``rule_no_cycle`` -> ``no_cycle``)."""
    return rule.__name__.removeprefix("rule_")


def first_refusal(c: Candidate) -> tuple[str, str] | None:
    """(rule name, sentence) of the first rule that refuses ``c``, or None when all accept."""
    for rule in RULES:
        reason = rule(c)
        if reason is not None:
            return rule_name(rule), reason
    return None


# -- split reductions (decided on finished regions) ------------------------------------

def rule_split_reduction(kernel: Kernel, domain: Any, check_size: bool = True) -> str | None:
    """A finished reduction region runs as a split reduction (one launch: partials, then the
    last program of each row block combines them).

    Splits: ``sum(x)`` of many elements, column sums of a tall matrix, and
    their epilogues (``mean``: the division runs after the combine). Only
    when the output is small and the reduction large (``cost.should_split``).
    argmax/argmin split too: each partial is a chunk's best value and its first index, and
    the combine takes the best in chunk order (the first index of a tie, NaN first).
    Refuses: chains of reductions and reduce-then-broadcast regions (the second pass needs
    the complete first result), and regions that also write full-size values.
    Returns None when the region should split, else why not. With
    ``check_size=False`` only legality is checked (a user may mark any
    splittable region ``kind=split_reduction``).
    """
    reductions = [i for i in kernel.body if i.op in REDUCE]
    if not reductions:
        return "it has no reduction"
    outer = domain.kind == OUTER_REDUCTION
    run = domain.short_inner_kept
    if check_size and not cost.should_split(domain.rows, domain.reduce_size, outer, run):
        if run:
            return (f"its {domain.rows // run} runs of {run} kept points fill the GPU without "
                    f"it (a short inner kept run: split below {cost.SHORT_RUN_SPLIT_BELOW} runs)")
        if outer:
            return (f"{domain.rows} outputs of {domain.reduce_size} elements each fill the GPU "
                    f"without it (outer reductions split below "
                    f"{cost.OUTER_SPLIT_MAX_PROGRAMS} programs of "
                    f"{cost.OUTER_KEPT_PER_PROGRAM} outputs, from "
                    f"{cost.OUTER_SPLIT_MIN_ELEMENTS} elements)")
        return (f"{domain.rows} outputs of {domain.reduce_size} elements each do not need it "
                f"(split when outputs < {cost.SPLIT_MAX_ROWS} and elements >= "
                f"{cost.SPLIT_MIN_REDUCE})")
    for r in reductions:
        if r.op not in SPLITTABLE:
            return f"%{r.name} = {r.op} does not combine partial results"
        if r.args[0] in domain.row_dependent:
            return f"%{r.name} reduces a value computed from another reduction"
    kept, keepdims = domain.kept_shape, domain.keepdims_shape
    for i in kernel.body:
        if i.name in domain.row_dependent and i.shape not in (kept, keepdims):
            return f"%{i.name} broadcasts a reduction result back over the reduced axes"
    for y in kernel.yields:
        if y not in domain.row_dependent:
            return f"it also writes %{y}, a full-size value"
    return None


# -- operand layouts of GEMM kernels (decided on finished regions) ---------------------------

@dataclass(frozen=True)
class LayoutDecision:
    """What a layout rule says about one operand of a GEMM region: transpose it first or not."""

    #: the matrix product, and its operand B as the product reads it
    matmul: str
    operand: str
    #: the value the pass would transpose (B without its batch views), and those views
    base: str
    views: tuple[Instr, ...]
    #: whether the pass runs (False: the decision is only explained)
    apply: bool
    #: seconds saved by the K-major product, of the product as it is, of the pass
    saved: float
    gemm: float
    cost: float
    sentence: str
    #: elements between the rows of the K-major buffer when K is not a multiple of 4 (its
    #: rows padded to 16 bytes: the pass is a ``row_pitch`` kernel), else 0 (contiguous)
    pitch: int = 0
    #: the layout the pass writes B in: K-major (``rule_tf32_k_major_b``) or row-major, N
    #: contiguous (``rule_fma_n_major_b``)
    k_major: bool = True


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} us"


def _b_pass_sizes(kernel: Kernel, domain: Any, mm: Instr
                  ) -> tuple[str, list[Instr], int, float, int]:
    """What a pass rewriting B of the product ``mm`` would handle: the value it writes (B
    without its batch views), those views, the product's K, its flops and the bytes the pass
    reads (B's producers' buffers) and writes (B once)."""
    base, views = batch_views(kernel, mm.args[1])
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    shape = domain.shape
    k = types[mm.args[0]].shape[-1]
    flops = 2.0 * operand_batch(shape) * shape[-2] * shape[-1] * k
    read = sum(p.type.nbytes for p in cone_params(kernel, base) if not p.scalar)
    return base, views, k, flops, read + types[base].nbytes


def rule_tf32_k_major_b(kernel: Kernel, domain: Any) -> LayoutDecision | None:
    """A float32 TF32 product whose B would load N-major gets B written K-major first, by a
    pointwise kernel of its own (a transposing copy), when that saves more time than it costs.

    Transposes: B of ``matmul(a, b, precision="tf32")`` with ``b`` a row-major ``[K, N]``
    array (or computed from one by pointwise producers, which the pass then computes once
    instead of the GEMM's prologue at every tile), into a contiguous ``[..., N, K]`` buffer
    (B's own batch dims; a weight broadcast over a batch is written once); the GEMM reads it
    transposed back, K-major (``layout.transpose_operand``). Refuses: products too small to
    gain, B already K-major (``a @ bt.T``), ``tf32x3``, and kernel blocks written by the
    user (used as written). A ``K`` that is not a multiple of 4 would start the buffer's rows
    off 16-byte boundaries (its tiles could not load 16 bytes at a time, nor through TMA): the
    pass then writes them ``ceil(K / 4) * 4`` elements apart (``row_pitch``), as
    ``rule_align_gemm_operands`` would pad them (``FUSEJIT_GEMM_ALIGN=0``: no pass).

    Why: Hopper's TF32 wgmma reads both operands K-major from shared memory; an N-major B is
    multiplied as ``(B^T A^T)^T`` with B^T through registers, 265 TFLOP/s at 4096^3 on the
    H200, where a K-major B loads through TMA at 328-330 (``cost.TF32_N_MAJOR_B_FLOPS``,
    ``cost.TF32_K_MAJOR_B_FLOPS``).
    The pass pays when ``2 * batch * M * N * K * (1/265e12 - 1/330e12)`` seconds exceed its
    reading and writing B at 3.74e12 B/s (a 4096^2 float32 transpose: 35.9 us) plus one
    launch (5.14 us): from M of about 1600 at N = K = 4096 (4096^3: saves ~102 us of ~519,
    for ~41). ``tf32x3`` (three TF32 products per step, about 70 TFLOP/s, measured with a
    row-major B only) is left as it is: a 4096^3 product takes about 2 ms there, the gain of
    a K-major B is unmeasured and the pass would be about 2% of it.

    The numbers do not change beyond TF32's own rounding: the same products of the same
    TF32-rounded inputs are summed, in another order within a tile (float32 sums); the
    ``numpy`` backend computes every float32 product in full precision anyway, and the
    ``interpret`` backend runs the same plan as ``cuda``.

    Returns None when the rule does not concern the kernel (not a TF32 product with an
    N-major B), else the decision, applied or not, with its sentence for ``explain()``.
    """
    if getattr(domain, "kind", None) != "gemm":
        return None
    mm = next(i for i in kernel.body if i.name == domain.matmul)
    precision = str(mm.attrs.get("precision", "ieee"))
    if mm.dtype.name != "float32" or not precision.startswith("tf32"):
        return None
    operand = mm.args[1]
    if not reads_n_major(kernel, operand):
        return None
    base, views, k, flops, pass_bytes = _b_pass_sizes(kernel, domain, mm)
    saved, gemm, cost_s = cost.tf32_transpose_gain(flops, pass_bytes)
    what = f"B (%{operand}) read N-major, multiplied as (B^T A^T)^T"

    def decline(why: str) -> LayoutDecision:
        return LayoutDecision(mm.name, operand, base, tuple(views), False, saved, gemm, cost_s,
                              f"{what}: {why}")
    if precision != "tf32":
        return decline(f"precision={precision} runs at about 70 TFLOP/s whatever the pass "
                       f"would save (not measured); no transposing pass")
    pitch = -(-k // 4) * 4 if k % 4 else 0
    if pitch and cost.gemm_align_mode() == "0":
        return decline(f"K={k} is not a multiple of 4 and FUSEJIT_GEMM_ALIGN=0 keeps rows "
                       f"unpadded, so a K-major copy's rows would not load 16 bytes at a time; "
                       f"no transposing pass")
    if saved <= cost_s:
        return decline(f"a transposing pass would cost ~{_us(cost_s)} and save ~{_us(saved)} "
                       f"of ~{_us(gemm)}; not worth it")
    padded = (f", its rows {pitch} elements apart (K={k} padded to 16 bytes)" if pitch else "")
    return LayoutDecision(mm.name, operand, base, tuple(views), True, saved, gemm, cost_s,
                          f"B (%{operand}) transposed to K-major{padded} before the TF32 GEMM: "
                          f"saves ~{_us(saved)} of ~{_us(gemm)}, the pass costs ~{_us(cost_s)}",
                          pitch)


def rule_fma_n_major_b(kernel: Kernel, domain: Any) -> LayoutDecision | None:
    """A full-precision float32 product whose B would load K-major gets B written row-major
    (N contiguous) first, by a pointwise kernel of its own (a transposing copy), when that
    saves more time than it costs.

    Writes: B of ``a @ bt.T`` (a linear layer's ``x @ w.T``: ``bt`` a row-major ``[N, K]``
    array, or computed from one by pointwise producers, which the pass then computes once
    instead of the GEMM's prologue at every tile) to a contiguous ``[..., K, N]`` buffer (B's
    own batch dims; a weight broadcast over a batch is written once); the GEMM reads that
    buffer (``layout.transpose_operand`` with ``k_major=False``). Refuses: products too small
    to gain (a decode-like product, bound by reading B once, is: the pass reads and writes B
    again), B already N-major, other dtypes and precisions (TF32 wants the opposite:
    ``rule_tf32_k_major_b``), and kernel blocks written by the user (used as written).

    Why: full-precision float32 runs on the FMA units; ``tl.dot`` stages both tiles in
    shared memory and each thread reads B's tile along N, strided when B arrived K-major.
    H200, the GEMM alone (``bench/exp_s15b.py``, ``bench/results/h200-s15-call2``): 4096^3
    42.2 TFLOP/s with B row-major, 24.4 K-major (cuBLAS 51.1); 6400x1552x3336 29.1 / 19.4;
    whole plans with the pass on an H100 (``h100-s15-call3``): 0.28-0.69x of cuBLAS ->
    0.40-1.10x at seven shapes (``cost.FMA_N_MAJOR_B_FLOPS``, ``cost.FMA_K_MAJOR_B_FLOPS``).
    The pass pays when ``2 * batch * M * N * K * (1/19.4e12 - 1/39e12)`` seconds exceed its
    reading and writing B at ``cost.TRANSPOSE_BYTES_PER_S`` plus one launch: from M of 48 at
    N = K = 4096.

    The numbers do not change: the same products are summed in the same order (the tiles'
    K steps do not depend on where B's elements lie in memory).

    Returns None when the rule does not concern the kernel (not a full-precision float32
    product with a K-major B), else the decision, applied or not, with its sentence.
    """
    if getattr(domain, "kind", None) != "gemm":
        return None
    mm = next(i for i in kernel.body if i.name == domain.matmul)
    if mm.dtype.name != "float32" or str(mm.attrs.get("precision", "ieee")) != "ieee":
        return None
    operand = mm.args[1]
    if not reads_k_major(kernel, operand):
        return None
    base, views, _, flops, pass_bytes = _b_pass_sizes(kernel, domain, mm)
    saved, gemm, cost_s = cost.fma_n_major_gain(flops, pass_bytes)
    if saved <= cost_s:
        return LayoutDecision(mm.name, operand, base, tuple(views), False, saved, gemm, cost_s,
                              f"B (%{operand}) read K-major by the full-precision GEMM: a "
                              f"pass writing it row-major would cost ~{_us(cost_s)} and save "
                              f"~{_us(saved)} of ~{_us(gemm)}; not worth it", k_major=False)
    return LayoutDecision(mm.name, operand, base, tuple(views), True, saved, gemm, cost_s,
                          f"B (%{operand}) written row-major (N contiguous) before the "
                          f"full-precision GEMM, whose FMA tiles read B along N: saves "
                          f"~{_us(saved)} of ~{_us(gemm)}, the pass costs ~{_us(cost_s)}",
                          k_major=False)


@dataclass(frozen=True)
class AlignDecision:
    """What ``rule_align_gemm_operands`` says about one GEMM region: copy some operands to
    rows padded to 16 bytes first, or not."""

    matmul: str
    #: the kernel params the copies would read (the buffers under the operands' views), and
    #: each one's padded row (elements)
    params: tuple[str, ...]
    pitches: tuple[int, ...]
    #: whether the copies run (False: the decision is only explained)
    apply: bool
    #: seconds saved by aligned rows, of the product as it is, of the copies
    saved: float
    gemm: float
    cost: float
    sentence: str


def _row_alignment(row_bytes: int) -> int:
    """The largest power of two up to 16 that divides ``row_bytes``: where rows start."""
    return math.gcd(row_bytes, 16)


def rule_align_gemm_operands(kernel: Kernel, domain: Any, padded: frozenset[str] = frozenset()
                             ) -> AlignDecision | None:
    """A float16 or float32 product whose operand rows are not 16-byte aligned gets those operands
    copied to buffers with rows padded to a multiple of 16 bytes first, by pointwise kernels of
    their own (``row_pitch``), when that saves more time than the copies cost.

    Copies: each buffer that an operand reads through views only (``a``, ``b``, ``bt.T``, a
    weight broadcast over a batch), whose last axis of ``C`` elements is not a multiple of 16
    bytes (``C % 8`` for float16): a row of 3898 starts every row of the buffer on a 4-byte
    boundary, one of 3183 on a 2-byte one. The copy holds the same values with rows
    ``ceil(C / 8) * 8`` elements apart (``layout.align_operand``); the GEMM reads it through
    the same views, so its tiles load 16 bytes at a time (and through TMA where they qualify).
    Leaves: an operand computed in the GEMM's prologue (its loads are the prologue's), aligned
    rows, other dtypes and precisions (float64 runs on the FMA units like full-precision
    float32 and is unmeasured; ``tf32x3`` is unmeasured), and
    kernel blocks written by the user (used as written). The product's own rows are written
    where they fall (an output is returned as it is computed).

    Why: at 7453x3898x5000 (B's rows 4-byte aligned) the H200 ran 377 TFLOP/s against 550 for
    torch.compile, which pads; at 1548x11932x3183 with ``b.T`` (both operands' rows 2-byte
    aligned) 122 against 445 (with the word copies, ``pointwise.PointwiseEmitter.pitched_copy``, whole
    plans 542 and 433). Products under ``cost.GEMM_ALIGN_MIN_FLOPS`` are left as they are:
    there the copies were measured to lose (2321x2782x515: 46.5 -> 56.6 us on the H200),
    each time with a misaligned B read N-major; where every copied operand is read K-major the
    bound is
    ``cost.GEMM_ALIGN_MIN_FLOPS_K_MAJOR`` (7423x2185x257 ``b.T``: 123 -> 48 us on an H100).
    Above it the copies
    pay when ``cost.align_gain`` says so: the product's roofline time at the worst alignment
    against 16 bytes, minus a copy (read and write at the word copy's measured rate,
    ``cost.ALIGN_BYTES_PER_S``, plus a launch) per buffer. A product
    bound by memory never gains: a decode-like M reads B once where its copy moves it twice,
    and a short K (41) writes a product whose own rows stay misaligned.

    ``FUSEJIT_GEMM_ALIGN=0`` turns the copies off, ``always`` (for tests and the fuzzer) makes
    them whatever the sizes. The values are unchanged: the copy moves the same elements; only
    where rows start moves.

    TF32 (``precision="tf32"``; a float32 row of ``C % 4`` elements starts on 4 or 8
    bytes): a row-major B of misaligned rows, read N-major through registers, slowed the
    product 3-5x on an H100, at every size measured (224x241x9669 116 -> 55 us with the
    copies, 2000x2001x2003 379 -> 126, a decode-like 16x12289x8191 703 -> 465): its operands
    are copied from ``cost.TF32_ALIGN_MIN_FLOPS`` on, without a time model (``saved`` and
    ``gemm`` 0). Otherwise (B K-major, or A's rows alone misaligned) the product ran at
    0.62-0.79 of its padded time and the copies pay where ``cost.tf32_align_gain`` says so
    (4095x4097x4093 ``b.T`` 748 -> 587; 1023x1023x8191 ``b.T`` would lose, 160 -> 172). A
    TF32 B that could be transposed to K-major is ``rule_tf32_k_major_b``'s (it runs first;
    its K-major copy has aligned rows when it is made).

    Full-precision float32 (the FMA kernel): only A, read row-major, is copied, from
    ``cost.FMA_ALIGN_MIN_FLOPS`` on, without a time model: on an H100 the copies gained 4-9%
    above that size where A's rows were misaligned, and lost where B's were or the product
    was smaller (``cost.FMA_ALIGN_MIN_FLOPS`` has the figures).

    ``padded``: params whose buffers already have rows padded to 16 bytes (a K-major B that
    ``rule_tf32_k_major_b`` wrote with a ``row_pitch``).

    Returns None when the rule does not concern the kernel (not a float16 or TF32 GEMM, or
    every operand row aligned), else the decision, applied or not, with its sentence for
    ``explain()``.
    """
    if getattr(domain, "kind", None) != "gemm":
        return None
    mm = next(i for i in kernel.body if i.name == domain.matmul)
    precision = str(mm.attrs.get("precision", "ieee"))
    tf32 = mm.dtype.name == "float32" and precision == "tf32"
    fma = mm.dtype.name == "float32" and precision == "ieee"
    if mm.dtype.name != "float16" and not tf32 and not fma:
        return None
    mode = cost.gemm_align_mode()
    operands = list(mm.args)
    if fma and mode != "always":
        # (full precision: A alone, read row-major; reads_n_major takes an operand's last
        # axis as its "N": A's K)
        operands = operands[:1] if reads_n_major(kernel, operands[0]) else []
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    copies: dict[str, tuple[int, int]] = {}  # param -> (its alignment, padded row)
    after = 16  # the worst alignment left once the copies are made
    for operand in operands:
        base = operand_param(kernel, operand)
        reads = [base] if base is not None else \
            [p.name for p in cone_params(kernel, operand) if not p.scalar]
        for name in reads:
            shape, dtype = types[name].shape, types[name].dtype
            if len(shape) < 2 or shape[-1] < 2:
                continue
            align = _row_alignment(shape[-1] * dtype.itemsize)
            if align >= 16 or name in padded:
                continue
            if base is None:  # (computed in the prologue: its loads stay as they are)
                after = min(after, align)
                continue
            per_16 = max(1, 16 // dtype.itemsize)
            copies[name] = (align, -(-shape[-1] // per_16) * per_16)
    if not copies:
        return None
    before = min([after] + [a for a, _ in copies.values()])
    shape = domain.shape
    m, n = shape[-2], shape[-1]
    k = types[mm.args[0]].shape[-1]
    flops = 2.0 * operand_batch(shape) * m * n * k
    moved = sum(p.type.nbytes for p in kernel.params if not p.scalar) + \
        sum(t.nbytes for t in kernel.result_types)
    sizes = [types[name].nbytes for name in copies]
    stores = _row_alignment(n * mm.dtype.itemsize)  # (the product's rows stay where they fall)
    saved, gemm, cost_s = cost.align_gain(flops, moved, before, after, stores, sizes)
    what = " and ".join(f"%{name}'s rows ({types[name].shape[-1] * types[name].dtype.itemsize} "
                        f"bytes, {a}-byte aligned)" for name, (a, _) in copies.items())
    params, pitches = tuple(copies), tuple(pitch for _, pitch in copies.values())
    if mode == "0":
        return AlignDecision(mm.name, params, pitches, False, saved, gemm, cost_s,
                             f"{what} read as they are: FUSEJIT_GEMM_ALIGN=0")
    if mode == "always":
        return AlignDecision(mm.name, params, pitches, True, saved, gemm, cost_s,
                             f"{what} copied to rows padded to 16 bytes before the GEMM: "
                             f"FUSEJIT_GEMM_ALIGN=always")
    if fma:
        return _floor_decision(
            mm.name, what, params, pitches, flops, sizes, cost.FMA_ALIGN_MIN_FLOPS,
            "a full-precision product", "its A is copied to 16-byte rows",
            "full-precision GEMM: its FMA tiles ran 4-9% faster so at 6.6e10-1.4e11 flops "
            "(measured)")
    if tf32:
        b_base = operand_param(kernel, mm.args[1])
        b_n_major = reads_n_major(kernel, mm.args[1])
        if b_n_major and b_base in copies:
            return _floor_decision(
                mm.name, what, params, pitches, flops, sizes, cost.TF32_ALIGN_MIN_FLOPS,
                "a TF32 product", "copies to 16-byte rows are made",
                "TF32 GEMM: a B read N-major through misaligned rows made such products 3-5x "
                "slower (measured)")
        saved, gemm, cost_s = cost.tf32_align_gain(flops, moved, before, b_n_major, sizes)
    elif flops < (floor := cost.GEMM_ALIGN_MIN_FLOPS_K_MAJOR
                  if not (reads_n_major(kernel, mm.args[1])
                          and operand_param(kernel, mm.args[1]) in copies)
                  else cost.GEMM_ALIGN_MIN_FLOPS):
        return AlignDecision(mm.name, params, pitches, False, saved, gemm, cost_s,
                             f"{what} read as they are: a product of {flops:.2g} flops, "
                             f"under the {floor:.0e} from which copies to 16-byte rows were "
                             f"measured to pay")
    if saved <= cost_s:
        return AlignDecision(mm.name, params, pitches, False, saved, gemm, cost_s,
                             f"{what} read as they are: copies to 16-byte rows would cost "
                             f"~{_us(cost_s)} and save ~{_us(saved)} of ~{_us(gemm)}")
    return AlignDecision(mm.name, params, pitches, True, saved, gemm, cost_s,
                         f"{what} copied to rows padded to 16 bytes before the GEMM: saves "
                         f"~{_us(saved)} of ~{_us(gemm)}, the copies cost ~{_us(cost_s)}")


def _floor_decision(matmul: str, what: str, params: tuple[str, ...], pitches: tuple[int, ...],
                    flops: float, sizes: list[int], floor: float, product: str, from_what: str,
                    why: str) -> AlignDecision:
    """``rule_align_gemm_operands``'s decision where a measured size decides, without a time
    model (``saved`` and ``gemm`` are 0): copy from ``floor`` flops on. Full precision
    (``cost.FMA_ALIGN_MIN_FLOPS``) and a TF32 product whose row-major B has misaligned rows
    (``cost.TF32_ALIGN_MIN_FLOPS``); ``product``, ``from_what`` and ``why`` word the
    sentences."""
    cost_s = cost.align_copies_seconds(sizes)
    if flops < floor:
        return AlignDecision(matmul, params, pitches, False, 0.0, 0.0, cost_s,
                             f"{what} read as they are: {product} of {flops:.2g} flops, under "
                             f"the {floor:.0e} from which {from_what}")
    return AlignDecision(matmul, params, pitches, True, 0.0, 0.0, cost_s,
                         f"{what} copied to rows padded to 16 bytes before the {why}, the "
                         f"copies cost ~{_us(cost_s)}")


# -- launch order (decided on the finished plan) ----------------------------------------------

#: The kinds whose programs, in launch order, read and write their buffers front to back:
#: flat blocks, rows, and a split reduction's chunks (chunk index the slow grid axis). A GEMM's
#: tiles, and an outer reduction's column blocks (each reading every row), end elsewhere.
FRONT_TO_BACK_KINDS = ("pointwise", "inner_reduction", "split_reduction")
#: The kinds whose programs may run in reverse (``order=reversed``) without changing a value.
REVERSIBLE_KINDS = ("pointwise", "split_reduction")


def rule_reverse_reread(kernel: Kernel, before: Kernel | None) -> str | None:
    """A pointwise kernel (or split reduction) runs its programs last block first
    (``order=reversed``) when it reads a large buffer that the launch just before it read or
    wrote front to back; returns why, or None to keep the launch order.

    Fuses nothing: it orders the reads of two kernels that fusion had to keep apart. Why: a
    buffer larger than L2 leaves its end in L2 when a kernel has streamed through it (the
    statistics of a batch norm read ``x`` whole, then the normalize reads it again; a full
    ``sum`` then ``x / total``; a kernel's result read by the next one). Read in launch order,
    the second kernel starts at the front, long evicted, and by the time it reaches the end,
    its own reads have pushed the end out of L2 too; read last block first, it begins with
    what L2 still holds (up to about 50 MB on an H100 or H200). A launch that was itself
    reversed left the front in L2, so the next one keeps the order: kernels alternate.
    Pointwise kernels and split reductions (``mean(abs(x - x.mean()))``'s second pass) only:
    a pointwise program writes its own block, and a split reduction's partials combine in
    chunk order whichever program wrote them, so the order changes no value.
    """
    if kernel.kind not in REVERSIBLE_KINDS or before is None or not cost.reverse_rereads():
        return None
    if before.kind not in FRONT_TO_BACK_KINDS or before.attrs.get("order") == "reversed":
        return None
    touched = set(before.args) | set(before.results)
    for arg, param in zip(kernel.args, kernel.params):
        if arg in touched and not param.scalar \
                and param.type.nbytes >= cost.REVERSE_REREAD_MIN_BYTES:
            how = "wrote" if arg in before.results else "read"
            return (f"reads %{arg} ({param.type.nbytes / 1e6:.3g} MB), which @{before.name} "
                    f"{how} front to back just before: its end is what L2 still holds")
    return None
