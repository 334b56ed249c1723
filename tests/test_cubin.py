"""Every canonical program's kernels compile to an sm_90 cubin on this (GPU-less) machine."""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.runtime.compile import compile_all  # noqa: E402

from ._canonical import CANONICAL, DTYPES, SPLIT, dtype_inputs, dtype_program  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def _kernels(fn, arrays):
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = outs if isinstance(outs, tuple) else (outs,)
    return fj.plan(*outs).program.kernels


def _compile(fn, arrays):
    kernels = _kernels(fn, arrays)
    assert kernels
    for k in kernels:
        emitted = emit_kernel(k, None, "cuda")
        for divisible in (True, False):
            for c in compile_all(emitted, 90, divisible):
                assert c.cubin[:4] == b"\x7fELF"
                assert c.n_params >= c.n_args


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_canonical_compiles(name):
    fn, make = CANONICAL[name]
    _compile(fn, make(64))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_compile(dtype):
    _compile(dtype_program, dtype_inputs(dtype, 8))


def test_libdevice_math_compiles():
    x = np.linspace(-3, 3, 4096).astype(np.float32)

    def f(xp, a):
        return (xp.tanh(a) + xp.expm1(a) + xp.log1p(xp.abs(a)) + xp.arctan2(a, a[::-1])
                + xp.arcsin(a / 4) + xp.sinh(a) + xp.power(xp.abs(a), a) + xp.erf(a))
    _compile(f, [x])
    _compile(f, [x.astype(np.float64)])
    _compile(f, [x.astype(np.float16)])


def _emitted_ptx(emitted, **options):
    """The PTX of an emitted kernel's first launch, compiled for sm_90 with every pointer
    16-byte aligned (``options``: Triton's, besides the launch's warps and stages)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fusejit.runtime import kernel_cache as kc
    launch = emitted.launches[0]
    module = kc.import_source(kc.write_source(emitted), interpret=False)
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(launch.signature))}
    src = ASTSource(getattr(module, launch.fn_name), launch.signature, {}, attrs)
    options = {"num_warps": launch.num_warps, **options}
    if launch.num_stages:
        options["num_stages"] = launch.num_stages
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]


def _kernel_ptx(kernel):
    """The PTX of one kernel region (emitted for cuda, one launch, compiled for sm_90)."""
    emitted = emit_kernel(kernel, None, "cuda")
    assert len(emitted.launches) == 1
    return _emitted_ptx(emitted, enable_fp_fusion=False)


def _program_ptx(fn, arrays):
    """The PTX of a program's one kernel."""
    (kernel,) = _kernels(fn, arrays)
    return _kernel_ptx(kernel)


def test_float16_tanh_is_the_hardware_tanh_and_wider_types_libdevice():
    x = np.linspace(-3, 3, 4096)
    half = _program_ptx(lambda xp, a: xp.tanh(a), [x.astype(np.float16)])
    single = _program_ptx(lambda xp, a: xp.tanh(a), [x.astype(np.float32)])
    assert "tanh.approx.f32" in half
    assert "tanh.approx" not in single and "ex2.approx" in single  # libdevice's tanhf


def test_float16_add_mul_are_native_float16_instructions():
    x = np.linspace(-3, 3, 4096).astype(np.float16)
    ptx = _program_ptx(lambda xp, a, b: a * b + a - b, [x, x[::-1].copy()])
    assert "mul.rn.f16" in ptx or "mul.f16" in ptx
    assert "add.rn.f16" in ptx or "add.f16" in ptx or "sub.f16" in ptx or "sub.rn.f16" in ptx
    assert "cvt.f32.f16" not in ptx  # no round trip through float32


def test_looped_and_large_rows_compile():
    # rows longer than the persistent limit: looped reductions, reduce-then-broadcast re-reads
    fn, _ = CANONICAL["softmax"]
    _compile(fn, [np.zeros((4, 40000), np.float32)])
    fn, _ = CANONICAL["layernorm"]
    _compile(fn, [np.zeros((2, 20000), np.float32), np.zeros(20000, np.float32),
                  np.zeros(20000, np.float32)])


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_split_reductions_compile(name):
    """The one launch of every split reduction (partials, the count, the last program's
    combine and epilogue) compiles for sm_90."""
    fn, make = SPLIT[name]
    kernels = _kernels(fn, make(1 << 20))
    split = [emit_kernel(k, None, "cuda") for k in kernels if k.kind == "split_reduction"]
    assert split and all(len(e.launches) == 1 and e.counters >= 1 for e in split)
    _compile(fn, make(1 << 20))


def _batch_norm(xp, x):
    mean, var = x.mean(axis=0), x.var(axis=0)
    return (x - mean) / xp.sqrt(var + np.float32(1e-5))


def test_batch_norm_compiles_as_two_launches():
    """Batch norm's statistics (sum and m2 over axis 0, 8 row blocks of 32) and the
    normalization: two kernels, one launch each."""
    x = np.zeros((262144, 256), np.float32)
    kernels = _kernels(_batch_norm, [x])
    emitted = [emit_kernel(k, None, "cuda") for k in kernels]
    assert [len(e.launches) for e in emitted] == [1, 1] and emitted[0].counters == 8
    _compile(_batch_norm, [x])


def _column_sums(xp, x):
    return x.sum(axis=0)


def test_split_finishing_in_steps_compiles():
    """One row block of 32 columns split 512 ways: its last program combines the partials
    8 rows at a time (a [8, 512] tile per step)."""
    x = np.zeros((1 << 20, 32), np.float32)
    (kernel,) = _kernels(_column_sums, [x])
    emitted = emit_kernel(kernel, None, "cuda")
    assert emitted.counters == 1 and "for sub in range(0, 32, 8):" in emitted.source
    _compile(_column_sums, [x])


def _split_ptx(fn, arrays):
    (kernel,) = [k for k in _kernels(fn, arrays) if k.kind == "split_reduction"]
    return _kernel_ptx(kernel)


@pytest.mark.parametrize("case", ["full_sum", "batch_norm", "column_sums"])
def test_split_kernel_orders_partials_count_and_reads(case):
    """The memory ordering the one-launch split relies on, as compiled: every partial store,
    then a CTA barrier, then one thread's acq_rel count at GPU scope; the last program's
    partial loads come after it and read L2 (``ld.global.cg``, never a stale L1 line)."""
    import re
    if case == "full_sum":
        ptx = _split_ptx(lambda xp, x: x.sum(), [np.zeros(1 << 22, np.float32)])
    elif case == "batch_norm":
        ptx = _split_ptx(_batch_norm, [np.zeros((262144, 256), np.float32)])
    else:  # the last program combines in 4 steps
        ptx = _split_ptx(_column_sums, [np.zeros((1 << 20, 32), np.float32)])
    atoms = [m.start() for m in re.finditer(r"atom\.global\.(gpu\.acq_rel|acq_rel\.gpu)\.add", ptx)]
    assert len(atoms) == 1, ptx
    before = ptx[:atoms[0]]
    last_store = before.rindex("st.global")
    assert "bar.sync" in before[last_store:]
    cg = [m.start() for m in re.finditer(r"ld\.global\.cg", ptx)]
    assert cg and min(cg) > atoms[0]
    # the loads before the count are the input's, after it only the partials' (all .cg)
    assert not re.search(r"ld\.global(?!\.cg)", ptx[atoms[0]:])


