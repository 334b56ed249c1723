"""A float16 or TF32 GEMM whose operand rows are not 16-byte aligned gets those operands
copied to rows padded to 16 bytes first, when that pays (``fuse/rules.py``,
``rule_align_gemm_operands``; the rewrite: ``fuse/layout.py``, ``align_operand``), and the
``row_pitch`` attribute of pointwise kernels that the copies use.

Plans are checked from IR text (shapes alone); values on the ``numpy`` and ``interpret``
backends at small shapes with the rule forced (its gain set above its cost), against a
float64 product: relative Frobenius error under 2e-3 (float16 inputs and outputs: the
output's rounding, 4.9e-4, and K float32 products summed, with room for the epilogue's
float16 steps). On ``cuda`` the copies' and the GEMMs' kernels compile for sm_90, and the
plan runner allocates the copies' results with padded rows (on ``tests/fake_cupy.py``).
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusejit as fj
from fusejit import runtime
from fusejit.codegen import emit_kernel
from fusejit.errors import IRVerifyError
from fusejit.fuse import plan_for
from fusejit.ir.printer import print_program
from fusejit.ir.program import contiguous_strides, pitched
from fusejit.testing import recorded_inputs


def bench_gelu(xp, h):
    """GELU's tanh form (the benchmark's epilogue)."""
    return 0.5 * h * (1.0 + xp.tanh(0.7978845608028654 * (h + 0.044715 * (h * h * h))))

rng = np.random.default_rng(2026)


def _plan(a_shape, b_shape, b_expr="%b", dtype="f16", precision=""):
    """The plan of ``matmul(a, <b_expr>)`` from IR text (no arrays are made); ``precision``:
    the matmul's attribute, if any (``tf32``)."""
    fmt = lambda s: ",".join(map(str, s))  # noqa: E731
    k_n = b_shape[::-1] if b_expr != "%b" else b_shape
    out = (*a_shape[:-1], k_n[-1])
    view = "" if b_expr == "%b" else \
        f"  %bk = permute %b perm=[1,0] : {dtype}[{fmt(b_shape[::-1])}]\n"
    text = (f"func @main(%a: {dtype}[{fmt(a_shape)}], %b: {dtype}[{fmt(b_shape)}]) -> "
            f"{dtype}[{fmt(out)}] {{\n{view}"
            f"  %y = matmul %a, {'%b' if b_expr == '%b' else '%bk'}"
            f"{' precision=' + precision if precision else ''} : {dtype}[{fmt(out)}]\n"
            f"  return %y\n}}\n")
    return plan_for(fj.parse(text))


# -- when the rule applies ---------------------------------------------------------------------

def test_b_with_rows_4_bytes_aligned_is_copied_first():
    """7453x3898x5000 (an unseen draw's u2, 377 TFLOP/s against torch.compile's 550): B's
    rows of 3898 float16 (7796 bytes) start on 4-byte boundaries; A's (10000 bytes) are
    aligned. One copy, rows of 3904, then the GEMM reading the copy."""
    plan = _plan((7453, 5000), (5000, 3898))
    copy, gemm = plan.program.kernels
    assert copy.name == "align_f16_5000x3898" and copy.kind == "pointwise"
    assert copy.attrs["row_pitch"] == 3904 and copy.args == ("b",)
    assert [i.op for i in copy.body] == ["permute"] and copy.results == ("b_aligned",)
    assert gemm.kind == "gemm" and gemm.args == ("a", "b_aligned")
    text = plan.explain()
    assert re.search(r"@matmul_f16_7453x3898 \(align_gemm_operands\): %b's rows \(7796 bytes, "
                     r"4-byte aligned\) copied to rows padded to 16 bytes before the GEMM: saves "
                     r"~[\d.]+ us of ~[\d.]+ us, the copies cost ~[\d.]+ us \(the copies: "
                     r"@align_f16_5000x3898\)", text), text
    assert "%b_aligned from @align_f16_5000x3898 read by %y: not fused (align_gemm_operands)" \
        in text


def test_both_operands_of_a_transposed_weight_are_copied():
    """``a @ bt.T`` with K = 3183 (odd): both buffers' rows are 2-byte aligned; each is copied
    once (rows of 3184) and the GEMM reads the copy of ``bt`` through the same transpose."""
    plan = _plan((1548, 3183), (11932, 3183), b_expr="%b.T")
    names = [k.name for k in plan.program.kernels]
    assert names == ["align_f16_1548x3183", "align_f16_11932x3183", "matmul_f16_1548x11932"]
    gemm = plan.program.kernels[-1]
    assert {k.attrs.get("row_pitch") for k in plan.program.kernels[:2]} == {3184}
    assert [(i.op, i.args) for i in gemm.body][0] == ("permute", ("b_aligned",))


