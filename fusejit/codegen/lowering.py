"""Elementwise op lowering: one IR op -> a Triton expression with NumPy semantics.

Each lowering returns an expression string; helpers it needs (floor-division
fix-ups, formulas for math the interpreter lacks) are emitted as temporaries
through the ``tmp`` callback so that generated code stays one readable
statement per step. float16 math is computed in float32 and rounded back to
float16 after every op, which is what NumPy's float16 loops do; ``+ - *`` use the
float16 instructions, whose correct rounding gives the same result, and on ``cuda``
float16 ``tanh`` is the hardware's (within one float16 ulp: ``op_tanh``).

Math that Triton maps to libdevice (tanh, pow, expm1, ...) has two lowerings:
``cuda`` calls libdevice; ``interpret`` uses formulas built from exp, log,
sqrt, sin, cos (evaluated in float64), because the interpreter cannot run
libdevice.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import SUPPORTED, ir_name

#: Triton type of each supported dtype (bool values are i1 in registers).
TL: dict[np.dtype, str] = {dt: "tl.int1" if dt.kind == "b" else f"tl.{dt.name}" for dt in SUPPORTED}

#: Triton signature type of a pointer to each dtype (bool is stored as bytes): the IR
#: spelling, with fp for floats (``*fp32``).
PTR: dict[np.dtype, str] = {
    dt: "*u8" if dt.kind == "b" else "*" + ir_name(dt).replace("f", "fp") for dt in SUPPORTED}

#: Scalar params (passed by value): the dtype each is passed as (a type every launcher passes
#: the same way: 32/64-bit ints and floats), its Triton signature type, and the expression
#: that gives the param's own dtype from the argument ``{}`` (None: the argument as it is).
#: uint64 travels as its bits in an int64; float16 as float32 (exact: the value is a float16).
SCALAR_ARG: dict[np.dtype, tuple[np.dtype, str, str | None]] = {}
for _dt in SUPPORTED:
    if _dt.kind == "f":
        _carrier = np.dtype(np.float64 if _dt.itemsize == 8 else np.float32)
    elif _dt.itemsize == 8 or _dt == np.dtype(np.uint32):
        _carrier = np.dtype(np.int64)
    else:
        _carrier = np.dtype(np.int32)
    if _dt.kind == "b":
        _expr: str | None = "{} != 0"
    elif _dt == np.dtype(np.uint64):
        _expr = "{}.to(tl.uint64, bitcast=True)"
    elif _dt == _carrier:
        _expr = None
    else:
        _expr = f"{{}}.to({'tl.int1' if _dt.kind == 'b' else 'tl.' + _dt.name})"
    SCALAR_ARG[_dt] = (_carrier, ir_name(_carrier).replace("f", "fp"), _expr)


def scalar_arg(value: object, dtype: np.dtype) -> np.generic:
    """A scalar param's value as the NumPy scalar a launcher passes (``SCALAR_ARG``)."""
    carrier = SCALAR_ARG[dtype][0]
    if dtype.kind == "u" and dtype.itemsize == 8:
        return np.array(value, np.uint64).view(np.int64)[()]
    return carrier.type(value)


F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)

_LIBDEVICE_UNARY = {
    "expm1": "expm1", "log1p": "log1p", "log10": "log10", "tan": "tan", "asin": "asin",
    "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "sin": "sin", "cos": "cos",
}

#: ops whose ``cuda`` lowering is a libdevice call of tens of instructions (trigonometric,
#: hyperbolic and their inverses, powers): what makes a pointwise kernel compute-bound
SLOW_MATH = frozenset(_LIBDEVICE_UNARY) | {"pow", "atan2"}

PI = "3.141592653589793"
HALF_PI = "1.5707963267948966"


#: NaN as generated source spells it: a literal, not a module constant. Triton checks that a
#: kernel and the functions it calls saw the same value of each global they share, with
#: ``!=``, and NaN is never equal to itself: a ``NAN`` constexpr used by a kernel and by a
#: function it calls failed to compile ("Global variable NAN has value constexpr[nan] ...").
NAN = 'float("nan")'


