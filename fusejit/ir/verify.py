"""The verifier: the rules every Program obeys, checked with positions.

``verify`` runs on every parsed program (the parser calls it) and can run on
any Program built in code. It checks, in one pass over the body:

* SSA: each name defined once, and before its use;
* each instruction against the op table (``OPS``, ``ATTRS``): operand count,
  operand and result dtypes, shapes, attribute names, presence and values;
* scalar params (passed by value): 0-d, never returned or yielded, bound only
  to scalar params; elementwise ops take them as operands of any shape;
* kernel blocks: closed (the body reads only its params and its own values),
  params typed like the outer operands, yields defined and typed like the
  declared results, and (through the ``region_check`` hook, which the fusion
  pass supplies) that the region can really be one kernel;
* the returned values, against the ``func`` line's declared types when the
  program came from text.

The first broken rule raises ``IRVerifyError`` at the offending statement's
``line:column`` (when the statement came from text).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import BOOL, INT64, ir_name
from ..errors import IRVerifyError
from .domain import KINDS as KERNEL_KINDS  # the launch kinds a kernel block may declare
from .ops import ATTRS, MATMUL_PRECISIONS, NO_IDENTITY, OPS
from .program import Instr, Kernel, Program, TensorType

RegionCheck = Callable[[Kernel], "str | None"]

# The fusion pass's legality check, used when ``verify`` gets no region_check:
# the ir layer cannot import fuse (dependencies point down), so fuse registers it.
_registered_region_check: RegionCheck | None = None


def register_region_check(check: RegionCheck | None) -> None:
    """Install the default kernel-legality check (the fusion pass calls this at import).

    ``check(kernel)`` returns a reason why the Kernel block cannot be one
    kernel, or None. Every ``verify`` without an explicit ``region_check``
    (so every ``parse``) then applies it. ``None`` removes it.
    """
    global _registered_region_check
    _registered_region_check = check


def verify(program: Program, source_lines: list[str] | None = None, *, filename: str | None = None,
           signature: Any = None, region_check: RegionCheck | None = None) -> None:
    """Check every IR rule on ``program``; raise ``IRVerifyError`` at the first broken one.

    ``source_lines`` (the text split in lines) and ``filename`` make errors
    show the offending line. ``signature`` is the parser's record of the
    declared output types. ``region_check(kernel)`` returns a reason why a
    kernel block cannot be one kernel, or None: it is the fusion pass's
    legality check, called for each Kernel after its structural checks
    (default: the one installed with ``register_region_check``).
    """
    check = region_check if region_check is not None else _registered_region_check
    _Verifier(program, source_lines, filename, check).run(signature)


class _Verifier:
    def __init__(self, program: Program, source_lines: list[str] | None, filename: str | None,
                 region_check: RegionCheck | None) -> None:
        self.program = program
        #: names of the scalar params in the current scope (the program's, or a kernel's)
        self.scalars: frozenset[str] = frozenset()
        self.lines = source_lines
        self.filename = filename
        self.region_check = region_check

    # -- errors -------------------------------------------------------------------
    def error(self, message: str, where: Any = None, line: int | None = None,
              column: int | None = None) -> IRVerifyError:
        if where is not None:
            line, column = getattr(where, "line", None), getattr(where, "column", None)
        source = None
        if self.lines is not None and line is not None and 0 < line <= len(self.lines):
            source = self.lines[line - 1]
        return IRVerifyError(message, line=line, column=column, source_line=source,
                             filename=self.filename)

    # -- the program --------------------------------------------------------------
    def run(self, signature: Any) -> None:
        program = self.program
        sig_line = getattr(signature, "line", None)
        sig_col = getattr(signature, "column", None)
        env: dict[str, TensorType] = {}
        for p in program.inputs:
            if p.name in env:
                raise self.error(f"input '%{p.name}' is declared twice", line=sig_line, column=sig_col)
            if p.scalar and p.type.shape:
                raise self.error(f"scalar input '%{p.name}' has shape {list(p.type.shape)}; a "
                                 f"scalar is 0-d", line=sig_line, column=sig_col)
            env[p.name] = p.type
        self.scalars = program.scalar_inputs
        defined_at: dict[str, Any] = {}
        later = self._definitions(program.body)
        for stmt in program.body:
            if isinstance(stmt, Kernel):
                self.kernel(stmt, env, defined_at, later)
            else:
                self.instr(stmt, env, later, defined_at, scope="")
        self.returns(env, signature)

    def _definitions(self, body: list) -> dict[str, Any]:
        """Where each name is (first) defined, to tell 'used before' from 'never defined'."""
        out: dict[str, Any] = {}
        for stmt in body:
            for name in (stmt.results if isinstance(stmt, Kernel) else (stmt.name,)):
                out.setdefault(name, stmt)
        return out

    def define(self, name: str, type_: TensorType, stmt: Any, env: dict, defined_at: dict) -> None:
        if name in env:
            first = defined_at.get(name)
            where = f" (first defined at line {first.line})" if getattr(first, "line", None) else ""
            raise self.error(f"'%{name}' is defined twice{where}", stmt)
        env[name] = type_
        defined_at[name] = stmt

    def use(self, name: str, stmt: Any, env: dict, later: dict, scope: str) -> TensorType:
        if name in env:
            return env[name]
        if scope:
            raise self.error(f"kernel {scope} is not closed: '%{name}' is not one of its params "
                             f"or values (pass outer values in as arguments)", stmt)
        if name in later:
            when = later[name]
            at = f" at line {when.line}" if getattr(when, "line", None) else " later"
            raise self.error(f"'%{name}' is used before it is defined (it is defined{at})", stmt)
        raise self.error(f"'%{name}' is not defined", stmt)

    def returns(self, env: dict, signature: Any) -> None:
        line = getattr(signature, "return_line", None)
        column = getattr(signature, "return_column", None)
        types = []
        for name in self.program.outputs:
            if name not in env:
                raise self.error(f"return of '%{name}', which is not defined", line=line,
                                 column=column)
            if name in self.scalars:
                raise self.error(f"return of '%{name}', a scalar param: a program returns "
                                 f"buffers (compute something from it)", line=line, column=column)
            types.append(env[name])
        if signature is None:
            return
        declared = tuple(signature.output_types)
        if len(declared) != len(types):
            raise self.error(f"@{self.program.name} declares {len(declared)} results but returns "
                             f"{len(types)}", line=line, column=column)
        for i, (name, got, want) in enumerate(zip(self.program.outputs, types, declared)):
            if got != want:
                raise self.error(f"return type mismatch: result {i} '%{name}' is {got}, but the "
                                 f"signature declares {want}", line=line, column=column)

    # -- kernel blocks ----------------------------------------------------------------
    def kernel(self, k: Kernel, env: dict, defined_at: dict, later: dict) -> None:
        label = f"@{k.name}"
        arg_types = [self.use(a, k, env, later, "") for a in k.args]
        if len(k.args) != len(k.params):
            raise self.error(f"kernel {label} takes {len(k.params)} params but is passed "
                             f"{len(k.args)} operands", k)
        inner: dict[str, TensorType] = {}
        inner_at: dict[str, Any] = {}
        outer_scalars = self.scalars
        for a, p, t in zip(k.args, k.params, arg_types):
            if p.type != t:
                raise self.error(f"kernel {label}: param '%{p.name}' is {p.type} but its operand "
                                 f"'%{a}' is {t}", k)
            if p.scalar != (a in outer_scalars):
                passed = "a scalar param" if a in outer_scalars else "a buffer"
                declared = "a scalar" if p.scalar else "a buffer"
                raise self.error(f"kernel {label}: param '%{p.name}' is declared {declared} but "
                                 f"its operand '%{a}' is {passed} (scalar params are written "
                                 f"'%name: dtype', buffers '%name: dtype[shape]')", k)
            if p.name in inner:
                raise self.error(f"kernel {label}: param '%{p.name}' is declared twice", k)
            inner[p.name] = p.type
            inner_at[p.name] = k
        for key, value in k.attrs.items():
            if not (isinstance(value, (int, float, str)) or _int_list(value)):
                raise self.error(f"kernel {label}: attribute '{key}' must be a number, a word or "
                                 f"a list of integers", k)
        kind = k.attrs.get("kind")
        if kind is not None and kind not in KERNEL_KINDS:
            raise self.error(f"kernel {label}: kind={kind} is not one of {', '.join(KERNEL_KINDS)}", k)
        inner_later = self._definitions(k.body)
        self.scalars = frozenset(p.name for p in k.params if p.scalar)
        try:
            for stmt in k.body:
                if isinstance(stmt, Kernel):
                    raise self.error(f"kernel {label}: kernels do not nest", stmt)
                self.instr(stmt, inner, inner_later, inner_at, scope=label)
            for y in k.yields:
                if y in self.scalars:
                    raise self.error(f"kernel {label} yields '%{y}', a scalar param: a kernel "
                                     f"writes buffers (compute something from it)", k)
        finally:
            self.scalars = outer_scalars
        if not (len(k.yields) == len(k.results) == len(k.result_types)):
            raise self.error(f"kernel {label} yields {len(k.yields)} values for {len(k.results)} "
                             f"results and {len(k.result_types)} declared types", k)
        for y, r, t in zip(k.yields, k.results, k.result_types):
            if y not in inner:
                raise self.error(f"kernel {label} yields '%{y}', which it does not define", k)
            if inner[y] != t:
                raise self.error(f"yield type mismatch: kernel {label} yields '%{y}' of type "
                                 f"{inner[y]} as result '%{r}' declared {t}", k)
        for r, t in zip(k.results, k.result_types):
            self.define(r, t, k, env, defined_at)
        if self.region_check is not None:
            reason = self.region_check(k)
            if reason:
                raise self.error(f"kernel {label} cannot be one kernel: {reason}", k)

    # -- instructions -------------------------------------------------------------------
    def instr(self, instr: Instr, env: dict, later: dict, defined_at: dict, scope: str) -> None:
        op = instr.op
        info = OPS.get(op)
        if info is None:
            raise self.error(f"unknown op '{op}'", instr)
        if len(instr.args) != info.arity:
            raise self.error(f"'{op}' takes {info.arity} operand{'s' if info.arity != 1 else ''}, "
                             f"got {len(instr.args)}", instr)
        operands = [self.use(a, instr, env, later, scope) for a in instr.args]
        allowed = ATTRS[op]
        for name in instr.attrs:
            if name not in allowed:
                takes = ", ".join(allowed) or "no attributes"
                raise self.error(f"unknown attribute '{name}' for '{op}' (it takes {takes})", instr)
        for name, required in allowed.items():
            if required and name not in instr.attrs:
                raise self.error(f"'{op}' needs the attribute '{name}'", instr)
        if info.category == "elementwise":
            problem = _elementwise(instr, operands, self.scalars)
        else:
            problem = _CHECKS[info.category](instr, operands)
        if problem:
            raise self.error(problem, instr)
        self.define(instr.name, instr.type, instr, env, defined_at)


# -- per-category typing rules: each returns a problem sentence or None ---------------------

def _show(t: TensorType) -> str:
    return str(t)


def _elementwise(instr: Instr, operands: list[TensorType],
                 scalars: frozenset[str] = frozenset()) -> str | None:
    """Operands of the result's shape (scalar params, passed by value, stand for their value
    at every element), one dtype (after the ``where`` condition), a dtype the op takes."""
    info = OPS[instr.op]
    result = instr.type
    for name, t in zip(instr.args, operands):
        if t.shape != result.shape and name not in scalars:
            return (f"shape mismatch: operand '%{name}' is {_show(t)} but '{instr.op}' makes "
                    f"{_show(result)} (elementwise operands have the result's shape: expand first)")
    dtypes = [t.dtype for t in operands]
    rule = info.operand
    if rule == "where":
        if dtypes[0] != BOOL:
            return f"'where' needs a bool condition, got {ir_name(dtypes[0])}"
        dtypes = dtypes[1:]
    if len(set(dtypes)) > 1:
        return (f"dtype mismatch: '{instr.op}' operands are "
                f"{', '.join(ir_name(d) for d in dtypes)} (they must share one dtype: cast first)")
    dt = dtypes[0]
    kind_ok = {"same": True, "where": True, "number": dt != BOOL, "bool": dt == BOOL,
               "float": dt.kind == "f", "int": dt.kind in "iu",
               "int_or_bool": dt.kind in "iub"}[rule]
    if not kind_ok and rule == "number":
        return (f"bad dtype: '{instr.op}' of bool is not an op (NumPy has no bool "
                f"'{info.numpy}': cast to an integer first)")
    if not kind_ok:
        wanted = {"bool": "bool", "float": "float", "int": "integer",
                  "int_or_bool": "integer or bool"}[rule]
        return f"bad dtype: '{instr.op}' needs {wanted} operands, got {ir_name(dt)}"
    want = BOOL if info.result == "bool" else dt
    if result.dtype != want:
        return f"bad dtype: '{instr.op}' of {ir_name(dt)} gives {ir_name(want)}, not {ir_name(result.dtype)}"
    return None


def _int_list(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool)
                                            for v in value)


def _reduce(instr: Instr, operands: list[TensorType]) -> str | None:
    op, (src,), result = instr.op, operands, instr.type
    axes, keep = instr.attrs["axes"], instr.attrs.get("keepdims", False)
    if not isinstance(keep, bool):
        return f"'keepdims' is a flag (write 'keepdims' or leave it out), not {_lit(keep)}"
    if not _int_list(axes):
        return f"'axes' must be a list of integers, not {_lit(axes)}"
    ndim = len(src.shape)
    if any(not 0 <= a < ndim for a in axes):
        return f"bad axes {list(axes)}: the operand has {ndim} dimension{'s' if ndim != 1 else ''}"
    if list(axes) != sorted(set(axes)):
        return f"bad axes {list(axes)}: axes must be sorted and unique"
    if op in ("argmax", "argmin") and len(axes) != 1:
        return f"'{op}' reduces exactly one axis, got {list(axes)}"
    if op in NO_IDENTITY and math.prod(src.shape[a] for a in axes) == 0:
        return (f"'{op}' over no elements: axes {list(axes)} of {_show(src)} have no element, "
                f"and '{op}' has no identity (NumPy raises)")
    shape = tuple((1 if i in axes else d) for i, d in enumerate(src.shape) if keep or i not in axes)
    if result.shape != shape:
        return (f"shape mismatch: '{op}' of {_show(src)} over axes {list(axes)} is {list(shape)}, "
                f"not {list(result.shape)}")
    if op in ("any", "all"):
        if src.dtype != BOOL:
            return f"bad dtype: '{op}' needs a bool operand, got {ir_name(src.dtype)}"
        want = BOOL
    elif op in ("argmax", "argmin"):
        want = INT64
    elif op in ("m2", "sumexp") and src.dtype.kind != "f":
        return f"bad dtype: '{op}' needs a float operand, got {ir_name(src.dtype)}"
    else:
        want = src.dtype
    if result.dtype != want:
        return f"bad dtype: '{op}' of {ir_name(src.dtype)} gives {ir_name(want)}, not {ir_name(result.dtype)}"
    return None


def _view(instr: Instr, operands: list[TensorType]) -> str | None:
    op, (src,), result, attrs = instr.op, operands, instr.type, instr.attrs
    if result.dtype != src.dtype:
        return f"bad dtype: '{op}' keeps the dtype {ir_name(src.dtype)}, not {ir_name(result.dtype)}"
    if op in ("reshape", "expand"):
        shape = attrs["shape"]
        if not _int_list(shape) or any(d < 0 for d in shape):
            return f"'shape' must be a list of non-negative integers, not {_lit(shape)}"
        if result.shape != shape:
            return f"shape mismatch: '{op}' to shape={list(shape)} but the result type is {_show(result)}"
        if op == "reshape":
            if math.prod(shape) != math.prod(src.shape):
                return (f"bad reshape: {_show(src)} has {math.prod(src.shape)} elements, "
                        f"shape={list(shape)} has {math.prod(shape)}")
            return None
        if len(shape) != len(src.shape):
            return (f"bad expand: {_show(src)} to shape={list(shape)} changes the rank "
                    f"(reshape first)")
        for i, (a, b) in enumerate(zip(src.shape, shape)):
            if a != 1 and a != b:
                return f"bad expand: dimension {i} of {_show(src)} is {a}, neither 1 nor {b}"
        return None
    if op == "permute":
        perm = attrs["perm"]
        if not _int_list(perm) or sorted(perm) != list(range(len(src.shape))):
            shown = _lit(list(perm) if isinstance(perm, tuple) else perm)
            return f"bad permute: perm={shown} is not a permutation of the {len(src.shape)} axes"
        shape = tuple(src.shape[p] for p in perm)
        if result.shape != shape:
            return (f"shape mismatch: permute of {_show(src)} by {list(perm)} is {list(shape)}, "
                    f"not {list(result.shape)}")
        return None
    return _slice(src, result, attrs)


def _slice(src: TensorType, result: TensorType, attrs: dict) -> str | None:
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    ndim = len(src.shape)
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if not _int_list(v) or len(v) != ndim:
            return f"bad slice: '{name}' must be a list of {ndim} integers, not {_lit(v)}"
    if len(result.shape) != ndim:
        return f"shape mismatch: a slice keeps the rank {ndim}, the result type is {_show(result)}"
    for i, (n, a, b, c, got) in enumerate(zip(src.shape, start, stop, step, result.shape)):
        if c == 0:
            return f"bad slice: step is 0 in dimension {i}"
        # normalized bounds, as slice.indices gives them: stop -1 means "past the front"
        lo, hi = (0, n) if c > 0 else (-1, n - 1)
        if not (lo <= a <= hi):
            return f"bad slice: start {a} is out of bounds for dimension {i} of size {n}"
        if not (lo <= b <= hi):
            return f"bad slice: stop {b} is out of bounds for dimension {i} of size {n}"
        want = len(range(a, b, c))
        if want and not (0 <= a < n):
            return f"bad slice: start {a} is out of bounds for dimension {i} of size {n}"
        if got != want:
            return f"shape mismatch: slice {a}:{b}:{c} of dimension {i} has {want} elements, not {got}"
    return None


def _leaf(instr: Instr, operands: list[TensorType]) -> str | None:
    dtype = instr.type.dtype
    if instr.op == "iota":
        if len(instr.shape) != 1:
            return f"'iota' makes a 1-D tensor, not {_show(instr.type)}"
        if dtype == BOOL:
            return "'iota' makes numbers, not bool"
        for name in ("start", "step"):
            problem = _scalar_problem(instr.attrs[name], dtype, f"iota {name}")
            if problem:
                return problem
        return None
    return _scalar_problem(instr.attrs["value"], dtype, "const")


def _scalar_problem(value: Any, dtype: np.dtype, what: str) -> str | None:
    """Whether a literal fits ``dtype``: bools for bool, ints in range, floats for floats."""
    name = ir_name(dtype)
    if dtype == BOOL:
        return None if isinstance(value, bool) else f"bad {what}: {_lit(value)} is not a bool (true or false)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"bad {what}: {_lit(value)} is not a number for {name}"
    if dtype.kind in "iu":
        if not isinstance(value, int):
            return f"bad {what}: {_lit(value)} is not an integer for {name}"
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            return f"{what} out of range: {_lit(value)} does not fit {name} ({info.min}..{info.max})"
        return None
    # an int literal may be far past any float: compare it as an int (float() would overflow)
    if (isinstance(value, int) or math.isfinite(value)) and abs(value) > float(np.finfo(dtype).max):
        return f"{what} out of range: {_lit(value)} overflows {name} (write inf if you mean it)"
    return None


def _lit(value: Any) -> str:
    """A literal as the message shows it: short (a few levels and items, 40 digits), so that a
    list nested 100,000 deep or a 4,000-digit number cannot make the message itself fail."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _SHORT.repr(value)


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxtuple, _SHORT.maxlist = 3, 8, 8
_SHORT.maxlong = _SHORT.maxother = _SHORT.maxstring = 40