@pytest.mark.parametrize("a_shape, b_shape, why", [
    ((64, 24577), (24577, 24577), "a decode-like M: bound by reading B, which a copy moves twice"),
    ((23001, 41), (41, 23001), "K = 41: bound by writing the product, whose rows stay misaligned"),
])
def test_products_bound_by_memory_are_left_as_they_are(a_shape, b_shape, why):
    """The copies would save little or nothing (the decode-like product: its modelled compute
    time at 2-byte rows, ``GEMM_MISALIGNED_SHARE[2]``, is about its memory time) and cost
    more than that."""
    plan = _plan(a_shape, b_shape)
    assert [k.kind for k in plan.program.kernels] == ["gemm"], why
    found = re.search(r"read as they are: copies to 16-byte rows would cost ~([\d.]+) us and "
                      r"save ~([\d.]+) us of ~([\d.]+) us", plan.explain())
    assert found, plan.explain()
    cost_us, saved_us, gemm_us = map(float, found.groups())
    assert saved_us < 0.1 * gemm_us and saved_us < cost_us / 10, why


def test_products_under_the_measured_size_are_left_as_they_are():
    """2321x2782x515 (6.6e9 flops) ran in 46.5 us without the copies and 56.6 with them on the
    H200 (fifteenth session): under ``GEMM_ALIGN_MIN_FLOPS`` (8e9) no copy is made; 5000x721x2185
    (1.6e10, 108 -> 70 us there) is copied."""
    plan = _plan((2321, 515), (515, 2782))
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert ("%a's rows (1030 bytes, 2-byte aligned) and %b's rows (5564 bytes, 4-byte aligned) "
            "read as they are: a product of 6.7e+09 flops, under the 8e+09 from which copies to "
            "16-byte rows were measured to pay") in plan.explain()
    plan = _plan((5000, 2185), (2185, 721))
    assert [k.kind for k in plan.program.kernels] == ["pointwise", "pointwise", "gemm"], \
        plan.explain()
    # 1023x1486x9171 with b.T (2.8e10 flops): 330 us without, 135 with them
    plan = _plan((1023, 9171), (1486, 9171), b_expr="%b.T")
    assert [k.kind for k in plan.program.kernels] == ["pointwise", "pointwise", "gemm"]


def test_small_batched_products_of_2_byte_rows_are_copied():
    """Batched float16 products of 2-byte aligned rows just over ``GEMM_ALIGN_MIN_FLOPS`` ran
    faster through the copies on the H200 (32 x 257x521x1000, 8.6e9 flops: 111 -> 83 us;
    3 x 223x1649x4703, 1.0e10: 137 -> 83): the model's rate of such rows
    (``GEMM_MISALIGNED_SHARE[2]``) makes them copy (at 0.22 of the aligned rate it did not)."""
    for a_shape, b_shape in (((32, 257, 1000), (32, 1000, 521)),
                             ((3, 223, 4703), (3, 4703, 1649))):
        plan = _plan(a_shape, b_shape)
        assert [k.kind for k in plan.program.kernels][-1] == "gemm"
        assert len(plan.program.kernels) > 1, plan.explain()
        assert "padded to 16 bytes" in plan.explain()


def test_operands_read_k_major_are_copied_from_a_lower_size():
    """Every operand copied read K-major (A, and B stored transposed): copies from
    ``GEMM_ALIGN_MIN_FLOPS_K_MAJOR`` (5e9) where the model says they pay. 7423x2185x257 with
    ``b.T`` (8.3e9 flops, rows 2-byte aligned) ran 123 us as read and 48 through the copies
    on an H100; a B read N-major keeps the 8e9 bound (7.0e9 flops: no copy)."""
    plan = _plan((7423, 257), (2185, 257), b_expr="%b.T")
    assert [k.kind for k in plan.program.kernels] == ["pointwise", "pointwise", "gemm"], \
        plan.explain()
    assert "padded to 16 bytes before the GEMM: saves" in plan.explain()
    plan = _plan((6800, 257), (257, 2001))  # B N-major (rows of 2001: 2-byte aligned), 7.0e9
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "under the 8e+09 from which" in plan.explain()
    plan = _plan((3001, 257), (2185, 257), b_expr="%b.T")  # 3.4e9 flops: under 5e9
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "under the 5e+09 from which" in plan.explain()


@pytest.mark.parametrize("a_shape, b_shape, dtype", [
    ((4096, 4096), (4096, 4096), "f16"),     # aligned rows: no decision at all
    ((2048, 3001), (3001, 2047), "f32"),     # float32 products: not this rule's
    ((64, 37), (37, 45), "f16"),             # too small to gain
])
def test_no_copy(a_shape, b_shape, dtype):
    plan = _plan(a_shape, b_shape, dtype=dtype)
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "padded to 16 bytes before" not in plan.explain()


