"""Errors in IR text: each kind names the right line and column, in a sentence.

Also: ``program.run`` input mismatches, the verifier's region-check hook, and
a seeded fuzz test that damages valid text thousands of ways and requires
every failure to be a ``FusejitError`` (never a Lark or Python exception).
"""

from __future__ import annotations

import os
import random
import re

import numpy as np
import pytest

import fusejit as fj
from fusejit.errors import FusejitError, InputError, IRError, IRSyntaxError, IRVerifyError, excerpt
from fusejit.ir.parser import parse, parse_unverified
from fusejit.ir.printer import print_program
from fusejit.ir.program import Instr, Param, Program, TensorType
from fusejit.ir.verify import verify

BASE = """\
# fusejit ir v1
func @main(%x: f32[4,8], %w: f32[8]) -> f32[4,8], f32[4] {
  %0 = max %x axes=[1] keepdims : f32[4,1]
  %1 = expand %0 shape=[4,8] : f32[4,8]
  %2 = sub %x, %1 : f32[4,8]
  %3 = sum %2 axes=[1] : f32[4]
  return %2, %3
}
"""

KERNEL = """\
# fusejit ir v1
func @main(%x: f32[4,8], %w: f32[8]) -> f32[4,8] {
  %1 = kernel @scale_0(%x, %w) kind=pointwise -> f32[4,8] {
  ^(%a: f32[4,8], %b: f32[8]):
    %0 = reshape %b shape=[1,8] : f32[1,8]
    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = mul %a, %1 : f32[4,8]
    yield %2
  }
  return %1
}
"""


def replace_line(text: str, line: int, new: str) -> str:
    lines = text.split("\n")
    lines[line - 1] = new
    return "\n".join(lines)


def error_of(text: str, cls: type[IRError], line: int, column: int, *words: str) -> IRError:
    """Parse ``text``, expect ``cls`` at ``line:column`` with ``words`` in the message."""
    with pytest.raises(cls) as info:
        parse(text, filename="t.fir")
    exc = info.value
    assert (exc.line, exc.column) == (line, column), str(exc)
    for w in words:
        assert w in exc.message, exc.message
    rendered = str(exc)
    assert rendered.startswith(f"t.fir:{line}:{column}: ")
    # the offending line (around the column when it is long), then a caret under the column
    _, shown, caret = rendered.split("\n")
    source, at = excerpt(text.split("\n")[line - 1], column)
    assert shown == "  " + source
    assert caret == "  " + " " * (at - 1) + "^"
    return exc


def test_base_texts_are_valid() -> None:
    assert print_program(parse(BASE)) == BASE
    assert print_program(parse(KERNEL)) == KERNEL


# -- syntax ---------------------------------------------------------------------------

def test_missing_colon_and_type() -> None:
    text = replace_line(BASE, 5, "  %2 = sub %x, %1 f32[4,8]")
    error_of(text, IRSyntaxError, 5, 22, "expected ':' and a type after the operands", "found '['")


def test_missing_equals() -> None:
    error_of(replace_line(BASE, 5, "  %2 sub %x, %1 : f32[4,8]"), IRSyntaxError, 5, 6,
             "expected '=' after the result name")


def test_unexpected_end_of_input() -> None:
    text = BASE[:BASE.index("  return")]
    exc = error_of(text, IRSyntaxError, 6, 32, "found end of input")
    assert "'return'" in exc.message


def test_bad_character_in_name() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %$1 : f32[4,8]"), IRSyntaxError, 5, 16,
             "'%' must be followed by a name")


def test_lark_never_leaks() -> None:
    with pytest.raises(IRSyntaxError) as info:
        parse("func @main( -> {")
    assert info.value.__cause__ is None and info.value.__suppress_context__
    assert "lark" not in str(info.value).lower()


def test_unknown_op_suggests_closest() -> None:
    error_of(replace_line(BASE, 5, "  %2 = subb %x, %1 : f32[4,8]"), IRSyntaxError, 5, 8,
             "unknown op 'subb'", "did you mean 'sub'?")


def test_unknown_dtype_suggests_closest() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %1 : f31[4,8]"), IRSyntaxError, 5, 21,
             "unknown dtype 'f31'", "did you mean 'f32'?")


def test_negative_dimension() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %1 : f32[4,-8]"), IRSyntaxError, 5, 27,
             "non-negative integer")


def test_instruction_with_two_results() -> None:
    error_of(replace_line(BASE, 5, "  %2, %9 = sub %x, %1 : f32[4,8]"), IRSyntaxError, 5, 7,
             "exactly one value")


