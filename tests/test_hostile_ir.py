"""Hostile IR text: every odd input runs correctly or fails with a positioned FusejitError.

IR text is data. Names are the parser's tokens ([A-Za-z0-9_] after a sigil) but may
still be anything the generated Triton module uses itself (``%tl``, ``%pid``,
``%mask``, ``%k``, ``%out0``, ``%p_x``, ``%acc_...``), Python keywords and builtins
(``%def``, ``%None``, ``@import``, ``@range``) or a megabyte long. Numbers
may be far outside any dtype; files may hold CRLF or CR line endings, a byte-order
mark, NUL bytes, bytes that are not UTF-8, or 1 MB lines.

Each program here either runs, on the ``numpy`` backend and on ``interpret`` (which
executes the generated source, so a name that breaks it shows), with the values
NumPy gives, or raises a ``FusejitError`` that names the line and column.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import emit_kernel
from fusejit.errors import FusejitError, IRError, IRSyntaxError, IRVerifyError
from fusejit.fuse import plan_for
from fusejit.testing import assert_matches_numpy, recorded_inputs

pytestmark = pytest.mark.usefixtures("numpy_backend")

RNG = np.random.default_rng(7)

# -- hostile names ------------------------------------------------------------------------

#: Value names that the generated module, Python or the emitter's own temporaries use.
VALUE_NAMES = [
    "tl", "pid", "mask", "offs", "rows", "cols", "k", "def", "return", "lambda", "None",
    "v_x", "p_x", "out0", "out1", "acc_v_0", "triton", "libdevice", "INF", "NAN", "_mul",
    "import", "range", "i", "flat", "idx", "col_mask", "row_mask", "chunk", "parts",
    "part_v_0", "x_v_0", "take_v_0", "self", "__import__", "True", "float", "0", "k_0",
    "p_k_0", "v0", "v_0", "x", "p_v_0", "tile_m", "i_m", "b", "same", "_max_nan", "k_tl",
]
#: Kernel (and function) names: module-level names, keywords, builtins, helpers.
KERNEL_NAMES = [
    "tl", "triton", "import", "def", "None", "INF", "NAN", "libdevice", "_mul", "_max_nan",
    "_min_nan", "range", "float", "print", "lambda", "k_tl", "return", "main", "self", "class",
]


def _softmax_and_sum(xp, x, w):
    y = xp.exp(x * w)
    return y / y.sum(axis=1, keepdims=True), (x * w).sum(axis=1)


def _transposed(xp, a, b):
    return a.T * 2 + b


def _split(xp, v):
    return v.sum(), v.max()


def _outer_and_arg(xp, x):
    return x.prod(axis=0), x.min(axis=1), xp.argmax(x, axis=1)


def _looped(xp, x):
    return x.max(axis=1), xp.argmax(x, axis=1), (x - x.min(axis=1, keepdims=True)).sum(axis=1)


def _ints(xp, a, b):
    return (a % 7) * b + (a >> 2), (a & b) ^ (b | 3)


#: name -> (function of (xp, *arrays), input arrays); together they cover every kernel
#: kind: persistent inner reduction, 2-D tiled pointwise, split, outer, looped.
PROGRAMS: dict[str, tuple[Callable, list[np.ndarray]]] = {
    "softmax_sum": (_softmax_and_sum, [RNG.standard_normal((4, 96)).astype(np.float32),
                                       RNG.standard_normal(96).astype(np.float32)]),
    "transposed": (_transposed, [RNG.standard_normal((64, 48)).astype(np.float32),
                                 RNG.standard_normal((48, 64)).astype(np.float32)]),
    "split": (_split, [RNG.standard_normal(1 << 17).astype(np.float32)]),
    "outer_arg": (_outer_and_arg, [RNG.uniform(0.5, 1.5, (40, 24)).astype(np.float32)]),
    "looped": (_looped, [RNG.standard_normal((2, 1 << 17)).astype(np.float32)]),
    "ints": (_ints, [RNG.integers(-50, 50, (8, 128)).astype(np.int32),
                     RNG.integers(0, 9, (8, 128)).astype(np.int32)]),
}


def _fused_text(name: str) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    """The fused IR text of a program, its inputs and its outputs on the numpy backend."""
    fn, arrays = PROGRAMS[name]
    outs = fn(fj, *[fj.asarray(a, name=f"in{i}") for i, a in enumerate(arrays)])
    outs = outs if isinstance(outs, tuple) else (outs,)
    text = fj.dump(*outs, fused=True)
    # the program's inputs in order: the arrays and the values of its scalar params
    inputs = recorded_inputs(*outs)
    with fj.using_backend("numpy"):
        return text, inputs, [t.numpy() for t in outs]


def _rename(text: str, shift: int, long: bool = False) -> str:
    """``text`` with every value and kernel name replaced by a hostile one (one-to-one)."""
    values = list(dict.fromkeys(re.findall(r"%([A-Za-z0-9_]+)", text)))
    funcs = list(dict.fromkeys(re.findall(r"@([A-Za-z0-9_]+)", text)))
    assert len(values) <= len(VALUE_NAMES) and len(funcs) <= len(KERNEL_NAMES)
    if long:  # 10,000 characters each, distinct only at the end
        vmap = {v: "n" * 10_000 + str(i) for i, v in enumerate(values)}
        fmap = {f: "K" * 10_000 + str(i) for i, f in enumerate(funcs)}
    else:
        vmap = {v: VALUE_NAMES[(i + shift) % len(VALUE_NAMES)] for i, v in enumerate(values)}
        fmap = {f: KERNEL_NAMES[(i + shift) % len(KERNEL_NAMES)] for i, f in enumerate(funcs)}
    text = re.sub(r"%([A-Za-z0-9_]+)", lambda m: "%" + vmap[m.group(1)], text)
    return re.sub(r"@([A-Za-z0-9_]+)", lambda m: "@" + fmap[m.group(1)], text)


_RESERVED = {"triton", "tl", "libdevice", "INF", "NAN"} | set(dir(builtins)) | set(keyword.kwlist)
_HELPERS = {"_mul", "_max_nan", "_min_nan", "_exp_f32"}


def _check_source(source: str, launch_names: set[str]) -> None:
    """Generated source compiles, defines each launched function once, and no function
    rebinds a name the module or Python needs."""
    tree = ast.parse(source)
    compile(tree, "<generated>", "exec")  # e.g. duplicate argument names fail here
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert len(defs) == len(set(defs)), defs
    assert launch_names <= set(defs), (launch_names, defs)
    for name in defs:
        assert name in _HELPERS or (name not in _RESERVED and not name.startswith("_")), name
        assert len(name) <= 80, name


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_hostile_names_generate_valid_source(program: str) -> None:
    # every name in every role (one rotation per name): emitted for both targets, checked
    text, _, _ = _fused_text(program)
    for shift in range(len(VALUE_NAMES)):
        plan = plan_for(fj.parse(_rename(text, shift)))
        for k in plan.program.kernels:
            for target in ("cuda", "interpret"):
                emitted = emit_kernel(k, None, target)
                _check_source(emitted.source, {x.fn_name for x in emitted.launches})


@pytest.mark.parametrize("program", sorted(PROGRAMS))
@pytest.mark.parametrize("shift", [0, 17, "long"])
def test_hostile_names_run(program: str, shift: int | str, interpret_backend: str) -> None:
    text, arrays, want = _fused_text(program)
    hostile = fj.parse(_rename(text, 0, long=True) if shift == "long" else _rename(text, shift))
    got = hostile.run(*arrays)  # interpret: executes the generated source
    with fj.using_backend("numpy"):
        reference = hostile.run(*arrays)
    for g, r, w in zip(got, reference, want):
        np.testing.assert_array_equal(r, w)  # renaming changes nothing
        assert_matches_numpy(g, w)


def test_hostile_kernel_name_compiles_to_cubin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    # the cuda target's source (libdevice, the NaN-propagating max helper) under names that
    # would shadow them; Triton compiles it for sm_90 without a GPU
    pytest.importorskip("triton")
    from fusejit.runtime.compile import compile_all
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    x = RNG.standard_normal((8, 64)).astype(np.float32)
    t = fj.asarray(x)
    text = fj.dump(fj.tanh(t).max(axis=1), fused=True)
    for name in ("libdevice", "_max_nan", "tl"):
        renamed = re.sub(r"@(?!main\b)[A-Za-z0-9_]+", "@" + name, text)
        (kernel,) = plan_for(fj.parse(renamed)).program.kernels
        for c in compile_all(emit_kernel(kernel, None, "cuda"), 90, True):
            assert c.cubin[:4] == b"\x7fELF"


# -- hostile text: numbers, sizes, nesting -------------------------------------------------

def _program(body: str, ret: str = "f32[4]", params: str = "%x: f32[4]") -> str:
    return f"# fusejit ir v1\nfunc @main({params}) -> {ret} {{\n{body}\n  return %y\n}}\n"


X4 = np.arange(4, dtype=np.float32) - 1.5

#: label -> (text, expected output of @main on X4 (or of @main() when it has no params))
RUNS: dict[str, tuple[str, np.ndarray]] = {
    "1e308 as f64": (_program("  %c = const 1e308 : f64[4]\n  %y = cast %c : f32[4]"),
                     np.full(4, np.inf, np.float32)),
    "decimal past f64 is inf": (_program("  %c = const 1e400 : f64[4]\n  %y = cast %c : f32[4]"),
                                np.full(4, np.inf, np.float32)),
    "hex below the smallest float is 0": (_program("  %y = const 0x1p-2000 : f32[4]"),
                                          np.zeros(4, np.float32)),
    "f64 max": (_program("  %y = const 0x1.fffffffffffffp+1023 : f64[4]", "f64[4]"),
                np.full(4, np.finfo(np.float64).max)),
    "f64 smallest subnormal": (_program("  %y = const 0x0.0000000000001p-1022 : f64[4]", "f64[4]"),
                               np.full(4, 5e-324)),
    "int past 2**64 as f64": (_program(f"  %y = const {2**1000} : f64[4]", "f64[4]"),
                              np.full(4, float(2**1000))),
    "i64 min": (_program("  %y = const -9223372036854775808 : i64[4]", "i64[4]"),
                np.full(4, np.iinfo(np.int64).min)),
    "u64 max": (_program("  %y = const 18446744073709551615 : u64[4]", "u64[4]"),
                np.full(4, np.iinfo(np.uint64).max)),
    "iota from inf": (_program("  %y = iota start=inf step=1 : f32[4]", params=""),
                      np.full(4, np.inf, np.float32)),
    "iota step -inf": (_program("  %y = iota start=0 step=-inf : f64[4]", "f64[4]", params=""),
                       np.array([np.nan, -np.inf, -np.inf, -np.inf])),
    "iota of nan": (_program("  %y = iota start=nan step=1 : f16[4]", "f16[4]", params=""),
                    np.full(4, np.nan, np.float16)),
    "iota u64 past int64": (_program("  %y = iota start=18446744073709551611 step=1 : u64[4]",
                                     "u64[4]", params=""),
                            np.arange(2**64 - 5, 2**64 - 1, dtype=np.uint64)),
    "iota i64 wraps": (_program("  %y = iota start=9223372036854775807 step=9223372036854775807"
                                " : i64[4]", "i64[4]", params=""),
                       np.array([2**63 - 1, -2, 2**63 - 3, -4], np.int64)),
    "huge slice step": (_program("  %y = slice %x start=[0] stop=[4] step=[99999999999999999999]"
                                 " : f32[1]", "f32[1]"), X4[:1]),
    "1 MB comment line": (_program("  %y = abs %x : f32[4]  # " + "z" * (1 << 20)), np.abs(X4)),
    "1 MB name": (_program(f"  %{'n' * (1 << 20)} = abs %x : f32[4]\n"
                           f"  %y = neg %{'n' * (1 << 20)} : f32[4]"), -np.abs(X4)),
    "1 MB decimal": (_program("  %y = const 1." + "1" * (1 << 20) + " : f32[4]"),
                     np.full(4, float("1." + "1" * 40), np.float32)),
    "1 MB hex": (_program("  %y = const 0x1." + "1" * (1 << 20) + "p0 : f32[4]"),
                 np.full(4, float.fromhex("0x1." + "1" * 40 + "p0"), np.float32)),
    "CRLF": (_program("  %y = abs %x : f32[4]").replace("\n", "\r\n"), np.abs(X4)),
    "CR only": (_program("  %y = abs %x : f32[4]").replace("\n", "\r"), np.abs(X4)),
    "byte-order mark": ("\ufeff" + _program("  %y = abs %x : f32[4]"), np.abs(X4)),
    "lone surrogate in a comment": (_program("  %y = abs %x : f32[4]  # \udcff"), np.abs(X4)),
    "5,000 unused params": (_program("  %y = abs %x : f32[4]", params=", ".join(
        [f"%p{i}: f32[]" for i in range(5_000)] + ["%x: f32[4]"])), np.abs(X4)),
}


@pytest.mark.parametrize("label", sorted(RUNS))
def test_odd_text_runs(label: str, backend: str) -> None:
    text, want = RUNS[label]
    program = fj.parse(text)
    args = {p.name: (X4 if p.name == "x" else np.float32(0)) for p in program.inputs}
    (got,) = program.run(**args)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


_NESTED = "[" * 20_000 + "0" + "]" * 20_000  # 20x the recursion limit
_MANY_DIMS = ",".join(["1"] * 2000 + ["4"])

#: label -> (text, error class, line, column, words of the message)
ERRORS: dict[str, tuple[str, type[IRError], int, int, tuple[str, ...]]] = {
    "1e308 as f32": (_program("  %y = const 1e308 : f32[4]"), IRVerifyError, 3, 3,
                     ("out of range", "f32")),
    "hex past f64": (_program("  %y = const 0x1p2000 : f32[4]"), IRSyntaxError, 3, 14,
                     ("out of range",)),
    "int past i64": (_program("  %y = const 99999999999999999999 : i64[4]", "i64[4]"),
                     IRVerifyError, 3, 3, ("out of range", "i64")),
    "400-digit int as f64": (_program("  %y = const " + "9" * 400 + " : f64[4]", "f64[4]"),
                             IRVerifyError, 3, 3, ("out of range", "f64")),
    "5000-digit int": (_program("  %y = const " + "9" * 5000 + " : i64[4]", "i64[4]"),
                       IRSyntaxError, 3, 14, ("out of range",)),
    "1 MB int": (_program("  %y = const " + "1" * (1 << 20) + " : i64[4]", "i64[4]"),
                 IRSyntaxError, 3, 14, ("out of range",)),
    "dimension past int64": (_program("  %y = const 1.0 : f32[99999999999999999999]",
                                      "f32[99999999999999999999]"), IRSyntaxError, 2, 27,
                             ("too large",)),
    "2**64 elements": (_program("  %y = const 1.0 : f32[4294967296,4294967296]",
                                "f32[4294967296,4294967296]"), IRSyntaxError, 2, 27,
                       ("too large",)),
    "2001 dimensions": (_program(f"  %y = reshape %x shape=[{_MANY_DIMS}] : f32[{_MANY_DIMS}]",
                                 f"f32[{_MANY_DIMS}]"), IRSyntaxError, 2, 27,
                        ("at most 64 dimensions",)),
    "axis past int64": (_program("  %y = sum %x axes=[99999999999999999999] : f32[]", "f32[]"),
                        IRVerifyError, 3, 3, ("bad axes",)),
    "list nested 20,000 deep": (_program(f"  %y = sum %x axes={_NESTED} : f32[]", "f32[]"),
                                 IRVerifyError, 3, 3, ("'axes' must be a list of integers",)),
    "nested list as a const": (_program(f"  %y = const 1 foo={_NESTED} : f32[4]"),
                               IRVerifyError, 3, 3, ("unknown attribute 'foo'",)),
    "NUL byte": (_program("  %y = abs %x : f32[4]\x00"), IRSyntaxError, 3, 23,
                 ("unexpected character",)),
    "NUL in a name": (_program("  %y\x00 = abs %x : f32[4]"), IRSyntaxError, 3, 5,
                      ("unexpected character",)),
    "CRLF error position": (_program("  %y = abz %x : f32[4]").replace("\n", "\r\n"),
                            IRSyntaxError, 3, 8, ("unknown op 'abz'",)),
    "CR-only error position": (_program("  %y = abz %x : f32[4]").replace("\n", "\r"),
                               IRSyntaxError, 3, 8, ("unknown op 'abz'",)),
    "error at column 1,048,600": (_program("  %y = abs %x : f32[4] " + " " * (1 << 20) + "?"),
                                  IRSyntaxError, 3, 24 + (1 << 20), ("unexpected character",)),
    "30,002 operands": (_program("  %y = add " + ", ".join(["%x"] * 30_002) + " : f32[4]"),
                         IRVerifyError, 3, 3, ("takes 2 operands",)),
    "30,000 attributes": (_program("  %y = abs %x " + " ".join(f"a{i}=1" for i in range(30_000))
                                    + " : f32[4]"), IRVerifyError, 3, 3, ("unknown attribute",)),
    "space after @": (_program("  %y = abs %x : f32[4]").replace(
        "@main", "@ import"), IRSyntaxError, 2, 6, ("'@' must be followed by a name",)),
    "unicode name": (_program("  %é = abs %x : f32[4]\n  %y = neg %é : f32[4]"), IRSyntaxError,
                     3, 3, ("'%' must be followed by a name",)),
}


@pytest.mark.parametrize("label", sorted(ERRORS))
def test_odd_text_errors(label: str) -> None:
    text, cls, line, column, words = ERRORS[label]
    with pytest.raises(cls) as info:
        fj.parse(text, filename="odd.fir")
    exc = info.value
    assert isinstance(exc, FusejitError)
    assert (exc.line, exc.column) == (line, column), str(exc)
    for w in words:
        assert w in exc.message, exc.message
    rendered = str(exc)
    assert rendered.startswith(f"odd.fir:{line}:{column}: ")
    assert len(rendered) < 1000  # a long line is shown around the column, not whole
    _, shown, caret = rendered.split("\n")
    assert len(caret) - 2 <= len(shown)  # the caret points into the shown text


# -- files: bytes that are not UTF-8, BOM, NUL -------------------------------------------

GOOD = _program("  %y = abs %x : f32[4]")


@pytest.mark.parametrize("data, line, column", [
    (GOOD.encode().replace(b"abs", b"ab\xff"), 3, 10),
    (GOOD.encode().replace(b"f32[4]\n  return", b"f32[4]  # \xe9t\xe9\n  return"), 3, 27),
    (GOOD.replace("\n", "\r\n").encode().replace(b"abs", b"\xc3("), 3, 8),  # CRLF
    (b"\xff" + GOOD.encode(), 1, 1),
])
def test_load_bytes_not_utf8(tmp_path: Path, data: bytes, line: int, column: int) -> None:
    path = tmp_path / "bad.fir"
    path.write_bytes(data)
    with pytest.raises(IRSyntaxError) as info:
        fj.load(path)
    exc = info.value
    assert (exc.line, exc.column, exc.filename) == (line, column, str(path)), str(exc)
    assert "not UTF-8" in exc.message and str(exc).startswith(f"{path}:{line}:{column}: ")


def test_load_bom_crlf_and_nul(tmp_path: Path) -> None:
    path = tmp_path / "p.fir"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    (got,) = fj.load(path).run(X4)
    np.testing.assert_array_equal(got, np.abs(X4))
    path.write_bytes(GOOD.encode() + b"\x00")
    with pytest.raises(IRSyntaxError) as info:
        fj.load(path)
    assert (info.value.line, info.value.column) == (6, 1)


def test_text_is_never_evaluated(monkeypatch: pytest.MonkeyPatch) -> None:
    # parsing, verifying, planning and printing never call eval/exec/compile, whatever the
    # names (running compiles the *generated* source, which the tests above check)
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("IR text reached eval/exec/compile")

    text = _rename(_fused_text("softmax_sum")[0], 5)
    plan_for(fj.parse(text))  # warm: imports done, parser built
    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, refuse)
    program = fj.parse(text)
    plan = plan_for(program)
    assert fj.parse(str(plan.program)) is not None
    assert str(program) == text