#: float32 ``exp`` on ``cuda``: the instructions of libdevice's ``__nv_expf`` as Triton links
#: it (flush-to-zero: 2**j built from the exponent bits, ``ex2.approx`` of the remainder, with
#: log2(e) split in two so that x * log2(e) keeps its low bits; within 2 ulp, as NumPy's),
#: written as inline PTX. The results are the same bits (``tests/test_gpu.py`` compares all
#: 2**32 float32 inputs on the GPU); what changes is compile time: LLVM optimized every inlined
#: libdevice copy, 64 per thread in a cooperative softmax's chunk. Cold first call of the
#: suite's softmax over 256 rows of 2**18 on the H200: 0.73 s -> 0.48 s, float16 softmax
#: 0.41 -> 0.18 s (Triton 3.6; ``triton.compile`` for sm_90 on Triton 3.9: 0.76 -> 0.45 s).
#: ptxas still schedules the instructions: the kernels ran at the same speed.
#: ``EXP_F32_AS_PTX = False`` calls libdevice instead (the GPU test's reference).
EXP_F32_AS_PTX = True
EXP_F32_HELPER = """
@triton.jit
def _exp_f32(x):  # libdevice's expf, as PTX (fusejit/codegen/lowering.py, EXP_F32_HELPER)
    return tl.inline_asm_elementwise(
        \"\"\"{
        .reg .f32 a, j, t, s;
        fma.rn.ftz.f32 a, $1, 0f3BBB989D, 0f3F000000;
        cvt.ftz.sat.f32.f32 a, a;
        fma.rm.ftz.f32 j, a, 0f437C0000, 0f4B400001;
        add.f32 t, j, 0fCB40007F;
        neg.f32 t, t;
        fma.rn.ftz.f32 t, $1, 0f3FB8AA3B, t;
        fma.rn.ftz.f32 t, $1, 0f32A57060, t;
        shl.b32 s, j, 23;
        ex2.approx.ftz.f32 t, t;
        mul.f32 $0, t, s;
        }\"\"\", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)

"""


