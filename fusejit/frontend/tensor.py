"""The lazy ``Tensor`` and the graph-building helpers every NumPy-style function uses.

Nothing here runs a computation: each operation checks shapes and dtypes
eagerly (so errors point at the user's line), inserts the casts and
broadcasts NumPy would apply, and records one hash-consed graph node.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..dtypes import BOOL, as_dtype, fits, is_bool, is_float, resolve_ufunc, scalar_kind
from ..errors import (
    AxisError,
    DomainError,
    DTypeError,
    FusejitError,
    InteropError,
    RecordingError,
    ShapeError,
)
from ..ir.graph import (
    MAX_SCALAR_LEAVES,
    NAME_PATTERN,
    Node,
    keep_derived,
    make,
    make1,
    make2,
    make3,
    make_input,
    make_scalar,
    make_scalar_op,
    num_elements,
)
from . import interop
from .scalars import (
    RECORDING,
    DynamicFloat,
    check_value_access,
    guard,
    plain_value,
    power_class,
    scalar_value,
)

Scalar = bool | int | float
ArrayLike = Any


class Tensor:
    """A lazy n-dimensional array. Operations record; ``realize()`` computes."""

    __slots__ = ("_node", "_kept", "__weakref__")
    __array_priority__ = 1000  # so ndarray (op) Tensor defers to Tensor's reflected op
    __hash__ = None  # type: ignore[assignment]  # like ndarray: == is elementwise

    def __init__(self, node: Node) -> None:
        self._node = node

    # -- metadata (no computation) ----------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, known without computing."""
        return self._node.shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype, known without computing."""
        return self._node.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._node.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return num_elements(self._node.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element, as NumPy's ``itemsize``."""
        return self._node.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (``size * itemsize``, as NumPy's ``nbytes``: a broadcast or
        strided view counts its elements, not the memory under them), known without computing."""
        return num_elements(self._node.shape) * self._node.dtype.itemsize

    @property
    def is_realized(self) -> bool:
        """Whether this tensor holds a buffer (no pending computation)."""
        return self._node.op == "input"

    def __repr__(self) -> str:
        state = "realized" if self.is_realized else "lazy"
        return f"Tensor(shape={self.shape}, dtype={self.dtype}, {state})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- computing ----------------------------------------------------------
    def realize(self) -> Tensor:
        """Compute this tensor (and only what it needs) on the current backend; returns self."""
        if RECORDING.get() is not None:
            check_value_access(self._node, ".realize()")
        (_REALIZE_ONE or _realize_one())(self)
        return self

    def numpy(self, _what: str = ".numpy()") -> np.ndarray:
        """The values as a host NumPy array (realizes if needed).

        A host buffer is returned as is (not copied); a device buffer is copied to the host
        once the stream it was computed on has finished it.
        """
        from ..runtime import realize, to_numpy
        check_value_access(self._node, _what)
        realize(self)
        node = self._node
        if node.stream is not None and not isinstance(node.buffer, np.ndarray):
            return interop.download(node.buffer, node.stream)
        return to_numpy(node.buffer)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy("numpy.asarray() (a NumPy function)")
        return out.astype(dtype) if dtype is not None else out

    # -- handing the buffer to other libraries (zero-copy) ----------------------
    def cupy(self) -> Any:
        """The values as a CuPy array (realizes if needed).

        Zero-copy when the buffer is in device memory (what the ``cuda`` backend computes,
        and tensors made from CuPy or other device arrays): the CuPy array *is* the
        tensor's buffer, and its kernels may still be running on the stream they were
        queued on (CuPy's current stream at ``realize``). A tensor in host memory (computed
        by a host backend, or made from host data and not computed) is copied to CuPy's
        current device: a new array on each call, as ``numpy()`` copies a device buffer to
        the host. Raises ``InteropError`` without CuPy or a GPU.
        """
        return interop.to_cupy(self)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA array interface (version 3) of a buffer in device memory (realizes a lazy
        tensor on the ``cuda`` backend first), so ``cupy.asarray(t)``, numba and the others
        take the buffer without a copy.

        ``stream`` is the CuPy stream the tensor was computed on (consumers wait for it before
        reading); for a buffer fusejit did not compute, CuPy's current stream, as CuPy does for
        its own arrays. A tensor in host memory has no interface: this raises
        ``NotOnDeviceError``, an ``AttributeError``, so ``hasattr`` is False and consumers
        use ``__array__`` or DLPack instead (a lazy tensor is then not computed).
        """
        return interop.cuda_array_interface(self)

    def __dlpack__(self, *, stream: Any = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """Export the buffer as a DLPack capsule (realizes a lazy tensor first), so
        ``np.from_dlpack(t)``, ``cupy.from_dlpack(t)``, ``torch.from_dlpack(t)`` and
        ``jax.dlpack.from_dlpack(t)`` share its memory.

        A host buffer is exported by NumPy (``stream`` must be None), a device buffer by CuPy,
        with every argument passed through: on CUDA, the consumer's ``stream`` is made to
        wait for the stream the tensor was computed on (``-1``: no synchronization).
        """
        return interop.dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the buffer (realizes a lazy tensor first): ``(1, 0)`` for host
        memory, ``(2, device_id)`` for a CUDA device."""
        kind, index = interop.realized_buffer(self).__dlpack_device__()
        return int(kind), int(getattr(index, "id", index))  # older CuPy gives a Device

    def item(self, _what: str = ".item()") -> Scalar:
        """The single element as a Python scalar."""
        if self.size != 1:
            raise ShapeError(f"item() needs a tensor of one element, got shape {self.shape}")
        return self.numpy(_what).reshape(()).item()

    def __float__(self) -> float:
        return float(self.item("float()"))

    def __int__(self) -> int:
        return int(self.item("int()"))

    def __index__(self) -> int:
        if not np.issubdtype(self.dtype, np.integer):
            raise DTypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item("an index (operator.index)"))

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ShapeError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous; use any() or all()")
        return bool(self.item("bool() (an if, while, and, or or not)"))

    # -- operators ------------------------------------------------------------
    # the binary operators (+, -, *, /, //, %, &, |, ^, <<, >>, comparisons) and the unary
    # ones (-, +, abs, ~) are the ufuncs' recording functions themselves, set after them
    # (``_OPERATORS``): one Python call each
    def __pow__(self, o: ArrayLike) -> Tensor: return _power_operator(self, o)

    def __getitem__(self, index: Any) -> Tensor:
        from .views import getitem
        return getitem(self, index)

    def __iter__(self) -> Any:
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    @property
    def T(self) -> Tensor:  # noqa: N802  (NumPy's name)
        """The tensor with its axes reversed (a view)."""
        from .views import transpose
        return transpose(self)


_new_object = object.__new__
#: ``runtime.realize_one``, once imported (the runtime imports this module)
_REALIZE_ONE: Any = None


def _realize_one() -> Any:
    global _REALIZE_ONE
    from ..runtime import realize_one
    _REALIZE_ONE = realize_one
    return realize_one


def _wrap(node: Node, _new: Any = object.__new__) -> Tensor:
    """``Tensor(node)`` without the call to ``__init__`` (the hot path of recording)."""
    t = _new(Tensor)
    t._node = node
    return t


# -- converting inputs ---------------------------------------------------------

def _cupy_module() -> Any:
    import sys
    return sys.modules.get("cupy")


def _check_name(name: str | None) -> None:
    if name is not None and not (isinstance(name, str) and NAME_PATTERN.match(name)):
        raise FusejitError(
            f"input name {name!r} is not an identifier (letters, digits and _, not starting "
            f"with a digit)")


def asarray(obj: ArrayLike, dtype: Any = None, name: str | None = None) -> Tensor:
    """A lazy tensor over a NumPy or CuPy array, another library's array, nested list, or scalar.

    NumPy arrays are not copied (the tensor reads them when realized, so do not
    mutate them meanwhile); CuPy arrays stay on the device (a host backend copies
    them to the host when it realizes them). Other libraries' arrays are taken
    without a copy through DLPack (``__dlpack__``) or the CUDA array interface, as
    ``from_dlpack`` takes them: host memory on any backend, device memory on the
    ``cuda`` backend only (a host backend raises ``DeviceError``). Objects with
    neither go through ``np.asarray`` (``__array_interface__`` and the buffer
    protocol share memory too). ``name`` becomes the input's name in the IR text.
    """
    _check_name(name)
    if isinstance(obj, Tensor):
        return obj if dtype is None else obj.astype(dtype)
    if type(obj) is DynamicFloat:  # fj.jit's float argument: a 0-d float64 parameter
        dt = as_dtype(dtype if dtype is not None else np.float64, where="asarray")
        return Tensor(cast_node(make_scalar(plain_value(obj), _F64, obj.source), dt))
    if not isinstance(obj, np.ndarray) and not interop.is_cupy_array(obj) \
            and interop.exports_buffer(obj):
        obj = interop.import_buffer(obj, what="asarray")  # a NumPy or CuPy array now
    cp = _cupy_module()
    if cp is not None and isinstance(obj, cp.ndarray):
        dt = as_dtype(dtype if dtype is not None else obj.dtype, where="asarray")
        if obj.dtype != dt:
            obj = obj.astype(dt)
        return _user_input(make_input(obj, dt, tuple(obj.shape), name))
    try:
        arr = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise FusejitError(f"asarray: cannot convert {type(obj).__name__} to an array: {exc}") \
            from exc
    dt = as_dtype(arr.dtype, where="asarray")
    if arr.dtype != dt:  # byte-swapped input
        arr = arr.astype(dt)
    return _user_input(make_input(arr, dt, tuple(arr.shape), name))


def _user_input(leaf: Node) -> Tensor:
    """The tensor of a user's array: it keeps the nodes a loop will make from it again
    (``graph.KEEP_DERIVED``), so that they live as long as it does, and no longer."""
    t = Tensor(leaf)
    t._kept = keep_derived(leaf)
    return t


def from_dlpack(x: Any, /, *, copy: bool | None = None, name: str | None = None) -> Tensor:
    """A tensor over another library's buffer, sharing its memory (no copy).

    Takes any object exporting DLPack (``__dlpack__``: NumPy, CuPy, torch, jax, ...), the
    CUDA array interface (``__cuda_array_interface__``: CuPy, numba, ...) or the NumPy array
    interface (``__array_interface__``), without importing the library. Host memory is taken
    through ``np.from_dlpack`` on any backend (the ``cuda`` backend copies it to the device
    when it realizes, as it does NumPy arrays); device memory through ``cupy.from_dlpack`` or
    ``cupy.asarray`` and needs the ``cuda`` backend (a host backend raises ``DeviceError``).
    CuPy arrays and fusejit tensors are taken as ``asarray`` takes them.

    ``copy``: None shares memory when the exporter can, True always copies, False never
    does (the exporter raises if it must). Do not write to the buffer until the tensors
    that read it are realized. ``name`` becomes the input's name in the IR text. Anything
    else raises ``InteropError`` (use ``asarray`` for lists and scalars).
    """
    _check_name(name)
    if copy is not True and (isinstance(x, (Tensor, np.ndarray)) or interop.is_cupy_array(x)):
        return asarray(x, name=name)
    array = interop.import_buffer(x, copy=copy)
    if array is None:
        if not (hasattr(x, "__array_interface__") or hasattr(x, "__array_struct__")):
            raise InteropError(
                f"from_dlpack: {type(x).__name__} exports no buffer (no __dlpack__, "
                f"__cuda_array_interface__ or __array_interface__); use fj.asarray for lists, "
                f"scalars and other array-likes")
        try:
            array = np.array(x, copy=True) if copy else np.asarray(x, copy=copy)
        except (ValueError, TypeError) as exc:
            raise InteropError(f"from_dlpack: NumPy cannot take the array interface of "
                               f"{type(x).__name__}: {exc}") from exc
    return asarray(array, name=name)


def _operand(x: ArrayLike) -> Tensor | Scalar:
    """A Tensor, or a Python scalar kept weak for promotion."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, np.generic):
        return x
    if isinstance(x, np.generic):
        # NumPy scalars are strongly typed: a 0-d scalar parameter of their dtype (a buffer
        # per call would cost an input, and on the GPU an upload); bools stay constants
        dt = as_dtype(x.dtype, where="scalar")
        if dt.kind == "b":
            return Tensor(const_node(x.item(), dt, ()))
        return Tensor(make_scalar(scalar_value(x.item(), dt), dt))
    return asarray(x)


def _kind(x: Tensor | Scalar) -> Any:
    return x.dtype if isinstance(x, Tensor) else scalar_kind(x)


# -- shape helpers -------------------------------------------------------------

def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of several shapes, or ShapeError naming them."""
    nonscalar = [s for s in shapes if s]
    if not nonscalar:
        return ()
    first = nonscalar[0]
    if all(s == first for s in nonscalar):  # the common case, on every recorded op
        return first
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        dim = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if dim not in (1, d):
                    shown = " and ".join(str(tuple(s)) for s in shapes)
                    raise ShapeError(f"shapes {shown} cannot be broadcast together "
                                     f"(axis {i - ndim}: {dim} vs {d})")
                dim = d
        out.append(dim)
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """A non-negative axis index, or AxisError."""
    try:
        axis = operator.index(axis)
    except TypeError as exc:
        raise AxisError(f"{what} must be an integer, got {axis!r}") from exc
    if not -ndim <= axis < ndim:
        raise AxisError(f"{what} {axis} is out of bounds for a tensor of {ndim} dimension"
                        f"{'s' if ndim != 1 else ''}")
    return axis % ndim if ndim else 0


def normalize_axes(axis: int | Iterable[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted, validated, unique axes; ``None`` means all axes."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        return (normalize_axis(int(axis), ndim),)
    if not isinstance(axis, Iterable):  # (a float axis: NumPy's TypeError, as a FusejitError)
        raise AxisError(f"axis must be an integer, a tuple of integers or None, got {axis!r}")
    axes = tuple(normalize_axis(a, ndim) for a in axis)
    if len(set(axes)) != len(axes):
        raise AxisError(f"repeated axis in {tuple(axis)}")
    return tuple(sorted(axes))


# -- node builders ---------------------------------------------------------------

@lru_cache(maxsize=4096)
def _rounded(kind: type, bits: object, dtype: np.dtype) -> Scalar:
    # keyed by the float's hex form so that 0.0 and -0.0 (equal as keys) stay apart
    value = float.fromhex(bits) if kind is float else bits  # type: ignore[arg-type]
    with np.errstate(all="ignore"):
        stored = np.asarray(value).astype(dtype).item()
    return float(stored) if isinstance(stored, float) else stored


def const_node(value: Scalar, dtype: np.dtype, shape: tuple[int, ...],
               note: str | None = None) -> Node:
    """A constant filled with ``value`` rounded to ``dtype`` (no host buffer).

    Constants are part of the program's structure: the frontend makes them for values
    it chooses itself (a mean's count) or that decide the result's structure; values
    from the user become scalar parameters (``scalar_operand``).
    """
    kind = type(value)
    if kind is DynamicFloat:
        raise RecordingError(f"fj.jit: {value.label} is a dynamic float argument; it cannot "
                             f"be a constant here (make it static with static_argnames=...)")
    bits = float(value).hex() if isinstance(value, float) else value
    key = (kind, bits, dtype, shape, note)
    node = _CONSTS.get(key)
    if node is None:
        stored = _rounded(float, bits, dtype) if isinstance(value, float) else \
            _rounded(kind, value, dtype)
        node = make("const", (), {"value": stored}, dtype, shape, note)
        if len(_CONSTS) >= 4096:
            _CONSTS.clear()
        _CONSTS[key] = node
    return node


#: constants made recently, kept alive (they hold no data) so that recording one again is a
#: lookup: (value's type, exact value, dtype, shape, note) -> node
_CONSTS: dict[tuple, Node] = {}


_F64 = np.dtype(np.float64)


def scalar_operand(value: Scalar, dtype: np.dtype, shape: tuple[int, ...],
                   other: Node | None = None) -> Node:
    """The operand for a user's scalar ``value`` converted to ``dtype`` (the range checks
    are the caller's): a 0-d scalar parameter, which elementwise ops read at every element.

    Bools, and scalars meeting a graph that already has ``MAX_SCALAR_LEAVES`` leaves,
    stay constants of ``shape`` (structural rules: they never depend on the value).
    """
    if type(value) is DynamicFloat:  # fj.jit's dynamic float: always a parameter
        return make_scalar(scalar_value(plain_value(value), dtype), dtype, value.source)
    if (dtype.kind == "b" or isinstance(value, (bool, np.bool_))
            or (other is not None and other.leaves is not None
                and len(other.leaves) >= MAX_SCALAR_LEAVES)
            or (type(value) is int and not -2**63 <= value < 2**64)):
        return const_node(value, dtype, shape)
    return make_scalar(scalar_value(value, dtype), dtype)


def cast_node(node: Node, dtype: np.dtype) -> Node:
    """``node`` converted to ``dtype`` (folded into a new constant or scalar parameter when
    ``node`` is one whose value is known now)."""
    if node.dtype == dtype:
        return node
    if node.op == "const":  # fold: a constant of the new dtype
        with np.errstate(all="ignore"):
            value = np.asarray(node.attrs["value"], node.dtype).astype(dtype).item()
        return const_node(value, dtype, node.shape)
    if node.op == "scalar" and node.arg is None and dtype.kind != "b":
        # fold: a new parameter of the converted value (fj.jit's parameters, whose value
        # comes later, are cast in the kernel)
        with np.errstate(all="ignore"):
            value = np.asarray(node.buffer, node.dtype).astype(dtype)[()]
        return make_scalar(scalar_value(value.item(), dtype), dtype)
    return make1("cast", node, dtype, node.shape)


def reshape_node(node: Node, shape: tuple[int, ...]) -> Node:
    """``node`` seen with ``shape`` (same size); a reshape of a reshape is one reshape."""
    if node.shape == shape:
        return node
    if node.op == "const":
        return make("const", (), node.attrs, node.dtype, shape)
    if node.op == "reshape":  # reshape of reshape is one reshape
        node = node.srcs[0]
        if node.shape == shape:
            return node
    return make1("reshape", node, node.dtype, shape, {"shape": shape}, (("shape", shape),))


def broadcast_node(node: Node, shape: tuple[int, ...]) -> Node:
    """``node`` broadcast to ``shape`` (already checked compatible): reshape then expand."""
    if node.shape == shape:
        return node
    if node.op == "const":
        return make("const", (), node.attrs, node.dtype, shape)
    lead = len(shape) - len(node.shape)
    if lead:
        node = reshape_node(node, (1,) * lead + node.shape)
    if node.shape == shape:
        return node
    return make1("expand", node, node.dtype, shape, {"shape": shape}, (("shape", shape),))


def coerce(x: Tensor | Scalar, dtype: np.dtype, shape: tuple[int, ...], what: str,
           other: Node | None = None) -> Node:
    """The node of ``x`` cast to ``dtype`` and broadcast to ``shape`` (a Python scalar: a
    0-d scalar parameter, which elementwise ops broadcast; ``other`` is the node it meets)."""
    if isinstance(x, Tensor):
        node = x._node
        if node.op == "scalar" and node.shape == () and x.dtype.kind != "b":
            # a NumPy scalar: elementwise ops read the parameter at every element
            node = cast_node(node, dtype)
            if node.op == "scalar":
                return node
            return broadcast_node(node, shape)
        return broadcast_node(cast_node(node, dtype), shape)
    if not fits(x, dtype):
        raise DTypeError(f"{what}: Python integer {x} is out of bounds for {dtype}")
    if is_bool(dtype) and not _fits_c_long(x):  # NumPy converts them through a C long
        raise DTypeError(f"{what}: Python integer {x} is too large to convert to {dtype}")
    return scalar_operand(x, dtype, shape, other)


def _fits_c_long(x: Scalar) -> bool:
    return not isinstance(x, int) or isinstance(x, bool) or -2**63 <= x < 2**63


# -- elementwise ops -------------------------------------------------------------

#: NumPy ufunc -> IR op; bool operands use logical ops where NumPy's bool loop is logical.
_BINARY_OPS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "true_divide": "div",
    "floor_divide": "floordiv", "remainder": "mod", "power": "pow",
    "maximum": "maximum", "minimum": "minimum", "arctan2": "atan2",
    "less": "lt", "less_equal": "le", "greater": "gt", "greater_equal": "ge",
    "equal": "eq", "not_equal": "ne", "logical_and": "and", "logical_or": "or",
    "logical_xor": "xor", "bitwise_and": "bitand", "bitwise_or": "bitor",
    "bitwise_xor": "bitxor", "left_shift": "shl", "right_shift": "shr",
}
_BOOL_BINARY = {"add": "or", "mul": "and", "maximum": "or", "minimum": "and",
                "bitand": "and", "bitor": "or", "bitxor": "xor"}

_UNARY_OPS = {
    "negative": "neg", "absolute": "abs", "square": "square", "sign": "sign",
    "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
    "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "reciprocal": "reciprocal",
    "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin", "arccos": "acos",
    "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh",
    "arccosh": "acosh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil",
    "trunc": "trunc", "rint": "rint", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "logical_not": "not", "invert": "bitnot", "positive": "positive",
}
#: Not NumPy ufuncs: typed like the ufunc on the right (an int input goes to NumPy's float loop).
_TYPED_LIKE = {"rsqrt": "sqrt", "sigmoid": "exp", "erf": "sqrt"}


#: ufunc -> its fast paths' memos (tensor op tensor, tensor op scalar, scalar op tensor):
#: operand kinds and shapes -> (op, input dtypes, output dtype, shape, per operand how it
#: fits) for kinds whose recording was regular: repeated recordings skip promotion and checks
_FAST: dict[str, tuple[dict, dict, dict]] = {}


def _fit(node: Node, dtype: np.dtype, shape: tuple[int, ...]) -> Node:
    """``node`` cast to ``dtype`` and broadcast to ``shape`` (the common case costs two tests)."""
    if node.dtype != dtype:
        node = cast_node(node, dtype)
    if node.shape != shape:
        node = broadcast_node(node, shape)
    return node


def _bounds(dtype: np.dtype, kind: type) -> tuple[Any, Any, Any] | None:
    """For the fast path: the Python ints or floats (``kind``) that become a scalar parameter
    of ``dtype`` as they are, ``(low, high, convert)``, the others (out of range, overflow,
    NaN) left to the full path; None for bool (Python bools and bool parameters stay
    constants) and floats meeting an integer dtype."""
    if dtype.kind == "f":
        if dtype.itemsize == 8:
            return (-math.inf, math.inf, float) if kind is float else (-2**63, 2**63 - 1, float)
        limit = float(np.finfo(dtype).max)
        rounded = _ROUNDED.get(dtype)
        if rounded is None:
            rounded = _ROUNDED[dtype] = _Rounded(dtype)
        return -limit, limit, rounded.__getitem__
    if dtype.kind in "iu" and kind is int:
        info = np.iinfo(dtype)
        return int(info.min), int(info.max), int
    return None


class _Rounded(dict):
    """Python ints and floats -> their value as a NumPy scalar of a narrow float ``dtype``
    (the fast paths' conversion: a lookup costs a quarter of ``dtype.type(value)``, and
    loops record the same constants again, ``x * 0.5``, ``var + eps``). Only equal values
    share an entry (an int and a float equal to it convert alike); zeros are not kept, as
    0.0 and -0.0 are equal keys; past ``MAX_ROUNDED`` entries the table starts anew."""

    __slots__ = ("convert",)

    def __init__(self, dtype: np.dtype) -> None:
        super().__init__()
        self.convert = dtype.type

    def __missing__(self, value: int | float) -> Any:
        out = self.convert(value)
        if value:
            if len(self) >= MAX_ROUNDED:
                self.clear()
            self[value] = out
        return out


MAX_ROUNDED = 1024
#: narrow float dtype -> its ``_Rounded``
_ROUNDED: dict[np.dtype, _Rounded] = {}


def _remember_fast(ufunc: str, fast_key: tuple, op: str, in_a: np.dtype, in_b: np.dtype,
                   out: np.dtype, shape: tuple[int, ...]) -> None:
    """Memoize a regular recording for the fast paths (``fast_key``: the path and the operand
    kinds and shapes): the op, dtypes and shape, and per operand whether it needs a cast or
    broadcast (a tensor) or which values convert how (a Python scalar, ``_bounds``)."""
    tt, ts, st = _FAST[ufunc]
    if fast_key[0] == "tt":
        _, da, sa, db, sb = fast_key
        tt[fast_key[1:]] = (op, in_a, in_b, out, shape, da != in_a or sa != shape,
                            db != in_b or sb != shape)
    elif fast_key[0] == "ts":
        _, da, sa, kind = fast_key
        bounds = _bounds(in_b, kind)
        if bounds is not None:
            ts[fast_key[1:]] = (op, in_a, in_b, out, shape, da != in_a or sa != shape, *bounds)
    else:
        _, kind, db, sb = fast_key
        bounds = _bounds(in_a, kind)
        if bounds is not None:
            st[fast_key[1:]] = (op, in_a, in_b, out, shape, *bounds, db != in_b or sb != shape)


def binary(ufunc: str, a: ArrayLike, b: ArrayLike) -> Tensor:
    """Record NumPy's ``ufunc(a, b)`` with NumPy's promotion and broadcasting."""
    fn = _BINARY_FNS.get(ufunc)
    return fn(a, b) if fn is not None else _binary(ufunc, a, b, None)


def _binary_fn(ufunc: str) -> Callable[[ArrayLike, ArrayLike], Tensor]:
    """``binary`` for one ufunc, its fast paths inline: Tensor's operators are these
    functions (so recording ``x * 2.0`` is one Python call into the frontend)."""

    tt, ts, st = _FAST[ufunc] = ({}, {}, {})

    def record(x1: ArrayLike, x2: ArrayLike) -> Tensor:
        # fast paths, memoized by operand kinds and shapes: tensor op tensor, tensor op
        # Python scalar (power's result depends on the exponent's value: never memoized)
        ta, tb = type(x1), type(x2)
        if ta is Tensor:
            na = x1._node
            if tb is Tensor:
                nb = x2._node
                resolved = tt.get((na.dtype, na.shape, nb.dtype, nb.shape))
                if resolved is not None:
                    op, in_a, in_b, out, shape, fit_a, fit_b = resolved
                    if fit_a:
                        na = _fit(na, in_a, shape)
                    if fit_b:
                        nb = _fit(nb, in_b, shape)
                    t = _new_object(Tensor)  # (``_wrap``, inline)
                    t._node = make2(op, na, nb, out, shape)
                    return t
                return _binary(ufunc, x1, x2, ("tt", na.dtype, na.shape, nb.dtype, nb.shape))
            if tb is float or tb is int:
                resolved = ts.get((na.dtype, na.shape, tb))
                if resolved is not None:
                    op, in_a, in_b, out, shape, fit_a, low, high, convert = resolved
                    leaves = na.leaves
                    if low <= x2 <= high and (leaves is None or (
                            len(leaves) if type(leaves) is tuple else leaves.n)
                            < MAX_SCALAR_LEAVES):
                        if fit_a:
                            na = _fit(na, in_a, shape)
                        t = _new_object(Tensor)
                        t._node = make_scalar_op(op, na, convert(x2), in_b, out, shape)
                        return t
                return _binary(ufunc, x1, x2, ("ts", na.dtype, na.shape, tb))
        elif tb is Tensor and (ta is float or ta is int):
            nb = x2._node
            resolved = st.get((ta, nb.dtype, nb.shape))
            if resolved is not None:
                op, in_a, in_b, out, shape, low, high, convert, fit_b = resolved
                leaves = nb.leaves
                if low <= x1 <= high and (leaves is None or (
                        len(leaves) if type(leaves) is tuple else leaves.n) < MAX_SCALAR_LEAVES):
                    if fit_b:
                        nb = _fit(nb, in_b, shape)
                    t = _new_object(Tensor)
                    t._node = make_scalar_op(op, nb, convert(x1), in_a, out, shape, True)
                    return t
            return _binary(ufunc, x1, x2, ("st", ta, nb.dtype, nb.shape))
        return _binary(ufunc, x1, x2, None)

    record.__name__ = record.__qualname__ = ufunc
    return record


def _binary(ufunc: str, a: ArrayLike, b: ArrayLike, fast_key: tuple | None) -> Tensor:
    """The full path of ``binary``: NumPy's checks on values; memoizes regular recordings."""
    a, b = _operand(a), _operand(b)
    in_a, in_b, out = resolve_ufunc(ufunc, (_kind(a), _kind(b)))
    if ufunc == "power" and type(b) is int and b < 0 and in_b.kind in "iu" and fits(b, in_b):
        # NumPy raises for this whatever the base's values; an array of exponents is checked
        # by nobody (its values are only known in the kernel): there the result is 0 or +-1
        raise DomainError(f"power: integers to negative integer powers are not allowed "
                          f"({in_a} ** {b})")
    if ufunc in _LOGICAL:  # NumPy's loops test truth values: the IR's logical ops take bools
        in_a = in_b = BOOL
    shape = broadcast_shapes(a.shape if isinstance(a, Tensor) else (),
                             b.shape if isinstance(b, Tensor) else ())
    op = _BINARY_OPS[ufunc]
    if op in _FLIPPED:
        # NumPy 2 compares a Python int outside the dtype's range exactly (no overflow error)
        # (only against an integer tensor: a bool tensor compares in int64 and NumPy overflows)
        for scalar, dt, scalar_op, other in ((b, in_b, op, a), (a, in_a, _FLIPPED[op], b)):
            if not isinstance(scalar, Tensor) and other.dtype.kind in "iu" and not fits(scalar, dt):
                result = _out_of_range_compare(scalar_op, scalar, dt)
                return Tensor(const_node(result, BOOL, shape, note=(
                    f"{_SYMBOL[scalar_op]} {scalar} on {dt} is {result} everywhere: NumPy "
                    f"compares a Python int outside the dtype's range exactly")))
    other_a = b._node if isinstance(b, Tensor) else None
    other_b = a._node if isinstance(a, Tensor) else None
    na = coerce(a, in_a, shape, ufunc, other_a)
    nb = coerce(b, in_b, shape, ufunc, other_b)
    if ufunc == "power" and in_a.kind == "f" and in_a.itemsize >= 4 and _is_scalar_half(b):
        # NumPy's float32/float64 power loops compute x ** (a scalar 0.5) as sqrt(x): -0.0
        # stays -0.0 and -inf gives nan (its float16 loop calls pow)
        return Tensor(make("sqrt", (_fit(na, in_a, shape),), {}, out, shape, note=(
            "power(x, 0.5) computed as sqrt(x), as NumPy's float32 and float64 power loops do "
            "for a scalar exponent 0.5")))
    if op in _FLIPPED and in_a != in_b:  # a signed int against uint64: exact, as NumPy 2
        if in_a.kind == "i":
            return Tensor(_mixed_sign_compare(op, na, nb, shape))
        return Tensor(_mixed_sign_compare(_FLIPPED[op], nb, na, shape))
    if is_bool(in_a) and is_bool(in_b):
        op = _BOOL_BINARY.get(op, op)
    if op in ("shl", "shr") or in_a == in_b:
        # (a tensor-op-tensor recording is not memoized with a scalar parameter as an operand:
        # ``coerce`` leaves it unbroadcast, which the fast path's cast-and-broadcast, shared
        # with 0-d inputs, would not)
        if fast_key is not None and ufunc != "power" and (
                fast_key[0] != "tt" or (na.op != "scalar" and nb.op != "scalar")):
            _remember_fast(ufunc, fast_key, op, in_a, in_b, out, shape)
        return Tensor(make(op, (na, nb), {}, out, shape))
    raise DTypeError(f"{ufunc}: unsupported operand dtypes {in_a} and {in_b}")  # pragma: no cover


_SYMBOL = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


_LOGICAL = frozenset({"logical_and", "logical_or", "logical_xor"})

#: comparison -> the comparison with its operands swapped
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _out_of_range_compare(op: str, value: int, dtype: np.dtype) -> bool:
    """``x op value`` for every ``x`` of ``dtype`` when the Python int ``value`` lies outside it."""
    above = value > np.iinfo(dtype).max  # else below the minimum
    return {"lt": above, "le": above, "gt": not above, "ge": not above,
            "eq": False, "ne": True}[op]


def _mixed_sign_compare(op: str, signed: Node, unsigned: Node, shape: tuple[int, ...]) -> Node:
    """``signed op unsigned`` (int64 against uint64) without wrap-around: negatives go first."""
    negative = make("lt", (signed, const_node(0, signed.dtype, shape)), {}, BOOL, shape)
    as_unsigned = cast_node(signed, unsigned.dtype)
    compared = make(op, (as_unsigned, unsigned), {}, BOOL, shape)
    if op in ("lt", "le", "ne"):
        return make("or", (negative, compared), {}, BOOL, shape)
    return make("and", (make("not", (negative,), {}, BOOL, shape), compared), {}, BOOL, shape)


def unary(ufunc: str, x: ArrayLike, note: str | None = None) -> Tensor:
    """Record NumPy's ``ufunc(x)`` (or a fusejit extension typed like a ufunc).

    ``note`` says why this op was chosen for a specific value (``x ** 2`` as ``square``).
    """
    if note is not None:
        return _unary(ufunc, x, note)
    return (_UNARY_FNS.get(ufunc) or unary_recorder(ufunc))(x)


def unary_recorder(ufunc: str) -> Callable[[ArrayLike], Tensor]:
    """The function recording ``unary(ufunc, x)`` (made on first use, then kept)."""
    fn = _UNARY_FNS.get(ufunc)
    if fn is None:
        fn = _UNARY_FNS.setdefault(ufunc, _unary_fn(ufunc))
    return fn


def binary_recorder(ufunc: str) -> Callable[[ArrayLike, ArrayLike], Tensor]:
    """The function recording ``binary(ufunc, a, b)``."""
    return _BINARY_FNS[ufunc]


def _unary_fn(ufunc: str) -> Callable[[ArrayLike], Tensor]:
    """``unary`` for one ufunc, its fast path inline (``fj.exp`` and ``-x`` are these)."""
    resolved_by_dtype = _UNARY_RESOLVED.setdefault(ufunc, {})

    def record(x: ArrayLike) -> Tensor:
        if type(x) is Tensor:  # fast path: a memoized regular recording
            node = x._node
            resolved = resolved_by_dtype.get(node.dtype)
            if resolved is not None:
                op, in_dt, out, cast = resolved
                if cast:
                    node = cast_node(node, in_dt)
                t = _new_object(Tensor)
                t._node = make1(op, node, out, node.shape)
                return t
        return _unary(ufunc, x, None)

    record.__name__ = record.__qualname__ = ufunc
    return record


#: ufunc -> its recording function (``unary``'s fast path inline)
_UNARY_FNS: dict[str, Callable[[ArrayLike], Tensor]] = {}


def _unary(ufunc: str, x: ArrayLike, note: str | None) -> Tensor:
    """The full path of ``unary``: type resolution and checks; memoizes regular recordings."""
    xt = _operand(x)
    if not isinstance(xt, Tensor):
        xt = asarray(xt if type(xt) is DynamicFloat else np.asarray(xt))
    typed_as = _TYPED_LIKE.get(ufunc, ufunc)
    in_dt, out = resolve_ufunc(typed_as, (xt.dtype,))
    if ufunc == "logical_not":
        in_dt = BOOL
    node = cast_node(xt._node, in_dt)
    if ufunc == "positive":
        return Tensor(node)
    if ufunc == "reciprocal" and not is_float(in_dt):
        raise DTypeError(f"reciprocal: integer reciprocal (NumPy truncates 1/x) is not "
                         f"supported; cast {xt.dtype} to a float dtype first")
    op = _UNARY_OPS.get(ufunc, ufunc)
    if op in ("isnan", "isinf", "isfinite") and not is_float(in_dt):
        return Tensor(const_node(op == "isfinite", BOOL, node.shape))  # integers are finite
    if is_bool(in_dt):
        if op == "bitnot":
            op = "not"
        elif op in ("abs", "square", "floor", "ceil", "trunc", "rint"):
            return Tensor(cast_node(node, out))
    if op in ("floor", "ceil", "trunc", "rint") and not is_float(in_dt):
        return Tensor(node)  # identity on integers, as in NumPy 2
    if note is None:
        _UNARY_RESOLVED.setdefault(ufunc, {})[xt.dtype] = (op, in_dt, out, xt.dtype != in_dt)
    return Tensor(make(op, (node,), {}, out, node.shape, note))


#: ufunc -> operand dtype -> (op, input dtype, output dtype, whether to cast) for ufuncs whose
#: recording was regular: repeated recordings skip type resolution and checks
_UNARY_RESOLVED: dict[str, dict[np.dtype, tuple[str, np.dtype, np.dtype, bool]]] = {}


def _is_scalar_half(x: Tensor | Scalar) -> bool:
    """Whether ``x`` is a scalar 0.5: a Python float, a NumPy scalar (a 0-d scalar parameter
    recorded now) or a 0-d constant. ``fj.jit``'s dynamic floats are guarded (a later call
    with another class of exponent records again)."""
    if isinstance(x, Tensor):
        node = x._node
        if node.op == "scalar":
            return node.arg is None and node.buffer == 0.5
        return node.op == "const" and node.shape == () and node.attrs["value"] == 0.5
    if type(x) is DynamicFloat:
        return guard(x, power_class) == 0.5
    return type(x) is float and x == 0.5


_POWER_NOTE = ("x ** {e} computed as {fn}(x), as NumPy's ** does for a scalar exponent {e}")


def _power_operator(x: Tensor, exponent: ArrayLike) -> Tensor:
    """``x ** exponent`` as NumPy's operator computes it: a Python scalar exponent of 2 is
    ``square`` (so bool ** 2 is int8), and on floats 0.5 is ``sqrt`` and -1 ``reciprocal``.

    These depend on the exponent's value: the ops carry a note for ``plan.explain()``, and
    an ``fj.jit`` dynamic float exponent is guarded (another class records again).
    """
    if type(exponent) is DynamicFloat:
        special = guard(exponent, power_class)
        if special is None:
            return binary("power", x, exponent)
        exponent = special
    if type(exponent) in (int, float):
        if exponent == 2 and (type(exponent) is int or is_float(x.dtype)):
            # (an int array ** 2.0 promotes to float64 instead)
            return unary("square", x, _POWER_NOTE.format(e=exponent, fn="square"))
        if is_float(x.dtype) and exponent == 0.5:
            return unary("sqrt", x, _POWER_NOTE.format(e=exponent, fn="sqrt"))
        if is_float(x.dtype) and exponent == -1:
            return unary("reciprocal", x, _POWER_NOTE.format(e=exponent, fn="reciprocal"))
    return binary("power", x, exponent)


def where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elements of ``x`` where ``condition`` holds, else of ``y`` (NumPy promotion of x and y)."""
    # fast path: a tensor condition, and tensors or Python scalars ``x`` and ``y`` (one at
    # least a tensor), memoized by the operands' dtypes and shapes (a Python float or int by
    # its type: memoized only where the type alone decides the promotion and the checks, see
    # ``_where``)
    if type(condition) is Tensor:
        cn = condition._node
        tx, ty = type(x), type(y)
        found = an = bn = None
        if tx is Tensor:
            an = x._node
            if ty is Tensor:
                bn = y._node
                found = _WHERE_TYPES.get((cn.dtype, cn.shape, an.dtype, an.shape, bn.dtype,
                                          bn.shape))
            elif ty is float or ty is int:
                found = _WHERE_TYPES.get((cn.dtype, cn.shape, an.dtype, an.shape, ty, None))
        elif (tx is float or tx is int) and ty is Tensor:
            bn = y._node
            found = _WHERE_TYPES.get((cn.dtype, cn.shape, tx, None, bn.dtype, bn.shape))
        if found is not None:
            out, shape, fit_c, fit_a, fit_b = found
            # (what the full path records: ``coerce`` only where a cast or broadcast is due;
            # a Python scalar meeting a float result takes ``_where_operand``'s path)
            if fit_c:
                cn = coerce(condition, BOOL, shape, "where")
            if an is None:
                an = scalar_operand(x, out, shape, cn)
            elif fit_a:
                an = coerce(x, out, shape, "where")
            if bn is None:
                bn = scalar_operand(y, out, shape, cn)
            elif fit_b:
                bn = coerce(y, out, shape, "where")
            t = _new_object(Tensor)
            t._node = make3("where", cn, an, bn, out, shape)
            return t
    return _where(condition, x, y)


def _where(condition: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """The full path of ``where``: promotion, broadcasting and checks; memoizes what the fast
    path takes."""
    c, a, b = _operand(condition), _operand(x), _operand(y)
    out = as_dtype(np.result_type(_kind_for_result_type(a), _kind_for_result_type(b)),
                   where="where")
    shape = broadcast_shapes(*[t.shape for t in (c, a, b) if isinstance(t, Tensor)])
    nc = coerce(c, BOOL, shape, "where") if isinstance(c, Tensor) else const_node(bool(c), BOOL, shape)
    na, nb = _where_operand(a, out, shape, nc), _where_operand(b, out, shape, nc)
    tx, ty = type(x), type(y)
    # a Python float or int x or y is memoized when the result is a float dtype: then its
    # type alone decides the result (NumPy 2's weak scalars) and its conversion is
    # ``scalar_operand``'s (the range checks of ``_where_operand`` are for integer results)
    weak_x = (tx is float or tx is int) and out.kind == "f"
    weak_y = (ty is float or ty is int) and out.kind == "f"
    if type(condition) is Tensor and (tx is Tensor or weak_x) and (ty is Tensor or weak_y) \
            and (tx is Tensor or ty is Tensor):
        cn = condition._node
        key_x: tuple = (x._node.dtype, x._node.shape) if tx is Tensor else (tx, None)
        key_y: tuple = (y._node.dtype, y._node.shape) if ty is Tensor else (ty, None)
        fit_a = tx is Tensor and (x._node.dtype != out or x._node.shape != shape)
        fit_b = ty is Tensor and (y._node.dtype != out or y._node.shape != shape)
        if len(_WHERE_TYPES) >= 1024:
            _WHERE_TYPES.clear()
        _WHERE_TYPES[(cn.dtype, cn.shape, *key_x, *key_y)] = (
            out, shape, cn.dtype != BOOL or cn.shape != shape, fit_a, fit_b)
    return Tensor(make3("where", nc, na, nb, out, shape))


#: (condition's, x's and y's dtypes and shapes; ``float, None`` or ``int, None`` for a Python
#: scalar x or y) -> ``where``'s result dtype and shape, and whether the condition, x and y
#: need a cast or broadcast
_WHERE_TYPES: dict[tuple, tuple[np.dtype, tuple[int, ...], bool, bool, bool]] = {}


def _where_operand(x: Tensor | Scalar, dtype: np.dtype, shape: tuple[int, ...],
                   condition: Node) -> Node:
    """A ``where`` branch: a Python int out of the result dtype's range is wrapped around or
    refused, as the installed NumPy does (NumPy 2.4 wraps, 2.5 raises OverflowError)."""
    if isinstance(x, Tensor):
        return coerce(x, dtype, shape, "where")
    if dtype.kind in "biu" and not _fits_c_long(x):
        raise DTypeError(f"where: Python integer {x} is too large to convert to {dtype}")
    if type(x) is int and dtype.kind in "iu" and not fits(x, dtype):
        if not _numpy_wraps_in_where():
            raise DTypeError(f"where: Python integer {x} is out of bounds for {dtype}")
        return const_node(x, dtype, shape)  # wrapped around, as NumPy does
    return scalar_operand(x, dtype, shape, condition)


@lru_cache(maxsize=1)
def _numpy_wraps_in_where() -> bool:
    try:
        with np.errstate(all="ignore"):
            np.where(True, np.zeros((), np.int8), 300)
    except OverflowError:
        return False
    return True


def _kind_for_result_type(x: Tensor | Scalar) -> Any:
    # a dynamic float is a weak Python float (NumPy would take the subclass for float64)
    return x.dtype if isinstance(x, Tensor) else plain_value(x)


def astype(x: ArrayLike, dtype: Any) -> Tensor:
    """``x`` converted to ``dtype`` (C-style casts, as NumPy's ``astype``)."""
    xt = asarray(x) if not isinstance(x, Tensor) else x
    return Tensor(cast_node(xt._node, as_dtype(dtype, where="astype")))


def full(shape: int | Sequence[int], fill_value: Scalar, dtype: Any = None) -> Tensor:
    """A lazy constant tensor (no host buffer is allocated).

    The fill value is a constant of the program (``zeros``, ``ones``...); an ``fj.jit``
    dynamic float argument is a scalar parameter instead.
    """
    shape = _shape_arg(shape)
    if not isinstance(fill_value, (bool, int, float, np.bool_, np.integer, np.floating)):
        raise DTypeError(f"full: fill_value must be a real scalar, got {type(fill_value).__name__}")
    dt = as_dtype(dtype, where="full") if dtype is not None else \
        as_dtype(np.asarray(plain_value(fill_value)).dtype, where="full")
    if isinstance(fill_value, np.generic):
        fill_value = fill_value.item()
    if not fits(fill_value, dt):  # NumPy 2 refuses to wrap a Python int
        raise DTypeError(f"full: Python integer {fill_value} is out of bounds for {dt}")
    if type(fill_value) is DynamicFloat:  # fj.jit's float argument: a parameter, broadcast
        return Tensor(broadcast_node(scalar_operand(fill_value, dt, ()), shape))
    return Tensor(const_node(fill_value, dt, shape))


def _shape_arg(shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError as exc:
        raise ShapeError(f"shape must be a sequence of integers, got {shape!r}") from exc
    if any(d < 0 for d in dims):
        raise ShapeError(f"negative dimensions are not allowed in shape {dims}")
    return dims


def arange(start: Scalar, stop: Scalar | None = None, step: Scalar = 1,
           dtype: Any = None) -> Tensor:
    """Evenly spaced values in [start, stop), NumPy's arange, as a lazy ``iota``."""
    if stop is None:
        start, stop = 0, start
    bounds = (start, stop, step)
    if not all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
               and np.isfinite(v) for v in bounds):
        raise FusejitError(f"arange: start, stop and step must be finite real numbers, got "
                           f"{bounds}")
    if step == 0:
        raise FusejitError("arange: step must not be zero")
    n = max(int(np.ceil((stop - start) / step)), 0)
    # NumPy picks the dtype from the types of all three (arange(6.0) is float64): ask it
    # with small values of the same types
    inferred = np.arange(type(start)(0), type(stop)(1), type(step)(1)).dtype
    dt = as_dtype(dtype if dtype is not None else inferred, where="arange")
    if is_float(dt):
        start, step = float(start), float(step)
    else:
        start, step = int(start), int(step)
    return Tensor(make("iota", (), {"start": start, "step": step}, dt, (n,)))


#: ufunc -> its recording function (``binary``'s fast paths inline)
_BINARY_FNS = {name: _binary_fn(name) for name in _BINARY_OPS}


def _reflected(record: Callable[[ArrayLike, ArrayLike], Tensor]) -> Any:
    def method(self: Tensor, o: ArrayLike) -> Tensor:
        return record(o, self)
    return method


#: Tensor's binary operators: method name -> ufunc (a reflected method too where Python has one)
_OPERATORS = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
              "floordiv": "floor_divide", "mod": "remainder", "and": "bitwise_and",
              "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
              "rshift": "right_shift", "lt": "less", "le": "less_equal", "gt": "greater",
              "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}
for _method, _ufunc in _OPERATORS.items():
    setattr(Tensor, f"__{_method}__", _BINARY_FNS[_ufunc])
    if _method not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(Tensor, f"__r{_method}__", _reflected(_BINARY_FNS[_ufunc]))
Tensor.__rpow__ = _reflected(_BINARY_FNS["power"])  # type: ignore[attr-defined]
for _method, _ufunc in (("neg", "negative"), ("pos", "positive"), ("abs", "absolute"),
                        ("invert", "invert")):
    setattr(Tensor, f"__{_method}__", unary_recorder(_ufunc))
