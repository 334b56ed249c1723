"""A TF32 product of a row-major B gets B transposed to K-major by a pass of its own when
that pays (``fuse/rules.py``, ``rule_tf32_k_major_b``; the rewrite: ``fuse/layout.py``).

Plans are checked on the text IR (shapes alone, no data) at the sizes the rule decides on;
values are checked on the interpreter at small shapes with the rule forced (the pass's cost
set to nothing), against the exact product within TF32's documented error bound
(``fusejit.testing.matmul_error_bound``: ``K * 2**-10 * (|a| @ |b|)`` plus the result's
rounding, as the other TF32 tests of ``test_matmul.py``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import fusejit as fj
import fusejit.fuse as fuse
from fusejit.codegen import emit_kernel
from fusejit.fuse import cost, plan_for
from fusejit.testing import matmul_error_bound, recorded_inputs

rng = np.random.default_rng(97)
F32, F64 = np.float32, np.float64
#: the interpreter tests' tiles (as ``test_matmul.TILES``)
TILES = {"block_m": 16, "block_n": 32, "block_k": 16}


def _plan(a_shape, b_shape, precision="tf32", b_expr="%b", extra=""):
    """The plan of ``matmul(a, <b_expr>)`` from IR text (only shapes: no arrays are made)."""
    out = (*a_shape[:-1], b_shape[-1])
    fmt = lambda s: ",".join(map(str, s))  # noqa: E731
    attr = f" precision={precision}" if precision != "ieee" else ""
    text = (f"func @main(%a: f32[{fmt(a_shape)}], %b: f32[{fmt(b_shape)}]) -> f32[{fmt(out)}] {{\n"
            f"{extra}  %y = matmul %a, {b_expr}{attr} : f32[{fmt(out)}]\n"
            f"  return %y\n}}\n")
    return plan_for(fj.parse(text))


def _kinds(plan):
    return [k.kind for k in plan.kernels]


# -- when the rule applies ---------------------------------------------------------------------

def test_large_row_major_b_is_transposed_first():
    """4096^3: the pass (~41 us) saves ~102 us of the ~519 us swapped product: two kernels, the
    GEMM reading the pass's [N, K] buffer through a transpose (K-major)."""
    plan = _plan((4096, 4096), (4096, 4096))
    assert _kinds(plan) == ["pointwise", "gemm"], plan.explain()
    copy, gemm = plan.program.kernels
    assert copy.name == "transpose_f32_4096x4096"
    assert [i.op for i in copy.body] == ["permute"] and copy.args == ("b",)
    assert copy.results == ("b_t",) and copy.result_types[0].shape == (4096, 4096)
    assert gemm.args == ("a", "b_t")
    assert [(i.op, i.args) for i in gemm.body] == [("permute", ("b_t",)),
                                                   ("matmul", ("a", "b_kmajor"))]
    text = plan.explain()
    assert ("@matmul_f32_4096x4096 (tf32_k_major_b): B (%b) transposed to K-major before the "
            "TF32 GEMM: saves ~102 us of ~519 us, the pass costs ~41 us (the pass: "
            "@transpose_f32_4096x4096)") in text
    assert ("%b_t from @transpose_f32_4096x4096 read by %b_kmajor: not fused (tf32_k_major_b)"
            in text)


@pytest.mark.parametrize("m, kernels", [(1024, 1), (1600, 1), (1700, 2), (2048, 2), (8192, 2)])
def test_the_pass_pays_from_m_of_about_1650_at_n_k_4096(m, kernels):
    """Saved ``2 M N K (1/265e12 - 1/330e12)`` against 2 N K 4 bytes at 3.74e12 B/s plus a
    launch (5.14 us): M >= 1646 at N = K = 4096."""
    plan = _plan((m, 4096), (4096, 4096))
    assert len(plan.kernels) == kernels, plan.explain()
    if kernels == 1:
        assert re.search(r"B \(%b\) read N-major, multiplied as \(B\^T A\^T\)\^T: a transposing "
                         r"pass would cost ~41 us and save ~[\d.]+ us of ~[\d.]+ us; not worth it",
                         plan.explain())


