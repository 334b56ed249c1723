"""Cooperative row kernels (``heuristics.COOPERATIVE_ROWS``, on by default since timed on the
H200): each wide row over several programs that read their chunk once.

On the CPU the interpreter runs a launch's programs one after another, so every program of
a row but the last gives its chunk up and the row's last program re-reads those: these tests
check that path, the partials and their combination, the epilogue and the counters against
NumPy (tolerances of ``fusejit.testing``), and that every kernel compiles for sm_90 (where
the programs wait for each other instead). Rows of 37 in chunks of 16 (ragged) and of 64 (4
exact chunks).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("triton")
hypothesis = pytest.importorskip("hypothesis")

import fusejit as fj  # noqa: E402
import fusejit.codegen.heuristics as heuristics  # noqa: E402
import fusejit.runtime as runtime  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.runtime.compile import compile_all  # noqa: E402
from fusejit.testing import assert_matches_numpy, check_program, programs  # noqa: E402


@pytest.fixture
def cooperative(monkeypatch, tmp_path, fresh_plans):
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 16)
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    # (fresh_plans: nothing planned or emitted with the switch off is reused)
    with fj.using_backend("interpret"):
        yield


def _rng(seed=0):
    return np.random.default_rng(seed)


def _softmax(xp, x):
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layer_norm(xp, x, w, b):
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / xp.sqrt(x.var(axis=-1, keepdims=True) + 1e-5) * w + b


def _rms_norm(xp, x, w):
    return x / xp.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def _softmax_and_its_statistics(xp, x):  # outputs over the row and per row
    m = x.max(axis=-1, keepdims=True)
    s = xp.exp(x - m).sum(axis=-1, keepdims=True)
    return xp.exp(x - m) / s, m, xp.log(s) + m


def _centered_ints(xp, x):
    return x - x.sum(axis=-1, keepdims=True) // 37


CASES = {
    "softmax": (_softmax, lambda n: [(_rng().standard_normal((3, n)) * 4).astype(np.float32)]),
    "layer_norm": (_layer_norm, lambda n: [_rng().standard_normal((3, n)).astype(np.float32) + 5,
                                           _rng(1).standard_normal(n).astype(np.float32),
                                           _rng(2).standard_normal(n).astype(np.float32)]),
    "rms_norm": (_rms_norm, lambda n: [_rng().standard_normal((2, n)).astype(np.float32),
                                       _rng(1).standard_normal(n).astype(np.float32)]),
    "softmax_and_statistics": (_softmax_and_its_statistics,
                               lambda n: [_rng().standard_normal((1, n)).astype(np.float32)]),
    "softmax_float16": (_softmax, lambda n: [_rng().standard_normal((3, n)).astype(np.float16)]),
    "layer_norm_float64": (_layer_norm,
                           lambda n: [_rng().standard_normal((3, n)) * 1e3 + 1e6,
                                      _rng(1).standard_normal(n), _rng(2).standard_normal(n)]),
    "layer_norm_float16": (_layer_norm,
                           lambda n: [(_rng().standard_normal((3, n)) + 5).astype(np.float16),
                                      _rng(1).standard_normal(n).astype(np.float16),
                                      _rng(2).standard_normal(n).astype(np.float16)]),
    "sum_and_var_ints": (lambda xp, x: (x - x.sum(axis=-1, keepdims=True) // 37)
                         * x.var(axis=-1, keepdims=True),
                         lambda n: [_rng().integers(-1000, 1000, (3, n)).astype(np.int32)]),
    "centered_ints": (_centered_ints,
                      lambda n: [_rng().integers(-1000, 1000, (3, n)).astype(np.int32)]),
    "prologue": (lambda xp, x: _softmax(xp, xp.exp(x * 0.5) - x),
                 lambda n: [_rng().standard_normal((3, n)).astype(np.float32)]),
}


def _run(fn, arrays):
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = outs if isinstance(outs, tuple) else (outs,)
    fj.realize(*outs)
    return outs


def _check_against_numpy(fn, arrays, launches=2):
    """``fn`` on fusejit against NumPy, ``launches`` times: the second launch finds the
    counters the first left (all zero)."""
    with np.errstate(all="ignore"):
        expected = fn(np, *arrays)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for _ in range(launches):
        for got, want in zip(_run(fn, arrays), expected):
            assert_matches_numpy(got.numpy(), np.asarray(want))


def _cooperative_kernels(fn, arrays, target="interpret"):
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = outs if isinstance(outs, tuple) else (outs,)
    kernels = fj.plan(*outs).program.kernels
    emitted = [emit_kernel(k, None, target) for k in kernels]
    return [e for e in emitted if "_finish(" in e.source]


@pytest.mark.parametrize("width", [37, 64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_cooperative_rows_match_numpy(cooperative, name, width):
    fn, make = CASES[name]
    arrays = make(width)
    assert _cooperative_kernels(fn, arrays), "the region did not run as cooperative rows"
    _check_against_numpy(fn, arrays)


def test_special_values_propagate(cooperative):
    x = _rng().standard_normal((5, 37)).astype(np.float32)
    x[0, 3] = np.nan  # a NaN row
    x[1, 20] = np.inf  # an infinite maximum: NaN, as NumPy's exp(inf - inf)
    x[2, :] = -np.inf  # every element -inf: NaN
    x[3, :16] = -np.inf  # a whole chunk of -inf in a finite row: weighs 0, not NaN
    x[4, 30] = -np.inf
    with np.errstate(all="ignore"):
        expected = _softmax(np, x)
    (got,) = _run(_softmax, [x])
    assert_matches_numpy(got.numpy(), expected)
    assert np.isfinite(got.numpy()[3]).all() and np.isnan(got.numpy()[:3]).all()


def test_rescaled_chunk_exps_in_the_fast_path(cooperative):
    """The program of a row that finds every partial (in the interpreter, the row's last:
    chunk 32..36 of 37) writes softmax's numerator as its chunk's exps rescaled to the row's
    max (``_reuse_chunk_exps``): special values in that chunk give NumPy's answers, and the
    finite ones are as close to the float64 softmax as NumPy's own float32 one."""
    x = (_rng(5).standard_normal((64, 37)) * 8).astype(np.float32)
    x[0, 33] = np.inf  # the row's max is infinite, in the fast path's chunk: NaN row
    x[1, 32:] = -np.inf  # the fast path's whole chunk -inf in a finite row: zeros
    x[2, :] = -np.inf  # every element -inf: NaN
    x[3, 35] = np.nan  # NaN in the fast path's chunk: NaN row
    x[4, 34] = 80.0  # the row's max in the fast path's chunk, far above the others
    x[5, 2] = 80.0  # the row's max in another chunk
    (emitted,) = _cooperative_kernels(_softmax, [x])
    assert "rescaled to the row's max" in emitted.source
    with np.errstate(all="ignore"):
        expected = _softmax(np, x)
        exact = _softmax(np, x.astype(np.float64)).astype(np.float32)
    (got,) = _run(_softmax, [x])
    got = got.numpy()
    assert_matches_numpy(got, expected)
    assert np.isnan(got[[0, 2, 3]]).all() and (got[1, 32:] == 0).all()
    fast, direct, truth = got[:, 32:], expected[:, 32:], exact[:, 32:]
    finite = np.isfinite(truth) & (truth > 0)
    assert finite.sum() >= 250
    ours, numpys = (np.abs(v[finite] - truth[finite]) / np.spacing(truth[finite])
                    for v in (fast, direct))
    # (both are off by tens of ulp where |x - max| is large: exp(x - max) magnifies the
    # rounding of its argument; measured 34 / 3.6 ulp (max / mean) against NumPy's 37 / 4.7)
    assert ours.max() <= 1.25 * numpys.max() + 2 and ours.mean() <= numpys.mean() + 1


