"""No kernel of a large array runs on a handful of programs.

An audit over the plans (emitted for ``cuda``, never run): 13 shapes of 16M elements (long
rows, short rows, few rows, columns, runs of 3 and 4, three axes) x every set of axes x 11
reductions and normalizations (sum, max, argmax, var, share, centering, softmax, layer norm,
mean absolute deviation, any, a sibling pair) in float16, float32 and float64. Every kernel
that moves more than 16 MB launches at least 128 programs (about one per SM of an H100 or
H200): fewer leave most of the GPU idle, the way ``x / x.sum()`` ran as one program, and
``x.argmax()``, before ``rules.rule_broadcast_back_fills_gpu`` and split argmax. The same
for products whose few output tiles leave the GPU to K: Gram matrices of a few long vectors,
matrix-vector products, narrow batched products (once at most 16 K chunks: 16-64 programs).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import emit_kernel  # (emission is text: no Triton needed)

PROGRAMS = {
    "sum": lambda x, ax: x.sum(axis=ax),
    "max": lambda x, ax: x.max(axis=ax),
    "argmax": lambda x, ax: x.argmax(axis=ax) if ax is None or isinstance(ax, int) else
    x.min(axis=ax),
    "var": lambda x, ax: x.var(axis=ax),
    "share": lambda x, ax: x / x.sum(axis=ax, keepdims=True),
    "center": lambda x, ax: x - x.mean(axis=ax, keepdims=True),
    "softmax": lambda x, ax: fj.softmax(x, axis=ax) if isinstance(ax, int) else
    fj.exp(x - x.max(axis=ax, keepdims=True)),
    "norm": lambda x, ax: (x - x.mean(axis=ax, keepdims=True)) / fj.sqrt(
        x.var(axis=ax, keepdims=True) + 1e-5),
    "mad": lambda x, ax: fj.abs(x - x.mean(axis=ax, keepdims=True)).mean(axis=ax),
    "any": lambda x, ax: (x > 0).any(axis=ax),
    "siblings": lambda x, ax: (x * 2).sum(axis=ax) + x.max(axis=ax),
}
SHAPES = [(1 << 24,), (2, 1 << 23), (8, 1 << 21), (64, 1 << 18), (1 << 21, 8), (1 << 18, 64),
          (4, 4096, 1024), (1024, 4096, 4), (16, 1 << 20), (3, 1 << 22), (1 << 22, 3),
          (512, 8, 4096), (8, 512, 4096)]
MIN_BYTES = 16 << 20
MIN_PROGRAMS = 128


def _axes(ndim: int) -> list:
    return [None, *range(ndim), *(c for r in range(2, ndim)
                                  for c in itertools.combinations(range(ndim), r))]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_large_kernel_fills_the_gpu(shape, dtype):
    x = fj.asarray(np.zeros(shape, dtype))
    few = []
    with fj.using_backend("numpy"):  # (planned and emitted only)
        for (name, fn), axes in itertools.product(PROGRAMS.items(), _axes(len(shape))):
            plan = fj.plan(fn(x, axes))
            for k in plan.program.kernels:
                moved = sum(p.type.nbytes for p in k.params if not p.scalar) + \
                    sum(t.nbytes for t in k.result_types)
                if moved <= MIN_BYTES:
                    continue
                programs = max(math.prod(launch.grid)
                               for launch in emit_kernel(k, None, "cuda").launches)
                if programs < MIN_PROGRAMS:
                    few.append(f"{name} over axes {axes}: @{k.name} ({k.kind}) moves "
                               f"{moved >> 20} MB with {programs} programs")
    assert not few, "\n".join(few)


# (batch, M, N, K): one to a few hundred output tiles, K long
GEMMS = [(1, 16, 16, 1 << 20), (1, 2, 64, 1 << 18), (1, 64, 64, 1 << 18), (1, 128, 128, 1 << 16),
         (1, 8, 256, 1 << 16), (1, 1000, 16, 1 << 16), (8, 16, 16, 1 << 17), (4, 32, 32, 1 << 16),
         (1, 1, 16, 1 << 22), (1, 16, 1, 1 << 22), (1, 256, 256, 1 << 16), (1, 4096, 16, 4096)]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int32])
def test_every_large_product_fills_the_gpu(dtype):
    few = []
    with fj.using_backend("numpy"):
        for batch, m, n, k in GEMMS:
            lead = (batch,) if batch > 1 else ()
            a = fj.asarray(np.zeros((*lead, m, k), dtype))
            b = fj.asarray(np.zeros((*lead, k, n), dtype))
            for k_ in fj.plan(a @ b).program.kernels:
                moved = sum(p.type.nbytes for p in k_.params) + sum(t.nbytes for t in k_.result_types)
                programs = max(math.prod(launch.grid)
                               for launch in emit_kernel(k_, None, "cuda").launches)
                if moved > MIN_BYTES and programs < MIN_PROGRAMS:
                    few.append(f"{batch}x{m}x{n}x{k}: @{k_.name} ({k_.kind}) moves {moved >> 20} MB "
                               f"with {programs} programs")
    assert not few, "\n".join(few)