def test_tiled_transposes_compile():
    """2-D tiled pointwise kernels (transposed reads) compile for sm_90, masked or not."""
    x, y = np.zeros((8192, 8192), np.float32), np.zeros((8192, 8192), np.float32)
    _compile(lambda xp, a, b: a.T + b, [x, y])
    _compile(lambda xp, a, b: a.T + b, [np.zeros((100, 37), np.float16),
                                        np.zeros((37, 100), np.float16)])
    _compile(lambda xp, a: xp.exp(a.transpose(0, 2, 1)) > 1, [np.zeros((3, 40, 72), np.float32)])
    src = emit_kernel(_kernels(lambda xp, a, b: a.T + b, [x, y])[0], None, "cuda").source
    assert "i_m" in src and "i_n" in src


def test_short_inner_kept_runs_and_unaligned_pointwise_compile():
    """Outer reductions over a short inner kept run (padded runs across the tile: split or
    not, one stage or two, Welford's) and 1-D pointwise blocks of 512 for flat sizes that break
    vector loads compile for sm_90."""
    cases = [
        (lambda xp, a: a.min(axis=1), [np.zeros((374, 13355, 3), np.float64)], "kept_pad % 4"),
        (lambda xp, a: a.max(axis=1), [np.zeros((1024, 8192, 6), np.float16)], "kept_pad % 8"),
        (lambda xp, a: a.var(axis=(0, 1, 2)), [np.zeros((8, 112, 112, 3), np.float32)],
         "kept_pad % 4"),
        (lambda xp, a: xp.exp(a - a.max(axis=1, keepdims=True)),
         [np.zeros((4000, 500, 3), np.float32)], "kept_pad % 4"),
        (lambda xp, a, b: xp.where(a[:, ::2] > 0, a[:, ::2] * b, 0.5),
         [np.zeros((32749, 374), np.float16), np.zeros((187,), np.float16)],
         "tl.arange(0, 512)"),
    ]
    for fn, xs, marker in cases:
        _compile(fn, xs)
        sources = [emit_kernel(k, None, "cuda").source for k in _kernels(fn, xs)]
        assert any(marker in src for src in sources), marker


def test_int64_indexing_compiles():
    """More than 2**31 elements switch the index math to 64 bits (only the source is built)."""
    from fusejit.ir.program import Instr, Kernel, Param, TensorType
    t = TensorType(np.dtype(np.int8), (2**31 + 16,))
    k = Kernel("big", ("y",), ("x",), (Param("x", t),),
               [Instr("y", "add", ("x", "x"), {}, t)], ("y",), (t,), {"kind": "pointwise"})
    emitted = emit_kernel(k, None, "cuda")
    assert "tl.int64" in emitted.source
    compile_all(emitted, 90, True)


def test_corrupt_disk_cache_entry_is_rebuilt_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    x = fj.asarray(np.ones((4, 32), np.float32))
    (kernel,) = fj.plan(fj.exp(x) + 1).program.kernels
    emitted = emit_kernel(kernel, None, "cuda")
    (first,) = compile_all(emitted, 90, True)
    (entry,) = (tmp_path / "cubin").glob("*.entry")
    entry.write_bytes(b"not a cubin")          # e.g. a disk error (writes are atomic)
    with pytest.warns(UserWarning, match="rebuilding corrupt cubin cache entry"):
        (again,) = compile_all(emitted, 90, True)
    assert again.cubin[:4] == b"\x7fELF" and entry.read_bytes().endswith(b"\n" + again.cubin)
    (cached,) = compile_all(emitted, 90, True)   # the rebuilt entry is used as is
    assert cached.cubin == again.cubin and first.name == again.name


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint8])
def test_floor_divide_and_remainder_compile(dtype):
    # float ones go through libdevice fmod on the GPU
    _compile(lambda xp, x, y: (xp.floor_divide(x, y), xp.remainder(x, y)),
             [np.ones(64, dtype), np.ones(64, dtype)])


# -- GEMM kernels ---------------------------------------------------------------------------

