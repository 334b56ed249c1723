"""fusejit benchmark suite: every workload family at two or three sizes, fusejit beside its peers.

Run on the GPU machine (``bench/run_suite.sh`` wraps this with the wheel set-up)::

    python3 bench/suite.py --out DIR [--only REGEX] [--sizes S,L] [--quick]
                           [--impls fusejit,cupy,cupy.fuse,jax,torch] [--budget SECONDS]

Writes ``DIR/results.json``, ``DIR/results.md`` and ``DIR/results.png`` (the last only where
matplotlib imports), and one log per process under ``DIR/logs``.

What happens, each step in its own process (this one imports neither CuPy, torch nor jax):

1. ``prep``: measures the device copy rate with CuPy (a 1 GiB device-to-device copy, bytes
   read plus bytes written), draws every workload's inputs on the device from a fixed seed,
   and computes the float64 NumPy reference of input set 0 (threads over workloads), saved
   under a temporary data folder.
2. ``fusejit`` (before torch and jax are ever imported: their threads slow the host): per
   workload the cold first ``realize`` (compile included) and a warm one, the kernel count
   (``len(fj.plan(...).kernels)``), then the whole user path per call (build the lazy graph,
   find the cached plan, launch) and the cached plan's launches alone ("fusejit kernels").
3. ``cupy``, ``cupy.fuse``, ``jax`` and ``torch``: one process each, so a crash in one costs
   only its own column. torch.compile uses ``dynamic=False`` and a fresh dynamo cache per
   workload; jax.jit runs with float64 enabled and without preallocation.

Every implementation's result is checked against the NumPy reference (``||out - ref|| /
||ref||`` in float64, on the device) at a per-dtype tolerance, after the memory pool was
poisoned with NaN blocks of the outputs' sizes (CuPy and torch; jax's allocator cannot be
poisoned), so an unwritten element shows. Timing: warm-up, then rounds of back-to-back calls
between CUDA events (jax: wall clock until ``jax.block_until_ready`` of every result of the
round), the median round giving the time per call; inputs that fit in the L2 cache are
rotated among several sets. Bytes moved are the fewest possible: each input read once and
each output written once. A failure records its message and the suite goes on.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# -- what is measured ------------------------------------------------------------------------

#: every column of the tables, in order ("fusejit.jit" appears only where fusejit has ``jit``)
IMPLS = ("fusejit", "fusejit kernels", "fusejit.jit", "torch.compile", "jax.jit", "cupy", "cupy.fuse")
#: implementations that are not fusejit
PEERS = ("torch.compile", "jax.jit", "cupy", "cupy.fuse")
#: the compilers whose faster one the summary's geometric mean compares with
COMPILERS = ("torch.compile", "jax.jit")
#: worker processes in the order they run (prep first, fusejit before anything imports torch/jax)
WORKERS = ("prep", "fusejit", "cupy", "cupy.fuse", "jax", "torch")
#: share of the time budget each worker may use (what one leaves passes to those after it)
WORKER_WEIGHT = {"prep": 1.0, "fusejit": 4.0, "cupy": 1.2, "cupy.fuse": 0.6, "jax": 1.5, "torch": 4.5}
WORKER_ALIASES = {"torch.compile": "torch", "jax.jit": "jax", "fuse": "cupy.fuse"}
#: the L2 cache (60 MB on an H200, some of it not usable for data): workloads moving less than
#: twice this rotate among several input sets, so the cache does not serve their reads
L2_BYTES = 50e6
#: rotate sets until this many bytes are touched between two uses of one set
ROTATE_BYTES = 150e6
MAX_SETS = 16
#: errors after which a process's CUDA context is unusable: the worker restarts
STICKY = re.compile(r"illegal[ _]?(memory[ _]?)?(access|address|instruction)|unspecified launch failure|"
                    r"launch[ _]?failed|LaunchFailure|misaligned[ _]?address|hardware stack error|"
                    r"device-side assert|CUDA_ERROR_ASSERT", re.I)
RESTART_EXIT = 75
MAX_RESTARTS = 3
#: seconds past its deadline before a worker is killed (a hung compile); prep's own limit
GRACE_S = 60.0
PREP_HARD_S = 240.0
#: relative error ||out - ref|| / ||ref|| allowed, by the workload's dtype (float32 sums over a
#: million elements or more allow 5e-4: a float32 accumulator's rounding, in any order, not a bug)
TOLERANCE = {"float16": 5e-3, "float32": 1e-4, "float64": 1e-9}
EPS = 1e-5  # layer norm and batch norm


# -- the workload registry ---------------------------------------------------------------------

@dataclass(frozen=True)
class Arg:
    """One input: its shape, and how its values are drawn.

    ``normal`` is N(0, 1); ``offset`` is N(1, 1), used for sums so that the result is not a
    cancellation of large terms (the relative error of a float32 sum stays meaningful);
    ``square`` is the square of N(0, 1) (a second moment, as Adam's ``v``).
    """

    shape: tuple[int, ...]
    kind: str = "normal"


@dataclass
class Workload:
    """One benchmark program and its implementations.

    Functions take the array module first: ``fj(fj_module, *xs)``, ``ref(np, *xs)`` (inputs in
    float64), ``torch(torch_module, *xs)``, ``jax(jax_module, *xs)`` (use ``jax.numpy``),
    ``cupy(cupy_module, *xs)``; ``fuse(cupy_module, *xs)`` is the body given to
    ``cupy.fuse`` (elementwise ops and at most one reduction, no ``keepdims``), called on
    ``fuse_views(*xs)`` (views taken outside the fused kernel, e.g. a transpose). A peer
    left ``None`` cannot express the workload. Each returns one array or a tuple.
    """

    name: str
    family: str
    dtype: str
    #: size label -> dims passed to ``inputs``; the last label is the one ``--quick`` runs
    sizes: dict[str, tuple[int, ...]]
    #: dims small enough for the CPU test
    tiny: tuple[int, ...]
    inputs: Callable[..., list[Arg]]
    fj: Callable[..., Any]
    ref: Callable[..., Any]
    torch: Callable[..., Any] | None = None
    jax: Callable[..., Any] | None = None
    cupy: Callable[..., Any] | None = None
    fuse: Callable[..., Any] | None = None
    fuse_views: Callable[..., Sequence[Any]] | None = None
    note: str = ""
    #: the check's tolerance where the dtype's default is too tight (long float32 sums)
    tol: float | None = None

    @property
    def tolerance(self) -> float:
        """Largest ||out - ref|| / ||ref|| that passes."""
        return self.tol if self.tol is not None else TOLERANCE[self.dtype]

    def args(self, size: str) -> list[Arg]:
        """The inputs at ``size`` (a label of ``sizes``, or ``"tiny"``)."""
        dims = self.tiny if size == "tiny" else self.sizes[size]
        return self.inputs(*dims)

    def shape_text(self, size: str) -> str:
        """The first input's shape, e.g. ``16384x4096``."""
        return "x".join(str(d) for d in self.args(size)[0].shape)


def _rows(kind: str = "normal") -> Callable[..., list[Arg]]:
    return lambda *dims: [Arg(tuple(dims), kind)]


def _rows_affine(kind: str = "normal") -> Callable[..., list[Arg]]:
    """x of shape (r, c) and a weight and a bias of shape (c,)."""
    return lambda r, c: [Arg((r, c), kind), Arg((c,)), Arg((c,))]


# generic definitions: the same text serves NumPy, CuPy, jax.numpy and fusejit (NumPy's names)

def _gelu(xp: Any, x: Any) -> Any:
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))


def _sin_heavy(xp: Any, x: Any) -> Any:
    y = x
    for _ in range(6):
        y = xp.sin(y) * 1.5 + xp.cos(y) * 0.5
    return y


def _bias_relu_scale(xp: Any, x: Any, b: Any, s: Any) -> Any:
    return xp.maximum(x + b, 0.0) * s


def _complex_abs(xp: Any, a: Any) -> Any:
    re_, im = a[:, ::2], a[:, 1::2]
    return xp.sqrt(re_ * re_ + im * im)


def _np_sigmoid(xp: Any, x: Any) -> Any:
    return 1.0 / (1.0 + xp.exp(-x))


def _silu_pair(s: Any, x: Any) -> tuple[Any, Any]:
    """SiLU and its derivative from ``s = sigmoid(x)``: two outputs of one pointwise pass."""
    return x * s, s * (1.0 + x * (1.0 - s))


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _logsumexp(xp: Any, x: Any) -> Any:
    m = x.max(axis=-1, keepdims=True)
    return (xp.log(xp.exp(x - m).sum(axis=-1, keepdims=True)) + m)[..., 0]


def _layer_norm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / xp.sqrt(var + EPS) * w + b


