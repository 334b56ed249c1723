"""Fusion: a Program becomes a Program of ``Kernel`` blocks, each one launch (or a split pair).

Entry points:

* ``plan_for(program, key)``: the (cached) ``Plan`` of a program; what
  ``realize`` and ``Program.run`` execute. A program that already holds
  kernel blocks (user-edited fused text) keeps them, after checking each
  with ``region_check``; instructions left outside kernel blocks are fused
  greedily.
* ``plan(*tensors)`` (``fj.plan``): the plan of lazy tensors, to print
  (``str(plan)`` is the fused IR text) or ``explain()``.
* ``region_check(kernel)``: why a kernel block cannot be one kernel, or
  None; the text IR verifier calls it for every kernel block.

The pass itself is ``greedy.py``; its legality rules are ``rules.py`` and its
numbers ``cost.py``. After it, each fused GEMM region of a TF32 product whose B would
load N-major is split in two when ``rules.rule_tf32_k_major_b`` says it pays: a
pointwise kernel writing B transposed, then the GEMM reading it K-major
(``layout.py``); kernel blocks written by the user are never split.

Plans are cached by the structural key from ``lower`` (or the program text):
``stats["fusion_runs"]`` counts the runs of the pass, ``stats["cache_hits"]`` the plans
served from the cache.

Logging: ``FUSEJIT_LOG=fusion`` (a comma-separated list of switches) logs
every fusion decision and each plan's explanation to stderr, through the
``logging`` logger ``fusejit.fusion`` (which can also be configured
directly).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import replace
from typing import Any

from ..errors import FusejitError, IRVerifyError
from ..ir.domain import (
    GEMM,
    SPLIT_REDUCTION,
    Domain,
    RegionError,
    operand_itemsizes,
    region_domain,
)
from ..ir.program import Instr, Kernel, Program
from ..ir.verify import register_region_check
from . import cost
from .greedy import GreedyFuser
from .layout import align_operand, transpose_operand
from .plan import Launch, Plan, kernel_base_name, launches_of, unique_name
from .rules import (
    rule_align_gemm_operands,
    rule_fma_n_major_b,
    rule_name,
    rule_reverse_reread,
    rule_split_reduction,
    rule_tf32_k_major_b,
)

__all__ = ["Plan", "Launch", "plan", "plan_for", "region_check", "stats", "clear_cache"]

log = logging.getLogger("fusejit.fusion")

#: Counters: ``fusion_runs`` (the pass ran), ``cache_hits`` (a cached plan was reused).
stats: dict[str, int] = {"fusion_runs": 0, "cache_hits": 0}

_CACHE: dict[Any, Plan] = {}
_CACHE_LIMIT = 4096
#: changes to ``_CACHE`` (lookups take no lock; two threads planning one structure at once
#: both run the pass, and the cache keeps one of the equal plans)
_CACHE_LOCK = threading.Lock()


def _configure_logging() -> None:
    switches = {s.strip() for s in os.environ.get("FUSEJIT_LOG", "").split(",")}
    if "fusion" in switches or "all" in switches:
        log.setLevel(logging.DEBUG)
        if not log.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
            log.addHandler(handler)


_configure_logging()


def clear_cache() -> None:
    """Forget every cached plan (tests use it to count runs of the pass)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def plan_for(program: Program, key: Any = None) -> Plan:
    """The plan of ``program``, from the cache when a program of the same structure was planned.

    ``key`` is the structural key from ``lower`` (None: the program's text).
    """
    if key is None:
        key = program.key()
    found = _CACHE.get(key)
    if found is not None:
        stats["cache_hits"] += 1
        return found
    result = build_plan(program)
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_LIMIT:
            del _CACHE[next(iter(_CACHE))]  # the oldest plan; keeps the hit path a plain lookup
        _CACHE[key] = result
    return result


def plan(*tensors: Any) -> Plan:
    """The fusion plan that ``fj.realize(*tensors)`` would run (nothing runs)."""
    from ..ir.graph import lower
    from ..ir.textio import tensor_nodes
    program, _, key = lower(tensor_nodes(tensors, "plan"))
    return plan_for(program, key)


# -- checking user-written kernel blocks ----------------------------------------------------

