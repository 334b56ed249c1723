"""Row reductions over rows that are not a multiple of 16 bytes read each row from the 16-byte
word it starts in (``triton_emitter._Emitter._row_window``), so that their loads move 16
bytes at a time: checked in the source, in sm_90 PTX (vector loads), in values on the
interpreter (with rows in one tile and looped, and buffers that do not start on a 16-byte
boundary, which take the plain kernel), and in the ``cuda`` backend's choice on FakeCupy.
Kernels that also store values of the rows' shape (softmax) store the words wholly inside a
row 16 bytes at a time and the row's ends an element at a time, where that pays (2-byte
elements and no operand read along the columns alone, ``_window_stores_pay``)."""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusejit as fj
from fusejit import runtime
from fusejit.codegen import heuristics
from fusejit.codegen.triton_emitter import emit_kernel
from fusejit.testing import assert_matches_numpy

pytest.importorskip("triton")


def _kernel(fn: Any, shape: tuple[int, ...], dtype: str) -> Any:
    (kernel,) = fj.plan(fn(fj.asarray(np.zeros(shape, dtype)))).program.kernels
    return kernel


def _softmax(x: Any) -> Any:
    return fj.softmax(x, axis=-1)


def _sum(x: Any) -> Any:
    return x.sum(axis=-1)


def _layer_norm(x: Any) -> Any:
    n = x.shape[-1]
    return fj.layer_norm(x, fj.asarray(np.linspace(0.5, 1.5, n).astype(x.dtype)),
                         fj.asarray(np.linspace(-1, 1, n).astype(x.dtype)))


def test_misaligned_rows_open_a_window_and_aligned_rows_do_not() -> None:
    emitted = emit_kernel(_kernel(_sum, (2412, 25379), "float16"), None, "cuda")
    assert emitted.windowed == (0,)
    assert "word_at = tl.multiple_of(row_at - row_at % 8, 8)" in emitted.source
    assert "in_words = idx < words_end" in emitted.source
    assert any("16-byte word each starts in" in line for line in emitted.tiling)
    # a kernel that stores values of the rows' shape: windowed for 2-byte rows
    # (``_window_stores_pay``), plain for 4-byte ones and for a layer norm's weight and bias
    assert emit_kernel(_kernel(_softmax, (2412, 25379), "float16"), None, "cuda").windowed == (0,)
    assert emit_kernel(_kernel(_softmax, (4096, 3001), "float32"), None, "cuda").windowed == ()
    assert emit_kernel(_kernel(_layer_norm, (4096, 5003), "float16"), None,
                       "cuda").windowed == ()
    # float32 rows of 301 (4 elements a word), 4 rows a program: a [rows, 1] window
    emitted = emit_kernel(_kernel(lambda x: x.sum(axis=-1), (4096, 301), "float32"), None, "cuda")
    assert emitted.windowed == (0,) and "row_at % 4, [4, 4])" in emitted.source
    for shape, dtype in (((2412, 25376), "float16"), ((64, 3000), "float32")):
        aligned = emit_kernel(_kernel(_sum, shape, dtype), None, "cuda")
        assert aligned.windowed == () and "word_at" not in aligned.source


def test_window_can_be_turned_off() -> None:
    kernel = _kernel(_sum, (2412, 25379), "float16")
    from dataclasses import replace
    off = emit_kernel(replace(kernel, attrs={**kernel.attrs, "window": 0}), None, "cuda")
    assert off.windowed == () and "word_at" not in off.source


def _vector_loads(fn: Any, shape: tuple[int, ...], dtype: str) -> Counter:
    from .test_cubin import _kernel_ptx
    return Counter(re.findall(r"ld\.global(?:\.\w+)*", _kernel_ptx(_kernel(fn, shape, dtype))))


@pytest.mark.parametrize("fn, shape, dtype", [
    (lambda x: x.max(axis=-1), (2412, 25379), "float16"),  # looped, one row a program
    (lambda x: x.var(axis=-1), (4096, 1001), "float16"),  # one tile, several rows a program
    (lambda x: x.sum(axis=-1), (64, 3001), "float32"),
    (lambda x: x.sum(axis=-1), (100000, 77), "float32"),  # 16 rows a program
])
def test_windowed_rows_load_16_bytes_at_a_time(fn: Any, shape: tuple[int, ...],
                                               dtype: str) -> None:
    loads = _vector_loads(fn, shape, dtype)
    assert loads and all(".v4" in kind for kind in loads), loads
    heuristics_before = heuristics.ROW_WINDOW
    try:
        heuristics.ROW_WINDOW = False
        plain = _vector_loads(fn, shape, dtype)
    finally:
        heuristics.ROW_WINDOW = heuristics_before
    assert not any(".v" in kind for kind in plain), plain  # (what the window is for)