def _gelu(xp, y):
    return 0.5 * y * (1 + xp.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


#: name -> (function of (xp, *arrays), [(shape, dtype)]): the bench shapes at their default
#: tiles, every dtype path, prologues, epilogues, row reductions, split-K, views, odd sizes
GEMM_CASES = {
    "f16_relu_bias_8192": (lambda xp, a, b, c: xp.maximum(a @ b + c, 0),
                           [((8192, 8192), "f2"), ((8192, 8192), "f2"), ((8192,), "f2")]),
    "f16_small_m": (lambda xp, a, b: a @ b, [((128, 4096), "f2"), ((4096, 4096), "f2")]),
    "f16_wide": (lambda xp, a, b: a @ b, [((16384, 4096), "f2"), ((4096, 1024), "f2")]),
    "f32_ieee": (lambda xp, a, b: a @ b, [((4096, 4096), "f4"), ((4096, 4096), "f4")]),
    "f32_tf32": (lambda xp, a, b: xp.matmul(a, b, precision="tf32"),
                 [((4096, 4096), "f4"), ((4096, 4096), "f4")]),
    # too few rows for B's transposing pass to pay: B read N-major, as (B^T A^T)^T
    "f32_tf32_small_m": (lambda xp, a, b: xp.matmul(a, b, precision="tf32"),
                         [((1024, 4096), "f4"), ((4096, 4096), "f4")]),
    "f32_tf32x3": (lambda xp, a, b: xp.matmul(a, b, precision="tf32x3"),
                   [((1024, 512), "f4"), ((512, 768), "f4")]),
    "f64": (lambda xp, a, b: a @ b, [((300, 200), "f8"), ((200, 100), "f8")]),
    "i8": (lambda xp, a, b: a @ b, [((512, 512), "i1"), ((512, 512), "i1")]),
    "i32_fma": (lambda xp, a, b: a @ b, [((100, 70), "i4"), ((70, 90), "i4")]),
    "u8_fma": (lambda xp, a, b: a @ b, [((64, 64), "u1"), ((64, 64), "u1")]),
    "i64_fma": (lambda xp, a, b: a @ b, [((64, 64), "i8"), ((64, 64), "i8")]),
    "bool": (lambda xp, a, b: a @ b, [((64, 64), "?"), ((64, 64), "?")]),
    "prologue_scale_cast": (lambda xp, x, s, w: (x * s).astype(np.float16) @ w,
                            [((4096, 4096), "f4"), ((4096,), "f4"), ((4096, 4096), "f2")]),
    "mlp": (lambda xp, x, w1, b1, w2, b2: _gelu(xp, x @ w1 + b1) @ w2 + b2,
            [((2048, 1024), "f2"), ((1024, 4096), "f2"), ((4096,), "f2"), ((4096, 1024), "f2"),
             ((1024,), "f2")]),
    "softmax_rows": (lambda xp, a, b: xp.softmax(a @ b, -1),
                     [((4096, 512), "f2"), ((512, 200), "f2")]),
    "row_sum_max": (lambda xp, a, b: ((a @ b).sum(-1), (a @ b).max(-1)),
                    [((1000, 256), "f4"), ((256, 100), "f4")]),
    "split_k": (lambda xp, a, b: a @ b * 2 + 1, [((64, 8192), "f2"), ((8192, 256), "f2")]),
    "gram_long_k": (lambda xp, a: a @ a.T, [((16, 1 << 20), "f2")]),  # one tile: 132 chunks
    "int_split_k": (lambda xp, a, b: a @ b, [((8, 4096), "i4"), ((4096, 64), "i4")]),
    "batched_broadcast": (lambda xp, a, b: a @ b, [((4, 1, 257, 96), "f2"), ((3, 96, 130), "f2")]),
    "weight_broadcast_folded": (lambda xp, x, w: xp.maximum(x @ w, 0),
                                [((8, 257, 512), "f2"), ((512, 520), "f2")]),
    "transposed_views": (lambda xp, a, b: a.T @ b[:, ::2], [((512, 1000), "f2"),
                                                           ((512, 1000), "f2")]),
    "odd_sizes": (lambda xp, a, b: a @ b + 1, [((1, 37), "f4"), ((37, 5), "f4")]),
    "vector_reshape": (lambda xp, a, b: (a @ b).reshape(-1), [((1, 300), "f2"), ((300, 77), "f2")]),
}


def _gemm_kernels(name):
    fn, specs = GEMM_CASES[name]
    arrays = [np.zeros(s, d) for s, d in specs]
    kernels = _kernels(fn, arrays)
    assert any(k.kind == "gemm" for k in kernels)
    return fn, arrays, kernels


@pytest.mark.parametrize("name", sorted(GEMM_CASES))
def test_gemm_kernels_compile(name):
    fn, arrays, _ = _gemm_kernels(name)
    _compile(fn, arrays)


def test_gemm_small_tiles_compile():
    """The interpret tests' tiles (16/32) and split-K compile for sm_90 too."""
    import re
    fn = lambda xp, x, s, w, c: xp.maximum((x * s).astype(np.float16) @ w + c, 0)  # noqa: E731
    arrays = [np.zeros((64, 40), np.float32), np.zeros(40, np.float32),
              np.zeros((40, 48), np.float16), np.zeros(48, np.float16)]
    text = fj.dump(fn(fj, *[fj.asarray(a) for a in arrays]), fused=True)
    for tiles in ("block_m=16 block_n=32 block_k=16", "block_m=32 block_n=16 block_k=32"):
        for split in (1, 2):
            edited = re.sub(r"block_k=\d+ block_m=\d+ block_n=\d+", "", text)
            edited = edited.replace("kind=gemm", f"kind=gemm {tiles}")
            edited = re.sub(r"split_k=\d+", f"split_k={split}", edited)
            (kernel,) = fj.parse(edited).kernels
            for c in compile_all(emit_kernel(kernel, None, "cuda"), 90, True):
                assert c.cubin[:4] == b"\x7fELF"


def _ptx(name):
    """The PTX of the first launch of a GEMM case (compiled here with all pointers aligned)."""
    _, _, kernels = _gemm_kernels(name)
    return _emitted_ptx(emit_kernel(next(k for k in kernels if k.kind == "gemm"), None, "cuda"))


@pytest.mark.parametrize("name", ["f16_relu_bias_8192", "f32_tf32", "f32_tf32_small_m",
                                  "prologue_scale_cast", "transposed_views"])
def test_hopper_gemms_use_wgmma_and_async_copies(name):
    """float16 and TF32 products run on Hopper's warpgroup MMA, fed by 16-byte async copies,
    or (a float16 GEMM of many tiles, or a TF32 one reading both operands K-major: persistent
    by default) by TMA's bulk tensor copies."""
    ptx = _ptx(name)
    assert "wgmma.mma_async" in ptx
    if name in ("f16_relu_bias_8192", "f32_tf32"):
        assert "cp.async.bulk.tensor" in ptx and "cp.async.cg.shared.global" not in ptx
    else:
        assert "cp.async.cg.shared.global" in ptx and ", 0x10," in ptx


def test_ieee_float32_gemm_uses_fma_not_tensor_cores():
    ptx = _ptx("f32_ieee")
    assert "wgmma" not in ptx and "mma.sync" not in ptx and "fma.rn.f32" in ptx


@pytest.mark.parametrize("name", ["f16_relu_bias_8192", "f32_tf32", "prologue_scale_cast",
                                  "split_k", "transposed_views"])
def test_tma_gemms_compile(name):
    """With ``tma=1`` operand tiles load through TMA (cp.async.bulk.tensor) and the cubin asks
    for global scratch (its descriptors)."""
    fn, specs = GEMM_CASES[name]
    arrays = [np.zeros(s, d) for s, d in specs]
    text = fj.dump(fn(fj, *[fj.asarray(a) for a in arrays]), fused=True)
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm tma=1"))
    for kernel in prog.kernels:
        if kernel.kind != "gemm":
            continue
        emitted = emit_kernel(kernel, None, "cuda")
        compiled = compile_all(emitted, 90, True)
        assert compiled[0].scratch > 0 and emitted.aligned


def test_cache_entries_without_scratch_fields_still_load():
    """Entries written before the global-scratch fields existed read them as 0 and 1."""
    import json

    from fusejit.runtime.compile import Compiled, decode_entry, encode_entry
    entry = encode_entry(Compiled("k", b"\x7fELF....", 0, 4, 5, 3, 256, 128))
    assert decode_entry(entry).scratch == 256 and decode_entry(entry).scratch_align == 128
    head, _, cubin = entry.partition(b"\n")
    old = {k: v for k, v in json.loads(head).items() if not k.startswith("scratch")}
    again = decode_entry(json.dumps(old).encode() + b"\n" + cubin)
    assert (again.scratch, again.scratch_align) == (0, 1)
    # (the stack a thread uses: a count, or null where it was not read)
    for stack in (0, 48, None):
        assert decode_entry(encode_entry(Compiled("k", b"\x7fELF....", 0, 4, 5, 3,
                                                  stack=stack))).stack == stack
    bad = {**json.loads(head), "stack": "48"}
    with pytest.raises(ValueError, match="bad header field types"):
        decode_entry(json.dumps(bad).encode() + b"\n" + cubin)


def test_tf32_gemm_of_a_row_major_b_copies_whole_16_bytes():
    """Hopper's TF32 wgmma reads B K-major: a row-major B (N contiguous) was copied to shared
    memory 4 bytes at a time (cp.async.ca ..., 4: 81 TFLOP/s at 4096^3 on the H200). Where no
    transposing pass runs first (too few rows for it to pay), the product is computed as
    (B^T A^T)^T, and every copy moves 16 bytes."""
    _, _, kernels = _gemm_kernels("f32_tf32_small_m")
    assert [k.kind for k in kernels] == ["gemm"]
    assert "B^T A^T" in emit_kernel(kernels[0], None, "cuda").source
    ptx = _ptx("f32_tf32_small_m")
    assert "wgmma.mma_async" in ptx and ".tf32" in ptx
    assert "cp.async.ca" not in ptx, "4-byte async copies: B is copied element by element"


def test_tf32_gemm_of_a_large_row_major_b_reads_the_transposed_copy_through_tma():
    """At 4096^3 B is transposed to K-major by a pointwise kernel first (``fuse/rules.py``,
    ``rule_tf32_k_major_b``): both kernels compile for sm_90; the GEMM reads both operands
    K-major through TMA (persistent, one program per SM: ``GEMM_TF32_TMA_MIN_TILES``),
    without the (B^T A^T)^T form, on TF32 wgmma, and copies nothing 4 bytes at a time."""
    fn, arrays, kernels = _gemm_kernels("f32_tf32")
    assert [k.kind for k in kernels] == ["pointwise", "gemm"]
    _compile(fn, arrays)
    emitted = emit_kernel(kernels[1], None, "cuda")
    assert "B^T A^T" not in emitted.source and emitted.auto_persistent
    assert emitted.source.count("(TMA)") == 2 and "flatten=True" in emitted.source
    ptx = _emitted_ptx(emitted)
    assert "wgmma.mma_async" in ptx and ".tf32" in ptx and "cp.async.bulk.tensor" in ptx
    assert "cp.async.ca" not in ptx


def test_split_final_masks_rows_past_the_end_of_the_last_row_block():
    """48 columns summed over 65536 rows: row blocks of 32, combined 16 rows at a time on
    cuda (the final tile's limit), so the last block's second slice is rows 48-63. The final
    function masked rows only when 16 did not divide 48: it read partials and wrote outputs
    past their ends (found by review; the interpreter combines whole blocks and cannot see it)."""
    x = np.zeros((65536, 48), np.float32)
    (kernel,) = _kernels(_column_sums, [x])
    source = emit_kernel(kernel, None, "cuda").source
    final = source[source.index("_final("):]
    assert "for sub in range(0, 32, 16):" in source
    assert "row_mask = rows < 48" in final
    assert final.count("mask=row_mask") == 2  # the partials read and the output written
    _compile(_column_sums, [x])


_EPILOGUES = {
    "bare": lambda fj, y, bias: y,
    "bias": lambda fj, y, bias: y + bias,
    "relu_bias": lambda fj, y, bias: fj.maximum(y + bias, 0),
    "tanh": lambda fj, y, bias: fj.tanh(y),
    "bias_tanh": lambda fj, y, bias: fj.tanh(y + bias),
    "bias_gelu": lambda fj, y, bias: _gelu(fj, y + bias),
    "bias_gelu_f32": lambda fj, y, bias: _gelu(fj, y.astype(np.float32) + bias),
    "bias_exp_times": lambda fj, y, bias: (y + bias) * fj.exp(y),
}


#: epilogues that CUDA 13's ptxas (newer Triton) serializes all the same (see below)
_CUDA13_SERIALIZES = {"bias"}


@pytest.mark.parametrize("name", sorted(_EPILOGUES))
def test_gemm_epilogues_keep_the_wgmma_pipeline(name, monkeypatch, fresh_plans):
    """The MLP's first layer (float16 8192x2048 @ 2048x8192) with each epilogue, emitted as the
    ``cuda`` backend does (again with ``relay=1`` when ptxas serializes a ``relayable`` one):
    ptxas pipelines the main loop's wgmma instructions (no warning C7514). GELU after a bias
    was serialized and ran at 459 TFLOP/s against 599 bare on the H200; relayed, 519 (its
    epilogue reads the product back from its output: ``gemm.py``, ``_relay_output``). Both
    spellings of GELU (here and in ``bench/``) and an exp times the product are relayed, under
    Triton 3.6's ptxas (the GPU image's: ``bench/triton36_check.sh``) and CUDA 13's (newer
    Triton, CI). CUDA 13's also serializes a plain bias, which 3.6's does not and which is not
    relayable by default: relaying every epilogue (``GEMM_RELAY_PRODUCT = "always"``) avoids
    it, and is what is checked for it there."""
    from dataclasses import replace

    import triton

    from fusejit.codegen import heuristics
    from fusejit.runtime.compile import ptxas_serializes_mma
    if not triton.__version__.startswith("3.6") and name in _CUDA13_SERIALIZES:
        monkeypatch.setattr(heuristics, "GEMM_RELAY_PRODUCT", "always")
    (kernel,) = _mlp_layer_kernels(name)
    emitted = emit_kernel(kernel, None, "cuda")
    ptx = _emitted_ptx(emitted, enable_fp_fusion=False)  # (as fusejit compiles)
    if emitted.relayable and ptxas_serializes_mma(ptx, 90):
        emitted = emit_kernel(replace(kernel, attrs={**kernel.attrs, "relay": 1}), None, "cuda")
        assert not emitted.relayable and "relayed through L2" in emitted.source
        ptx = _emitted_ptx(emitted, enable_fp_fusion=False)
    assert "wgmma.mma_async" in ptx
    assert not ptxas_serializes_mma(ptx, 90)


def _mlp_layer_kernels(name):
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((8192, 2048), np.float16))
        b = fj.asarray(np.zeros((2048, 8192), np.float16))
        bias = fj.asarray(np.zeros(8192, np.float16))
        return fj.plan(_EPILOGUES[name](fj, a @ b, bias)).program.kernels


