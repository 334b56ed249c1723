"""Workloads drawn at random for the suite: the families of issue 9 at shapes nobody tuned for.

``python3 bench/suite.py --unseen SEED:COUNT`` runs ``COUNT`` workloads drawn from ``SEED``
instead of the fixed registry (every worker process draws the same ones: the choice is
passed on in ``FUSEJIT_SUITE_UNSEEN``). The heuristics were tuned on the fixed suite; these
check that what they chose holds elsewhere: odd and prime extents, ranks 2 to 4, reductions
over any set of axes with or without ``keepdims``, rows from 50 to 300,000 wide, float16,
float32 and float64, and pointwise chains over broadcasts, transposes and strided views.

Each workload has one size, ``U`` (about 16 to 256 MB of inputs: whole extents land up to
a fifth under), and a ``tiny`` size of the same rank for the CPU test
(``tests/test_bench_suite.py`` checks every drawn program against NumPy on the ``numpy``
backend for a few seeds).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

EPS = 1e-5

#: the families and how often each is drawn
FAMILIES = (("reduce", 5), ("stats", 2), ("row-op", 3), ("layer-norm", 2), ("logsumexp", 1),
            ("normalize", 2), ("pointwise", 4))

#: dtypes and their weights (float16 reductions keep sums short enough for float16's range)
DTYPES = (("float32", 6), ("float16", 2), ("float64", 2))
#: per family, a dtype drawn -> the one it runs in: variance, logsumexp and the normalize in
#: float16 would be NumPy's float32-accumulated float16 (not a family the issue names); wide
#: rows and layer norm in float64 are not either
_DTYPE_FOR = {"stats": {"float16": "float64"}, "logsumexp": {"float16": "float32"},
              "normalize": {"float16": "float32"}, "row-op": {"float64": "float32"},
              "layer-norm": {"float64": "float32"}}

_ITEMSIZE = {"float16": 2, "float32": 4, "float64": 8}
#: extents that heuristics written for powers of two get wrong if they can
_ODD = (3, 5, 7, 12, 24, 48, 96, 100, 127, 257, 384, 769, 1000, 1023, 3001, 5000)


def _pick(rng: random.Random, weighted: tuple[tuple[str, int], ...]) -> str:
    names = [n for n, _ in weighted]
    return rng.choices(names, [w for _, w in weighted])[0]


def _extent(rng: random.Random, low: int, high: int) -> int:
    """An extent in [low, high]: log-uniform, odd a third of the time, a listed odd one a sixth."""
    if rng.random() < 1 / 6:
        fits = [e for e in _ODD if low <= e <= high]
        if fits:
            return rng.choice(fits)
    n = int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
    if rng.random() < 1 / 3:
        n |= 1
    return max(low, min(high, n))


def _shape(rng: random.Random, ndim: int, elements: int) -> tuple[int, ...]:
    """A shape of rank ``ndim`` with about ``elements`` elements (each extent at least 2)."""
    dims = []
    left = elements
    for i in range(ndim - 1):
        # share the log size out: the later extents take what is left
        room = max(2, int(left ** (1.0 / (ndim - i))) ** 2)
        d = _extent(rng, 2, max(2, min(room, left // 2, 1 << 20)))
        dims.append(d)
        left = max(2, left // d)
    dims.append(max(2, left))
    rng.shuffle(dims)
    return tuple(dims)


def _tiny(rng: random.Random, ndim: int) -> tuple[int, ...]:
    return tuple(rng.randint(2, 9) for _ in range(ndim))


def _axes(rng: random.Random, ndim: int) -> tuple[int, ...]:
    k = rng.choices(range(1, ndim + 1), [4] + [2] * (ndim - 2) + [1])[0]
    return tuple(sorted(rng.sample(range(ndim), k)))


def _one_axis(rng: random.Random, elements: int) -> tuple[tuple[int, ...], int]:
    """A rank-2 or rank-3 shape of about ``elements`` elements and one of its axes."""
    ndim = rng.randint(2, 3)
    shape = _shape(rng, ndim, elements)
    return shape, rng.randrange(ndim)


def _reduced(shape: tuple[int, ...], axes: tuple[int, ...]) -> int:
    return math.prod(shape[a] for a in axes)


# -- the families: each returns the Workload's fields -----------------------------------------

def _reduce(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    ndim = rng.randint(2, 4)
    shape = _shape(rng, ndim, elements)
    axes = _axes(rng, ndim)
    keep = rng.random() < 0.3
    ops = ["sum", "mean", "max", "min"]
    if dtype == "float16" and _reduced(shape, axes) > 8192:
        ops.remove("sum")  # (a float16 sum of N(1, 1) over more overflows or rounds to steps of 8)
    op = rng.choice(ops)
    torch_op = {"max": "amax", "min": "amin"}.get(op, op)

    def body(m: Any, x: Any) -> Any:
        return getattr(m, op)(x, axis=axes, keepdims=keep)

    tiny = _tiny(tiny_rng, ndim)
    return dict(name=f"{op}_{_axes_text(axes)}", family="reduce", dims=shape, tiny=tiny,
                kinds=("offset",), body=body,
                torch=lambda t, x: getattr(x, torch_op)(dim=axes, keepdim=keep),
                note=f"{op} over axes {axes}" + (", keepdims" if keep else ""),
                tol=5e-4 if dtype == "float32" and op in ("sum", "mean") else None)


def _stats(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    ndim = rng.randint(2, 3)
    shape = _shape(rng, ndim, elements)
    axes = _axes(rng, ndim)
    op = rng.choice(["var", "std"])

    def body(m: Any, x: Any) -> Any:
        return getattr(m, op)(x, axis=axes)

    return dict(name=f"{op}_{_axes_text(axes)}", family="stats", dims=shape,
                tiny=_tiny(tiny_rng, ndim), kinds=("offset",), body=body,
                torch=lambda t, x: getattr(x, op)(dim=axes, correction=0),
                note=f"{op} over axes {axes}")


def _row_op(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    width = _extent(rng, 50, 300_000)
    axis = -1 if rng.random() < 0.75 else 0
    op = rng.choice(["softmax", "log_softmax"])
    shape = (max(2, elements // width), width) if axis == -1 else (width, max(2, elements // width))

    def reference(m: Any, x: Any) -> Any:
        shifted = x - x.max(axis=axis, keepdims=True)
        e = m.exp(shifted)
        total = e.sum(axis=axis, keepdims=True)
        return e / total if op == "softmax" else shifted - m.log(total)

    return dict(name=f"{op}_axis{axis % 2}", family="row-op", dims=shape, tiny=_tiny(tiny_rng, 2),
                kinds=("normal",), body=reference,
                fj=lambda fj, x: getattr(fj, op)(x, axis=axis),
                torch=lambda t, x: getattr(t, op)(x, dim=axis),
                jax=lambda jax, x: getattr(jax.nn, op)(x, axis=axis),
                note=f"{op} over axis {axis}, rows of {width}")


def _layer_norm(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    width = _extent(rng, 64, 262_144)
    shape = (max(2, elements // width), width)

    def body(m: Any, x: Any, w: Any, b: Any) -> Any:
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        return d / m.sqrt((d * d).mean(axis=-1, keepdims=True) + EPS) * w + b

    return dict(name="layer_norm", family="layer-norm", dims=shape, tiny=_tiny(tiny_rng, 2),
                kinds=("normal", "normal", "normal"), affine=True, body=body,
                fj=lambda fj, x, w, b: fj.layer_norm(x, w, b, eps=EPS),
                torch=lambda t, x, w, b: t.nn.functional.layer_norm(x, x.shape[-1:], w, b, EPS),
                note=f"rows of {width}, weight and bias")


def _logsumexp(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    shape, axis = _one_axis(rng, elements)

    def reference(m: Any, x: Any) -> Any:
        mx = x.max(axis=axis, keepdims=True)
        return (m.log(m.exp(x - mx).sum(axis=axis, keepdims=True)) + mx).squeeze(axis)

    return dict(name=f"logsumexp_axis{axis}", family="logsumexp", dims=shape,
                tiny=_tiny(tiny_rng, len(shape)), kinds=("normal",), body=reference,
                fj=lambda fj, x: fj.logsumexp(x, axis=axis),
                torch=lambda t, x: t.logsumexp(x, dim=axis),
                jax=lambda jax, x: jax.nn.logsumexp(x, axis=axis), note=f"over axis {axis}")


def _normalize(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    shape, axis = _one_axis(rng, elements)

    def body(m: Any, x: Any) -> Any:
        mu = x.mean(axis=axis, keepdims=True)
        d = x - mu
        return d / m.sqrt((d * d).mean(axis=axis, keepdims=True) + EPS)

    def torch_body(t: Any, x: Any) -> Any:
        mu = x.mean(dim=axis, keepdim=True)
        d = x - mu
        return d * t.rsqrt((d * d).mean(dim=axis, keepdim=True) + EPS)

    return dict(name=f"normalize_axis{axis}", family="normalize", dims=shape,
                tiny=_tiny(tiny_rng, len(shape)), kinds=("offset",), body=body,
                torch=torch_body, note=f"(x - mean) / std over axis {axis} (batch norm's statistics)")


#: pointwise steps: (name, function of (module, y, b, s)); b broadcasts along rows, s along columns
_STEPS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("add_b", lambda m, y, b, s: y + b),
    ("mul_s", lambda m, y, b, s: y * s),
    ("tanh", lambda m, y, b, s: m.tanh(y)),
    ("sigmoid", lambda m, y, b, s: 1.0 / (1.0 + m.exp(-y))),
    ("leaky", lambda m, y, b, s: m.where(y > 0, y, 0.1 * y)),
    ("sin", lambda m, y, b, s: m.sin(y)),
    ("sqrt_abs", lambda m, y, b, s: m.sqrt(m.abs(y) + 1.0)),
    ("square_b", lambda m, y, b, s: y * y - b),
    ("affine", lambda m, y, b, s: y * 1.5 - 0.25),
)


def _pointwise(rng: random.Random, dtype: str, elements: int, tiny_rng: random.Random) -> dict[str, Any]:
    rows = _extent(rng, 2, max(2, elements // 2))
    cols = max(2, elements // rows)
    steps = [rng.choice(_STEPS) for _ in range(rng.randint(3, 8))]
    layout = rng.choice(["plain", "plain", "transposed", "strided"])
    names = "+".join(n for n, _ in steps)

    def chain(m: Any, x: Any, b: Any, s: Any) -> Any:
        if layout == "transposed":
            x = x.T
        elif layout == "strided":
            x = x[:, ::2]
        y = x
        for _, step in steps:
            y = step(m, y, b, s)
        return y

    # x is stored (cols, rows) when transposed and twice as wide when strided
    def inputs(r: int, c: int) -> list[tuple[tuple[int, ...], str]]:
        stored = (c, r) if layout == "transposed" else (r, 2 * c) if layout == "strided" else (r, c)
        return [(stored, "normal"), ((c,), "normal"), ((r, 1), "normal")]

    return dict(name=f"chain{len(steps)}_{layout}", family="pointwise", dims=(rows, cols),
                tiny=_tiny(tiny_rng, 2), inputs=inputs, body=chain, torch=chain,
                note=f"{layout} x of ({rows}, {cols}): {names}")


_DRAW = {"reduce": _reduce, "stats": _stats, "row-op": _row_op, "layer-norm": _layer_norm,
         "logsumexp": _logsumexp, "normalize": _normalize, "pointwise": _pointwise}


def _axes_text(axes: tuple[int, ...]) -> str:
    return "axes" + "".join(str(a) for a in axes)


def draw(seed: int, count: int, workload: Callable[..., Any], arg: Callable[..., Any]) -> list[Any]:
    """``count`` workloads drawn from ``seed``, as the suite's ``Workload`` (built with
    ``workload`` and ``arg``, the suite's classes, passed in so this module imports nothing of
    the suite's)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        family = _pick(rng, FAMILIES)
        dtype = _pick(rng, DTYPES)
        dtype = _DTYPE_FOR.get(family, {}).get(dtype, dtype)
        in_bytes = math.exp(rng.uniform(math.log(16e6), math.log(256e6)))
        tiny_rng = random.Random(seed * 1009 + i)
        spec = _DRAW[family](rng, dtype, int(in_bytes / _ITEMSIZE[dtype]), tiny_rng)
        out.append(_as_workload(spec, dtype, i, workload, arg))
    return out


