"""Every canonical program's kernels compile to an sm_90 cubin on this (GPU-less) machine."""

from __future__ import annotations

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


def test_looped_and_large_rows_compile():
    # rows longer than the persistent limit: looped reductions, reduce-then-broadcast re-reads
    fn, _ = CANONICAL["softmax"]
    _compile(fn, [np.zeros((4, 40000), np.float32)])
    fn, _ = CANONICAL["layernorm"]
    _compile(fn, [np.zeros((2, 20000), np.float32), np.zeros(20000, np.float32),
                  np.zeros(20000, np.float32)])


@pytest.mark.parametrize("name", sorted(SPLIT))
def test_split_reductions_compile(name):
    """Both launches (partials and final) of every split reduction compile for sm_90."""
    fn, make = SPLIT[name]
    kernels = _kernels(fn, make(1 << 20))
    if name != "var":
        assert any(len(emit_kernel(k, None, "cuda").launches) == 2 for k in kernels)
    _compile(fn, make(1 << 20))


def test_tiled_transposes_compile():
    """2-D tiled pointwise kernels (transposed reads) compile for sm_90, masked or not."""
    x, y = np.zeros((8192, 8192), np.float32), np.zeros((8192, 8192), np.float32)
    _compile(lambda xp, a, b: a.T + b, [x, y])
    _compile(lambda xp, a, b: a.T + b, [np.zeros((100, 37), np.float16),
                                        np.zeros((37, 100), np.float16)])
    _compile(lambda xp, a: xp.exp(a.transpose(0, 2, 1)) > 1, [np.zeros((3, 40, 72), np.float32)])
    src = emit_kernel(_kernels(lambda xp, a, b: a.T + b, [x, y])[0], None, "cuda").source
    assert "i_m" in src and "i_n" in src


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
