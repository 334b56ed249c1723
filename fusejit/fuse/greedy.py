"""The greedy fusion pass: regions grown over the topological order.

Each instruction, in program order, tries to join a region:

1. the union of the regions that compute its operands (vertical fusion:
   pointwise chains, prologues, epilogues, reduce-then-broadcast; several
   producer regions merge into one when that is legal);
2. failing that, each producer region alone (operands from the other regions
   are then recomputed when cheap, else written to memory);
3. with no producer region at all, a region that already reads one of its
   operands (horizontal fusion of siblings: ``sum(x,-1)`` with ``max(x,-1)``);
4. else a new region.

Every growth is checked by the rules of ``rules.py`` (the last of which is
the domain analysis ``region_domain``). A refused growth is a boundary: the
operand is *materialized* (its region writes it) unless the cost model
(``cost.py``) says to *recompute* it in the consumer's region. After the
walk, independent pointwise regions of one shape merge (several outputs in
one launch), each region's writes are fixed (requested outputs and values
read by other regions), and regions become ``Kernel`` blocks in dependency
order.

A ``matmul`` is treated like a reduction: it and every value computed from it
are not free (never recomputed elsewhere). It joins the regions of its
operands' producers when they are a cheap prologue (``rule_gemm_prologue``),
else starts a region of its own, recomputing an operand from another region
only under the same cost rule (``gemm_prologue_refusal``); the product's
consumers then join it as its epilogue.

Constants and iotas that are not outputs never get a region of their own:
they are cloned into every region that uses them (they cost nothing).
Kernel blocks already in the program (user-edited fused text) are fixed
regions: they are used as written and nothing joins them.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..errors import FusejitError
from ..ir.domain import Domain, RegionError, region_domain, squeezed
from ..ir.ops import LEAF, REDUCE, VIEW
from ..ir.program import Instr, Kernel, Param, Program, TensorType
from . import cost
from .rules import (
    Candidate,
    Prologue,
    first_refusal,
    gemm_prologue_refusal,
    gemm_prologue_unsupported,
)

log = logging.getLogger("fusejit.fusion")
Shape = tuple[int, ...]
#: an empty mapping of written values (a default argument that is never changed)
_NOTHING: Mapping[str, Shape] = MappingProxyType({})
_NO_LIMIT = 1 << 60

#: Tests set this to run ``region_domain`` on every accepted growth, proving that the
#: incremental rules never accept what the domain analysis would refuse.
CHECK_EVERY_GROWTH = False


@dataclass
class Boundary:
    """A value written to memory, and why (``explain`` prints these)."""

    value: str
    producer: Any          # the Region (resolved to a kernel name when the plan is built)
    consumer: str          # the instruction that reads it elsewhere, or "return"
    rule: str
    reason: str


@dataclass
class Recompute:
    """A value recomputed inside another region instead of being written."""

    value: str
    region: Any
    consumer: str
    cost: int
    reason: str


@dataclass
class Note:
    """A fusion that was tried and refused without creating a boundary (e.g. siblings)."""

    instr: str
    region: Any
    rule: str
    reason: str


class Region:
    """A region under construction: the instructions of one future kernel."""

    __slots__ = ("id", "instrs", "own", "params", "reductions", "row", "yields", "anchor",
                 "frozen", "parent", "min_index", "max_index", "deps", "kernel_name", "matmuls")

    def __init__(self, rid: int, index: int) -> None:
        self.id = rid
        self.instrs: dict[str, Instr] = {}        # own and cloned values, by name
        self.own: set[str] = set()                # values whose home is this region
        self.params: dict[str, None] = {}         # outer names read (ordered set)
        self.reductions: list[tuple[str, Shape, tuple[int, ...]]] = []
        self.row: set[str] = set()                # values computed from a reduction or product
        self.matmuls: list[tuple[str, Shape]] = []  # the product of a GEMM region, with its shape
        self.yields: dict[str, Shape] = {}        # values known to be written
        self.anchor: Shape | None = None          # the shape the region iterates over
        self.frozen: Kernel | None = None         # a user-written kernel block
        self.parent: Region | None = None         # set when merged into another region
        self.min_index = index
        self.max_index = index
        self.deps: set[Region] = set()            # regions whose values this one reads
        self.kernel_name = f"r{rid}"

    def find(self) -> Region:
        """The live region this one was merged into (itself if it was not)."""
        r = self
        while r.parent is not None:
            r = r.parent
        node = self
        while node.parent is not None and node.parent is not r:  # path compression
            node.parent, node = r, node.parent
        return r

    def __repr__(self) -> str:
        return f"Region({self.id}, {len(self.instrs)} instrs)"


@dataclass
class Choice:
    """How a consumer outside region ``region`` gets operand ``value``."""

    how: str  # "read" (already written), "write" (materialize), "clone", "stuck" (neither)
    value: str
    region: Region
    cone: list[Instr] = field(default_factory=list)
    cone_params: list[str] = field(default_factory=list)
    cost: int = 0
    reason: str = ""


@dataclass
class FusedRegion:
    """One finished region: its Kernel block, domain, and what it fused."""

    kernel: Kernel
    domain: Domain
    region: Region


def _copy(i: Instr) -> Instr:
    return Instr(i.name, i.op, i.args, dict(i.attrs), i.type, i.line, i.column)


class GreedyFuser:
    """One run of the greedy pass over a Program (see the module docstring)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.types: dict[str, TensorType] = program.types()
        self.shapes: dict[str, Shape] = {n: t.shape for n, t in self.types.items()}
        self.itemsizes: dict[str, int] = {n: t.dtype.itemsize for n, t in self.types.items()}
        self.index: dict[str, int] = {p.name: -1 for p in program.inputs}
        #: inputs passed by value: kernel params that are not buffers (no loads, no limit)
        self.scalars = program.scalar_inputs
        self.outputs = set(program.outputs)
        self.home: dict[str, Region] = {}
        self.floating: dict[str, Instr] = {}
        self.readers: dict[str, list[Region]] = {}
        self.regions: list[Region] = []
        self.boundaries: list[Boundary] = []
        self.recomputes: list[Recompute] = []
        self.notes: list[Note] = []
        self.debug = log.isEnabledFor(logging.DEBUG)

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> list[FusedRegion]:
        """Fuse the whole program; returns the finished regions in launch order."""
        live = self._live()
        for k, stmt in enumerate(self.program.body):
            if isinstance(stmt, Instr) and stmt.name not in live:
                continue  # dead code (possible in text programs): not computed at all
            if isinstance(stmt, Kernel):
                self._add_frozen(stmt, k)
            else:
                self.index[stmt.name] = k
                self._add(stmt, k)
        self._horizontal()
        return self._finish()

    def _live(self) -> set[str]:
        """Names the outputs depend on (kernel blocks are kept whole, so their args are live)."""
        live = set(self.program.outputs)
        for stmt in reversed(self.program.body):
            if isinstance(stmt, Kernel):
                live.update(stmt.args)
            elif stmt.name in live:
                live.update(stmt.args)
        return live

    def _new_region(self, index: int) -> Region:
        region = Region(len(self.regions), index)
        self.regions.append(region)
        return region

    def _add_frozen(self, kernel: Kernel, k: int) -> None:
        region = self._new_region(k)
        region.frozen = kernel
        for name in kernel.results:
            self.index[name] = k
            self.home[name] = region
            region.own.add(name)
            region.yields[name] = self.shapes[name]
        for a in kernel.args:
            region.params[a] = None
            producer = self._region_of(a)
            if producer is not None:
                region.deps.add(producer)

    def _region_of(self, name: str) -> Region | None:
        region = self.home.get(name)
        return region.find() if region is not None else None

    def _add(self, instr: Instr, k: int) -> None:
        if instr.op in LEAF and instr.name not in self.outputs:
            self.floating[instr.name] = instr
            return
        producers: list[Region] = []
        for a in instr.args:
            r = self._region_of(a)
            if r is not None and r.frozen is None and r not in producers:
                producers.append(r)
        attempts: list[tuple[tuple[Region, ...], bool]] = []
        if len(producers) > 1:
            attempts.append((tuple(producers), False))
        if producers:
            # join first the region whose operand cannot be recomputed cheaply, then the latest
            def preference(r: Region) -> tuple[bool, int]:
                cheap = all(self._cone(r, a, cost.MAX_RECOMPUTE_COST, cost.MAX_RECOMPUTE_LOADS)
                            is not None for a in instr.args if self._region_of(a) is r)
                return cheap, -r.max_index
            attempts.extend(((r,), False) for r in sorted(producers, key=preference))
        elif instr.op != "matmul":  # a product is never a sibling (one GEMM per kernel)
            siblings = self._siblings(instr)
            if instr.op in REDUCE:
                # a reduction joins first a region that already reduces its domain (batch
                # norm's m2 beside the mean's sum), not one that merely reads the same input
                domain = (self.shapes[instr.args[0]], tuple(instr.attrs["axes"]))
                siblings.sort(key=lambda r: not any((s, a) == domain for _, s, a in r.reductions))
            for r in siblings:
                attempts.append(((r,), True))
        refusals: dict[Region, tuple[str, str]] = {}
        for regions, sibling in attempts:
            cand, choices = self._candidate(instr, regions, sibling)
            refusal = first_refusal(cand)
            if refusal is None and CHECK_EVERY_GROWTH and not cand.needs_probe and regions:
                self._check_growth(cand)
            if refusal is None:
                self._commit(instr, k, regions, cand, choices, refusals)
                return
            for r in regions:
                refusals.setdefault(r, refusal)
            if sibling:
                self.notes.append(Note(instr.name, r, *refusal))
            if self.debug:
                log.debug("%%%s not fused into %s: %s: %s", instr.name,
                          "+".join(f"r{r.id}" for r in regions), *refusal)
        cand, choices = self._candidate(instr, (), False)
        self._commit(instr, k, (), cand, choices, refusals)

    def _check_growth(self, cand: Candidate) -> None:
        try:
            region_domain(cand.probe())
        except RegionError as exc:
            raise FusejitError(f"internal error in the fusion pass: the rules accepted "
                               f"%{cand.instr.name} into {'+'.join(cand.regions)} but the domain "
                               f"analysis refuses it: {exc.reason}") from None

    def _siblings(self, instr: Instr) -> list[Region]:
        """Live regions that read an operand of ``instr`` (latest first, a few at most)."""
        out: list[Region] = []
        for a in instr.args:
            if a in self.scalars:
                continue  # a scalar param costs no memory traffic: no reason to share a kernel
            for r in reversed(self.readers.get(a, ())):
                r = r.find()
                if r.frozen is None and r not in out:
                    out.append(r)
                if len(out) >= 4:
                    return out
        return out

    # -- operands from other regions: recompute or materialize ------------------------
    def _cone(self, region: Region, value: str, max_cost: int, max_loads: int,
              written: Mapping[str, Shape] = _NOTHING) -> tuple[list[Instr], list[str], int] | None:
        """The free instructions of ``region`` that ``value`` needs, within the limits, or None.

        Stops at the region's params and at values it already writes, or that ``written``
        says it will (reading those is as cheap as anything). None when a reduction is in the
        cone.
        """
        instrs: list[Instr] = []
        params: list[str] = []
        seen: set[str] = set()
        total = 0
        stack = [value]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            ins = region.instrs.get(n)
            if ins is None or (n != value and (n in region.yields or n in written)):
                params.append(n)
                if len(params) > max_loads:
                    return None
                continue
            if ins.op in REDUCE or ins.op == "matmul" or n in region.row:
                return None
            total += cost.op_cost(ins.op)
            if total > max_cost:
                return None
            instrs.append(ins)
            stack.extend(ins.args)
        return instrs, params, total

    def _fits(self, region: Region, value: str, written: Mapping[str, Shape] = _NOTHING) -> bool:
        """Whether ``region`` can write ``value`` (its shape fits the region's one domain).

        ``written``: values the same candidate already chose to have ``region`` write (not
        yet among its yields): a pointwise region writes one shape, so of a product of a
        value and its transpose, both from one region, the region writes one (float64
        softmax over axis 0 times its transpose: the fuzzer's TF32 mode, seed 101).
        """
        shape = self.shapes[value]
        if region.matmuls and not region.reductions:
            d = region.matmuls[0][1]
            return shape == d or squeezed(shape) == squeezed(d)
        if region.reductions:
            _, d, axes = region.reductions[0]
            return shape == d or shape == tuple(x for i, x in enumerate(d) if i not in axes) \
                or shape == tuple(1 if i in axes else x for i, x in enumerate(d))
        return all(s == shape for s in (*region.yields.values(), *written.values()))

    def _choose(self, region: Region, value: str, avoid: set[str],
                operand_of: tuple[Instr, int] | None = None,
                written: Mapping[str, Shape] = _NOTHING) -> Choice:
        """Recompute (cheap and free), read (already written) or write ``value`` of ``region``.

        A cone that reads a value of ``avoid`` (computed from a reduction in the
        consumer's region) is not cloned: the clone would stop being free there.
        ``operand_of``: ``value`` is operand ``i`` of that ``matmul``, recomputed
        only under the GEMM prologue rule. ``written``: as ``_fits``.
        """
        if value in region.yields:
            return Choice("read", value, region)
        if operand_of is not None:
            return self._choose_operand(region, value, *operand_of, written=written)
        cone = self._cone(region, value, cost.MAX_RECOMPUTE_COST, cost.MAX_RECOMPUTE_LOADS)
        if cone is not None and avoid.isdisjoint(cone[1]):
            return Choice("clone", value, region, cone[0], cone[1], cone[2],
                          f"free of reductions and cheap (cost {cone[2]} <= "
                          f"{cost.MAX_RECOMPUTE_COST}, {len(cone[1])} loads)")
        if self._fits(region, value, written):
            return Choice("write", value, region)
        cone = self._cone(region, value, _NO_LIMIT, _NO_LIMIT, written)
        if cone is not None and avoid.isdisjoint(cone[1]):
            return Choice("clone", value, region, cone[0], cone[1], cone[2],
                          f"its shape {list(self.shapes[value])} is not one its kernel can "
                          f"write, and it is free of reductions")
        return Choice("stuck", value, region, reason=(
            f"%{value} can neither be written by its kernel (shape {list(self.shapes[value])}) "
            f"nor recomputed here"))

    def _choose_operand(self, region: Region, value: str, mm: Instr, index: int,
                        written: Mapping[str, Shape] = _NOTHING) -> Choice:
        """Recompute operand ``index`` of ``mm`` from ``region`` as a GEMM prologue, or write it.

        An operand the region cannot write (its other operand, of another shape, is written
        there: ``written``) is recomputed whatever the prologue's cost, from what the region
        writes where it can (a transpose of the written operand is a view of it)."""
        cone = self._cone(region, value, _NO_LIMIT, _NO_LIMIT, written)
        if cone is not None:
            prologue = Prologue(index, value, cone[0], cone[1])
            reason = gemm_prologue_refusal(prologue, mm, self.shapes, self.itemsizes)
            if reason is None:
                return Choice("clone", value, region, cone[0], cone[1], cone[2],
                              f"a pointwise producer of an operand of %{mm.name}, applied while "
                              f"its tiles load (cost {cone[2]})")
        else:
            reason = None
        if self._fits(region, value, written):
            return Choice("write", value, region, reason=reason or "")
        if cone is not None and not gemm_prologue_unsupported(prologue, mm, self.itemsizes):
            return Choice("clone", value, region, cone[0], cone[1], cone[2],
                          f"its shape {list(self.shapes[value])} is not one its kernel can write "
                          f"beside the other operand, so it is computed while its tiles load")
        if cone is not None:  # (a kernel of its own writes it: ``_side_region``)
            return Choice("stuck", value, region, cone[0], cone[1], cone[2], reason=(
                f"%{value} can be neither written by its kernel (shape "
                f"{list(self.shapes[value])}) nor computed while the tiles of %{mm.name} load: "
                f"a kernel of its own writes it"))
        return Choice("stuck", value, region, reason=(
            f"%{value} can neither be written by its kernel (shape {list(self.shapes[value])}) "
            f"nor recomputed as a prologue of %{mm.name}"))

    def _prologue(self, body: dict[str, Instr], row: set[str], mm: Instr, index: int) -> Prologue:
        """The free producers of operand ``index`` of ``mm`` among ``body`` (a grown region)."""
        operand = mm.args[index]
        instrs: list[Instr] = []
        params: list[str] = []
        blocked = None
        seen: set[str] = set()
        stack = [operand]
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            ins = body.get(n)
            if ins is None:
                params.append(n)
            elif ins.op in REDUCE or ins.op == "matmul" or n in row:
                blocked = blocked or n
            else:
                instrs.append(ins)
                stack.extend(ins.args)
        return Prologue(index, operand, instrs, params, blocked)

    # -- candidates ------------------------------------------------------------------
    def _candidate(self, instr: Instr, regions: tuple[Region, ...], sibling: bool
                   ) -> tuple[Candidate, list[Choice]]:
        """The Candidate for adding ``instr`` to the union of ``regions`` (none: a new region)."""
        members = set(regions)
        merged = len(regions) > 1
        instrs: dict[str, Instr]
        if merged:
            instrs = {}
            for r in regions:
                instrs.update(r.instrs)
        else:
            instrs = regions[0].instrs if regions else {}
        if merged:
            avoid = set().union(*(r.row for r in regions))
        else:
            avoid = regions[0].row if regions else set()
        choices: list[Choice] = []
        clones: dict[str, Instr] = {}
        new_params: dict[str, None] = {}
        writes: dict[Region, dict[str, Shape]] = {}  # what this candidate has each region write
        for a in dict.fromkeys(instr.args):
            if a in instrs:
                continue
            if a in self.floating:
                clones[a] = self.floating[a]
                continue
            r = self._region_of(a)
            if r is None or r.frozen is not None:
                new_params[a] = None
                continue
            if r in members:
                continue
            operand_of = (instr, instr.args.index(a)) if instr.op == "matmul" else None
            choice = self._choose(r, a, avoid, operand_of, writes.get(r, _NOTHING))
            choices.append(choice)
            if choice.how == "write":
                writes.setdefault(r, {})[a] = self.shapes[a]
            if choice.how == "clone":
                for ins in choice.cone:
                    if ins.name not in instrs:
                        clones[ins.name] = ins
                for p in choice.cone_params:
                    if p not in instrs and p not in clones:
                        new_params[p] = None
            else:
                new_params[a] = None
        # params after the growth: the members' params that stay outer, plus the new ones
        if merged:
            params: dict[str, None] = {}
            for r in regions:
                params.update(r.params)
            own = set().union(*(r.own for r in regions))
            params = {p: None for p in params if p not in own}
        else:
            params = regions[0].params if regions else {}
        added = [p for p in new_params if p not in params and p not in clones]
        scalars = self.scalars
        num_inputs = sum(1 for p in params if p not in scalars) + \
            sum(1 for p in added if p not in scalars)
        size = len(instrs) + len(clones) + (instr.name not in instrs)
        # reductions, products and values computed from them
        is_reduction = instr.op in REDUCE
        is_root = is_reduction or instr.op == "matmul"
        reductions = [x for r in regions for x in r.reductions]
        matmuls = [x for r in regions for x in r.matmuls]
        if instr.op == "matmul":
            matmuls = matmuls + [(instr.name, instr.shape)]
        if is_reduction:
            reductions = reductions + [(instr.name, self.shapes[instr.args[0]],
                                        tuple(instr.attrs["axes"]))]
        if merged:
            row, row_instrs = self._row_values(instrs, instr)
        else:
            base_row = regions[0].row if regions else set()
            row_dep = not is_root and any(a in base_row for a in instr.args)
            row_instrs = [instr] if row_dep else []
            row = base_row | {instr.name} if (row_dep or is_root) else base_row
        yields: dict[str, Shape]
        if merged or instr.name in self.outputs:
            yields = {}
            for r in regions:
                yields.update(r.yields)
            if instr.name in self.outputs:
                yields[instr.name] = instr.shape
        else:
            yields = regions[0].yields if regions else {}
        ext_regions: dict[Region, str] = {}
        for p in (params if merged else added):
            r = self._region_of(p)
            if r is not None and r not in members:
                ext_regions.setdefault(r, p)

        def cycle() -> str | None:
            return self._cycle(regions, ext_regions)

        def probe() -> Kernel:
            body = dict(instrs)
            body.update(clones)
            body[instr.name] = instr
            return self._kernel("probe", body, yields)

        prologue: list[Prologue] = []
        if instr.op == "matmul":
            body = {**instrs, **clones}
            prologue = [self._prologue(body, row, instr, i) for i in range(2)]
        cand = Candidate(
            instr=instr, regions=tuple(f"r{r.id}" for r in regions), sibling=sibling,
            frozen=any(r.frozen is not None for r in regions), size=size, num_inputs=num_inputs,
            reductions=reductions, row_instrs=row_instrs, row=row, shapes=self.shapes,
            itemsizes=self.itemsizes,
            yields=yields, anchor=regions[0].anchor if regions else None, cycle=cycle,
            probe=probe, needs_probe=bool(regions) and (merged or is_root or bool(row_instrs)
                                                        or bool(matmuls)),
            stuck=next((c.reason for c in choices if c.how == "stuck"), None),
            matmuls=matmuls, prologue=prologue,
            extra={"is_reduction": is_reduction, "clones": clones, "params": params,
                   "added": added})
        return cand, choices

    def _row_values(self, instrs: dict[str, Instr], extra: Instr | None
                    ) -> tuple[set[str], list[Instr]]:
        """Values computed from a reduction in a merged region, and the non-reductions among them."""
        body = sorted(instrs.values(), key=lambda i: self.index[i.name])
        if extra is not None and extra.name not in instrs:
            body.append(extra)
        row: set[str] = set()
        row_instrs: list[Instr] = []
        for ins in body:
            if ins.op in REDUCE or ins.op == "matmul":
                row.add(ins.name)
            elif any(a in row for a in ins.args):
                row.add(ins.name)
                row_instrs.append(ins)
        return row, row_instrs

    def _cycle(self, regions: tuple[Region, ...], ext: dict[Region, str]) -> str | None:
        """A sentence when some region read by the grown region depends on one of ``regions``.

        ``ext`` maps each region the grown region would read to a value read from it.
        """
        if not regions or not ext:
            return None
        members = set(regions)
        low = min(r.min_index for r in regions)
        for start in ext:
            stack = [start]
            seen: set[Region] = set()
            while stack:
                r = stack.pop().find()
                if r in seen:
                    continue
                seen.add(r)
                if r in members:
                    return (f"the kernel would read %{ext[start]} from another kernel that "
                            f"itself needs a value of this one (a cycle)")
                # a region with nothing after the members' first instruction cannot depend on them
                if r.max_index < low:
                    continue
                stack.extend(r.deps)
        return None

    # -- commit ----------------------------------------------------------------------
    def _commit(self, instr: Instr, k: int, regions: tuple[Region, ...], cand: Candidate,
                choices: list[Choice], refusals: dict[Region, tuple[str, str]]) -> None:
        if regions:
            target = regions[0]
            for r in regions[1:]:
                self._absorb(target, r)
        else:
            target = self._new_region(k)
        clones: dict[str, Instr] = cand.extra["clones"]
        target.instrs.update(clones)
        target.instrs[instr.name] = instr
        target.own.add(instr.name)
        self.home[instr.name] = target
        if len(regions) > 1:
            target.params = dict(cand.extra["params"])
        for p in cand.extra["added"]:
            target.params[p] = None
            self.readers.setdefault(p, []).append(target)
            producer = self._region_of(p)
            if producer is not None and producer is not target:
                target.deps.add(producer)
        target.reductions = cand.reductions
        target.matmuls = cand.matmuls
        target.row = cand.row
        if instr.name in self.outputs:
            target.yields[instr.name] = instr.shape
            self.boundaries.append(Boundary(instr.name, target, "return", "requested_output",
                                            "it is an output of the program"))
        if target.matmuls:
            target.anchor = target.matmuls[0][1]
        elif target.reductions:
            target.anchor = target.reductions[0][1]
        elif instr.op not in VIEW or target.anchor is None:
            target.anchor = instr.shape
        target.max_index = max(target.max_index, k)
        for choice in choices:
            r = choice.region
            if choice.how == "clone":
                self.recomputes.append(Recompute(choice.value, target, instr.name, choice.cost,
                                                 choice.reason))
                if self.debug:
                    log.debug("%%%s recomputed in r%d for %%%s: %s", choice.value, target.id,
                              instr.name, choice.reason)
                continue
            if choice.how == "stuck" and choice.cone:
                r = self._side_region(choice, k)
            elif choice.how in ("write", "stuck"):
                r.yields[choice.value] = self.shapes[choice.value]
            rule, reason = refusals.get(r, ("", ""))
            if not rule and choice.reason:
                rule, reason = "gemm_prologue", choice.reason
            if not rule:
                rule, reason = "joined_elsewhere", (
                    f"%{instr.name} joined another kernel, where this value is not computed")
            self.boundaries.append(Boundary(choice.value, r, instr.name, rule, reason))
            if self.debug:
                log.debug("%%%s materialized by r%d for %%%s: %s: %s", choice.value, r.id,
                          instr.name, rule, reason)
        if self.debug:
            log.debug("%%%s = %s joined r%d (%d instrs)", instr.name, instr.op, target.id,
                      len(target.instrs))

    def _side_region(self, choice: Choice, k: int) -> Region:
        """A kernel of its own for a value its region cannot write (it writes another shape)
        and its consumer cannot recompute (``choice``, stuck with a free cone): the cone is
        cloned into a new pointwise region, which writes the value (its home from now on).
        A float64 product whose operands are the transposes of one value converted from
        1-byte elements (``fusejit fuzz --products``, seed 14451) needs it."""
        side = self._new_region(k)
        side.min_index = choice.region.min_index
        for ins in choice.cone:
            side.instrs[ins.name] = ins
        side.params = dict.fromkeys(choice.cone_params)
        for p in choice.cone_params:
            self.readers.setdefault(p, []).append(side)
            producer = self._region_of(p)
            if producer is not None:
                side.deps.add(producer)
        value = choice.value
        choice.region.own.discard(value)
        side.own.add(value)
        self.home[value] = side
        # the value's readers (the consumer being committed among them) now read it from
        # here: the cycle check walks these edges (a merge of this region with one reading
        # what the consumer computes would otherwise pass it: fuzz --large-plans, seed 27003)
        for reader in self.readers.get(value, []):
            reader = reader.find()
            if reader is not side:
                reader.deps.add(side)
        side.yields[value] = side.anchor = self.shapes[value]
        if self.debug:
            log.debug("%%%s written by a region of its own, r%d", value, side.id)
        return side

    def _absorb(self, target: Region, other: Region) -> None:
        """Merge ``other`` into ``target`` (the candidate was checked)."""
        target.instrs.update(other.instrs)
        target.own |= other.own
        target.params.update(other.params)
        target.yields.update(other.yields)
        target.matmuls = target.matmuls + other.matmuls
        target.deps |= other.deps
        target.deps.discard(target)
        target.deps.discard(other)
        target.min_index = min(target.min_index, other.min_index)
        target.max_index = max(target.max_index, other.max_index)
        other.parent = target
        if self.debug:
            log.debug("r%d merged into r%d", other.id, target.id)

    # -- horizontal fusion of independent pointwise regions ----------------------------
    def _horizontal(self) -> None:
        """Merge independent pointwise regions that write one shape (several outputs, one launch)."""
        groups: dict[Shape, Region] = {}
        for region in self.regions:
            if (region.parent is not None or region.frozen is not None or region.reductions
                    or region.matmuls):
                continue
            shapes = set(region.yields.values())
            if len(shapes) != 1:
                continue
            shape = shapes.pop()
            first = groups.get(shape)
            if first is None:
                groups[shape] = region
                continue
            first = first.find()
            cand = self._merge_candidate(first, region)
            refusal = first_refusal(cand)
            if refusal is None:
                self._absorb(first, region)
                first.params = dict(cand.extra["params"])
                first.row = set()
                for p in first.params:
                    self.readers.setdefault(p, []).append(first)
            else:
                self.notes.append(Note(next(iter(region.yields)), first, *refusal))
                groups[shape] = region  # later regions try the latest one

    def _merge_candidate(self, a: Region, b: Region) -> Candidate:
        regions = (a, b)
        instrs = {**a.instrs, **b.instrs}
        own = a.own | b.own
        params = {p: None for r in regions for p in r.params if p not in own}
        ext: dict[Region, str] = {}
        for p in params:
            r = self._region_of(p)
            if r is not None and r is not a and r is not b:
                ext.setdefault(r, p)
        yields = {**a.yields, **b.yields}

        def cycle() -> str | None:
            return self._cycle(regions, ext)

        def probe() -> Kernel:
            return self._kernel("probe", instrs, yields)

        last = max(instrs.values(), key=lambda i: self.index[i.name])
        return Candidate(
            instr=last, regions=(f"r{a.id}", f"r{b.id}"), sibling=False, frozen=False,
            size=len(instrs), num_inputs=sum(1 for p in params if p not in self.scalars),
            reductions=[], row_instrs=[], row=set(),
            shapes=self.shapes, itemsizes=self.itemsizes, yields=yields, anchor=None, cycle=cycle,
            probe=probe,
            needs_probe=True, extra={"params": params})

    # -- finishing: writes, order, Kernel blocks -----------------------------------------
    def _kernel(self, name: str, body_map: dict[str, Instr], yields: Any, copy: bool = False
                ) -> Kernel:
        """A Kernel block from a region's instructions (body in program order).

        Probes share the program's Instr objects; emitted kernels (``copy``)
        get their own, so that no two kernels (or the input program) alias one.
        """
        body = sorted(body_map.values(), key=lambda i: self.index[i.name])
        defined: set[str] = set()
        params: dict[str, None] = {}
        for ins in body:
            for a in ins.args:
                if a not in defined:
                    params[a] = None
            defined.add(ins.name)
        ys = tuple(sorted((y for y in yields if y in defined), key=self.index.__getitem__))
        ordered = sorted(params, key=self.index.__getitem__)
        return Kernel(name, ys, tuple(ordered),
                      tuple(Param(p, self.types[p], p in self.scalars) for p in ordered),
                      [_copy(i) for i in body] if copy else body, ys, tuple(self.types[y] for y in ys),
                      {"kind": ""})

    def _finish(self) -> list[FusedRegion]:
        live = [r for r in self.regions if r.parent is None]
        read_elsewhere: set[str] = set()
        for r in live:
            if r.frozen is not None:
                read_elsewhere.update(r.frozen.args)
                continue
            own_body = r.instrs
            for ins in own_body.values():
                for a in ins.args:
                    if a not in own_body:
                        read_elsewhere.add(a)
        needed = read_elsewhere | self.outputs
        out: dict[Region, FusedRegion] = {}
        for r in live:
            if r.frozen is not None:
                out[r] = FusedRegion(r.frozen, region_domain(r.frozen), r)
                continue
            yields = [y for y in r.own if y in needed]
            if not yields:
                continue  # every use was recomputed elsewhere
            kernel = self._kernel(r.kernel_name, r.instrs, yields, copy=True)
            try:
                domain = region_domain(kernel)
            except RegionError as exc:
                raise FusejitError(f"internal error in the fusion pass: region r{r.id} cannot be "
                                   f"one kernel: {exc.reason}") from None
            kernel.attrs["kind"] = domain.kind
            out[r] = FusedRegion(kernel, domain, r)
        return self._order(out)

    def _order(self, fused: dict[Region, FusedRegion]) -> list[FusedRegion]:
        """Regions in dependency order (Kahn's algorithm, earliest instruction first on ties)."""
        producer: dict[str, Region] = {}
        for r, f in fused.items():
            for name in f.kernel.results:
                producer[name] = r
        waiting: dict[Region, int] = {}
        users: dict[Region, list[Region]] = {r: [] for r in fused}
        for r, f in fused.items():
            srcs = {producer[a] for a in f.kernel.args if a in producer} - {r}
            waiting[r] = len(srcs)
            for s in srcs:
                users[s].append(r)
        heap = [(r.min_index, r.id, r) for r in fused if waiting[r] == 0]
        heapq.heapify(heap)
        order: list[FusedRegion] = []
        while heap:
            _, _, r = heapq.heappop(heap)
            order.append(fused[r])
            for u in users[r]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(heap, (u.min_index, u.id, u))
        if len(order) != len(fused):
            raise FusejitError("internal error in the fusion pass: kernels depend on each other "
                               "in a cycle")
        return order