def test_positional_value_only_on_const() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %1 7 : f32[4,8]"), IRSyntaxError, 5, 19,
             "takes no positional value")


def test_huge_number_is_an_error_not_a_crash() -> None:
    error_of(replace_line(BASE, 5, f"  %2 = const {'9' * 5000} : f32[4,8]"), IRSyntaxError, 5, 14,
             "out of range")


@pytest.mark.parametrize("name", ['x"); import os; ("', "x y", "x\ny", "é", "x.y", "__import__('os')"])
def test_names_cannot_carry_code(name: str) -> None:
    # neither the parser nor the printer lets anything but [A-Za-z0-9_] into a name
    with pytest.raises(IRSyntaxError):
        parse(BASE.replace("%w", "%" + name))
    bad = Program("main", (Param(name, TensorType(np.dtype("float32"), ())),), [], (name,))
    with pytest.raises(IRError):
        print_program(bad)
    with pytest.raises(IRSyntaxError):
        parse(BASE.replace("@main", "@" + name))


# -- verifier ---------------------------------------------------------------------------

def test_use_before_def() -> None:
    error_of(replace_line(BASE, 3, "  %0 = max %1 axes=[1] keepdims : f32[4,1]"), IRVerifyError, 3, 3,
             "'%1' is used before it is defined", "line 4")


def test_undefined_value() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %nope : f32[4,8]"), IRVerifyError, 5, 3,
             "'%nope' is not defined")


def test_redefinition() -> None:
    error_of(replace_line(BASE, 5, "  %1 = sub %x, %1 : f32[4,8]"), IRVerifyError, 5, 3,
             "'%1' is defined twice", "line 4")


def test_redefining_an_input() -> None:
    error_of(replace_line(BASE, 5, "  %x = sub %x, %1 : f32[4,8]"), IRVerifyError, 5, 3, "defined twice")


def test_bad_result_dtype() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %1 : i32[4,8]"), IRVerifyError, 5, 3,
             "bad dtype", "gives f32, not i32")


def test_operand_dtype_mismatch() -> None:
    text = BASE.replace("%w: f32[8]", "%w: f64[4,8]")
    error_of(replace_line(text, 5, "  %2 = sub %x, %w : f32[4,8]"), IRVerifyError, 5, 3,
             "dtype mismatch", "f32, f64")


@pytest.mark.parametrize("op", ["neg", "sign", "sub", "square", "rint", "floordiv", "mod",
                                "pow"])
def test_bool_ops_numpy_has_no_bool_loop_for_are_errors_at_their_line(op: str) -> None:
    """An op on bool operands where NumPy has no bool -> bool loop (``-b``, ``sign``, ``b - c``
    raise; ``square``, ``rint``, ``//``, ``%``, ``**`` compute in int8 or float16) is a verifier
    error at its line. Found by editing dumped text at random (thirty-first session):
    ``sub`` of bools raised NumPy's own TypeError from the ``numpy`` backend while
    ``interpret`` returned values, and ``mod`` of bools gave ``True % False`` as False on one
    backend and True on the other. The frontend never makes these (it casts bools as NumPy
    does first), so only written text meets the error."""
    unary = op in ("neg", "sign", "square", "rint")
    args = "%a" if unary else "%a, %b"
    text = (f"func @f(%a: bool[3], %b: bool[3]) -> bool[3] {{\n  %c = {op} {args} : bool[3]\n"
            f"  return %c\n}}\n")
    error_of(text, IRVerifyError, 2, 3, f"'{op}' of bool is not an op")


