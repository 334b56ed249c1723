"""The table of live nodes behind hash-consing (``fusejit.ir.graph``).

``make`` returns the live node of equal structure when there is one; it skips the lookup
when a source was never read (no node can name it yet), nodes over a Python scalar made
for them alone (``fresh``) never enter the table, and entries of dead nodes are swept
once the table has doubled. None of that may lose a live node: a graph recorded twice
over the same tensors is the same nodes, except below a Python scalar (a parameter of
its own each time).
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
from hypothesis import HealthCheck, given, settings

import fusejit as fj
from fusejit.ir import graph
from fusejit.ir.graph import topological_order
from fusejit.testing import programs


def _structure(node):
    """What makes two nodes equal for ``make``: op, attributes, dtype, shape, source ids."""
    return (node.op, tuple(id(s) for s in node.srcs), repr(sorted(node.attrs.items())),
            node.dtype, node.shape)


def _below_fresh_scalar(order):
    """Ids of the nodes that read, directly or not, a scalar leaf made for its one node."""
    out: set[int] = set()
    for node in order:
        if any(s.op == "scalar" and s.arg is None or id(s) in out for s in node.srcs):
            out.add(id(node))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_steps=8, max_outputs=3))
def test_recording_again_over_the_same_tensors_gives_the_same_nodes(recipe):
    inputs = [fj.asarray(a) for a in recipe.inputs]
    first = [t._node for t in recipe(fj, *inputs) if isinstance(t, fj.Tensor)]
    second = [t._node for t in recipe(fj, *inputs) if isinstance(t, fj.Tensor)]
    order1, order2 = topological_order(first), topological_order(second)
    live = {_structure(n): n for n in order1 if n.op not in ("input", "scalar")}
    fresh = _below_fresh_scalar(order2)
    for node in order2:
        if node.op in ("input", "scalar"):
            continue
        if id(node) not in fresh:  # no Python scalar below: the first recording's node
            assert live.get(_structure(node)) is node, node
        else:  # a new parameter below: a node of its own (its structure names the new leaf)
            assert _structure(node) not in live


def test_equal_structures_are_one_node():
    x = fj.asarray(np.ones((4, 8), np.float32))
    w = fj.asarray(np.ones(8, np.float32))
    y = fj.asarray(np.ones((4, 8), np.float32))
    assert (x * y)._node is (x * y)._node
    assert (x + w)._node is (x + w)._node  # the broadcast of w too
    m = fj.mean(x, axis=1, keepdims=True)
    assert m._node is fj.mean(x, axis=1, keepdims=True)._node
    assert (x - m)._node is (x - m)._node
    assert fj.exp(x)._node is fj.exp(x)._node
    assert fj.where(x > y, x, y)._node is fj.where(x > y, x, y)._node
    # a Python scalar is a parameter of its own at each use: no two such nodes are equal
    assert (x * 2.0)._node is not (x * 2.0)._node
    assert (2.0 * x)._node is not (2.0 * x)._node


def test_nodes_over_a_fresh_scalar_stay_out_of_the_table():
    x = fj.asarray(np.ones(16, np.float32))
    x * 0.5  # (the first recording takes the full path, which memoizes the fast one)
    before = len(graph._NODES)
    kept = [x * float(i) for i in range(100)]  # alive, yet not entered
    assert len(graph._NODES) == before
    np.testing.assert_array_equal(kept[7].numpy(), np.full(16, 7, np.float32))


def test_dead_entries_are_swept():
    x = fj.asarray(np.ones(16, np.float32))
    y = fj.asarray(np.ones(16, np.float32))
    gc.collect()
    for _ in range(3):
        for _ in range(4 * graph._MIN_SWEEP):  # each chain dies at once
            (fj.exp(x) + y) * y
        assert len(graph._NODES) <= max(graph._sweep_at, graph._MIN_SWEEP) + 1
    live = [fj.exp(x) + fj.asarray(np.ones(16, np.float32)) for _ in range(3 * graph._MIN_SWEEP)]
    gc.collect()
    for t in live:  # a sweep keeps the live nodes: recording again finds them
        node = t._node
        assert (fj.Tensor(node.srcs[0]) + fj.Tensor(node.srcs[1]))._node is node
    assert len(graph._NODES) >= len(live)


def test_an_input_keeps_the_shallow_nodes_made_from_it_alone():
    x = fj.asarray(np.ones((4, 8), np.float32))
    y = fj.asarray(np.ones((4, 8), np.float32))
    first = fj.layer_norm(x) * y
    mean = weakref.ref(fj.mean(x, axis=-1, keepdims=True)._node)
    pair = weakref.ref(first._node)  # two leaves: not kept
    scaled = weakref.ref((x * 2.0)._node)  # a scalar param: not kept
    deep = x
    for _ in range(3 * graph.KEEP_DEPTH):
        deep = fj.negative(deep)
    deepest = weakref.ref(deep._node)
    kept_y = weakref.ref(y._node)
    del first, deep, y
    gc.collect()
    assert mean() is not None and pair() is None and scaled() is None and deepest() is None
    assert kept_y() is None  # nodes kept on x hold x alone
    kept = x._kept  # held by the tensor (the leaf has a weak reference to them)
    assert x._node.derived() is kept
    assert 0 < len(kept) <= graph.KEEP_DERIVED
    assert all(n.leaves == (x._node,) and n.depth <= graph.KEEP_DEPTH for n in kept)
    assert fj.mean(x, axis=-1, keepdims=True)._node is mean()  # a loop finds them again
    for i in range(2 * graph.KEEP_DERIVED):  # past KEEP_DERIVED, the oldest go
        x + fj.full((4, 8), i, np.float32)  # (a constant: no leaf)
    assert len(x._kept) == graph.KEEP_DERIVED
    assert mean() is None


def test_leaves_are_freed_without_the_garbage_collector():
    # a leaf's own leaves are not a tuple of itself (a reference cycle): a dropped realized
    # tensor frees its buffer at once, and a dropped recording its scalar params
    x = fj.asarray(np.ones(1024, np.float32))
    gc.disable()
    try:
        y = (x * 2.0 + 1).realize()
        buffer = weakref.ref(y._node.buffer)
        scalar = fj.exp(x) * 3.0
        param = weakref.ref(scalar._node.srcs[1])
        assert scalar._node.srcs[1].op == "scalar" and buffer() is not None
        del y, scalar
        assert buffer() is None and param() is None
        # a result keeps no nodes made from it (a loop makes a new one each time; they
        # would make it a cycle): recording on it does not delay freeing its buffer
        y = fj.exp(x).realize()
        buffer = weakref.ref(y._node.buffer)
        fj.exp(y) + 1
        assert y._node.derived is None
        del y
        assert buffer() is None
        # the user's own arrays: their tensors keep the nodes, so buffer and nodes go with
        # the tensor, without a collection (a loop over batches must not hold every batch)
        a = np.ones((4, 8), np.float32)
        user_buffer = weakref.ref(a)
        t = fj.asarray(a)
        mean = weakref.ref(fj.mean(t, axis=-1, keepdims=True)._node)
        assert t._node.derived() is t._kept and mean() is not None  # kept for a loop
        del a, t
        assert user_buffer() is None and mean() is None
    finally:
        gc.enable()


def _operands():
    """Factories of nodes of every kind of leaves a scalar can meet (each call: new leaves)."""
    f32 = np.dtype(np.float32)

    def leaf():
        return fj.asarray(np.ones(4, np.float32))._node

    def scalar(read):
        s = graph.make_scalar(np.float32(1), f32)
        if read:
            graph.make1("neg", s, f32, ())
        return s

    def chain(n, branch=False):  # past SHARE_LEAVES: a LeafView (the list's end, or not)
        t = fj.asarray(np.ones(4, np.float32))
        for _ in range(n):
            t = t + fj.asarray(np.ones(4, np.float32))
        if branch:
            t + fj.asarray(np.ones(4, np.float32))  # extends the shared list past t
        return t._node

    return {
        "input": leaf, "scalar": lambda: scalar(False), "read scalar": lambda: scalar(True),
        "const": lambda: fj.zeros(4, np.float32)._node,
        "one leaf": lambda: graph.make1("exp", leaf(), f32, (4,)),
        "two leaves": lambda: graph.make2("mul", leaf(), leaf(), f32, (4,)),
        "shared": lambda: chain(graph.SHARE_LEAVES + 2),
        "shared, a branch": lambda: chain(graph.SHARE_LEAVES + 2, branch=True),
    }


def _shape(node, first):
    """Signature, leaves (kinds) and where the scalar source is among them."""
    leaves = graph.structural_key([node])[1]
    scalar = node.srcs[0 if first else 1]
    return node.sig, [(n.op, n.dtype) for n in leaves], leaves.index(scalar)


def test_make_scalar_op_is_make2_of_a_fresh_scalar(monkeypatch):
    f32 = np.dtype(np.float32)
    for share in (graph.SHARE_LEAVES, 1):
        monkeypatch.setattr(graph, "SHARE_LEAVES", share)
        for name, make in _operands().items():
            for first in (False, True):
                a = make()
                s = graph.make_scalar(np.float32(2), f32)
                pair = (s, a) if first else (a, s)
                want = graph.make2("mul", *pair, f32, a.shape)
                got = graph.make_scalar_op("mul", make(), np.float32(2), f32, f32, a.shape, first)
                assert _shape(got, first) == _shape(want, first), (name, first, share)
                assert got.srcs[0 if first else 1].copies is True and got.depth == want.depth


def test_three_sources_take_the_general_path_in_first_occurrence_order(monkeypatch):
    """``where``'s three sources (``graph.make3``; ``graph._make_any`` past ``SHARE_LEAVES``):
    the node's leaves are its sources' leaves in first-occurrence order, its depth one more
    than the deepest source's, and the same sources give the same node again, for sources of
    every kind of leaves (tuples and shared lists, fresh and read scalars), below and past
    ``SHARE_LEAVES``; equal structures over other operands share the signature."""
    f32, b8 = np.dtype(np.float32), np.dtype(np.bool_)
    kinds = _operands()
    names = ["input", "read scalar", "two leaves", "shared", "shared, a branch", "one leaf"]
    for share in (graph.SHARE_LEAVES, 2):
        monkeypatch.setattr(graph, "SHARE_LEAVES", share)
        for i, first in enumerate(names):
            for second, third in ((names[i - 1], names[i - 2]), (first, first)):
                sigs = []
                for _ in range(2):
                    a, b, c = kinds[first](), kinds[second](), kinds[third]()
                    cond = graph.make1("cast", a, b8, a.shape)
                    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
                    want: list = []
                    for src in (cond, b, c):
                        want += [leaf for leaf in graph.leaves_of(src)
                                 if not any(leaf is w for w in want)]
                    node = graph.make("where", (cond, b, c), {}, f32, shape)
                    assert list(graph.leaves_of(node)) == want, (first, second, third, share)
                    assert node.depth == 1 + max(cond.depth, b.depth, c.depth)
                    assert graph.make("where", (cond, b, c), {}, f32, shape) is node
                    sigs.append(node.sig)
                assert sigs[0] == sigs[1], (first, second, third, share)


def test_make3_gives_what_the_general_merge_gives(monkeypatch):
    """``graph.make3`` (``where``'s path, its leaves merged without the general merge) gives
    the signature, leaves, depth, scalar marks and kept nodes that ``graph._make_any`` gives,
    for three sources sharing leaves in every order (fresh and read scalars, constants,
    inputs met again or for the first time), below and past ``SHARE_LEAVES``."""
    f32 = np.dtype(np.float32)

    def world():
        tensors = [fj.asarray(np.ones(4, np.float32)) for _ in range(2)]
        x, y = (t._node for t in tensors)
        read = graph.make_scalar(np.float32(1), f32)
        graph.make1("neg", read, f32, ())
        nodes = {"x": x, "y": y, "fresh": graph.make_scalar(np.float32(2), f32), "read": read,
                 "const": fj.zeros(4, np.float32)._node, "exp x": graph.make1("exp", x, f32, (4,)),
                 "x*y": graph.make2("mul", x, y, f32, (4,)),
                 "y*x": graph.make2("mul", y, x, f32, (4,)),
                 "x+read": graph.make2("add", x, read, f32, (4,))}
        return nodes, tensors

    names = ["x", "y", "fresh", "read", "const", "exp x", "x*y", "y*x", "x+read"]

    def outcome(nodes, tensors, node):
        by_id = {id(n): name for name, n in nodes.items()}
        return (node.sig, [by_id[id(leaf)] for leaf in graph.leaves_of(node)], node.depth,
                [(name, n.used, n.copies) for name, n in nodes.items() if n.op == "scalar"],
                [any(k is node for k in t._kept) for t in tensors])

    for share in (graph.SHARE_LEAVES, 3):
        monkeypatch.setattr(graph, "SHARE_LEAVES", share)
        for p in names:
            for q in names:
                for r in names:
                    general, tensors = world()
                    want = graph._make_any("where", (general[p], general[q], general[r]), f32,
                                           (4,), {}, (), None)
                    fast, fast_tensors = world()
                    got = graph.make3("where", fast[p], fast[q], fast[r], f32, (4,))
                    assert outcome(fast, fast_tensors, got) == outcome(general, tensors, want), \
                        (p, q, r, share)
                    assert graph.make("where", (fast[p], fast[q], fast[r]), {}, f32, (4,)) is got