def _region_error(kernel: Kernel) -> tuple[str, Instr | None] | None:
    defined = {p.name for p in kernel.params}
    for instr in kernel.body:
        if not isinstance(instr, Instr):
            return "kernel blocks do not nest", None
        for a in instr.args:
            if a not in defined:
                return f"%{instr.name} reads %{a}, which is not a param or value of the kernel", instr
        defined.add(instr.name)
    for y in kernel.yields:
        if y not in defined:
            return f"it yields %{y}, which it does not define", None
    try:
        domain = region_domain(kernel)
    except RegionError as exc:
        return exc.reason, exc.instr
    if kernel.kind == SPLIT_REDUCTION:
        reason = rule_split_reduction(kernel, domain, check_size=False)
        if reason is not None:
            return f"kind=split_reduction is impossible: {reason}", None
    if domain.kind == GEMM:
        reason = _gemm_attrs_problem(kernel, domain)
        if reason is not None:
            return reason, None
    if "row_pitch" in kernel.attrs:
        reason = _row_pitch_problem(kernel, domain)
        if reason is not None:
            return reason, None
    if "order" in kernel.attrs:
        reason = _order_problem(kernel, domain)
        if reason is not None:
            return reason, None
    return None


def _order_problem(kernel: Kernel, domain: Domain) -> str | None:
    """Why a kernel's ``order`` attribute (``reversed``: its programs last block first, a
    split reduction's chunks last first, ``rules.rule_reverse_reread``; ``forward``: in
    order) cannot work, or None."""
    order = kernel.attrs["order"]
    if order not in ("forward", "reversed"):
        return f"order={order} is not one of forward, reversed"
    if kernel.kind != SPLIT_REDUCTION and (domain.reduced or domain.kind == GEMM):
        return (f"order={order} is for pointwise kernels and split reductions (this one is "
                f"{domain.kind}): the other kinds keep their programs' order")
    return None


def _row_pitch_problem(kernel: Kernel, domain: Domain) -> str | None:
    """Why a kernel's ``row_pitch`` attribute (its results' rows that many elements apart in
    memory) cannot work, or None."""
    pitch = kernel.attrs["row_pitch"]
    if not isinstance(pitch, int) or isinstance(pitch, bool) or pitch < 1:
        return f"row_pitch={pitch} is not a positive integer"
    if domain.reduced or domain.kind == GEMM:
        return (f"row_pitch={pitch} is for pointwise kernels (this one is {domain.kind}): "
                f"only their results can be written with padded rows")
    for r, t in zip(kernel.results, kernel.result_types):
        if len(t.shape) < 2:
            return f"row_pitch={pitch}: its result %{r} has {len(t.shape)} axes (rows need 2)"
        if pitch < t.shape[-1]:
            return (f"row_pitch={pitch} is less than the {t.shape[-1]} elements of a row of its "
                    f"result %{r}")
    return None


# -- tiles of gemm kernels -------------------------------------------------------------

def _gemm_problem(kernel: Kernel, domain: Domain) -> dict[str, Any]:
    """The numbers the GEMM heuristics take: M, N, K, batch, dtype, precision, span_row."""
    from ..ir.graph import num_elements
    mm = next(i for i in kernel.body if i.name == domain.matmul)
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    shape = mm.shape
    return {"m": shape[-2], "n": shape[-1], "k": types[mm.args[0]].shape[-1],
            "batch": num_elements(shape[:-2]), "dtype": mm.dtype.name,
            "precision": str(mm.attrs.get("precision", "ieee")), "span_row": bool(domain.reduced),
            "loads": operand_itemsizes(kernel, mm.name)}


def _gemm_attrs_problem(kernel: Kernel, domain: Domain) -> str | None:
    """Why the tile attributes a user wrote on a gemm kernel cannot work, or None."""
    from ..codegen.heuristics import GEMM_ATTRS, GEMM_OPTIONAL_ATTRS, gemm_config_problem
    given = {k: v for k, v in kernel.attrs.items() if k in GEMM_ATTRS + GEMM_OPTIONAL_ATTRS}
    if not given:
        return None
    for key, value in given.items():
        if not isinstance(value, int) or isinstance(value, bool):
            return f"its tiles are invalid: {key}={value} is not an integer"
    attrs = _with_gemm_defaults(kernel, domain)
    g = _gemm_problem(kernel, domain)
    reason = gemm_config_problem(attrs, g["m"], g["n"], g["k"], g["dtype"], g["loads"],
                                 g["span_row"])
    return f"its tiles are invalid: {reason}" if reason else None


def _with_gemm_defaults(kernel: Kernel, domain: Domain) -> dict[str, Any]:
    """``kernel.attrs`` with every missing tile attribute of a gemm kernel filled in."""
    from ..codegen.heuristics import GEMM_ATTRS, gemm_config
    if all(name in kernel.attrs for name in GEMM_ATTRS):
        return dict(kernel.attrs)
    g = _gemm_problem(kernel, domain)
    default = gemm_config(g["m"], g["n"], g["k"], g["batch"], g["dtype"], g["precision"],
                          g["span_row"], g["loads"]).attrs()
    return {**default, **kernel.attrs}


