"""Deep programs: long chains record, print, parse, fuse, emit and run without recursion.

Every pass walks the program iteratively (graph building and lowering, the printer,
Lark's LALR parser with its builder, the verifier, the fusion pass, the numpy
backend, the emitter's evaluation of values and its 2-D tile probe), and a long
chain is split into kernels of at most ``cost.MAX_REGION_INSTRS`` instructions by
the ``region_size`` rule. The CI test runs a 20,000-step chain (about 30,000
instructions) through every stage on the numpy backend; ``bench/bench_deep.py``
runs 10,000 and 100,000 steps on both backends and checks that time grows linearly
(the 100,000-step chain takes longer than CI should spend: see the benchmark).
"""

from __future__ import annotations

import gc
import math
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.fuse import cost
from fusejit.ir.graph import structural_key, topological_order
from fusejit.testing import assert_matches_numpy, programs, recorded_inputs

pytestmark = pytest.mark.usefixtures("numpy_backend")


def pointwise_chain(xp, x, steps: int):
    """``steps`` steps of ``y * 1.0001 + 0.5``, ``sin`` and ``abs`` in turn (1.5 ops a step)."""
    y = x
    for i in range(steps):
        y = y * 1.0001 + 0.5 if i % 2 == 0 else xp.sin(y) if i % 4 == 1 else xp.abs(y)
    return y