_OPS = {
    "sum": lambda xp, x: xp.sum(x, axis=-1),
    "max": lambda xp, x: xp.max(x, axis=-1),
    "argmax": lambda xp, x: xp.argmax(x, axis=-1),
    "var": lambda xp, x: xp.var(x, axis=-1),
    "centered": lambda xp, x: x - xp.mean(x, axis=-1, keepdims=True),
    "softmax": lambda xp, x: xp.exp(x - xp.max(x, axis=-1, keepdims=True))
    / xp.sum(xp.exp(x - xp.max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True),
}


def _reference(op: str, a: np.ndarray) -> Any:
    """NumPy's ``op`` of ``a``; a sum as the exact (float64) sum rounded once to ``a``'s dtype,
    which fusejit's float32 accumulation matches within the dtype's tolerance (NumPy's own
    float16 sum rounds at every step, up to ``K`` ulps away)."""
    if op == "sum":
        return np.sum(a.astype(np.float64), axis=-1).astype(a.dtype)
    return _OPS[op](np, a)


def _check(op: str, rows: int, cols: int, dtype: str, offset: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(rows * cols + offset).astype(dtype)
    a = base[offset:].reshape(rows, cols)  # offset 1: the buffer starts off a 16-byte boundary
    assert_matches_numpy(_OPS[op](fj, fj.asarray(a)), _reference(op, a),
                         err_msg=f"{op} {rows}x{cols} {dtype} offset {offset}")


def _spy_emissions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, tuple[int, ...]]]:
    """(the kernel's ``window`` attribute, the params read through a window) of every
    emission from now on, in order."""
    from fusejit.runtime import kernel_cache as kc
    seen: list[tuple[int, tuple[int, ...]]] = []
    emitted_for = kc.emitted_for

    def spy(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        emitted = emitted_for(kernel, *args, **kwargs)
        seen.append((kernel.attrs.get("window", 1), emitted.windowed))
        return emitted
    monkeypatch.setattr(kc, "emitted_for", spy)
    return seen


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(sorted(_OPS)), rows=st.integers(1, 9),
       cols=st.integers(16, 300).filter(lambda c: c % 8 != 0),
       dtype=st.sampled_from(["float16", "float32"]), offset=st.sampled_from([0, 1]),
       looped=st.booleans(), seed=st.integers(0, 2**16))
def test_windowed_rows_match_numpy(op: str, rows: int, cols: int, dtype: str, offset: int,
                                   looped: bool, seed: int) -> None:
    """Rows in one tile, and looped in tiles of 64 (``PERSISTENT_LIMIT`` cut), against NumPy
    at the dtype's tolerance (a sum: ``_reference``); an offset buffer takes the plain kernel."""
    from fusejit.runtime import kernel_cache as kc
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kc, "_emit_cache", {})  # (emissions are cached by kernel, not by the limit)
        if looped:
            m.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 64)
        with fj.using_backend("interpret"):
            _check(op, rows, cols, dtype, offset, seed)