def test_gelu_epilogue_without_the_relay_serializes(monkeypatch, fresh_plans):
    """What the relay is for, and that ``ptxas_serializes_mma`` sees it: with one program per
    tile (``GEMM_PERSISTENT`` off), GELU after a bias, not relayed, makes ptxas serialize the
    wgmma instructions (Triton 3.6's and CUDA 13's); tanh after a bias does not under 3.6's
    (so there it is not relayed: that cost 9% on the H200) and does under CUDA 13's (so there
    it is). The default persistent kernel with TMA loads keeps GELU pipelined under both,
    without the relay; under CUDA 13's it serializes tanh (relayed then, as above)."""
    import triton

    from fusejit.codegen import heuristics
    from fusejit.runtime.compile import ptxas_serializes_mma
    cuda13 = not triton.__version__.startswith("3.6")
    for persistent in ("0", "1"):
        monkeypatch.setattr(heuristics, "GEMM_PERSISTENT", persistent)
        for name, serialized in (("bias_gelu", persistent == "0"), ("bias_tanh", cuda13)):
            (kernel,) = _mlp_layer_kernels(name)
            emitted = emit_kernel(kernel, None, "cuda")
            assert emitted.relayable and "relayed through L2" not in emitted.source
            assert emitted.auto_persistent == (persistent == "1")
            ptx = _emitted_ptx(emitted, enable_fp_fusion=False)
            assert ptxas_serializes_mma(ptx, 90) == serialized, (name, persistent)