def mixed_chain(xp, x, steps: int):
    """Reductions broadcast back, transposes, flips and reshapes in turn, on a square matrix."""
    y = x
    n = x.shape[0]
    for i in range(steps):
        r = i % 6
        if r == 0:
            y = y - y.max(axis=1, keepdims=True)
        elif r == 1:
            y = y.T
        elif r == 2:
            y = y * 0.5 + y.sum(axis=0, keepdims=True) * 1e-3
        elif r == 3:
            y = xp.tanh(y)
        elif r == 4:
            y = y[:, ::-1]
        else:
            y = y.reshape(n // 2, n * 2).reshape(n, n)
    return y


def test_pointwise_chain_of_20000_steps() -> None:
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    steps = 20_000
    y = pointwise_chain(fj, fj.asarray(x, name="x"), steps)
    inputs = recorded_inputs(y)
    text = fj.dump(y)
    program = fj.parse(text)
    assert str(program) == text  # the round trip holds at any length
    n_instrs = len(program.body)
    assert n_instrs >= 30_000
    plan = fj.plan(y)
    # each kernel holds its copy of the two constants and MAX_REGION_INSTRS - 2 operations (the
    # first 63 Python scalars are scalar params instead: a kernel there may hold two more)
    ops = n_instrs - 2
    assert abs(plan.num_launches - math.ceil(ops / (cost.MAX_REGION_INSTRS - 2))) <= 1, \
        plan.num_launches
    assert all(len(k.body) <= cost.MAX_REGION_INSTRS for k in plan.regions)
    explained = plan.explain()
    assert f"(region_size): the kernel would hold {cost.MAX_REGION_INSTRS + 1} instructions" \
        in explained
    want = pointwise_chain(np, x, steps)
    assert_matches_numpy(y.realize(), want)
    # the parsed program takes the scalar params' values as inputs, in the leaves' order
    (again,) = program.run(*inputs)
    np.testing.assert_array_equal(again, y.numpy())
    del y, program, plan  # freeing a 30,000-node chain at once must not overflow the C stack
    gc.collect()


def test_mixed_chain_of_reductions_and_views() -> None:
    x = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    steps = 2_000
    y = mixed_chain(fj, fj.asarray(x, name="x"), steps)
    inputs = recorded_inputs(y)
    program = fj.parse(fj.dump(y))
    plan = fj.plan(y)
    names = [k.name for k in plan.regions]
    assert len(names) == len(set(names)) and len(names) > 500
    want = mixed_chain(np, x, steps)
    assert_matches_numpy(y.realize(), want)
    # the parsed program takes the scalar params' values as inputs, in the leaves' order
    (again,) = program.run(*inputs)
    assert_matches_numpy(again, want)


def test_long_chains_on_interpret(interpret_backend: str) -> None:
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    y = pointwise_chain(fj, fj.asarray(x), 700)  # about 1,050 instructions: 5 kernels
    assert fj.plan(y).num_launches == 5
    assert_matches_numpy(y.realize(), pointwise_chain(np, x, 700))
    m = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    z = mixed_chain(fj, fj.asarray(m), 60)
    assert_matches_numpy(z.realize(), mixed_chain(np, m, 60))


def _kernel_block(n: int) -> str:
    """A program whose one kernel block (written as text) holds ``n`` chained instructions."""
    lines = ["# fusejit ir v1", "func @main(%x: f32[16,16]) -> f32[16,16] {",
             "  %y = kernel @long(%x) kind=pointwise -> f32[16,16] {", "  ^(%x: f32[16,16]):",
             "    %c = const 0x1.0p-1 : f32[16,16]"]
    prev = "x"
    for i in range(n):
        op = ("mul %{p}, %c" if i % 3 == 0 else "permute %{p} perm=[1,0]" if i % 3 == 1
              else "abs %{p}").format(p=prev)
        lines.append(f"    %v{i} = {op} : f32[16,16]")
        prev = f"v{i}"
    lines += [f"    yield %{prev}", "  }", "  return %y", "}", ""]
    return "\n".join(lines)


def test_user_kernel_block_of_3000_instructions(backend: str) -> None:
    # a kernel block written in the text is used as written, whatever its length: the
    # emitter evaluates 3,000 nested values (views included) without recursion
    x = np.random.default_rng(2).standard_normal((16, 16)).astype(np.float32)
    program = fj.parse(_kernel_block(3000))
    (got,) = program.run(x)
    want = x
    for i in range(3000):
        want = want * np.float32(0.5) if i % 3 == 0 else want.T if i % 3 == 1 else np.abs(want)
    np.testing.assert_array_equal(got, want)


def test_repeated_squaring_emits_in_linear_time() -> None:
    # y * y reads y twice: the 2-D tile probe once listed every load per read, 2**depth of them
    x = fj.asarray(np.full((64, 64), 1.0, np.float32))
    y = x
    for _ in range(64):
        y = y * y
    (kernel,) = fj.plan(y).regions
    for target in ("cuda", "interpret"):
        source = emit_kernel(kernel, None, target).source
        assert len(re.findall(r"tl\.load\(", source)) == 1


def test_printing_a_deeply_nested_attribute() -> None:
    # a Program built in code may hold any attribute value: the printer walks nested lists
    # with a stack, and the text it writes is refused by the verifier, not by a crash
    from fusejit.ir.printer import print_program
    from fusejit.ir.program import Instr, Param, Program, TensorType
    nested: object = 0
    for _ in range(20_000):
        nested = (nested,)
    t = TensorType(np.dtype(np.float32), (4,))
    program = Program("main", (Param("x", t),),
                      [Instr("y", "abs", ("x",), {"deep": nested}, t)], ("y",))
    text = print_program(program)
    assert "deep=" + "[" * 20_000 + "0" + "]" * 20_000 in text
    with pytest.raises(fj.FusejitError, match="unknown attribute 'deep'"):
        fj.parse(text)


def test_chain_over_10000_distinct_inputs() -> None:
    # y = y + x_i meets a new input at every step: the nodes share one list of leaves
    # (copying a tuple of all earlier leaves per node took 11 s for 8,000 inputs)
    arrays = [np.full(3, i % 7, np.float32) for i in range(10_000)]
    xs = [fj.asarray(a) for a in arrays]
    y = xs[0]
    for x in xs[1:]:
        y = y + x
    key, leaves = structural_key([y._node])
    assert leaves == tuple(x._node for x in xs)
    want = arrays[0]
    for a in arrays[1:]:
        want = want + a
    assert_matches_numpy(y.realize(), want)


def test_branches_of_a_long_chain_keep_their_own_leaves() -> None:
    xs = [fj.asarray(np.full(2, i, np.float32)) for i in range(60)]
    trunk = xs[0]
    for x in xs[1:40]:
        trunk = trunk + x
    left = trunk * xs[40] + xs[41]            # extends the shared list in place
    right = trunk - xs[50] - xs[41]           # an earlier prefix: copied, then extended
    both = left + right + trunk               # leaves already present: nothing appended
    for t in (trunk, left, right, both):
        _, leaves = structural_key([t._node])
        assert list(leaves) == [n for n in topological_order([t._node]) if n.op == "input"]
    total = sum(range(40))
    got = fj.realize(left, right, both)
    np.testing.assert_array_equal(got[0].numpy(), np.full(2, total * 40 + 41, np.float32))
    np.testing.assert_array_equal(got[1].numpy(), np.full(2, total - 50 - 41, np.float32))
    both_want = (total * 40 + 41) + (total - 50 - 41) + total
    np.testing.assert_array_equal(got[2].numpy(), np.full(2, both_want, np.float32))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(max_steps=8, max_outputs=3))
def test_shared_leaves_keep_plan_keys_sound(recipe) -> None:
    # test_graph_keys' properties with every merge of leaves going through a shared list
    from fusejit.ir import graph
    previous, graph.SHARE_LEAVES = graph.SHARE_LEAVES, 1
    try:
        outs = [t._node for t in recipe(fj, *[fj.asarray(a) for a in recipe.inputs])
                if isinstance(t, fj.Tensor) and not t.is_realized]
        again = [t._node for t in recipe(fj, *[fj.asarray(a) for a in recipe.inputs])
                 if isinstance(t, fj.Tensor) and not t.is_realized]
    finally:
        graph.SHARE_LEAVES = previous
    assume(outs)  # (programs whose outputs are all inputs or constants have no graph)
    key, leaves = structural_key(outs)
    order = topological_order(outs)
    assert list(leaves) == [n for n in order if n.op in ("input", "scalar")]
    assert structural_key(again)[0] == key  # same structure over new leaves: same key