def test_bool_ops_numpy_has_a_bool_loop_for_run_as_numpy_does() -> None:
    """The bool ops that stay (NumPy's bool loops): each agrees with NumPy on both backends."""
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    for op, want in (("add", a | b), ("mul", a & b), ("maximum", a | b), ("minimum", a & b),
                     ("abs", a), ("floor", a), ("bitnot", ~a), ("bitxor", a ^ b)):
        args = "%a" if op in ("abs", "floor", "bitnot") else "%a, %b"
        text = (f"func @f(%a: bool[4], %b: bool[4]) -> bool[4] {{\n"
                f"  %c = {op} {args} : bool[4]\n  return %c\n}}\n")
        for backend in ("numpy", "interpret"):
            with fj.using_backend(backend):
                (got,) = parse(text).run(a, b)
            np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{op} {backend}")


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin", "sumexp"])
def test_a_reduction_without_identity_over_no_elements_is_an_error_at_its_line(op: str) -> None:
    """``min`` (and ``max``, ``argmin``, ``argmax``, ``sumexp``) over an extent of 0 has no
    identity: NumPy raises, and the frontend refuses it when recorded (``ShapeError``). In
    written text it passed the verifier and the ``numpy`` backend raised NumPy's own
    ValueError (found by random edits of IR text, thirty-first session). It is now an error
    at its line; a reduction over a kept empty axis (no rows of 3) stays valid."""
    dtype = "f32"
    result = "i64" if op.startswith("arg") else dtype
    text = (f"func @f(%a: {dtype}[2,0]) -> {result}[2] {{\n"
            f"  %b = {op} %a axes=[1] : {result}[2]\n  return %b\n}}\n")
    error_of(text, IRVerifyError, 2, 3, f"'{op}' over no elements")
    kept = (f"func @f(%a: {dtype}[0,3]) -> {result}[0] {{\n"
            f"  %b = {op} %a axes=[1] : {result}[0]\n  return %b\n}}\n")
    for backend in ("numpy", "interpret"):
        with fj.using_backend(backend):
            (got,) = parse(kept).run(np.zeros((0, 3), np.float32))
        assert np.asarray(got).shape == (0,)


def test_float_only_op_on_ints() -> None:
    text = "func @f(%a: i32[3]) -> i32[3] {\n  %b = exp %a : i32[3]\n  return %b\n}\n"
    error_of(text, IRVerifyError, 2, 3, "'exp' needs float operands")


def test_elementwise_shape_mismatch() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %0 : f32[4,8]"), IRVerifyError, 5, 3,
             "shape mismatch", "'%0' is f32[4,1]")


def test_wrong_operand_count() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x : f32[4,8]"), IRVerifyError, 5, 3,
             "'sub' takes 2 operands, got 1")


@pytest.mark.parametrize("axes, words", [("[2]", "bad axes [2]"), ("[1,0]", "sorted and unique"),
                                         ("[1,1]", "sorted and unique"), ("x", "list of integers")])
def test_bad_axes(axes: str, words: str) -> None:
    error_of(replace_line(BASE, 6, f"  %3 = sum %2 axes={axes} : f32[4]"), IRVerifyError, 6, 3, words)


def test_reduction_result_shape() -> None:
    error_of(replace_line(BASE, 6, "  %3 = sum %2 axes=[1] keepdims : f32[4]"), IRVerifyError, 6, 3,
             "shape mismatch", "[4, 1]")


def test_argmax_is_i64_over_one_axis() -> None:
    base = "func @f(%a: f32[2,3]) -> i64[2] {\n  %b = argmax %a axes=[1] : LINE\n  return %b\n}\n"
    error_of(base.replace("LINE", "f32[2]"), IRVerifyError, 2, 3, "gives i64")
    text = base.replace("axes=[1] : LINE", "axes=[0,1] : i64[]").replace("-> i64[2]", "-> i64[]")
    error_of(text, IRVerifyError, 2, 3, "exactly one axis")


@pytest.mark.parametrize("line, words", [
    ("  %1 = expand %0 shape=[4,9] : f32[4,9]", "dimension 1 of f32[4,1] is 1"),  # fine: 1 -> 9
    ("  %1 = expand %0 shape=[8] : f32[8]", "changes the rank"),
    ("  %1 = expand %0 shape=[4,8] : f32[4,7]", "shape=[4, 8] but the result type is f32[4,7]"),
    ("  %1 = reshape %0 shape=[4,8] : f32[4,8]", "has 4 elements"),
    ("  %1 = permute %0 perm=[0,0] : f32[4,1]", "not a permutation"),
    ("  %1 = slice %0 start=[4,0] stop=[3,1] step=[-1,1] : f32[1,1]", "start 4 is out of bounds"),
    ("  %1 = slice %0 start=[3,0] stop=[-1,1] step=[-1,0] : f32[4,1]", "step is 0"),
    ("  %1 = slice %0 start=[3,0] stop=[-1,1] step=[-1,1] : f32[3,1]", "has 4 elements, not 3"),
    ("  %1 = slice %0 start=[0] stop=[1] step=[1] : f32[1,1]", "list of 2 integers"),
])
def test_bad_view_attributes(line: str, words: str) -> None:
    text = replace_line(BASE, 4, line)
    if "4,9" in line:  # a valid expand (1 -> 9); its use in 'sub' is then the error
        error_of(text, IRVerifyError, 5, 3, "shape mismatch")
        return
    error_of(text, IRVerifyError, 4, 3, words)