def _batch_norm(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """Training-mode batch norm of (N, C): mean and centered variance over axis 0, normalize."""
    mu = x.mean(axis=0, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=0, keepdims=True)
    return d / xp.sqrt(var + EPS) * w + b


def _var(x: Any, axis: int) -> Any:
    return x.var(axis=axis)


def _std(x: Any, axis: int) -> Any:
    return x.std(axis=axis)


# torch spellings (dim=, keepdim=, correction=)

def _t_softmax(t: Any, x: Any) -> Any:
    return t.softmax(x, dim=-1)


def _t_batch_norm(t: Any, x: Any, w: Any, b: Any) -> Any:
    mu = x.mean(dim=0, keepdim=True)
    d = x - mu
    var = (d * d).mean(dim=0, keepdim=True)
    return d * t.rsqrt(var + EPS) * w + b


def _t_layer_norm(t: Any, x: Any, w: Any, b: Any) -> Any:
    return t.nn.functional.layer_norm(x, x.shape[-1:], w, b, EPS)


def _adam(xp: Any, p: Any, g: Any, m: Any, v: Any) -> tuple[Any, Any, Any]:
    """One Adam step at step 10 (bias corrections as Python floats): new p, m and v."""
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * (g * g)
    p2 = p - lr * (m2 / (1 - b1 ** 10)) / (xp.sqrt(v2 / (1 - b2 ** 10)) + eps)
    return p2, m2, v2


def _t_silu(t: Any, x: Any) -> Any:
    return _silu_pair(t.sigmoid(x), x)


# jax spellings (jax.nn for the composites)

def _j_layer_norm(jax: Any, x: Any, w: Any, b: Any) -> Any:
    return _layer_norm(jax.numpy, x, w, b)


def _sum(axis: Any) -> Callable[..., Any]:
    """``x.sum(axis)`` for fusejit, NumPy, CuPy and jax.numpy."""
    return lambda xp, x: x.sum(axis=axis)


def _t_sum(dim: Any) -> Callable[..., Any]:
    return (lambda t, x: x.sum()) if dim is None else (lambda t, x: x.sum(dim=dim))


def _j_sum(axis: Any) -> Callable[..., Any]:
    return lambda jax, x: jax.numpy.sum(x, axis=axis)


def _fuse_sum(axis: Any) -> Callable[..., Any]:
    return (lambda cp, x: cp.sum(x)) if axis is None else (lambda cp, x: cp.sum(x, axis=axis))


def _generic(fn: Callable[..., Any]) -> dict[str, Callable[..., Any]]:
    """The implementations of a definition written once against NumPy's names."""
    return dict(fj=fn, ref=fn, cupy=fn, jax=lambda jax, *xs: fn(jax.numpy, *xs))


def _sum_workload(name: str, family: str, dtype: str, axis: Any, sizes: dict[str, tuple[int, ...]],
                  tiny: tuple[int, ...], note: str = "", tol: float | None = None) -> Workload:
    dim = tuple(axis) if isinstance(axis, (tuple, list)) else axis
    return Workload(name, family, dtype, sizes, tiny, _rows("offset"),
                    fj=_sum(axis), ref=_sum(axis), cupy=_sum(axis), torch=_t_sum(dim), jax=_j_sum(axis),
                    fuse=_fuse_sum(axis), note=note, tol=tol)


def _softmax_workload(name: str, family: str, dtype: str, sizes: dict[str, tuple[int, ...]],
                      tiny: tuple[int, ...]) -> Workload:
    return Workload(name, family, dtype, sizes, tiny, _rows(),
                    fj=lambda fj, x: fj.softmax(x, axis=-1), ref=_softmax, cupy=_softmax,
                    torch=_t_softmax, jax=lambda jax, x: jax.nn.softmax(x, axis=-1))


def _build_registry() -> list[Workload]:
    w: list[Workload] = []
    # -- reductions --------------------------------------------------------------------------
    w.append(_sum_workload("sum_rows", "reduce-inner", "float32", -1,
                           {"S": (4096, 1024), "M": (262144, 128), "L": (16384, 4096)}, (8, 24),
                           "sum over the last axis; M is many short rows"))
    w.append(_sum_workload("sum_mid", "reduce-middle", "float32", 1,
                           {"S": (32, 512, 256), "L": (256, 1024, 256)}, (3, 10, 8)))
    w.append(_sum_workload("sum_cols", "reduce-leading", "float32", 0,
                           {"S": (4096, 1024), "M": (1048576, 32), "L": (65536, 1024)}, (40, 6),
                           "column sums; M is tall and thin", tol=5e-4))
    w.append(_sum_workload("sum_all", "reduce-full", "float32", None,
                           {"S": (1 << 22,), "L": (1 << 26,)}, (1000,), tol=5e-4))
    w.append(_sum_workload("sum_axes02", "reduce-multi", "float32", (0, 2),
                           {"S": (16, 1024, 256), "L": (64, 4096, 256)}, (3, 5, 7)))
    # a short inner kept run: each output's points are a few contiguous elements per reduced
    # point (channels-last images, a middle axis reduced before a short last one)
    w.append(_sum_workload("sum_nhwc_channels", "reduce-short-run", "float32", (0, 1, 2),
                           {"S": (32, 112, 112, 3), "L": (128, 224, 224, 3)}, (2, 5, 4, 3),
                           "per-channel sums of a channels-last image batch (C = 3)", tol=5e-4))
    w.append(Workload("min_mid_run3", "reduce-short-run", "float64",
                      {"S": (256, 8192, 3), "L": (512, 16384, 3)}, (3, 10, 3), _rows(),
                      torch=lambda t, x: x.amin(dim=1), fuse=lambda cp, x: cp.min(x, axis=1),
                      note="min over the middle axis, a kept last axis of 3",
                      **_generic(lambda xp, x: x.min(axis=1))))
    # -- wide rows (64K-256K columns) ------------------------------------------------------------
    w.append(_sum_workload("sum_wide", "wide-rows", "float32", -1,
                           {"S": (256, 65536), "L": (256, 262144)}, (2, 300)))
    w.append(_softmax_workload("softmax_wide", "wide-rows", "float32",
                               {"S": (64, 65536), "L": (256, 262144)}, (2, 300)))
    w.append(Workload("layer_norm_wide", "wide-rows", "float32",
                      {"S": (64, 65536), "L": (256, 262144)}, (2, 300),
                      _rows_affine(), fj=lambda fj, x, w_, b: fj.layer_norm(x, w_, b, eps=EPS),
                      ref=_layer_norm, cupy=_layer_norm, jax=_j_layer_norm, torch=_t_layer_norm))
    # -- float16 and float64 variants ----------------------------------------------------------
    w.append(_sum_workload("sum_rows_f16", "float16", "float16", -1,
                           {"S": (4096, 1024), "L": (16384, 8192)}, (8, 24)))
    w.append(_softmax_workload("softmax_f16", "float16", "float16",
                               {"S": (4096, 1024), "L": (32768, 4096)}, (8, 24)))
    w.append(_sum_workload("sum_rows_f64", "float64", "float64", -1,
                           {"S": (2048, 1024), "L": (8192, 4096)}, (8, 24)))
    w.append(Workload("gelu_f64", "float64", "float64", {"S": (1 << 21,), "L": (1 << 25,)}, (500,),
                      _rows(), torch=_gelu, fuse=_gelu, **_generic(_gelu)))
    # -- pointwise -------------------------------------------------------------------------------
    w.append(Workload("gelu", "pointwise", "float32", {"S": (1 << 22,), "L": (1 << 26,)}, (500,),
                      _rows(), torch=_gelu, fuse=_gelu, note="tanh-approximated GELU written out (9 ops)",
                      **_generic(_gelu)))
    w.append(Workload("bias_relu_scale", "pointwise-broadcast", "float32",
                      {"S": (2048, 2048), "L": (8192, 8192)}, (6, 10),
                      lambda r, c: [Arg((r, c)), Arg((c,)), Arg((r, 1))],
                      torch=lambda t, x, b, s: t.relu(x + b) * s, fuse=_bias_relu_scale,
                      note="max(x + b[None, :], 0) * s[:, None]", **_generic(_bias_relu_scale)))
    w.append(Workload("transpose_add", "pointwise-views", "float32",
                      {"S": (1024, 2048), "L": (4096, 8192)}, (6, 10),
                      lambda r, c: [Arg((r, c)), Arg((c, r))],
                      fj=lambda xp, x, y: x.T + y, ref=lambda xp, x, y: x.T + y,
                      cupy=lambda xp, x, y: x.T + y, jax=lambda jax, x, y: x.T + y,
                      torch=lambda t, x, y: x.T + y,
                      fuse=lambda cp, xt, y: xt + y, fuse_views=lambda x, y: (x.T, y)))
    w.append(Workload("complex_abs", "pointwise-views", "float32",
                      {"S": (2048, 2048), "L": (8192, 8192)}, (6, 10), _rows(),
                      torch=lambda t, a: t.sqrt(a[:, ::2] * a[:, ::2] + a[:, 1::2] * a[:, 1::2]),
                      fuse=lambda cp, re_, im: cp.sqrt(re_ * re_ + im * im),
                      fuse_views=lambda a: (a[:, ::2], a[:, 1::2]),
                      note="|re + i im| of interleaved pairs: two stride-2 views", **_generic(_complex_abs)))
    w.append(Workload("silu_fwd_bwd", "multi-output", "float32", {"S": (1 << 22,), "L": (1 << 25,)}, (500,),
                      _rows(), fj=lambda fj, x: _silu_pair(fj.sigmoid(x), x),
                      ref=lambda np_, x: _silu_pair(_np_sigmoid(np_, x), x),
                      cupy=lambda cp, x: _silu_pair(_np_sigmoid(cp, x), x),
                      jax=lambda jax, x: _silu_pair(jax.nn.sigmoid(x), x), torch=_t_silu,
                      fuse=lambda cp, x: _silu_pair(_np_sigmoid(cp, x), x),
                      note="x*sigmoid(x) and its derivative: 1 input, 2 outputs"))
    w.append(Workload("adam_step", "multi-output", "float32", {"S": (1 << 20,), "L": (1 << 24,)}, (500,),
                      lambda n: [Arg((n,)), Arg((n,)), Arg((n,)), Arg((n,), "square")],
                      torch=_adam, fuse=_adam, note="4 inputs, 3 outputs (p, m, v), scalars as Python floats",
                      **_generic(_adam)))
    w.append(Workload("sin_heavy", "compute-heavy", "float32", {"S": (1 << 22,), "L": (1 << 26,)}, (500,),
                      _rows(), torch=_sin_heavy, fuse=_sin_heavy, note="6 rounds of sin and cos per element",
                      **_generic(_sin_heavy)))
    # -- normalizations and statistics ---------------------------------------------------------
    w.append(_softmax_workload("softmax", "softmax", "float32",
                               {"S": (4096, 1024), "L": (16384, 4096)}, (8, 24)))
    w.append(Workload("layer_norm", "layer-norm", "float32", {"S": (4096, 1024), "L": (16384, 4096)}, (8, 24),
                      _rows_affine(), fj=lambda fj, x, w_, b: fj.layer_norm(x, w_, b, eps=EPS),
                      ref=_layer_norm, cupy=_layer_norm, jax=_j_layer_norm, torch=_t_layer_norm))
    w.append(Workload("batch_norm", "batch-norm", "float32", {"S": (16384, 256), "L": (262144, 256)}, (40, 6),
                      _rows_affine("offset"), fj=_batch_norm, ref=_batch_norm, cupy=_batch_norm,
                      jax=lambda jax, *xs: _batch_norm(jax.numpy, *xs), torch=_t_batch_norm,
                      note="mean and centered variance over axis 0, then normalize"))
    w.append(Workload("var_rows", "var-std", "float32", {"S": (4096, 1024), "L": (16384, 4096)}, (8, 24),
                      _rows("offset"), fj=lambda fj, x: _var(x, -1), ref=lambda np_, x: _var(x, -1),
                      cupy=lambda cp, x: _var(x, -1), jax=lambda jax, x: jax.numpy.var(x, axis=-1),
                      torch=lambda t, x: x.var(dim=-1, correction=0)))
    w.append(Workload("std_cols", "var-std", "float32", {"S": (4096, 1024), "L": (65536, 1024)}, (40, 6),
                      _rows("offset"), fj=lambda fj, x: _std(x, 0), ref=lambda np_, x: _std(x, 0),
                      cupy=lambda cp, x: _std(x, 0), jax=lambda jax, x: jax.numpy.std(x, axis=0),
                      torch=lambda t, x: x.std(dim=0, correction=0)))
    w.append(Workload("logsumexp", "logsumexp", "float32", {"S": (4096, 1024), "L": (16384, 4096)}, (8, 24),
                      _rows(), fj=lambda fj, x: fj.logsumexp(x, axis=-1), ref=_logsumexp, cupy=_logsumexp,
                      jax=lambda jax, x: jax.nn.logsumexp(x, axis=-1),
                      torch=lambda t, x: t.logsumexp(x, dim=-1)))
    return w


def _registry() -> list[Workload]:
    """The fixed workloads, or with ``FUSEJIT_SUITE_UNSEEN=SEED:COUNT`` (``--unseen``) the
    ones ``bench/unseen.py`` draws from that seed (every worker process draws the same)."""
    choice = os.environ.get("FUSEJIT_SUITE_UNSEEN")
    if not choice:
        return _build_registry()
    sys.path.insert(0, str(HERE))
    import unseen
    return unseen.draw(*unseen.parse(choice), Workload, Arg)


REGISTRY: list[Workload] = _registry()
BY_NAME: dict[str, Workload] = {w.name: w for w in REGISTRY}


def select(only: str | None = None, sizes: Sequence[str] | None = None,
           quick: bool = False) -> list[tuple[Workload, str]]:
    """The (workload, size) pairs to run, the largest size of every workload first.

    ``only``: a regular expression searched in ``name``, ``family`` and ``name:size``;
    ``sizes``: size labels to keep (``tiny``, the CPU test's size, only when named here);
    ``quick``: the largest size of each workload only.
    """
    pattern = re.compile(only) if only else None
    picked: list[tuple[int, int, Workload, str]] = []
    for wi, w in enumerate(REGISTRY):
        labels = list(w.sizes)
        if quick:
            labels = labels[-1:]
        if sizes and "tiny" in sizes:
            labels.append("tiny")
        for label in labels:
            if sizes and label not in sizes:
                continue
            if pattern and not any(pattern.search(s) for s in (w.name, w.family, f"{w.name}:{label}")):
                continue
            order = list(w.sizes)
            rank = 99 if label == "tiny" else 0 if label == order[-1] else 1 + order.index(label)
            picked.append((rank, wi, w, label))
    picked.sort(key=lambda p: (p[0], p[1]))
    return [(w, label) for _, _, w, label in picked]


# -- inputs, outputs, bytes ------------------------------------------------------------------

def seed_for(name: str, size: str, k: int) -> int:
    """The seed of input set ``k`` of a workload at a size (the same in every process)."""
    return zlib.crc32(f"{name}:{size}:{k}".encode()) & 0x7FFFFFFF


def make_inputs(xp: Any, w: Workload, size: str, k: int = 0) -> list[Any]:
    """Input set ``k``: with CuPy drawn on the device (``cupy.random.RandomState``), else NumPy."""
    seed = seed_for(w.name, size, k)
    gen_dtype = np.float64 if w.dtype == "float64" else np.float32
    if xp is np:
        rng = np.random.default_rng(seed)
        draw = lambda shape: rng.standard_normal(shape, dtype=gen_dtype)  # noqa: E731
    else:
        rs = xp.random.RandomState(seed)
        draw = lambda shape: rs.standard_normal(shape, dtype=gen_dtype)  # noqa: E731
    out = []
    for a in w.args(size):
        x = draw(a.shape)
        if a.kind == "offset":
            x += 1.0
        elif a.kind == "square":
            x *= x
        out.append(x.astype(w.dtype, copy=False))
    return out


def output_specs(w: Workload, size: str) -> list[tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each output, from the lazy fusejit program (nothing is computed)."""
    import fusejit as fj
    xs = [fj.full(a.shape, 1.0, w.dtype) for a in w.args(size)]
    outs = as_tuple(w.fj(fj, *xs))
    return [(tuple(int(d) for d in o.shape), str(o.dtype)) for o in outs]


def nbytes(shape: Sequence[int], dtype: str) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def n_sets(moved: int) -> int:
    """How many input sets to rotate among so that the L2 cache does not serve the reads."""
    if moved >= 2 * L2_BYTES:
        return 1
    return int(min(MAX_SETS, max(2, math.ceil(ROTATE_BYTES / max(moved, 1)))))


def combo_key(name: str, size: str) -> str:
    return f"{name}:{size}"


def plan_entry(w: Workload, size: str) -> dict[str, Any]:
    """What every worker needs to know of one (workload, size), JSON-ready."""
    args = w.args(size)
    outs = output_specs(w, size)
    in_b = sum(nbytes(a.shape, w.dtype) for a in args)
    out_b = sum(nbytes(s, d) for s, d in outs)
    return {"key": combo_key(w.name, size), "name": w.name, "size": size, "family": w.family,
            "dtype": w.dtype, "shape": w.shape_text(size),
            "inputs": [[list(a.shape), a.kind] for a in args],
            "outputs": [[list(s), d] for s, d in outs], "in_bytes": in_b, "out_bytes": out_b,
            "bytes": in_b + out_b, "sets": n_sets(in_b + out_b), "note": w.note}


# -- timing --------------------------------------------------------------------------------------

class EventClock:
    """Device time between two CUDA events on the current stream (CuPy's or torch's)."""

    keeps = False

    def __init__(self, new_event: Callable[[], Any], elapsed_ms: Callable[[Any, Any], float]) -> None:
        self.new_event = new_event
        self.elapsed_ms = elapsed_ms

    def start(self) -> Any:
        e = self.new_event()
        e.record()
        return e

    def stop(self, start: Any, results: list[Any]) -> float:
        e = self.new_event()
        e.record()
        e.synchronize()
        return self.elapsed_ms(start, e) / 1e3


class WallClock:
    """Host time until every result of the round is ready (jax: ``block_until_ready``)."""

    keeps = True

    def __init__(self, block: Callable[[Any], Any]) -> None:
        self.block = block

    def start(self) -> float:
        return time.perf_counter()

    def stop(self, start: float, results: list[Any]) -> float:
        self.block(results)
        return time.perf_counter() - start


@dataclass
class Timing:
    """Seconds per call: the median round, with the spread of the rounds."""

    median: float
    low: float
    high: float
    rounds: int
    calls: int
    sets: int

    def as_dict(self) -> dict[str, Any]:
        return {"us": self.median * 1e6, "us_min": self.low * 1e6, "us_max": self.high * 1e6,
                "rounds": self.rounds, "calls_per_round": self.calls, "sets": self.sets}


def measure(call: Callable[[int], Any], nsets: int, clock: Any, *, rounds: int = 15,
            target_s: float = 2e-3, max_calls: int = 2000, out_bytes: int = 0,
            keep_bytes: float = 4e9) -> Timing:
    """Time ``call(k)`` (k: the input set) in ``rounds`` rounds of back-to-back calls.

    After a warm-up over every set, the calls per round are chosen so that a round lasts
    about ``target_s``; the sets rotate across calls and rounds. A clock that keeps results
    (jax) holds at most ``keep_bytes`` of outputs per round.
    """
    count = nsets + 2
    t0 = clock.start()
    kept = []
    for i in range(count):
        r = call(i % nsets)
        if clock.keeps:
            kept.append(r)
    per = max(clock.stop(t0, kept) / count, 1e-7)
    del kept
    calls = int(min(max_calls, max(1, math.ceil(target_s / per))))
    if clock.keeps and out_bytes:
        calls = min(calls, max(1, int(keep_bytes // out_bytes)))
    times = []
    i = 0
    for _ in range(rounds):
        t0 = clock.start()
        kept = []
        for _ in range(calls):
            r = call(i % nsets)
            i += 1
            if clock.keeps:
                kept.append(r)
        times.append(clock.stop(t0, kept) / calls)
        del kept
    return Timing(float(np.median(times)), min(times), max(times), rounds, calls, nsets)


def cold_and_warm(call: Callable[[int], Any], finish: Callable[[Any], Any]) -> tuple[float, float]:
    """Seconds of the first call (compile included) and of the next one, each waited for."""
    finish(None)
    t = time.perf_counter()
    finish(call(0))
    cold = time.perf_counter() - t
    t = time.perf_counter()
    finish(call(0))
    return cold, time.perf_counter() - t


# -- the workers -----------------------------------------------------------------------------------

@dataclass
class Context:
    """What a worker process was told: the plan, the data folder, its part file, its deadline."""

    worker: str
    plan: dict[str, Any]
    data: Path
    part: Path
    deadline: float
    records: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def save(self, done: bool = False) -> None:
        write_json(self.part, {"worker": self.worker, "meta": self.meta, "records": self.records,
                               "done": done})


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON atomically (a crash leaves the previous file whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_finite(obj), indent=1, default=_json_default))
    os.replace(tmp, path)


def _finite(obj: Any) -> Any:
    """``obj`` with NaN and infinities as None (strict JSON has neither)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    return repr(o)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:300]


def ref_path(data: Path, key: str, j: int) -> Path:
    return data / "ref" / f"{re.sub(r'[^A-Za-z0-9_]', '_', key)}-{j}.npy"


def load_refs(data: Path, entry: dict[str, Any]) -> list[np.ndarray] | None:
    paths = [ref_path(data, entry["key"], j) for j in range(len(entry["outputs"]))]
    if not all(p.exists() for p in paths):
        return None
    return [np.load(p) for p in paths]


def fingerprint(cp: Any, xs: Sequence[Any]) -> list[float]:
    """A cheap digest of an input set: the float64 sum of each input's first 4096 elements."""
    return [float(cp.asnumpy(x.ravel()[:4096].astype(np.float64)).sum()) for x in xs]


def rel_error(cp: Any, outs: Sequence[Any], refs: Sequence[np.ndarray]) -> tuple[float, int]:
    """Largest ||out - ref|| / ||ref|| over the outputs (float64, on the device), and the
    number of non-finite output elements (the references have none)."""
    if len(outs) != len(refs):
        raise ValueError(f"{len(outs)} outputs, expected {len(refs)}")
    worst, bad = 0.0, 0
    for o, r in zip(outs, refs):
        o = cp.asarray(o)
        if tuple(o.shape) != tuple(r.shape):
            raise ValueError(f"output shape {tuple(o.shape)}, expected {tuple(r.shape)}")
        o64 = o.astype(np.float64)
        r64 = cp.asarray(r).astype(np.float64)
        bad += int(o64.size - int(cp.count_nonzero(cp.isfinite(o64))))
        d = o64 - r64
        num = float(cp.sqrt((d * d).sum()))
        den = float(cp.sqrt((r64 * r64).sum()))
        err = num / den if den > 0 else num
        worst = max(worst, err) if not math.isnan(err) else float("nan")
        if math.isnan(worst):
            break
    return worst, bad


def check(rec: dict[str, Any], cp: Any, outs: Sequence[Any] | None, refs: list[np.ndarray] | None,
          tol: float, poisoned: bool) -> None:
    """Fill ``rec`` with the check against the reference: rel_err, nonfinite, ok (within ``tol``)."""
    rec["poisoned"] = poisoned
    if refs is None:
        rec["check"] = "no reference"
        return
    if outs is None:
        return
    try:
        err, bad = rel_error(cp, outs, refs)
    except Exception as exc:  # noqa: BLE001  (a wrong shape or a failed copy: the result is wrong)
        rec.update(ok=False, check=_short(exc))
        return
    rec.update(rel_err=err, nonfinite=bad, tol=tol, ok=bool(bad == 0 and err <= tol))


def poison_cupy(cp: Any, specs: Sequence[Sequence[Any]]) -> bool:
    """Fill pool blocks of the outputs' sizes with NaN and free them: the next arrays of those
    sizes (the outputs) reuse them, so an element the kernel never writes stays NaN. The pool's
    other free blocks are released first, so that the poisoned ones are the only candidates."""
    cp.get_default_memory_pool().free_all_blocks()
    blocks = [cp.full(tuple(shape), np.nan, dtype=dtype) for shape, dtype in specs]
    cp.cuda.get_current_stream().synchronize()
    del blocks
    return True


def _init(ctx: Context, fn: Callable[[], Any]) -> None:
    """A first tiny compile and run, so that one-off start-up (the compiler's import, worker
    pools, the CUDA context) is not counted in the first workload's cold time."""
    t = time.perf_counter()
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        ctx.meta["init_error"] = _short(exc)
    ctx.meta["init_s"] = time.perf_counter() - t
    _log(ctx, f"start-up compile and run: {ctx.meta['init_s']:.1f} s")


def _log(ctx: Context, text: str) -> None:
    print(f"[{ctx.worker}] {text}", flush=True)


def _fmt_err(rec: dict[str, Any]) -> str:
    if "rel_err" in rec:
        flag = "ok" if rec.get("ok") else "WRONG"
        bad = f", {rec['nonfinite']} non-finite" if rec.get("nonfinite") else ""
        err = rec["rel_err"]
        return f"rel err {err if err is None else format(err, '.2e')} ({flag}{bad})"
    return rec.get("check", "")


Body = Callable[[Workload, dict[str, Any], "list[np.ndarray] | None"], list[dict[str, Any]]]


def run_combos(ctx: Context, impls: Sequence[str], body: Body,
               cleanup: Callable[[], Any] | None = None) -> None:
    """Run ``body`` on every combo of the plan until the deadline; one record per impl each.
    ``cleanup`` runs after each combo (once its arrays are garbage): give memory back.

    A restarted worker (its part file already holds records) skips the combos it has done and
    records the one it died in. After an error that leaves the CUDA context unusable (an
    illegal address, a launch failure), the worker exits with ``RESTART_EXIT`` so that the
    driver starts a fresh process for the combos left."""
    done = {r.get("key") for r in ctx.records}
    died_in = ctx.meta.pop("current", None)
    for entry in ctx.plan["combos"]:
        w = BY_NAME[entry["name"]]
        base = {"key": entry["key"], "name": entry["name"], "size": entry["size"]}
        if entry["key"] in done:
            continue
        if entry["key"] == died_in:
            for impl in impls:
                ctx.records.append({**base, "impl": impl, "error": "the process died during this workload"})
            ctx.save()
            continue
        if time.time() > ctx.deadline:
            for impl in impls:
                ctx.records.append({**base, "impl": impl, "error": "skipped: time budget spent"})
            ctx.save()
            continue
        try:
            refs = load_refs(ctx.data, entry)
        except Exception as exc:  # noqa: BLE001
            refs = None
            _log(ctx, f"{entry['key']}: cannot load the reference: {_short(exc)}")
        t = time.perf_counter()
        ctx.meta["current"] = entry["key"]
        ctx.save()
        try:
            recs = body(w, entry, refs)
        except Exception as exc:  # noqa: BLE001  (one workload's failure must not end the run)
            traceback.print_exc()
            recs = [{"impl": impl, "error": _short(exc)} for impl in impls]
        gc.collect()
        if cleanup is not None:
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001
                _log(ctx, f"cleanup failed: {_short(exc)}")
        for rec in recs:
            rec = {**base, **rec}
            ctx.records.append(rec)
            us = f"{rec['us']:9.1f} us" if "us" in rec else "        -   "
            extra = f"  cold {rec['cold_s']:.2f} s" if "cold_s" in rec else ""
            err = rec.get("error")
            _log(ctx, f"{entry['key']:24s} {rec['impl']:16s} {us}{extra}  "
                      f"{('ERROR ' + err) if err else _fmt_err(rec)}")
        _log(ctx, f"{entry['key']}: {time.perf_counter() - t:.1f} s")
        ctx.meta.pop("current", None)
        ctx.save()
        sticky = [r["error"] for r in recs if STICKY.search(str(r.get("error", "")))]
        if sticky:
            _log(ctx, f"the CUDA context is unusable after {sticky[0]!r}: exiting for a fresh process")
            raise SystemExit(RESTART_EXIT)


def _fingerprint_ok(ctx: Context, cp: Any, key: str, xs: Sequence[Any]) -> str | None:
    """None when input set 0 matches what prep drew, else a message."""
    path = ctx.data / "fingerprints.json"
    if not path.exists():
        return None
    known = json.loads(path.read_text()).get(key)
    if known is None:
        return None
    got = fingerprint(cp, xs)
    if len(got) != len(known) or any(abs(a - b) > 1e-9 * max(1.0, abs(b)) for a, b in zip(got, known)):
        return f"input set 0 differs from prep's ({got} vs {known})"
    return None


def _settings(ctx: Context) -> dict[str, Any]:
    s = ctx.plan["settings"]
    return {"rounds": s["rounds"], "target_s": s["target_s"]}


def _versions(*modules: str) -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in modules:
        try:
            mod = __import__(name)
            out[name] = str(getattr(mod, "__version__", "?"))
        except Exception as exc:  # noqa: BLE001
            out[name] = f"unavailable ({_short(exc)})"
    return out


def _device_meta(cp: Any) -> dict[str, Any]:
    try:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return {"gpu": name, "sm_count": int(props.get("multiProcessorCount", 0)),
                "l2_bytes": int(props.get("l2CacheSize", 0))}
    except Exception as exc:  # noqa: BLE001
        return {"gpu": f"unknown ({_short(exc)})"}


# prep: copy bandwidth, inputs' fingerprints, NumPy references

def copy_bandwidth(cp: Any, nbytes_: int = 1 << 30, rounds: int = 20) -> dict[str, float]:
    """GB/s of a device-to-device copy (bytes read + bytes written), by cudaMemcpy and by a
    copy kernel; the median of ``rounds`` timed copies after a warm-up."""
    n = nbytes_ // 4
    a = cp.arange(n, dtype=cp.float32)
    b = cp.empty_like(a)
    kernel = cp.ElementwiseKernel("T x", "T y", "y = x", "fusejit_suite_copy")
    ways = {"memcpy": lambda: b.data.copy_from_device_async(a.data, a.nbytes),
            "kernel": lambda: kernel(a, b)}
    out: dict[str, Any] = {"copy_bytes": 2 * a.nbytes}
    for name, fn in ways.items():
        try:
            for _ in range(3):
                fn()
            cp.cuda.get_current_stream().synchronize()
            times = []
            for _ in range(rounds):
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                times.append(cp.cuda.get_elapsed_time(e0, e1) / 1e3)
            b[-1000:] += 1  # the next way must write these again
            fn()
            if not bool((b[-1000:] == a[-1000:]).all()):
                raise RuntimeError("the copy did not copy")
            out[f"{name}_gbps"] = 2 * a.nbytes / float(np.median(times)) / 1e9
        except Exception as exc:  # noqa: BLE001
            out[f"{name}_error"] = _short(exc)
    rates = [out[k] for k in ("memcpy_gbps", "kernel_gbps") if k in out]
    if not rates:
        raise RuntimeError(f"no copy could be timed: {out}")
    out["copy_gbps"] = max(rates)
    return out


def reference(w: Workload, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The float64 NumPy reference of one input set, each output as a C-contiguous array."""
    outs = as_tuple(w.ref(np, *[np.asarray(x, dtype=np.float64) for x in xs]))
    return [np.array(o, dtype=np.float64, order="C") for o in outs]  # 0-d stays 0-d


def worker_prep(ctx: Context) -> None:
    import concurrent.futures as cf

    import cupy as cp
    ctx.meta.update(_versions("numpy", "cupy"), **_device_meta(cp))
    try:
        ctx.meta["copy"] = copy_bandwidth(cp, int(ctx.plan["settings"].get("copy_bytes", 1 << 30)))
        c = ctx.meta["copy"]
        ways = ", ".join(f"{k[:-5]} {c[k]:.0f}" for k in ("memcpy_gbps", "kernel_gbps") if k in c)
        _log(ctx, f"copy bandwidth: {c['copy_gbps']:.0f} GB/s ({ways})")
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        ctx.meta["copy_error"] = _short(exc)
    ctx.save()
    (ctx.data / "ref").mkdir(parents=True, exist_ok=True)
    prints: dict[str, list[float]] = {}
    threads = max(1, min(8, (os.cpu_count() or 2) - 1))

    def job(w: Workload, entry: dict[str, Any], host: list[np.ndarray]) -> str:
        t = time.perf_counter()
        outs = reference(w, host)
        for j, (o, (shape, _dt_name)) in enumerate(zip(outs, entry["outputs"])):
            if tuple(o.shape) != tuple(shape):
                raise ValueError(f"reference output {j} has shape {o.shape}, the fusejit program {shape}")
            keep = o if w.dtype == "float64" else o.astype(np.float32)
            np.save(ref_path(ctx.data, entry["key"], j), keep)
        return f"{time.perf_counter() - t:.1f} s"

    with cf.ThreadPoolExecutor(threads) as pool:
        futures = {}
        # no deadline here: every later process needs the references (the driver's hard limit
        # still ends a prep that hangs)
        for entry in ctx.plan["combos"]:
            w = BY_NAME[entry["name"]]
            try:
                xs = make_inputs(cp, w, entry["size"], 0)
                prints[entry["key"]] = fingerprint(cp, xs)
                write_json(ctx.data / "fingerprints.json", prints)
                host = [cp.asnumpy(x) for x in xs]
                del xs
                futures[pool.submit(job, w, entry, host)] = entry["key"]
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                ctx.records.append({"key": entry["key"], "impl": "reference", "error": _short(exc)})
            # keep at most ~2 jobs per thread queued: their host arrays take memory
            while sum(not f.done() for f in futures) > 2 * threads:
                time.sleep(0.05)
        for fut in cf.as_completed(futures):
            key = futures[fut]
            try:
                ctx.records.append({"key": key, "impl": "reference", "seconds": fut.result()})
            except Exception as exc:  # noqa: BLE001
                ctx.records.append({"key": key, "impl": "reference", "error": _short(exc)})
                _log(ctx, f"{key}: reference failed: {_short(exc)}")
    write_json(ctx.data / "fingerprints.json", prints)
    _log(ctx, f"references: {sum('error' not in r for r in ctx.records)} of {len(ctx.plan['combos'])}")


# fusejit

def _fj_arrays(outs: Sequence[Any]) -> list[Any]:
    """The device arrays of realized fusejit tensors (or of whatever ``fj.jit`` returned)."""
    arrays = []
    for t in outs:
        node = getattr(t, "_node", None)
        if node is not None:
            if not t.is_realized:
                t.realize()
            arrays.append(t._node.buffer)
        else:
            arrays.append(t)
    return arrays


def worker_fusejit(ctx: Context) -> None:
    import cupy as cp

    import fusejit as fj
    fj.set_backend(os.environ.get("FUSEJIT_BACKEND") or "cuda")
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import _plans, current
    ctx.meta.update(_versions("numpy", "cupy", "triton", "fusejit"), **_device_meta(cp),
                    backend=fj.get_backend(), has_jit=hasattr(fj, "jit"))
    stream_sync = cp.cuda.get_current_stream().synchronize
    clock = EventClock(cp.cuda.Event, cp.cuda.get_elapsed_time)
    opts = _settings(ctx)
    impls = ["fusejit", "fusejit kernels"] + (["fusejit.jit"] if hasattr(fj, "jit") else [])

    def finish(_: Any) -> None:
        stream_sync()

    def init() -> None:
        fj.asarray(cp.arange(4096, dtype=cp.float32)).sum().realize()
        finish(None)

    _init(ctx, init)

    def body(w: Workload, entry: dict[str, Any], refs: list[np.ndarray] | None) -> list[dict[str, Any]]:
        nsets = entry["sets"]
        sets = [make_inputs(cp, w, entry["size"], k) for k in range(nsets)]
        mismatch = _fingerprint_ok(ctx, cp, entry["key"], sets[0])
        leaves = [[fj.asarray(a) for a in s] for s in sets]

        def build(k: int) -> tuple[Any, ...]:
            return as_tuple(w.fj(fj, *leaves[k]))

        def realize(k: int) -> tuple[Any, ...]:
            outs = build(k)
            fj.realize(*outs)
            return outs

        rec: dict[str, Any] = {"impl": "fusejit"}
        kernels = None
        try:
            cold, warm = cold_and_warm(realize, finish)
            rec.update(cold_s=cold, warm_s=warm, compile_s=max(cold - warm, 0.0))
            try:  # after the cold call: fj.plan fills the plan cache, which would hide fusion's time
                kernels = rec["kernels"] = len(fj.plan(*build(0)).kernels)
                rec["compile_s_per_kernel"] = rec["compile_s"] / max(kernels, 1)
            except Exception as exc:  # noqa: BLE001
                rec["kernels_error"] = _short(exc)
            if mismatch:
                rec["input_mismatch"] = mismatch
            poisoned = poison_cupy(cp, entry["outputs"])
            check(rec, cp, _fj_arrays(realize(0)), refs, w.tolerance, poisoned)
            rec.update(measure(realize, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
        except Exception as exc:  # noqa: BLE001  (recorded; the kernels-only path may still run)
            traceback.print_exc()
            rec["error"] = _short(exc)
        recs = [rec]

        kr: dict[str, Any] = {"impl": "fusejit kernels", "kernels": kernels}
        try:
            backend = current()
            bound = []
            for k in range(nsets):
                nodes = [t._node for t in build(k)]
                key, found = structural_key(nodes)
                plan = _plans[key]
                bound.append((plan, [leaf.buffer for leaf in found]))

            def launch(k: int) -> list[Any]:
                plan, buffers = bound[k]
                return backend.execute(plan.program, buffers, plan)

            poisoned = poison_cupy(cp, entry["outputs"])
            check(kr, cp, launch(0), refs, w.tolerance, poisoned)
            kr.update(measure(launch, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            kr["error"] = _short(exc)
        recs.append(kr)

        if hasattr(fj, "jit"):
            jr: dict[str, Any] = {"impl": "fusejit.jit"}
            try:
                jitted = fj.jit(lambda *xs: w.fj(fj, *xs))

                def call(k: int) -> Any:
                    return jitted(*sets[k])

                cold, warm = cold_and_warm(call, finish)
                jr.update(cold_s=cold, warm_s=warm, compile_s=max(cold - warm, 0.0))
                poisoned = poison_cupy(cp, entry["outputs"])
                check(jr, cp, _fj_arrays(as_tuple(call(0))), refs, w.tolerance, poisoned)
                jr.update(measure(call, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
            except Exception as exc:  # noqa: BLE001
                traceback.print_exc()
                jr["error"] = _short(exc)
            recs.append(jr)
        return recs

    run_combos(ctx, impls, body, cp.get_default_memory_pool().free_all_blocks)
    ctx.meta["torch_imported"] = "torch" in sys.modules
    ctx.meta["jax_imported"] = "jax" in sys.modules


# CuPy and cupy.fuse

def worker_cupy(ctx: Context, fused: bool) -> None:
    import cupy as cp
    ctx.meta.update(_versions("numpy", "cupy"), **_device_meta(cp))
    impl = "cupy.fuse" if fused else "cupy"
    clock = EventClock(cp.cuda.Event, cp.cuda.get_elapsed_time)
    stream_sync = cp.cuda.get_current_stream().synchronize
    opts = _settings(ctx)

    def finish(_: Any) -> None:
        stream_sync()

    def init() -> None:
        x = cp.arange(4096, dtype=cp.float32)
        if fused:
            cp.fuse(kernel_name="suite_init")(lambda a: cp.sum(a * 2.0 + 1.0))(x)
        else:
            (x * 2.0 + 1.0).sum()
        finish(None)

    _init(ctx, init)

    def body(w: Workload, entry: dict[str, Any], refs: list[np.ndarray] | None) -> list[dict[str, Any]]:
        fn = w.fuse if fused else w.cupy
        if fn is None:
            return [{"impl": impl, "error": "not expressible"}]
        nsets = entry["sets"]
        sets = [make_inputs(cp, w, entry["size"], k) for k in range(nsets)]
        rec: dict[str, Any] = {"impl": impl}
        mismatch = _fingerprint_ok(ctx, cp, entry["key"], sets[0])
        if mismatch:
            rec["input_mismatch"] = mismatch
        if fused:
            body_fn = fn
            kernel = cp.fuse(kernel_name=f"suite_{w.name}")(lambda *xs: body_fn(cp, *xs))
            views = w.fuse_views or (lambda *xs: xs)
            args = [tuple(views(*s)) for s in sets]

            def call(k: int) -> Any:
                return kernel(*args[k])
        else:
            def call(k: int) -> Any:
                return fn(cp, *sets[k])

        cold, warm = cold_and_warm(call, finish)
        rec.update(cold_s=cold, warm_s=warm, compile_s=max(cold - warm, 0.0))
        poisoned = poison_cupy(cp, entry["outputs"])
        check(rec, cp, list(as_tuple(call(0))), refs, w.tolerance, poisoned)
        rec.update(measure(call, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
        return [rec]

    run_combos(ctx, [impl], body, cp.get_default_memory_pool().free_all_blocks)


# jax.jit

def worker_jax(ctx: Context) -> None:
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy as cp
    import jax
    jax.config.update("jax_enable_x64", True)
    ctx.meta.update(_versions("numpy", "cupy", "jax", "jaxlib"), **_device_meta(cp),
                    jax_devices=[str(d) for d in jax.devices()])
    clock = WallClock(jax.block_until_ready)
    opts = _settings(ctx)

    def finish(r: Any) -> None:
        if r is not None:
            jax.block_until_ready(r)

    _init(ctx, lambda: finish(jax.jit(lambda x: (x * 2.0 + 1.0).sum())(jax.numpy.ones(4096))))

    def body(w: Workload, entry: dict[str, Any], refs: list[np.ndarray] | None) -> list[dict[str, Any]]:
        if w.jax is None:
            return [{"impl": "jax.jit", "error": "not expressible"}]
        nsets = entry["sets"]
        rec: dict[str, Any] = {"impl": "jax.jit"}
        sets = []
        for k in range(nsets):
            xs = make_inputs(cp, w, entry["size"], k)
            if k == 0:
                mismatch = _fingerprint_ok(ctx, cp, entry["key"], xs)
                if mismatch:
                    rec["input_mismatch"] = mismatch
            sets.append([jax.device_put(cp.asnumpy(x)) for x in xs])
            del xs
        cp.get_default_memory_pool().free_all_blocks()
        jfn = w.jax
        jitted = jax.jit(lambda *xs: jfn(jax, *xs))

        def call(k: int) -> Any:
            return jitted(*sets[k])

        cold, warm = cold_and_warm(call, finish)
        rec.update(cold_s=cold, warm_s=warm, compile_s=max(cold - warm, 0.0))
        outs = [np.asarray(o) for o in as_tuple(call(0))]  # jax's own allocator: no poisoning
        check(rec, cp, [cp.asarray(o) for o in outs], refs, w.tolerance, False)
        del outs
        rec.update(measure(call, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
        return [rec]

    run_combos(ctx, ["jax.jit"], body, cp.get_default_memory_pool().free_all_blocks)


# torch.compile

def worker_torch(ctx: Context) -> None:
    import cupy as cp
    import torch
    import torch._dynamo
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))
    ctx.meta.update(_versions("numpy", "cupy", "torch", "triton"), **_device_meta(cp))
    clock = EventClock(lambda: torch.cuda.Event(enable_timing=True), lambda a, b: a.elapsed_time(b))
    opts = _settings(ctx)
    dtypes = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}

    def finish(_: Any) -> None:
        torch.cuda.synchronize()

    def init() -> None:
        torch.compile(lambda x: (x * 2.0 + 1.0).sum(), dynamic=False)(torch.ones(4096, device="cuda"))
        finish(None)
        torch._dynamo.reset()

    _init(ctx, init)

    def poison(specs: Sequence[Sequence[Any]]) -> bool:
        torch.cuda.empty_cache()  # the poisoned blocks are then the cached blocks of these sizes
        blocks = [torch.full(tuple(shape), float("nan"), dtype=dtypes[dtype], device="cuda")
                  for shape, dtype in specs]
        torch.cuda.synchronize()
        del blocks
        return True

    def to_cupy(t: Any) -> Any:
        try:
            return cp.from_dlpack(t)
        except Exception:  # noqa: BLE001  (an older DLPack path: go through the host)
            return cp.asarray(t.detach().cpu().numpy())

    def body(w: Workload, entry: dict[str, Any], refs: list[np.ndarray] | None) -> list[dict[str, Any]]:
        if w.torch is None:
            return [{"impl": "torch.compile", "error": "not expressible"}]
        nsets = entry["sets"]
        rec: dict[str, Any] = {"impl": "torch.compile"}
        cupy_sets = [make_inputs(cp, w, entry["size"], k) for k in range(nsets)]
        mismatch = _fingerprint_ok(ctx, cp, entry["key"], cupy_sets[0])
        if mismatch:
            rec["input_mismatch"] = mismatch
        cp.cuda.get_current_stream().synchronize()
        sets = [[torch.from_dlpack(x) for x in s] for s in cupy_sets]
        torch._dynamo.reset()
        tfn = w.torch

        def program(*xs: Any) -> Any:
            return tfn(torch, *xs)

        compiled = torch.compile(program, dynamic=False)

        def call(k: int) -> Any:
            return compiled(*sets[k])

        cold, warm = cold_and_warm(call, finish)
        rec.update(cold_s=cold, warm_s=warm, compile_s=max(cold - warm, 0.0))
        poisoned = poison(entry["outputs"])
        outs = [to_cupy(o) for o in as_tuple(call(0))]
        torch.cuda.synchronize()
        check(rec, cp, outs, refs, w.tolerance, poisoned)
        del outs
        rec.update(measure(call, nsets, clock, out_bytes=entry["out_bytes"], **opts).as_dict())
        return [rec]

    def cleanup() -> None:
        torch._dynamo.reset()
        torch.cuda.empty_cache()
        cp.get_default_memory_pool().free_all_blocks()

    run_combos(ctx, ["torch.compile"], body, cleanup)


def run_worker(name: str, data: Path, part: Path, deadline: float) -> int:
    plan = json.loads((data / "plan.json").read_text())
    ctx = Context(name, plan, data, part, deadline)
    if part.exists() and name != "prep":  # a restart: go on from the records of the last process
        try:
            old = json.loads(part.read_text())
            ctx.records = list(old.get("records", []))
            ctx.meta = dict(old.get("meta", {}))
            ctx.meta["restarts"] = ctx.meta.get("restarts", 0) + 1
        except (OSError, json.JSONDecodeError) as exc:
            print(f"[{name}] cannot read the earlier part file: {exc}", flush=True)
    ctx.meta.pop("error", None)
    ctx.meta["started"] = time.time()
    ctx.save()
    try:
        if name == "prep":
            worker_prep(ctx)
        elif name == "fusejit":
            worker_fusejit(ctx)
        elif name in ("cupy", "cupy.fuse"):
            worker_cupy(ctx, fused=name == "cupy.fuse")
        elif name == "jax":
            worker_jax(ctx)
        elif name == "torch":
            worker_torch(ctx)
        else:
            raise ValueError(f"unknown worker {name!r}")
    except SystemExit as exc:
        ctx.meta["seconds"] = time.time() - ctx.meta["started"]
        ctx.save()
        return int(exc.code or 0)
    except BaseException as exc:  # noqa: BLE001  (recorded, then the process exits non-zero)
        traceback.print_exc()
        ctx.meta["error"] = _short(exc)
        ctx.meta["seconds"] = time.time() - ctx.meta["started"]
        ctx.save()
        return 1
    ctx.meta["seconds"] = time.time() - ctx.meta["started"]
    ctx.save(done=True)
    return 0


# -- the driver ------------------------------------------------------------------------------

def _pump(stream: Any, log: Any, prefix: str) -> None:
    for line in iter(stream.readline, ""):
        log.write(line)
        log.flush()
        sys.stdout.write(line if line.startswith("[") else f"[{prefix}] {line}")
        sys.stdout.flush()


def spawn_worker(name: str, data: Path, part: Path, log_path: Path, deadline: float,
                 hard_timeout: float, env: dict[str, str]) -> dict[str, Any]:
    """Run one worker process (in its own session, so a hung compile pool dies with it)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--data", str(data),
           "--part", str(part), "--deadline", f"{deadline:.3f}"]
    t = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, start_new_session=True, cwd=str(REPO))
        pump = threading.Thread(target=_pump, args=(proc.stdout, log, name), daemon=True)
        pump.start()
        status: dict[str, Any] = {"worker": name}
        try:
            status["returncode"] = proc.wait(timeout=max(hard_timeout, 1.0))
        except subprocess.TimeoutExpired:
            status["killed"] = f"past its hard limit of {hard_timeout:.0f} s"
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this call created, nothing else
            except ProcessLookupError:
                pass
            status["returncode"] = proc.wait()
        pump.join(timeout=10)
    status["seconds"] = time.time() - t
    return status


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="fusejit benchmark suite (see the module docstring)")
    p.add_argument("--out", default="suite-out", help="folder for results.json/.md/.png and logs")
    p.add_argument("--only", default=None, help="regular expression on name, family or name:size")
    p.add_argument("--sizes", default=None, help="comma-separated size labels to run (S, M, L)")
    p.add_argument("--quick", action="store_true", help="the largest size of each workload, fewer rounds")
    p.add_argument("--impls", default=",".join(WORKERS[1:]),
                   help=f"comma-separated workers to run, of {', '.join(WORKERS[1:])}")
    p.add_argument("--budget", type=float, default=400.0,
                   help="seconds for all workers together (each gets a share; unused time passes on)")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per measurement")
    p.add_argument("--data", default=None, help="folder for inputs' references (default: a temporary one)")
    p.add_argument("--keep-data", action="store_true", help="keep the data folder")
    p.add_argument("--warm-caches", action="store_true",
                   help="keep the environment's compile caches (default: fresh ones, so cold times are cold)")
    p.add_argument("--list", action="store_true", help="print the selected workloads and exit")
    p.add_argument("--unseen", default=None, metavar="SEED:COUNT",
                   help="run COUNT workloads drawn at random from SEED (bench/unseen.py) instead of "
                        "the fixed ones")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--part", default=None, help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    impls = []
    for name in (s.strip() for s in args.impls.split(",") if s.strip()):
        name = WORKER_ALIASES.get(name, name)
        if name not in WORKERS[1:]:
            p.error(f"--impls: unknown {name!r} (choose from {', '.join(WORKERS[1:])})")
        impls.append(name)
    args.impl_list = impls
    args.size_list = [s.strip() for s in args.sizes.split(",")] if args.sizes else None
    if args.only:
        try:
            re.compile(args.only)
        except re.error as exc:
            p.error(f"--only: {exc}")
    return args


