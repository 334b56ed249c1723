"""A full-precision float32 product of a K-major B (``a @ bt.T``) gets B written row-major by a
pass of its own when that pays (``fuse/rules.py``, ``rule_fma_n_major_b``; the rewrite:
``fuse/layout.py``, ``transpose_operand`` with ``k_major=False``).

Plans are checked on the text IR (shapes alone) at the sizes the rule decides on; values on
the interpreter and the ``numpy`` backend at small shapes with the rule forced, against
NumPy's float32 product at float32's tolerance for a K-term sum (the pass moves elements, it
does not change them, and the GEMM sums the same products in the same order as without it).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.fuse import cost, plan_for
from fusejit.testing import recorded_inputs

rng = np.random.default_rng(151)
F32, F64 = np.float32, np.float64
#: the interpreter tests' tiles (as ``test_matmul.TILES``)
TILES = {"block_m": 16, "block_n": 32, "block_k": 16}


def _plan(m, n, k, b_expr="%bt_t", extra="", precision="ieee", b_shape=None):
    """The plan of ``matmul(a, bt^T)`` from IR text, ``bt`` a row-major [N, K] array."""
    attr = f" precision={precision}" if precision != "ieee" else ""
    b_shape = b_shape or (n, k)
    text = (f"func @main(%a: f32[{m},{k}], %bt: f32[{b_shape[0]},{b_shape[1]}]) -> f32[{m},{n}] {{\n"
            f"  %bt_t = permute %bt perm=[1,0] : f32[{k},{n}]\n"
            f"{extra}  %y = matmul %a, {b_expr}{attr} : f32[{m},{n}]\n"
            f"  return %y\n}}\n")
    return plan_for(fj.parse(text))


def _kinds(plan):
    return [k.kind for k in plan.program.kernels]


def test_a_large_k_major_b_is_written_row_major_first():
    """4096^3: the pass (~41 us) saves ~3.56 ms of the ~7.08 ms K-major product (by 19.4 and
    39 TFLOP/s): two kernels, the GEMM reading the pass's [K, N] buffer directly."""
    plan = _plan(4096, 4096, 4096)
    assert _kinds(plan) == ["pointwise", "gemm"], plan.explain()
    copy, gemm = plan.program.kernels
    assert copy.name == "transpose_f32_4096x4096" and copy.args == ("bt",)
    assert copy.results == ("bt_t_nmajor",) and copy.result_types[0].shape == (4096, 4096)
    assert [i.op for i in copy.body] == ["permute", "permute"]
    assert gemm.args == ("a", "bt_t_nmajor")
    assert [(i.op, i.args) for i in gemm.body] == [("matmul", ("a", "bt_t_nmajor"))]
    text = plan.explain()
    assert ("@matmul_f32_4096x4096 (fma_n_major_b): B (%bt_t) written row-major (N "
            "contiguous) before the full-precision GEMM, whose FMA tiles read B along N: saves "
            "~3.56e+03 us of ~7.08e+03 us, the pass costs ~41 us (the pass: "
            "@transpose_f32_4096x4096)") in text
    assert "%bt_t_nmajor from @transpose_f32_4096x4096 read by %y: not fused (fma_n_major_b)" \
        in text
    # the pass's kernel reads B along K and writes it along N: a tiled transpose on cuda
    assert "row_pitch" not in copy.attrs


@pytest.mark.parametrize("m", [16, 40, 47, 48, 4096])
def test_the_pass_pays_from_m_of_48_at_n_k_4096(m):
    """Saved ``2 M N K (1/19.4e12 - 1/39e12)`` (0.87 us a row) against 2 N K 4 bytes at
    3.74e12 B/s plus a launch (41 us): M >= 48 at N = K = 4096."""
    plan = _plan(m, 4096, 4096)
    passes = [k for k in plan.program.kernels if k.name.startswith("transpose_")]
    assert bool(passes) == (m >= 48), plan.explain()
    if not passes:
        assert re.search(r"B \(%bt_t\) read K-major by the full-precision GEMM: a pass writing "
                         r"it row-major would cost ~41 us and save ~[\d.]+ us of ~[\d.]+ us; "
                         r"not worth it", plan.explain())


@pytest.mark.parametrize("case", ["row_major", "tf32", "float64"])
def test_one_kernel_where_the_rule_does_not_apply(case):
    """B already row-major, TF32 (which wants the opposite: ``rule_tf32_k_major_b``) and
    float64 (unmeasured) keep the one GEMM kernel and no full-precision sentence."""
    if case == "row_major":
        text = ("func @main(%a: f32[4096,4096], %b: f32[4096,4096]) -> f32[4096,4096] {\n"
                "  %y = matmul %a, %b : f32[4096,4096]\n  return %y\n}\n")
        plan = plan_for(fj.parse(text))
    elif case == "tf32":
        plan = _plan(4096, 4096, 4096, precision="tf32")
    else:
        text = ("func @main(%a: f64[4096,4096], %bt: f64[4096,4096]) -> f64[4096,4096] {\n"
                "  %bt_t = permute %bt perm=[1,0] : f64[4096,4096]\n"
                "  %y = matmul %a, %bt_t : f64[4096,4096]\n  return %y\n}\n")
        plan = plan_for(fj.parse(text))
    assert _kinds(plan) == ["gemm"], plan.explain()
    assert "fma_n_major_b" not in plan.explain()