def region_check(kernel: Kernel) -> str | None:
    """Why ``kernel`` cannot run as one kernel (its domain analysis fails), or None when it can.

    Also rejects ``kind=split_reduction`` on a region that cannot split.
    Other kinds are launch details derived from the region, so a stale
    ``kind`` (after moving an op between blocks) is corrected, not refused.
    """
    found = _region_error(kernel)
    return found[0] if found is not None else None


# every verified program (``fj.parse``, ``fj.load``) checks its kernel blocks with this pass's rule
register_region_check(region_check)


def _check_user_kernels(program: Program) -> None:
    for k in program.kernels:
        found = _region_error(k)
        if found is not None:
            reason, instr = found
            at = f" (at line {instr.line})" if instr is not None and instr.line else ""
            raise IRVerifyError(f"kernel @{k.name} cannot be one kernel: {reason}{at}",
                                line=k.line, column=k.column)


# -- building a plan ------------------------------------------------------------------

def _normalize_user_kernel(k: Kernel) -> tuple[Kernel, Any]:
    domain = region_domain(k)
    attrs = dict(k.attrs)
    if k.kind != SPLIT_REDUCTION or domain.kind == GEMM:
        attrs["kind"] = domain.kind
    if domain.kind == GEMM:
        attrs = _with_gemm_defaults(replace(k, attrs=attrs), domain)
    if attrs != k.attrs:
        k = replace(k, attrs=attrs)
    return k, domain


def _value_names(program: Program) -> set[str]:
    """Every value name of ``program``, kernel blocks' inner names included."""
    names = set(program.types())
    for k in program.kernels:
        names.update(p.name for p in k.params)
        names.update(i.name for i in k.body)
    return names


def _add_layout_pass(copy: Kernel, prefix: str, gemm: Kernel, body: list[Kernel],
                     launches: list[Launch], used: set[str], counters: dict[str, int]) -> Domain:
    """A layout rule's pointwise kernel (``layout.transpose_operand``, ``align_operand``) put
    in the plan before its GEMM: its kind, a name (``<prefix><what>``), its launches. Returns
    the domain of the ``gemm`` kernel that reads it."""
    try:
        copy_domain, domain = region_domain(copy), region_domain(gemm)
    except RegionError as exc:
        raise FusejitError(f"internal error in the fusion pass: the {prefix.rstrip('_')} pass "
                           f"of a GEMM cannot be one kernel: {exc.reason}") from None
    copy.attrs["kind"] = copy_domain.kind
    copy.name = unique_name(prefix + kernel_base_name(copy, copy_domain).removeprefix("copy_"),
                            used, counters)
    body.append(copy)
    launches.extend(launches_of(copy, copy_domain))
    return domain


def _pass_boundary(copy: Kernel, gemm: Kernel, rule: str, reason: str
                   ) -> tuple[str, str, str, str, str]:
    """The boundary where a layout pass's result meets the GEMM reading it (``explain()``)."""
    (result,) = copy.results
    reader = next(i.name for i in gemm.body if result in i.args)
    return result, copy.name, reader, rule, reason


def _order_launches(body: list[Kernel], user_kernels: set[str]) -> list[tuple[str, str, str]]:
    """Set ``order=reversed`` on the fused kernels that ``rule_reverse_reread`` reverses (in
    launch order: a reversed kernel keeps the next one in order); (kernel, rule, sentence)
    for each."""
    orders = []
    for before, kernel in zip([None, *body[:-1]], body):
        if kernel.name in user_kernels:
            continue
        sentence = rule_reverse_reread(kernel, before)
        if sentence is not None:
            kernel.attrs["order"] = "reversed"
            orders.append((kernel.name, rule_name(rule_reverse_reread), sentence))
    return orders


