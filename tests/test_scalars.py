"""Scalars are parameters: Python and NumPy scalars of a recorded program are scalar params
(passed to kernels by value), in the graph, the IR text, the verifier, the fuser, the
emitter and every backend; values are specialized only where NumPy's result depends on them.
"""

from __future__ import annotations

import numpy as np
import pytest

import fusejit as fj
from fusejit import fuse, runtime
from fusejit.errors import InputError, IRSyntaxError, IRVerifyError
from fusejit.ir.graph import MAX_SCALAR_LEAVES, lower
from fusejit.ir.parser import parse
from fusejit.ir.printer import print_program
from fusejit.testing import assert_matches_numpy

X = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)

SCALARS = """\
# fusejit ir v1
func @main(%x: f32[4,8], %a: f32, %n: i32) -> f32[4,8], f32[4] {
  %0 = mul %x, %a : f32[4,8]
  %1 = cast %n : f32[]
  %2 = reshape %1 shape=[1,1] : f32[1,1]
  %3 = expand %2 shape=[4,8] : f32[4,8]
  %4 = add %0, %3 : f32[4,8]
  %5 = sum %4 axes=[1] : f32[4]
  return %4, %5
}
"""


def test_scalar_params_in_text_round_trip_and_run() -> None:
    program = parse(SCALARS)
    assert [(p.name, p.scalar) for p in program.inputs] == [("x", False), ("a", True), ("n", True)]
    assert print_program(program) == SCALARS
    assert parse(print_program(program)) == program
    for backend in ("numpy", "interpret"):
        if backend == "interpret":
            pytest.importorskip("triton")
        with fj.using_backend(backend):
            y, s = program.run(X, 2.5, 3)
            assert_matches_numpy(y, X * 2.5 + 3)
            assert_matches_numpy(s, (X * 2.5 + 3).sum(axis=1), rtol=1e-5)
            y, _ = program.run(x=X, a=np.float32(-1), n=np.int32(7))
            assert_matches_numpy(y, -X + 7)


def test_fused_text_passes_scalars_to_kernels() -> None:
    x = fj.asarray(X, name="x")
    text = fj.dump(fj.softmax(x * 3.0) + 1, fused=True)
    assert "func @main(%x: f32[4,8], %s0: f32, %s1: f32)" in text
    assert "^(%x: f32[4,8], %s0: f32, %s1: f32):" in text
    program = fj.parse(text)
    assert print_program(program) == text
    out = program.run(X, 3.0, 1.0)[0]
    e = np.exp(X * 3 - (X * 3).max(axis=1, keepdims=True))
    assert_matches_numpy(out, e / e.sum(axis=1, keepdims=True) + 1)


@pytest.mark.parametrize("text, message", [
    (SCALARS.replace("return %4, %5", "return %4, %a").replace("-> f32[4,8], f32[4]", "-> f32[4,8], f32[]"),
     "return of '%a', a scalar param"),
    (SCALARS.replace("%x: f32[4,8], %a: f32", "%x: f32[4,8], %a: f32[]"),
     "shape mismatch: operand '%a' is f32"),
    ("""\
# fusejit ir v1
func @main(%x: f32[4], %a: f32) -> f32[4] {
  %0 = kernel @k(%x, %a) kind=pointwise -> f32[4] {
  ^(%p: f32[4], %q: f32[]):
    %1 = mul %p, %q : f32[4]
    yield %1
  }
  return %0
}
""", "param '%q' is declared a buffer but its operand '%a' is a scalar param"),
    ("""\
# fusejit ir v1
func @main(%x: f32[4], %a: f32) -> f32[] {
  %0 = kernel @k(%a) kind=pointwise -> f32[] {
  ^(%q: f32):
    yield %q
  }
  return %0
}
""", "yields '%q', a scalar param"),
])
def test_verifier_rules_for_scalar_params(text: str, message: str) -> None:
    with pytest.raises(IRVerifyError, match=message):
        parse(text)


def test_unknown_scalar_dtype_is_a_syntax_error() -> None:
    with pytest.raises(IRSyntaxError, match="unknown dtype 'f33'"):
        parse(SCALARS.replace("%a: f32,", "%a: f33,"))


def test_run_checks_scalar_values() -> None:
    program = parse(SCALARS)
    with pytest.raises(InputError, match="cannot take the Python float"):
        program.run(X, 1.0, 2.5)  # a float for an i32 param
    with pytest.raises(InputError, match="out of bounds for int32"):
        program.run(X, 1.0, 2**40)
    with pytest.raises(InputError, match="expected dtype float32, got float64"):
        program.run(X, np.float64(1.0), 2)
    with pytest.raises(InputError, match="expected a Python or NumPy scalar"):
        program.run(X, np.ones(2, np.float32), 2)


