"""Operand layouts of finished GEMM regions: where an operand's tiles are contiguous, the
rewrite that gives a TF32 product a K-major B (``rules.rule_tf32_k_major_b`` decides when),
and the one that copies an operand to 16-byte aligned rows (``align_operand``;
``rules.rule_align_gemm_operands`` decides when).

The fuser plans before any buffer exists, so layouts here assume what a plan's buffers are
when it runs on fresh arrays: every kernel parameter C-contiguous (kernel results always
are; a program input may be a strided view, which the emitter specializes at run time, so
a decision taken here is then only an estimate).

The rewrite (``transpose_operand``) splits one GEMM region in two Kernel blocks:

* a pointwise kernel computing B's producers that were the GEMM's prologue, if any, and
  writing ``%Bt = permute B`` (last two axes swapped: ``[..., N, K]``, contiguous, so K is
  the contiguous axis); B's batch views (the ``reshape``/``expand`` that broadcast a
  ``[K, N]`` weight over a batch) stay in the GEMM, so a broadcast B is written once;
* the GEMM kernel reading ``%Bt`` through ``permute`` back to ``[..., K, N]`` (index math
  in its loads), its batch views re-applied, so its tiles of B are K-major, exactly as for
  a product written ``a @ bt.T``.

Both are ordinary kernel blocks of the fused text: a user can read and edit them, and
``fj.parse`` of that text runs them as written (the fuser never merges kernel blocks, so
the copy is not fused back into the GEMM's prologue).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..ir.domain import load_sites
from ..ir.graph import NAME_PATTERN, num_elements
from ..ir.ops import VIEW
from ..ir.program import Instr, Kernel, Param, TensorType, contiguous_strides
from .plan import unique_name

Shape = tuple[int, ...]


def _b_load_steps(kernel: Kernel, operand: str) -> list[tuple[int, int, int]]:
    """For each buffer that the tiles of ``operand`` (B, ``[..., K, N]``) load: its offset at
    the origin, one step along K and one along N (C-contiguous buffers assumed); nothing for
    a B of fewer than 2 rows or columns."""
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    shape = types[operand].shape
    nd = len(shape)
    if nd < 2 or shape[-1] < 2 or shape[-2] < 2:
        return []
    origin = (0,) * nd
    along_k = tuple(1 if i == nd - 2 else 0 for i in range(nd))
    along_n = tuple(1 if i == nd - 1 else 0 for i in range(nd))
    strides = [() if p.scalar else contiguous_strides(p.type.shape) for p in kernel.params]
    return [steps for _, steps in
            load_sites(kernel, strides, (origin, along_k, along_n), (operand,))]


def reads_n_major(kernel: Kernel, operand: str) -> bool:
    """Whether the tiles of ``operand`` (B, ``[..., K, N]``) load with N contiguous: some buffer
    it reads in full (its offset moves along both K and N) is contiguous along N."""
    return any(ok != o and on - o == 1 for o, ok, on in _b_load_steps(kernel, operand))


def reads_k_major(kernel: Kernel, operand: str) -> bool:
    """Whether the tiles of ``operand`` (B, ``[..., K, N]``) load with K contiguous: some
    buffer it reads in full is contiguous along K, none along N."""
    steps = _b_load_steps(kernel, operand)
    return (not any(ok != o and on - o == 1 for o, ok, on in steps)
            and any(ok - o == 1 and on != o for o, ok, on in steps))


def batch_views(kernel: Kernel, operand: str) -> tuple[str, list[Instr]]:
    """``operand`` without its batch views: the value under the trailing ``reshape`` and
    ``expand`` instructions that keep its last two dims (a ``[K, N]`` weight broadcast over a
    batch), and those views in the order they apply."""
    defs = {i.name: i for i in kernel.body}
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    views: list[Instr] = []
    name = operand
    while name in defs and defs[name].op in ("reshape", "expand"):
        instr = defs[name]
        src = types[instr.args[0]].shape
        if len(src) < 2 or src[-2:] != instr.shape[-2:]:
            break
        views.append(instr)
        name = instr.args[0]
    return name, views[::-1]


def cone(kernel: Kernel, value: str) -> list[Instr]:
    """The instructions of ``kernel`` that ``value`` needs (itself included), in body order."""
    defs = {i.name: i for i in kernel.body}
    need: set[str] = set()
    stack = [value]
    while stack:
        n = stack.pop()
        if n in need or n not in defs:
            continue
        need.add(n)
        stack.extend(defs[n].args)
    return [i for i in kernel.body if i.name in need]


def cone_params(kernel: Kernel, value: str) -> list[Param]:
    """The parameters of ``kernel`` that computing ``value`` reads, in the kernel's order."""
    body = cone(kernel, value)
    read = {a for i in body for a in i.args} | {value}
    return [p for p in kernel.params if p.name in read]


def _copy(i: Instr, **change: Any) -> Instr:
    return replace(i, attrs=dict(i.attrs), **change)