def test_a_ptxas_that_cannot_run_leaves_the_kernel_as_emitted(monkeypatch):
    """The serialization check is an optimization: when ptxas cannot be run it warns and
    says "not serialized" (the kernel is used as emitted), it does not fail the compile."""
    import subprocess

    from fusejit.runtime import compile as compile_module

    def broken(*args, **kwargs):
        raise FileNotFoundError("ptxas")
    monkeypatch.setattr(subprocess, "run", broken)
    with pytest.warns(UserWarning, match="could not ask ptxas"):
        assert compile_module.ptxas_serializes_mma(".version 8.0\n", 90) is False


@pytest.mark.parametrize("name,edit", [("f16_relu_bias_8192", ""), ("f16_wide", ""),
                                       ("f16_relu_bias_8192", " tma=1"),
                                       ("mlp", " relay=1"), ("batched_broadcast", " programs=40"),
                                       ("row_sum_max", " programs=3")])
def test_persistent_gemms_compile_and_keep_the_wgmma_pipeline(name, edit):
    """``programs=132`` (one program per SM, looping over the tiles; fewer for a small
    product): the flattened tile and K loops compile for sm_90; float16 products keep their
    pipelined wgmma (no C7514)."""
    from fusejit.runtime.compile import ptxas_serializes_mma
    fn, specs = GEMM_CASES[name]
    arrays = [np.zeros(s, d) for s, d in specs]
    text = fj.dump(*(lambda out: out if isinstance(out, tuple) else (out,))(
        fn(fj, *[fj.asarray(a) for a in arrays])), fused=True)
    edit = edit if "programs" in edit else " programs=132" + edit
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm" + edit))
    kernels = [k for k in prog.kernels if k.kind == "gemm"]
    for kernel in kernels[:1]:
        emitted = emit_kernel(kernel, None, "cuda")
        assert "flatten=True" in emitted.source
        for c in compile_all(emitted, 90, True):
            assert c.cubin[:4] == b"\x7fELF"
        if name.startswith("f16") or name == "mlp":
            ptx = _emitted_ptx(emitted, enable_fp_fusion=False)
            assert "wgmma.mma_async" in ptx
            if "tma" not in edit:
                assert not ptxas_serializes_mma(ptx, 90), name


@pytest.mark.parametrize("extent", [96, 200])
def test_outer_extents_in_one_tile_compile(extent):
    """A short reduced extent under many kept points, held in one tile (``heuristics``'
    ``OUTER_SHORT_EXTENT``): a sum, a float64 min, a variance and a softmax over axis 0."""
    for fn, dtype in ((lambda xp, x: x.sum(axis=0), np.float32),
                      (lambda xp, x: x.min(axis=0), np.float64),
                      (lambda xp, x: x.var(axis=0), np.float32),
                      (lambda xp, x: xp.softmax(x, axis=0), np.float32)):
        kernels = _kernels(fn, [np.zeros((extent, 17000), dtype)])
        assert any("in one tile" in line for k in kernels
                   for line in emit_kernel(k, None, "cuda").source.splitlines()[:6])
        _compile(fn, [np.zeros((extent, 17000), dtype)])


def test_logsumexp_of_few_wide_rows_compiles_as_one_split_launch():
    """logsumexp's max and shifted sum are one online reduction (``sumexp``): over 6 rows of
    70000 it splits across programs (was one looped program per row)."""
    fn = lambda xp, x: xp.logsumexp(x, axis=1)  # noqa: E731
    kernels = _kernels(fn, [np.zeros((6, 70000), np.float32)])
    assert [k.kind for k in kernels] == ["split_reduction"]
    _compile(fn, [np.zeros((6, 70000), np.float32)])


def test_stream_k_gemms_compile(monkeypatch):
    """A float16 GEMM of 1.6 waves of tiles (430x13368x5000 with ``b.T`` and a residual: the
    unseen draw's 0.67x case) is stream-K in mode "1" of ``GEMM_STREAM_K`` and compiles for
    sm_90 with TMA loads, wgmma (not serialized by ptxas) and the tiles' atomic counts; the
    interpreter tests' small tiles with pointer loads and a row reduction compile too."""
    from fusejit.codegen import heuristics
    from fusejit.runtime.compile import ptxas_serializes_mma
    monkeypatch.setattr(heuristics, "GEMM_STREAM_K", "1")
    fn = lambda xp, a, b, c: a @ b.T + c  # noqa: E731
    arrays = [np.zeros((430, 5000), np.float16), np.zeros((13368, 5000), np.float16),
              np.zeros((430, 13368), np.float16)]
    (kernel,) = [k for k in _kernels(fn, arrays) if k.kind == "gemm"]
    emitted = emit_kernel(kernel, None, "cuda")
    assert "stream-K" in emitted.source and emitted.counters == 212
    ptx = _emitted_ptx(emitted)
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx and "atom.global" in ptx
    assert not ptxas_serializes_mma(ptx, 90)
    import re
    small = lambda xp, a, b, c: (a @ b + c).sum(-1)  # noqa: E731
    text = fj.dump(small(fj, *[fj.asarray(np.zeros(s, np.float32))
                               for s in ((70, 100), (100, 16), (16,))]), fused=True)
    for name, value in (("block_m", 16), ("block_n", 16), ("block_k", 16), ("split_k", 1)):
        text = re.sub(rf"\b{name}=\d+", f"{name}={value}", text)
    (kernel,) = fj.parse(text.replace("kind=gemm", "kind=gemm programs=3 stream_k=1")).kernels
    for c in compile_all(emit_kernel(kernel, None, "cuda"), 90, True):
        assert c.cubin[:4] == b"\x7fELF"


def test_batched_gemms_load_through_tma_by_default():
    """A batched float16 product (16 x 3911x13805x384 with ``b.T``: 203 waves of tiles) loads
    both operands as 3-D TMA boxes and is persistent by default; it compiles for sm_90 to bulk
    tensor copies and wgmma."""
    fn = lambda xp, a, bt: a @ bt.swapaxes(-1, -2)  # noqa: E731
    arrays = [np.zeros((16, 3911, 384), np.float16), np.zeros((16, 13805, 384), np.float16)]
    (kernel,) = _kernels(fn, arrays)
    emitted = emit_kernel(kernel, None, "cuda")
    assert emitted.auto_persistent and emitted.source.count("(TMA)") == 2
    assert "block_shape=[1, 128, 64]" in emitted.source
    ptx = _emitted_ptx(emitted)
    assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor.3d" in ptx