def test_batches_multiply_the_gain_and_the_pass():
    """A [K, N] weight broadcast over 8 batches of 512 rows is one 4096-row product for the
    gain and is transposed once (its batch views stay in the GEMM); 8 weights of their own
    cost 8 passes for the same gain: not transposed."""
    plan = _plan((8, 512, 4096), (4096, 4096), b_expr="%be", extra=(
        "  %b1 = reshape %b shape=[1,4096,4096] : f32[1,4096,4096]\n"
        "  %be = expand %b1 shape=[8,4096,4096] : f32[8,4096,4096]\n"))
    assert _kinds(plan) == ["pointwise", "gemm"], plan.explain()
    copy, gemm = plan.program.kernels
    assert copy.result_types[0].shape == (4096, 4096)
    assert [i.op for i in gemm.body] == ["permute", "reshape", "expand", "matmul"]
    assert "saves ~102 us of ~519 us, the pass costs ~41 us" in plan.explain()
    plan = _plan((8, 512, 4096), (8, 4096, 4096))
    assert len(plan.kernels) == 1
    assert "a transposing pass would cost ~292 us and save ~102 us" in plan.explain()


def test_a_k_not_multiple_of_4_is_transposed_to_padded_rows(monkeypatch, fresh_plans):
    """A K whose [N, K] rows would not be 16-byte aligned: the pass writes them ``ceil(K/4)*4``
    elements apart (a ``row_pitch`` kernel), so the GEMM's K-major tiles of B load 16 bytes at
    a time; the alignment rule does not copy that buffer again, and copies A's rows (8 bytes
    aligned) as before. ``FUSEJIT_GEMM_ALIGN=0`` (no padded rows anywhere): no pass."""
    plan = _plan((4096, 4094), (4094, 4096))
    names = [k.name.split("_")[0] for k in plan.program.kernels]
    assert names == ["transpose", "align", "matmul"], plan.explain()
    transpose, align, gemm = plan.program.kernels
    assert transpose.attrs["row_pitch"] == 4096 and transpose.args == ("b",)
    assert transpose.result_types[0].shape == (4096, 4094)
    assert align.args == ("a",) and align.attrs["row_pitch"] == 4096
    assert set(gemm.args) == {"a_aligned", "b_t"}
    text = plan.explain()
    assert ("B (%b) transposed to K-major, its rows 4096 elements apart (K=4094 padded to 16 "
            "bytes) before the TF32 GEMM") in text
    assert "%b_t's rows" not in text
    # the fused text round-trips with the pitch, and runs as written
    again = plan_for(fj.parse(str(plan.program)))
    assert again.program.kernels[0].attrs["row_pitch"] == 4096
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "0")
    fuse.clear_cache()
    plan = _plan((4096, 4094), (4094, 4096))
    assert _kinds(plan) == ["gemm"], plan.explain()
    assert "K=4094 is not a multiple of 4 and FUSEJIT_GEMM_ALIGN=0" in plan.explain()