def worker_deadlines(workers: Sequence[str], start: float, budget: float) -> Callable[[str, float], float]:
    """A function (worker, now) -> its deadline: its weight's share of the budget still left."""
    end = start + budget

    def deadline(name: str, now: float) -> float:
        rest = [w for w in workers[workers.index(name):]]
        share = WORKER_WEIGHT[name] / sum(WORKER_WEIGHT[w] for w in rest)
        return now + max(end - now, 0.0) * share

    return deadline


def _git_commit() -> str:
    try:
        # (--dirty: a copy of a working tree whose HEAD is older than its files, as the GPU
        # machine's can be, says so instead of naming a commit it does not run)
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except Exception:  # noqa: BLE001
        return "?"


def driver(args: argparse.Namespace) -> int:
    combos = select(args.only, args.size_list, args.quick)
    if not combos:
        print("no workload matches", file=sys.stderr)
        return 2
    try:
        entries = [plan_entry(w, size) for w, size in combos]
    except ImportError as exc:
        print(f"fusejit cannot be imported ({exc}): on the GPU machine run ../shared/gpu/prepare "
              f"first and use bench/run_suite.sh", file=sys.stderr)
        return 2
    if args.list:
        for e in entries:
            print(f"{e['key']:24s} {e['family']:20s} {e['dtype']:8s} {e['shape']:>16s} "
                  f"{e['bytes'] / 1e6:8.1f} MB  sets {e['sets']}")
        return 0
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    data = Path(args.data) if args.data else Path(tempfile.mkdtemp(prefix="fusejit-suite-"))
    data.mkdir(parents=True, exist_ok=True)
    rounds = args.rounds or (7 if args.quick else 15)
    settings = {"rounds": rounds, "target_s": 1e-3 if args.quick else 2e-3, "quick": args.quick,
                "copy_bytes": 1 << 30,
                "only": args.only, "sizes": args.size_list, "budget_s": args.budget}
    write_json(data / "plan.json", {"combos": entries, "settings": settings})
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p])
    if not args.warm_caches:
        for var in ("FUSEJIT_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "CUPY_CACHE_DIR"):
            env[var] = str(data / "cache" / var.lower())
    workers = ["prep"] + [w for w in WORKERS[1:] if w in args.impl_list]
    start = time.time()
    deadline_of = worker_deadlines(workers, start, args.budget)
    statuses = []
    print(f"fusejit suite: {len(entries)} workload sizes, workers {', '.join(workers)}, "
          f"budget {args.budget:.0f} s, data in {data}", flush=True)
    for name in workers:
        deadline = deadline_of(name, time.time())
        print(f"--- {name}: until {deadline - start:.0f} s into the run", flush=True)
        for attempt in range(MAX_RESTARTS + 1):
            now = time.time()
            # prep does not skip (every later process needs its references): only a hang ends it
            hard = PREP_HARD_S if name == "prep" else deadline - now + GRACE_S
            log = out / "logs" / (f"{name}.log" if attempt == 0 else f"{name}.{attempt}.log")
            st = spawn_worker(name, data, out / "parts" / f"{name}.json", log, deadline, hard, env)
            st["attempt"] = attempt
            statuses.append(st)
            print(f"--- {name}: exit {st.get('returncode')} after {st['seconds']:.0f} s"
                  f"{' (' + st['killed'] + ')' if 'killed' in st else ''}", flush=True)
            # a crash or an unusable CUDA context: a fresh process goes on with what is left
            if name == "prep" or st.get("returncode") == 0 or "killed" in st or time.time() > deadline:
                break
            print(f"--- {name}: restarting for the workloads left", flush=True)
    parts = {}
    for name in workers:
        path = out / "parts" / f"{name}.json"
        if path.exists():
            try:
                parts[name] = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                parts[name] = {"worker": name, "meta": {"error": f"unreadable part: {exc}"}, "records": []}
    meta = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "commit": _git_commit(), "argv": sys.argv[1:], "settings": settings,
            "wall_s": time.time() - start, "workers": statuses}
    results = merge(entries, parts, meta)
    write_json(out / "results.json", results)
    md = markdown(results)
    (out / "results.md").write_text(md)
    png = plot(results, out / "results.png")
    print()
    print(compact(results))
    print(f"results.json and results.md written to {out}; {png}")
    if not args.keep_data and not args.data:
        shutil.rmtree(data, ignore_errors=True)
    return 0