def _as_workload(spec: dict[str, Any], dtype: str, i: int, workload: Callable[..., Any],
                 arg: Callable[..., Any]) -> Any:
    body = spec["body"]
    if "inputs" in spec:
        shapes = spec["inputs"]
        inputs = lambda *dims: [arg(shape, kind) for shape, kind in shapes(*dims)]  # noqa: E731
    elif spec.get("affine"):
        inputs = lambda r, c: [arg((r, c)), arg((c,)), arg((c,))]  # noqa: E731
    else:
        kind = spec["kinds"][0]
        inputs = lambda *dims: [arg(tuple(dims), kind)]  # noqa: E731
    fj = spec.get("fj", body)
    return workload(
        name=f"u{i:02d}_{spec['name']}_{dtype[5:] if dtype.startswith('float') else dtype}",
        family=spec["family"], dtype=dtype, sizes={"U": tuple(spec["dims"])}, tiny=spec["tiny"],
        inputs=inputs, fj=fj, ref=body, cupy=body, torch=spec["torch"],
        jax=spec.get("jax", lambda jax, *xs: body(jax.numpy, *xs)),
        note=spec["note"], tol=spec.get("tol"))


def parse(text: str) -> tuple[int, int]:
    """``SEED:COUNT`` as two ints (a clear error otherwise)."""
    try:
        seed, count = (int(p) for p in text.split(":"))
    except ValueError:
        raise SystemExit(f"--unseen takes SEED:COUNT (two integers), got {text!r}") from None
    if count < 1:
        raise SystemExit(f"--unseen: COUNT must be at least 1, got {count}")
    return seed, count
