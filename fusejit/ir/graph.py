"""The lazy graph: immutable, hash-consed nodes, and their lowering to a Program.

Structurally equal nodes are the same object (common subexpression
elimination for free): ``make`` looks a node up by its key before creating it.
Each node computes its key and hash once, at creation. Leaves that hold data
(``input`` nodes) are never merged: each carries its own serial number.

Each node also gets, at creation, a *signature*: a small int naming its
structure with the data leaves abstracted to their position (``leaves``, in
the order a depth-first walk meets them). Two graphs with equal signatures
lower to the same Program, so the plan cache key of a ``realize`` is one
signature per output (``structural_key``), found without walking the graph,
and two realizes of the same structure over new data share a plan. A node's
``leaves`` is a tuple, or past ``SHARE_LEAVES`` a ``LeafView`` of a list shared
along a chain, so that a chain meeting a new input at every step stays linear.

``lower`` turns the graph under a set of outputs into a Program plus the
buffers that feed its inputs, with an iterative traversal (no recursion
limit); the realize path calls it only when the plan cache misses.
"""

from __future__ import annotations

import itertools
import math
import re
import weakref
from typing import Any

import numpy as np

from ..dtypes import ir_name
from .program import Instr, Param, Program, TensorType

_INPUT_SERIAL = itertools.count()
#: structural signature (op, attributes, dtype, shape, sources' signatures and leaf positions)
#: -> a small int, so a node's signature is computed once, when it is created
_SIGS: dict[tuple, int] = {}
_SIG_SERIAL = itertools.count()
_MAX_SIGS = 1 << 20
class _KeyedRef(weakref.ref):
    """A weak reference that remembers its table key (weakref.KeyedRef, without its
    Python-level constructor, which costs more than the rest of creating a node)."""

    __slots__ = ("key",)


#: structural key -> weak reference to the one live node with that structure
_NODES: dict[tuple, _KeyedRef] = {}
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _freeze(value: Any) -> Any:
    """Hashable, exact form of an attribute value (floats by bits: -0.0 and NaN stay distinct)."""
    kind = type(value)
    if kind is int or kind is bool:
        return value
    if kind is tuple and all(type(v) is int for v in value):  # shapes, axes, perms
        return value
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v) for v in value)
    return value


class Node:
    """One immutable value of the lazy graph."""

    __slots__ = ("op", "srcs", "attrs", "dtype", "shape", "key", "_hash", "buffer", "name",
                 "sig", "leaves", "copies", "stream", "__weakref__")

    op: str
    srcs: tuple[Node, ...]
    attrs: dict[str, Any]
    dtype: np.dtype
    shape: tuple[int, ...]
    #: input leaves only: a device backend's copies of a host buffer, by device id (or None)
    copies: dict[int, Any] | None
    #: input leaves only: the CuPy stream a device backend computed the buffer on (None: not
    #: computed by a device backend); buffer exports name it as the stream to wait for
    stream: Any

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Node({self.op}, {ir_name(self.dtype)}{list(self.shape)})"

    @property
    def type(self) -> TensorType:
        """dtype and shape as the IR's ``TensorType``."""
        return TensorType(self.dtype, self.shape)


def _forget(ref: _KeyedRef) -> None:
    # a node died: drop its table entry unless a newer node took the key meanwhile
    if _NODES.get(ref.key) is ref:
        del _NODES[ref.key]


def make(op: str, srcs: tuple[Node, ...], attrs: dict[str, Any], dtype: np.dtype,
         shape: tuple[int, ...]) -> Node:
    """The unique node with this structure (created on first request)."""
    frozen = tuple([(k, _freeze(v)) for k, v in attrs.items()]) if attrs else ()
    key = (op, tuple(map(id, srcs)), frozen, dtype.str, shape)
    ref = _NODES.get(key)
    if ref is not None:
        node = ref()
        # sources are held by the node, so their ids cannot have been reused while it lives
        if node is not None:
            return node
    node = Node()
    node.op, node.srcs, node.attrs, node.dtype, node.shape = op, srcs, attrs, dtype, shape
    node.key, node._hash = key, hash(key)
    node.buffer, node.name = None, None
    if not srcs:
        node.leaves, where = (), ()
    elif len(srcs) == 1:
        node.leaves, where = srcs[0].leaves, srcs[0].sig
    else:
        first = srcs[0].leaves
        if all(s.leaves is first or not s.leaves for s in srcs):
            # the common case (x op const, x op f(x)): no merging, positions are implied
            node.leaves, where = first, tuple([(s.sig, bool(s.leaves)) for s in srcs])
        else:
            groups = [s.leaves for s in srcs]
            if type(first) is tuple and len(first) < SHARE_LEAVES:
                node.leaves, positions = merge_leaves(groups)
            else:  # a long list of leaves: shared, not copied (see LeafView)
                node.leaves, positions = _merge_shared(groups)
            where = tuple(zip([s.sig for s in srcs], positions))
    node.sig = _intern((op, frozen, key[3], shape, where))
    ref = _KeyedRef(node, _forget)
    ref.key = key
    _NODES[key] = ref
    return node


def _intern(signature: tuple) -> int:
    # ids come from a counter and are never reused, so forgetting the table (to bound its
    # memory) can only cost plan-cache misses, never a wrong match
    sig = _SIGS.get(signature)
    if sig is None:
        if len(_SIGS) >= _MAX_SIGS:
            _SIGS.clear()
        sig = _SIGS[signature] = next(_SIG_SERIAL)
    return sig


class _SharedLeaves:
    """An append-only list of leaves and their positions, shared by the nodes of a chain."""

    __slots__ = ("items", "index")

    def __init__(self, leaves: Any) -> None:
        self.items: list[Node] = list(leaves)
        self.index: dict[int, int] = {id(leaf): i for i, leaf in enumerate(self.items)}


