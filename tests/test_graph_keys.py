"""The plan-cache key comes from signatures given to nodes when they are created.

Soundness matters more than anything here: two graphs with equal keys must lower to the
same Program (or a cached plan would run the wrong kernels), and the key's leaves must
be the Program's inputs in order (or buffers would be bound to the wrong inputs).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import fusejit as fj
from fusejit.ir.graph import build_program, structural_key, topological_order
from fusejit.testing import programs


def _outputs(recipe, seed_shift=0):
    arrays = [a + seed_shift if a.dtype.kind in "iuf" else a for a in recipe.inputs]
    outs = recipe(fj, *[fj.asarray(a) for a in arrays])
    return [t._node for t in outs if isinstance(t, fj.Tensor) and not t.is_realized]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_steps=8, max_outputs=3), programs(max_steps=8, max_outputs=3))
def test_equal_keys_mean_equal_programs_and_leaves_are_the_inputs(r1, r2):
    n1, n2 = _outputs(r1), _outputs(r2)
    assume(n1 and n2)  # (programs whose outputs are all inputs or constants have no graph)
    (k1, leaves1), (k2, _) = structural_key(n1), structural_key(n2)
    order1 = topological_order(n1)
    program1 = build_program(order1, n1)
    # the leaves are exactly the graph's buffers and scalar params (build_program makes the
    # Program's inputs from them, in their order: the plan-cache key's order, which is not the
    # topological walk's in general)
    assert sorted(map(id, leaves1)) == sorted(id(n) for n in order1 if n.op in ("input", "scalar"))
    if k1 == k2:
        assert str(program1) == str(build_program(topological_order(n2), n2))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_steps=8, max_outputs=3), st.integers(1, 3))
def test_same_structure_on_new_data_has_the_same_key(recipe, shift):
    n1, n2 = _outputs(recipe), _outputs(recipe, shift)
    assume(n1)
    assert len(n1) == len(n2)  # the same recipe on other data: the same outputs are graphs
    assert structural_key(n1)[0] == structural_key(n2)[0]


def test_shared_and_distinct_inputs_have_different_keys():
    a = np.ones(4, np.float32)
    x, y = fj.asarray(a), fj.asarray(a)
    same, distinct = x + x, x + y           # one input read twice vs two inputs
    assert structural_key([same._node])[0] != structural_key([distinct._node])[0]
    swapped = (y - x, x - y)                  # leaf order matters
    k1, leaves1 = structural_key([swapped[0]._node])
    k2, leaves2 = structural_key([swapped[1]._node])
    assert k1 == k2 and leaves1 == (y._node, x._node) and leaves2 == (x._node, y._node)
    np.testing.assert_array_equal(fj.realize(*swapped)[0].numpy(), a - a)


def test_named_inputs_are_part_of_the_key():
    a = np.ones(4, np.float32)
    k1 = structural_key([(fj.asarray(a, name="x") * 2)._node])[0]
    k2 = structural_key([(fj.asarray(a, name="y") * 2)._node])[0]
    assert k1 != k2  # the printed program differs, so the plan does too


def _scalar_param(value: float):
    # a scalar leaf held by a tensor, as fj.jit gives a NumPy float argument to the function
    from fusejit.frontend.tensor import Tensor
    from fusejit.ir.graph import make_scalar
    return Tensor(make_scalar(np.float32(value), np.dtype(np.float32)))


def test_a_scalar_param_read_again_is_one_input():
    # exp(s) puts s in a node's leaves; reading s again must find it there, not append it a
    # second time: else `(exp(s) + x) * s` had the key of `(exp(s) + x) * t` and a realize of
    # the latter ran the former's plan, which reads exp's operand at t's position
    x = fj.asarray(np.arange(4, dtype=np.float32))
    (fj.exp(_scalar_param(1)) + x) * _scalar_param(2)  # (memoizes the frontend's fast paths)
    s = _scalar_param(1)
    once = (fj.exp(s) + x) * s
    s, t = _scalar_param(1), _scalar_param(3)
    twice = (fj.exp(s) + x) * t
    k1, leaves1 = structural_key([once._node])
    k2, leaves2 = structural_key([twice._node])
    assert len(leaves1) == 2 and len(leaves2) == 3 and k1 != k2
    base = np.exp(np.float32(1)) + np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(once.numpy(), base * 1, rtol=1e-6)
    np.testing.assert_allclose(twice.numpy(), base * 3, rtol=1e-6)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_steps=8, max_outputs=3), st.lists(st.integers(0, 7), max_size=6))
def test_leaves_never_repeat(recipe, reads):
    # every leaf appears once in a node's leaves, also for scalar params read several times
    outs = _outputs(recipe)
    params = [_scalar_param(i) for i in range(3)]
    nodes = list(outs)
    for i in reads:  # scalar params read (again) by unary and binary ops over the outputs
        p = params[i % 3]
        base = fj.Tensor(nodes[i % len(nodes)]) if nodes else p
        nodes.append((fj.negative(p) + base if i % 2 else base * p)._node)
    for node in nodes:
        leaves = list(structural_key([node])[1])
        assert len({id(n) for n in leaves}) == len(leaves)
        order = topological_order([node])
        assert sorted(map(id, leaves)) == sorted(id(n) for n in order if n.op in ("input", "scalar"))