def test_an_operand_computed_in_the_prologue_is_not_copied():
    """A is ``(x * x).astype(float16)`` of a float32 x, computed while its tiles load: only B
    (read as it is) can be copied, and it is when x's own rows are aligned (3000 float32); with
    x's rows 4-byte aligned (3001) the prologue's loads stay as slow, so copying B gains
    nothing."""
    def plan(k):
        text = (f"func @main(%x: f32[3000,{k}], %b: f16[{k},3002]) -> f16[3000,3002] {{\n"
                f"  %s = mul %x, %x : f32[3000,{k}]\n"
                f"  %h = cast %s : f16[3000,{k}]\n"
                f"  %y = matmul %h, %b : f16[3000,3002]\n"
                f"  return %y\n}}\n")
        return plan_for(fj.parse(text))
    copies = [k.args for k in plan(3000).program.kernels if k.name.startswith("align_")]
    assert copies == [("b",)], plan(3000).explain()
    assert len(plan(3001).program.kernels) == 1
    assert "%b's rows (6004 bytes, 4-byte aligned) read as they are" in plan(3001).explain()


@pytest.mark.parametrize("mode, kernels, why", [
    ("0", ["gemm"], "FUSEJIT_GEMM_ALIGN=0"),
    ("always", ["pointwise", "pointwise", "gemm"], "FUSEJIT_GEMM_ALIGN=always"),
])
def test_the_environment_turns_the_copies_off_or_on(mode, kernels, why, monkeypatch):
    """(Read when a plan is built: shapes planned before are cached as they were.)"""
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", mode)
    # 0: a product that copies by default; always: one too small to
    size, k = {"0": (7000, 5000), "always": (65, 37)}[mode]
    plan = _plan((size, k), (k, 3899))
    assert [k.kind for k in plan.program.kernels] == kernels
    assert why in plan.explain()
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "sometimes")
    with pytest.raises(fj.FusejitError, match="FUSEJIT_GEMM_ALIGN='sometimes' is not one of"):
        _plan((size + 1, k), (k, 3899))


# -- TF32 products ---------------------------------------------------------------------------

def test_tf32_operands_of_misaligned_rows_are_copied_first():
    """224x241x9669 in TF32 (an unseen draw's u13, 0.13x of cuBLAS): both buffers' rows of
    float32 are 4-byte aligned, and B is read N-major; on an H100 the plan took 116 us as read
    and 55 with both copied (rows of 9672 and 244 elements). B stays N-major (K = 9669 cannot
    be transposed to aligned K-major rows)."""
    plan = _plan((224, 9669), (9669, 241), dtype="f32", precision="tf32")
    copy_a, copy_b, gemm = plan.program.kernels
    assert (copy_a.name, copy_a.attrs["row_pitch"]) == ("align_f32_224x9669", 9672)
    assert (copy_b.name, copy_b.attrs["row_pitch"]) == ("align_f32_9669x241", 244)
    assert gemm.args == ("a_aligned", "b_aligned")
    assert re.search(r"@matmul_f32_224x241 \(align_gemm_operands\): %a's rows \(38676 bytes, "
                     r"4-byte aligned\) and %b's rows \(964 bytes, 4-byte aligned\) copied to "
                     r"rows padded to 16 bytes before the TF32 GEMM: a B read N-major through "
                     r"misaligned rows made such products 3-5x slower \(measured\), the copies "
                     r"cost ~[\d.]+ us", plan.explain()), plan.explain()
    # a decode-like product, 16 rows: 703 -> 465 us (its scalar loads, not B's bytes, bound it)
    plan = _plan((16, 8191), (8191, 12289), dtype="f32", precision="tf32")
    assert [k.name.split("_")[0] for k in plan.program.kernels] == ["align", "align", "matmul"]
    # B K-major (a @ bt.T) of a long product: 748 -> 587 us, by the roofline
    plan = _plan((4095, 4093), (4097, 4093), b_expr="%b.T", dtype="f32", precision="tf32")
    assert [k.name for k in plan.program.kernels] == [
        "align_f32_4095x4093", "align_f32_4097x4093", "matmul_f32_4095x4097"]
    assert re.search(r"copied to rows padded to 16 bytes before the GEMM: saves ~178 us of "
                     r"~595 us, the copies cost ~[\d.]+ us", plan.explain()), plan.explain()


@pytest.mark.parametrize("a_shape, b_shape, b_expr, why", [
    ((5, 7665), (4251, 7665), "%b.T", "copies to 16-byte rows would cost ~97.3 us and save "
                                      "~18.7 us of ~62.2 us"),  # H100: 69 -> 189 us
    ((1023, 8191), (1023, 8191), "%b.T", "copies to 16-byte rows would cost ~55 us and save "
                                         "~22.3 us of ~74.2 us"),  # 160 -> 172 us
    ((500, 503), (503, 501), "%b", "a TF32 product of 2.5e+08 flops, under the 5e+08"),
    ((2048, 4095), (4095, 2048), "%b", "%a's rows (16380 bytes, 4-byte aligned) read as they "
                                       "are: FUSEJIT_GEMM_ALIGN=0"),
])
def test_tf32_products_where_copies_do_not_pay_are_left(a_shape, b_shape, b_expr, why,
                                                        monkeypatch):
    if "ALIGN=0" in why:
        monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "0")
    plan = _plan(a_shape, b_shape, b_expr=b_expr, dtype="f32", precision="tf32")
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert why in plan.explain(), plan.explain()