def float_literal(value: float) -> str:
    """Exact Python spelling of a float (the module constant ``INF``, and ``NAN``)."""
    value = float(value)
    if value != value:
        return NAN
    if value == float("inf"):
        return "INF"
    if value == float("-inf"):
        return "-INF"
    return repr(value)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype arithmetic happens in: float32 for float16, else the dtype itself."""
    return F32 if dtype == F16 else dtype


class Lowering:
    """Lowers elementwise ops for one target; ``tmp(expr, hint)`` emits a temporary."""

    def __init__(self, target: str, tmp: Callable[[str, str], str],
                 raw: Callable[[list[str]], None]) -> None:
        self.target = target
        self.tmp = tmp
        self.raw = raw
        self.uses_libdevice = False
        #: the source calls ``_exp_f32`` (``EXP_F32_HELPER``, defined once per module)
        self.uses_exp_f32 = False

    # -- helpers ---------------------------------------------------------------
    def up(self, x: str, dtype: np.dtype) -> str:
        """Widen a float16 expression to float32 (where float16 math happens)."""
        return f"{x}.to(tl.float32)" if dtype == F16 else x

    def down(self, expr: str, dtype: np.dtype) -> str:
        """Round a float32 result back to float16 (the inverse of ``up``)."""
        return f"({expr}).to(tl.float16)" if dtype == F16 else expr

    def lib(self, fn: str, *args: str) -> str:
        """A libdevice call (and a note that the source must import libdevice)."""
        self.uses_libdevice = True
        return f"libdevice.{fn}({', '.join(args)})"

    def f64(self, x: str, dtype: np.dtype) -> str:
        """``x`` in float64, where the interpreter formulas are evaluated."""
        return x if dtype == F64 else f"{x}.to(tl.float64)"

    def back(self, expr: str, dtype: np.dtype) -> str:
        """A float64 formula result converted back to ``dtype``."""
        return expr if dtype == F64 else f"({expr}).to({TL[dtype]})"

    # -- the table ---------------------------------------------------------------
    def lower(self, op: str, args: list[str], dtypes: list[np.dtype], out: np.dtype) -> str:
        """Expression for ``op`` on argument expressions ``args`` (of ``dtypes``)."""
        dt = dtypes[0] if dtypes else out
        fn = getattr(self, "op_" + op, None)
        if fn is not None:
            return fn(args, dtypes, out)
        if op in _LIBDEVICE_UNARY or op in ("pow", "atan2"):
            return self.math(op, args, dt)
        raise NotImplementedError(f"no Triton lowering for op {op!r}")

    def unary_float(self, expr_fn: Callable[[str], str], a: str, dt: np.dtype) -> str:
        """``expr_fn`` applied in the compute dtype of ``dt`` (float16 via float32)."""
        return self.down(expr_fn(self.up(a, dt)), dt)

    def binary_arith(self, sym: str, args: list[str], dt: np.dtype) -> str:
        """``a sym b`` with float16 computed in float32 and rounded once, except ``+ - *``.

        IEEE float16 ``+``, ``-`` and ``*`` are correctly rounded, and so is float32's result
        rounded to float16 (24 bits >= 2 * 11 + 2: the double rounding is harmless), so the
        native float16 instructions give NumPy's float16 result bit for bit without the
        conversions (a float16 -> float32 conversion runs at a quarter of the FMA rate on
        Hopper: a float16 epilogue of ten ops spent more time converting than computing)."""
        a, b = args
        if dt == F16 and sym in ("+", "-", "*"):
            return f"{a} {sym} {b}"
        if dt.kind == "f":
            return self.down(f"{self.up(a, dt)} {sym} {self.up(b, dt)}", dt)
        return f"{a} {sym} {b}"

    # unary ---------------------------------------------------------------------
    def op_neg(self, a, d, o):
        # floats: times -1, exact and keeps signed zeros (Triton 3.6 lowers -x as 0 - x,
        # which turns -(0.0) into +0.0 where NumPy gives -0.0)
        return f"{a[0]} * -1.0" if d[0].kind == "f" else f"-{a[0]}"

    def op_abs(self, a, d, o):
        if d[0].kind == "u" or d[0] == BOOL:
            return a[0]
        return f"tl.abs({a[0]})"

    def op_square(self, a, d, o):
        if d[0] == BOOL:
            return a[0]
        return self.binary_arith("*", [a[0], a[0]], d[0])

    def op_sign(self, a, d, o):
        x, dt = a[0], d[0]
        if dt.kind == "f":
            c = TL[compute_dtype(dt)]
            u = self.up(x, dt)
            # NumPy's sign of -0.0 is +0.0 (the zero branch is a constant); NaN stays NaN
            return self.down(f"tl.where({u} > 0, tl.full([], 1.0, {c}), "
                             f"tl.where({u} < 0, tl.full([], -1.0, {c}), "
                             f"tl.where({u} == 0, tl.full([], 0.0, {c}), {u})))", dt)
        if dt.kind == "u" or dt == BOOL:
            return f"({x} > 0).to({TL[dt]})"
        return f"({x} > 0).to({TL[dt]}) - ({x} < 0).to({TL[dt]})"

    def _native(self, fn: str):
        def lower(a, d, o):
            dt = d[0]
            if dt == F32 and self.target == "cuda" and fn == "exp" and EXP_F32_AS_PTX:
                self.uses_exp_f32 = True
                return f"_exp_f32({a[0]})"
            if dt.itemsize >= 4 and self.target == "cuda" and fn in ("exp", "log", "exp2", "log2"):
                # libdevice: within 2 ulp, as NumPy's; tl.exp/tl.log are ex2/lg2.approx, whose
                # error grows with |x| (exp(7) off by 4e-7, then sin(exp(7)) by 1e-3) and whose
                # log near 1 has a large relative error. float16 rounds far above either.
                return self.lib(fn, a[0])
            return self.unary_float(lambda u: f"tl.{fn}({u})", a[0], dt)
        return lower

    def op_exp(self, a, d, o):
        return self._native("exp")(a, d, o)

    def op_exp2(self, a, d, o):
        return self._native("exp2")(a, d, o)

    def op_log(self, a, d, o):
        return self._native("log")(a, d, o)

    def op_log2(self, a, d, o):
        return self._native("log2")(a, d, o)

    def _sqrt(self, dt: np.dtype) -> str:
        # sqrt_rn is the IEEE-rounded float32 sqrt (tl.sqrt is approximate); float64 sqrt is exact
        return "tl.sqrt" if dt == F64 else "tl.sqrt_rn"

    def op_sqrt(self, a, d, o):
        return self.unary_float(lambda u: f"{self._sqrt(d[0])}({u})", a[0], d[0])

    def op_rsqrt(self, a, d, o):
        # rsqrt(-0.0) is -inf (1 / sqrt(-0.0), as NumPy): on cuda, Triton 3.6's float64 path
        # gave +inf, so zeros take 1 / x directly, which keeps the sign on every target
        def expr(u: str) -> str:
            return f"tl.where({u} == 0, 1.0 / {u}, 1.0 / {self._sqrt(d[0])}({u}))"
        return self.unary_float(expr, a[0], d[0])

    def op_reciprocal(self, a, d, o):
        return self.unary_float(lambda u: f"1.0 / {u}", a[0], d[0])

    def op_sigmoid(self, a, d, o):
        # exp of -|x| only: 1 / (1 + exp(-x)) overflows exp for very negative x and returns 0
        # where the true value is a (subnormal) positive number
        u = self.tmp(self.up(a[0], d[0]), "x")
        e = self.tmp(f"tl.exp(-tl.abs({u}))", "e")
        return self.down(f"tl.where({u} >= 0, 1.0 / (1.0 + {e}), {e} / (1.0 + {e}))", d[0])

    def op_erf(self, a, d, o):
        return self.unary_float(lambda u: f"tl.erf({u})", a[0], d[0])

    def op_floor(self, a, d, o):
        return self.unary_float(lambda u: f"tl.floor({u})", a[0], d[0]) if d[0].kind == "f" else a[0]

    def op_ceil(self, a, d, o):
        return self.unary_float(lambda u: f"tl.ceil({u})", a[0], d[0]) if d[0].kind == "f" else a[0]

    def op_trunc(self, a, d, o):
        if d[0].kind != "f":
            return a[0]
        return self.unary_float(lambda u: f"tl.where({u} < 0, tl.ceil({u}), tl.floor({u}))",
                                a[0], d[0])

    def op_rint(self, a, d, o):
        x, dt = a[0], d[0]
        if dt.kind != "f":
            return x
        u = self.tmp(self.up(x, dt), "u")
        f = self.tmp(f"tl.floor({u})", "fl")
        r = self.tmp(f"{u} - {f}", "fr")
        odd = self.tmp(f"({f} - 2.0 * tl.floor({f} * 0.5)) != 0", "odd")
        n = self.tmp(f"tl.where(({r} > 0.5) | (({r} == 0.5) & {odd}), {f} + 1.0, {f})", "n")
        # a value that rounds to zero keeps its sign, as C's rint: rint(-0.3) is -0.0
        return self.down(f"tl.where({n} == 0, {u} * 0.0, {n})", dt)

    def op_isnan(self, a, d, o):
        return f"{a[0]} != {a[0]}"

    def op_isinf(self, a, d, o):
        return f"tl.abs({a[0]}) == INF"

    def op_isfinite(self, a, d, o):
        return f"tl.abs({a[0]}) < INF"

    def op_not(self, a, d, o):
        return f"{a[0]} == 0"

    def op_bitnot(self, a, d, o):
        return f"{a[0]} == 0" if d[0] == BOOL else f"~{a[0]}"

    # binary ------------------------------------------------------------------
    def op_add(self, a, d, o):
        return f"{a[0]} | {a[1]}" if d[0] == BOOL else self.binary_arith("+", a, d[0])

    def op_sub(self, a, d, o):
        return f"{a[0]} ^ {a[1]}" if d[0] == BOOL else self.binary_arith("-", a, d[0])

    def op_mul(self, a, d, o):
        return f"{a[0]} & {a[1]}" if d[0] == BOOL else self.binary_arith("*", a, d[0])

    def op_div(self, a, d, o):
        return self.binary_arith("/", a, d[0])

    def op_maximum(self, a, d, o):
        if d[0] == BOOL:
            return f"{a[0]} | {a[1]}"
        if d[0].kind == "f":
            # NumPy's loops on equal operands (signed zeros): float16 keeps the first,
            # float32/64 (SIMD) the second; NaN from either side. A select, so nothing rounds
            # (nested selects, no `|`: Triton's interpreter cannot or a scalar bool with a block)
            cmp = ">=" if d[0].itemsize == 2 else ">"
            return (f"tl.where({a[0]} != {a[0]}, {a[0]}, "
                    f"tl.where({a[0]} {cmp} {a[1]}, {a[0]}, {a[1]}))")
        return f"tl.maximum({a[0]}, {a[1]})"

    def op_minimum(self, a, d, o):
        if d[0] == BOOL:
            return f"{a[0]} & {a[1]}"
        if d[0].kind == "f":
            # as maximum: on equal operands float16 keeps the first, float32/64 the second
            cmp = "<=" if d[0].itemsize == 2 else "<"
            return (f"tl.where({a[0]} != {a[0]}, {a[0]}, "
                    f"tl.where({a[0]} {cmp} {a[1]}, {a[0]}, {a[1]}))")
        return f"tl.minimum({a[0]}, {a[1]})"

    def _int_divmod(self, a: str, b: str, dt: np.dtype) -> tuple[str, str, str]:
        """Safe divisor, truncated quotient and remainder (C semantics) of ints."""
        zero = self.tmp(f"{b} == 0", "bz")
        safe = self.tmp(f"tl.where({zero}, tl.full([], 1, {TL[dt]}), {b})", "bs")
        q = self.tmp(f"{a} // {safe}", "q")
        r = self.tmp(f"{a} % {safe}", "r")
        return zero, q, r

    def _signed_floor_fix(self, y: str, r: str) -> str:
        """Whether a truncated quotient needs flooring: a remainder whose sign is not y's."""
        return self.tmp(f"({r} != 0) & (({r} < 0) != ({y} < 0))", "fix")

    def _float_fmod(self, x: str, y: str, dt: np.dtype) -> tuple[str, str, str, str]:
        """(x, y in the compute dtype, fmod(x, y), whether fmod's sign is not y's)."""
        ux, uy = self.tmp(self.up(x, dt), "x"), self.tmp(self.up(y, dt), "y")
        # C's exact fmod: libdevice on the GPU, where Triton's float % is not exact
        # (1 % 1e-300, inf % inf); the interpreter's float % is NumPy's fmod already
        fmod = self.lib("fmod", ux, uy) if self.target == "cuda" else f"{ux} % {uy}"
        m = self.tmp(fmod, "m")
        return ux, uy, m, self.tmp(f"({m} != 0) & (({uy} < 0) != ({m} < 0))", "fix")

    def op_floordiv(self, a, d, o):
        x, y = a
        dt = d[0]
        if dt == BOOL:
            return f"{x} & {y}"
        if dt.kind in "iu":
            zero, q, r = self._int_divmod(x, y, dt)
            if dt.kind == "u":
                return f"tl.where({zero}, 0, {q})"
            return f"tl.where({zero}, 0, {q} - {self._signed_floor_fix(y, r)}.to({TL[dt]}))"
        ux, uy, m, fix = self._float_fmod(x, y, dt)
        # NumPy's npy_divmod, step by step
        q = self.tmp(f"({ux} - {m}) / {uy}", "q")
        q = self.tmp(f"tl.where({fix}, {q} - 1.0, {q})", "q")
        fl = self.tmp(f"tl.floor({q})", "fl")
        q = self.tmp(f"tl.where({q} - {fl} > 0.5, {fl} + 1.0, {fl})", "q")
        # a zero quotient takes the sign of x / y; y == 0 gives x / y
        q = self.tmp(f"tl.where({q} == 0, ({ux} / {uy}) * 0.0, {q})", "q")
        return self.down(f"tl.where({uy} == 0, {ux} / {uy}, {q})", dt)

    def op_mod(self, a, d, o):
        x, y = a
        dt = d[0]
        if dt == BOOL:
            return f"{x} & ({y} == 0)"
        if dt.kind in "iu":
            zero, q, r = self._int_divmod(x, y, dt)
            if dt.kind == "u":
                return f"tl.where({zero}, 0, {r})"
            return f"tl.where({zero}, 0, tl.where({self._signed_floor_fix(y, r)}, {r} + {y}, {r}))"
        ux, uy, m, fix = self._float_fmod(x, y, dt)
        r = self.tmp(f"tl.where({fix}, {m} + {uy}, {m})", "r")
        # NumPy's npy_divmod: a zero remainder takes the sign of y
        zero = self.tmp(f"tl.where({uy} < 0, tl.abs({m}) * -1.0, tl.abs({m}))", "z")
        return self.down(f"tl.where({m} == 0, {zero}, {r})", dt)

    def op_pow(self, a, d, o):
        x, y = a
        dt = d[0]
        if dt == BOOL:
            return f"{x} | ({y} == 0)"
        if dt.kind in "iu":
            r = self.tmp(f"tl.full([], 1, {TL[dt]}) + 0 * {x}", "acc")
            base = self.tmp(f"{x} + 0 * {y}", "base")
            e = self.tmp(f"{y} + 0 * {x}", "e")
            bits = dt.itemsize * 8
            # square-and-multiply over the exponent's bits (NumPy wraps the same way)
            self.raw([f"for _ in tl.static_range({bits}):",
                      f"    {r} = tl.where(({e} & 1) != 0, {r} * {base}, {r})",
                      f"    {base} = {base} * {base}",
                      f"    {e} = {e} >> 1"])
            if dt.kind == "u":
                return r
            # a negative exponent (NumPy raises; a kernel cannot): 1 / x**|y| truncated, as
            # the numpy backend computes it (``numpy_backend._int_power``): 1 for x = 1, +-1
            # for x = -1 by the exponent's parity, else 0
            one, zero = f"tl.full([], 1, {TL[dt]})", f"tl.full([], 0, {TL[dt]})"
            inverse = self.tmp(
                f"tl.where({x} == 1, {one}, tl.where({x} == -1, "
                f"tl.where(({y} & 1) != 0, -{one}, {one}), {zero}))", "inv")
            return f"tl.where({y} < 0, {inverse}, {r})"
        return self.math("pow", a, dt)

    def _cmp(sym: str):  # noqa: N805  (a factory used at class creation)
        def lower(self, a, d, o):
            return f"{a[0]} {sym} {a[1]}"
        return lower

    op_lt, op_le, op_gt, op_ge = _cmp("<"), _cmp("<="), _cmp(">"), _cmp(">=")
    op_eq, op_ne = _cmp("=="), _cmp("!=")
    op_and, op_or, op_xor = _cmp("&"), _cmp("|"), _cmp("^")
    op_bitand, op_bitor, op_bitxor = _cmp("&"), _cmp("|"), _cmp("^")

    def op_shl(self, a, d, o):
        x, y = a
        dt = o
        bits = dt.itemsize * 8
        s = self.tmp(f"{y}.to({TL[dt]})", "sh") if d[1] != dt else y
        # the out-of-range value typed as the result: a bare literal may widen it to int32
        return f"tl.where(({s} >= {bits}) | ({s} < 0), tl.full([], 0, {TL[dt]}), {x} << {s})"

    def op_shr(self, a, d, o):
        x, y = a
        dt = o
        bits = dt.itemsize * 8
        s = self.tmp(f"{y}.to({TL[dt]})", "sh") if d[1] != dt else y
        # the out-of-range values typed as the result: tl.where(x < 0, -1, 0) of two literals
        # is int32, which widened an int8 shift (a later square then did not wrap)
        zero = f"tl.full([], 0, {TL[dt]})"
        big = zero if dt.kind == "u" else f"tl.where({x} < 0, tl.full([], -1, {TL[dt]}), {zero})"
        return f"tl.where(({s} >= {bits}) | ({s} < 0), {big}, {x} >> {s})"

    def op_where(self, a, d, o):
        return f"tl.where({a[0]}, {a[1]}, {a[2]})"

    def cast(self, x: str, src: np.dtype, dst: np.dtype) -> str:
        """NumPy ``astype`` (C-style float -> int truncation)."""
        if src == dst:
            return x
        if dst == BOOL:
            return f"{x} != 0"
        if src.kind == "f" and dst.kind == "u":
            # NumPy (on x86) goes through int64, so -1.0 -> 255 for uint8
            if dst.itemsize < 8:
                return f"{self.up(x, src)}.to(tl.int64).to({TL[dst]})"
            u = self.up(x, src)
            return (f"tl.where({u} < 0, {u}.to(tl.int64).to(tl.uint64), "
                    f"{u}.to(tl.uint64))")
        if src == F16 and dst.kind in "iu":
            return f"{x}.to(tl.float32).to({TL[dst]})"
        return f"{x}.to({TL[dst]})"

    def op_tanh(self, a, d, o):
        dt = d[0]
        if self.target == "cuda" and dt == F16:
            # the hardware's tanh (one MUFU.TANH against libdevice's ~20 dependent steps):
            # relative error under 2**-10.98, so with float16's rounding the result is within
            # one float16 ulp of NumPy's (which rounds float32 tanh). GELU's tanh form in a
            # float16 GEMM epilogue: H200, 8192x2048 @ 2048x8192 + bias, 600 TFLOP/s bare,
            # 467 with libdevice's tanh (bench/exp_matmul.py --mlp)
            return self.down(f'tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", '
                             f'[{self.up(a[0], dt)}], dtype=tl.float32, is_pure=True, pack=1)',
                             dt)
        return self.math("tanh", a, dt)

    # math with a libdevice lowering on cuda and formulas in the interpreter -----
    def math(self, op: str, args: list[str], dt: np.dtype) -> str:
        """libdevice-only math: libdevice on ``cuda``, float64 formulas in the interpreter."""
        if self.target == "cuda":
            ups = [self.up(x, dt) for x in args]
            name = _LIBDEVICE_UNARY.get(op, op)
            return self.down(self.lib(name, *ups), dt)
        xs = [self.tmp(self.f64(x, dt), "d") for x in args]
        return self.back(self.formula(op, xs), dt)

    def _expm1(self, x: str) -> str:
        u = self.tmp(f"tl.exp({x})", "u")
        # Kahan: (u - 1) * x / log(u) is accurate where u - 1 cancels
        return self.tmp(f"tl.where({u} == 1.0, {x}, tl.where(tl.abs({x}) < 0.5, "
                        f"({u} - 1.0) * {x} / tl.log({u}), {u} - 1.0))", "em1")

    def _log1p(self, x: str) -> str:
        u = self.tmp(f"1.0 + {x}", "u")
        return self.tmp(f"tl.where({u} == 1.0, {x}, tl.where(tl.abs({x}) < 0.5, "
                        f"tl.log({u}) * {x} / ({u} - 1.0), tl.log({u})))", "l1p")

    def _signbit(self, x: str) -> str:
        """Whether the float64 ``x`` has its sign bit set (-0.0 and -inf included, NaN not).

        Through 1 / x rather than a bitcast: Triton 3.6's interpreter loses the sign of -0.0
        in ``x.to(tl.int64, bitcast=True)``; counted with int8 rather than ``|`` (see
        ``tl.where`` of scalars in the emitter).
        """
        return self.tmp(f"({x} < 0).to(tl.int8) + (1.0 / {x} < 0).to(tl.int8) > 0", "neg")

    def _atan(self, x: str) -> str:
        ax = self.tmp(f"tl.abs({x})", "ax")
        big = self.tmp(f"{ax} > 1.0", "big")
        t = self.tmp(f"tl.where({big}, 1.0 / {ax}, {ax})", "t")
        # two half-angle steps: atan(t) = 2 atan(t / (1 + sqrt(1 + t^2)))
        t = self.tmp(f"{t} / (1.0 + tl.sqrt(1.0 + {t} * {t}))", "t")
        t = self.tmp(f"{t} / (1.0 + tl.sqrt(1.0 + {t} * {t}))", "t")
        t2 = self.tmp(f"{t} * {t}", "t2")
        poly = "0.0"
        for k in range(12, -1, -1):
            sign = "-" if k % 2 else ""
            poly = f"({sign}1.0 / {2 * k + 1}.0 + {t2} * {poly})" if poly != "0.0" else \
                f"{sign}1.0 / {2 * k + 1}.0"
        r = self.tmp(f"4.0 * {t} * {poly}", "at")
        r = self.tmp(f"tl.where({big}, {HALF_PI} - {r}, {r})", "at")
        # odd, including the sign of zero (signbit, since -0.0 < 0 is false)
        return self.tmp(f"tl.where({self._signbit(x)}, {r} * -1.0, {r})", "at")

    def _half_exp(self, ax: str) -> str:
        """``exp(ax) / 2`` without overflowing early: ``exp(ax)`` is inf from ax = 709.78, its
        half only from 710.48 (sinh(-710) was -inf against NumPy's -1.117e308: interpret
        fuzz, seed 9731); the half of exp(ax / 2), times exp(ax / 2), is finite to there."""
        h = self.tmp(f"tl.exp(0.5 * {ax})", "h")
        return f"(0.5 * {h}) * {h}"

    def formula(self, op: str, xs: list[str]) -> str:
        """The interpreter's float64 formula for ``op`` from exp, log, sqrt, sin and cos."""
        x = xs[0]
        if op == "expm1":
            return self._expm1(x)
        if op == "log1p":
            return self._log1p(x)
        if op == "log10":
            return f"tl.log({x}) * 0.4342944819032518"
        if op == "sin":
            return f"tl.sin({x})"
        if op == "cos":
            return f"tl.cos({x})"
        if op == "tan":
            return f"tl.sin({x}) / tl.cos({x})"
        if op == "sinh":
            # odd: work on |x| (expm1 of a large negative x cancels to -1), and past 20 the
            # e / (e + 1) term is 1 (it would be inf / inf at infinity)
            ax = self.tmp(f"tl.abs({x})", "ax")
            e = self._expm1(ax)
            r = self.tmp(f"tl.where({ax} > 20.0, {self._half_exp(ax)}, "
                         f"0.5 * ({e} + {e} / ({e} + 1.0)))", "sh")
            return f"tl.where({self._signbit(x)}, {r} * -1.0, {r})"
        if op == "cosh":
            ax = self.tmp(f"tl.abs({x})", "ax")
            return (f"tl.where({ax} > 20.0, {self._half_exp(ax)}, "
                    f"0.5 * (tl.exp({ax}) + tl.exp(-{ax})))")
        if op == "tanh":
            e = self._expm1(self.tmp(f"2.0 * {x}", "x2"))
            return f"tl.where(tl.abs({x}) > 20.0, tl.where({x} > 0, 1.0, -1.0), {e} / ({e} + 2.0))"
        if op == "asinh":
            ax = self.tmp(f"tl.abs({x})", "ax")
            r = self._log1p(self.tmp(f"{ax} + {ax} * {ax} / (1.0 + tl.sqrt(1.0 + {ax} * {ax}))",
                                     "w"))
            # past 2**28, asinh(x) = log(2x) to double precision (and ax * ax would overflow)
            r = self.tmp(f"tl.where({ax} > 268435456.0, tl.log({ax}) + 0.6931471805599453, {r})",
                         "ash")
            return f"tl.where({self._signbit(x)}, {r} * -1.0, {r})"
        if op == "acosh":
            # past 2**28, acosh(x) = log(2x) to double precision (and x * x would overflow)
            r = self.tmp(f"tl.where({x} > 268435456.0, tl.log({x}) + 0.6931471805599453, "
                         f"tl.log({x} + tl.sqrt({x} * {x} - 1.0)))", "ach")
            return f"tl.where({x} < 1.0, {NAN}, {r})"
        if op == "atanh":
            # on |x|, then the sign: near -1, 2x / (1 - x) is -1 plus a residue that lost
            # its digits (1.2e-12 off at -0.999995: interpret fuzz, seed 9615); near +1,
            # 1 - x is exact and the quotient large, so log1p keeps every digit
            ax = self.tmp(f"tl.abs({x})", "ax")
            r = self._log1p(self.tmp(f"2.0 * {ax} / (1.0 - {ax})", "w"))
            r = self.tmp(f"0.5 * {r}", "ath")
            return f"tl.where({self._signbit(x)}, {r} * -1.0, {r})"
        if op == "atan":
            return self._atan(x)
        if op == "asin":
            r = self._atan(self.tmp(f"{x} / tl.sqrt(1.0 - {x} * {x})", "w"))
            return f"tl.where(tl.abs({x}) <= 1.0, {r}, {NAN})"
        if op == "acos":
            r = self._atan(self.tmp(f"tl.sqrt((1.0 - {x}) / (1.0 + {x}))", "w"))
            return f"tl.where(tl.abs({x}) <= 1.0, 2.0 * {r}, {NAN})"
        if op == "atan2":
            # IEEE atan2, as NumPy: quadrants from the signs (signbit, so -0.0 counts), the
            # axes and the infinities handled apart from atan(y / x)
            y, xx = xs
            r = self._atan(self.tmp(f"{y} / {xx}", "w"))
            sy = self.tmp(self._signbit(y), "sy")
            sx = self.tmp(self._signbit(xx), "sx")
            # python-float branches of tl.where would be float32: keep float64 operands
            zero = self.tmp(f"{sy}.to(tl.float64) * 0.0", "z0")  # a float64 0 (0 * inf is nan)
            pi = self.tmp(f"{zero} + {PI}", "pi")
            left = self.tmp(f"tl.where({sy}, {r} - {pi}, {r} + {pi})", "wr")
            on_axis = self.tmp(f"tl.where({y} == 0, tl.where({sx}, tl.where({sy}, -{pi}, {pi}), "
                               f"{y}), tl.where({y} > 0, 0.5 * {pi}, -0.5 * {pi}))", "ax")
            corner = self.tmp(f"tl.where({sx}, 0.75 * {pi}, 0.25 * {pi})", "cr")
            corner = self.tmp(f"tl.where({sy}, -{corner}, {corner})", "cr")
            finite = self.tmp(f"tl.where({xx} > 0, {r}, tl.where({xx} < 0, {left}, {on_axis}))",
                              "at2")
            # counted rather than combined with & and |: the interpreter refuses those when
            # one side comes from a 0-d constant
            both_inf = self.tmp(f"(tl.abs({xx}) == INF).to(tl.int8) + "
                                f"(tl.abs({y}) == INF).to(tl.int8) == 2", "ii")
            nan = self.tmp(f"({xx} != {xx}).to(tl.int8) + ({y} != {y}).to(tl.int8) > 0", "nn")
            return f"tl.where({nan}, {xx} + {y}, tl.where({both_inf}, {corner}, {finite}))"
        if op == "pow":
            a, b = xs
            aa = self.tmp(f"tl.abs({a})", "aa")
            mag = self.tmp(f"tl.exp2({b} * tl.log2({aa}))", "mag")
            bint = self.tmp(f"tl.floor({b}) == {b}", "bint")
            odd = self.tmp(f"(tl.floor({b} * 0.5) * 2.0) != {b}", "odd")
            # IEEE pow: an odd integer exponent keeps the base's sign (-0.0 and -inf included);
            # a finite negative base to a non-integer power is nan
            signed = self.tmp(f"tl.where({self._signbit(a)}, tl.where({bint}, tl.where({odd}, "
                              f"{mag} * -1.0, {mag}), {mag}), {mag})", "pw")
            bad = self.tmp(f"tl.where({a} < 0, tl.where({a} != -INF, tl.where({bint}, 0, 1), 0), 0)",
                           "nan")
            r = self.tmp(f"tl.where({bad} == 1, {NAN}, {signed})", "pw")
            # (-1) ** +-inf is 1 (0 * log2(1) would be nan)
            r = self.tmp(f"tl.where({aa} == 1.0, tl.where(tl.abs({b}) == INF, 1.0, {r}), {r})", "pw")
            return f"tl.where({b} == 0, 1.0, tl.where({a} == 1.0, 1.0, {r}))"
        raise NotImplementedError(op)