def _ptxas_spills(ptx: str) -> int:
    """Bytes a thread spills (ptxas -v) in ``ptx`` compiled for sm_90a."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        run = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", str(src), "-o",
                              str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True,
                             timeout=300)
    found = re.findall(r"(\d+) bytes spill stores", run.stdout + run.stderr)
    assert found, run.stdout + run.stderr
    return sum(int(v) for v in found)


@pytest.mark.parametrize("m, n, k", [(257, 3467, 585), (1000, 1001, 999), (300, 2000, 777),
                                     (2047, 513, 8191)])
@pytest.mark.parametrize("residual", [False, True])
def test_float32_products_of_misaligned_rows_do_not_spill(m, n, k, residual):
    """Full-precision float32 GEMMs whose rows are not 16-byte aligned load their tiles 4 bytes
    at a time; the default tiles keep their values in registers (128x128 tiles with 4 warps
    spilled 1-1.6 KB a thread: 257x3467x585 with a residual ran at 0.27x of cuBLAS). CUDA
    13's ptxas spills nothing; Triton 3.6's spills 4 bytes at 257x3467x585 (a register, not
    the accumulators): at most 16 bytes are let pass. 2047x513x8191 splits K by the SMs'
    rounds of tiles (``heuristics._fma_round_split``): its partials kernel keeps them too."""
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), np.float32))
        b = fj.asarray(np.zeros((k, n), np.float32))
        y = a @ b
        if residual:
            y = y * 0.5 + fj.asarray(np.zeros((m, n), np.float32))
        (kernel,) = fj.plan(y).program.kernels
    assert kernel.attrs["split_k"] > 1 or k == 585  # (2047x513x8191: by rounds)
    emitted = emit_kernel(kernel, None, "cuda")
    assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) <= 16


@pytest.mark.parametrize("strides", ["contiguous", "aligned copies"])
def test_a_bias_of_an_edge_tile_loads_one_row(strides):
    """``relu(a @ b + bias)`` of float16 4943x15497x2215: the tiles at the edges are masked,
    and the bias (along N alone) loads one row under the columns' mask, not the tile's: under
    the tile's mask every thread loaded the bias at each of its 128 points, and the kernel
    reading its operands through pointers spilled 144 bytes a thread. Through pointers (rows
    as they are) and TMA (the alignment copies' rows, 2216 and 15504 apart) it keeps its
    values in registers."""
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((4943, 2215), np.float16))
        b = fj.asarray(np.zeros((2215, 15497), np.float16))
        y = fj.maximum(a @ b + fj.asarray(np.zeros(15497, np.float16)), 0)
        (kernel,) = [k for k in fj.plan(y).program.kernels if k.kind == "gemm"]
    pitches = None if strides == "contiguous" else ((2216, 1), (15504, 1), (1,), ())
    emitted = emit_kernel(kernel, pitches, "cuda")
    assert ("(TMA)" in emitted.source) == (strides == "aligned copies")
    assert "tl.load(p_in2 + cols, mask=mask_n, other=0)" in emitted.source
    assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) == 0


def _short_k_residual_kernel():
    """float16 16 x 3911x13805x384 with ``b.T`` and a residual (a draw of the GEMM benchmark's,
    20261209's u0, 0.69x of torch.compile on the H100): a persistent kernel of 128 x 256 tiles
    with TMA loads, whose epilogue loads and stores one element at a time (rows of 13805)."""
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((16, 3911, 384), np.float16))
        bt = fj.asarray(np.zeros((16, 13805, 384), np.float16))
        r = fj.asarray(np.zeros((16, 3911, 13805), np.float16))
        (kernel,) = fj.plan(a @ bt.swapaxes(-1, -2) * 0.5 + r).program.kernels
    return kernel


def test_an_epilogue_in_slices_keeps_its_values_in_registers():
    """The short-K product above spills 368 bytes a thread (ptxas -v, sm_90a) with its
    epilogue on the whole tile; on 4 slices of 64 columns (``epilogue_split=4``) it spills
    none, and its main loop keeps its wgmma."""
    from dataclasses import replace

    from fusejit.runtime.compile import (
        cubin_stack_bytes,
        decode_entry,
        encode_entry,
        stack_bytes,
    )
    kernel = _short_k_residual_kernel()
    whole = emit_kernel(kernel, None, "cuda")
    assert whole.epilogue_splittable and whole.auto_persistent and "(TMA)" in whole.source
    assert _ptxas_spills(_emitted_ptx(whole, enable_fp_fusion=False)) > 100
    sliced = emit_kernel(replace(kernel, attrs={**kernel.attrs, "epilogue_split": 4}), None,
                         "cuda")
    assert sliced.epilogue_slices == 4 and not sliced.epilogue_splittable
    assert sliced.source.count("tl.split(") == 3 and "slice 4 of 4" in sliced.source
    ptx = _emitted_ptx(sliced, enable_fp_fusion=False)
    assert _ptxas_spills(ptx) == 0 and "wgmma.mma_async" in ptx
    (compiled,) = compile_all(whole, 90, True)
    assert compiled.stack == cubin_stack_bytes(compiled.cubin) > 0
    # (a disk cache entry written before the field has none: it is read from the cubin)
    entry = decode_entry(encode_entry(replace(compiled, stack=None)))
    assert entry.stack is None and stack_bytes(entry) == compiled.stack


@pytest.mark.parametrize("dtype, precision", [("float32", None), ("float64", None),
                                              ("float32", "tf32"), ("int8", None),
                                              ("float16", None)])
def test_epilogue_slices_compile_for_every_product_kind(dtype, precision):
    """A residual after a product of 1000x300 @ 300x1001 (tiles crossing the edges) with its
    epilogue in 2 and 4 slices compiles for sm_90 on each kind of main loop (the FMA units'
    blocked accumulator, TF32 and float16 wgmma, int8 tensor cores)."""
    from dataclasses import replace
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((1000, 300), dtype))
        b = fj.asarray(np.zeros((300, 1001), dtype))
        y = fj.matmul(a, b, precision=precision) if precision else a @ b
        y = y + fj.asarray(np.zeros((1000, 1001), y.dtype))
        (kernel,) = [k for k in fj.plan(y).program.kernels if k.kind == "gemm"]
    for split in (2, 4):
        attrs = {**kernel.attrs, "epilogue_split": split, "split_k": 1}
        emitted = emit_kernel(replace(kernel, attrs=attrs), None, "cuda")
        assert emitted.epilogue_slices == split
        assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) <= 16


def test_the_cuda_backend_slices_the_epilogue_of_a_gemm_that_spills(monkeypatch):
    """On the cuda backend's host code (``FakeCupy``: compiled for sm_90, nothing run), the
    short-K product's kernel spills (``Compiled.stack``), so the backend emits it again in
    ``GEMM_EPILOGUE_SPLIT_SPILLED`` slices and launches that one; a GEMM that does not spill
    (a bare 4096^3 float16 product) keeps its epilogue whole."""
    import sys

    from fusejit import runtime
    from fusejit.runtime import kernel_cache as kc

    from .fake_cupy import FakeCupy
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    emitted_for = kc.emitted_for
    seen = []

    def spy(kernel, *args, **kwargs):
        seen.append(kernel.attrs.get("epilogue_split", 1))
        return emitted_for(kernel, *args, **kwargs)
    monkeypatch.setattr(kc, "emitted_for", spy)
    from fusejit.runtime import cuda_backend
    kernel_info = cuda_backend.CudaBackend.kernel_info
    launched = []  # (the slices of each emission the backend launches)

    def keep(self, kernel, emitted, *args):
        launched.append(emitted.epilogue_slices)
        return kernel_info(self, kernel, emitted, *args)
    monkeypatch.setattr(cuda_backend.CudaBackend, "kernel_info", keep)
    fj.set_backend("cuda")
    try:
        a = fj.asarray(cp.asarray(np.zeros((16, 3911, 384), np.float16)))
        bt = fj.asarray(cp.asarray(np.zeros((16, 13805, 384), np.float16)))
        r = fj.asarray(cp.asarray(np.zeros((16, 3911, 13805), np.float16)))
        fj.realize(a @ bt.swapaxes(-1, -2) * 0.5 + r)
        assert seen == [1, 4], seen
        assert launched == [4], launched
        names = [name for _, name, _ in cp.launches]
        assert len(names) == 1
        seen.clear()
        launched.clear()
        x = fj.asarray(cp.asarray(np.zeros((4096, 4096), np.float16)))
        fj.realize(x @ x)
        assert seen == [1] and launched == [1], (seen, launched)
    finally:
        fj.set_backend("numpy")


@pytest.mark.parametrize("m, n, k, dtype", [(2047, 513, 8191, "float32"),
                                            (1279, 1281, 4095, "float32"),
                                            (1001, 3001, 701, "float16"),
                                            (2047, 513, 4095, "float64")])
def test_products_of_clamped_edge_tiles_compile_without_spills(monkeypatch, m, n, k, dtype):
    """With ``FUSEJIT_GEMM_CLAMP_EDGES=1`` (``gemm.CLAMP_EDGE_LOADS``, off by default and not
    yet timed on a GPU), the edge tiles of products on the FMA units load through clamped row
    and column indices: the kernels compile for sm_90a, masked along K only, and keep their
    values in registers. float16 tiles stay masked (clamped, 128x256 tiles spilled 552 bytes a
    thread under Triton 3.6's ptxas)."""
    from fusejit.codegen import gemm
    monkeypatch.setattr(gemm, "CLAMP_EDGE_LOADS", True)
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "0")  # (the operands as read)
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), dtype))
        b = fj.asarray(np.zeros((k, n), dtype))
        (kernel,) = fj.plan(a @ b).program.kernels
    emitted = emit_kernel(kernel, None, "cuda")
    clamped = "rows_a = tl.minimum" in emitted.source and "cols_b = tl.minimum" in emitted.source
    assert clamped == (dtype != "float16")
    assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) <= 16