@pytest.mark.parametrize("const, words", [
    ("300 : i8[]", "const out of range: 300 does not fit i8"),
    ("-1 : u32[]", "does not fit u32"),
    ("0x1.0p+20 : f16[]", "overflows f16"),
    ("2 : bool[]", "not a bool"),
    ("true : i32[]", "not a number for i32"),
    ("0x1.8p+0 : i64[]", "not an integer for i64"),
])
def test_const_out_of_range(const: str, words: str) -> None:
    text = replace_line(BASE, 6, f"  %9 = const {const}\n  %3 = sum %2 axes=[1] : f32[4]")
    error_of(text, IRVerifyError, 6, 3, words)


def test_valid_consts_parse() -> None:
    line = ("  %9 = const 255 : u8[]\n  %8 = const true : bool[]\n  %7 = const 1.5 : f16[]\n"
            "  %6 = const 3 : f32[]\n  %5 = const -inf : f64[]\n  %4 = const nan : f16[2]")
    p = parse(replace_line(BASE, 6, line + "\n  %3 = sum %2 axes=[1] : f32[4]"))
    values = {i.name: i.attrs["value"] for i in p.body if i.op == "const"}
    assert values["9"] == 255 and values["8"] is True and values["7"] == 1.5 and values["6"] == 3


def test_decimal_floats_round_to_the_dtype() -> None:
    p = parse(replace_line(BASE, 6, "  %9 = const 0.1 : f16[]\n  %3 = sum %2 axes=[1] : f32[4]"))
    assert p.body[3].attrs["value"] == float(np.float16(0.1))


def test_unknown_attribute() -> None:
    error_of(replace_line(BASE, 5, "  %2 = sub %x, %1 fast=1 : f32[4,8]"), IRVerifyError, 5, 3,
             "unknown attribute 'fast' for 'sub'")


def test_missing_attribute() -> None:
    error_of(replace_line(BASE, 6, "  %3 = sum %2 : f32[4]"), IRVerifyError, 6, 3,
             "'sum' needs the attribute 'axes'")


def test_duplicate_attribute() -> None:
    error_of(replace_line(BASE, 6, "  %3 = sum %2 axes=[1] axes=[1] : f32[4]"), IRSyntaxError, 6, 24,
             "given twice")


def test_kernel_not_closed() -> None:
    text = KERNEL.replace("%0 = reshape %b", "%0 = reshape %w")
    error_of(text, IRVerifyError, 5, 5, "kernel @scale_0 is not closed", "'%w'")


def test_kernel_param_type_mismatch() -> None:
    error_of(KERNEL.replace("%b: f32[8]", "%b: f32[9]"), IRVerifyError, 3, 3,
             "param '%b' is f32[9] but its operand '%w' is f32[8]")


def test_yield_type_mismatch() -> None:
    text = KERNEL.replace("kind=pointwise -> f32[4,8]", "kind=pointwise -> f32[8,4]")
    error_of(text, IRVerifyError, 3, 3, "yield type mismatch", "'%2' of type f32[4,8]")


def test_yield_of_undefined() -> None:
    error_of(KERNEL.replace("yield %2", "yield %7"), IRVerifyError, 3, 3, "yields '%7'")


def test_bad_kernel_kind() -> None:
    error_of(KERNEL.replace("kind=pointwise", "kind=fast"), IRVerifyError, 3, 3, "kind=fast")


def test_kernel_results_scope() -> None:
    # inner values do not leak out: %2 exists only inside the block
    error_of(KERNEL.replace("  return %1", "  return %2"), IRVerifyError, 10, 10, "'%2'")


def test_return_type_mismatch() -> None:
    text = BASE.replace("-> f32[4,8], f32[4] {", "-> f32[4,8], f32[5] {")
    error_of(text, IRVerifyError, 7, 10, "return type mismatch", "f32[4]", "declares f32[5]")


def test_return_count_mismatch() -> None:
    error_of(BASE.replace("return %2, %3", "return %2"), IRVerifyError, 7, 10, "declares 2 results")