def _cast(instr: Instr, operands: list[TensorType]) -> str | None:
    if operands[0].shape != instr.shape:
        return f"shape mismatch: 'cast' keeps the shape {list(operands[0].shape)}, not {list(instr.shape)}"
    return None


def _matmul(instr: Instr, operands: list[TensorType]) -> str | None:
    a, b = operands
    if len(a.shape) < 2 or len(b.shape) != len(a.shape):
        return (f"'matmul' takes two operands of one rank >= 2 ([..., M, K] and [..., K, N]), got "
                f"{_show(a)} and {_show(b)} (reshape 1-D operands first)")
    if a.shape[:-2] != b.shape[:-2]:
        return (f"batch mismatch: 'matmul' of {_show(a)} and {_show(b)} needs equal batch "
                f"dimensions (expand first)")
    if a.shape[-1] != b.shape[-2]:
        return (f"contracted dimensions differ: 'matmul' of {_show(a)} and {_show(b)} multiplies "
                f"K={a.shape[-1]} columns by K={b.shape[-2]} rows")
    if a.dtype != b.dtype:
        return (f"dtype mismatch: 'matmul' operands are {ir_name(a.dtype)} and {ir_name(b.dtype)} "
                f"(they must share one dtype: cast first)")
    if a.dtype == BOOL:
        return "bad dtype: 'matmul' of bool is not an op (cast to a number, compare with 0)"
    result = instr.type
    shape = a.shape[:-1] + b.shape[-1:]
    if result.shape != shape:
        return (f"shape mismatch: 'matmul' of {_show(a)} and {_show(b)} is {list(shape)}, not "
                f"{list(result.shape)}")
    if result.dtype != a.dtype:
        return (f"bad dtype: 'matmul' of {ir_name(a.dtype)} gives {ir_name(a.dtype)}, not "
                f"{ir_name(result.dtype)}")
    precision = instr.attrs.get("precision")
    if precision is not None:
        if precision not in MATMUL_PRECISIONS:
            return (f"bad precision={precision!s}: 'matmul' precision is one of "
                    f"{', '.join(MATMUL_PRECISIONS)}")
        if a.dtype != np.dtype(np.float32):
            return f"'precision' applies to float32 products, not {ir_name(a.dtype)}"
    return None


_CHECKS: dict[str, Callable[[Instr, list[TensorType]], str | None]] = {
    "elementwise": _elementwise, "reduce": _reduce, "view": _view, "leaf": _leaf, "cast": _cast,
    "matmul": _matmul,
}
