"""The lazy graph: immutable, hash-consed nodes, and their lowering to a Program.

Structurally equal nodes are the same object (common subexpression
elimination for free): ``make`` looks a node up by its key (op, attributes,
dtype, shape and the identity of its sources) before creating it. Leaves
(``input`` nodes holding data, ``scalar`` nodes holding a value) are never
merged, so they are never looked up; nor is a node over a scalar leaf made for
it alone (``make_scalar_op``: a Python scalar meeting a tensor), which no
other node can equal.

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

#: the attributes of a node without any (never mutated)
_NO_ATTRS: dict[str, Any] = {}
#: The user's tensor of an input (``fj.asarray``) keeps alive the last ``KEEP_DERIVED``
#: nodes made from its leaf alone (its only leaf, no scalar params) at most ``KEEP_DEPTH`` ops
#: deep: a loop that records the same expression again (``fj.layer_norm(x, w, b)``,
#: ``x - x.mean()``) finds them in the table instead of making them anew. They hold no data
#: (the leaf is theirs), and their number per leaf is bounded. The tensor holds them
#: (``KeptNodes``) and the leaf only a weak reference: held by the leaf, they would make it a
#: reference cycle, and the user's buffer would outlive its tensor until a garbage collection
#: (a loop over batches of device arrays would hold every batch).
KEEP_DERIVED = 32
KEEP_DEPTH = 8
#: structural signature (op, attributes, dtype, shape, sources' signatures and leaf positions)
#: -> a small int, so a node's signature is computed once, when it is created
_SIGS: dict[tuple, int] = {}
_SIG_SERIAL = itertools.count()
_MAX_SIGS = 1 << 20
#: signature -> why the frontend recorded that node for a specific value (``x ** 2`` as
#: ``square``...): the note is part of the signature, so a plan's notes are its own
NOTES: dict[int, str] = {}
#: Most leaves (inputs and scalar parameters) one graph gets scalar parameters for; past
#: that, the frontend records Python scalars as constants (a structural rule, the same on
#: every recording, that bounds kernel argument lists and keeps long chains linear).
MAX_SCALAR_LEAVES = 64
_new = object.__new__


#: structural key -> weak reference to the one live node with that structure. References
#: carry no callback (a Python call per dying node cost about as much as making the node):
#: entries of dead nodes stay until the table has grown past ``_sweep_at``, then ``_sweep``
#: drops them
_NODES: dict[tuple, weakref.ref] = {}
_MIN_SWEEP = 4096
_sweep_at = _MIN_SWEEP
_ref = weakref.ref
NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _freeze(value: Any) -> Any:
    """Hashable, exact form of an attribute value (floats by bits: -0.0 and NaN stay distinct)."""
    kind = type(value)
    if kind is int or kind is bool or kind is str:
        return value
    if kind is tuple:  # shapes, axes, perms: ints only, already exact
        for v in value:
            if type(v) is not int:
                return tuple(_freeze(v) for v in value)
        return value
    if isinstance(value, float):
        return ("f", value.hex())
    if isinstance(value, (tuple, list)):
        return tuple(_freeze(v) for v in value)
    return value


class Node:
    """One immutable value of the lazy graph.

    ``op`` is an IR op, ``input`` (a leaf holding a buffer) or ``scalar`` (a leaf holding
    a scalar value, passed to kernels by value: a scalar param of the Program). Leaves of
    both kinds are never merged; ``leaves`` lists those under a node, in the order the
    Program's inputs take (``leaves_of``). A leaf's own ``leaves`` is None, not the tuple
    of itself: that tuple would make each leaf a reference cycle, which only the garbage
    collector frees (a realized tensor's buffer with it).
    """

    __slots__ = ("op", "srcs", "attrs", "dtype", "shape", "buffer", "name", "sig", "leaves",
                 "copies", "arg", "stream", "used", "depth", "derived", "__weakref__")

    op: str
    srcs: tuple[Node, ...]
    attrs: dict[str, Any]
    dtype: np.dtype
    shape: tuple[int, ...]
    #: input leaves only: a device backend's array of the leaf and its specialization, by
    #: device id (host data copied there once), or None; scalar leaves: whether a node
    #: already reads it (then it may be read twice)
    copies: dict[int, Any] | None
    #: scalar leaves only: where ``fj.jit`` takes its value on a later call (or None)
    arg: Any
    #: input leaves only: the CuPy stream a device backend computed the buffer on (None: not
    #: computed by a device backend); buffer exports name it as the stream to wait for
    stream: Any
    #: whether a node was made with this one among its sources: until then no node's key
    #: names it, so ``make`` need not look one up
    used: bool
    #: ops on the longest path from a leaf or constant (0 for those)
    depth: int
    #: input leaves only: a weak reference to the ``KeptNodes`` that the leaf's tensor holds
    #: (the last ``KEEP_DERIVED`` nodes made from this leaf alone), or None (none kept)
    derived: Any

    def __repr__(self) -> str:
        return f"Node({self.op}, {ir_name(self.dtype)}{list(self.shape)})"

    @property
    def type(self) -> TensorType:
        """dtype and shape as the IR's ``TensorType``."""
        return TensorType(self.dtype, self.shape)


def _sweep() -> None:
    """Drop the table entries of dead nodes; the next sweep comes when the table has doubled
    (so sweeping costs O(1) per node created)."""
    global _sweep_at
    # (over a copy, which dict.copy makes without running Python code: building a list of
    # the items allocates, and a garbage collection there may run code that lets another
    # thread add an entry to the table while it is being iterated)
    for key, ref in _NODES.copy().items():
        if ref() is None and _NODES.get(key) is ref:
            _NODES.pop(key, None)
    _sweep_at = max(2 * len(_NODES), _MIN_SWEEP)


def frozen_attrs(attrs: dict[str, Any], note: str | None = None) -> tuple:
    """A node's attributes and note as its key holds them (the makers' ``frozen``)."""
    frozen: tuple = tuple([(k, _freeze(v)) for k, v in attrs.items()]) if attrs else ()
    if note is not None:
        frozen += (("#note", note),)
    return frozen


def make(op: str, srcs: tuple[Node, ...], attrs: dict[str, Any], dtype: np.dtype,
         shape: tuple[int, ...], note: str | None = None) -> Node:
    """The unique node with this structure (created on first request).

    ``note`` says why the frontend chose this node for a specific value (it is part of
    the node's structure and appears in ``plan.explain()``).
    """
    frozen = frozen_attrs(attrs, note)
    if not attrs:
        attrs = _NO_ATTRS
    n = len(srcs)
    if n == 2:
        return make2(op, srcs[0], srcs[1], dtype, shape, attrs, frozen, note)
    if n == 1:
        return make1(op, srcs[0], dtype, shape, attrs, frozen, note)
    if n == 3 and not frozen:
        return make3(op, srcs[0], srcs[1], srcs[2], dtype, shape)
    return _make_any(op, srcs, dtype, shape, attrs, frozen, note)


def _make_any(op: str, srcs: tuple[Node, ...], dtype: np.dtype, shape: tuple[int, ...],
              attrs: dict[str, Any], frozen: tuple, note: str | None) -> Node:
    """``make`` of any number of sources (the arities without a path of their own: constants,
    and ``make3``'s three when they carry attributes or shared leaves). One pass over the
    sources, no generators."""
    # keys of different arities differ in length, so they never compare equal
    key = (op, *map(id, srcs), frozen, dtype, shape)
    known = True
    for s in srcs:
        if not s.used:  # (no node has this key yet)
            known = False
            break
    if known:
        ref = _NODES.get(key)
        if ref is not None:
            node = ref()
            # sources are held by the node, so their ids cannot have been reused while it lives
            if node is not None:
                return node
    node = _new(Node)
    node.op, node.srcs, node.attrs, node.dtype, node.shape = op, srcs, attrs, dtype, shape
    node.buffer = node.name = None
    node.used = False
    if not srcs:
        node.depth = 0
        node.leaves = ()
        signature: tuple = (op, frozen, dtype, shape)
    else:
        depth, total, tuples, groups = 0, 0, True, []
        for src in srcs:
            src.used = True
            if src.depth > depth:
                depth = src.depth
            leaves = src.leaves
            if leaves is None:  # (a leaf: itself)
                leaves = (src,)
            elif type(leaves) is not tuple:
                tuples = False
            total += len(leaves)
            groups.append(leaves)
        node.depth = depth = depth + 1
        if tuples and total < SHARE_LEAVES:
            node.leaves, positions = merge_leaves(groups)
            if depth <= KEEP_DEPTH and len(node.leaves) == 1:
                _keep(node)
        else:
            node.leaves, positions = _merge_shared(groups)
        signature = (op, frozen, dtype, shape, tuple([s.sig for s in srcs]), positions)
    sig = _SIGS.get(signature)
    node.sig = sig if sig is not None else _intern(signature)
    if note is not None:
        NOTES[node.sig] = note
    _NODES[key] = _ref(node)
    if len(_NODES) > _sweep_at:
        _sweep()
    return node


def make3(op: str, a: Node, b: Node, c: Node, dtype: np.dtype, shape: tuple[int, ...]) -> Node:
    """``make(op, (a, b, c), {}, dtype, shape)``: the key, leaves and signature that
    ``_make_any`` gives, without its general merge (a list, an index dict and a position
    list per source) when the sources' leaves are short tuples: ``where`` is recorded in
    every leaky activation and clip, and its condition usually holds the leaves of both
    branches already (``where(x > y, x, y)``)."""
    key = (op, id(a), id(b), id(c), (), dtype, shape)  # (``_make_any``'s key)
    if a.used and b.used and c.used:  # (else no node has this key yet)
        ref = _NODES.get(key)
        if ref is not None:
            node = ref()
            # sources are held by the node, so their ids cannot have been reused while it lives
            if node is not None:
                return node
    la, lb, lc = a.leaves, b.leaves, c.leaves
    if la is None:  # (a leaf: itself)
        la = (a,)
    if lb is None:
        lb = (b,)
    if lc is None:
        lc = (c,)
    if type(la) is not tuple or type(lb) is not tuple or type(lc) is not tuple \
            or len(la) + len(lb) + len(lc) >= SHARE_LEAVES:
        return _make_any(op, (a, b, c), dtype, shape, _NO_ATTRS, (), None)  # (shared leaves)
    # ``merge_leaves([la, lb, lc])`` on tuples: leaves hold no duplicates, so a group that
    # leads the merged leaves sits at positions 0..n-1 (None); the others are looked up,
    # the leaves not there yet appended (tuple search by identity: Node has no __eq__)
    leaves = la
    positions: list[Any] = [None]
    for group in (lb, lc):
        n = len(group)
        if leaves[:n] == group:
            positions.append(None)
            continue
        where = []
        for leaf in group:
            if leaf in leaves:
                where.append(leaves.index(leaf))
            else:
                where.append(len(leaves))
                leaves += (leaf,)
        positions.append(None if where == list(range(n)) else tuple(where))
    # a scalar leaf is marked once it is in a node's leaves (see make2): those under a source
    # already are, a source that is one itself is now
    for src in (a, b, c):
        src.used = True
        if src.op == "scalar":
            src.copies = True
    node = _new(Node)
    node.op = op
    node.srcs = (a, b, c)
    node.attrs = _NO_ATTRS
    node.dtype = dtype
    node.shape = shape
    node.buffer = None
    node.name = None
    node.used = False
    depth = a.depth
    if b.depth > depth:
        depth = b.depth
    if c.depth > depth:
        depth = c.depth
    node.depth = depth = depth + 1
    node.leaves = leaves
    if depth <= KEEP_DEPTH and len(leaves) == 1:
        _keep(node)
    signature = (op, (), dtype, shape, (a.sig, b.sig, c.sig), tuple(positions))
    sig = _SIGS.get(signature)
    node.sig = sig if sig is not None else _intern(signature)
    _NODES[key] = _ref(node)
    if len(_NODES) > _sweep_at:
        _sweep()
    return node


def make1(op: str, a: Node, dtype: np.dtype, shape: tuple[int, ...],
          attrs: dict[str, Any] = _NO_ATTRS, frozen: tuple = (), note: str | None = None) -> Node:
    """``make(op, (a,), attrs, dtype, shape, note)`` (``frozen``: the attributes and note as
    ``make`` freezes them, ``(("shape", shape),)`` for a reshape: shapes and axes are tuples
    of ints, which freeze to themselves)."""
    key = (op, id(a), frozen, dtype, shape)
    if a.used:  # (else no node has this key yet)
        ref = _NODES.get(key)
        if ref is not None:
            node = ref()
            # the source is held by the node, so its id cannot have been reused while it lives
            if node is not None:
                return node
    node = _new(Node)
    node.op = op
    node.srcs = (a,)
    node.attrs = attrs
    node.dtype = dtype
    node.shape = shape
    node.buffer = None
    node.name = None
    node.used = False
    a.used = True
    leaves = a.leaves
    if leaves is None:
        leaves = (a,)
    node.leaves = leaves
    if a.op == "scalar":
        a.copies = True  # now in this node's leaves (see make2)
    depth = node.depth = a.depth + 1
    if depth <= KEEP_DEPTH and type(leaves) is tuple and len(leaves) == 1 \
            and leaves[0].op == "input":
        _keep(node)
    signature = (op, frozen, dtype, shape, a.sig)
    sig = _SIGS.get(signature)
    node.sig = sig if sig is not None else _intern(signature)
    if note is not None:
        NOTES[node.sig] = note
    _NODES[key] = _ref(node)
    if len(_NODES) > _sweep_at:
        _sweep()
    return node


def make2(op: str, a: Node, b: Node, dtype: np.dtype, shape: tuple[int, ...],
          attrs: dict[str, Any] = _NO_ATTRS, frozen: tuple = (), note: str | None = None) -> Node:
    """``make(op, (a, b), attrs, dtype, shape, note)`` (``frozen``: the attributes and note
    as ``make`` freezes them); the defaults are the hot path of binary ops (a Python scalar
    operand takes ``make_scalar_op``)."""
    key = (op, id(a), id(b), frozen, dtype, shape)
    if a.used and b.used:  # (else no node has this key yet)
        ref = _NODES.get(key)
        if ref is not None:
            node = ref()
            # sources are held by the node, so their ids cannot have been reused while it lives
            if node is not None:
                return node
    node = _new(Node)
    # (one store per slot, here and in the other makers: a multiple assignment builds and
    # unpacks a tuple, a few percent of a recorded op)
    node.op = op
    node.srcs = (a, b)
    node.attrs = attrs
    node.dtype = dtype
    node.shape = shape
    node.buffer = None
    node.name = None
    node.used = False
    a.used = b.used = True
    depth, db = a.depth, b.depth
    if db > depth:
        depth = db
    node.depth = depth = depth + 1
    la, lb = a.leaves, b.leaves
    if la is None:  # (a leaf)
        la = (a,)
    if lb is None:
        lb = la if b is a else (b,)
    if type(la) is not tuple or type(lb) is not tuple or len(la) >= SHARE_LEAVES:
        # a long list of leaves (a chain meeting a new input at every step): shared, not
        # copied at every node (see LeafView)
        if (b.op == "scalar" and not b.copies and type(la) is LeafView
                and la.n == len(la.shared.items)):
            # (``_merge_shared``, inline: a scalar read for the first time, appended in place)
            shared, n = la.shared, la.n
            shared.items.append(b)
            shared.index[id(b)] = n
            b.copies = True
            view = node.leaves = _new(LeafView)
            view.shared, view.n = shared, n + 1
            positions = (None, (n,))
        else:
            node.leaves, positions = _merge_shared([la, lb])
        signature: tuple = (op, frozen, dtype, shape, a.sig, b.sig, positions)
    else:
        # the common cases without a general merge (``tag`` says which, and where): one side
        # has no leaves or the same ones, or one side has a single leaf (a scalar parameter,
        # a new input), which is found in the other side's leaves or appended to them. A
        # scalar leaf is marked (``copies``) once it is in a node's leaves: an unmarked one
        # is in none, so it is appended without a search.
        if lb is la or not lb:
            node.leaves, tag = la, 0
        elif not la:
            node.leaves, tag = lb, 1
        elif b.op == "scalar" and not b.copies:  # a scalar read for the first time: appended
            node.leaves, tag = la + lb, 2
        elif len(lb) == 1:  # (``_place``, inline: a new input, a scalar read again)
            leaf = lb[0]
            if leaf in la:
                node.leaves, tag = la, (2, la.index(leaf))
            else:
                node.leaves, tag = la + lb, 2
        elif len(la) == 1:
            node.leaves, tag = _place(la[0], lb, 3)
        else:  # (the positions of a general merge start with None: no clash with the above)
            node.leaves, tag = merge_leaves([la, lb])
        if a.op == "scalar":
            a.copies = True
        if b.op == "scalar":
            b.copies = True
        if depth <= KEEP_DEPTH and len(node.leaves) == 1 and node.leaves[0].op == "input":
            _keep(node)
        signature = (op, frozen, dtype, shape, a.sig, b.sig, tag)
    sig = _SIGS.get(signature)
    node.sig = sig if sig is not None else _intern(signature)
    if note is not None:
        NOTES[node.sig] = note
    _NODES[key] = _ref(node)
    if len(_NODES) > _sweep_at:
        _sweep()
    return node


def make_scalar_op(op: str, a: Node, value: Any, sdtype: np.dtype, dtype: np.dtype,
                   shape: tuple[int, ...], first: bool = False) -> Node:
    """``make2(op, a, make_scalar(value, sdtype), dtype, shape)`` (the scalar
    first when ``first``) in one step: the hot path of a tensor meeting a Python scalar.

    The node's leaves, tag and signature are the ones ``make2`` gives (a test compares them).
    """
    s = _new(Node)
    s.op = "scalar"
    s.srcs = ()
    s.attrs = _NO_ATTRS
    s.dtype = sdtype
    s.shape = ()
    s.buffer = value
    s.name = None
    s.stream = None
    s.arg = None
    s.leaves = None
    s.copies = True  # (in this node's leaves, a source of it)
    s.used = True
    s.depth = 0
    sig = _SCALAR_SIGS.get(sdtype)
    if sig is None:
        sig = _SCALAR_SIGS[sdtype] = _intern(("scalar", sdtype))
    s.sig = sig
    node = _new(Node)
    node.op = op
    node.attrs = _NO_ATTRS
    node.dtype = dtype
    node.shape = shape
    node.buffer = None
    node.name = None
    node.used = False
    node.depth = a.depth + 1
    if a.op == "scalar":
        a.copies = True
    a.used = True
    leaves = a.leaves
    if leaves is None:
        leaves = (a,)
    if first:
        node.srcs = (s, a)
        if type(leaves) is not tuple or SHARE_LEAVES <= 1:
            node.leaves, tag = _merge_shared([(s,), leaves])
        elif not leaves:
            node.leaves, tag = (s,), 0
        elif len(leaves) == 1 or a.op == "scalar":  # (a scalar a: read for the first time)
            node.leaves, tag = (s, *leaves), 2
        else:
            node.leaves, tag = (*leaves, s), 3
        signature: tuple = (op, (), dtype, shape, sig, a.sig, tag)
    else:
        node.srcs = (a, s)
        if type(leaves) is not tuple or len(leaves) >= SHARE_LEAVES:
            if type(leaves) is LeafView and leaves.n == len(leaves.shared.items):
                # appended in place (see make2)
                shared, n = leaves.shared, leaves.n
                shared.items.append(s)
                shared.index[id(s)] = n
                view = node.leaves = _new(LeafView)
                view.shared, view.n = shared, n + 1
                tag = (None, (n,))
            else:
                node.leaves, tag = _merge_shared([leaves, (s,)])
        elif not leaves:
            node.leaves, tag = (s,), 1
        else:
            node.leaves, tag = (*leaves, s), 2
        signature = (op, (), dtype, shape, a.sig, sig, tag)
    sig = _SIGS.get(signature)
    node.sig = sig if sig is not None else _intern(signature)
    return node


def leaves_of(node: Node) -> Any:
    """The leaves under ``node`` in the Program's input order (a tuple, or a ``LeafView``)."""
    leaves = node.leaves
    return (node,) if leaves is None else leaves


class KeptNodes(list):
    """The nodes kept alive for a loop to find again (``KEEP_DERIVED``): held by the tensor
    of their leaf, weakly referenced by the leaf."""

    __slots__ = ("__weakref__",)


def keep_derived(leaf: Node) -> KeptNodes:
    """A new ``KeptNodes`` for an input ``leaf``, for its tensor to hold."""
    kept = KeptNodes()
    leaf.derived = weakref.ref(kept)
    return kept


def _keep(node: Node) -> None:
    """Keep ``node`` alive with its only leaf's tensor, when that leaf has one (see
    ``KEEP_DERIVED``)."""
    leaf = node.leaves[0]
    ref = leaf.derived if leaf.op == "input" else None
    kept = ref() if ref is not None else None
    if kept is not None:
        kept.append(node)
        if len(kept) > KEEP_DERIVED:
            del kept[0]


def _place(leaf: Node, leaves: tuple[Node, ...], side: int) -> tuple[tuple[Node, ...], Any]:
    """``leaves`` with the single leaf of one side (``side``: 2 for b, 3 for a) appended
    unless it is there already, and the tag saying which (``side``: appended, which is at
    position ``len(leaves)``; else ``(side, position)``)."""
    if leaf.op == "scalar" and not leaf.copies:
        leaf.copies = True  # read for the first time: it cannot be in another node's leaves
    else:
        for i, other in enumerate(leaves):
            if other is leaf:
                return leaves, (side, i)
    return leaves + (leaf,), side


def _intern(signature: tuple) -> int:
    # ids come from a counter and are never reused, so forgetting the table (to bound its
    # memory) can only cost plan-cache misses, never a wrong match
    sig = _SIGS.get(signature)
    if sig is None:
        if len(_SIGS) >= _MAX_SIGS:
            _SIGS.clear()
            NOTES.clear()
            _SCALAR_SIGS.clear()
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
        for leaf in first:
            if leaf.op == "scalar":
                leaf.copies = True
    positions = _append_groups(shared.items, shared.index, groups[1:])
    return LeafView(shared, len(shared.items)), positions


def _append_groups(items: list[Node], index: dict[int, int], groups: list[Any]) -> tuple[Any, ...]:
    """Append each group's leaves not yet in ``items`` (marking scalar leaves as read, see
    ``make``); the positions of the first group (None: a prefix) and of each of ``groups``."""
    positions: list[Any] = [None]
    for group in groups:
        where = []
        for leaf in group:
            i = index.get(id(leaf))
            if i is None:
                i = index[id(leaf)] = len(items)
                items.append(leaf)
                if leaf.op == "scalar":
                    leaf.copies = True
            where.append(i)
        positions.append(None if where == list(range(len(where))) else tuple(where))
    return tuple(positions)


def merge_leaves(groups: list[Any]) -> tuple[tuple[Node, ...], tuple[Any, ...]]:
    """The leaves of several subgraphs in first-occurrence order (each group's leaves in
    order, those already met skipped), and each group's positions in it (None: a prefix).
    Scalar leaves met for the first time are marked as read (see ``make``)."""
    merged = list(groups[0])
    for leaf in merged:
        if leaf.op == "scalar":
            leaf.copies = True
    index = {id(leaf): i for i, leaf in enumerate(merged)}
    positions = _append_groups(merged, index, groups[1:])
    return tuple(merged), positions


def make_input(buffer: Any, dtype: np.dtype, shape: tuple[int, ...], name: str | None,
               sig: int | None = None, stream: Any = None) -> Node:
    """A leaf holding data. Never merged with another leaf. ``stream``: the CuPy stream the
    buffer was computed on, when a device backend computed it. No nodes made from it are
    kept alive (``KEEP_DERIVED``) unless its tensor asks (``keep_derived``).

    ``sig`` is the leaf's signature when the caller computed it before (``fj.jit`` wraps
    its outputs this way); it must be ``_intern(("input", name, dtype, shape))``.
    """
    node = _new(Node)
    node.op, node.srcs, node.attrs, node.dtype, node.shape = "input", (), {}, dtype, shape
    node.buffer, node.name = buffer, name
    node.copies = node.arg = None  # a device backend's copies of host data, by device id
    node.stream = stream
    node.used = False
    node.depth = 0
    node.derived = None
    node.leaves = None  # (leaves_of: itself)
    node.sig = _intern(("input", name, dtype, shape)) if sig is None else sig
    return node


def make_scalar(value: Any, dtype: np.dtype, arg: Any = None) -> Node:
    """A 0-d leaf holding a scalar ``value`` (already of ``dtype``), passed to kernels by value.

    Its signature holds the dtype, not the value: graphs that differ only in their scalar
    values share a plan and compiled kernels. Never merged with another leaf (two uses of
    one Python value are two parameters), so the structure never depends on values.
    ``arg`` tells ``fj.jit`` which argument gives the value on a later call.
    """
    node = _new(Node)
    node.op = "scalar"
    node.srcs = ()
    node.attrs = _NO_ATTRS
    node.dtype = dtype
    node.shape = ()
    node.buffer = value
    node.name = None
    node.copies = False  # not read by any node yet
    node.stream = None
    node.arg = arg
    node.used = False
    node.depth = 0
    node.leaves = None  # (leaves_of: itself)
    sig = _SCALAR_SIGS.get(dtype)
    if sig is None:
        sig = _SCALAR_SIGS[dtype] = _intern(("scalar", dtype))
    node.sig = sig
    return node


#: signature of a scalar leaf, by dtype (its signature holds nothing else)
_SCALAR_SIGS: dict[np.dtype, int] = {}

def structural_key(outputs: list[Node]) -> tuple[tuple, tuple[Node, ...]]:
    """The plan-cache key of ``outputs`` and their leaves, in the Program's input order.

    Built from the signatures that nodes got when created, so it costs one step per
    output, not per node: two graphs with equal keys lower to the same Program.
    """
    if len(outputs) == 1:
        node = outputs[0]
        leaves = node.leaves
        if leaves is None:
            return (node.sig,), (node,)
        return (node.sig,), leaves if type(leaves) is tuple else tuple(leaves)
    leaves, positions = merge_leaves([leaves_of(n) for n in outputs])
    return (tuple(n.sig for n in outputs), positions), leaves


def topological_order(outputs: list[Node], given: tuple[Node, ...] = ()) -> list[Node]:
    """Every node under ``outputs``, each after its sources (iterative post-order: no
    recursion limit); the walk stops at the ``given`` nodes, which it does not list (a
    composite's arguments, ``frontend.templates``)."""
    order: list[Node] = []
    done: set[int] = {id(n) for n in given}
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


def build_program(order: list[Node], outputs: list[Node], name: str = "main",
                  leaves: tuple[Node, ...] | None = None) -> Program:
    """The Program for a topological order: inputs keep their names, values are numbered.

    The inputs are ``leaves`` in order (default: ``structural_key(outputs)``'s), so that
    a realize binds its buffers and scalars by position: buffers are named after their
    tensors (else ``in0``, ``in1``...), scalar params ``s0``, ``s1``... Nodes recorded for
    a specific value (``make``'s ``note``) put their note on the Program's ``notes``.
    """
    if leaves is None:
        leaves = structural_key(outputs)[1]
    names: dict[int, str] = {}
    inputs: list[Param] = []
    used: set[str] = set()
    scalars = 0
    for leaf in leaves:
        if leaf.op == "scalar":
            base = f"s{scalars}"
            scalars += 1
        else:
            base = leaf.name or f"in{len(inputs) - scalars}"
        vname = base
        for suffix in itertools.count(1):
            if vname not in used:
                break
            vname = f"{base}_{suffix}"
        used.add(vname)
        names[id(leaf)] = vname
        inputs.append(Param(vname, leaf.type, leaf.op == "scalar"))
    body: list[Instr] = []
    notes: dict[str, str] = {}
    for node in order:
        if node.op == "input" or node.op == "scalar":
            continue
        vname = str(len(body))
        names[id(node)] = vname
        args = tuple(names[id(s)] for s in node.srcs)
        body.append(Instr(vname, node.op, args, dict(node.attrs), node.type))
        note = NOTES.get(node.sig)
        if note is not None:
            notes[vname] = note
    return Program(name, tuple(inputs), body, tuple(names[id(n)] for n in outputs), notes)


def lower(outputs: list[Node], name: str = "main") -> tuple[Program, list[Any], tuple]:
    """The Program computing ``outputs``, the buffers (and scalar values) for its inputs, and
    its plan-cache key."""
    key, leaves = structural_key(outputs)
    program = build_program(topological_order(outputs), outputs, name, leaves)
    return program, [leaf.buffer for leaf in leaves], key


def num_elements(shape: tuple[int, ...]) -> int:
    """Number of elements of an array of ``shape`` (1 for 0-d)."""
    return math.prod(shape)
