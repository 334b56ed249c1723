"""The printer: a Program as canonical, deterministic text.

The text is the faithful serialization of the model: ``parse(print_program(p))
== p`` and ``print_program(parse(text)) == text`` for printer output. So that
the second holds, everything with a choice of spelling has one canonical form:

* attributes in the op table's order (``ATTRS``), unknown ones after, by name;
* bool attributes as a bare word when True, omitted when False;
* floats as exact hex floats (``float.hex()``); ``inf``, ``-inf`` and ``nan``
  as keywords; a ``const`` float is followed by a ``# decimal`` comment for
  readers (the comment is ignored by the parser);
* one statement per line, two spaces of indentation per level;
* a scalar param (passed by value) as its dtype alone (``%s0: f32``), a 0-d
  buffer with its empty shape (``%x: f32[]``).

Names are checked against the grammar's name patterns before they are
written, so the printer can never emit text that parses differently.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..dtypes import ir_name
from ..errors import IRError
from .ops import ATTRS
from .program import Instr, Kernel, Param, Program, TensorType

HEADER = "# fusejit ir v1"
_VALUE_NAME = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)\Z")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def print_program(program: Program) -> str:
    """The canonical text of ``program`` (ends with a newline)."""
    lines = [HEADER]
    params = ", ".join(_param(p) for p in program.inputs)
    results = _types(program.output_types if _outputs_defined(program) else ())
    lines.append(f"func {_func_name(program.name)}({params}) ->{results} {{")
    for stmt in program.body:
        if isinstance(stmt, Kernel):
            lines.extend(_kernel(stmt))
        else:
            lines.append("  " + _instr(stmt))
    lines.append(f"  return {_values(program.outputs)}".rstrip())
    lines.append("}")
    return "\n".join(lines) + "\n"


def _outputs_defined(program: Program) -> bool:
    # printing must work on broken programs too (error messages show them)
    types = program.types()
    if all(name in types for name in program.outputs):
        return True
    raise IRError(f"cannot print @{program.name}: it returns undefined values "
                  f"{', '.join(n for n in program.outputs if n not in types)}")


def _kernel(k: Kernel) -> list[str]:
    args = _values(k.args)
    attrs = _attrs(k.attrs, ("kind",))  # kind first, then the rest by name
    head = f"  {_values(k.results)} = kernel {_func_name(k.name)}({args})"
    head += f"{' ' + attrs if attrs else ''} ->{_types(k.result_types)} {{"
    lines = [head, f"  ^({', '.join(_param(p) for p in k.params)}):"]
    lines.extend("    " + _instr(i) for i in k.body)
    lines.append(f"    yield {_values(k.yields)}".rstrip())
    lines.append("  }")
    return lines


def _instr(instr: Instr) -> str:
    if isinstance(instr, Kernel):
        raise IRError(f"kernel @{instr.name} nested in a kernel cannot be printed")
    parts = [f"{_value(instr.name)} = {_word(instr.op, 'op name')}"]
    if instr.args:
        parts.append(_values(instr.args))
    attrs = dict(instr.attrs)
    comment = ""
    if instr.op == "const" and "value" in attrs:
        value = attrs.pop("value")
        parts.append(_number(value))
        if isinstance(value, float) and math.isfinite(value):
            comment = f"  # {_decimal(value, instr.type.dtype)}"
    text = _attrs(attrs, ATTRS.get(instr.op, {}))
    if text:
        parts.append(text)
    return f"{' '.join(parts)} : {_type(instr.type)}{comment}"


def _attrs(attrs: dict[str, Any], order: Any) -> str:
    known = [name for name in order if name in attrs]
    rest = sorted(name for name in attrs if name not in order)
    out = []
    for name in known + rest:
        value = attrs[name]
        _word(name, "attribute name")
        if value is True:
            out.append(name)
        elif value is False:
            continue
        else:
            out.append(f"{name}={_attr_value(value)}")
    return " ".join(out)


_CLOSE, _COMMA = object(), object()


def _attr_value(value: Any) -> str:
    # lists may nest (in a Program built in code): walked with a stack, not recursion
    parts: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if item is _CLOSE:
            parts.append("]")
        elif item is _COMMA:
            parts.append(",")
        elif isinstance(item, (tuple, list)):
            parts.append("[")
            stack.append(_CLOSE)
            for i, v in enumerate(reversed(item)):
                if i:
                    stack.append(_COMMA)
                stack.append(v)
        elif isinstance(item, str):
            parts.append(_word(item, "attribute word"))
        else:
            parts.append(_number(item))
    return "".join(parts)


def _number(value: Any) -> str:
    """Exact spelling of a scalar: ints, true/false, hex floats, inf/-inf/nan."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return _hex(value)
    raise IRError(f"cannot print attribute value {value!r} of type {type(value).__name__}")


def _hex(value: float) -> str:
    # float.hex() pads the mantissa to 13 digits; trailing zeros carry nothing
    mantissa, exponent = value.hex().split("p")
    mantissa = mantissa.rstrip("0")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}p{exponent}"


def _decimal(value: float, dtype: np.dtype) -> str:
    # the shortest decimal that rounds back to the value at the dtype's precision
    if dtype.kind == "f":
        return str(dtype.type(value))
    return repr(value)


def _type(t: TensorType) -> str:
    return str(t)


def _types(types: Any) -> str:
    return (" " + ", ".join(_type(t) for t in types)) if types else ""


def _param(p: Param) -> str:
    if p.scalar:  # passed by value: the dtype alone (``%s0: f32``), no shape
        if p.type.shape:
            raise IRError(f"scalar param %{p.name} has shape {list(p.type.shape)}; a scalar "
                          f"param is 0-d")
        return f"{_value(p.name)}: {ir_name(p.type.dtype)}"
    return f"{_value(p.name)}: {_type(p.type)}"


def _values(names: Any) -> str:
    return ", ".join(_value(n) for n in names)


def _value(name: str) -> str:
    if not isinstance(name, str) or not _VALUE_NAME.match(name):
        raise IRError(f"invalid value name {name!r}: names are [A-Za-z_][A-Za-z0-9_]* or digits")
    return "%" + name


def _func_name(name: str) -> str:
    return "@" + _word(name, "function name")


def _word(word: str, what: str) -> str:
    if not isinstance(word, str) or not _WORD.match(word):
        raise IRError(f"invalid {what} {word!r}: must match [A-Za-z_][A-Za-z0-9_]*")
    return word