@pytest.mark.parametrize("m, n, k, pitch, dtype", [(2048, 576, 8191, 8192, "float32"),
                                                   (2047, 513, 8191, 8191, "float32"),
                                                   (2048, 576, 4095, 4096, "float64"),
                                                   (16, 16, (1 << 20) + 3, (1 << 20) + 8,
                                                    "float16")])
def test_peeled_split_k_loads_aligned_rows_whole(monkeypatch, m, n, k, pitch, dtype):
    """With ``FUSEJIT_GEMM_PEEL_SPLIT=1`` (``gemm.PEEL_SPLIT_K``, off by default and not yet
    timed on a GPU), a split-K product whose K the chunks do not fill loads A's rows, 16-byte
    aligned (``pitch`` elements apart: the alignment copies' rows), 16 bytes at a time, where
    the mask along K at every step made each ``cp.async`` move one element; the kernel
    compiles for sm_90a and keeps its values in registers."""
    import collections
    import re

    from fusejit.codegen import gemm
    monkeypatch.setenv("FUSEJIT_GEMM_ALIGN", "0")
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), dtype))
        b = fj.asarray(np.zeros((k, n), dtype))
        (kernel,) = fj.plan(a @ b).program.kernels
    assert kernel.attrs["split_k"] > 1
    strides = [(pitch, 1), (n, 1)]

    def copies(source_ptx):
        found = re.findall(r"cp\.async\.c[ag]\.shared\.global[^,]*, \[[^\]]*\], (0x[0-9a-f]+|\d+)",
                           source_ptx)
        return collections.Counter(int(size, 0) for size in found)

    # (the masked loop whatever FUSEJIT_GEMM_PEEL_SPLIT says, so the comparison holds with it)
    monkeypatch.setattr(gemm, "PEEL_SPLIT_K", False)
    masked = copies(_emitted_ptx(emit_kernel(kernel, strides, "cuda"), enable_fp_fusion=False))
    monkeypatch.setattr(gemm, "PEEL_SPLIT_K", True)
    emitted = emit_kernel(kernel, strides, "cuda")
    assert "no mask along K" in emitted.source
    ptx = _emitted_ptx(emitted, enable_fp_fusion=False)
    peeled = copies(ptx)
    if pitch % (16 // np.dtype(dtype).itemsize) == 0:
        # (the unmasked loops load A's tiles 16 bytes at a time; only the partial step's
        # loads, not pipelined, are plain loads)
        if dtype != "float16":  # (float16's masked steps there were 16-byte copies too)
            assert masked[16] < sum(masked.values()), masked
        assert set(peeled) == {16}, peeled
    assert _ptxas_spills(ptx) <= 16


@pytest.mark.parametrize("m, n, k", [(16, 16, 1 << 20), (1, 16, 1 << 22), (64, 64, 1 << 18)])
def test_float16_split_k_products_with_deep_k_steps_do_not_spill(m, n, k):
    """A float16 product of a few tiles splits K into one program per SM with 256-deep steps
    in 5 stages (16x16 tiles) or on 8 warps (64x64): its partials kernel compiles for sm_90a
    and keeps its values in registers."""
    from fusejit.codegen import heuristics
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), np.float16))
        b = fj.asarray(np.zeros((k, n), np.float16))
        (kernel,) = fj.plan(a @ b).program.kernels
    bk = kernel.attrs["block_k"]
    assert kernel.attrs["split_k"] == heuristics._whole_chunks(k // bk, heuristics.SMS) == 128
    assert bk > 64 or kernel.attrs["num_warps"] == 8
    emitted = emit_kernel(kernel, None, "cuda")
    assert _ptxas_spills(_emitted_ptx(emitted)) <= 16


@pytest.mark.parametrize("m, n, k, b_k_major", [(64, 64, 1 << 18, True),
                                                (128, 128, 1 << 16, False),
                                                (32, 2048, 8192, False)])
def test_float32_products_of_few_tiles_on_two_warps_do_not_spill(m, n, k, b_k_major):
    """A full-precision float32 product of a few 64x64 or 32x64 tiles runs four 2-warp
    programs an SM (64 accumulators a thread): its partials kernel keeps them in registers,
    B read row-major or K-major (one tile of a K-major B: a row-major one runs one 4-warp
    program an SM, ``heuristics.fma_single_tile_row_major``)."""
    from fusejit.codegen import heuristics
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), np.float32))
        b = fj.asarray(np.zeros((k, n), np.float32))
        kernel = fj.plan(a @ b).program.kernels[-1]
    assert kernel.attrs["num_warps"] == 2
    assert kernel.attrs["split_k"] * (m // kernel.attrs["block_m"]) * (
        n // kernel.attrs["block_n"]) > 2 * heuristics.SMS
    emitted = emit_kernel(kernel, [(k, 1), (1, k) if b_k_major else (n, 1)], "cuda")
    assert emitted.launches[0].num_warps == 2
    assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) <= 16