# -- merging and writing ------------------------------------------------------------------------

def merge(entries: Sequence[dict[str, Any]], parts: dict[str, dict[str, Any]],
          meta: dict[str, Any]) -> dict[str, Any]:
    """One document: the workloads, each implementation's record per workload, the summary."""
    copy = None
    for name in ("prep", "fusejit"):
        c = parts.get(name, {}).get("meta", {}).get("copy")
        if c:
            copy = c
            break
    meta = {**meta, "copy": copy, "copy_gbps": copy["copy_gbps"] if copy else None,
            "worker_meta": {k: v.get("meta", {}) for k, v in parts.items()}}
    for k in ("gpu", "sm_count", "l2_bytes"):
        for part in parts.values():
            if k in part.get("meta", {}):
                meta[k] = part["meta"][k]
                break
    by_key: dict[str, dict[str, Any]] = {e["key"]: {} for e in entries}
    references: dict[str, Any] = {}
    for name, part in parts.items():
        for rec in part.get("records", []):
            key = rec.get("key")
            if key not in by_key:
                continue
            if name == "prep":
                references[key] = rec
                continue
            impl = rec.get("impl")
            by_key[key][impl] = derive(rec, next(e for e in entries if e["key"] == key), meta["copy_gbps"])
    workloads = []
    for e in entries:
        workloads.append({**e, "results": by_key[e["key"]], "reference": references.get(e["key"])})
    doc = {"meta": meta, "workloads": workloads}
    doc["summary"] = summary(doc)
    return doc


