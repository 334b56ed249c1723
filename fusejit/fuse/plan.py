"""The Plan: the fused Program, one entry per launch, and why each boundary exists.

``Plan.program`` is what runs (every statement a ``Kernel`` block),
``Plan.kernels`` has one ``Launch`` per kernel launch (a split-K GEMM is a
declared pair: a ``partial`` and a ``final`` launch of one block; a split
reduction is one launch whose last program per row block finishes it), and
``Plan.explain()`` says what each kernel fused, why every value that crosses
between kernels is written to memory, and which values were recorded for a
specific scalar value (``x ** 2`` as ``square``, as NumPy computes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import ir_name
from ..ir.domain import GEMM, SPLIT_REDUCTION, Domain
from ..ir.ops import LEAF, VIEW
from ..ir.program import Kernel, Program

#: Functions that describe how a kernel is tiled (set by the code generator: the fuser decides
#: regions, codegen decides tiles, and ``explain()`` shows both without importing codegen).
TILING_DESCRIBERS: list[Callable[[Kernel], list[str]]] = []


@dataclass(frozen=True)
class Traffic:
    """Bytes moved through memory: the fused plan against one kernel per op.

    ``fused_read``/``fused_written``: each kernel reads its params and writes
    its results once (split reductions' small partials are not counted).
    ``unfused``: every op (views and constants excepted: they fold into loads)
    as its own kernel, reading its operands (a view counted at the size of the
    value it views) and writing its result: ``sigmoid(x * y + z)`` moves 8
    arrays op by op and 4 fused.
    """

    fused_read: int
    fused_written: int
    unfused: int

    @property
    def fused(self) -> int:
        """Bytes read plus bytes written by the fused plan."""
        return self.fused_read + self.fused_written


@dataclass
class Launch:
    """One kernel launch: the Kernel block it runs and what it reads and writes."""

    kernel: Kernel
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    domain: Domain
    #: "" for a single launch; "partial" or "final" for the two launches of a split-K GEMM
    stage: str = ""

    @property
    def name(self) -> str:
        """Name of the Kernel block it runs."""
        return self.kernel.name


@dataclass
class Plan:
    """What runs for one program structure, and the record of the fuser's decisions."""

    program: Program
    kernels: list[Launch] = field(default_factory=list)
    #: (value, producer kernel, consumer, rule, reason) for every value written to memory
    boundaries: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    #: (value, kernel, consumer, cost, reason) for every value recomputed instead
    recomputed: list[tuple[str, str, str, int, str]] = field(default_factory=list)
    #: (instruction, kernel, rule, reason) for fusions tried and refused without a boundary
    notes: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: "fused" (by the greedy pass), "user" (every region as written) or "mixed"
    source: str = "fused"
    #: (operand, GEMM kernel, rule, sentence) for every operand layout a rule decided on
    #: (``rules.rule_tf32_k_major_b``: a B transposed to K-major by a pass of its own, or not)
    layouts: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: (kernel, rule, sentence) for every kernel whose programs run in reverse order
    #: (``rules.rule_reverse_reread``)
    orders: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def num_launches(self) -> int:
        """Number of kernel launches (a split-K GEMM counts two)."""
        return len(self.kernels)

    @property
    def regions(self) -> list[Kernel]:
        """The Kernel blocks, one per region (a split reduction counts once here)."""
        return self.program.kernels

    def __str__(self) -> str:
        return str(self.program)

    def traffic(self) -> Traffic:
        """Memory traffic of the fused plan and of running one kernel per op (``Traffic``)."""
        read = written = unfused = 0
        seen: set[str] = set()
        for k in self.program.kernels:
            types = {p.name: p.type for p in k.params}
            types.update({i.name: i.type for i in k.body})
            read += sum(p.type.nbytes for p in k.params)
            written += sum(t.nbytes for t in k.result_types)
            defs = {i.name: i for i in k.body}
            for i in k.body:
                if i.name in seen or i.op in VIEW or i.op in LEAF:
                    continue
                seen.add(i.name)
                unfused += i.type.nbytes + sum(_viewed_nbytes(a, defs, types) for a in i.args)
        return Traffic(read, written, unfused)

    def explain(self) -> str:
        """Every kernel and what it fused, then every boundary and why, as readable text."""
        p = self.program
        n_blocks = len(p.kernels)
        lines = [f"plan for @{p.name}: {n_blocks} kernel{'s' if n_blocks != 1 else ''}, "
                 f"{self.num_launches} launch{'es' if self.num_launches != 1 else ''}"
                 + ("" if self.source == "fused" else f" (regions: {self.source})")]
        for k in p.kernels:
            launches = [x for x in self.kernels if x.kernel is k]
            dom = launches[0].domain if launches else None
            where = ""
            if dom is not None:
                where = f", domain {list(dom.shape)}"
                if dom.reduced:
                    where += f" reduced over axes {list(dom.reduced)}"
            split = ""
            if k.kind == SPLIT_REDUCTION:
                count = f"split={k.attrs['split']}, " if "split" in k.attrs else ""
                split = (f", {count}one launch: partials, then the last program of each row "
                         f"block combines them")
            if k.kind == GEMM and "block_m" in k.attrs:
                a = k.attrs
                split = (f", tiles {a['block_m']}x{a['block_n']}x{a['block_k']}, "
                         f"{a.get('num_warps')} warps, {a.get('num_stages')} stages")
                if a.get("split_k", 1) > 1:
                    split += f", split_k={a['split_k']}: partials + combine launch"
            lines.append(f"kernel @{k.name} ({k.kind}{where}{split})")
            ops = ", ".join(f"%{i.name} = {i.op}" for i in k.body)
            lines.append(f"  fuses {len(k.body)} instruction{'s' if len(k.body) != 1 else ''}: "
                         f"{ops}")
            lines.append(f"  reads {_names(k.args) or 'nothing'}; writes {_names(k.results)}")
            for describe in TILING_DESCRIBERS:
                lines.extend(f"  tiling: {line}" for line in describe(k))
        if self.boundaries:
            lines.append("boundaries (values written to memory):")
            for value, producer, consumer, rule, reason in self.boundaries:
                if consumer == "return":
                    lines.append(f"  %{value} from @{producer}: returned ({rule}): {reason}")
                else:
                    lines.append(f"  %{value} from @{producer} read by %{consumer}: "
                                 f"not fused ({rule}): {reason}")
        if self.layouts:
            lines.append("operand layouts:")
            for _operand, kernel, rule, sentence in self.layouts:
                lines.append(f"  @{kernel} ({rule}): {sentence}")
        if self.orders:
            lines.append("launch order:")
            for kernel, rule, sentence in self.orders:
                lines.append(f"  @{kernel} runs its programs last block first ({rule}): "
                             f"{sentence}")
        if self.recomputed:
            lines.append("recomputed instead of written:")
            for value, kernel, consumer, c, reason in self.recomputed:
                lines.append(f"  %{value} recomputed in @{kernel} for %{consumer} (cost {c}): "
                             f"{reason}")
        if p.notes:
            lines.append("recorded for a scalar's value (where NumPy's result depends on it; "
                         "other values are kernel parameters):")
            for value, note in p.notes.items():
                lines.append(f"  %{value}: {note}")
        if self.notes:
            lines.append("other fusions refused:")
            for instr, kernel, rule, reason in self.notes:
                lines.append(f"  %{instr} not fused with @{kernel} ({rule}): {reason}")
        t = self.traffic()
        saved = f", {1 - t.fused / t.unfused:.0%} less" if t.unfused > t.fused else ""
        lines.append(f"memory traffic: {_bytes(t.fused)} ({_bytes(t.fused_read)} read, "
                     f"{_bytes(t.fused_written)} written); one kernel per op would move "
                     f"{_bytes(t.unfused)}{saved}")
        return "\n".join(lines) + "\n"


def _viewed_nbytes(name: str, defs: dict[str, Any], types: dict[str, Any]) -> int:
    """Bytes of the value that ``name`` views (itself when it is not a view)."""
    while name in defs and defs[name].op in VIEW:
        name = defs[name].args[0]
    return int(types[name].nbytes)


def _bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def _names(names: Any) -> str:
    return ", ".join(f"%{n}" for n in names)


def launches_of(kernel: Kernel, domain: Domain) -> list[Launch]:
    """The launches of one Kernel block (two for a split-K GEMM: partials, then a combine;
    a split reduction is one launch, its last program per row block combines the partials)."""
    if kernel.kind == GEMM and kernel.attrs.get("split_k", 1) > 1:
        return [Launch(kernel, kernel.kind, kernel.args, kernel.results, domain, stage)
                for stage in ("partial", "final")]
    return [Launch(kernel, kernel.kind, kernel.args, kernel.results, domain)]


# -- kernel names -----------------------------------------------------------------------

def _signature(kernel: Kernel) -> str | None:
    """A well-known composite the region computes, recognized from its op counts."""
    ops = Counter(i.op for i in kernel.body)
    if ops["max"] and (ops["sumexp"] or ops["exp"] and ops["sum"]):
        return "log_softmax" if ops["log"] else "softmax" if ops["div"] else None
    if (ops["sum"] >= 2 or ops["m2"]) and ops["rsqrt"] and ops["sub"]:
        return "layer_norm"
    if ops["sum"] == 1 and ops["rsqrt"] and not ops["sub"] and not ops["m2"]:
        return "rms_norm"  # (with an m2: a layer norm's statistics, split from its normalize)
    return None


def kernel_base_name(kernel: Kernel, domain: Domain) -> str:
    """``<what>_<dtype>_<domain>``: e.g. ``softmax_f32_4096x1024`` or ``exp_sum_div_f32_64x32``."""
    what = _signature(kernel)
    if what is not None and domain.kind == GEMM:
        what = f"matmul_{what}"
    if what is None:
        seen: list[str] = []
        for i in kernel.body:
            if i.op not in VIEW and i.op not in LEAF and i.op != "cast" and i.op not in seen:
                seen.append(i.op)
        if not seen:
            seen = ["copy"] if kernel.body and kernel.body[-1].op in VIEW else ["fill"]
        what = "_".join(seen[:3]) + ("_etc" if len(seen) > 3 else "")
    dtype = ir_name(kernel.result_types[0].dtype) if kernel.result_types else "none"
    dims = "x".join(str(d) for d in domain.shape) or "scalar"
    return f"{what}_{dtype}_{dims}"


def unique_name(base: str, used: set[str], counters: dict[str, int] | None = None) -> str:
    """``base``, or ``base_2``, ``base_3``... the first not in ``used`` (which it joins).

    ``counters`` (one dict kept across calls) remembers the last suffix taken per base, so
    that naming k kernels of one base costs O(k), not O(k**2), in programs of thousands.
    """
    n = counters.get(base, 1) if counters is not None else 1
    name = base if n == 1 else f"{base}_{n}"
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    if counters is not None:
        counters[base] = n
    return name
