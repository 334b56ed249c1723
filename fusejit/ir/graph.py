"""The lazy graph: immutable, hash-consed nodes, and their lowering to a Program.

Structurally equal nodes are the same object (common subexpression
elimination for free): ``make`` looks a node up by its key before creating it.
Each node computes its key and hash once, at creation. Leaves that hold data
(``input`` nodes) are never merged: each carries its own serial number.

``lower`` turns the graph under a set of outputs into a Program plus the
buffers that feed its inputs, with an iterative traversal (no recursion
limit) and a structural key that the plan cache uses. The key names the
buffers only by position, so two realizes of the same structure over new data
share a plan.
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
#: structural key -> weak reference to the one live node with that structure
_NODES: dict[tuple, weakref.KeyedRef] = {}
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _freeze(value: Any) -> Any:
    """Hashable, exact form of an attribute value (floats by bits: -0.0 and NaN stay distinct)."""
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v) for v in value)
    return value


class Node:
    """One immutable value of the lazy graph."""

    __slots__ = ("op", "srcs", "attrs", "dtype", "shape", "key", "_hash", "buffer", "name",
                 "__weakref__")

    op: str
    srcs: tuple[Node, ...]
    attrs: dict[str, Any]
    dtype: np.dtype
    shape: tuple[int, ...]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Node({self.op}, {ir_name(self.dtype)}{list(self.shape)})"

    @property
    def type(self) -> TensorType:
        """dtype and shape as the IR's ``TensorType``."""
        return TensorType(self.dtype, self.shape)


def _forget(ref: weakref.KeyedRef) -> None:
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
    _NODES[key] = weakref.KeyedRef(node, _forget, key)
    return node


def make_input(buffer: Any, dtype: np.dtype, shape: tuple[int, ...], name: str | None) -> Node:
    """A leaf holding data. Never merged with another leaf."""
    node = Node()
    node.op, node.srcs, node.attrs, node.dtype, node.shape = "input", (), {}, dtype, shape
    node.key = ("input", next(_INPUT_SERIAL))
    node._hash = hash(node.key)
    node.buffer, node.name = buffer, name
    return node


def linearize(outputs: list[Node], name: str = "main") -> tuple[tuple, list[Any], list[Node]]:
    """Structural key, input buffers and topological order of the graph under ``outputs``.

    This is the cheap half of lowering, run on every ``realize``: when the key
    hits the plan cache, no Program is built. Buffers appear in the key only as
    their position, dtype and shape.
    """
    order: list[Node] = []
    index: dict[int, int] = {}
    buffers: list[Any] = []
    key: list[Any] = [name]
    # iterative post-order (no recursion limit), numbering and keying nodes as they finish
    for root in outputs:
        if id(root) in index:
            continue
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            srcs = node.srcs
            if i < len(srcs):
                stack[-1] = (node, i + 1)
                if id(srcs[i]) not in index:
                    stack.append((srcs[i], 0))
                continue
            stack.pop()
            if id(node) in index:
                continue
            index[id(node)] = len(order)
            order.append(node)
            if node.op == "input":
                buffers.append(node.buffer)
                key.append((node.name, node.dtype.str, node.shape))
            else:
                key.append((node.key[0], tuple([index[id(s)] for s in srcs]), node.key[2],
                            node.key[3], node.shape))
    key.append(tuple(index[id(n)] for n in outputs))
    return tuple(key), buffers, order


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
    """The Program computing ``outputs``, the buffers for its inputs, and its structural key."""
    key, buffers, order = linearize(outputs, name)
    return build_program(order, outputs, name), buffers, key


def num_elements(shape: tuple[int, ...]) -> int:
    """Number of elements of an array of ``shape`` (1 for 0-d)."""
    return math.prod(shape)
