"""Split reductions (``kind=split_reduction``): a partials launch and a final launch.

Differential tests on the ``interpret`` backend against NumPy, plus the shape
of the generated source. Regions the fuser splits use the real pipeline;
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


def test_split_is_a_declared_pair_of_launches():
    x = fj.asarray(np.ones(N, np.float32))
    y = fj.sqrt((x * x).sum()) + np.float32(1)
    plan = fj.plan(y)
    assert [launch.stage for launch in plan.kernels] == ["partial", "final"]
    (k,) = plan.program.kernels
    em = emit_kernel(k, None, "cuda")
    names = [launch.fn_name for launch in em.launches]
    assert names == [f"{em.name}_partials", f"{em.name}_final"]
    partials, final = em.launches
    split = choose_split(1, N)  # no split= attribute: the emitter chooses
    assert partials.grid[1] == split and final.grid == (1, 1, 1)
    assert [a[0] for a in partials.args] == ["in", "scratch"]
    assert em.scratch == ((np.dtype(np.float32), split),)
    src = em.source
    body_p = src[src.index(f"def {em.name}_partials"):src.index(f"def {em.name}_final")]
    body_f = src[src.index(f"def {em.name}_final"):]
    assert "mul %in0, %in0" in body_p and "tl.sqrt" not in body_p  # prologue in the partials
    assert "tl.sqrt" in body_f and "tl.load(p_in0" not in body_f   # epilogue in the final
    assert "tl.float64" not in src                                  # float32 partials


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
        assert len(emit_kernel(k, None, "interpret").launches) == 2
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
