"""Scalars of a recorded program: their values in a dtype, and ``fj.jit``'s dynamic floats.

A Python or NumPy scalar that meets a tensor becomes a *scalar leaf* of the graph
(``make_scalar``): a kernel parameter passed by value, not a constant of the
program, so a new value reuses the plan and the compiled kernels. Its value is
stored already converted to the dtype NumPy's weak-scalar rules pick
(``scalar_value``).

While ``fj.jit`` records a function, its float arguments are ``DynamicFloat``:
floats that remember which argument they come from. Python arithmetic on them
(``1 - alpha``, ``alpha * 2``) gives more ``DynamicFloat`` whose value on a later
call is recomputed from the new arguments in Python's double precision, exactly
as plain Python would; anything that would branch on the value (comparisons,
``bool``, ``int``, ``round``) raises ``RecordingError``. The frontend records a
``DynamicFloat`` as a scalar leaf bound to its expression, and where NumPy's
result depends on a value (a power's exponent) it specializes on the value and
registers a *guard*, so a later call with a value of another class records again.
"""

from __future__ import annotations

import contextvars
import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import RecordingError

#: A value source for a later call: an index into the call's dynamic values, or a function
#: of them (a ``DynamicFloat`` computed from arguments)
Source = int | Callable[[list[Any]], float]

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
#: largest finite value of the narrow float dtypes: inside +-max a conversion cannot overflow
_FINITE_MAX = {_F16: 65504.0, _F32: float(np.finfo(np.float32).max)}


def scalar_value(value: Any, dtype: np.dtype) -> Any:
    """``value`` (a Python or NumPy scalar) converted to ``dtype`` as NumPy converts a weak
    scalar: float64 as a Python float, ints as Python ints (the caller checked that they
    fit), narrower floats as NumPy scalars (rounded to nearest; +-inf past the range)."""
    kind = dtype.kind
    if kind == "f":
        if dtype == _F64:
            return float(value)
        limit = _FINITE_MAX.get(dtype)
        if limit is not None and -limit <= value <= limit:
            return dtype.type(value)
    elif kind in "iu" and type(value) is int:
        return value
    return _converted(type(value), value.hex() if isinstance(value, float) else value, dtype)


@lru_cache(maxsize=1024)
def _converted(kind: type, bits: Any, dtype: np.dtype) -> Any:
    # the exact, slow path (overflow to inf, NaN, NumPy scalars of other types); floats are
    # keyed by their hex form so that 0.0 and -0.0 stay apart
    value = float.fromhex(bits) if issubclass(kind, float) else bits
    with np.errstate(all="ignore"):
        out = np.asarray(value).astype(dtype)[()]
    if dtype == _F64:
        return float(out)
    return out.item() if dtype.kind in "iub" else out


# -- dynamic floats (fj.jit) ------------------------------------------------------------

class DynamicFloat(float):
    """A float argument of a function that ``fj.jit`` is recording (or a float computed
    from such arguments with Python arithmetic).

    It is the recorded call's value, and knows how to compute the value of a later call
    (``source``: an argument index, or a function of the call's dynamic values).
    """

    __slots__ = ("source", "label")

    source: Source
    label: str

    def __new__(cls, value: float, source: Source, label: str) -> DynamicFloat:
        self = float.__new__(cls, value)
        self.source = source
        self.label = label
        return self

    def value_in(self, values: list[Any]) -> float:
        """This float's value in a call whose dynamic values are ``values``."""
        src = self.source
        return values[src] if type(src) is int else src(values)

    def __repr__(self) -> str:
        return f"DynamicFloat({self.label} = {float(self)!r})"

    def __reduce__(self) -> Any:
        raise RecordingError(f"the dynamic float {self.label} cannot be pickled while fj.jit "
                             f"records a function")

    def _refuse(self, what: str) -> RecordingError:
        return RecordingError(
            f"fj.jit: {what} needs the value of {self.label}, a float argument that is dynamic "
            f"(a kernel parameter: later calls pass other values without recording again), "
            f"so the function cannot branch on it or convert it; use it in tensor "
            f"expressions, or make it static (static_argnames=... or static_argnums=...: a "
            f"new value then records again)")

    def __bool__(self) -> bool:
        raise self._refuse("bool()")

    def __int__(self) -> int:
        raise self._refuse("int()")

    def __index__(self) -> int:
        raise self._refuse("using it as an index")

    def __float__(self) -> float:
        raise self._refuse("float()")

    def __round__(self, ndigits: Any = None) -> Any:
        raise self._refuse("round()")

    def __trunc__(self) -> int:
        raise self._refuse("math.trunc()")

    def __floor__(self) -> int:
        raise self._refuse("math.floor()")

    def __ceil__(self) -> int:
        raise self._refuse("math.ceil()")

    def __hash__(self) -> int:
        raise self._refuse("hashing it")

    def _compare(self, other: Any, name: str) -> Any:
        if _is_tensor(other):
            return NotImplemented
        raise self._refuse(f"a comparison ({name})")

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return self._compare(other, "==")

    def __ne__(self, other: object) -> Any:  # type: ignore[override]
        return self._compare(other, "!=")

    def __lt__(self, other: Any) -> Any:
        return self._compare(other, "<")

    def __le__(self, other: Any) -> Any:
        return self._compare(other, "<=")

    def __gt__(self, other: Any) -> Any:
        return self._compare(other, ">")

    def __ge__(self, other: Any) -> Any:
        return self._compare(other, ">=")

    def __neg__(self) -> DynamicFloat:
        return _apply(operator.neg, "-", self)

    def __pos__(self) -> DynamicFloat:
        return _apply(operator.pos, "+", self)

    def __abs__(self) -> DynamicFloat:
        return _apply(abs, "abs", self)


