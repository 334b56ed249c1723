"""Split reductions (``kind=split_reduction``): one launch, whose last program per row block
combines the partials that every program wrote.

Differential tests on the ``interpret`` backend against NumPy, plus the shape
of the generated source, the launch counts, repeated runs (the same bits) and the
counters (left zero). Regions the fuser splits use the real pipeline;
small and empty ones are marked ``kind=split_reduction`` by hand (a user may
mark any splittable region so) and run through the backend directly.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.codegen.triton_emitter import choose_split  # noqa: E402
from fusejit.testing import assert_matches_numpy  # noqa: E402

from ._canonical import SPLIT  # noqa: E402

N = 1 << 17


@pytest.fixture(autouse=True)
def _interpret(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    with fj.using_backend("interpret"):
        yield


def _outs(fn, arrays):
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    return outs if isinstance(outs, tuple) else (outs,)


def _check(fn, arrays, atol=None):
    """Compare with NumPy; with ``atol``, with NumPy in float64 (rounded to the result dtype).

    NumPy sums a non-contiguous axis (column sums) sequentially in float32, with
    an error (~5e-3 for 65536 rows) far above the split reduction's own (~1e-4).
    """
    with np.errstate(all="ignore"):
        ref = [a.astype(np.float64) if a.dtype == np.float32 else a for a in arrays] \
            if atol else arrays
        expected = fn(np, *ref)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = _outs(fn, arrays)
    fj.realize(*got)
    for g, e in zip(got, expected):
        e = np.asarray(e)
        if atol:
            e = e.astype(g.dtype)
        kw = {"atol": atol} if atol and e.dtype.kind == "f" else {}
        assert_matches_numpy(g.numpy(), e, **kw)


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_split_matches_numpy(name):
    fn, make = SPLIT[name]
    arrays = make(N)
    kinds = [k.kind for k in fj.plan(*_outs(fn, arrays)).program.kernels]
    # var too: its numerator is one m2 reduction (count, mean, m2 partials), one region
    assert "split_reduction" in kinds, kinds
    if name == "var":
        assert kinds == ["split_reduction"], kinds
    # a float32 product rounds n - 1 times in any order (~sqrt(n) * eps = 2e-5 here)
    _check(fn, arrays, atol={"column_sums": 1e-3}.get(name))


def test_split_is_one_launch_whose_last_program_finishes():
    x = fj.asarray(np.ones(N, np.float32))
    y = fj.sqrt((x * x).sum()) + np.float32(1)
    plan = fj.plan(y)
    assert plan.num_launches == 1 and [launch.stage for launch in plan.kernels] == [""]
    (k,) = plan.program.kernels
    em = emit_kernel(k, None, "cuda")
    (launch,) = em.launches
    split = choose_split(1, N)  # no split= attribute: the emitter chooses
    assert launch.fn_name == em.name and launch.grid == (1, split, 1)
    assert [a[0] for a in launch.args] == ["in", "in", "scratch", "counters", "out"]
    assert launch.signature["counters"] == "*i32" and em.counters == 1  # one per row block
    assert em.scratch == ((np.dtype(np.float32), split),)
    src = em.source
    body = src[src.index(f"def {em.name}("):src.index(f"def {em.name}_final")]
    final = src[src.index(f"def {em.name}_final"):]
    assert "mul %in0, %in0" in body and "tl.sqrt" not in body     # prologue in every program
    assert "tl.sqrt" in final and "tl.load(p_in0" not in final      # epilogue after the combine
    assert "tl.float64" not in src                                  # float32 partials
    # every thread's partials are stored, then one acq_rel count per program; the last one
    # reads the partials from L2 (.cg), finishes and zeroes its counter for the next launch
    order = ["tl.store(part_", "tl.debug_barrier()",
             'done = tl.atomic_add(counters + pid, 1, sem="acq_rel")',
             f"if done == {split - 1}:", f"{em.name}_final(pid, ", "tl.store(counters + pid, 0)"]
    at = [body.index(s) for s in order]
    assert at == sorted(at), body
    assert 'cache_modifier=".cg"' in final and "# tiling: split in one launch" in src


def _bn(xp, x):
    """Batch norm's statistics over axis 0, then the normalization."""
    mean, var = x.mean(axis=0), x.var(axis=0)
    return (x - mean) / xp.sqrt(var + np.float32(1e-5))