def test_full_precision_copies_a_alone_from_the_measured_size():
    """Full-precision float32 (the FMA kernel): A's misaligned rows are copied from
    ``cost.FMA_ALIGN_MIN_FLOPS`` on (H100: 6410x1550x3337 2065 -> 1891 us, 4096x4096x4093
    3230 -> 3105); B's never (4096x4093x4096 lost, 3230 -> 3352), smaller products not
    (257x3467x585 73 -> 84 us)."""
    from fusejit.fuse import cost
    plan = _plan((6410, 3337), (3337, 1550), dtype="f32")
    assert [k.name.split("_")[0] for k in plan.program.kernels] == ["align", "matmul"]
    assert plan.program.kernels[0].row_pitch == 3340
    assert "%a's rows (13348 bytes, 4-byte aligned) copied" in plan.explain()
    plan = _plan((4096, 4096), (4096, 4093), dtype="f32")  # B's rows alone misaligned
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "align_gemm_operands" not in plan.explain()
    plan = _plan((257, 585), (585, 3467), dtype="f32")
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "under the 5e+10 from which its A is copied" in plan.explain()
    assert 2 * 4096 * 4096 * 4093 > cost.FMA_ALIGN_MIN_FLOPS > 2 * 2047 * 513 * 8191
    # A read M-major (a transposed view) is left: only row-major A was measured
    text = ("func @main(%at: f32[3337,6410], %b: f32[3337,1550]) -> f32[6410,1550] {\n"
            "  %a = permute %at perm=[1,0] : f32[6410,3337]\n"
            "  %y = matmul %a, %b : f32[6410,1550]\n  return %y\n}\n")
    assert [k.kind for k in plan_for(fj.parse(text)).program.kernels] == ["gemm"]


def test_float32_products_in_tf32x3_are_not_copied():
    """``tf32x3`` is unmeasured: left as it is."""
    plan = _plan((3001, 1537), (1537, 2047), dtype="f32", precision="tf32x3")
    assert [k.kind for k in plan.program.kernels] == ["gemm"]
    assert "align_gemm_operands" not in plan.explain()


def test_the_tf32_gemm_reads_the_copies_through_tma(monkeypatch):
    """3001x2047x1537 with ``b.T`` compiled for sm_90: on the copies' padded rows (forced: the
    default leaves this size as it is) the GEMM's operand tiles are TMA boxes (178 -> 131 us
    on an H100); reading the buffers as they are (``FUSEJIT_GEMM_ALIGN=0``) every asynchronous
    copy to shared memory moves 4 bytes."""
    pytest.importorskip("triton")
    from fusejit.runtime import forget_plans

    from .test_cubin import _emitted_ptx

    def loads(mode):
        monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", mode)
        forget_plans()
        plan = _plan((3001, 1537), (2047, 1537), b_expr="%b.T", dtype="f32", precision="tf32")
        gemm, strides = list(_cuda_strides(plan.program))[-1]
        emitted = emit_kernel(gemm, strides, "cuda")
        ptx = _emitted_ptx(emitted)
        sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global[^;]*?, (0x\w+|\d+)", ptx)
        return "TMA loads" in emitted.source.splitlines()[2], set(sizes)
    assert loads("always") == (True, set())
    assert loads("0") == (False, {"0x4"})
    forget_plans()


# -- values ------------------------------------------------------------------------------------

CASES = [  # (batch, M, N, K, B stored transposed, epilogue)
    (1, 37, 45, 29, False, "none"), (1, 20, 33, 17, True, "bias_relu"),
    (3, 9, 13, 11, True, "residual"), (2, 16, 7, 5, False, "none"),
    (1, 40, 24, 13, False, "tanh"), (1, 21, 19, 23, True, "gelu"),
]


