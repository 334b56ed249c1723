"""The Program: fusejit's one IR, from recording to code generation.

A Program is a function: named, typed inputs; a body of SSA instructions in
definition order; and the names it returns. Fusion does not build another
structure: it rewrites a Program so that its body holds ``Kernel`` blocks,
each a closed region (it reads only its own parameters) that becomes one
launch. The printer, parser, verifier, fuser, emitter and every backend all
consume this model.

Names are stored without the ``%`` sigil. Attribute values are ints, bools,
floats, or tuples of ints (and ``None`` inside slice bounds).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..dtypes import ir_name
from ..errors import InputError


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The element strides of a C-contiguous array of ``shape``."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class TensorType:
    """dtype and shape of one value."""

    dtype: np.dtype
    shape: tuple[int, ...]

    def __str__(self) -> str:
        return f"{ir_name(self.dtype)}[{','.join(str(d) for d in self.shape)}]"

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of a buffer holding the value (elements times item size)."""
        return self.size * self.dtype.itemsize


@dataclass(frozen=True)
class Param:
    """A named, typed input of a Program or of a Kernel block.

    A ``scalar`` param is a value passed by value (a kernel's scalar argument, not a
    buffer): its type has shape ``()``, the text writes it without a shape (``%s0: f32``),
    and elementwise ops may take it as an operand of any shape (it stands for its value
    at every element). Python and NumPy scalars of a recorded program become scalar
    params, so a new value reuses the plan and the compiled kernels.
    """

    name: str
    type: TensorType
    scalar: bool = False


@dataclass
class Instr:
    """One SSA value: ``%name = op %args... attrs : type``."""

    name: str
    op: str
    args: tuple[str, ...]
    attrs: dict[str, Any]
    type: TensorType
    line: int | None = field(default=None, compare=False, repr=False)
    column: int | None = field(default=None, compare=False, repr=False)

    @property
    def dtype(self) -> np.dtype:
        """The value's dtype."""
        return self.type.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The value's shape."""
        return self.type.shape


@dataclass
class Kernel:
    """A fused region: one launch (a declared pair for a split reduction).

    ``args`` are outer values passed in, bound in order to ``params``; the body
    sees only the params and its own values. ``yields`` names inner values
    that leave the region, defining the outer names ``results`` in order.
    ``attrs`` holds launch attributes (``kind`` at least).
    """

    name: str
    results: tuple[str, ...]
    args: tuple[str, ...]
    params: tuple[Param, ...]
    body: list[Instr]
    yields: tuple[str, ...]
    result_types: tuple[TensorType, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    line: int | None = field(default=None, compare=False, repr=False)
    column: int | None = field(default=None, compare=False, repr=False)

    @property
    def kind(self) -> str:
        """The launch kind (``pointwise``, ``inner_reduction``...; "" when not set)."""
        return str(self.attrs.get("kind", ""))

    @property
    def row_pitch(self) -> int:
        """Elements between the rows of each result buffer (the ``row_pitch`` attribute of a
        pointwise kernel: its results' last axis padded in memory); 0 when contiguous."""
        value = self.attrs.get("row_pitch", 0)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def pitched(shape: tuple[int, ...], pitch: int) -> tuple[int, ...]:
    """The shape of the allocation that holds a result of ``shape`` with rows ``pitch``
    elements apart (``Kernel.row_pitch``; 0: ``shape`` itself); the result is its
    ``[..., :shape[-1]]`` view."""
    return (*shape[:-1], pitch) if pitch and shape else shape


def empty_pitched(empty: Any, shape: tuple[int, ...], dtype: Any, pitch: int) -> Any:
    """A new result buffer of ``shape`` with rows ``pitch`` elements apart (0: contiguous),
    from ``empty`` (a backend's allocator: ``np.empty``, ``cupy.empty``)."""
    if not pitch:
        return empty(shape, dtype)
    return empty(pitched(shape, pitch), dtype)[..., :shape[-1]]


Statement = Union[Instr, Kernel]


@dataclass
class Program:
    """A function in the fusejit IR."""

    name: str
    inputs: tuple[Param, ...]
    body: list[Statement]
    outputs: tuple[str, ...]
    #: value name -> why the frontend recorded it for a specific value of a scalar (``x ** 2``
    #: as ``square``, as NumPy computes it); not part of the text or of equality
    notes: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    # -- queries -------------------------------------------------------------
    def types(self) -> dict[str, TensorType]:
        """Type of every outer value: inputs, instructions and kernel results."""
        env = {p.name: p.type for p in self.inputs}
        for stmt in self.body:
            if isinstance(stmt, Kernel):
                env.update(zip(stmt.results, stmt.result_types))
            else:
                env[stmt.name] = stmt.type
        return env

    @property
    def scalar_inputs(self) -> frozenset[str]:
        """Names of the inputs passed by value (``Param.scalar``)."""
        return frozenset(p.name for p in self.inputs if p.scalar)

    @property
    def output_types(self) -> tuple[TensorType, ...]:
        """Type of each returned value, in order."""
        env = self.types()
        return tuple(env[name] for name in self.outputs)

    @property
    def kernels(self) -> list[Kernel]:
        """The Kernel blocks of the body, in order."""
        return [s for s in self.body if isinstance(s, Kernel)]

    @property
    def is_fused(self) -> bool:
        """Whether the body holds Kernel blocks (fused, or user-edited fused text)."""
        return any(isinstance(s, Kernel) for s in self.body)

    def __str__(self) -> str:
        from .printer import print_program
        return print_program(self)

    def run(self, *arrays: Any, **named: Any) -> list[Any]:
        """Run on the current backend; inputs by position or by name; returns one array per output.

        Scalar params take Python scalars (or NumPy scalars of their dtype).
        """
        from ..runtime import run_program
        names = [p.name for p in self.inputs] + [f"#{i}" for i in range(len(self.inputs), len(arrays))]
        scalars = self.scalar_inputs
        arrays = tuple(a if n in scalars else _as_array(a, n) for a, n in zip(arrays, names))
        named = {n: a if n in scalars else _as_array(a, n) for n, a in named.items()}
        return run_program(self, arrays, named)

    def key(self) -> str:
        """Structural identity: the canonical text (names included)."""
        return str(self)


def _as_array(value: Any, name: str) -> Any:
    """An input with a NumPy dtype and a shape (lists and scalars become arrays), or InputError."""
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        try:
            np.dtype(value.dtype)
        except TypeError:
            raise InputError(f"input {name!r}: {value.dtype!r} is not a NumPy dtype") from None
        return value
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise InputError(f"input {name!r}: cannot convert {type(value).__name__} to an array: "
                         f"{exc}") from None