def test_region_check_hook() -> None:
    program, signature = parse_unverified(KERNEL)
    verify(program, region_check=lambda k: None)
    with pytest.raises(IRVerifyError) as info:
        verify(program, KERNEL.split("\n"), region_check=lambda k: "two domains")
    assert info.value.line == 3 and "cannot be one kernel: two domains" in info.value.message
    # the registered default applies to every parse
    from fusejit.ir import verify as verify_module
    previous = verify_module._registered_region_check
    verify_module.register_region_check(lambda k: f"{k.name} is not allowed")
    try:
        error_of(KERNEL, IRVerifyError, 3, 3, "scale_0 is not allowed")
    finally:
        verify_module.register_region_check(previous)


def test_verify_programs_built_in_code() -> None:
    f32 = TensorType(np.dtype("float32"), (2,))
    good = Program("p", (Param("a", f32),), [Instr("b", "neg", ("a",), {}, f32)], ("b",))
    verify(good)
    bad = Program("p", (Param("a", f32),), [Instr("b", "nope", ("a",), {}, f32)], ("b",))
    with pytest.raises(IRVerifyError, match="unknown op 'nope'"):
        verify(bad)


# -- program.run input mismatches -------------------------------------------------------

@pytest.mark.usefixtures("numpy_backend")
def test_run_input_mismatches() -> None:
    p = parse(BASE)
    x, w = np.zeros((4, 8), np.float32), np.zeros(8, np.float32)
    assert len(p.run(x, w)) == 2 and len(p.run(x=x, w=w)) == 2
    with pytest.raises(InputError, match="takes 2 inputs, got 3"):
        p.run(x, w, w)
    with pytest.raises(InputError, match="missing input w"):
        p.run(x)
    with pytest.raises(InputError, match="no input named 'v'"):
        p.run(x=x, v=w)
    with pytest.raises(InputError, match="expected shape"):
        p.run(x, np.zeros(9, np.float32))
    with pytest.raises(InputError, match="expected dtype"):
        p.run(x, np.zeros(8, np.float64))


# -- fuzz ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"%\w+|@\w+|-?0x[0-9a-fA-F.]+p[+-]?\d+|-?\w+|->|\S")
_JUNK = list("%@=:,()[]{}^#-+.0123456789xp \n\t\"'\\;") + ["kernel", "yield", "return", "func", "nan",
                                                             "inf", "-inf", "keepdims", "axes=",
                                                             "f32", "i64[", "%0", "\x00", "é"]


def _mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(7)
    if kind < 3:  # characters: delete, insert, swap
        i = rng.randrange(len(text))
        if kind == 0:
            return text[:i] + text[i + 1:]
        if kind == 1:
            return text[:i] + rng.choice(_JUNK) + text[i:]
        j = rng.randrange(len(text))
        chars = list(text)
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    spans = [m.span() for m in _TOKEN.finditer(text)]
    a, b = spans[rng.randrange(len(spans))]
    if kind == 3:  # delete a token
        return text[:a] + text[b:]
    if kind == 4:  # duplicate a token
        return text[:b] + " " + text[a:b] + text[b:]
    if kind == 5:  # replace a token by another one of the text
        c, d = spans[rng.randrange(len(spans))]
        return text[:a] + text[c:d] + text[b:]
    c, d = sorted((spans[rng.randrange(len(spans))], (a, b)))  # swap two tokens
    if c[1] > d[0]:
        return text
    return text[:c[0]] + text[d[0]:d[1]] + text[c[1]:d[0]] + text[c[0]:c[1]] + text[d[1]:]


def test_fuzz_damaged_text_raises_only_fusejit_errors() -> None:
    rng = random.Random(int(os.environ.get("FUSEJIT_FUZZ_SEED", "20240611")))
    x = fj.asarray(np.ones((3, 4), np.float32))
    recorded = fj.dump(fj.where(x[::-1] > 0, x * 1e-6, -np.inf).sum(axis=0), x.argmax(axis=1))
    seeds = [BASE, KERNEL, recorded]
    outcomes = {"error": 0, "ok": 0}
    for n in range(int(os.environ.get("FUSEJIT_FUZZ_CASES", "10000"))):
        text = seeds[n % len(seeds)]
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(text, rng)
        try:
            program = parse(text)
        except FusejitError as exc:
            assert isinstance(exc, IRError) and str(exc), text
            outcomes["error"] += 1
            continue
        except Exception as exc:  # noqa: BLE001  (the point: report any other exception)
            pytest.fail(f"{type(exc).__name__}: {exc}\n--- text ---\n{text}")
        # a damaged text that still parses is a valid program: it prints and reparses
        assert print_program(parse(print_program(program))) == print_program(program)
        outcomes["ok"] += 1
    assert outcomes["error"] > 5000