def build_plan(program: Program) -> Plan:
    """Run the pass (no cache): check user kernel blocks, fuse the rest, give TF32 GEMMs a
    K-major B where it pays, name and split kernels."""
    stats["fusion_runs"] += 1
    _check_user_kernels(program)
    loose = any(not isinstance(s, Kernel) for s in program.body)
    has_user = any(isinstance(s, Kernel) for s in program.body)
    fuser = GreedyFuser(program)
    fused = fuser.run() if loose else []
    used = {k.name for k in program.kernels}
    counters: dict[str, int] = {}
    body: list[Kernel] = []
    launches: list[Launch] = []
    names: dict[Any, str] = {}
    user_kernels: set[str] = set()  # (kernel blocks as the user wrote them: never reordered)
    if not loose:
        for k in program.kernels:
            k, domain = _normalize_user_kernel(k)
            body.append(k)
            user_kernels.add(k.name)
            launches.extend(launches_of(k, domain))
    layouts: list[tuple[str, str, str, str]] = []
    extra_boundaries: list[tuple[str, str, str, str, str]] = []
    moved: dict[str, tuple[str, set[str]]] = {}  # GEMM kernel -> (its pass, values moved there)
    values = _value_names(program) if any(f.domain.kind == GEMM for f in fused) else set()
    for f in fused:
        kernel, domain = f.kernel, f.domain
        if f.region.frozen is not None:
            kernel, domain = _normalize_user_kernel(kernel)
            user_kernels.add(kernel.name)
        elif domain.kind == GEMM:
            layout_rule = rule_tf32_k_major_b
            decision = layout_rule(kernel, domain)
            if decision is None:
                layout_rule = rule_fma_n_major_b
                decision = layout_rule(kernel, domain)
            transposed = None
            if decision is not None and decision.apply:
                transposed, kernel = transpose_operand(kernel, decision.matmul, decision.base,
                                                       list(decision.views), values,
                                                       decision.pitch, decision.k_major)
                domain = _add_layout_pass(transposed, "transpose_", kernel, body, launches,
                                          used, counters)
            # (a K-major B written with padded rows is aligned whatever its logical K)
            padded = frozenset(transposed.results) if transposed is not None and \
                transposed.row_pitch else frozenset()
            align = rule_align_gemm_operands(kernel, domain, padded)
            aligned: list[Kernel] = []
            if align is not None and align.apply:
                for param, pitch in zip(align.params, align.pitches):
                    copy, kernel = align_operand(kernel, param, pitch, values)
                    domain = _add_layout_pass(copy, "align_", kernel, body, launches, used,
                                              counters)
                    aligned.append(copy)
            kernel.attrs = _with_gemm_defaults(kernel, domain)
            kernel.name = unique_name(kernel_base_name(kernel, domain), used)
            if align is not None:
                rule = rule_name(rule_align_gemm_operands)
                passes = ", ".join(f"@{c.name}" for c in aligned)
                layouts.append((align.params[0], kernel.name, rule, align.sentence
                                + (f" (the copies: {passes})" if aligned else "")))
                for copy in aligned:
                    extra_boundaries.append(_pass_boundary(copy, kernel, rule, (
                        f"an operand of the GEMM @{kernel.name}, its rows padded to 16 bytes "
                        f"for it (see operand layouts)")))
            if decision is not None:
                rule = rule_name(layout_rule)
                sentence = decision.sentence + (f" (the pass: @{transposed.name})"
                                                if transposed is not None else "")
                layouts.append((decision.operand, kernel.name, rule, sentence))
                if transposed is not None:
                    written = ("K-major" if decision.k_major else "row-major")
                    gemm_kind = "TF32" if decision.k_major else "full-precision"
                    extra_boundaries.append(_pass_boundary(transposed, kernel, rule, (
                        f"B of the {gemm_kind} GEMM @{kernel.name}, written {written} for it "
                        f"(see operand layouts)")))
                    inside = {i.name for i in kernel.body}
                    moved[kernel.name] = (transposed.name,
                                          {i.name for i in transposed.body} - inside)
        else:
            if rule_split_reduction(kernel, domain) is None:
                # how many partials is the emitter's call (it knows its tiles); a user's
                # split=N attribute overrides it
                kernel.attrs["kind"] = SPLIT_REDUCTION
            kernel.name = unique_name(kernel_base_name(kernel, domain), used, counters)
        names[f.region] = kernel.name
        body.append(kernel)
        launches.extend(launches_of(kernel, domain))

    orders = _order_launches(body, user_kernels)

    def name_of(region: Any) -> str:
        return names.get(region.find(), f"r{region.id}") if region is not None else "?"

    fused_program = Program(program.name, program.inputs, list(body), program.outputs,
                            dict(program.notes))

    def recomputed_in(value: str, region: Any) -> str:
        # a value recomputed for a GEMM's operand B is computed by B's transposing pass
        name = name_of(region)
        pass_name, moved_values = moved.get(name, ("", set()))
        return pass_name if value in moved_values else name

    result = Plan(
        fused_program, launches,
        boundaries=[(b.value, name_of(b.producer), b.consumer, b.rule, b.reason)
                    for b in fuser.boundaries] + extra_boundaries,
        recomputed=[(r.value, recomputed_in(r.value, r.region), r.consumer, r.cost, r.reason)
                    for r in fuser.recomputes],
        notes=[(n.instr, name_of(n.region), n.rule, n.reason) for n in fuser.notes],
        source="mixed" if (loose and has_user) else "user" if has_user else "fused",
        layouts=layouts, orders=orders)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", result.explain().rstrip())
    return result