def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_launch_counts():
    """Split reductions are one launch each: batch norm is 2 kernels (statistics, normalize)."""
    def plan(fn, shape):
        return fj.plan(fn(fj, fj.asarray(np.zeros(shape, np.float32))))
    bn = plan(_bn, (262144, 256))
    assert [k.kind for k in bn.regions] == ["split_reduction", "pointwise"], bn.explain()
    assert bn.num_launches == 2, bn.explain()
    assert "one launch: partials, then the last program" in bn.explain()
    for fn, shape in ((lambda xp, x: x.sum(axis=0), (65536, 1024)),
                      (lambda xp, x: x.sum(), (1 << 26,)),
                      (lambda xp, x: x.std(axis=0), (262144, 256)),
                      (lambda xp, x: xp.log(xp.exp(x).sum(axis=-1)), (4, 1 << 20)),
                      (_softmax, (4, 1 << 19)),  # reduce-then-broadcast: cooperative rows
                      (_softmax, (1024, 1 << 20))):  # (enough rows for one program each)
        p = plan(fn, shape)
        assert p.num_launches == 1, p.explain()
    # 4 rows too wide for a cooperative kernel: split statistics, then the normalize
    # (rules.rule_broadcast_back_fills_gpu; they ran as 4 looped programs)
    p = plan(_softmax, (4, 1 << 20))
    assert [k.kind for k in p.regions] == ["split_reduction", "pointwise"], p.explain()
    assert p.num_launches == 2


def _split_outputs(xp, x):
    """Split regions: over axis 0, a sum and m2 (Chan's combine of count, mean, m2) with a
    sqrt after; over everything, sumexp (max, sum) with a log, and a NaN-propagating max."""
    m = x.max(keepdims=True)
    lse = xp.log(xp.exp(x - m).sum()) + m.reshape(())  # sum(exp(x - max)): one sumexp
    return x.sum(axis=0), x.std(axis=0), lse, x.max() * 2


def test_repeated_runs_are_bit_identical_and_leave_the_counters_zero():
    from fusejit import runtime
    x = np.random.default_rng(3).standard_normal((1 << 17, 16)).astype(np.float32)
    x[5, 3] = np.nan
    regions = fj.plan(*_outs(_split_outputs, [x[:, :15]])).regions
    assert [k.kind for k in regions] == ["split_reduction"] * 2, regions
    assert {"sum", "m2", "sumexp", "max"} <= {i.op for k in regions for i in k.body}
    runs = []
    for _ in range(3):
        got = _outs(_split_outputs, [x[:, :15]])  # a strided view: masked row blocks
        fj.realize(*got)
        runs.append([g.numpy() for g in got])
        backend = runtime._backends["interpret"]
        mine = [backend.counters(emit_kernel(k, None, "interpret")) for k in regions]
        assert [c.size for c in mine] == [1, 1]  # one row block each (15 columns < 64)
        assert all(not c.any() for c in backend._counters.values())  # every kernel's, so far
    for again in runs[1:]:
        for a, b in zip(runs[0], again):
            assert a.tobytes() == b.tobytes()
    with np.errstate(all="ignore"):
        expected = _split_outputs(np, x[:, :15].astype(np.float64))
    for g, e in zip(runs[0], expected):
        assert_matches_numpy(g, np.asarray(e).astype(g.dtype))


def test_a_counter_not_left_zero_would_finish_early():
    """Why the last program zeroes its counter: one that starts at 1 lets the next-to-last
    program finish, before the last chunk's partial is written (a wrong sum)."""
    from fusejit import runtime
    x = np.ones(N, np.float32)
    assert float(fj.asarray(x).sum().numpy()) == N
    (k,) = fj.plan(fj.asarray(x).sum()).regions
    counters = runtime._backends["interpret"].counters(emit_kernel(k, None, "interpret"))
    assert counters.shape == (1,) and not counters.any()
    counters[0] = 1
    assert float(fj.asarray(x + 1).sum().numpy()) != 2 * N
    counters[0] = 0
    assert float(fj.asarray(x + 1).sum().numpy()) == 2 * N


