"""Operand layouts of finished GEMM regions: where an operand's tiles are contiguous, and the
rewrite that gives a TF32 product a K-major B (``rules.rule_tf32_k_major_b`` decides when).

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

from ..ir.graph import NAME_PATTERN, num_elements
from ..ir.ops import LEAF
from ..ir.program import Instr, Kernel, Param, TensorType, contiguous_strides

Shape = tuple[int, ...]
Point = tuple[int, ...]
#: load sites looked at per value (they only inform a performance decision)
MAX_SITES = 64


def _source_points(instr: Instr, src_shape: Shape, points: tuple[Point, ...]) -> tuple[Point, ...]:
    """The coordinates of ``instr``'s operand that its value at ``points`` reads (views move
    them; elementwise ops and casts read the same ones)."""
    op = instr.op
    if op == "permute":
        moved = []
        for at in points:
            src = [0] * len(at)
            for i, p in enumerate(instr.attrs["perm"]):
                src[p] = at[i]
            moved.append(tuple(src))
        return tuple(moved)
    if op == "expand":
        return tuple(tuple(0 if n == 1 else c for c, n in zip(at[len(at) - len(src_shape):],
                                                                src_shape)) for at in points)
    if op == "slice":
        start, step = instr.attrs["start"], instr.attrs["step"]
        return tuple(tuple(a + st * c for c, a, st in zip(at, start, step)) for at in points)
    if op == "reshape":
        strides = contiguous_strides(instr.shape)
        out = []
        for at in points:
            flat = sum(c * s for c, s in zip(at, strides))
            src = []
            for s in contiguous_strides(src_shape):
                src.append(flat // s if s else 0)
                flat = flat % s if s else flat
            out.append(tuple(src))
        return tuple(out)
    return points


def load_sites(kernel: Kernel, root: str, points: tuple[Point, ...]
               ) -> list[tuple[str, tuple[int, ...]]]:
    """Every buffer parameter that ``root`` reads, with its element offset at each of
    ``points`` (coordinates of ``root``), every parameter taken as C-contiguous. The same
    walk as the emitter's ``_load_sites`` (``codegen/triton_emitter.py``), on the IR alone."""
    defs = {i.name: i for i in kernel.body}
    params = {p.name: p for p in kernel.params}
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    sites: dict[tuple[str, tuple[int, ...]], None] = {}
    seen: set[tuple[str, tuple[Point, ...]]] = set()
    stack = [(root, points)]
    while stack and len(sites) < MAX_SITES:
        name, ats = stack.pop()
        if (name, ats) in seen:
            continue
        seen.add((name, ats))
        if name in params:
            p = params[name]
            if not p.scalar:
                strides = contiguous_strides(p.type.shape)
                sites[(name, tuple(sum(c * s for c, s in zip(at, strides)) for at in ats))] = None
            continue
        instr = defs.get(name)
        if instr is None or instr.op in LEAF:
            continue
        if instr.op in ("permute", "expand", "slice", "reshape"):
            src = instr.args[0]
            stack.append((src, _source_points(instr, types[src].shape, ats)))
        else:
            stack.extend((a, ats) for a in instr.args)
    return list(sites)


def reads_n_major(kernel: Kernel, operand: str) -> bool:
    """Whether the tiles of ``operand`` (B, ``[..., K, N]``) load with N contiguous: some buffer
    it reads in full (its offset moves along both K and N) is contiguous along N."""
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    shape = types[operand].shape
    nd = len(shape)
    if nd < 2 or shape[-1] < 2 or shape[-2] < 2:
        return False
    origin = (0,) * nd
    along_k = tuple(1 if i == nd - 2 else 0 for i in range(nd))
    along_n = tuple(1 if i == nd - 1 else 0 for i in range(nd))
    for _, (o, ok, on) in load_sites(kernel, operand, (origin, along_k, along_n)):
        if ok != o and on - o == 1:
            return True
    return False


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


def fresh_name(stem: str, used: set[str]) -> str:
    """A value name from ``stem`` that is not in ``used`` (which it joins); the IR's names are
    identifiers or numbers, so a numeric stem gets a letter first (``1`` -> ``v1_t``)."""
    stem = stem if NAME_PATTERN.match(stem) else f"v{stem}"
    name, n = stem, 1
    while name in used:
        n += 1
        name = f"{stem}_{n}"
    used.add(name)
    return name


def _copy(i: Instr, **change: Any) -> Instr:
    return replace(i, attrs=dict(i.attrs), **change)


def transpose_operand(kernel: Kernel, matmul: str, base: str, views: list[Instr],
                      used: set[str]) -> tuple[Kernel, Kernel]:
    """``kernel`` (a fused GEMM region whose params are named as the values they receive) split
    into a pointwise kernel writing ``base`` with its last two axes swapped, and the GEMM
    kernel reading that buffer transposed back, then ``views``, as operand B of ``matmul``
    (see the module docstring). ``used``: every value name of the program (new ones join)."""
    types = {p.name: p.type for p in kernel.params}
    types.update({i.name: i.type for i in kernel.body})
    base_type = types[base]
    nd = len(base_type.shape)
    perm = tuple(range(nd - 2)) + (nd - 1, nd - 2)
    swapped = TensorType(base_type.dtype, tuple(base_type.shape[p] for p in perm))
    stem = base if NAME_PATTERN.match(base) else f"v{base}"
    bt = fresh_name(f"{stem}_t", used)
    bk = fresh_name(f"{stem}_kmajor", used)

    # the pass: B's producers (the GEMM's prologue of B), then the transpose
    body = [_copy(i) for i in cone(kernel, base)]
    body.append(Instr(bt, "permute", (base,), {"perm": perm}, swapped))
    params = tuple(cone_params(kernel, base))
    copy = Kernel("", (bt,), tuple(p.name for p in params), params, body, (bt,), (swapped,),
                  {"kind": ""})

    # the GEMM: B read back through the transpose of the pass's buffer, batch views re-applied
    mm = next(i for i in kernel.body if i.name == matmul)
    front = [Instr(bk, "permute", (bt,), {"perm": perm}, base_type)]
    prev = bk
    for v in views:
        name = fresh_name(f"{bk}_{v.op}", used)
        front.append(Instr(name, v.op, (prev,), dict(v.attrs), v.type))
        prev = name
    rest = [_copy(i, args=(i.args[0], prev)) if i is mm else _copy(i) for i in kernel.body]
    gemm_body = _live(front + rest, kernel.yields)
    read = {a for i in gemm_body for a in i.args}
    gemm_params = tuple(p for p in kernel.params if p.name in read) + (Param(bt, swapped),)
    gemm = replace(kernel, args=tuple(p.name for p in gemm_params), params=gemm_params,
                   body=gemm_body, attrs={"kind": kernel.kind})
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
