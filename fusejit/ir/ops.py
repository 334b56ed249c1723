"""The op set of the fusejit IR: one table, read by every layer.

Each op has a category that fixes its typing rule:

* ``elementwise``: operands of one shape; ``operand`` says what the operand
  dtypes must be (``same``: all equal; ``number``: all equal and not bool, where NumPy has
  no bool loop; ``where``: bool then two equal) and
  ``result`` gives the result dtype (``same`` or ``bool``). Their NumPy
  reference is ``numpy`` (a NumPy function name; the numpy backend supplies
  ``rsqrt``, ``sigmoid``, ``erf`` and ``reciprocal`` itself).
* ``reduce``: one operand, attributes ``axes`` and ``keepdims``.
* ``view``: one operand, index arithmetic only (reshape, permute, expand, slice).
* ``leaf``: no operands (``const``, ``iota``).
* ``cast``: one operand, result dtype is the declared one.
* ``matmul``: the matrix product of ``[..., M, K]`` and ``[..., K, N]`` operands of one
  dtype and equal batch dimensions (the frontend promotes, broadcasts and reshapes
  1-D operands first), giving ``[..., M, N]`` of that dtype. Optional attribute
  ``precision`` (float32 only): ``ieee`` (the default, NumPy's answer), ``tf32`` or
  ``tf32x3`` (tensor-core products, see ``MATMUL_PRECISIONS``).

The frontend inserts casts so that elementwise operands already have the
loop dtypes NumPy would pick: the IR itself never promotes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    """One op of the IR: its name, typing category, operand count and NumPy reference."""

    name: str
    category: str          # elementwise | reduce | view | leaf | cast
    arity: int
    numpy: str = ""        # NumPy reference function for the numpy backend
    operand: str = "same"  # same | number | bool | int | float | int_or_bool | where
    result: str = "same"   # same | bool | i64


def _ew(name: str, arity: int, numpy: str, operand: str = "same", result: str = "same") -> OpInfo:
    return OpInfo(name, "elementwise", arity, numpy, operand, result)


_ELEMENTWISE = [
    # unary, any numeric dtype ("number": NumPy has no bool -> bool loop for ``negative``,
    # ``sign`` (they raise) or ``square`` (int8); the frontend casts bools first, as NumPy does)
    _ew("neg", 1, "negative", "number"), _ew("abs", 1, "absolute"),
    _ew("square", 1, "square", "number"), _ew("sign", 1, "sign", "number"),
    # unary, float only (the frontend casts ints to NumPy's float loop dtype first)
    *(_ew(n, 1, f, "float") for n, f in [
        ("exp", "exp"), ("exp2", "exp2"), ("expm1", "expm1"), ("log", "log"),
        ("log2", "log2"), ("log10", "log10"), ("log1p", "log1p"), ("sqrt", "sqrt"),
        ("rsqrt", "rsqrt"), ("reciprocal", "reciprocal"), ("sin", "sin"), ("cos", "cos"),
        ("tan", "tan"), ("asin", "arcsin"), ("acos", "arccos"), ("atan", "arctan"),
        ("sinh", "sinh"), ("cosh", "cosh"), ("tanh", "tanh"), ("asinh", "arcsinh"),
        ("acosh", "arccosh"), ("atanh", "arctanh"), ("sigmoid", "sigmoid"), ("erf", "erf"),
    ]),
    # rounding keeps integer dtypes (NumPy 2 loops exist for them: the identity)
    _ew("floor", 1, "floor"), _ew("ceil", 1, "ceil"), _ew("trunc", 1, "trunc"),
    _ew("rint", 1, "rint", "number"),  # (NumPy rounds bools to float16)
    _ew("isnan", 1, "isnan", "float", "bool"), _ew("isinf", 1, "isinf", "float", "bool"),
    _ew("isfinite", 1, "isfinite", "float", "bool"),
    _ew("not", 1, "logical_not", "bool", "bool"),
    _ew("bitnot", 1, "invert", "int_or_bool"),
    # binary arithmetic: both operands and the result share one dtype (bools: ``subtract``
    # raises; ``floor_divide``, ``remainder`` and ``power`` compute them as int8)
    _ew("add", 2, "add"), _ew("sub", 2, "subtract", "number"), _ew("mul", 2, "multiply"),
    _ew("div", 2, "true_divide", "float"), _ew("floordiv", 2, "floor_divide", "number"),
    _ew("mod", 2, "remainder", "number"), _ew("pow", 2, "power", "number"),
    _ew("maximum", 2, "maximum"), _ew("minimum", 2, "minimum"),
    _ew("atan2", 2, "arctan2", "float"),
    # comparisons
    *(_ew(n, 2, f, "same", "bool") for n, f in [
        ("lt", "less"), ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal"),
        ("eq", "equal"), ("ne", "not_equal")]),
    # logical (bool) and bitwise (int or bool)
    _ew("and", 2, "logical_and", "bool", "bool"), _ew("or", 2, "logical_or", "bool", "bool"),
    _ew("xor", 2, "logical_xor", "bool", "bool"),
    _ew("bitand", 2, "bitwise_and", "int_or_bool"), _ew("bitor", 2, "bitwise_or", "int_or_bool"),
    _ew("bitxor", 2, "bitwise_xor", "int_or_bool"),
    _ew("shl", 2, "left_shift", "int"), _ew("shr", 2, "right_shift", "int"),
    # selection
    _ew("where", 3, "where", "where"),
]

_REDUCE = [
    OpInfo("sum", "reduce", 1, "sum"), OpInfo("prod", "reduce", 1, "prod"),
    OpInfo("max", "reduce", 1, "max"), OpInfo("min", "reduce", 1, "min"),
    OpInfo("argmax", "reduce", 1, "argmax", result="i64"),
    OpInfo("argmin", "reduce", 1, "argmin", result="i64"),
    OpInfo("any", "reduce", 1, "any", "bool", "bool"),
    OpInfo("all", "reduce", 1, "all", "bool", "bool"),
    # sum of squared deviations from the mean over the axes (float): var's numerator, computed
    # in one pass (Welford per lane, Chan's formula to combine) instead of mean then re-read
    OpInfo("m2", "reduce", 1, "m2", "float"),
    # sum of exp(x - max(x)) over the axes (float): softmax's denominator, computed online (a
    # running max per lane rescales the running sum) so the row is read once for both statistics
    OpInfo("sumexp", "reduce", 1, "sumexp", "float"),
]

#: Reductions with no identity: over an extent of 0 they are errors (NumPy raises; the
#: frontend refuses them when recorded).
NO_IDENTITY = frozenset({"max", "min", "argmax", "argmin", "sumexp"})

_VIEW = [OpInfo(n, "view", 1) for n in ("reshape", "permute", "expand", "slice")]
_OTHER = [OpInfo("const", "leaf", 0), OpInfo("iota", "leaf", 0), OpInfo("cast", "cast", 1),
          OpInfo("matmul", "matmul", 2, "matmul")]

OPS: dict[str, OpInfo] = {op.name: op for op in (*_ELEMENTWISE, *_REDUCE, *_VIEW, *_OTHER)}

#: ``precision`` of a float32 ``matmul``, and what each means (the default is ``ieee``):
#: ``ieee`` multiplies and adds in float32 (NumPy's answer, no tensor cores); ``tf32`` rounds
#: the inputs to TF32 (10-bit mantissa: relative error about 2**-11 per product) and runs on
#: tensor cores; ``tf32x3`` splits each input into two TF32 parts and adds three tensor-core
#: products (about float32 accuracy, at a third of TF32's speed).
MATMUL_PRECISIONS = ("ieee", "tf32", "tf32x3")

ELEMENTWISE = frozenset(op.name for op in _ELEMENTWISE)
REDUCE = frozenset(op.name for op in _REDUCE)
VIEW = frozenset(op.name for op in _VIEW)
LEAF = frozenset(("const", "iota"))
#: Reductions that combine associatively: partial results (of a split reduction) combine again
#: (argmax and argmin as (best value, its first index) pairs, combined in chunk order).
SPLITTABLE = frozenset({"sum", "prod", "max", "min", "any", "all", "m2", "sumexp", "argmax",
                        "argmin"})
#: Those a cooperative row kernel combines (its partials carry no indices).
COOPERATIVE = SPLITTABLE - {"argmax", "argmin"}
#: Ops computed per element (elementwise ops, casts and leaves): what a pointwise region holds.
POINTWISE = ELEMENTWISE | {"cast"} | LEAF

#: Attributes each op takes: name -> required (True) or optional flag (False).
ATTRS: dict[str, dict[str, bool]] = {
    **{name: {} for name in ELEMENTWISE},
    **{name: {"axes": True, "keepdims": False} for name in REDUCE},
    "reshape": {"shape": True},
    "permute": {"perm": True},
    "expand": {"shape": True},
    "slice": {"start": True, "stop": True, "step": True},
    "const": {"value": True},
    "iota": {"start": True, "step": True},
    "cast": {},
    "matmul": {"precision": False},
}
