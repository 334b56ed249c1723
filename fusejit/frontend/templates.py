"""Composites recorded once per structure of their arguments, then replayed.

``fj.layer_norm(x, w, b)`` records about twenty nodes through the frontend (operand
coercion, NumPy's promotion, broadcasting, the reductions' rewrites) on every call, though
for arguments of one structure it makes the same nodes every time. ``replayed`` wraps such a
composite: the first call with a given structure records it normally and keeps the nodes it
made as a *template* (each node's op, attributes, dtype, shape and where its sources come
from); a later call with the same structure makes those nodes again straight through the
graph's makers (``ir.graph.make1``, ``make2``...), skipping the frontend. The nodes are the
ones recording would make (hash-consed: the same objects where they already exist), so plans,
kernels and results are unchanged; only the Python time per call drops.

The structure of a call is its tensors' signatures (``Node.sig``: op, dtype, shape and
sources, all the way down to the leaves, which differ only in their data), which of them are
the same tensor, and every other argument exactly (a float by its bits: a new ``eps`` is a
new template, since a value may decide the structure). A call whose arguments are anything
else (arrays, fj.jit's dynamic floats, unhashable values) records normally. A template is
kept only when replaying it on the call that made it gives the same signature; one that
would reach an input leaf the call did not pass, or a node made for a jit argument, is not
made (it records normally, every time).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from ..ir.graph import (
    MAX_SCALAR_LEAVES,
    NOTES,
    Node,
    frozen_attrs,
    make1,
    make2,
    make_scalar,
    topological_order,
)
from ..ir.graph import make as make_node
from .tensor import Tensor, _wrap

#: Most templates kept (a dict cleared when full: structures seen in a loop come back at once)
MAX_TEMPLATES = 512
#: Leaves the tensor arguments may hold in all: the frontend turns Python scalars into
#: constants past ``MAX_SCALAR_LEAVES`` leaves (a count, not a structure), so graphs near that
#: bound record normally
MAX_ARG_LEAVES = MAX_SCALAR_LEAVES // 4

_TEMPLATES: dict[tuple, Any] = {}
_LOCK = threading.Lock()
#: a structure whose recording could not be a template (recorded normally from then on)
_REFUSED = object()

# template steps: (kind, ...) with sources as indices into the replay's list of values
_ARG, _SCALAR, _FIXED, _MAKE1, _MAKE2, _MAKE = range(6)


def _argument_key(args: tuple, kwargs: dict) -> tuple | None:
    """The structure of a call's arguments (see the module's docstring), or None when a
    call of this kind records normally; the tensors' nodes come second."""
    parts: list[Any] = []
    nodes: list[Node] = []
    leaves = 0
    for value in (*args, *kwargs.values()):
        kind = type(value)
        if kind is Tensor:
            node = value._node
            same = next((i for i, n in enumerate(nodes) if n is node), -1)
            nodes.append(node)
            ls = node.leaves
            leaves += 1 if ls is None else len(ls)
            parts.append((node.sig, same))
        elif kind is float:
            parts.append((float, value.hex()))
        elif value is None or kind is int or kind is bool or kind is str:
            parts.append((kind, value))
        elif kind is tuple and all(type(v) is int for v in value):
            parts.append((tuple, value))
        else:
            return None
    if leaves > MAX_ARG_LEAVES or not nodes:
        return None
    return (tuple(parts), tuple(kwargs)), nodes


def replayed(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``fn`` (a composite of the frontend's ops returning one tensor) recorded once per
    structure of its arguments, then replayed (the module's docstring)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Tensor:
        found = _argument_key(args, kwargs)
        if found is None:
            return fn(*args, **kwargs)
        key, nodes = found
        key = (fn, key)
        template = _TEMPLATES.get(key)
        if template is not None and template is not _REFUSED:
            return _wrap(_replay(template, nodes))
        out = fn(*args, **kwargs)
        if template is None:
            made = _capture(out._node, nodes)
            if made is not None and _replay(made, nodes).sig != out._node.sig:
                made = None  # (a recording that a replay does not reproduce: never replayed)
            with _LOCK:
                if len(_TEMPLATES) >= MAX_TEMPLATES:
                    _TEMPLATES.clear()
                _TEMPLATES[key] = _REFUSED if made is None else made
        return out

    return wrapper


def _capture(out: Node, args: list[Node]) -> tuple | None:
    """The steps that make ``out`` from the argument nodes ``args``, sources first, then the
    index of ``out`` among them; or None when it depends on an input leaf that is not an
    argument or on fj.jit's arguments."""
    index: dict[int, int] = {}
    steps: list[tuple] = []
    for i, node in enumerate(args):
        if id(node) not in index:
            index[id(node)] = len(steps)
        steps.append((_ARG, i))
    order = topological_order([out], tuple(args))
    if any(n.op == "input" or (n.op == "scalar" and n.arg is not None) for n in order):
        return None
    for node in order:
        index[id(node)] = len(steps)
        if node.op == "scalar":
            steps.append((_SCALAR, node.buffer, node.dtype))
        elif not node.srcs:
            steps.append((_FIXED, node))  # a constant or iota: structural, kept alive here
        else:
            srcs = tuple(index[id(s)] for s in node.srcs)
            note = NOTES.get(node.sig)
            frozen = frozen_attrs(node.attrs, note)
            if len(srcs) == 1:
                steps.append((_MAKE1, node.op, srcs[0], node.dtype, node.shape, node.attrs,
                              frozen, note))
            elif len(srcs) == 2:
                steps.append((_MAKE2, node.op, srcs[0], srcs[1], node.dtype, node.shape,
                              node.attrs, frozen, note))
            else:
                steps.append((_MAKE, node.op, srcs, node.dtype, node.shape, node.attrs, note))
    return tuple(steps), index[id(out)]


def _replay(template: tuple, args: list[Node]) -> Node:
    """The node that a template makes from the argument nodes ``args`` (``_capture``)."""
    steps, result = template
    values: list[Node] = []
    append = values.append
    for step in steps:
        kind = step[0]
        if kind == _MAKE2:
            _, op, a, b, dtype, shape, attrs, frozen, note = step
            append(make2(op, values[a], values[b], dtype, shape, attrs, frozen, note))
        elif kind == _MAKE1:
            _, op, a, dtype, shape, attrs, frozen, note = step
            append(make1(op, values[a], dtype, shape, attrs, frozen, note))
        elif kind == _ARG:
            append(args[step[1]])
        elif kind == _SCALAR:
            append(make_scalar(step[1], step[2]))
        elif kind == _FIXED:
            append(step[1])
        else:
            _, op, srcs, dtype, shape, attrs, note = step
            append(make_node(op, tuple([values[s] for s in srcs]), attrs, dtype, shape, note))
    return values[result]
