"""Products: ``matmul`` (and ``a @ b``), ``dot`` and ``vecdot``, with NumPy's rules.

Operands of two or more dimensions become one ``matmul`` instruction: batch
dimensions broadcast (as views: stride 0, no copies), operand dtypes promote as
NumPy 2 does (``np.matmul``'s loops), and the product keeps that dtype (integer
products wrap around exactly as NumPy's do). A 1-D operand is promoted and its
axis removed from the result, as NumPy does; fusejit computes such a product
(matrix-vector, vector-matrix, inner product) as a sum of products, a reduction,
which reads the matrix once at memory speed instead of filling mostly empty
GEMM tiles. So is a float32 product (full precision) of a long K and a few outputs
(``SUM_OF_PRODUCTS_MAX_OUTPUTS``, ``SUM_OF_PRODUCTS_MIN_K``): its tiles run on the
FMA units, whose ``tl.dot`` over a 16x16 tile reads its operands back from shared memory
for every product. float16 products accumulate in float32 and round once, as NumPy's
float16 ``matmul`` does.

``precision`` (float32 products only) chooses how the GEMM multiplies:
``"ieee"`` (the default: float32 products and sums, NumPy's answer), ``"tf32"``
(tensor cores on TF32-rounded inputs: each product's relative error is about
2**-11, so a sum of K terms is off by about ``2**-11 * sqrt(K)`` times the size
of its terms) or ``"tf32x3"`` (three TF32 products per pair: about float32
accuracy). The environment variable ``FUSEJIT_MATMUL_PRECISION`` sets the
default for products recorded afterwards.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from ..dtypes import BOOL, resolve_ufunc
from ..errors import DTypeError, FusejitError, ShapeError
from ..ir.graph import make
from ..ir.ops import MATMUL_PRECISIONS
from .tensor import Tensor, asarray, binary, broadcast_node, broadcast_shapes, cast_node, const_node
from .tensor import normalize_axis as _normalize_axis

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

#: The environment variable holding the default ``precision`` of float32 products.
PRECISION_VARIABLE = "FUSEJIT_MATMUL_PRECISION"

#: A full-precision float32 product of at most this many outputs (batch included) and a K of
#: at least ``SUM_OF_PRODUCTS_MIN_K`` is computed as a sum of broadcast products (a split
#: reduction over K) instead of a GEMM. H100, us as GEMM / as a sum, cuBLAS beside
#: (bench/exp_s24_longk.py --compare, bench/results/h100-s24/call3): 1x16 of K = 2**22 701 /
#: 95 (94), 2x64 of K = 2**18 112 / 33 (86), 5x5 of K = 100,000 43 / 23 (32); from 256
#: outputs the GEMM wins (16x16 of K = 2**20 169 / 222, 8x256 of K = 2**16 81 / 122), and
#: at K = 2**16 16x16 ran level (24 / 24). From K = 2**16 the reduction splits over the GPU
#: (``cost.SPLIT_MIN_REDUCE``); under it a few outputs would run as 1-8 looped programs
#: where the GEMM splits K over 16-64: unmeasured, so left to the GEMM.
SUM_OF_PRODUCTS_MAX_OUTPUTS = 128
SUM_OF_PRODUCTS_MIN_K = 1 << 16


def _tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else asarray(x)


def _precision(precision: str | None) -> str:
    """The precision asked for, else ``FUSEJIT_MATMUL_PRECISION``, else ``ieee``; checked."""
    where = "matmul: precision"
    if precision is None:
        precision = os.environ.get(PRECISION_VARIABLE) or "ieee"
        where = f"{PRECISION_VARIABLE}"
    if precision not in MATMUL_PRECISIONS:
        raise FusejitError(f"{where}={precision!r} is not one of {', '.join(MATMUL_PRECISIONS)}")
    return precision


def _dtype(name: str, a: Tensor, b: Tensor) -> np.dtype:
    in_a, in_b, out = resolve_ufunc(name, (a.dtype, b.dtype))
    if not (in_a == in_b == out):  # pragma: no cover  (NumPy's product loops are homogeneous)
        raise DTypeError(f"{name}: unsupported operand dtypes {a.dtype} and {b.dtype}")
    return out


def _not_aligned(name: str, a: Tensor, b: Tensor) -> ShapeError:
    where_b = "first" if b.ndim == 1 else "second-to-last"
    return ShapeError(
        f"{name}: shapes {a.shape} and {b.shape} are not aligned: the last axis of the first "
        f"(size {a.shape[-1]}) must equal the {where_b} axis of the second "
        f"(size {b.shape[0 if b.ndim == 1 else -2]})")


def _sum_of_products(a: Tensor, b: Tensor, axis: int, dtype: np.dtype) -> Tensor:
    """``sum(a * b, axis)`` in NumPy's product arithmetic for ``dtype`` (a and b broadcast).

    float16 multiplies and adds in float32 and rounds once; integers wrap as NumPy's
    products do (a sum in the dtype itself is exact modulo 2**bits); bool is any(a and b).
    """
    from .reductions import any as any_
    from .reductions import sum as sum_
    if dtype == BOOL:
        return any_(binary("logical_and", a, b), axis)
    acc = F32 if dtype == F16 else dtype
    a, b = Tensor(cast_node(a._node, acc)), Tensor(cast_node(b._node, acc))
    total = sum_(binary("multiply", a, b), axis, dtype=acc)
    return Tensor(cast_node(total._node, dtype))


def _few_outputs_of_long_k(a: Tensor, b: Tensor, dtype: np.dtype, precision: str) -> bool:
    """Whether a product of operands of two or more dimensions is a full-precision float32
    one of few outputs and a long K (``SUM_OF_PRODUCTS_MAX_OUTPUTS``), computed as a sum of
    broadcast products; batch dimensions that do not broadcast are left to the GEMM's
    error."""
    if dtype != F32 or precision != "ieee" or a.shape[-1] < SUM_OF_PRODUCTS_MIN_K:
        return False
    try:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ShapeError:
        return False
    return math.prod(batch) * a.shape[-2] * b.shape[-1] <= SUM_OF_PRODUCTS_MAX_OUTPUTS


def _gemm(a: Tensor, b: Tensor, dtype: np.dtype, precision: str, name: str) -> Tensor:
    """The ``matmul`` instruction of operands of two or more dimensions (batch broadcast)."""
    try:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ShapeError:
        raise ShapeError(f"{name}: the batch dimensions {a.shape[:-2]} and {b.shape[:-2]} of "
                         f"shapes {a.shape} and {b.shape} cannot be broadcast together") from None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    if dtype == BOOL:
        # or of ands: counted in float16 with float32 sums (exact to 2**24, never back to 0)
        count = _gemm(Tensor(cast_node(a._node, F16)), Tensor(cast_node(b._node, F16)), F16,
                      "ieee", name)
        zero = const_node(0, F16, count.shape)
        return Tensor(make("ne", (count._node, zero), {}, BOOL, count.shape))
    an = broadcast_node(cast_node(a._node, dtype), batch + (m, k))
    bn = broadcast_node(cast_node(b._node, dtype), batch + (k, n))
    attrs = {"precision": precision} if dtype == F32 and precision != "ieee" else {}
    return Tensor(make("matmul", (an, bn), attrs, dtype, batch + (m, n)))


def matmul(x1: Any, x2: Any, precision: str | None = None) -> Tensor:
    """The matrix product ``x1 @ x2`` with NumPy's rules (``np.matmul``).

    Operands of two or more dimensions multiply their last two axes and broadcast the
    others (batch dimensions); a 1-D first operand acts as a row and a 1-D second
    operand as a column, and that axis is removed from the result. 0-d operands are
    refused (``ShapeError``, as NumPy). ``precision``: ``"ieee"``, ``"tf32"`` or
    ``"tf32x3"`` for float32 products (default ``FUSEJIT_MATMUL_PRECISION``, else
    ``"ieee"``); see the module docstring for the error of each.
    """
    a, b = _tensor(x1), _tensor(x2)
    chosen = _precision(precision)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least one dimension, got shapes "
                         f"{a.shape} and {b.shape} (use multiply for scalars)")
    if a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        raise _not_aligned("matmul", a, b)
    dtype = _dtype("matmul", a, b)
    if a.ndim >= 2 and b.ndim >= 2:
        if _few_outputs_of_long_k(a, b, dtype, chosen):
            from .views import expand_dims
            return _sum_of_products(expand_dims(a, -1), expand_dims(b, -3), -2, dtype)
        return _gemm(a, b, dtype, chosen, "matmul")
    if b.ndim == 1:  # [..., M, K] @ [K] (or [K] @ [K]): sums over the last axis
        try:
            broadcast_shapes(a.shape, b.shape)
        except ShapeError:  # pragma: no cover  (the last axes match, so they broadcast)
            raise _not_aligned("matmul", a, b) from None
        return _sum_of_products(a, b, -1, dtype)
    # [K] @ [..., K, N]: the vector as a column against each matrix, summed over K
    from .views import reshape
    column = reshape(a, a.shape[0], 1)
    return _sum_of_products(column, b, -2, dtype)


def dot(a: Any, b: Any) -> Tensor:
    """NumPy's ``dot``: the product of two 0-d, 1-D or 2-D operands, and its N-D rule.

    0-d operands multiply; 1-D with 1-D is the inner product; N-D with 1-D sums over
    the last axis of both; N-D with M-D (M >= 2) sums over the last axis of ``a``
    and the second-to-last of ``b``, giving ``a.shape[:-1] + b.shape[:-2] +
    b.shape[-1:]`` (``matmul`` broadcasts batch dimensions instead).
    """
    x, y = _tensor(a), _tensor(b)
    if x.ndim == 0 or y.ndim == 0:
        return binary("multiply", x, y)
    if x.ndim <= 2 and y.ndim <= 2 or y.ndim == 1 or x.ndim == 1:
        if x.shape[-1] != y.shape[0 if y.ndim == 1 else -2]:
            raise _not_aligned("dot", x, y)
        return matmul(x, y)
    if x.shape[-1] != y.shape[-2]:
        raise _not_aligned("dot", x, y)
    from .views import moveaxis, reshape
    k = x.shape[-1]
    rows = reshape(x, math.prod(x.shape[:-1]), k)
    moved = moveaxis(y, -2, 0)
    cols = reshape(moved, k, math.prod(moved.shape[1:]))
    out = matmul(rows, cols)
    return reshape(out, x.shape[:-1] + y.shape[:-2] + y.shape[-1:])


def vecdot(x1: Any, x2: Any, axis: int = -1) -> Tensor:
    """NumPy 2's ``vecdot``: ``sum(x1 * x2, axis)`` with the other axes broadcast.

    The product arithmetic is NumPy's: float16 in float32 rounded once, integers wrap.
    """
    a, b = _tensor(x1), _tensor(x2)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"vecdot: operands must have at least one dimension, got shapes "
                         f"{a.shape} and {b.shape}")
    ax_a, ax_b = _normalize_axis(axis, a.ndim), _normalize_axis(axis, b.ndim)
    if a.shape[ax_a] != b.shape[ax_b]:
        raise ShapeError(f"vecdot: shapes {a.shape} and {b.shape} differ along axis {axis} "
                         f"({a.shape[ax_a]} vs {b.shape[ax_b]})")
    from .views import moveaxis
    a, b = moveaxis(a, ax_a, -1), moveaxis(b, ax_b, -1)
    try:
        broadcast_shapes(a.shape, b.shape)
    except ShapeError:
        raise ShapeError(f"vecdot: shapes {_tensor(x1).shape} and {_tensor(x2).shape} cannot be "
                         f"broadcast together (outside axis {axis})") from None
    return _sum_of_products(a, b, -1, _dtype("vecdot", a, b))
