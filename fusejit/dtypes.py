"""Supported dtypes, their IR spellings, and NumPy 2 (NEP 50) type promotion.

Promotion is delegated to NumPy's own ufunc dtype resolution, so fusejit's
result dtypes are NumPy's by construction, including weak Python scalars.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .errors import DTypeError

#: IR spelling of each supported dtype, in promotion-table order.
IR_NAMES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8", np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64",
    np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
}
FROM_IR_NAME: dict[str, np.dtype] = {v: k for k, v in IR_NAMES.items()}
SUPPORTED: tuple[np.dtype, ...] = tuple(IR_NAMES)

BOOL = np.dtype(np.bool_)
INT64 = np.dtype(np.int64)
FLOAT64 = np.dtype(np.float64)


def as_dtype(dtype: object, *, where: str = "dtype") -> np.dtype:
    """Normalize anything NumPy accepts as a dtype, rejecting unsupported kinds."""
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as exc:
        raise DTypeError(f"{where}: {dtype!r} is not a dtype") from exc
    if dt.byteorder == ">":
        dt = dt.newbyteorder("=")
    if dt not in IR_NAMES:
        raise DTypeError(
            f"{where}: dtype {dt} is not supported (fusejit supports "
            f"{', '.join(str(d) for d in SUPPORTED)})")
    return dt


def ir_name(dtype: np.dtype) -> str:
    """The IR spelling of a supported dtype (``f32``, ``i64``, ``bool``...)."""
    return IR_NAMES[np.dtype(dtype)]


def is_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a floating-point dtype."""
    return dtype.kind == "f"


def is_bool(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is bool."""
    return dtype.kind == "b"


@lru_cache(maxsize=4096)
def resolve_ufunc(ufunc_name: str, operand_kinds: tuple) -> tuple[np.dtype, ...]:
    """NumPy's loop dtypes for a ufunc: (input dtypes..., output dtype).

    ``operand_kinds`` holds dtypes for arrays and the Python types ``bool``,
    ``int`` or ``float`` for weak scalars (NEP 50). Raises DTypeError where
    NumPy has no loop.
    """
    ufunc = getattr(np, ufunc_name)
    # A Python bool is not weak in NumPy: it acts as np.bool_ (the lowest kind, so
    # it never changes a result's dtype), and resolve_dtypes only accepts int/float.
    kinds = tuple(BOOL if k is bool else k for k in operand_kinds)
    try:
        resolved = ufunc.resolve_dtypes((*kinds, None))
    except (TypeError, np.exceptions.DTypePromotionError) as exc:
        shown = ", ".join(k.__name__ if isinstance(k, type) else str(k) for k in operand_kinds)
        raise DTypeError(f"{ufunc_name}: not supported for dtypes ({shown})") from exc
    return tuple(np.dtype(d) for d in resolved)


@lru_cache(maxsize=1024)
def reduction_dtype(numpy_name: str, dtype: np.dtype, ddof: int = 0) -> np.dtype:
    """NumPy's result dtype of a reduction (sum of int8 is int64, mean of int is float64...)."""
    probe = np.zeros(2, dtype)
    fn = getattr(np, numpy_name)
    kwargs = {"ddof": ddof} if numpy_name in ("var", "std") else {}
    return np.dtype(fn(probe, **kwargs).dtype)


def scalar_kind(value: object) -> type:
    """The weak-scalar kind of a Python scalar: bool, int or float."""
    if isinstance(value, (bool, np.bool_)):
        return bool
    if isinstance(value, int):
        return int
    if isinstance(value, float):
        return float
    raise DTypeError(f"{type(value).__name__} {value!r} is not a supported scalar")


def fits(value: object, dtype: np.dtype) -> bool:
    """Whether a Python scalar is representable in ``dtype`` without overflow."""
    if dtype.kind in "iu" and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        return info.min <= value <= info.max
    return True
