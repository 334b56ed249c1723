"""The ``numpy`` backend: a reference evaluator of the Program, op by op.

It is the oracle of the tests, so it calls NumPy for each op and adds nothing
clever. Fused programs run region by region: each ``Kernel`` block is
evaluated on its parameters alone and only its results are kept, so region
semantics are checked without a GPU. Scalar params (values passed by value) are
0-d arrays of their dtype, which NumPy broadcasts against the other operands.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..ir.graph import num_elements
from ..ir.ops import OPS
from ..ir.program import Instr, Kernel, Program

_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a negative argument only, so neither branch overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _int_power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y``; for integers a negative exponent (NumPy raises; a kernel cannot) gives
    1 / x**|y| truncated: 1 for x = 1, +-1 for x = -1 by the exponent's parity, else 0, as
    the generated kernels compute it (``lowering.op_pow``)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind not in "iu" or y.dtype.kind not in "iu" or not (y < 0).any():
        return np.power(x, y)
    power = np.power(x, np.where(y < 0, 0, y).astype(y.dtype))
    inverse = np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 != 0, -1, 1), 0))
    return np.where(y < 0, inverse, power).astype(power.dtype)


_EXTRA = {
    "pow": _int_power,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "sigmoid": _sigmoid,
    # frompyfunc gives an object array, or a bare Python float for a 0-d input
    "erf": lambda x: np.asarray(_erf(x)).astype(x.dtype) if x.size else x.copy(),
    "reciprocal": lambda x: 1 / x,
}


def _slice(x: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    # start/stop are resolved indices (as from slice.indices): a negative one means "before
    # index 0", never "from the end", so an empty range must not reach Python's slice
    index = tuple(slice(a, None if (c < 0 and b < 0) else b, c) if len(range(a, b, c)) else slice(0, 0)
                  for a, b, c in zip(attrs["start"], attrs["stop"], attrs["step"]))
    return x[index]


def evaluate_instr(instr: Instr, args: list[np.ndarray]) -> np.ndarray:
    """NumPy's value of one instruction, of exactly the instruction's dtype and shape."""
    op, attrs, dtype, shape = instr.op, instr.attrs, instr.dtype, instr.shape
    info = OPS[op]
    if op == "const":
        return np.full(shape, attrs["value"], dtype)
    if op == "iota":
        n = shape[0]
        if dtype.kind == "f":
            return (attrs["start"] + np.arange(n, dtype=np.float64) * attrs["step"]).astype(dtype)
        # integers wrap modulo 2**64 and then to the dtype; uint64 starts may exceed int64
        wide = np.uint64
        start, step = wide(attrs["start"] % 2**64), wide(attrs["step"] % 2**64)
        return (start + np.arange(n, dtype=wide) * step).astype(dtype)
    if op == "cast":
        return args[0].astype(dtype)
    if op == "reshape":
        return args[0].reshape(shape)
    if op == "permute":
        return args[0].transpose(attrs["perm"])
    if op == "expand":
        return np.broadcast_to(args[0], shape)
    if op == "slice":
        return _slice(args[0], attrs)
    if op == "matmul":  # the reference: full precision whatever ``precision`` asks
        return np.matmul(args[0], args[1]).astype(dtype, copy=False).reshape(shape)
    if info.category == "reduce":
        axes, keep = tuple(attrs["axes"]), bool(attrs.get("keepdims", False))
        if op in ("argmax", "argmin"):
            out = getattr(np, op)(args[0], axis=axes[0], keepdims=keep)
        elif op == "sumexp":  # the reference: sum(exp(x - max(x))) in float64, rounded once
            x = args[0].astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                out = np.sum(np.exp(x - np.max(x, axis=axes, keepdims=True)), axis=axes,
                             keepdims=keep)
        elif op == "m2":  # the reference: two passes in float64, rounded once
            x = args[0].astype(np.float64)
            with np.errstate(invalid="ignore"):
                d = x - np.mean(x, axis=axes, keepdims=True)
                out = np.sum(d * d, axis=axes, keepdims=keep)
        else:
            out = getattr(np, info.numpy)(args[0], axis=axes, keepdims=keep)
        return np.asarray(out, dtype=dtype).reshape(shape)
    fn = _EXTRA.get(op) or getattr(np, info.numpy)
    out = np.asarray(fn(*args)).astype(dtype, copy=False)
    if out.shape != shape and out.size != num_elements(shape):
        # every operand a scalar parameter (they stand for their value at every element)
        return np.broadcast_to(out, shape).copy()
    return out.reshape(shape)


def evaluate_body(body: list[Instr | Kernel], env: dict[str, np.ndarray]) -> None:
    """Evaluate statements in order, adding each value to ``env``."""
    with np.errstate(all="ignore"):
        for stmt in body:
            if isinstance(stmt, Kernel):
                inner = {p.name: env[a] for p, a in zip(stmt.params, stmt.args)}
                evaluate_body(stmt.body, inner)
                for result, y in zip(stmt.results, stmt.yields):
                    env[result] = inner[y]
            else:
                env[stmt.name] = evaluate_instr(stmt, [env[a] for a in stmt.args])


class NumpyBackend:
    """Reference backend on host NumPy arrays."""

    name = "numpy"
    #: whether buffers live in device memory (host inputs are then copied there once)
    device_memory = False

    def to_device(self, array: Any) -> np.ndarray:
        """``array`` as a buffer this backend computes on (copied only when needed)."""
        if isinstance(array, np.ndarray):
            return array
        get = getattr(array, "get", None)  # a CuPy array
        return np.asarray(get() if get is not None else array)

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""
        return self.to_device(buffer)

    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[np.ndarray]:
        """Run the program op by op; returns one new array per program output."""
        env = {p.name: np.asarray(b, p.type.dtype) if p.scalar else self.to_device(b)
               for p, b in zip(program.inputs, buffers)}
        inputs = {id(v) for v in env.values()}
        evaluate_body(program.body, env)
        outs = []
        for name in program.outputs:
            value = env[name]
            # never hand out a view of an input or of a broadcast: results own their memory
            if value.base is not None or not value.flags.writeable or id(value) in inputs:
                value = value.copy()
            outs.append(value)
        return outs