def derive(rec: dict[str, Any], entry: dict[str, Any], copy_gbps: float | None) -> dict[str, Any]:
    """A record with GB/s and the fraction of the copy rate added."""
    rec = dict(rec)
    if rec.get("us"):
        rec["gbps"] = entry["bytes"] / (rec["us"] * 1e-6) / 1e9
        if copy_gbps:
            rec["frac_copy"] = rec["gbps"] / copy_gbps
    return rec


def _valid(rec: dict[str, Any] | None) -> bool:
    """Timed, and not known to be wrong."""
    return bool(rec) and bool(rec.get("us")) and rec.get("ok", True) is not False and "error" not in rec


def best_peer(results: dict[str, dict[str, Any]],
              among: Sequence[str] = PEERS) -> tuple[str | None, float | None]:
    """The fastest valid implementation among ``among`` and its microseconds (None, None: none)."""
    best, best_us = None, None
    for impl in among:
        rec = results.get(impl)
        if _valid(rec) and (best_us is None or rec["us"] < best_us):
            best, best_us = impl, rec["us"]
    return best, best_us


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals))) if vals else None


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """Geometric means of peer time / fusejit time (>1: fusejit faster) over the workloads
    where both ran and were right."""
    out: dict[str, Any] = {}
    for fj_impl in ("fusejit", "fusejit kernels"):
        for label, among in (("compilers", COMPILERS), ("peers", PEERS)):
            ratios, names = [], []
            for wl in doc["workloads"]:
                res = wl["results"]
                _, peer_us = best_peer(res, among)
                if peer_us and _valid(res.get(fj_impl)):
                    ratios.append(peer_us / res[fj_impl]["us"])
                    names.append(wl["key"])
            out[f"{label}_over_{fj_impl.replace(' ', '_')}"] = {
                "geomean": geomean(ratios), "n": len(ratios), "workloads": names}
    wrong = [f"{wl['key']} {impl}" for wl in doc["workloads"] for impl, r in wl["results"].items()
             if r.get("ok") is False]
    grouped: dict[tuple[str, str], list[str]] = {}  # one line per (impl, message): the same
    for wl in doc["workloads"]:                     # failure on every workload reads once
        for impl, r in wl["results"].items():
            if r.get("error") and r["error"] != "not expressible":
                grouped.setdefault((impl, r["error"]), []).append(wl["key"])
    errors = [f"{impl}: {msg} ({', '.join(keys)})" for (impl, msg), keys in grouped.items()]
    unchecked = [f"{wl['key']} {impl}: {r['check']}" for wl in doc["workloads"]
                 for impl, r in wl["results"].items() if r.get("check") and r.get("ok") is None]
    out["wrong"] = wrong
    out["errors"] = errors
    out["unchecked"] = unchecked
    return out