def _product_and_reference(case, dtype, precision=None):
    """A case's product with its epilogue, recorded by fusejit from fresh operands of
    ``dtype`` (``precision``: the matmul's, None for the default), and the same in float64
    NumPy."""
    batch, m, n, k, transposed, epilogue = case
    lead = (batch,) if batch > 1 else ()
    a_np = rng.standard_normal((*lead, m, k)).astype(dtype)
    b_np = rng.standard_normal((*lead, n, k) if transposed else (*lead, k, n)).astype(dtype)
    b_view = np.swapaxes(b_np, -1, -2) if transposed else b_np
    a, b = fj.asarray(a_np), fj.asarray(b_np)
    b = fj.swapaxes(b, -1, -2) if transposed else b
    y = a @ b if precision is None else fj.matmul(a, b, precision=precision)
    ref = a_np.astype(np.float64) @ b_view.astype(np.float64)
    if epilogue == "bias_relu":
        bias = rng.standard_normal(n).astype(dtype)
        y, ref = fj.maximum(y + bias, 0), np.maximum(ref + bias, 0)
    elif epilogue == "residual":
        r = rng.standard_normal((*lead, m, n)).astype(dtype)
        y, ref = y * 0.5 + r, ref * 0.5 + r
    elif epilogue == "tanh":
        y, ref = fj.tanh(y), np.tanh(ref)
    elif epilogue == "gelu":  # scalar params in the GEMM kernel beside the copies
        y, ref = bench_gelu(fj, y + 0.25), bench_gelu(np, ref + 0.25)
    return y, ref


@pytest.mark.parametrize("backend", ["numpy", "interpret"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}-{c[5]}")
def test_values_with_the_copies_forced(backend, case, monkeypatch):
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "always")
    fj.set_backend(backend)
    y, ref = _product_and_reference(case, np.float16)
    kernels = fj.plan(y).program.kernels
    assert [kk.name.split("_")[0] for kk in kernels[:-1]] == ["align"] * (len(kernels) - 1) \
        and len(kernels) >= 2
    # the fused text, as a user would dump and edit it, parses and runs the same
    (again,) = fj.parse(fj.dump(y, fused=True)).run(*recorded_inputs(y))
    np.testing.assert_array_equal(np.asarray(again), y.numpy())
    got = np.asarray(y.numpy(), np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.parametrize("backend", ["numpy", "interpret"])
@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}")
def test_tf32_values_with_the_copies_forced(backend, case, monkeypatch):
    """float32 operands of misaligned rows in a TF32 product, copied: relative Frobenius error
    under 2e-3 against a float64 product (TF32 keeps 10 bits of the inputs' mantissas: 4.9e-4
    each, summed over K products; the ``numpy`` backend computes in full precision)."""
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "always")
    fj.set_backend(backend)
    _, _, n, k, transposed, _ = case
    y, ref = _product_and_reference(case, np.float32, "tf32")
    kernels = fj.plan(y).program.kernels
    misaligned = (k % 4 != 0) + ((k if transposed else n) % 4 != 0)
    assert [kk.row_pitch > 0 for kk in kernels] == [True] * misaligned + [False]
    got = np.asarray(y.numpy(), np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


@pytest.mark.parametrize("backend", ["numpy", "interpret"])
@pytest.mark.parametrize("case", CASES[:4], ids=lambda c: "x".join(map(str, c[:4])) + f"-{c[4]}")
def test_full_precision_values_with_the_copies_forced(backend, case, monkeypatch):
    """``FUSEJIT_GEMM_ALIGN=always`` copies both full-precision operands; the values stay
    float32's (relative error under ``4 sqrt(K) eps``)."""
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "always")
    fj.set_backend(backend)
    y, ref = _product_and_reference(case, np.float32)
    names = [kk.name.split("_")[0] for kk in fj.plan(y).program.kernels]
    assert names.count("align") >= 1 and names[-1] == "matmul", names
    got = np.asarray(y.numpy(), np.float64)
    k = case[3]
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 4 * np.sqrt(k) * 2.0 ** -23