@pytest.mark.parametrize("m, n, k, spills", [(4096, 4096, 4096, 16), (2047, 513, 8191, 128)])
def test_float32_products_of_a_k_major_b_on_two_warps_do_not_spill(m, n, k, spills):
    """A full-precision float32 GEMM whose B loads K-major runs its 64x64 tiles on 2 warps
    (64 accumulators a thread): with 16-byte aligned rows it keeps them in registers; rows of
    8191 elements (4-byte loads) spill 100 bytes a thread (CUDA 13's ptxas), and still ran
    1.66x faster than on 4 warps (H100, 2047x513x8191: 1600 against 2649 us,
    bench/results/h100-s25/call4): at most 128 bytes are let pass there."""
    with fj.using_backend("interpret"):
        a = fj.asarray(np.zeros((m, k), np.float32))
        b = fj.asarray(np.zeros((k, n), np.float32))
        kernel = fj.plan(a @ b).program.kernels[-1]
    emitted = emit_kernel(kernel, [(k, 1), (1, k)], "cuda")
    assert emitted.launches[0].num_warps == 2
    assert _ptxas_spills(_emitted_ptx(emitted, enable_fp_fusion=False)) <= spills


@pytest.mark.parametrize("name", ["bool_divided", "float16_operand", "int8_operand"])
def test_float64_products_of_narrow_operands_compile(name):
    """Float64 products of operands converted from 1- or 2-byte elements compile for sm_90 (the
    conversion is its own kernel: Triton 3.6 could not lower it inside the float64 dot; run
    under 3.6 by ``bench/triton36_check.sh``)."""
    b = np.zeros((1, 65), bool)
    fns = {
        "bool_divided": (lambda xp, x: xp.matmul(x / True, xp.swapaxes(x, -1, -2)), [b]),
        "float16_operand": (lambda xp, x, y: x @ y, [np.zeros((40, 50), np.float16),
                                                     np.zeros((50, 30))]),
        "int8_operand": (lambda xp, x, y: x @ y, [np.zeros((40, 11)), np.zeros((11, 5), np.int8)]),
    }
    fn, arrays = fns[name]
    for kernel in _kernels(fn, arrays):
        assert "ld.global" in _kernel_ptx(kernel)


def test_a_float64_product_of_a_narrow_value_and_its_transpose_compiles():
    """The four kernels of ``test_regressions``' float64 product of ``exp(b)`` and its
    transpose (a side kernel writes the second operand) compile for sm_90."""
    def fn(xp, x, y):
        e = xp.exp(y)
        return xp.matmul(xp.matmul(x, xp.swapaxes(e, -1, -2)), e)
    kernels = _kernels(fn, [np.zeros((1, 65), np.int32), np.zeros((2, 65), bool)])
    assert len(kernels) == 4
    for kernel in kernels:
        assert "ld.global" in _kernel_ptx(kernel)


def test_int8_products_over_a_short_k_compile():
    """int8 products of K = 1 and 2 take 32-deep K tiles (``heuristics.GEMM_MIN_BLOCK_K``)."""
    for k in (1, 2):
        kernels = _kernels(lambda xp, x, y: x @ y, [np.zeros((4, k), np.int8),
                                                    np.zeros((k, 5), np.int8)])
        for kernel in kernels:
            assert kernel.attrs["block_k"] == 32
            assert "ld.global" in _kernel_ptx(kernel)


def test_full_precision_gemm_of_a_k_major_b_reads_a_row_major_copy():
    """``a @ bt.T`` in full precision at 4096^3: B is written row-major by a pointwise kernel
    first (``rule_fma_n_major_b``); both kernels compile for sm_90, the GEMM on FMA units
    (no wgmma), reading its B tiles 16 bytes at a time along N."""
    a, bt = np.zeros((4096, 4096), np.float32), np.zeros((4096, 4096), np.float32)
    kernels = _kernels(lambda xp, x, w: x @ w.T, [a, bt])
    assert [k.kind for k in kernels] == ["pointwise", "gemm"]
    ptx = _kernel_ptx(kernels[0])
    assert "st.global" in ptx
    ptx = _emitted_ptx(emit_kernel(kernels[1], None, "cuda"))
    assert "wgmma" not in ptx and "fma.rn.f32" in ptx
    assert re.search(r"ld\.global(\.\w+)*\.v4\.b32", ptx) or "cp.async.cg.shared.global" in ptx


@pytest.mark.parametrize("fn, shape", [
    (lambda xp, x: (x - x.mean(axis=0)) / xp.sqrt(x.var(axis=0) + np.float32(1e-5)),
     (4096, 2048)),  # the normalize reversed after its statistics
    (lambda xp, x: x / x.sum(), (1 << 22,)),  # a split sum, then the share reversed
    (lambda xp, x: x.T - x.mean(), (2048, 2049)),  # a reversed 2-D tile kernel
    (lambda xp, x: xp.abs(x - x.mean()).mean(), (1 << 23,)),  # a reversed split reduction
])
def test_reversed_launches_compile(fn, shape):
    """Kernels the rules ``reverse_reread`` and ``broadcast_back_fills_gpu`` make (planned
    at sizes where they apply; only compiled here) compile for sm_90."""
    kernels = _kernels(fn, [np.zeros(shape, np.float32)])
    assert any(k.attrs.get("order") == "reversed" for k in kernels)
    for k in kernels:
        for c in compile_all(emit_kernel(k, None, "cuda"), 90, True):
            assert c.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("dtype", [np.uint32, np.float16, np.float32])
def test_a_product_over_no_k_of_views_of_no_elements_compiles(dtype):
    """``minimum(5, v @ v.T)`` where ``v`` is a strided slice of no elements reshaped to a
    batch of ``[1, 0]`` matrices (compile fuzz, seed 30004): the GEMM folded the batch and
    indexed both operands through views that have no strides, and its loop over no K did not
    compile for sm_90 ("incompatible dimensions at index 0: 16 and 8"); the loop is no
    longer emitted for K = 0. The product is zeros on every backend."""
    x = np.arange(128).astype(dtype).reshape(64, 1, 2)

    def fn(xp, x):
        v = xp.reshape(x[0:36:2, :, 0:0], (18, 1, 1, 0))
        return xp.minimum(dtype(5), xp.matmul(v, xp.swapaxes(v, -1, -2))).astype(np.float64)
    kernels = _kernels(fn, [x])
    assert [k.kind for k in kernels] == ["gemm"]
    _compile(fn, [x])
    for backend in ("numpy", "interpret"):
        with fj.using_backend(backend):
            np.testing.assert_array_equal(fn(fj, fj.asarray(x)).numpy(), np.zeros((18, 1, 1, 1)))