def _columns(doc: dict[str, Any]) -> list[str]:
    present = {impl for wl in doc["workloads"] for impl in wl["results"]}
    return [i for i in IMPLS if i in present]


def _cell(rec: dict[str, Any] | None) -> str:
    if not rec:
        return ""
    if rec.get("error"):
        return "n/a" if rec["error"] == "not expressible" else (
            "skipped" if rec["error"].startswith("skipped") else "error")
    if not rec.get("us"):
        return ""
    text = f"{rec['us']:.1f} us, {rec['gbps']:.0f} GB/s"
    if "frac_copy" in rec:
        text += f", {100 * rec['frac_copy']:.0f}%"
    if rec.get("ok") is False:
        err = rec.get("rel_err")
        text = f"WRONG ({'nan' if err is None or not math.isfinite(err) else format(err, '.1e')}) " + text
    return text


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "" if x is None else format(x, spec)


def markdown(doc: dict[str, Any]) -> str:
    """results.md: the setting, the main table, compile times, the summary and the failures."""
    meta, s = doc["meta"], doc["summary"]
    cols = _columns(doc)
    lines = ["# fusejit benchmark suite", ""]
    copy = meta.get("copy") or {}
    lines.append(f"GPU: {meta.get('gpu', '?')}; commit {meta.get('commit', '?')}; {meta.get('date', '')}; "
                 f"suite wall time {meta.get('wall_s', 0):.0f} s.")
    if meta.get("copy_gbps"):
        ways = ", ".join(f"{label} {copy[k]:.0f}" for k, label in (("memcpy_gbps", "cudaMemcpy"),
                                                                      ("kernel_gbps", "copy kernel"))
                         if k in copy)
        lines.append(f"Copy rate (device-to-device, bytes read + written, same run): "
                     f"**{meta['copy_gbps']:.0f} GB/s** ({ways}).")
    lines += ["",
              "Each cell: time per call (median round of back-to-back calls), GB/s counting each input "
              "read once and each output written once, and that as % of the copy rate. "
              "`fusejit`: the whole user path per call (build the lazy graph, find the cached plan, "
              "launch); `fusejit kernels`: the cached plan's launches alone. "
              "Speedup: best peer's time / fusejit's time (>1: fusejit faster). "
              "n/a: the peer cannot express it; WRONG: failed the check against NumPy.", ""]
    head = ["workload", "size", "shape", "dtype", "MB"] + cols + ["best peer", "speedup", "kernels",
                                                                  "compile s", "rel err"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join([" --- "] * 4 + [" ---: "] * (len(head) - 4)) + "|")
    for wl in doc["workloads"]:
        res = wl["results"]
        peer, peer_us = best_peer(res)
        fjr = res.get("fusejit") or {}
        speed = peer_us / fjr["us"] if peer_us and _valid(fjr) else None
        row = [wl["name"], wl["size"], wl["shape"], wl["dtype"].replace("float", "f"),
               f"{wl['bytes'] / 1e6:.3g}"] + [_cell(res.get(c)) for c in cols]
        row += [peer or "", _fmt(speed), str(fjr.get("kernels", "")), _fmt(fjr.get("compile_s")),
                _fmt(fjr.get("rel_err"), ".1e")]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "## Summary", ""]
    both = "faster of torch.compile and jax.jit"
    for key, label in (("compilers_over_fusejit", f"{both} / fusejit"),
                       ("compilers_over_fusejit_kernels", f"{both} / fusejit kernels"),
                       ("peers_over_fusejit", "best of all peers / fusejit"),
                       ("peers_over_fusejit_kernels", "best of all peers / fusejit kernels")):
        g = s.get(key, {})
        lines.append(f"- geometric mean of time ratio, {label}: **{_fmt(g.get('geomean'), '.3f') or 'n/a'}** "
                     f"over {g.get('n', 0)} workload sizes (>1: fusejit faster)")
    cold_cols = [c for c in cols if any("compile_s" in wl["results"].get(c, {}) for wl in doc["workloads"])]
    lines += ["", "## Cold first call (seconds: first call minus a warm call, i.e. compile time)", ""]
    lines.append("| workload | size | " + " | ".join(cold_cols) + " |")
    lines.append("| --- | --- |" + " ---: |" * len(cold_cols))
    for wl in doc["workloads"]:
        lines.append(f"| {wl['name']} | {wl['size']} | "
                     + " | ".join(_fmt(wl["results"].get(c, {}).get("compile_s")) for c in cold_cols) + " |")
    if s.get("wrong"):
        lines += ["", "## Wrong results", ""] + [f"- {x}" for x in s["wrong"]]
    if s.get("errors"):
        lines += ["", "## Errors", ""] + [f"- {x}" for x in s["errors"]]
    if s.get("unchecked"):
        lines += ["", "## Not checked against NumPy", ""] + [f"- {x}" for x in s["unchecked"]]
    workers = meta.get("workers") or []
    if workers:
        lines += ["", "## Processes", ""]
        for st in workers:
            wm = meta.get("worker_meta", {}).get(st["worker"], {})
            vers = ", ".join(f"{k} {v}" for k, v in wm.items()
                             if k in ("cupy", "triton", "torch", "jax", "fusejit", "numpy"))
            again = f" (restart {st['attempt']})" if st.get("attempt") else ""
            lines.append(f"- {st['worker']}{again}: exit {st.get('returncode')}, {st.get('seconds', 0):.0f} s"
                         f"{'; ' + st['killed'] if st.get('killed') else ''}"
                         f"{'; ' + wm['error'] if wm.get('error') else ''}{'; ' + vers if vers else ''}")
        fm = meta.get("worker_meta", {}).get("fusejit", {})
        if "torch_imported" in fm:
            lines.append(f"- torch imported in the fusejit process: {fm['torch_imported']}; "
                         f"jax: {fm.get('jax_imported')}")
    return "\n".join(lines) + "\n"