def test_all_scalar_operands_broadcast_to_the_result() -> None:
    text = """\
# fusejit ir v1
func @main(%a: f32, %b: f32) -> f32[3] {
  %0 = mul %a, %b : f32[3]
  return %0
}
"""
    program = parse(text)
    for backend in ("numpy", "interpret"):
        if backend == "interpret":
            pytest.importorskip("triton")
        with fj.using_backend(backend):
            assert_matches_numpy(program.run(2.0, 3.0)[0], np.full(3, 6.0, np.float32))


def test_new_values_share_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_plans", {})
    fuse.clear_cache()
    runs = fuse.stats["fusion_runs"]
    x = fj.asarray(X)
    for v in (0.5, -2.0, 1e30, float("nan"), float("-inf"), 7):
        with np.errstate(all="ignore"):
            assert_matches_numpy(x * v + 1, X * np.float32(v) + 1)
    assert fuse.stats["fusion_runs"] - runs == 1  # the int 7 is a float32 parameter too
    assert (x * 2.0)._node.sig == (x * 3.0)._node.sig


def test_python_scalars_follow_weak_promotion_and_round_once() -> None:
    h = fj.asarray(X.astype(np.float16))
    i8 = fj.asarray(np.arange(-4, 4, dtype=np.int8))
    u64 = fj.asarray(np.arange(4, dtype=np.uint64))
    for got, want in (
            (h * 0.1, X.astype(np.float16) * 0.1),
            (h + 65519.0, X.astype(np.float16) + 65519.0),  # rounds to inf in float16
            (i8 * 3 - 100, np.arange(-4, 4, dtype=np.int8) * 3 - 100),
            (u64 + (2**64 - 3), np.arange(4, dtype=np.uint64) + (2**64 - 3)),
            (i8 * np.int16(300), np.arange(-4, 4, dtype=np.int8) * np.int16(300)),
            (fj.asarray(X) + np.float64(0.1), X + np.float64(0.1))):
        with np.errstate(all="ignore"):
            assert_matches_numpy(got, want)


def test_values_numpy_depends_on_are_specialized_and_explained() -> None:
    x = fj.asarray(np.abs(X) + 1, name="x")
    i = fj.asarray(np.arange(8, dtype=np.int8), name="i")
    outs = (x ** 2, x ** 0.5, x ** -1, fj.power(x, 0.5), x ** 3.0, i < 300, i ** 2)
    plan = fj.plan(*outs)
    explained = plan.explain()
    assert "x ** 2 computed as square(x)" in explained
    assert "x ** 0.5 computed as sqrt(x)" in explained
    assert "x ** -1 computed as reciprocal(x)" in explained
    assert "power(x, 0.5) computed as sqrt(x)" in explained
    assert "< 300 on int8 is True everywhere" in explained
    assert [p.scalar for p in plan.program.inputs].count(True) == 1  # only 3.0 is a parameter
    a, n = np.abs(X) + 1, np.arange(8, dtype=np.int8)
    for got, want in zip(outs, (a ** 2, a ** 0.5, a ** -1, np.power(a, 0.5), a ** 3.0, n < 300,
                                n ** 2)):
        assert_matches_numpy(got, want)


def test_a_graph_gets_a_bounded_number_of_scalar_params() -> None:
    x = fj.asarray(np.zeros(3, np.float32))
    y = x
    for k in range(200):
        y = y + float(k)
    program, buffers, _ = lower([y._node])
    assert sum(p.scalar for p in program.inputs) == MAX_SCALAR_LEAVES - 1
    assert_matches_numpy(y, np.full(3, sum(range(200)), np.float32))


def test_numpy_scalar_realized_alone() -> None:
    from fusejit.frontend.tensor import _operand
    t = _operand(np.float32(2.5))
    assert isinstance(t, fj.Tensor)
    assert_matches_numpy(t, np.float32(2.5))
    assert t.is_realized


def test_cli_run_takes_scalar_values(tmp_path) -> None:
    from fusejit.cli import main
    path = tmp_path / "p.fir"
    path.write_text(SCALARS)
    np.save(tmp_path / "x.npy", X)
    out = tmp_path / "out.npz"
    assert main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--input", "a=0.5",
                 "--input", "n=-2", "--output", str(out), "--backend", "numpy"]) == 0
    with np.load(out) as saved:
        assert_matches_numpy(saved["4"], X * 0.5 - 2)
    assert main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--input", "a=abc",
                 "--input", "n=1"]) == 1


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "uint16",
                                   "uint32", "int64", "uint64"])