class LeafView:
    """A node's leaves as the first ``n`` of a ``_SharedLeaves`` list (iterable, sized).

    A chain that meets a new input at every step (``y = y + x_i``) would copy a tuple of
    all earlier leaves per node, quadratic in its length; past ``SHARE_LEAVES`` leaves the
    nodes share one list instead: a node that extends the list's last node appends to it,
    and only a branch (a second node extending an earlier prefix) copies the prefix.
    """

    __slots__ = ("shared", "n")

    def __init__(self, shared: _SharedLeaves, n: int) -> None:
        self.shared, self.n = shared, n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Any:
        return itertools.islice(self.shared.items, self.n)


#: Leaves from which a node's leaves are a ``LeafView`` rather than a tuple.
SHARE_LEAVES = 16


def _merge_shared(groups: list[Any]) -> tuple[LeafView, tuple[Any, ...]]:
    """``merge_leaves`` into a ``LeafView``: appended to the first group's shared list when
    that group is the list's last node, else to a copy of the first group."""
    first = groups[0]
    if type(first) is LeafView and len(first.shared.items) == first.n:
        shared = first.shared  # this node extends the list's last node: append in place
    else:
        shared = _SharedLeaves(first)
    items, index = shared.items, shared.index
    positions: list[Any] = [None]
    for group in groups[1:]:
        where = []
        for leaf in group:
            i = index.get(id(leaf))
            if i is None:
                i = index[id(leaf)] = len(items)
                items.append(leaf)
            where.append(i)
        positions.append(None if where == list(range(len(where))) else tuple(where))
    return LeafView(shared, len(items)), tuple(positions)


def merge_leaves(groups: list[Any]) -> tuple[tuple[Node, ...], tuple[Any, ...]]:
    """The leaves of several subgraphs in first-occurrence order (the order a left-to-right
    depth-first walk meets them), and each group's positions in it (None: a prefix)."""
    merged = list(groups[0])
    index = {id(leaf): i for i, leaf in enumerate(merged)}
    positions: list[Any] = [None]
    for group in groups[1:]:
        where = []
        for leaf in group:
            i = index.get(id(leaf))
            if i is None:
                i = index[id(leaf)] = len(merged)
                merged.append(leaf)
            where.append(i)
        positions.append(None if where == list(range(len(where))) else tuple(where))
    return tuple(merged), tuple(positions)


def make_input(buffer: Any, dtype: np.dtype, shape: tuple[int, ...], name: str | None,
               stream: Any = None) -> Node:
    """A leaf holding data. Never merged with another leaf. ``stream``: the CuPy stream the
    buffer was computed on, when a device backend computed it."""
    node = Node()
    node.op, node.srcs, node.attrs, node.dtype, node.shape = "input", (), {}, dtype, shape
    node.key = ("input", next(_INPUT_SERIAL))
    node._hash = hash(node.key)
    node.buffer, node.name = buffer, name
    node.copies = None  # a device backend's copies of host data, by device id
    node.stream = stream
    node.leaves = (node,)
    node.sig = _intern(("input", name, dtype.str, shape))
    return node


def structural_key(outputs: list[Node]) -> tuple[tuple, tuple[Node, ...]]:
    """The plan-cache key of ``outputs`` and their leaves, in the Program's input order.

    Built from the signatures that nodes got when created, so it costs one step per
    output, not per node: two graphs with equal keys lower to the same Program.
    """
    if len(outputs) == 1:
        node = outputs[0]
        leaves = node.leaves
        return (node.sig,), leaves if type(leaves) is tuple else tuple(leaves)
    leaves, positions = merge_leaves([n.leaves for n in outputs])
    return (tuple(n.sig for n in outputs), positions), leaves


def topological_order(outputs: list[Node]) -> list[Node]:
    """Every node under ``outputs``, each after its sources (iterative post-order: no
    recursion limit). Inputs appear in the order of ``structural_key``'s leaves."""
    order: list[Node] = []
    done: set[int] = set()
    for root in outputs:
        if id(root) in done:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            srcs = node.srcs
            if i < len(srcs):
                stack[-1] = (node, i + 1)
                if id(srcs[i]) not in done:
                    stack.append((srcs[i], 0))
                continue
            stack.pop()
            if id(node) not in done:
                done.add(id(node))
                order.append(node)
    return order


def build_program(order: list[Node], outputs: list[Node], name: str = "main") -> Program:
    """The Program for a topological order: inputs keep their names, values are numbered."""
    names: dict[int, str] = {}
    inputs: list[Param] = []
    body: list[Instr] = []
    used: set[str] = set()
    for node in order:
        if node.op == "input":
            base = node.name or f"in{len(inputs)}"
            vname = base
            for suffix in itertools.count(1):
                if vname not in used:
                    break
                vname = f"{base}_{suffix}"
            used.add(vname)
            names[id(node)] = vname
            inputs.append(Param(vname, node.type))
            continue
        vname = str(len(body))
        names[id(node)] = vname
        args = tuple(names[id(s)] for s in node.srcs)
        body.append(Instr(vname, node.op, args, dict(node.attrs), node.type))
    return Program(name, tuple(inputs), body, tuple(names[id(n)] for n in outputs))


def lower(outputs: list[Node], name: str = "main") -> tuple[Program, list[Any], tuple]:
    """The Program computing ``outputs``, the buffers for its inputs, and its plan-cache key."""
    key, leaves = structural_key(outputs)
    program = build_program(topological_order(outputs), outputs, name)
    return program, [leaf.buffer for leaf in leaves], key


def num_elements(shape: tuple[int, ...]) -> int:
    """Number of elements of an array of ``shape`` (1 for 0-d)."""
    return math.prod(shape)
