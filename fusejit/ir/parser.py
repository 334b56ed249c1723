"""The parser: IR text to a verified Program.

``parse(text)`` runs Lark's LALR parser over ``grammar/fusejit.lark`` with a
builder that makes the model objects while parsing (no parse tree is kept,
which is what makes a 10,000-line program parse in well under a second),
then runs the verifier. Every problem becomes an ``IRSyntaxError`` or
``IRVerifyError`` naming ``file:line:column`` with the line and a caret;
Lark's own exceptions never escape.

Text from a file is data: numbers go through ``int()``, ``float()`` or
``float.fromhex()`` and nothing else; names are grammar tokens that can hold
only ``[A-Za-z0-9_]`` after their sigil.
"""

from __future__ import annotations

import difflib
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from lark import (
    Lark,
    Token,
    Transformer,
    UnexpectedCharacters,
    UnexpectedInput,
    UnexpectedToken,
)

from ..dtypes import FROM_IR_NAME
from ..errors import IRSyntaxError
from .ops import OPS
from .program import Instr, Kernel, Param, Program, TensorType

_GRAMMAR_NAME = "fusejit.lark"
#: Most dimensions of a type (NumPy's limit) and most bytes of one array (its size must fit
#: a signed 64-bit byte count), checked where the type is written.
MAX_NDIM = 64
MAX_BYTES = 2**63 - 1
_parser: Lark | None = None
_parser_lock = threading.Lock()


def grammar_path() -> Path:
    """Where the grammar is: inside the installed package, else the repository's ``grammar/``."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "grammar" / _GRAMMAR_NAME
    if installed.is_file():
        return installed
    return package_dir.parent / "grammar" / _GRAMMAR_NAME


def parse(text: str, filename: str | None = None) -> Program:
    """Parse IR text into a Program and verify it.

    Raises ``IRSyntaxError`` for text that does not parse (or names an
    unknown op or dtype) and ``IRVerifyError`` for a program that breaks an
    IR rule; both carry ``filename:line:column`` and the offending line.
    """
    from .verify import verify
    program, signature = parse_unverified(text, filename)
    verify(program, normalize_text(text).split("\n"), filename=filename, signature=signature)
    return program


def normalize_text(text: str) -> str:
    """``text`` as the parser reads it: without a leading byte-order mark, and with ``\r\n``
    and lone ``\r`` line endings made ``\n`` (as Python reads source), so that CRLF and
    old-Mac files parse and their errors name the right line."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def parse_unverified(text: str, filename: str | None = None) -> tuple[Program, Signature]:
    """Parse without verifying: the Program and its declared signature (for the verifier)."""
    if not isinstance(text, str):
        raise IRSyntaxError(f"IR text must be a str, not {type(text).__name__}")
    text = normalize_text(text)
    lines = text.split("\n")  # Lark counts lines by '\n' only
    try:
        program, signature = _get_parser().parse(text)
    except _BuildError as exc:
        raise _syntax_error(exc.message, exc.line, exc.column, lines, filename) from None
    except UnexpectedInput as exc:
        message, line, column = _describe(exc, text)
        raise _syntax_error(message, line, column, lines, filename) from None
    return program, signature


class Signature:
    """What the ``func`` line declares, kept beside the Program for the verifier."""

    __slots__ = ("output_types", "line", "column", "return_line", "return_column")

    def __init__(self, output_types: tuple[TensorType, ...], line: int, column: int,
                 return_line: int, return_column: int) -> None:
        self.output_types = output_types
        self.line, self.column = line, column
        self.return_line, self.return_column = return_line, return_column


# -- the Lark object (built once) ------------------------------------------------

def _get_parser() -> Lark:
    global _parser
    if _parser is None:
        with _parser_lock:
            if _parser is None:
                # positions come from the tokens themselves: propagating them to rule
                # results (propagate_positions) would cost a quarter of the parse time
                _parser = Lark(grammar_path().read_text(encoding="utf-8"), parser="lalr",
                               maybe_placeholders=False, transformer=_Builder())
    return _parser


# -- building the model while parsing ---------------------------------------------