def transpose_operand(kernel: Kernel, matmul: str, base: str, views: list[Instr],
                      used: set[str], pitch: int = 0, k_major: bool = True
                      ) -> tuple[Kernel, Kernel]:
    """``kernel`` (a fused GEMM region whose params are named as the values they receive) split
    into a pointwise kernel writing ``base`` with its last two axes swapped, and the GEMM
    kernel reading that buffer transposed back, then ``views``, as operand B of ``matmul``
    (see the module docstring). ``used``: every value name of the program (new ones join).
    ``pitch``: the written buffer's rows that many elements apart (``row_pitch``; 0:
    contiguous). ``k_major=False``: the pass writes ``base`` as it is, row-major (N
    contiguous: for a B the product reads K-major, ``rules.rule_fma_n_major_b``), and the
    GEMM reads that buffer directly."""
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    base_type = types[base]
    nd = len(base_type.shape)
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2) if k_major else tuple(range(nd))
    swapped = TensorType(base_type.dtype, tuple(base_type.shape[p] for p in perm))
    stem = base if NAME_PATTERN.match(base) else f"v{base}"
    bt = unique_name(f"{stem}_t" if k_major else f"{stem}_nmajor", used)
    bk = unique_name(f"{stem}_kmajor", used) if k_major else bt

    # the pass: B's producers (the GEMM's prologue of B), then the transpose
    body = [_copy(i) for i in cone(kernel, base)]
    body.append(Instr(bt, "permute", (base,), {"perm": perm}, swapped))
    params = tuple(cone_params(kernel, base))
    copy = Kernel("", (bt,), tuple(p.name for p in params), params, body, (bt,), (swapped,),
                  {"kind": "", "row_pitch": pitch} if pitch else {"kind": ""})

    # the GEMM: B read back through the transpose of the pass's buffer, batch views re-applied
    mm = next(i for i in kernel.body if i.name == matmul)
    front = [Instr(bk, "permute", (bt,), {"perm": perm}, base_type)] if k_major else []
    prev = bk
    for v in views:
        name = unique_name(f"{bk}_{v.op}", used)
        front.append(Instr(name, v.op, (prev,), dict(v.attrs), v.type))
        prev = name
    rest = [_copy(i, args=(i.args[0], prev)) if i is mm else _copy(i) for i in kernel.body]
    gemm_body = _live(front + rest, kernel.yields)
    read = {a for i in gemm_body for a in i.args}
    gemm_params = tuple(p for p in kernel.params if p.name in read) + (Param(bt, swapped),)
    gemm = replace(kernel, args=tuple(p.name for p in gemm_params), params=gemm_params,
                   body=gemm_body, attrs={"kind": kernel.kind})
    return copy, gemm


def operand_param(kernel: Kernel, operand: str) -> str | None:
    """The buffer param of ``kernel`` that ``operand`` reads through views only (``permute``,
    ``reshape``, ``expand``, ``slice``), or None when ``operand`` is computed in the kernel."""
    defs = {i.name: i for i in kernel.body}
    name = operand
    while name in defs and defs[name].op in VIEW:
        name = defs[name].args[0]
    buffers = {p.name for p in kernel.params if not p.scalar}
    return name if name in buffers else None


def align_operand(kernel: Kernel, param: str, pitch: int, used: set[str]
                  ) -> tuple[Kernel, Kernel]:
    """``kernel`` (a fused GEMM region whose params are named as the values they receive) split
    into a pointwise kernel copying buffer ``param`` to one whose rows are ``pitch`` elements
    apart (``row_pitch``: the same shape and values, each row on a 16-byte boundary) and the
    GEMM kernel reading that copy where it read ``param``, through the same views. ``used``:
    every value name of the program (the new one joins)."""
    ptype = next(p.type for p in kernel.params if p.name == param)
    stem = param if NAME_PATTERN.match(param) else f"v{param}"
    aligned = unique_name(f"{stem}_aligned", used)
    copy_body = [Instr(aligned, "permute", (param,), {"perm": tuple(range(len(ptype.shape)))},
                       ptype)]
    copy = Kernel("", (aligned,), (param,), (Param(param, ptype),), copy_body, (aligned,),
                  (ptype,), {"kind": "", "row_pitch": pitch})
    rename = {param: aligned}
    params = tuple(replace(p, name=rename.get(p.name, p.name)) for p in kernel.params)
    body = [_copy(i, args=tuple(rename.get(a, a) for a in i.args)) for i in kernel.body]
    gemm = replace(kernel, args=tuple(rename.get(a, a) for a in kernel.args), params=params,
                   body=body, attrs={"kind": kernel.kind})
    return copy, gemm


def _live(body: list[Instr], yields: tuple[str, ...]) -> list[Instr]:
    """``body`` without the instructions no yield needs (B's producers that moved out)."""
    need = set(yields)
    keep: list[Instr] = []
    for i in reversed(body):
        if i.name in need:
            keep.append(i)
            need.update(i.args)
    return keep[::-1]


def operand_batch(shape: Shape) -> int:
    """Matrices in a value of ``shape`` (``[..., R, C]``)."""
    return num_elements(shape[:-2])