def test_offset_buffers_take_the_plain_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the interpreter: a buffer that starts 2 bytes past a 16-byte boundary is read
    without a window (``window=0``), an aligned one through it; both match NumPy."""
    seen = _spy_emissions(monkeypatch)
    with fj.using_backend("interpret"):
        for offset in (0, 1):
            seen.clear()
            _check("sum", 5, 1001, "float16", offset, 7)
            assert seen[-1] == ((1, (0,)) if offset == 0 else (0, ())), seen


def test_cuda_backend_emits_offset_buffers_without_the_window(monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """On FakeCupy (compiles faked): the ``cuda`` backend reads an aligned CuPy buffer
    through the window and an offset view of one without it."""
    from fusejit.runtime import cuda_backend

    from .fake_cupy import FakeCupy
    from .test_devices import _fake_compile
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(cuda_backend, "compile_launch", _fake_compile([]))
    seen = _spy_emissions(monkeypatch)
    host = np.zeros(5 * 1001 + 8, np.float16)
    assert host.ctypes.data % 16 == 0
    with fj.using_backend("cuda"):
        aligned = cp.ndarray(host[:-8].reshape(5, 1001), cp.current())
        fj.asarray(aligned).sum(axis=-1).realize()
        assert seen[-1] == (1, (0,)), seen
        seen.clear()
        offset = cp.ndarray(host[1:-7].reshape(5, 1001), cp.current())
        fj.asarray(offset).sum(axis=-1).realize()
        assert seen[-2:] == [(1, (0,)), (0, ())], seen


def test_looped_window_counts_late_lanes_in_welford(monkeypatch: pytest.MonkeyPatch) -> None:
    """A looped variance over misaligned rows: the lanes before a row's first column join
    Welford's update one step late (their own reciprocal of the count); values match NumPy
    for every shift of the rows against their words (rows of 78 float32: shifts 0 and 2)."""
    from fusejit.runtime import kernel_cache as kc
    monkeypatch.setattr(kc, "_emit_cache", {})
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 64)
    emitted = emit_kernel(_kernel(lambda x: x.var(axis=-1), (7, 78), "float32"), None,
                          "interpret")
    assert "for k in range(0, 81, 64):" in emitted.source
    assert "late = tl.arange(0, 64)[None, :] < row_at - word_at" in emitted.source
    assert "tl.where(late, inv_late_v0, inv_v0)" in emitted.source
    with fj.using_backend("interpret"):
        for seed in range(3):
            _check("var", 7, 78, "float32", 0, seed)
            _check("var", 5, 1001, "float16", 0, seed)


def test_no_window_for_steps_narrower_than_a_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """A looped kernel whose step is narrower than a 16-byte word (the interpreter with
    ``PERSISTENT_LIMIT`` 2: steps of 2 float16, 8 to a word) opens no window: the row's first
    column could fall after the first step, and Welford's late lanes count one step late at
    most. ``fuzz_rows --backend interpret --seed 18009`` found a variance-normalized float16
    row of 87 (tanh prologue) off by 2% in 18 of 20 draws."""
    from fusejit.runtime import kernel_cache as kc
    monkeypatch.setattr(kc, "_emit_cache", {})
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 2)

    def program(a: Any) -> Any:
        t = fj.tanh(a)
        return (t - t.mean(axis=-1, keepdims=True)) / fj.sqrt(t.var(axis=-1, keepdims=True)
                                                              + 1e-3)
    emitted = emit_kernel(_kernel(program, (5, 87), "float16"), None, "interpret")
    assert "word_at" not in emitted.source
    with fj.using_backend("interpret"):
        for seed in range(5):
            x = (np.random.default_rng(seed).standard_normal((5, 87)) * 10).astype(np.float16)
            runtime.forget_plans()
            with np.errstate(all="ignore"):
                with fj.using_backend("numpy"):
                    want = program(fj.asarray(x)).numpy()
                got = program(fj.asarray(x)).numpy()
            assert_matches_numpy(got, want, atol=1e-3 * float(np.abs(want).max()))


def _gpu() -> bool:
    from fusejit.runtime import gpu_available
    return gpu_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs CuPy and a CUDA GPU")
@pytest.mark.parametrize("op", sorted(_OPS))
@pytest.mark.parametrize("rows, cols, dtype", [
    (2412, 25379, "float16"), (4096, 1001, "float16"), (300, 3001, "float32"),
    (20000, 77, "float32"), (64, 40001, "float32"), (9, 131, "float16")])
def test_windowed_rows_match_numpy_cuda(op: str, rows: int, cols: int, dtype: str) -> None:
    """On the GPU: windowed row kernels (looped and in one tile, one row a program and
    several), from an aligned CuPy buffer and from one 2 bytes past a 16-byte boundary (the
    plain kernel), against NumPy at the dtype's tolerance (a sum: ``_reference``)."""
    import cupy as cp
    rng = np.random.default_rng(rows + cols)
    host = rng.standard_normal(rows * cols + 8).astype(dtype)
    with fj.using_backend("cuda"):
        device = cp.asarray(host)
        for offset in (0, 1):
            a = host[offset:offset + rows * cols].reshape(rows, cols)
            view = device[offset:offset + rows * cols].reshape(rows, cols)
            assert_matches_numpy(_OPS[op](fj, fj.asarray(view)), _reference(op, a),
                                 err_msg=f"{op} {rows}x{cols} {dtype} offset {offset}")


# -- row windows for kernels that store rows (``heuristics.ROW_WINDOW_STORES``) -------------