def compact(doc: dict[str, Any]) -> str:
    """A short text table (GB/s per implementation) and the summary, for the end of the log."""
    cols = _columns(doc)
    short = {"fusejit kernels": "fj kern", "torch.compile": "torch", "jax.jit": "jax",
             "fusejit.jit": "fj.jit", "cupy.fuse": "fuse"}
    copy_gbps = doc["meta"].get("copy_gbps")
    lines = [f"GB/s ({doc['meta'].get('gpu', '?')}, copy rate "
             f"{_fmt(copy_gbps, '.0f') or '?'} GB/s); '!' wrong result, 'x' error, '-' n/a or skipped",
             f"{'workload':22s}" + "".join(f"{short.get(c, c):>9s}" for c in cols) + f"{'speedup':>9s}"]
    for wl in doc["workloads"]:
        res = wl["results"]
        cells = []
        for c in cols:
            r = res.get(c) or {}
            if r.get("gbps") and "error" not in r:
                cells.append(f"{r['gbps']:.0f}{'!' if r.get('ok') is False else ''}")
            elif r.get("error") and r["error"] != "not expressible" and not r["error"].startswith("skipped"):
                cells.append("x")
            else:
                cells.append("-")
        _, peer_us = best_peer(res)
        fjr = res.get("fusejit") or {}
        speed = _fmt(peer_us / fjr["us"]) if peer_us and _valid(fjr) else ""
        lines.append(f"{wl['key']:22s}" + "".join(f"{c:>9s}" for c in cells) + f"{speed:>9s}")
    s = doc["summary"]
    for key in ("compilers_over_fusejit", "compilers_over_fusejit_kernels", "peers_over_fusejit"):
        g = s.get(key, {})
        lines.append(f"geomean {key}: {_fmt(g.get('geomean'), '.3f') or 'n/a'} over {g.get('n', 0)}")
    lines.append(f"wrong: {len(s.get('wrong', []))}; errors: {len(s.get('errors', []))}; "
                 f"unchecked: {len(s.get('unchecked', []))} (results.md lists them)")
    return "\n".join(lines)