@pytest.mark.parametrize("name, partials", [("layer_norm", ["sum", "m2"]),
                                             ("layer_norm_float16", ["sum", "m2"]),
                                             ("sum_and_var_ints", ["", "sum", "m2"])])
def test_a_sum_shares_the_partials_of_an_m2_of_its_operand(cooperative, name, partials):
    """A cooperative row stores the chunk's (sum, m2) for an m2 (its count is known from the
    chunk's place, its mean the sum over that count, as the chunk divides): a sum of the same
    operand in the same accumulator dtype (layer norm's mean and variance, float16's both in
    float32) has no partial of its own. An integer sum (int64) beside the variance (float64)
    keeps its own."""
    fn, make = CASES[name]
    (emitted,) = _cooperative_kernels(fn, make(37))
    header = emitted.source[emitted.source.index("@triton.jit\ndef " + emitted.name):]
    params = header[header.index("(") + 1:header.index(")")].split(", ")
    kinds = [p.rsplit("_", 1)[1] if p.count("_") > 1 else "" for p in params
             if p.startswith("part_")]
    assert kinds == partials, params
    assert len(emitted.scratch) == len(partials)


def test_counters_are_zero_after_each_launch(cooperative):
    x = _rng().standard_normal((4, 37)).astype(np.float32)
    (emitted,) = _cooperative_kernels(_softmax, [x])
    backend = runtime.backend_instance("interpret")
    for _ in range(3):
        _run(_softmax, [x])
        assert not backend.counters(emitted).any()
    assert emitted.counters == 1 + 2 * 4 + 4 * 3  # ticket; arrivals, settled; flags