def _is_tensor(x: Any) -> bool:
    from .tensor import Tensor
    return isinstance(x, Tensor)


def _plain(x: Any) -> float:
    """The recorded value of a float or int operand (a DynamicFloat's own)."""
    return float.__float__(x) if isinstance(x, float) else x


def _apply(fn: Callable[..., Any], symbol: str, *operands: Any) -> DynamicFloat:
    """A DynamicFloat for ``fn(*operands)``: today's value, and tomorrow's from the sources."""
    value = fn(*[_plain(x) for x in operands])
    getters = []
    for x in operands:
        if type(x) is DynamicFloat:
            getters.append(x.value_in)
        else:
            getters.append(lambda values, c=x: c)

    def source(values: list[Any]) -> float:
        return fn(*[g(values) for g in getters])

    labels = [x.label if type(x) is DynamicFloat else repr(x) for x in operands]
    label = f"{symbol}{labels[0]}" if len(labels) == 1 else f"({f' {symbol} '.join(labels)})"
    return DynamicFloat(float(value), source, label)


def _binary_method(fn: Callable[[Any, Any], Any], symbol: str, reflected: bool) -> Any:
    def method(self: DynamicFloat, other: Any) -> Any:
        if type(other) is DynamicFloat or (isinstance(other, (int, float))
                                           and not isinstance(other, (bool, np.generic))):
            return _apply(fn, symbol, other, self) if reflected else _apply(fn, symbol, self, other)
        if _is_tensor(other):
            return NotImplemented
        raise RecordingError(
            f"fj.jit: {self.label} {symbol} {type(other).__name__}: a dynamic float argument "
            f"meets Python ints and floats or fusejit tensors only (NumPy would compute with "
            f"the recorded value); make it static (static_argnames=...) or use fusejit tensors")
    return method


for _name, _fn, _symbol in (("add", operator.add, "+"), ("sub", operator.sub, "-"),
                            ("mul", operator.mul, "*"), ("truediv", operator.truediv, "/"),
                            ("floordiv", operator.floordiv, "//"), ("mod", operator.mod, "%"),
                            ("pow", operator.pow, "**")):
    setattr(DynamicFloat, f"__{_name}__", _binary_method(_fn, _symbol, False))
    setattr(DynamicFloat, f"__r{_name}__", _binary_method(_fn, _symbol, True))


def plain_value(x: Any) -> Any:
    """The value of a scalar as recorded (a DynamicFloat's current value as a plain float)."""
    return float.__float__(x) if type(x) is DynamicFloat else x


# -- recording state: what fj.jit is recording in this thread ---------------------------

class Recording:
    """What ``fj.jit`` is recording in this thread: the function's name (for messages), the
    ids of the graph leaves that stand for its arguments (whose values it must not read),
    and the guards registered so far: (source, classify, class now)."""

    __slots__ = ("name", "traced", "guards")

    def __init__(self, name: str) -> None:
        self.name = name
        self.traced: set[int] = set()
        self.guards: list[tuple[Source, Callable[[float], Any], Any]] = []


#: the recording in progress in this thread (or asyncio task); None when not recording
RECORDING: contextvars.ContextVar[Recording | None] = contextvars.ContextVar(
    "fusejit_recording", default=None)


def check_value_access(node: Any, what: str) -> None:
    """Raise ``RecordingError`` when a function being recorded by ``fj.jit`` reads the value
    of ``node`` (a lazy tensor, or one of its arguments) with ``what``."""
    rec = RECORDING.get()
    if rec is not None and (node.op != "input" or id(node) in rec.traced):
        raise RecordingError(
            f"fj.jit: {rec.name} called {what} on a tensor while being recorded; a jitted "
            f"function sees lazy tensors (its arguments too) and must not look at their "
            f"values: compute on them with fusejit operations, and read values from its "
            f"results (or run the function without fj.jit)")


def power_class(value: float) -> float | None:
    """The exponents NumPy computes specially (``**`` and ``np.power``), else None."""
    return value if value in (2.0, 0.5, -1.0) else None


def guard(x: DynamicFloat, classify: Callable[[float], Any]) -> Any:
    """Register that the recording depends on ``classify(x)``; returns the class now.

    ``fj.jit`` checks every guard of a recording on each call and records again (a
    variant) when a class differs.
    """
    value = float.__float__(x)
    cls = classify(value)
    rec = RECORDING.get()
    if rec is not None:
        guard = (x.source, classify, cls)
        if guard not in rec.guards:  # (``x ** a`` asks twice: the operator, then power)
            rec.guards.append(guard)
    return cls
