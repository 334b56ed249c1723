"""The text IR: printing and parsing round trips, and parsed programs that run.

Round trips in both directions: ``parse(print(p)) == p`` on programs recorded
through the public API (canonical ones and Hypothesis-built ones), and
``print(parse(t)) == t`` on printer output, including hand-written fused text
with kernel blocks. Parsed programs run on the numpy backend to the values
the recorded tensors have.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fusejit as fj
from fusejit.ir.graph import lower
from fusejit.ir.parser import parse
from fusejit.ir.printer import print_program
from fusejit.ir.program import Instr, Kernel, Program

pytestmark = pytest.mark.usefixtures("numpy_backend")


# -- helpers ------------------------------------------------------------------------

def _canon(value):
    # NaN is never == NaN, so compare NaN constants through one shared object
    if isinstance(value, float) and math.isnan(value):
        return math.nan
    if isinstance(value, tuple):
        return tuple(_canon(v) for v in value)
    return value


def _canon_instr(i: Instr) -> Instr:
    return Instr(i.name, i.op, i.args, {k: _canon(v) for k, v in i.attrs.items()}, i.type)


def canonical(p: Program) -> Program:
    """``p`` with NaN attributes replaced by ``math.nan`` (for dataclass equality)."""
    body = []
    for s in p.body:
        if isinstance(s, Kernel):
            body.append(Kernel(s.name, s.results, s.args, s.params, [_canon_instr(i) for i in s.body],
                               s.yields, s.result_types, dict(s.attrs)))
        else:
            body.append(_canon_instr(s))
    return Program(p.name, p.inputs, body, p.outputs)


def record(*tensors: fj.Tensor) -> tuple[Program, list]:
    program, buffers, _ = lower([t._node for t in tensors])
    return program, buffers


def named(array: np.ndarray, name: str) -> fj.Tensor:
    return fj.asarray(array, name=name)  # input names show in the text as %name


def assert_round_trip(*tensors: fj.Tensor) -> str:
    """Print, parse, compare both ways, run the parsed program against the tensors."""
    program, buffers = record(*tensors)
    text = print_program(program)
    parsed = parse(text)
    assert canonical(parsed) == canonical(program)
    assert print_program(parsed) == text
    got = parsed.run(*buffers)
    for t, g in zip(tensors, got):
        want = t.numpy()
        assert g.dtype == want.dtype and g.shape == want.shape
        np.testing.assert_array_equal(g, want)
    return text


RNG = np.random.default_rng(0)


def rand(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- canonical programs --------------------------------------------------------------

def test_softmax_text_is_canonical() -> None:
    x = named(rand((4, 8)), "x")
    w = named(rand((8,)), "w")
    y = fj.softmax(x, axis=1) * w
    text = assert_round_trip(y, x.max(axis=1))
    assert text.startswith("# fusejit ir v1\nfunc @main(%x: f32[4,8], %w: f32[8]) -> f32[4,8], f32[4] {\n")
    assert "  %0 = max %x axes=[1] keepdims : f32[4,1]\n" in text
    assert "  %1 = expand %0 shape=[4,8] : f32[4,8]\n" in text
    assert text.endswith("}\n")


def test_layernorm_and_rmsnorm() -> None:
    x = named(rand((6, 16)), "x")
    assert_round_trip(fj.layer_norm(x, axis=-1) if hasattr(fj, "layer_norm") else x - x.mean(axis=1,
                      keepdims=True))
    assert_round_trip(x / fj.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6))


def test_slices_with_negative_steps() -> None:
    x = named(rand((5, 7, 3)), "x")
    text = assert_round_trip(x[::-1, 5:0:-2, 1:], x[::-1, ::-1, ::-1] + 1, x[4:1:-1])
    assert "stop=[-1," in text
    assert_round_trip(x[2:2])  # empty


def test_consts_exact_and_special() -> None:
    x = named(rand((3,)), "x")
    f32, f16 = np.float32, np.float16
    outs = [x + fj.full((3,), 1e-6, f32), x * fj.full((3,), np.inf, f32),
            x + fj.full((3,), -np.inf, f32), x + fj.full((3,), np.nan, f32),
            fj.full((2,), -0.0, dtype=f16), fj.full((3,), 0.1, f16), fj.full((), 3, dtype=np.int8)]
    text = assert_round_trip(*outs)
    assert "const 0x1.0c6f7ap-20 : f32[3]  # 1e-06" in text
    assert "const inf : f32[3]" in text and "const -inf : f32[3]" in text
    assert "const nan : f32[3]" in text
    assert "const -0x0.0p+0 : f16[2]  # -0.0" in text
    assert "const 0x1.998p-4 : f16[3]  # 0.1" in text
    assert "const 3 : i8[]" in text
    # negative zero survives as negative zero
    parsed = parse(text)
    neg = [i for i in parsed.body if i.op == "const" and i.dtype == np.float16 and i.shape == (2,)]
    assert math.copysign(1.0, neg[0].attrs["value"]) == -1.0


def test_python_scalars_are_scalar_params_with_exact_values() -> None:
    x = named(rand((3,)), "x")
    h = named(rand((3,), np.float16), "h")
    outs = [x + 1e-6, x * np.inf, x + -np.inf, x + np.nan, x * -0.0, h * 0.1, h + 65504.0,
            x + np.float32(2.5)]
    program, buffers = record(*outs)
    text = assert_round_trip(*outs)
    assert "const" not in text
    values = {p.name: b for p, b in zip(program.inputs, buffers) if p.scalar}
    params = {p.name: p for p in program.inputs if p.scalar}
    assert "%s0: f32" in text and "%s5: f16" in text  # scalar params: the dtype, no shape
    assert values["s0"] == np.float32(1e-6) and values["s0"].dtype == np.float32
    assert values["s1"] == np.inf and values["s2"] == -np.inf and np.isnan(values["s3"])
    assert math.copysign(1.0, values["s4"]) == -1.0
    assert values["s5"] == np.float16(0.1) and params["s5"].type.dtype == np.float16
    assert values["s7"] == np.float32(2.5)
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                   np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                   np.float64])
def test_every_dtype(dtype) -> None:
    a = (RNG.integers(0, 2, (2, 3)) if dtype is np.bool_ else RNG.integers(1, 9, (2, 3))).astype(dtype)
    x = named(a, "x")
    if dtype is np.bool_:
        outs = [x & True, fj.logical_not(x), x.any(axis=0), fj.where(x, x, False)]
    else:
        outs = [x + 1, x.max(axis=1), x.T, x.astype(np.float64), fj.arange(3, dtype=dtype) + x[0]]
    text = assert_round_trip(*outs)
    assert f"%x: {fj.ir.program.TensorType(np.dtype(dtype), (2, 3))}" in text


def test_iota_and_casts_and_where() -> None:
    x = named(rand((4,)), "x")
    i = fj.arange(4)
    f = fj.arange(0.5, 2.5, 0.5, dtype=np.float32)
    text = assert_round_trip(i * 2, f + x, fj.where(x > 0, x, f), (x > 0).astype(np.int32))
    assert "iota start=0 step=1 : i64[4]" in text
    assert "iota start=0x1.0p-1 step=0x1.0p-1 : f32[4]" in text
    assert "cast %" in text


def test_zero_dim_and_reductions_to_scalar() -> None:
    x = named(rand((3, 4)), "x")
    assert_round_trip(x.sum(), x.argmax(axis=0), fj.asarray(np.float32(2.0)) * 3)


# -- fused text: kernel blocks -----------------------------------------------------

FUSED = """\
# fusejit ir v1
func @main(%x: f32[4,8], %w: f32[8]) -> f32[4,8], f32[4] {
  %6, %9 = kernel @softmax_0(%x, %w) kind=inner_reduction block=[64,1024] warps=4 -> f32[4,8], f32[4] {
  ^(%x: f32[4,8], %w: f32[8]):
    %0 = max %x axes=[1] keepdims : f32[4,1]
    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = sub %x, %1 : f32[4,8]
    %3 = exp %2 : f32[4,8]
    %4 = sum %3 axes=[1] keepdims : f32[4,1]
    %5 = expand %4 shape=[4,8] : f32[4,8]
    %6 = div %3, %5 : f32[4,8]
    %7 = reshape %w shape=[1,8] : f32[1,8]
    %8 = expand %7 shape=[4,8] : f32[4,8]
    %9 = mul %6, %8 : f32[4,8]
    %10 = max %x axes=[1] : f32[4]
    yield %9, %10
  }
  %10 = kernel @neg_1(%6) kind=pointwise -> f32[4,8] {
  ^(%a: f32[4,8]):
    %0 = neg %a : f32[4,8]
    yield %0
  }
  return %10, %9
}
"""


def test_fused_text_round_trips_and_runs() -> None:
    program = parse(FUSED)
    assert print_program(program) == FUSED
    assert parse(print_program(program)) == program
    k = program.kernels[0]
    assert k.kind == "inner_reduction" and k.attrs["block"] == (64, 1024) and k.attrs["warps"] == 4
    assert k.results == ("6", "9") and k.args == ("x", "w") and k.yields == ("9", "10")
    assert (k.line, k.column) == (3, 3)
    x, w = rand((4, 8)), rand((8,))
    neg, mx = program.run(x=x, w=w)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(neg, -(e / e.sum(axis=1, keepdims=True)) * w, rtol=1e-6)
    np.testing.assert_array_equal(mx, x.max(axis=1))


def test_comments_and_free_layout_parse() -> None:
    text = ("func @f(%a: i32[2]) -> i32[2] {  # the signature\n"
            "  %b = add %a,%a:i32[2]\n\n  # a comment line\n"
            "  %c=mul %b, %a : i32[2] return %c }")
    p = parse(text)
    assert [i.op for i in p.body] == ["add", "mul"]
    assert (p.body[1].line, p.body[1].column) == (5, 3)
    assert p.run(np.array([1, 2], np.int32))[0].tolist() == [2, 8]


def test_positions_recorded() -> None:
    x = named(rand((2, 2)), "x")
    program, _ = record(fj.exp(x) + 1)
    parsed = parse(print_program(program))
    assert [(i.line, i.column) for i in parsed.body] == [(3, 3), (4, 3)]


def test_public_api_dump_parse_load(tmp_path) -> None:
    x = named(rand((3, 5)), "x")
    y = (x * 2).sum(axis=1)
    path = tmp_path / "prog.fir"
    text = fj.dump(y, path=path)
    assert path.read_text() == text
    assert fj.parse(text) == fj.load(path)
    program = fj.load(path)
    assert program.outputs == ("1",) and [str(t) for t in program.output_types] == ["f32[3]"]
    assert [str(p.type) for p in program.inputs] == ["f32[3,5]", "f32[]"]  # x, and 2 as %s0
    np.testing.assert_allclose(program.run(x=x.numpy(), s0=2.0)[0], y.numpy(), rtol=1e-6)
    np.testing.assert_allclose(program.run(x.numpy(), 3)[0], (x * 3).sum(axis=1).numpy(),
                               rtol=1e-6)
    assert "dump" in fj.__all__ and "parse" in fj.__all__ and "load" in fj.__all__


def test_dump_fused_is_parseable() -> None:
    x = named(rand((4, 8)), "x")
    text = fj.dump(fj.softmax(x, axis=1), fused=True)
    program = fj.parse(text)
    assert print_program(program) == text


def test_edited_text_runs() -> None:
    x = named(rand((3,)), "x")
    text = fj.dump(x + 1)
    edited = text.replace("add", "mul")
    np.testing.assert_allclose(fj.parse(edited).run(x.numpy(), 1.0)[0], x.numpy() * 1)
    # a scalar param can be edited into a literal constant, and back
    literal = text.replace(", %s0: f32)", ")").replace(
        "  %0 = add %x, %s0 : f32[3]", "  %c = const 4.0 : f32[3]\n  %0 = add %x, %c : f32[3]")
    np.testing.assert_allclose(fj.parse(literal).run(x.numpy())[0], x.numpy() + 4)


# -- Hypothesis: random programs built through the public API ---------------------------

FLOATS = [np.float32, np.float64, np.float16]
INTS = [np.int8, np.int32, np.int64, np.uint8]


@st.composite
def programs(draw):
    """Random chains of elementwise, reduction, view and cast ops over 1-2 inputs."""
    dtype = np.dtype(draw(st.sampled_from(FLOATS + INTS)))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)

    def data(shape, dt):
        if dt.kind == "f":
            return rng.uniform(-3, 3, shape).astype(dt)
        return rng.integers(1, 5, shape).astype(dt)

    xs = [named(data(shape, dtype), "x"), named(data(shape[-1:], dtype), "y")]
    t = xs[0]
    outs = []
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["unary", "binary", "scalar", "reduce", "view", "slice",
                                     "cast", "where", "output"]))
        if kind == "unary":
            fn = draw(st.sampled_from(["negative", "abs", "square"] + (
                ["exp", "tanh", "sqrt"] if t.dtype.kind == "f" else [])))
            t = getattr(fj, fn)(t if fn != "sqrt" else fj.abs(t))
        elif kind == "binary":
            other = xs[1] if t.ndim >= 1 and t.shape[-1:] == xs[1].shape else t
            t = getattr(fj, draw(st.sampled_from(["add", "multiply", "maximum", "subtract"])))(t, other)
        elif kind == "scalar":
            value = draw(st.sampled_from([2, 0.5, -1.25, 1e-6, 3]))
            t = t * value if t.dtype.kind == "f" or isinstance(value, int) else t + 1
        elif kind == "reduce" and t.ndim >= 1:
            axis = draw(st.integers(0, t.ndim - 1))
            fn = draw(st.sampled_from(["sum", "max", "min", "argmax"])) if t.size else "sum"
            if fn == "argmax":
                t = t.argmax(axis=axis)
            else:
                t = getattr(t, fn)(axis=axis, keepdims=draw(st.booleans()))
        elif kind == "view" and t.ndim >= 1:
            choice = draw(st.sampled_from(["T", "reshape", "expand"]))
            if choice == "T":
                t = t.T
            elif choice == "reshape":
                t = t.reshape(-1)
            else:
                t = fj.broadcast_to(t, (2, *t.shape))
        elif kind == "slice" and t.ndim >= 1:
            n = t.shape[0]
            start = draw(st.integers(-n, n))
            stop = draw(st.integers(-n - 1, n))
            step = draw(st.sampled_from([1, 2, -1, -2]))
            t = t[start:stop:step]
        elif kind == "cast":
            t = t.astype(draw(st.sampled_from(FLOATS + INTS)))
        elif kind == "where":
            t = fj.where(t > 1, t, t * 2)
        elif kind == "output":
            outs.append(t)
    outs.append(t)
    return outs


@given(programs())
def test_random_programs_round_trip_and_run(outs) -> None:
    with np.errstate(all="ignore"):
        assert_round_trip(*outs)