def test_int_sum_partials_exact_in_result_dtype():
    x = fj.asarray(np.ones(N, np.int32))
    (k,) = fj.plan(x.sum()).program.kernels
    em = emit_kernel(k, None, "interpret")
    assert em.scratch[0][0] == np.dtype(np.int64)
    big = np.full(N, 2**30, np.int32)  # the sum overflows int32 but not int64
    _check(lambda xp, a: a.sum(), [big])


def _force_split(fn, arrays, split):
    """Run each region of ``fn`` marked ``kind=split_reduction split=split`` on the backend."""
    from fusejit.ir.graph import structural_key
    from fusejit.runtime.interpret_backend import InterpretBackend
    outs = _outs(fn, arrays)
    program = fj.plan(*outs).program
    backend = InterpretBackend()
    _, leaves = structural_key([o._node for o in outs])  # the inputs: arrays and scalar params
    env = dict(zip([p.name for p in program.inputs], [leaf.buffer for leaf in leaves]))
    for k in program.kernels:
        k = dataclasses.replace(k, attrs={"kind": "split_reduction", "split": split})
        assert len(emit_kernel(k, None, "interpret").launches) == 1
        env.update(zip(k.results, backend.run_kernel(k, [env[a] for a in k.args])))
    return [env[name] for name in program.outputs]


@pytest.mark.parametrize("split", [1, 3, 4, 1000])
@pytest.mark.parametrize("case", ["f32", "nan", "empty", "int8", "bool", "f16", "rows", "f64"])
def test_forced_split_small(case, split):
    rng = np.random.default_rng(7)
    a = {"f32": rng.standard_normal(1000).astype(np.float32),
         "nan": np.array([1.0, np.nan, -3.0] * 50, np.float32),
         "empty": np.zeros(0, np.float32),
         "int8": rng.integers(-100, 100, 999).astype(np.int8),
         "bool": rng.random(77) > 0.5,
         "f16": rng.standard_normal(513).astype(np.float16),
         "rows": rng.standard_normal((301, 5)).astype(np.float32),
         "f64": rng.standard_normal(1001)}[case]

    def fn(xp, x):
        if case == "rows":
            return x.sum(0), x.max(0), x.min(0), (x > 0).any(0), (x > 0).all(0), x.mean(0)
        if case == "bool":
            return x.sum(), x.any(), x.all(), x.max(), x.min()
        return (x.sum(), x.max(), x.min(), (x > 0).any(), (x > 0).all(), x.prod()) \
            if a.size else (x.sum(), x.prod(), (x > 0).any(), (x > 0).all(), x.mean())
    with np.errstate(all="ignore"):
        expected = fn(np, a)
        got = _force_split(fn, [a], split)
    for g, e in zip(got, expected):
        assert_matches_numpy(g, np.asarray(e))


def test_choose_split():
    assert choose_split(1, 1 << 26) == 528
    assert choose_split(1, 1 << 16) == 16
    assert choose_split(1, 100) == 1
    assert choose_split(64, 1 << 20, row_blocks=1) == 256


def test_a_reduction_named_index_keeps_float_partials():
    """A split sum whose IR value is named ``%index`` (its partials' buffer ``part_v_index``):
    its partials are float32, not the int64 of an argmax's index partials, which the
    buffer's name once decided (the sum came back truncated: -22.0 for -22.66)."""
    from fusejit.testing import large_plans
    program = fj.parse("func @main(%x: f32[5000]) -> f32[], i64[] {\n"
                       "  %index = sum %x axes=[0] : f32[]\n"
                       "  %i = argmax %x axes=[0] : i64[]\n"
                       "  return %index, %i\n"
                       "}\n")
    x = np.random.default_rng(0).standard_normal(5000).astype(np.float32)
    with large_plans(), fj.using_backend("interpret"):
        (kernel,) = fj.fuse.plan_for(program).program.kernels
        assert kernel.kind == "split_reduction"
        total, at = program.run(x=x)
    np.testing.assert_allclose(total, x.astype(np.float64).sum(), rtol=1e-5)
    assert int(at) == int(x.argmax())