def test_padded_k_major_b_values(interpret_backend, forced):
    """Odd K (2, 3, 5, 37, 41: rows of 8-164 bytes) and a batched B: the pass's padded rows
    hold B^T, the GEMM reads them K-major; within TF32's bound of the exact product, and the
    pad elements (never written) do not reach the result."""
    for batch, m, k, n in [((), 33, 37, 48), ((), 5, 2, 7), ((2,), 17, 41, 20),
                           ((), 40, 3, 40), ((3,), 9, 5, 33)]:
        a = rng.standard_normal((*batch, m, k)).astype(F32)
        b = rng.standard_normal((*batch, k, n)).astype(F32)
        y = _tf32(fj, fj.asarray(a), fj.asarray(b))
        plan = fj.plan(y)
        transposes = [kk for kk in plan.program.kernels if kk.name.startswith("transpose_")]
        assert len(transposes) == 1, plan.explain()
        (transpose,) = transposes
        assert transpose.attrs.get("row_pitch") == -(-k // 4) * 4, plan.explain()
        exact = np.asarray(a, F64) @ np.asarray(b, F64)
        bound = matmul_error_bound(a, b, F32, "tf32")
        got = np.asarray(y, F64)
        assert np.all(np.abs(got - exact) <= bound + 1e-6), (batch, m, k, n)


@pytest.mark.parametrize("case", ["k_major", "tf32x3", "ieee"])
def test_one_kernel_where_the_rule_does_not_apply(case):
    """B already K-major (``bt.T``), ``tf32x3`` (unmeasured, ~70 TFLOP/s) and ``ieee`` (no
    tensor cores) keep one GEMM kernel."""
    if case == "k_major":
        plan = _plan((4096, 4096), (4096, 4096), b_expr="%bt",
                     extra="  %bt = permute %b perm=[1,0] : f32[4096,4096]\n")
    else:
        plan = _plan((4096, 4096), (4096, 4096), precision=case)
    assert _kinds(plan) == ["gemm"], plan.explain()
    text = plan.explain()
    if case in ("k_major", "ieee"):
        assert "operand layouts" not in text
    else:
        assert "precision=tf32x3 runs at about 70 TFLOP/s" in text


def test_user_kernel_blocks_are_used_as_written():
    """The fused text shows the pass as a kernel block; parsed back it runs as written (the
    pass is not fused back into the GEMM's prologue), and a GEMM block the user wrote reading
    a row-major B is not split."""
    plan = _plan((4096, 4096), (4096, 4096))
    text = str(plan.program)
    again = plan_for(fj.parse(text))
    assert again.source == "user" and str(again.program) == text
    assert _kinds(again) == ["pointwise", "gemm"]
    one = _plan((1024, 4096), (4096, 4096))
    edited = str(one.program).replace("1024", "4096")
    assert _kinds(plan_for(fj.parse(edited))) == ["gemm"]


# -- values (interpret, the rule forced) -------------------------------------------------------

@pytest.fixture
def forced(monkeypatch, fresh_plans):
    """The transposing pass costs nothing: every TF32 product of an N-major B gets one."""
    monkeypatch.setattr(cost, "TRANSPOSE_BYTES_PER_S", 1e30)
    monkeypatch.setattr(cost, "EXTRA_LAUNCH_S", 0.0)


def _tf32(xp, a, b):
    return xp.matmul(a, b, precision="tf32") if xp is fj else a @ b


CASES = {
    # name: (function of (xp, *arrays), shapes, the product's operands from the arrays)
    "plain": (lambda xp, a, b: _tf32(xp, a, b), [(64, 40), (40, 48)], lambda a, b: (a, b)),
    "epilogue": (lambda xp, a, b, c: xp.maximum(_tf32(xp, a, b) + c, 0),
                 [(50, 40), (40, 48), (48,)], lambda a, b, c: (a, b)),
    "batch_broadcast": (lambda xp, a, b: _tf32(xp, a, b), [(3, 33, 40), (40, 48)],
                        lambda a, b: (a, b)),
    "batched_b": (lambda xp, a, b: _tf32(xp, a, b), [(2, 33, 40), (2, 40, 48)],
                  lambda a, b: (a, b)),
    "b_prologue": (lambda xp, a, b, s: _tf32(xp, a, b * s), [(64, 40), (40, 48), (48,)],
                   lambda a, b, s: (a, b * s)),
    "b_scalar_prologue": (lambda xp, a, b: _tf32(xp, a, b * 0.5), [(64, 40), (40, 48)],
                          lambda a, b: (a, b * np.float32(0.5))),
    "b_also_returned": (lambda xp, a, b: (_tf32(xp, a, b * 2), b * 2), [(48, 48), (48, 48)],
                        lambda a, b: (a, b * 2)),
    "square_of_itself": (lambda xp, x: _tf32(xp, x, x), [(48, 48)], lambda x: (x, x)),
    "b_from_a_reduction": (lambda xp, a, x: _tf32(xp, a, xp.softmax(x, -1) if xp is fj else
                                                  np.exp(x) / np.exp(x).sum(-1, keepdims=True)),
                           [(64, 40), (40, 48)],
                           lambda a, x: (a, np.exp(x) / np.exp(x).sum(-1, keepdims=True))),
    "split_k": (lambda xp, a, b: _tf32(xp, a, b) * 2, [(20, 200), (200, 32)],
                lambda a, b: (a, b)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_with_b_transposed_first(interpret_backend, forced, name):
    fn, shapes, operands = CASES[name]
    arrays = [rng.standard_normal(s).astype(F32) for s in shapes]
    out = fn(fj, *[fj.asarray(x, name=f"in{i}") for i, x in enumerate(arrays)])
    outs = out if isinstance(out, tuple) else (out,)
    plan = fj.plan(*outs)
    copies = [k for k in plan.program.kernels if k.name.startswith("transpose_")]
    gemm = next(k for k in plan.program.kernels if k.kind == "gemm")
    assert len(copies) == 1 and copies[0].kind == "pointwise", plan.explain()
    assert "transposed to K-major before the TF32 GEMM" in plan.explain()
    for target in ("interpret", "cuda"):  # B read K-major: no (B^T A^T)^T
        assert "B^T A^T" not in emit_kernel(gemm, None, target).source
    # the fused text parses and runs as written, at small tiles (and two K chunks for split_k)
    text = fj.dump(*outs, fused=True)
    assert "kind=pointwise" in text and "permute" in text
    for key, value in {**TILES, **({"split_k": 2} if name == "split_k" else {})}.items():
        text = re.sub(rf"\b{key}=\d+", f"{key}={value}", text)
    got = fj.parse(text).run(*recorded_inputs(*outs))
    expected = fn(np, *arrays)
    expected = expected if isinstance(expected, tuple) else (expected,)
    a, b = operands(*arrays)
    scale = 2.0 if name == "split_k" else 1.0  # (a @ b) * 2: the product's bound, doubled
    bound = scale * matmul_error_bound(a.astype(F32), b.astype(F32), F32, "tf32")
    first = np.asarray(got[0], F64)
    exact = np.asarray(expected[0], F64)
    if name == "epilogue":
        exact = np.maximum(arrays[0].astype(F64) @ arrays[1].astype(F64) + arrays[2], 0)
    else:
        exact = scale * (np.asarray(a, F64) @ np.asarray(b, F64))
    assert np.all(np.abs(first - exact) <= bound + 1e-6), np.abs(first - exact).max()
    for g, e in zip(got[1:], expected[1:]):  # other outputs: exact float32 arithmetic
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-6)


def test_numpy_backend_runs_the_same_plan(numpy_backend, forced):
    """The reference backend evaluates the pass's kernel block (a transpose) and the GEMM's
    (its transpose back): the full-precision product NumPy gives for the unsplit plan."""
    a, b = rng.standard_normal((64, 40)).astype(F32), rng.standard_normal((40, 48)).astype(F32)
    y = _tf32(fj, fj.asarray(a), fj.asarray(b))
    assert len(fj.plan(y).kernels) == 2
    np.testing.assert_allclose(np.asarray(y), a @ b, rtol=1e-5, atol=1e-5)


def test_recorded_products_are_planned_alike():
    """``fj.plan`` of recorded tensors: a 2048-row product of a row-major B is two kernels, of
    a K-major one (``bt.T``) one."""
    a = fj.asarray(np.zeros((2048, 4096), F32), name="a")
    b = fj.asarray(np.zeros((4096, 4096), F32), name="b")
    assert len(fj.plan(fj.matmul(a, b, precision="tf32")).kernels) == 2
    assert len(fj.plan(fj.matmul(a, b.T, precision="tf32")).kernels) == 1
    assert len(fj.plan(fj.matmul(a[:1024], b, precision="tf32")).kernels) == 1


# -- the GEMM that reads both operands K-major -------------------------------------------------

def test_tf32_gemms_of_k_major_operands_load_through_tma_on_cuda(monkeypatch, fresh_plans):
    """On ``cuda`` a TF32 GEMM whose operands both load K-major (A row-major, B the transpose
    of a contiguous [N, K] buffer: what the pass writes) and that has a wave of tiles or more
    (``GEMM_TF32_TMA_MIN_TILES``) loads them through TMA, persistent with one program per SM
    (328 TFLOP/s at 4096^3 on the H200, against 275-297 with pointer loads); not an N-major B
    (its (B^T A^T)^T form goes through registers), an M-major A, fewer tiles, tf32x3, ieee or
    the interpreter."""
    from fusejit.codegen import heuristics
    monkeypatch.setattr(heuristics, "SMS", 5)
    monkeypatch.setattr(heuristics, "GEMM_TF32_TMA_MIN_TILES", 5)

    def emitted(text, target="cuda"):
        (kernel,) = [k for k in fj.parse(text).kernels if k.kind == "gemm"]
        return emit_kernel(kernel, None, target)

    def gemm(a_expr="%a", b_expr="%b", precision="tf32", m=64):
        attr = f" precision={precision}" if precision != "ieee" else ""
        lines = {"%at": f"    %at = permute %a perm=[1,0] : f32[{m},40]\n",
                 "%bt": "    %bt = permute %b perm=[1,0] : f32[40,48]\n"}
        a_type = f"f32[{m},40]" if a_expr == "%a" else f"f32[40,{m}]"
        b_type = "f32[40,48]" if b_expr == "%b" else "f32[48,40]"
        return (f"func @main(%a: {a_type}, %b: {b_type}) -> f32[{m},48] {{\n"
                f"  %y = kernel @g(%a, %b) kind=gemm block_m=16 block_n=16 block_k=16 "
                f"-> f32[{m},48] {{\n  ^(%a: {a_type}, %b: {b_type}):\n"
                + lines.get(a_expr, "") + lines.get(b_expr, "")
                + f"    %y = matmul {a_expr}, {b_expr}{attr} : f32[{m},48]\n    yield %y\n  }}\n"
                f"  return %y\n}}\n")
    e = emitted(gemm(b_expr="%bt"))  # 12 tiles of 16 x 16, 5 "SMs"
    assert e.auto_persistent and e.launches[0].grid == (5, 1, 1)
    assert e.source.count("(TMA)") == 2 and "B^T A^T" not in e.source
    assert "GEMM_TF32_TMA_MIN_TILES: TF32, both operands K-major" in "\n".join(e.tiling)
    plain = [emitted(gemm()),  # N-major B: the swapped product, pointer loads
             emitted(gemm(a_expr="%at", b_expr="%bt")),  # M-major A
             emitted(gemm(b_expr="%bt", m=16)),  # 3 tiles: under a wave of 5
             emitted(gemm(b_expr="%bt", precision="tf32x3")),
             emitted(gemm(b_expr="%bt", precision="ieee")),
             emitted(gemm(b_expr="%bt"), "interpret")]
    for p in plain:
        assert not p.auto_persistent and "(TMA)" not in p.source and "flatten=True" not in p.source
    assert "B^T A^T" in plain[0].source


def test_random_products_with_b_transposed_first(interpret_backend, forced):
    """Random shapes (batches, B broadcast over them or not), producers of B (a scale by a
    vector, a cast from float16, a transcendental), views of A and epilogues, the pass forced:
    every product within TF32's bound of the exact one, every plan with one pass."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    prologues = {
        "none": lambda xp, b, s: b,
        "scale": lambda xp, b, s: b * s,
        "cast": lambda xp, b, s: b.astype(np.float16).astype(F32),
        "tanh": lambda xp, b, s: xp.tanh(b) + s,
    }
    epilogues = {
        "none": lambda xp, y, s: y,
        "bias_relu": lambda xp, y, s: xp.maximum(y + s, 0),
    }

    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batch=st.sampled_from([(), (2,), (2, 1)]), m=st.integers(1, 20),
           k=st.sampled_from([3, 4, 5, 8, 12, 18, 20]), n=st.integers(2, 20), b_batched=st.booleans(),
           a_transposed=st.booleans(), pro=st.sampled_from(sorted(prologues)),
           epi=st.sampled_from(sorted(epilogues)))
    def check(batch, m, k, n, b_batched, a_transposed, pro, epi):
        a = rng.standard_normal((*batch, k, m) if a_transposed else (*batch, m, k)).astype(F32)
        b = rng.standard_normal((*(batch if b_batched else ()), k, n)).astype(F32)
        s = rng.standard_normal(n).astype(F32)

        def fn(xp, a, b, s):
            lhs = xp.swapaxes(a, -1, -2) if a_transposed else a
            return epilogues[epi](xp, _tf32(xp, lhs, prologues[pro](xp, b, s)), s)
        y = fn(fj, fj.asarray(a), fj.asarray(b), fj.asarray(s))
        plan = fj.plan(y)
        assert sum(k.name.startswith("transpose_") for k in plan.program.kernels) == 1, \
            plan.explain()
        got = np.asarray(y, F64)
        lhs = np.swapaxes(a, -1, -2) if a_transposed else a
        rhs = prologues[pro](np, b, s).astype(F32)
        bound = matmul_error_bound(lhs, rhs, F32, "tf32")
        exact = epilogues[epi](np, np.asarray(lhs, F64) @ np.asarray(rhs, F64), s.astype(F64))
        assert np.all(np.abs(got - exact) <= bound + 1e-5 * (1 + np.abs(exact)))
    check()