def test_switch_off_and_narrow_rows_keep_the_row_kernel(cooperative, monkeypatch):
    x = _rng().standard_normal((3, 37)).astype(np.float32)
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    assert not _cooperative_kernels(_softmax, [x])
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
    assert not _cooperative_kernels(_softmax, [x[:, :16]])  # fits a program: persistent
    assert not _cooperative_kernels(lambda xp, a: a.sum(axis=-1), [x])  # row values only
    assert not _cooperative_kernels(lambda xp, a: xp.argmax(a, axis=-1) + a.T, [x])


def test_random_programs_with_cooperative_rows(cooperative):
    @hypothesis.settings(max_examples=60, deadline=None, derandomize=True, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(programs(max_steps=8, max_side=40, max_outputs=3, stable=True))
    def run(recipe):
        check_program(recipe, backend="interpret")

    run()


@pytest.mark.parametrize("width", [1 << 18, 150_000])
@pytest.mark.parametrize("name", ["softmax", "layer_norm", "softmax_and_statistics",
                                  "softmax_float16", "layer_norm_float64"])
def test_cooperative_kernels_compile_for_sm90(cooperative, name, width):
    """On ``cuda`` at GPU sizes (rows of 2**18: 32 programs of 8192 per row, float64 64 of
    4096; ragged rows of 150,000: 19 and 37), the programs wait for each other; every such
    kernel compiles. (Triton 3.6, the GPU image's, once failed on the ragged layer norms:
    the H200's wide-row fuzz found it, at rows of 150,001, which now run looped.)"""
    fn, make = CASES[name]
    small = make(8)
    arrays = [np.resize(a, (a.shape[0], width) if a.ndim == 2 else (width,)) for a in small]
    emitted = _cooperative_kernels(fn, arrays, target="cuda")
    chunk = 4096 if name.endswith("float64") else 8192  # (float16 rows: 8192 too)
    assert emitted and f"while (arrived < {-(-width // chunk)})" in emitted[0].source
    for e in emitted:
        for c in compile_all(e, 90, True):
            assert c.cubin[:4] == b"\x7fELF"


def test_cooperative_tiles_on_a_gpu():
    """Rows of 2**18 float32: 32 programs of 8192 elements, 4 warps (float64: 64 of 4096); rows
    under ``COOP_MIN_ROW_BYTES`` (128 KB), rows needing more
    than ``COOP_MAX_CHUNKS`` programs, and grids past ``COOP_MAX_PROGRAMS`` stay looped."""
    tiles = heuristics.cooperative_tiles
    t = tiles("cuda", 256, 1 << 18, 4)
    assert (t.chunks, t.block, t.num_warps) == (32, 8192, 4)
    assert (tiles("cuda", 256, 1 << 18, 8).chunks, tiles("cuda", 256, 1 << 18, 8).block) == (64, 4096)
    assert tiles("cuda", 2048, 1 << 15, 4).chunks == 4  # 128 KB rows: measured faster
    assert tiles("cuda", 256, 30000, 4) is None  # 120 KB rows
    assert tiles("cuda", 4, 1 << 20, 4) is None  # 128 chunks
    assert tiles("cuda", 4096, 1 << 18, 4) is None  # 131072 programs
    # rows that are not 16-byte multiples: looped where the emitter cannot lay them from
    # their first 16-byte word (window 0), else that many elements a word, one chunk more
    # where the shift needs it
    assert tiles("cuda", 256, 150_001, 4, (4,)) is None
    assert tiles("cuda", 256, 150_002, 4, (4, 2)) is None  # a float16 output's rows
    assert tiles("cuda", 256, 150_001, 4, (4,), window=4).chunks == 19
    assert tiles("cuda", 256, 147_457, 4, (4,), window=4).chunks == 19  # 18 chunks and 1
    # softmax's partials (max, sumexp) over such rows: chunks of 4096 (measured faster on the
    # H200), while they fit COOP_MAX_CHUNKS; sums and m2s, aligned rows: 8192
    softmax, stats = frozenset({"max", "sumexp"}), frozenset({"sum", "m2"})
    t = tiles("cuda", 256, 150_001, 4, (4,), window=4, ops=softmax)
    assert (t.block, t.chunks) == (4096, 37)
    assert tiles("cuda", 256, 150_001, 4, (4,), window=4, ops=stats).block == 8192
    assert tiles("cuda", 256, 150_000, 4, (4,), ops=softmax).block == 8192
    assert tiles("cuda", 256, 262_145, 4, (4,), window=4, ops=softmax).block == 8192  # 65
    assert tiles("interpret", 3, 37, 4, (4,), window=4, ops=softmax).block == 32
    assert tiles("cuda", 256, 150_000, 4, (4,)).chunks == 19
    assert tiles("interpret", 3, 37, 4, (4,)) is not None  # (the tests' rows of 37)


@pytest.mark.parametrize("window", [True, False])
def test_misaligned_wide_rows_run_windowed_on_a_gpu(cooperative, monkeypatch, window):
    """Softmax and layer norm over rows of 150,001 and 131,073 float32 (not 16-byte multiples)
    plan the cooperative kernel on ``cuda`` with its chunks laid from the row's first 16-byte
    word (``heuristics.COOP_WINDOW``, on by default: measured faster than the looped kernel
    on an H100), or the looped row kernel with ``COOP_WINDOW`` off; rows of 150,000 the
    cooperative one, unwindowed, either way."""
    monkeypatch.setattr(heuristics, "COOP_WINDOW", window)
    for width in (150_001, 150_000, 131_073):
        misaligned = width % 4 != 0
        for name in ("softmax", "layer_norm"):
            fn, make = CASES[name]
            arrays = [np.resize(a, (a.shape[0], width) if a.ndim == 2 else (width,))
                      for a in make(8)]
            emitted = _cooperative_kernels(fn, arrays, target="cuda")
            assert bool(emitted) == (window or not misaligned), (name, width)
            if emitted:
                windowed = "laid from the 16-byte word each row starts in" in emitted[0].source
                assert windowed == misaligned, (name, width)
                chunk = 4096 if windowed and name == "softmax" else 8192
                assert f"programs of {chunk} elements" in emitted[0].source, (name, width)


@pytest.mark.parametrize("name, halves", [("layer_norm", True), ("rms_norm", True),
                                          ("softmax", False), ("layer_norm_float64", False),
                                          ("layer_norm_float16", True), ("centered_ints", False)])
def test_sums_and_variances_of_float32_rows_hold_their_chunk_as_halves(cooperative, name,
                                                                       halves):
    """``heuristics.coop_sub_blocks``: on ``cuda``, a cooperative float32 row whose reductions
    are sums and m2s (layer norm, RMS norm) holds its chunk of 8192 as two tiles of 4096, each
    written whole (weight, bias, store) before the next, under a cap of 128 registers (four
    programs an SM; measured 81.9 -> 84.7% of the copy rate at 256x2**18 on an H100); softmax
    (max and sumexp partials), other widths of value, rows without a vector along them
    (``centered_ints``) and ragged rows keep one tile, no cap. The plan's tiling says so
    (float16 rows too: their values are float32). On ``interpret`` the same split, no cap."""
    fn, make = CASES[name]
    arrays = [np.resize(a, (a.shape[0], 1 << 18) if a.ndim == 2 else (1 << 18,))
              for a in make(8)]
    (emitted,) = _cooperative_kernels(fn, arrays, target="cuda")
    (launch,) = emitted.launches
    held = "cols_1 = chunk * 8192 + 4096 + tl.arange(0, 4096)" in emitted.source
    assert held == halves
    capped = halves and not heuristics.COOP_PIPELINE  # (pipelined: two chunks held, no cap)
    assert launch.max_registers == (128 if capped else 0)
    assert ("as 2 tiles of 4096" in emitted.source) == halves
    (small,) = _cooperative_kernels(fn, make(64), target="interpret")
    assert small.launches[0].max_registers == 0
    assert ("cols_1 = chunk * 16 + 8 + " in small.source) == halves
    if halves:  # ragged rows (150,000 = 18 chunks of 8192 and a partial one): one tile
        ragged = [np.resize(a, (a.shape[0], 150_000) if a.ndim == 2 else (150_000,))
                  for a in make(8)]
        (e,) = _cooperative_kernels(fn, ragged, target="cuda")
        assert "cols_1" not in e.source and e.launches[0].max_registers == 0


@pytest.fixture
def softmax_halves(cooperative, monkeypatch):
    """Every cooperative chunk held as halves: softmax's partials (max, sumexp) too, ragged
    rows too, rows without a weight too (``coop_sub_blocks`` leaves those as one tile on
    its measurements; the code path is checked here whatever it chooses). Rows of 37 run
    unwindowed here: a windowed chunk is one tile."""
    monkeypatch.setattr(heuristics, "COOP_WINDOW", False)
    monkeypatch.setattr(heuristics, "COOP_SUB_BLOCK_OPS",
                        heuristics.COOP_SUB_BLOCK_OPS | {"max", "sumexp"})
    monkeypatch.setattr(heuristics, "COOP_SUB_BLOCK_MIN_ROW_OPERANDS", 0)
    monkeypatch.setattr(heuristics, "COOP_SUB_BLOCK_RAGGED", True)


@pytest.mark.parametrize("width", [37, 64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_case_held_as_halves_matches_numpy(softmax_halves, name, width):
    """The cases above with every float32-valued chunk held as two tiles (ragged rows: the
    second tile of the last chunk partly or wholly past the row's end)."""
    fn, make = CASES[name]
    arrays = make(width)
    (emitted,) = _cooperative_kernels(fn, arrays)
    # (one tile where the widest value is not 4 bytes: float16 softmax's exps, float64,
    # the integers' int64 sums)
    one_tile = {"softmax_float16", "layer_norm_float64", "sum_and_var_ints", "centered_ints"}
    assert ("cols_1 = " in emitted.source) == (name not in one_tile), name
    _check_against_numpy(fn, arrays)


@pytest.mark.parametrize("width", [37, 64])
@pytest.mark.parametrize("name", ["softmax", "softmax_and_statistics", "prologue"])
def test_softmax_rows_held_as_halves_match_numpy(softmax_halves, name, width):
    """The chunk's max over its tiles' maxes, each tile's exps from that max, and the fast
    path's numerator rescaled tile by tile (``_chunk_sumexp``, ``_reuse_chunk_exps``)."""
    fn, make = CASES[name]
    arrays = make(width)
    (emitted,) = _cooperative_kernels(fn, arrays)
    assert "cols_1 = chunk * 16 + 8 + " in emitted.source and "the chunk's max" in emitted.source
    _check_against_numpy(fn, arrays, launches=1)


def test_softmax_halves_keep_special_values(softmax_halves):
    """NaN, infinite maxima and whole tiles or chunks of -inf, in either tile of the fast
    path's chunk (32..39 and 40..47 of rows of 45: the second tile ragged)."""
    x = (_rng(5).standard_normal((9, 45)) * 8).astype(np.float32)
    x[0, 33] = np.inf  # the row's max infinite, in the fast path's first tile
    x[1, 41] = np.inf  # ... in its second tile
    x[2, 32:40] = -np.inf  # the first tile all -inf in a finite row
    x[3, 40:] = -np.inf  # the second tile all -inf
    x[4, 32:] = -np.inf  # the whole chunk
    x[5, :] = -np.inf
    x[6, 43] = np.nan
    x[7, 36] = 80.0  # the row's max in the first tile, far above the rest
    x[8, 44] = 80.0  # in the second tile
    (emitted,) = _cooperative_kernels(_softmax, [x])
    assert "cols_1" in emitted.source and "rescaled to the row's max" in emitted.source
    with np.errstate(all="ignore"):
        expected = _softmax(np, x)
    (got,) = _run(_softmax, [x])
    assert_matches_numpy(got.numpy(), expected)


@pytest.mark.parametrize("width", [1 << 18, 150_000])
def test_softmax_halves_compile_for_sm90(softmax_halves, width):
    arrays = [np.resize(CASES["softmax"][1](8)[0], (3, width))]
    (emitted,) = _cooperative_kernels(_softmax, arrays, target="cuda")
    assert "cols_1 = chunk * 8192 + 4096 + " in emitted.source
    assert emitted.launches[0].max_registers == (0 if heuristics.COOP_PIPELINE else 128)
    for c in compile_all(emitted, 90, True):
        assert c.cubin[:4] == b"\x7fELF"


@pytest.fixture
def coop_window(cooperative, monkeypatch):
    """Cooperative rows for rows that are not 16-byte multiples, their chunks laid from the
    16-byte word each row starts in (``heuristics.COOP_WINDOW``, on by default)."""
    monkeypatch.setattr(heuristics, "COOP_WINDOW", True)


@pytest.mark.parametrize("width", [37, 30])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_laid_from_their_first_word_match_numpy(coop_window, name, width):
    """Rows of 37 and 30 float32 (148 and 120 bytes: not 16-byte multiples; float16 and
    float64 too): chunk k of a row covers its columns 16k - s to 16k + 15 - s (s: the row's
    start in its word), so rows of 30 take 3 chunks where 2 held them, the last empty in
    the rows that start on a word; the m2 partials' counts follow (chunk and stats). Twice:
    the counters are zero again."""
    fn, make = CASES[name]
    arrays = make(width)
    (emitted,) = _cooperative_kernels(fn, arrays)
    misaligned = width * arrays[0].dtype.itemsize % 16 != 0  # (float64 rows of 30 are not)
    assert ("word_at" in emitted.source) == misaligned, name
    assert ("laid from the 16-byte word each row starts in" in emitted.source) == misaligned
    _check_against_numpy(fn, arrays)


@pytest.mark.parametrize("width", [100, 165, 96])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_laid_from_their_128_byte_line_match_numpy(coop_window, monkeypatch, name,
                                                        width):
    """``heuristics.COOP_WINDOW_BYTES`` 128 (an experiment: rows that start off a cache line
    laid from the line): the window's words are 32 float32 (16 float64, 64 float16), so
    rows of 100 float32, 16-byte multiples, are windowed too, as rows of 165 are, their edge
    words partly outside the row; rows of 96 (3 lines) are not; the counts follow the
    shift. Twice: the counters are zero again."""
    monkeypatch.setattr(heuristics, "COOP_WINDOW_BYTES", 128)
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", 64)  # (chunks of a line)
    fn, make = CASES[name]
    arrays = make(width)
    emitted = _cooperative_kernels(fn, arrays)
    itemsize = max(a.dtype.itemsize for a in arrays if a.ndim == 2)
    if itemsize == 4:  # (wider words than a chunk of 32 or 64 elements: looped)
        assert emitted, name
        assert ("word_at" in emitted[0].source) == (width != 96), name
    _check_against_numpy(fn, arrays)


def test_windowed_chunks_on_a_gpu_compile_and_count_the_shift(coop_window):
    """On ``cuda``, rows of 150,001 float32 run cooperatively with the window switched on:
    layer norm in 19 chunks (150,001 + 3 over 8192), softmax in 37 (over 4096,
    ``COOP_WINDOW_SOFTMAX_CHUNK``), the chunk's and the stats function's counts shifted by
    the row's start in its word; softmax and layer norm compile for sm_90."""
    for name, chunks in (("softmax", 37), ("layer_norm", 19)):
        fn, make = CASES[name]
        arrays = [np.resize(a, (a.shape[0], 150_001) if a.ndim == 2 else (150_001,))
                  for a in make(8)]
        (emitted,) = _cooperative_kernels(fn, arrays, target="cuda")
        assert f"while (arrived < {chunks})" in emitted.source and "word_at" in emitted.source
        if name == "layer_norm":
            assert emitted.source.count("% 4  # the row's start in its 16-byte word") == 1
        for c in compile_all(emitted, 90, True):
            assert c.cubin[:4] == b"\x7fELF"


def test_forget_plans_makes_a_switched_heuristic_take_effect(cooperative, monkeypatch):
    """``runtime.forget_plans``: a realize after it emits under the switches now set (its plan
    and emitted sources are gone), where one before it reused the cached looped kernel."""
    from fusejit.runtime import kernel_cache
    x = _rng().standard_normal((3, 37)).astype(np.float32)

    def emitted_sources():
        return [e.source for e in kernel_cache._emit_cache.values()]
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    _run(_softmax, [x])
    assert emitted_sources() and not any("_finish(" in s for s in emitted_sources())
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
    _run(_softmax, [x])
    assert not any("_finish(" in s for s in emitted_sources())  # (cached: the switch unseen)
    runtime.forget_plans()
    assert not runtime._plans and not kernel_cache._emit_cache
    (got,) = _run(_softmax, [x])
    assert any("_finish(" in s for s in emitted_sources())
    assert_matches_numpy(got.numpy(), _softmax(np, x))


@pytest.mark.parametrize("width, limit", [(33, 16), (37, 32), (100, 64)])
@pytest.mark.parametrize("name", sorted(CASES))
def test_rows_in_equal_chunks_match_numpy(cooperative, monkeypatch, name, width, limit):
    """``heuristics.COOP_BALANCE`` (an experiment, off by default): a row that chunks of 16
    do not divide is split into equal chunks of whole 16-byte words (float32 rows of 33 in
    tiles of 16: 16, 16 and 1 -> three of 12; of 37 in tiles of 32: 32 and 5 -> two of 20;
    of 100 in tiles of 64: 64 and 36 -> two of 52), each tile masked past its span; the m2
    counts follow. Twice: the counters are zero again."""
    monkeypatch.setattr(heuristics, "COOP_BALANCE", True)
    monkeypatch.setattr(heuristics, "COOP_WINDOW", False)  # (37: unwindowed, balanced)
    monkeypatch.setitem(heuristics.PERSISTENT_LIMIT, "interpret", limit)
    fn, make = CASES[name]
    arrays = make(width)
    (emitted,) = _cooperative_kernels(fn, arrays)
    if all(a.dtype == np.float32 for a in arrays):  # (other widths: their own words)
        t = heuristics.cooperative_tiles("interpret", 8, width, 4, (4,))
        assert t.span, width
        assert f"covering {t.span} of the row's columns" in emitted.source, name
    _check_against_numpy(fn, arrays)


def test_equal_chunks_on_a_gpu(cooperative, monkeypatch):
    """On ``cuda``: rows of 150,000 float32 in 19 chunks of 7,896 columns (16-byte words,
    tiles of 8192 masked past them) where 18 of 8192 and one of 2,544 ran; rows that chunks
    divide, and windowed rows, keep whole chunks; float16 rows of 150,002 take words of 8."""
    monkeypatch.setattr(heuristics, "COOP_BALANCE", True)
    tiles = heuristics.cooperative_tiles
    t = tiles("cuda", 256, 150_000, 4, (4,))
    assert (t.chunks, t.block, t.span) == (19, 8192, 7896)
    assert tiles("cuda", 256, 1 << 18, 4, (4,)).span == 0
    assert tiles("cuda", 256, 150_001, 4, (4,), window=4).span == 0
    t16 = tiles("cuda", 256, 150_016, 4, (4, 2))
    assert t16.span % 8 == 0 and t16.chunks * t16.span >= 150_016
    with fj.using_backend("interpret"):  # (planned here, emitted and compiled for sm_90)
        for name in ("softmax", "layer_norm"):
            fn, make = CASES[name]
            arrays = [np.resize(a, (a.shape[0], 150_000) if a.ndim == 2 else (150_000,))
                      for a in make(8)]
            (emitted,) = _cooperative_kernels(fn, arrays, target="cuda")
            assert "col_mask = cols < tl.minimum(chunk * 7896 + 7896, 150000)" in emitted.source
            for c in compile_all(emitted, 90, True):
                assert c.cubin[:4] == b"\x7fELF"


@pytest.fixture
def pipelined(cooperative, monkeypatch):
    """Cooperative rows by a persistent grid whose programs take chunks in turn, each loading
    its next chunk before it waits for the row of the one it holds (``COOP_PIPELINE``, an
    experiment, off by default)."""
    monkeypatch.setattr(heuristics, "COOP_PIPELINE", True)


@pytest.mark.parametrize("width", [37, 64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_pipelined_cooperative_rows_match_numpy(pipelined, name, width):
    """Every case against NumPy, twice (the second launch finds the ticket counter the first
    zeroed: ``rows * chunks + programs`` tickets drawn). The interpreter runs its programs one
    after another, so the first takes every chunk: it meets rows that are complete (the
    write from the chunk held) and rows that are not (chunks given up, re-read by the row's
    last program)."""
    fn, make = CASES[name]
    arrays = make(width)
    kernels = _cooperative_kernels(fn, arrays)
    assert kernels and all("while ticket < " in e.source for e in kernels)
    _check_against_numpy(fn, arrays)


@pytest.mark.parametrize("width", [37, 30])
@pytest.mark.parametrize("name", ["softmax", "layer_norm", "sum_and_var_ints"])
def test_pipelined_windowed_rows_match_numpy(pipelined, coop_window, name, width):
    """Rows that are not 16-byte multiples (chunks laid from the row's first word), pipelined."""
    fn, make = CASES[name]
    arrays = make(width)
    assert _cooperative_kernels(fn, arrays)
    _check_against_numpy(fn, arrays)


@pytest.mark.parametrize("width", [1 << 18, 150_001])
@pytest.mark.parametrize("name", ["softmax", "layer_norm"])
def test_pipelined_kernels_compile_for_sm90(pipelined, monkeypatch, name, width):
    """The persistent form on ``cuda``: 2 programs an SM (264), no register cap (two chunks
    held), the values the write reads carried from one iteration to the next and the
    indices recomputed; it compiles for sm_90 (aligned and windowed rows)."""
    monkeypatch.setattr(heuristics, "COOP_WINDOW", True)
    fn, make = CASES[name]
    arrays = [np.resize(a, (3, width) if a.ndim == 2 else (width,)) for a in make(8)]
    (emitted,) = _cooperative_kernels(fn, arrays, target="cuda")
    (launch,) = emitted.launches
    takes = len(re.findall(r"\bpid_next = ", emitted.source))  # (the next chunk's, once)
    assert takes == 1 and launch.max_registers == 0
    src = emitted.source
    total = int(re.search(r"while ticket < (\d+):", src).group(1))  # (rows x chunks)
    assert launch.grid[0] == min(heuristics.COOP_PIPELINE_PROGRAMS_PER_SM * heuristics.SMS, total)
    assert f"if ticket_next == {total + launch.grid[0] - 1}:" in src  # (the last drawn)
    assert "while ticket < " in src and "ticket = ticket_next" in src
    assert "idx = " in src.split("while ticket < ")[1]  # (recomputed for the chunk held)
    for c in compile_all(emitted, 90, True):
        assert c.cubin[:4] == b"\x7fELF"