@settings(max_examples=25, deadline=None, derandomize=True)
@given(st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.booleans(), st.sampled_from([c[5] for c in CASES]), st.booleans())
def test_random_products_with_every_copy_forced(batch, m, n, k, transposed, epilogue, b_shared):
    """Random float16 products (sides 1-40, batches of a weight of their own or shared) with
    ``FUSEJIT_GEMM_ALIGN=always`` on the interpreter: every misaligned operand is copied to
    padded rows, whatever the sizes (1-element rows included)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("FUSEJIT_GEMM_ALIGN", "always")
    try:
        fj.set_backend("interpret")
        lead = (batch,) if batch > 1 else ()
        b_lead = () if b_shared else lead
        a_np = rng.standard_normal((*lead, m, k)).astype(np.float16)
        b_np = rng.standard_normal((*b_lead, n, k) if transposed else (*b_lead, k, n)) \
            .astype(np.float16)
        b_view = np.swapaxes(b_np, -1, -2) if transposed else b_np
        y = fj.asarray(a_np) @ (fj.swapaxes(fj.asarray(b_np), -1, -2) if transposed
                                else fj.asarray(b_np))
        ref = a_np.astype(np.float64) @ b_view.astype(np.float64)
        if epilogue == "bias_relu":
            bias = rng.standard_normal(n).astype(np.float16)
            y, ref = fj.maximum(y + bias, 0), np.maximum(ref + bias, 0)
        elif epilogue in ("tanh", "gelu"):
            y, ref = fj.tanh(y), np.tanh(ref)
        elif epilogue == "residual":
            r = rng.standard_normal(ref.shape).astype(np.float16)
            y, ref = y * 0.5 + r, ref * 0.5 + r
        copies = sum(kk.row_pitch > 0 for kk in fj.plan(y).program.kernels)
        def misaligned(row: int) -> bool:  # (a row of one element is left alone)
            return row >= 2 and row % 8 != 0
        assert copies == misaligned(k) + misaligned(k if transposed else n)
        got = np.asarray(y.numpy(), np.float64)
        scale = max(1.0, float(np.abs(ref).max()))
        assert np.abs(got - ref).max() <= 2e-3 * scale * max(1.0, np.sqrt(k))
    finally:
        mp.undo()


# -- row_pitch, as a user writes it -------------------------------------------------------------

_PITCHED = """# fusejit ir v1
func @main(%b: f16[37,91]) -> f16[37,91] {{
  %0 = kernel @align_b(%b) kind=pointwise row_pitch={pitch} -> f16[37,91] {{
  ^(%b: f16[37,91]):
    %0 = permute %b perm=[0,1] : f16[37,91]
    yield %0
  }}
  %1 = add %0, %0 : f16[37,91]
  return %1
}}
"""


@pytest.mark.parametrize("backend", ["numpy", "interpret"])
@pytest.mark.parametrize("pitch", [96, 93])
def test_a_kernel_written_with_row_pitch_runs(backend, pitch):
    """Rows 192 bytes apart (a copy in 8-byte words) or 186 (not a multiple of 16 bytes:
    2-D tiles, element by element)."""
    fj.set_backend(backend)
    b = rng.standard_normal((37, 91)).astype(np.float16)
    program = fj.parse(_PITCHED.format(pitch=pitch))
    (kernel,) = [k for k in plan_for(program).program.kernels if k.name == "align_b"]
    source = emit_kernel(kernel, None, "interpret").source
    assert ("8-byte words" in source) == (pitch == 96)
    (out,) = program.run(b=b)
    np.testing.assert_array_equal(np.asarray(out), b + b)


def test_row_pitch_stores_rows_apart_and_survives_the_text():
    """A pitched kernel that computes stores 2-D tiles rows apart; one that only copies a
    contiguous buffer copies 8-byte words (``pitched_copy``)."""
    program = fj.parse(_PITCHED.format(pitch=104))
    assert fj.parse(print_program(program)) == program
    assert "kind=pointwise row_pitch=104 ->" in print_program(plan_for(program).program)
    (kernel,) = [k for k in plan_for(program).program.kernels if k.name == "align_b"]
    assert kernel.row_pitch == 104
    source = emit_kernel(kernel, None, "cuda").source
    assert "a copy in 8-byte words" in source and "r * 26 + j, word" in source
    negated = fj.parse(_PITCHED.format(pitch=104).replace(
        "%0 = permute %b perm=[0,1]", "%0 = neg %b"))
    (kernel,) = [k for k in plan_for(negated).program.kernels if k.name == "align_b"]
    source = emit_kernel(kernel, None, "cuda").source
    assert "at = i_m * 104 + i_n  # rows 104 elements apart (row_pitch)" in source
    assert "tl.store(out0 + at, v0, mask=mask)" in source
    # a source read through a transposing view is not a contiguous copy: 2-D tiles
    (kernel,) = [k for k in plan_for(program).program.kernels if k.name == "align_b"]
    assert "8-byte words" not in emit_kernel(kernel, [(1, 37)], "cuda").source


_COPY = """# fusejit ir v1
func @main(%x: {t}[{shape}]) -> {t}[{shape}] {{
  %0 = kernel @pad(%x) kind=pointwise row_pitch={pitch} -> {t}[{shape}] {{
  ^(%x: {t}[{shape}]):
    %0 = permute %x perm=[{perm}] : {t}[{shape}]
    yield %0
  }}
  return %0
}}
"""


@pytest.mark.parametrize("dtype, name", [(np.float16, "f16"), (np.int8, "i8"), (np.float32, "f32")])
@pytest.mark.parametrize("shape", [(37, 91), (1, 5), (3, 7), (64, 41), (2, 3, 13), (129, 1000),
                                   (5, 2)])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_pitched_copy_in_words_is_exact(dtype, name, shape, offset):
    """The word copy on the interpreter, against the source bit for bit: sources starting at
    any element (the aligned word under the first row starts before them), rows of any
    misalignment, a last word past the source (its bytes copied element by element), rows
    shorter than a word, several programs along a row (1000 float32 = 500 words)."""
    fj.set_backend("interpret")
    item = np.dtype(dtype).itemsize
    pitch = -(-shape[-1] // (16 // item)) * (16 // item)  # rows of whole 16-byte lines
    program = fj.parse(_COPY.format(t=name, shape=",".join(map(str, shape)), pitch=pitch,
                                    perm=",".join(map(str, range(len(shape))))))
    (kernel,) = plan_for(program).program.kernels
    assert "8-byte words" in emit_kernel(kernel, None, "interpret").source
    size = int(np.prod(shape))
    raw = rng.integers(-100, 100, size + 16).astype(dtype)
    x = raw[offset:offset + size].reshape(shape)
    (out,) = program.run(x=x)
    np.testing.assert_array_equal(np.asarray(out), x)


@pytest.mark.parametrize("pitch, message", [
    ("90", "row_pitch=90 is less than the 91 elements of a row of its result %0"),
    ("0", "row_pitch=0 is not a positive integer"),
])
def test_invalid_row_pitch_is_an_error_at_the_kernel(pitch, message):
    with pytest.raises(IRVerifyError, match=re.escape(message)) as info:
        fj.parse(_PITCHED.format(pitch=pitch))
    assert info.value.line == 3


def test_row_pitch_on_a_reduction_is_an_error():
    text = ("func @main(%x: f32[8,16]) -> f32[8] {\n"
            "  %s = kernel @k(%x) kind=inner_reduction row_pitch=16 -> f32[8] {\n"
            "  ^(%x: f32[8,16]):\n"
            "    %s = sum %x axes=[1] : f32[8]\n"
            "    yield %s\n  }\n  return %s\n}\n")
    with pytest.raises(IRVerifyError, match="row_pitch=16 is for pointwise kernels"):
        fj.parse(text)


# -- cuda ----------------------------------------------------------------------------------------

def _cuda_strides(program):
    """Each kernel's param strides as the cuda plan runner gives them (copies' results padded)."""
    pitch: dict[str, int] = {}
    for kernel in program.kernels:
        yield kernel, [() if p.scalar else contiguous_strides(pitched(p.type.shape,
                                                                          pitch.get(a, 0)))
                       for p, a in zip(kernel.params, kernel.args)]
        pitch.update({r: kernel.row_pitch for r in kernel.results if kernel.row_pitch})


def test_the_gemm_reads_the_copies_through_tma_on_cuda():
    """With the copies' padded rows the GEMM's operand tiles are TMA boxes: the heuristic makes
    it persistent (it could not read 4-byte aligned rows through TMA)."""
    plan = _plan((7453, 5000), (5000, 3898))
    (copy, cs), (gemm, gs) = _cuda_strides(plan.program)
    assert gs[1] == (3904, 1)
    assert emit_kernel(gemm, gs, "cuda").auto_persistent
    unaligned = plan_for(fj.parse(_TEXT_U2)).program.kernels  # (as written: no copy)
    assert not emit_kernel(unaligned[0], None, "cuda").auto_persistent


_TEXT_U2 = """# fusejit ir v1
func @main(%a: f16[7453,5000], %b: f16[5000,3898]) -> f16[7453,3898] {
  %y = kernel @g(%a, %b) kind=gemm -> f16[7453,3898] {
  ^(%a: f16[7453,5000], %b: f16[5000,3898]):
    %y = matmul %a, %b : f16[7453,3898]
    yield %y
  }
  return %y
}
"""


def test_copies_and_gemms_compile_for_sm90(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    from fusejit.runtime.compile import compile_all
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "always")  # (the batched product is small)
    for plan in (_plan((1548, 3183), (11932, 3183), b_expr="%b.T"),
                 _plan((3, 1000, 3001), (3, 3001, 999))):
        assert any(k.row_pitch for k in plan.program.kernels)
        for kernel, strides in _cuda_strides(plan.program):
            emitted = emit_kernel(kernel, strides, "cuda")
            assert ("8-byte words" in emitted.source) == bool(kernel.row_pitch)
            for c in compile_all(emitted, 90, True):
                assert c.cubin[:4] == b"\x7fELF"


def test_the_plan_runner_allocates_padded_rows(monkeypatch):
    """On the cuda backend's host code (``FakeCupy``: launches recorded, nothing computed):
    the copy's result is a view of a wider array, rows 3184 elements apart, and the GEMM's
    launch receives that view."""
    pytest.importorskip("triton")
    from fusejit.runtime import cuda_backend

    from .fake_cupy import FakeCupy
    from .test_devices import _fake_compile
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(cuda_backend, "compile_launch", _fake_compile([]))
    fj.set_backend("cuda")
    try:
        a = cp.asarray(np.zeros((1548, 3183), np.float16))
        bt = cp.asarray(np.zeros((11932, 3183), np.float16))
        fj.realize(fj.asarray(a) @ fj.asarray(bt).T)
        padded = [x for args in cp.arguments for x in args
                  if isinstance(x, cp.ndarray) and x.strides == (3184 * 2, 2)]
        assert len(padded) >= 4  # each copy's result, as written and as the GEMM reads it
    finally:
        fj.set_backend("numpy")


# -- the K loop's partial last step ----------------------------------------------------------

def test_a_partial_last_k_step_runs_after_the_loop_unmasked_inside():
    """K = 9171 with block_k 64: 143 whole steps with no mask along K (their loads keep the
    rows' 16-byte alignment: ``cp.async`` of 16 bytes, where a mask along K at every step
    made every load 2 bytes), then the last 19 elements masked. A K that block_k divides has
    no mask at all; a GEMM loading through TMA (boxes read zeros past K: by default from half
    a wave of tiles, as this one) keeps its one loop."""
    from dataclasses import replace
    plan = _plan((1023, 9171), (1486, 9171), b_expr="%b.T")
    (gemm, strides), = [(k, s) for k, s in _cuda_strides(plan.program) if k.kind == "gemm"]
    assert "whole steps" not in emit_kernel(gemm, strides, "cuda").source
    gemm = replace(gemm, attrs={**gemm.attrs, "tma": 0})  # pointer loads
    source = emit_kernel(gemm, strides, "cuda").source
    assert "for k in range(0, 9152, 64):  # whole steps: no mask along K" in source
    assert "k = tl.full([], 9152, tl.int32)  # the last, partial step along K" in source
    loop = source.split("whole steps")[1].split("the last, partial step")[0]
    assert "mask_ka" not in loop and "mask_kb" not in loop
    tail = source.split("the last, partial step along K")[1]
    assert "mask_ka = k_a < 9171" in tail and "mask_kb = k_b < 9171" in tail
    even = emit_kernel(_plan((1024, 4096), (4096, 1024)).program.kernels[0], None, "cuda").source
    assert "mask_ka" not in even and "whole steps" not in even
    persistent = emit_kernel(_plan((8192, 4104), (4104, 8192)).program.kernels[0], None, "cuda")
    assert persistent.auto_persistent and "whole steps" not in persistent.source


@pytest.mark.parametrize("k", [1, 15, 16, 17, 40, 63, 65, 130])
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_k_that_block_k_does_not_divide(k, dtype):
    """Values on the interpreter (block_k 16 or more): the loop's whole steps and the partial
    last one sum every product once, against a float64 product (relative 2e-3 for float16,
    1e-5 for float32 in full precision)."""
    fj.set_backend("interpret")
    a_np = rng.standard_normal((19, k)).astype(dtype)
    b_np = rng.standard_normal((k, 23)).astype(dtype)
    y = fj.exp(fj.asarray(a_np) @ fj.asarray(b_np) * 0.1)
    ref = np.exp(a_np.astype(np.float64) @ b_np.astype(np.float64) * 0.1)
    got = np.asarray(y.numpy(), np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < (2e-3 if dtype == np.float16 else 1e-5)


def test_a_padded_k_major_b_loads_through_tma(monkeypatch):
    """TF32 4096x4096x4094 of a row-major B (K % 4 = 2): B is transposed to rows padded to 4096
    elements (``rule_tf32_k_major_b``) and A copied to padded rows, so compiled for sm_90 both
    operands' tiles are TMA boxes, persistent (``GEMM_TF32_TMA_MIN_TILES``); 5183x1023x15402
    (A's rows 8-byte aligned, its copy not worth it) reads B K-major 16 bytes at a time and A
    8 bytes at a time, without the swapped (B^T A^T)^T form."""
    pytest.importorskip("triton")
    from fusejit.runtime import forget_plans

    from .test_cubin import _emitted_ptx
    monkeypatch.delenv("FUSEJIT_GEMM_ALIGN", raising=False)
    forget_plans()
    plan = _plan((4096, 4094), (4094, 4096), dtype="f32", precision="tf32")
    kernels = list(_cuda_strides(plan.program))
    assert [k.name.split("_")[0] for k, _ in kernels] == ["transpose", "align", "matmul"]
    gemm, strides = kernels[-1]
    assert sorted(strides) == [(4096, 1), (4096, 1)]
    emitted = emit_kernel(gemm, strides, "cuda")
    assert emitted.auto_persistent and emitted.source.count("(TMA)") == 2
    plan = _plan((5183, 15402), (15402, 1023), dtype="f32", precision="tf32")
    kernels = list(_cuda_strides(plan.program))
    assert [k.name.split("_")[0] for k, _ in kernels] == ["transpose", "matmul"], plan.explain()
    gemm, strides = kernels[-1]
    emitted = emit_kernel(gemm, strides, "cuda")
    assert "B^T A^T" not in emitted.source and "(TMA)" not in emitted.source
    ptx = _emitted_ptx(emitted)
    sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global[^;]*?, (0x\w+|\d+)", ptx)
    assert set(sizes) == {"0x8", "0x10"}, set(sizes)
    forget_plans()
