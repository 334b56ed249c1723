"""The emitter's source: readable, specialized, safe (no device needed)."""

from __future__ import annotations

import dataclasses

import numpy as np

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.ir.program import Instr, Kernel, Param, TensorType


def _kernels(*outs):
    return fj.plan(*outs).program.kernels


def test_softmax_is_one_persistent_kernel_with_ir_comments():
    x = fj.asarray(np.ones((8, 128), np.float32))
    m = x.max(axis=1, keepdims=True)
    e = fj.exp(x - m)
    (k,) = _kernels(e / e.sum(axis=1, keepdims=True))
    src = emit_kernel(k, None, "cuda").source
    assert "for k in range" not in src          # persistent: the row stays in registers
    assert src.count("tl.load(") == 1            # the input is read once
    assert "# %" in src and "kernel @" in src    # IR as comments
    assert "mask" not in src                     # blocks divide the extents


def test_contiguous_pointwise_uses_flat_offsets():
    x = fj.asarray(np.ones((64, 32), np.float32))
    (k,) = _kernels((x * 2).reshape(32, 64) + 1)
    src = emit_kernel(k, None, "cuda").source
    assert "p_in0 + offs" in src and "//" not in src


def test_transposed_view_uses_strides():
    x = fj.asarray(np.ones((16, 8), np.float32))
    (k,) = _kernels(x.T + 1)
    src = emit_kernel(k, None, "cuda").source
    assert "* 8" in src or "//" in src


def test_names_are_sanitized_and_constants_exact():
    t = TensorType(np.dtype(np.float32), (4,))
    k = Kernel("bad name; import os", ("y",), ("x",), (Param("x", t),),
               [Instr("c", "const", (), {"value": float("-inf")}, t),
                Instr("n", "const", (), {"value": float("nan")}, t),
                Instr("z", "const", (), {"value": -0.0}, t),
                Instr("a", "add", ("x", "c"), {}, t), Instr("b", "add", ("a", "n"), {}, t),
                Instr("y", "add", ("b", "z"), {}, t)],
               ("y",), (t,), {"kind": "pointwise"})
    em = emit_kernel(k, None, "cuda")
    assert "def bad_name__import_os(" in em.source
    assert "-INF" in em.source and "float(\"nan\")" in em.source and "-0.0" in em.source
    compile(em.source, "<gen>", "exec")


def test_libdevice_only_on_cuda():
    x = fj.asarray(np.ones(16, np.float32))
    (k,) = _kernels(fj.tanh(x))
    assert "libdevice.tanh" in emit_kernel(k, None, "cuda").source
    assert "libdevice" not in emit_kernel(k, None, "interpret").source


def test_float32_exp_on_cuda_is_one_ptx_helper_per_module(monkeypatch):
    # libdevice's expf as inline PTX (EXP_F32_HELPER: the same instructions, less compile
    # time), defined once however many of the module's functions call it; float64 keeps
    # libdevice's exp, the interpreter its own lowering
    import fusejit.codegen.heuristics as heuristics
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
    x = fj.asarray(np.ones((256, 1 << 18), np.float32))
    (k,) = _kernels(fj.softmax(x, axis=-1))
    src = emit_kernel(k, None, "cuda").source
    assert "cooperative rows" in src and src.count("def _exp_f32(") == 1
    assert src.count("_exp_f32(") >= 4 and "import libdevice" not in src  # fast path, finish
    assert "_exp_f32" not in emit_kernel(k, None, "interpret").source
    (k64,) = _kernels(fj.exp(fj.asarray(np.ones(16, np.float64))))
    src64 = emit_kernel(k64, None, "cuda").source
    assert "libdevice.exp(" in src64 and "_exp_f32" not in src64
    from fusejit.codegen import lowering
    monkeypatch.setattr(lowering, "EXP_F32_AS_PTX", False)  # (the GPU test's reference)
    src = emit_kernel(k, None, "cuda").source
    assert "_exp_f32" not in src and "import libdevice" in src and "libdevice.exp(" in src