class _BuildError(Exception):
    """A semantic problem found while building (unknown op, bad number...), with its position."""

    def __init__(self, message: str, token: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line = getattr(token, "line", None)
        self.column = getattr(token, "column", None)


_WORD_VALUES = {"true": True, "false": False, "inf": math.inf, "nan": math.nan}


def _number(token: Token) -> int | float:
    """The value of a NUMBER token: int, decimal float, hex float or -inf (never eval)."""
    text = str(token)
    try:
        if text == "-inf":
            return -math.inf
        if "x" in text or "X" in text:
            return float.fromhex(text)
        if "." in text or "e" in text or "E" in text:
            return float(text)
        return int(text)
    except (ValueError, OverflowError):
        raise _BuildError(f"number {text[:40]!r} is out of range", token) from None


def _scalar(token: Token) -> Any:
    """An attribute value token: a number, or a word (``true``/``inf``... become values)."""
    if token.type == "NUMBER":
        return _number(token)
    return _WORD_VALUES.get(str(token), str(token))


def _attr_value(value: Any) -> Any:
    # lists arrive already built (the parser works bottom-up), so no recursion here
    return _scalar(value) if isinstance(value, Token) else value


def _unknown_op(token: Token) -> _BuildError:
    name = str(token)
    close = difflib.get_close_matches(name, list(OPS) + ["kernel"], n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return _BuildError(f"unknown op '{name}'{hint}", token)


class _Builder(Transformer):
    """Lark callbacks, one per grammar rule, returning model objects."""

    def start(self, children: list) -> Any:
        return children[0]

    def func(self, c: list) -> tuple[Program, Signature]:
        name_tok, params, types, stmts, values = c
        ret_line, ret_col = _after(types)
        signature = Signature(tuple(t for t, _ in types), name_tok.line, name_tok.column,
                              values[0].line if values else ret_line,
                              values[0].column if values else ret_col)
        program = Program(str(name_tok)[1:], params, stmts, tuple(str(v)[1:] for v in values))
        return program, signature

    def stmts(self, c: list) -> list:
        return c

    def kbody(self, c: list) -> list:
        return c

    def instr(self, c: list) -> Instr:
        results, op_tok, operands, attrs, (type_, _) = c
        if len(results) != 1:
            raise _BuildError("an instruction defines exactly one value (only 'kernel' "
                              "defines several)", results[1])
        op = str(op_tok)
        if op not in OPS:
            raise _unknown_op(op_tok)
        built: dict[str, Any] = {}
        for kind, key, value, tok in attrs:
            if kind == "positional" or (op == "const" and kind == "flag" and key in _WORD_VALUES
                                        and "value" not in built):
                if op != "const":
                    raise _BuildError(f"'{op}' takes no positional value (write name=value)", tok)
                key, value = "value", (_WORD_VALUES[key] if kind == "flag" else value)
            if key in built:
                raise _BuildError(f"attribute '{key}' is given twice", tok)
            built[key] = value
        if op == "const" and isinstance(built.get("value"), float):
            built["value"] = _round_to(built["value"], type_.dtype)
        first = results[0]
        return Instr(str(first)[1:], op, tuple(str(v)[1:] for v in operands), built, type_,
                     line=first.line, column=first.column)

    def kernel(self, c: list) -> Kernel:
        results, name_tok, args, attrs, types, params, body, yields = c
        launch: dict[str, Any] = {}
        for kind, key, value, tok in attrs:
            if kind == "positional":
                raise _BuildError("kernel attributes are name=value", tok)
            if key in launch:
                raise _BuildError(f"attribute '{key}' is given twice", tok)
            launch[key] = value
        first = results[0]
        return Kernel(str(name_tok)[1:], tuple(str(r)[1:] for r in results),
                      tuple(str(a)[1:] for a in args), params, body,
                      tuple(str(y)[1:] for y in yields), tuple(t for t, _ in types), launch,
                      line=first.line, column=first.column)

    def results(self, c: list) -> list:
        return c

    def values(self, c: list) -> list:
        return c

    def params(self, c: list) -> tuple[Param, ...]:
        return tuple(c)

    def param(self, c: list) -> Param:
        return Param(str(c[0])[1:], c[1][0])

    def scalar_param(self, c: list) -> Param:
        type_, _ = self.type([c[1], ()])
        return Param(str(c[0])[1:], type_, scalar=True)

    def types(self, c: list) -> list:
        return c

    def type(self, c: list) -> tuple[TensorType, Token]:
        name_tok, dims = c
        dtype = FROM_IR_NAME.get(str(name_tok))
        if dtype is None:
            close = difflib.get_close_matches(str(name_tok), list(FROM_IR_NAME), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise _BuildError(f"unknown dtype '{name_tok}'{hint} (dtypes: "
                              f"{', '.join(FROM_IR_NAME)})", name_tok)
        if len(dims) > MAX_NDIM:
            raise _BuildError(f"a type has at most {MAX_NDIM} dimensions (NumPy's limit), not "
                              f"{len(dims)}", name_tok)
        if math.prod(dims) * dtype.itemsize > MAX_BYTES:
            raise _BuildError(f"this {name_tok} type is too large: an array holds at most "
                              f"2**63 - 1 bytes", name_tok)
        return TensorType(dtype, dims), name_tok

    def dims(self, c: list) -> tuple[int, ...]:
        out = []
        for tok in c:
            value = _number(tok)
            if not isinstance(value, int) or value < 0:
                raise _BuildError(f"a dimension must be a non-negative integer, not {tok}", tok)
            out.append(value)
        return tuple(out)

    def attrs(self, c: list) -> list:
        return c

    def keyword_attr(self, c: list) -> tuple:
        name_tok, value = c
        return ("keyword", str(name_tok), _attr_value(value), name_tok)

    def flag_attr(self, c: list) -> tuple:
        return ("flag", str(c[0]), True, c[0])

    def positional_attr(self, c: list) -> tuple:
        return ("positional", "value", _number(c[0]), c[0])

    def list(self, c: list) -> tuple:
        return tuple(_attr_value(v) for v in c)


def _after(types: list) -> tuple[int, int]:
    # position used when 'return' has no operands: the signature's last type, else line 1
    if types:
        tok = types[-1][1]
        return tok.line, tok.column
    return 1, 1


def _round_to(value: float, dtype: np.dtype) -> float:
    """A float literal rounded to the const's dtype (kept as written when it would overflow)."""
    if dtype.kind != "f" or not math.isfinite(value):
        return value
    if abs(value) > float(np.finfo(dtype).max):
        return value  # the verifier reports it as out of range
    return float(dtype.type(value))


# -- syntax errors as sentences -----------------------------------------------------

_TERMINALS = {
    "VALUE": "a %value", "FUNC_NAME": "an @name", "NAME": "a name", "NUMBER": "a number",
    "_FUNC": "'func'", "_RETURN": "'return'", "_KERNEL": "'kernel'", "_YIELD": "'yield'",
    "_ARROW": "'->'", "_EQUAL": "'='", "_COLON": "':'", "_COMMA": "','", "_LPAR": "'('",
    "_RPAR": "')'", "_LBRACE": "'{'", "_RBRACE": "'}'", "_LSQB": "'['", "_RSQB": "']'",
    "_CARET": "'^'", "$END": "end of input",
}

# expected sets that have a clearer sentence than the list of tokens: the first
# predicate that holds wins (LALR merges states, so the sets are tested loosely)
_SENTENCES: list[tuple[Callable[[set[str]], bool], str]] = [
    (lambda e: "_COLON" in e and "_ARROW" in e and "NAME" in e,
     "expected ':' and a type after the operands (or '->' after a kernel's attributes)"),
    (lambda e: "_COLON" in e and ("NAME" in e or "VALUE" in e),
     "expected ':' and a type after the operands"),
    (lambda e: e == {"_COLON"}, "expected ':' and a type"),
    (lambda e: "_EQUAL" in e and "_COMMA" in e and len(e) == 2, "expected '=' after the result name"),
    (lambda e: e == {"VALUE", "_RETURN"}, "expected an instruction ('%name = op ...') or 'return'"),
    (lambda e: e == {"VALUE", "_YIELD"}, "expected an instruction ('%name = op ...') or 'yield'"),
    (lambda e: e == {"NAME", "_KERNEL"}, "expected an op name after '='"),
    (lambda e: e == {"_LSQB"}, "expected '[' and the shape after the dtype"),
    (lambda e: e == {"_FUNC"}, "expected 'func @name(...) -> ... {' (a program is one func)"),
    (lambda e: e == {"_RBRACE", "_COMMA"}, "expected ',' or '}' after the returned values"),
    (lambda e: e == {"$END"}, "expected the end of the text after the func's closing '}'"),
]


def _describe(exc: UnexpectedInput, text: str) -> tuple[str, int, int]:
    """A human sentence and a position for one of Lark's exceptions."""
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        if char == "%" or char == "@":
            message = (f"'{char}' must be followed by a name made of letters, digits and '_'")
        else:
            message = f"unexpected character {char!r}"
        return message, exc.line, exc.column
    expected = {e for e in getattr(exc, "expected", set()) or set()}
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            found, (line, column) = "end of input", _end_position(text)
        else:
            found, line, column = f"'{token}'", token.line, token.column
    else:  # UnexpectedEOF
        found, (line, column) = "end of input", _end_position(text)
    return f"{_expected_sentence(expected)}, found {found}", line, column


def _expected_sentence(expected: set[str]) -> str:
    for holds, sentence in _SENTENCES:
        if holds(expected):
            return sentence
    names = sorted(_TERMINALS.get(e, e.lower()) for e in expected)
    if not names:
        return "unexpected input"
    if len(names) == 1:
        return f"expected {names[0]}"
    return f"expected {', '.join(names[:-1])} or {names[-1]}"


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    return len(lines), len(lines[-1]) + 1


def _syntax_error(message: str, line: int | None, column: int | None, lines: list[str],
                  filename: str | None) -> IRSyntaxError:
    source = lines[line - 1] if line is not None and 0 < line <= len(lines) else None
    return IRSyntaxError(message, line=line, column=column, source_line=source, filename=filename)