def test_a_weight_broadcast_over_a_batch_is_written_once():
    """``x @ w.T`` with x [8, 512, 4096]: the weight's transpose is written once, its batch
    views stay in the GEMM."""
    a = fj.asarray(np.zeros((8, 512, 4096), F32), name="a")
    w = fj.asarray(np.zeros((4096, 4096), F32), name="w")
    plan = fj.plan(a @ w.T)
    assert _kinds(plan) == ["pointwise", "gemm"], plan.explain()
    copy, gemm = plan.program.kernels
    assert copy.result_types[0].shape == (4096, 4096)
    assert [i.op for i in gemm.body][-1] == "matmul"
    assert {"reshape", "expand"} <= {i.op for i in gemm.body}


def test_user_kernel_blocks_are_used_as_written():
    """The fused text parses back to the same two kernels; a GEMM block written by the user
    reading B K-major is not split."""
    plan = _plan(4096, 4096, 4096)
    text = str(plan.program)
    again = plan_for(fj.parse(text))
    assert again.source == "user" and str(again.program) == text
    one = _plan(32, 4096, 4096)
    edited = str(one.program).replace("f32[32,", "f32[4096,").replace("_32x", "_4096x")
    assert _kinds(plan_for(fj.parse(edited))) == ["gemm"]


# -- values (the pass forced) ------------------------------------------------------------------

@pytest.fixture
def forced(monkeypatch, fresh_plans):
    """The pass costs nothing: every full-precision product of a K-major B gets one."""
    monkeypatch.setattr(cost, "TRANSPOSE_BYTES_PER_S", 1e30)
    monkeypatch.setattr(cost, "EXTRA_LAUNCH_S", 0.0)


CASES = {
    # name: (function of (xp, *arrays), shapes)
    "plain": (lambda xp, a, bt: a @ bt.T, [(64, 40), (48, 40)]),
    "linear": (lambda xp, x, w, c: xp.maximum(x @ w.T + c, 0), [(50, 40), (48, 40), (48,)]),
    "batch_broadcast": (lambda xp, a, w: a @ w.T, [(3, 33, 40), (48, 40)]),
    "batched_b": (lambda xp, a, bt: a @ xp.swapaxes(bt, -1, -2), [(2, 33, 40), (2, 48, 40)]),
    "b_prologue": (lambda xp, a, bt, s: a @ (bt * s).T, [(64, 40), (48, 40), (40,)]),
    "split_k": (lambda xp, a, bt: (a @ bt.T) * 2, [(20, 200), (32, 200)]),
    "gram": (lambda xp, x: x @ x.T, [(48, 40)]),
}


def _tolerance(k: int) -> float:
    """float32's tolerance for sums of K unit-size products: sqrt(K) unit roundoffs of the
    sum's size, times 4 (summation orders differ between NumPy and the tiles)."""
    return 4 * np.sqrt(k) * np.finfo(F32).eps


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_with_b_written_row_major_first(interpret_backend, forced, name):
    fn, shapes = CASES[name]
    arrays = [rng.standard_normal(s).astype(F32) for s in shapes]
    out = fn(fj, *[fj.asarray(x, name=f"in{i}") for i, x in enumerate(arrays)])
    plan = fj.plan(out)
    copies = [k for k in plan.program.kernels if k.name.startswith("transpose_")]
    assert len(copies) == 1 and copies[0].kind == "pointwise", plan.explain()
    assert "written row-major (N contiguous) before the full-precision GEMM" in plan.explain()
    gemm = next(k for k in plan.program.kernels if k.kind == "gemm")
    assert "input_precision=\"ieee\"" in emit_kernel(gemm, None, "cuda").source
    text = fj.dump(out, fused=True)
    for key, value in {**TILES, **({"split_k": 2} if name == "split_k" else {})}.items():
        text = re.sub(rf"\b{key}=\d+", f"{key}={value}", text)
    (got,) = fj.parse(text).run(*recorded_inputs(out))
    exact = fn(np, *[x.astype(F64) for x in arrays])
    k = shapes[0][-1]
    scale = float(np.abs(exact).max())
    np.testing.assert_allclose(np.asarray(got, F64), exact, rtol=0,
                               atol=_tolerance(k) * scale)


def test_numpy_backend_runs_the_same_plan(numpy_backend, forced):
    a, bt = rng.standard_normal((64, 40)).astype(F32), rng.standard_normal((48, 40)).astype(F32)
    y = fj.asarray(a) @ fj.asarray(bt).T
    assert len(fj.plan(y).kernels) == 2
    np.testing.assert_allclose(np.asarray(y), a @ bt.T, rtol=1e-5, atol=1e-5)
