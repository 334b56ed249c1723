"""Movement ops: reshape, transpose, broadcast, slicing. All are views (index math), never copies."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..errors import AxisError, FusejitError, ShapeError
from ..ir.graph import make, num_elements
from .tensor import (
    Tensor,
    _shape_arg,
    asarray,
    broadcast_node,
    broadcast_shapes,
    normalize_axes,
    normalize_axis,
    reshape_node,
)


class IndexingError(FusejitError, IndexError):
    """An index out of range or of a kind fusejit does not support."""


def _tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else asarray(x)


def reshape(x: Any, *shape: Any) -> Tensor:
    """``x`` with a new shape of the same size; one dimension may be -1."""
    x = _tensor(x)
    if len(shape) == 1 and not isinstance(shape[0], (int,)) and shape[0] is not None:
        shape = tuple(shape[0])
    try:
        dims = [operator.index(d) for d in shape]
    except TypeError:
        raise ShapeError(f"cannot reshape {x.shape}: the new shape must be integers, got "
                         f"{shape!r}") from None
    size = x.size
    if dims.count(-1) > 1:
        raise ShapeError(f"cannot reshape {x.shape}: only one dimension can be -1, got {tuple(dims)}")
    if -1 in dims:
        known = num_elements(tuple(d for d in dims if d != -1))
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape tensor of size {size} into shape {tuple(dims)}")
        dims[dims.index(-1)] = size // known
    if any(d < 0 for d in dims) or num_elements(tuple(dims)) != size:
        raise ShapeError(f"cannot reshape tensor of size {size} (shape {x.shape}) "
                         f"into shape {tuple(dims)}")
    return Tensor(reshape_node(x._node, tuple(dims)))


def transpose(x: Any, axes: Sequence[int] | None = None) -> Tensor:
    """``x`` with its axes permuted (reversed when ``axes`` is None)."""
    x = _tensor(x)
    nd = x.ndim
    perm = tuple(reversed(range(nd))) if axes is None else tuple(normalize_axis(a, nd) for a in axes)
    if sorted(perm) != list(range(nd)):
        raise AxisError(f"axes {tuple(axes or ())} are not a permutation of the {nd} axes of {x.shape}")
    if perm == tuple(range(nd)):
        return x
    node = x._node
    if node.op == "permute":  # compose permutations into one
        inner = node.attrs["perm"]
        perm = tuple(inner[p] for p in perm)
        node = node.srcs[0]
        if perm == tuple(range(nd)):
            return Tensor(node)
    shape = tuple(node.shape[p] for p in perm)
    return Tensor(make("permute", (node,), {"perm": perm}, node.dtype, shape))


def permute_dims(x: Any, axes: Sequence[int]) -> Tensor:
    """Array-API name of ``transpose`` with explicit axes."""
    return transpose(x, axes)


def swapaxes(x: Any, axis1: int, axis2: int) -> Tensor:
    """``x`` with two axes interchanged."""
    x = _tensor(x)
    perm = list(range(x.ndim))
    a, b = normalize_axis(axis1, x.ndim), normalize_axis(axis2, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def moveaxis(x: Any, source: int, destination: int) -> Tensor:
    """``x`` with one axis moved to a new position."""
    x = _tensor(x)
    src, dst = normalize_axis(source, x.ndim), normalize_axis(destination, x.ndim)
    perm = [a for a in range(x.ndim) if a != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def expand_dims(x: Any, axis: int | Sequence[int]) -> Tensor:
    """``x`` with new size-1 axes at the given positions of the result."""
    x = _tensor(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    nd = x.ndim + len(axes)
    new_axes = normalize_axes(axes, nd)
    dims = iter(x.shape)
    shape = tuple(1 if i in new_axes else next(dims) for i in range(nd))
    return Tensor(reshape_node(x._node, shape))


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Tensor:
    """``x`` without the given size-1 axes (all size-1 axes when None)."""
    x = _tensor(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(x.shape) if d == 1)
    else:
        axes = normalize_axes(axis, x.ndim)
        for a in axes:
            if x.shape[a] != 1:
                raise ShapeError(f"cannot squeeze axis {a} of shape {x.shape}: its size is "
                                 f"{x.shape[a]}, not 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return Tensor(reshape_node(x._node, shape))


def broadcast_to(x: Any, shape: int | Sequence[int]) -> Tensor:
    """``x`` broadcast to ``shape`` (a read-only view in NumPy; here a lazy expand)."""
    x = _tensor(x)
    shape = _shape_arg(shape)
    if len(shape) < x.ndim or broadcast_shapes(x.shape, shape) != shape:
        raise ShapeError(f"cannot broadcast shape {x.shape} to {shape}")
    return Tensor(broadcast_node(x._node, shape))


def ravel(x: Any) -> Tensor:
    """``x`` flattened to one dimension."""
    return reshape(x, -1)


def flip(x: Any, axis: int | Sequence[int] | None = None) -> Tensor:
    """``x`` with the order of elements reversed along the given axes (all when None)."""
    x = _tensor(x)
    axes = normalize_axes(axis, x.ndim)
    index = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))
    return getitem(x, index)


def slice_node(x: Tensor, starts: tuple[int, ...], stops: tuple[int, ...],
               steps: tuple[int, ...]) -> Tensor:
    """``x`` sliced per dimension by resolved bounds (as ``slice.indices`` gives them)."""
    shape = tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps))
    if all(st == 1 for st in steps) and shape == x.shape:
        return x
    return Tensor(make("slice", (x._node,), {"start": starts, "stop": stops, "step": steps},
                       x.dtype, shape))


def getitem(x: Tensor, index: Any) -> Tensor:
    """Basic indexing: integers, slices (any step), ``None`` and ``...``."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, (list, Tensor)) or hasattr(i, "__array__") and not isinstance(i, int)
           for i in index if i is not None and i is not Ellipsis and not isinstance(i, slice)):
        raise IndexingError("advanced (array) indexing is not supported; use basic slicing, "
                            "integers, None and ...")
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexingError("an index can only have a single ellipsis ('...')")
    if n_real > x.ndim:
        raise IndexingError(f"too many indices for a tensor of shape {x.shape}: "
                            f"{n_real} were indexed")
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (x.ndim - n_real))
        else:
            expanded.append(i)
    if Ellipsis not in index:
        expanded.extend([slice(None)] * (x.ndim - n_real))
    starts, stops, steps, out_shape = [], [], [], []
    dim = 0
    for item in expanded:
        if item is None:
            out_shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(item, slice):
            try:
                start, stop, step = item.indices(size)
            except (TypeError, ValueError) as exc:
                raise IndexingError(f"bad slice {item} for axis {dim}: {exc}") from exc
            if not len(range(start, stop, step)):
                start, stop, step = 0, 0, 1  # one spelling of "empty" (a start of -1 is not "last")
            starts.append(start)
            stops.append(stop)
            steps.append(step)
            out_shape.append(len(range(start, stop, step)))
        else:
            try:
                k = operator.index(item)
            except TypeError as exc:
                raise IndexingError(f"unsupported index {item!r} for axis {dim}") from exc
            if not -size <= k < size:
                raise IndexingError(f"index {k} is out of bounds for axis {dim} with size {size}")
            k %= size
            starts.append(k)
            stops.append(k + 1)
            steps.append(1)
        dim += 1
    sliced = slice_node(x, tuple(starts), tuple(stops), tuple(steps))
    return Tensor(reshape_node(sliced._node, tuple(out_shape)))