def test_looped_reduction_for_long_rows():
    x = fj.asarray(np.ones((2, 100000), np.float32))
    (k,) = _kernels(x.sum(axis=1))
    assert k.kind == "split_reduction"  # 2 outputs of 100000 elements: the fuser splits it
    k = dataclasses.replace(k, attrs={"kind": "inner_reduction"})
    src = emit_kernel(k, None, "cuda").source
    assert "for k in range(0, 100000" in src


def test_a_rows_weight_loads_once_a_program_under_the_columns_mask():
    """A layer norm of 18051 rows of 384 floats runs 4 rows a program: its weight and bias
    (along the reduced axis alone) load one row of the tile under the columns' mask, not the
    tile under the rows' and columns' (4 loads of each element a program: 12 LDG in the
    sm_90 SASS where it is 6 so). The row itself takes the tile's mask."""
    for cols in (384, 383):
        x = fj.asarray(np.ones((18051, cols), np.float32))
        w, b = fj.asarray(np.ones(cols, np.float32)), fj.asarray(np.zeros(cols, np.float32))
        (k,) = _kernels(fj.layer_norm(x, w, b))
        src = emit_kernel(k, None, "cuda").source
        assert "4 row(s) per program" in src and "mask = row_mask & col_mask" in src
        assert "tl.load(p_in0 + idx, mask=mask, other=0)" in src
        assert "tl.load(p_in1 + cols, mask=col_mask, other=0)" in src
        assert "tl.load(p_in2 + cols, mask=col_mask, other=0)" in src


def test_cli_triton_prints_kernels(tmp_path, capsys):
    from fusejit.cli import main
    x = fj.asarray(np.ones((4, 8), np.float32))
    path = tmp_path / "p.fir"
    path.write_text(fj.dump(fj.exp(x).sum(axis=1)))
    assert main(["triton", str(path)]) == 0
    out = capsys.readouterr().out
    assert "@triton.jit" in out and "# launch" in out


def test_contiguous_reduced_axes_read_through_one_coordinate():
    """A sum over axes (0, 1, 2) of an NHWC array reads ``cols * 3`` plus its channel: the three reduced
    axes are contiguous in the buffer, so no division or remainder per element is emitted
    (and no unused coordinate is left in the source)."""
    x = fj.asarray(np.ones((4, 6, 10, 3), np.float32))
    (k,) = _kernels(x.sum(axis=(0, 1, 2)))
    src = emit_kernel(k, None, "cuda").source
    (offset,) = [ln for ln in src.splitlines() if ln.strip().startswith("off_v_in0 =")]
    assert offset.strip() in ("off_v_in0 = cols * 3 + run", "off_v_in0 = cols * 3 + rows")
    assert "cols // " not in src and "cols % " not in src