def plot(doc: dict[str, Any], path: Path) -> str:
    """results.png: fraction of the copy rate per workload, one bar per implementation.
    Returns a line saying what was written (or why nothing was)."""
    copy_gbps = doc["meta"].get("copy_gbps")
    if not copy_gbps:
        return "results.png skipped: no copy rate was measured"
    cols = _columns(doc)
    wls = doc["workloads"]
    if not wls or not cols:
        return "results.png skipped: nothing to plot"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:  # noqa: BLE001
        return f"results.png skipped: matplotlib unavailable ({_short(exc)})"
    per_row = 16
    nrows = math.ceil(len(wls) / per_row)
    fig, axes = plt.subplots(nrows, 1, figsize=(max(12, 1.1 * min(len(wls), per_row)), 4.2 * nrows),
                             squeeze=False)
    width = 0.8 / len(cols)
    colors = plt.get_cmap("tab10")
    for r in range(nrows):
        ax = axes[r][0]
        chunk = wls[r * per_row:(r + 1) * per_row]
        for ci, impl in enumerate(cols):
            xs, ys, hatches = [], [], []
            for i, wl in enumerate(chunk):
                rec = wl["results"].get(impl)
                if rec and rec.get("us") and "error" not in rec:
                    xs.append(i + (ci - (len(cols) - 1) / 2) * width)
                    ys.append(rec["gbps"] / copy_gbps)
                    hatches.append("//" if rec.get("ok") is False else "")
            bars = ax.bar(xs, ys, width, label=impl, color=colors(IMPLS.index(impl) % 10))
            for bar, h in zip(bars, hatches):
                bar.set_hatch(h)
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_xlim(-0.6, max(len(chunk), per_row if nrows > 1 else 0) - 0.4)
        ax.set_xticks(range(len(chunk)))
        ax.set_xticklabels([f"{wl['name']}\n{wl['size']} {wl['shape']}" for wl in chunk], rotation=45,
                           ha="right", fontsize=7)
        ax.set_ylabel("fraction of copy rate")
        top = max([1.15] + [rec["gbps"] / copy_gbps * 1.05 for wl in chunk for rec in wl["results"].values()
                            if rec.get("gbps")])
        ax.set_ylim(0, top)
        ax.grid(axis="y", alpha=0.3)
        if r == 0:
            ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
            ax.set_title(f"{doc['meta'].get('gpu', 'GPU')}: achieved GB/s / copy rate "
                         f"({copy_gbps:.0f} GB/s); hatched: wrong result")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"results.png written ({path})"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.unseen and not args.worker:
        global REGISTRY, BY_NAME
        os.environ["FUSEJIT_SUITE_UNSEEN"] = args.unseen  # (the workers inherit it)
        REGISTRY = _registry()
        BY_NAME = {w.name: w for w in REGISTRY}
    if args.worker:
        return run_worker(args.worker, Path(args.data), Path(args.part), args.deadline or float("inf"))
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