def test_windowed_stores_split_whole_words_from_the_row_ends(monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A float16 softmax over misaligned rows reads through the window and
    stores twice: the words wholly inside the row under a mask of one value a word, the row's
    first and last words under the exact column mask."""
    emitted = emit_kernel(_kernel(_softmax, (2412, 25379), "float16"), None, "cuda")
    assert emitted.windowed == (0,)
    src = emitted.source
    assert "words = idx_1 // 8" in src
    assert "whole_words = (words >= first_whole) & (words < end_whole)" in src
    assert "edge_words = col_mask & ((words < first_whole) | (words >= end_whole))" in src
    assert "tl.store(out0 + idx_1, v6, mask=whole_words)" in src
    assert "tl.store(out0 + idx_1, v6, mask=edge_words)" in src
    monkeypatch.setattr(heuristics, "ROW_WINDOW_STORES", False)
    assert emit_kernel(_kernel(_softmax, (2412, 25379), "float16"), None, "cuda").windowed == ()


@pytest.mark.parametrize("fn, shape, dtype", [
    (_softmax, (2412, 25379), "float16"),  # looped, one row a program
    (_softmax, (8192, 1001), "float16"),  # one tile
    (lambda x: x - x.mean(axis=-1, keepdims=True), (4096, 3003), "float16"),
])
def test_windowed_stores_move_16_bytes_at_a_time(monkeypatch: pytest.MonkeyPatch, fn: Any,
                                                 shape: tuple[int, ...], dtype: str) -> None:
    """sm_90 PTX: the rows load 16 bytes at a time and the whole words store 16 bytes at a
    time (without the window, every load and store of the rows moves one element)."""
    from .test_cubin import _kernel_ptx
    ptx = _kernel_ptx(_kernel(fn, shape, dtype))
    assert re.search(r"st\.global(\.\w+)*\.v4", ptx) and re.search(r"ld\.global(\.\w+)*\.v4", ptx)
    monkeypatch.setattr(heuristics, "ROW_WINDOW_STORES", False)
    plain = _kernel_ptx(_kernel(fn, shape, dtype))
    assert not re.search(r"st\.global(\.\w+)*\.v4", plain)


@settings(max_examples=40, deadline=None)
@given(op=st.sampled_from(["centered", "softmax"]), rows=st.integers(1, 9),
       cols=st.integers(9, 300).filter(lambda c: c % 8 != 0),
       offset=st.sampled_from([0, 1]), looped=st.booleans(), seed=st.integers(0, 2**16))
def test_windowed_stores_match_numpy(op: str, rows: int, cols: int, offset: int, looped: bool,
                                     seed: int) -> None:
    """float16 kernels that store rows, through the window, in one tile and looped in tiles
    of 64, against NumPy at float16's tolerance; the rows around each row
    are checked too (``_check`` compares the whole output, so a store past a row's end shows
    as a wrong value in the next row)."""
    from fusejit.runtime import kernel_cache as kc
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kc, "_emit_cache", {})
        if looped:
            m.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 64)
        with fj.using_backend("interpret"):
            _check(op, rows, cols, "float16", offset, seed)


# -- rows whose best value is the reduction's identity -------------------------------------------
# argmin over rows of +inf (float64 rows of 5: a window) returned -1 for the rows that start
# inside a 16-byte word: the window's lanes before the row hold the identity too, tie with the
# row's values, and their column is negative (interpret fuzz, seed 29001, program 1894:
# argmin(rsqrt(var(zeros, axis=0)), axis=-1))

@pytest.mark.parametrize("op", ["argmin", "argmax"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "int64", "int8", "uint16"])
@pytest.mark.parametrize("cols", [3, 5, 7, 9, 33])
@pytest.mark.parametrize("looped", [False, True])
def test_rows_of_the_identity_give_the_first_index(op: str, dtype: str, cols: int,
                                                    looped: bool) -> None:
    """Every row holds the value the masked lanes are filled with (+inf for argmin, -inf for
    argmax, an integer dtype's max or min); NumPy's answer is index 0 in every row."""
    from fusejit.runtime import kernel_cache as kc
    dt = np.dtype(dtype)
    big = op == "argmin"
    if dt.kind == "f":
        fill = np.inf if big else -np.inf
    else:
        fill = np.iinfo(dt).max if big else np.iinfo(dt).min
    a = np.full((7, cols), fill, dt)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(kc, "_emit_cache", {})
        if looped:
            m.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 2)
        with fj.using_backend("interpret"):
            # (+ 0: a computed operand, so the reduction is a kernel, not a host shortcut)
            got = getattr(fj, op)(fj.asarray(a) + np.array(0, dt), axis=-1).numpy()
    np.testing.assert_array_equal(got, np.zeros(7, np.int64), err_msg=f"{op} {dtype} 7x{cols}")