def test_scalar_kernels_compile_for_sm90(dtype: str, tmp_path, monkeypatch) -> None:
    pytest.importorskip("triton")
    from fusejit.codegen import emit_kernel
    from fusejit.runtime.compile import compile_all
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    x = fj.asarray(np.ones(64, dtype))
    value = np.array(3, dtype)[()]
    (kernel,) = fj.plan(fj.where(x > value, x * value, x - 1)).program.kernels
    emitted = emit_kernel(kernel, None, "cuda")
    assert any(t in emitted.launches[0].signature.values() for t in ("fp32", "fp64", "i32", "i64"))
    for divisible in (True, False):
        for compiled in compile_all(emitted, 90, divisible):
            assert compiled.cubin[:4] == b"\x7fELF"


MIXED = """\
# fusejit ir v1
func @main(%x: f32[5], %b: bool, %k: i8, %u: u64) -> f32[5], i8[5], u64[5] {
  %0 = neg %x : f32[5]
  %1 = reshape %b shape=[1] : bool[1]
  %2 = expand %1 shape=[5] : bool[5]
  %3 = where %2, %x, %0 : f32[5]
  %4 = cast %x : i8[5]
  %5 = add %4, %k : i8[5]
  %6 = cast %x : u64[5]
  %7 = add %6, %u : u64[5]
  return %3, %5, %7
}
"""


def test_bool_int8_and_uint64_params_from_text(tmp_path, monkeypatch) -> None:
    """Params the frontend never makes (bool) or passes specially (uint64 as its bits, int8
    as an int32): views of a scalar param too; interpreted, and compiled for sm_90."""
    program = parse(MIXED)
    x = np.arange(5, dtype=np.float32)
    backends = ["numpy"]
    try:
        import triton  # noqa: F401
        backends.append("interpret")
    except ImportError:
        pass
    for backend in backends:
        with fj.using_backend(backend):
            for b in (True, False):
                y, k, u = program.run(x, b, 100, 2**64 - 3)
                assert_matches_numpy(y, x if b else -x)
                assert_matches_numpy(k, x.astype(np.int8) + np.int8(100))
                assert_matches_numpy(u, x.astype(np.uint64) + np.uint64(2**64 - 3))
    if "interpret" not in backends:
        return
    from fusejit.codegen import emit_kernel
    from fusejit.fuse import plan_for
    from fusejit.runtime.compile import compile_all
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    for kernel in plan_for(program).program.kernels:
        emitted = emit_kernel(kernel, None, "cuda")
        assert {"s_b": "i32", "s_k": "i32", "s_u": "i64"}.items() <= \
            emitted.launches[0].signature.items()
        for compiled in compile_all(emitted, 90, True):
            assert compiled.cubin[:4] == b"\x7fELF"


@pytest.mark.gpu
@pytest.mark.skipif(not runtime.gpu_available(), reason="needs CuPy and a CUDA GPU")
def test_gpu_text_scalar_params() -> None:
    import cupy as cp
    program = parse(MIXED)
    x = np.arange(5, dtype=np.float32)
    with fj.using_backend("cuda"):
        for b in (True, False):
            y, k, u = program.run(cp.asarray(x), b, 100, 2**64 - 3)
            assert isinstance(y, cp.ndarray)
            assert_matches_numpy(y.get(), x if b else -x)
            assert_matches_numpy(k.get(), x.astype(np.int8) + np.int8(100))
            assert_matches_numpy(u.get(), x.astype(np.uint64) + np.uint64(2**64 - 3))
        y, _ = parse(SCALARS).run(cp.asarray(X), np.float32(2.5), 3)
        assert_matches_numpy(y.get(), X * 2.5 + 3)


def test_a_scalar_parameter_operand_records_the_same_graph_every_time() -> None:
    # the tensor-op-tensor fast path memoized a recording with a scalar parameter as its
    # operand and replayed it with the cast-and-broadcast of a 0-d input: the first
    # x * s recorded mul(x, s), every later one mul(x, expand(reshape(s))), another plan
    from fusejit.frontend.tensor import _FAST, Tensor
    from fusejit.ir.graph import make_scalar
    f32 = np.dtype(np.float32)
    memos = _FAST["multiply"]
    saved = [dict(m) for m in memos]
    for m in memos:
        m.clear()  # as in a fresh process: the first recording of this kind
    try:
        x = fj.asarray(np.ones((3, 4), np.float32))
        nodes = [(x * Tensor(make_scalar(np.float32(v), f32)))._node for v in (1.5, 2.5, 3.5)]
    finally:
        for m, old in zip(memos, saved):
            m.clear()
            m.update(old)
    assert {n.sig for n in nodes} == {nodes[0].sig}
    assert all(n.srcs[1].op == "scalar" for n in nodes)