def test_axes_merge_only_where_the_buffer_lays_them_out_contiguously():
    """Reductions and pointwise kernels whose operands are broadcast, transposed or sliced
    along some axes: runs of axes merge only where each stride is the next one's times its
    size and no axis between them is skipped (stride 0), checked against NumPy."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((5, 1, 6, 7)).astype(np.float32)
    b = rng.standard_normal((5, 4, 6, 7)).astype(np.float32)
    c = rng.standard_normal((7, 6, 4, 5)).astype(np.float32)
    d = rng.standard_normal((5, 4, 12, 7)).astype(np.float32)
    cases = {
        "broadcast kept axis": (lambda x, y, z, w: (x + y).sum(axis=(0, 2, 3)),
                                lambda x, y, z, w: (x + y).sum(axis=(0, 2, 3))),
        "broadcast middle, all reduced": (lambda x, y, z, w: (x * y).sum(),
                                          lambda x, y, z, w: (x * y).sum()),
        "transposed": (lambda x, y, z, w: (y + z.T).sum(axis=(1, 2)),
                       lambda x, y, z, w: (y + z.T).sum(axis=(1, 2))),
        "sliced": (lambda x, y, z, w: (w[:, :, ::2] - y).max(axis=(0, 2, 3)),
                   lambda x, y, z, w: (w[:, :, ::2] - y).max(axis=(0, 2, 3))),
        "pointwise broadcast": (lambda x, y, z, w: x * 2 + y,
                                lambda x, y, z, w: x * 2 + y),
        # (axes the unravel orders one way and the buffer the other: ``fusejit fuzz
        # --backend interpret --seed 20001`` found ``v0.T`` of an int8 2x33 array read as one
        # element when the run was merged regardless of order)
        "transposed 2-D": (lambda x, y, z, w: y[0, 0].T + 0, lambda x, y, z, w: y[0, 0].T + 0),
        "permuted": (lambda x, y, z, w: y.transpose(0, 2, 1, 3) * 3,
                     lambda x, y, z, w: y.transpose(0, 2, 1, 3) * 3),
        # (a buffer axis longer than the coordinate's: seed 20002 found ``v0[:, :-1, :, 0]``
        # of a 7x10x1x1 array merged by the buffer's extent, 10, where the coordinate's is 9)
        "slice shorter than its axis": (lambda x, y, z, w: w[:, :-1, :, 0] + 1,
                                        lambda x, y, z, w: w[:, :-1, :, 0] + 1),
        "reversed": (lambda x, y, z, w: z.transpose(3, 2, 1, 0) - y,
                     lambda x, y, z, w: z.transpose(3, 2, 1, 0) - y),
    }
    for name, (build, ref) in cases.items():
        got = build(*(fj.asarray(v) for v in (a, b, c, d))).numpy()
        want = ref(a, b, c, d)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_index_assignments_nothing_reads_are_pruned():
    """A GEMM that loads its tiles through TMA computes no K index tiles (``k_a``/``k_b``)
    and no unread column tile; loads, atomics and calls are never pruned, nor the only
    statement of a block (the source would not parse)."""
    from fusejit.codegen.values import _index_expr, _only_statement
    a = fj.asarray(np.zeros((4096, 512), np.float16))
    b = fj.asarray(np.zeros((512, 1024), np.float16))
    (k,) = _kernels(fj.maximum(a @ b, 0))
    src = emit_kernel(k, None, "cuda").source
    assert ".load([" in src  # (TMA)
    assert "k_a = " not in src and "k_b = " not in src and "cols_n = " not in src
    compile(src, "<gen>", "exec")
    assert _index_expr("pid * 8 + tl.arange(0, 8)[None, :]  # index")
    assert _index_expr("tl.where(m, x.to(tl.int64), 0)")
    assert not _index_expr("tl.load(p + offs)")
    assert not _index_expr('tl.atomic_add(counters, 1, sem="relaxed")')
    assert not _index_expr("kernel_stats(pid, parts)")
    block = ["if ok:", "    x = 1", "y = 2"]
    assert _only_statement(block, 1, 4) and not _only_statement(block, 2, 0)


def test_each_kernel_kind_is_emitted_by_its_own_module():
    """``emitter_class`` picks one emitter per kind (DESIGN: one codegen module per kind): a
    region without reductions is pointwise, a ``kind=split_reduction`` one a split reduction,
    an inner reduction the cooperative-rows emitter (which runs it cooperatively only where
    the row is too wide for one program), an outer reduction the base row reduction, a
    region with a ``matmul`` a GEMM; the emitted source is each kind's."""
    from fusejit.codegen.cooperative_rows import CooperativeRowEmitter
    from fusejit.codegen.gemm import GemmEmitter
    from fusejit.codegen.pointwise import PointwiseEmitter
    from fusejit.codegen.split_reduction import SplitReductionEmitter
    from fusejit.codegen.triton_emitter import _Emitter, emitter_class

    x = fj.asarray(np.ones((64, 32), np.float32))
    tall = fj.asarray(np.ones((1 << 16, 64), np.float32))
    wide = fj.asarray(np.ones((4, 1 << 18), np.float32))
    cases = [
        (x * 2 + 1, PointwiseEmitter, "offs"),
        (tall.sum(axis=0), SplitReductionEmitter, "_final("),
        (x - x.max(axis=1, keepdims=True), CooperativeRowEmitter, "tl.reduce("),
        (fj.softmax(wide, axis=-1), CooperativeRowEmitter, "_finish("),
        (x.max(axis=0), _Emitter, "tl.reduce("),
        (x @ x.T, GemmEmitter, "tl.dot("),
    ]
    for out, kind, mark in cases:
        (k,) = _kernels(out)
        assert emitter_class(k) is kind, (k.name, emitter_class(k), kind)
        assert mark in emit_kernel(k, None, "cuda").source, (k.name, mark)
