"""Experiment (sixteenth session): why do reductions over a short inner kept run reach only
about 80% of the copy rate?

An outer reduction that keeps a short contiguous run of points (``domain.short_inner_kept``)
is emitted as a split reduction in one launch over tiles of ``[run padded to 4, reduced
points]``: per-channel sums of a channels-last image batch, ``x.sum(axis=(0, 1, 2))`` of
float32 (128, 224, 224, 3), ran at 81% of the copy rate on an H100, and ``x.min(axis=1)`` of
float64 (512, 16384, 3) at 78%. This launches the emitted kernel as it is and variants of it
(each with the emitted kernel's arguments and a grid of (outer kept point, chunk); each
checked against a float64 reference: relative 1e-5 for the sum, exact for the min; each
leaves its counters zero, which is checked too):

* ``emitted`` (and ``emitted w4``: 4 warps): as fusejit emits it. The sum's tile addresses
  each element through three div/mods of the flat reduced index (``i = cols // 50176`` ...),
  though the reduced axes are contiguous (the emitter merges them itself since the twentieth
  session, ``offset_terms``: H100, merged 82.3% against 82.8% as emitted, no gain);
* ``merged``: the sum's index lines replaced by ``off = cols * 3 + run`` (the min's kernel
  is emitted so already: skipped there);
* ``min no NaN`` (the min only): the emitted kernel with ``tl.minimum`` not propagating NaN
  (wrong for NaN inputs: a measure of what propagation costs, not a candidate);
* ``run_fastest``: hand-written, the tile transposed to ``[reduced points, run padded to 4]``
  (the run along the fastest dimension: a warp's lanes read neighbouring runs, one stretch
  of memory), index ``cols * 3 + run``;
* ``flat``: hand-written, tiles of ``BLOCK`` contiguous elements of memory (the run is the
  innermost axis of one contiguous block per outer kept point), channel ``offset % 3``,
  three accumulators ``acc_c = comb(acc_c, where(channel == c, v, identity))``: loads of 16
  bytes;
* ``flat_fixed``: hand-written, three loads of ``BLOCK`` contiguous elements per step
  (steps of ``3 * BLOCK``, chunks that start on a multiple of 3): each accumulator lane
  always meets the same channel, so the loop is loads and adds alone and the channels are
  told apart once, after it (``flat_fixed no NaN`` for the min, as above);
* each hand-written family also with the other number of warps, half and twice its block,
  half and twice its chunk (chunks are rounded up to a multiple of the block).

The hand-written kernels write one partial per program per channel (``part[chunk, row,
channel]``) and combine them as the emitted one does, in the same launch: the last program
of each outer kept point (an atomic count) combines its chunks' partials and sets its
counter back to zero. Every variant is compiled first, in parallel processes (Triton as a
compiler only, ``fusejit.runtime.compile``), then launched through the ``cuda`` backend
(CuPy, no torch) and timed by CUDA events (median of rounds); each line gives microseconds,
GB/s (input bytes read plus output bytes written; the partials, a few KB, are not counted)
and the share of the copy rate measured in the same run (a CuPy copy of 1 GiB, bytes read
plus written, as ``bench/suite.py``'s ``copy_bandwidth``). The fusejit plan of each
expression is timed beside (``plan``: its launches through ``backend.execute``;
``realize``: the expression built and realized each call, the default path).

Run on the GPU machine: ``python3 bench/exp_s16_shortrun.py [--json FILE] [--dry]``;
``--dry`` checks it on the CPU (NumPy for CuPy, Triton's interpreter, shapes cut to
(2, 16, 16, 3) and (2, 512, 3) with the emitted kernel forced to the same split form and
small tiles, one wall-clock run each, every variant's values checked, the default
configuration of each variant compiled for sm_90; ``tests/test_bench_experiments.py`` runs
it).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import math
import multiprocessing
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from exp_s7b import backend_and_timer  # noqa: E402

#: name -> (op, reduced axes, dtype, GPU shape, dry shape); the kept run (3) is the last axis
WORKLOADS = {
    "sum nhwc f32": ("sum", (0, 1, 2), "float32", (128, 224, 224, 3), (2, 16, 16, 3)),
    "min axis1 f64": ("min", (1,), "float64", (512, 16384, 3), (2, 512, 3)),
}
#: the dry run's tiles for the emitted kernel (block_m, block_n, warps, split): the GPU's
#: structure (one padded run across the tile, several chunks, a partial last chunk), small
DRY_TILES = (4, 64, 4, 3)

_HEADER = '''\
# fusejit bench/exp_s16_shortrun.py: hand-written variant {name}
import triton
import triton.language as tl

INF = tl.constexpr(float("inf"))


@triton.jit
def _comb(a, b):
    return {comb}

'''

_FINAL = '''

@triton.jit
def {name}_final(pid, part, out0):
    parts = tl.arange(0, {p2})[:, None]  # chunk
    run = tl.arange(0, {rp})[None, :]  # channel (the kept run, padded)
    mask = (parts < {s}) & (run < {r})
    v = tl.load(part + (parts * {m} + pid) * {r} + run, mask=mask, other={init},
                cache_modifier=".cg")
    res = tl.reduce(v, 0, _comb)
    r1 = tl.arange(0, {rp})
    tl.store(out0 + pid * {r} + r1, res, mask=r1 < {r})
'''

_COUNT = '''\
    tl.store(part + (chunk * {m} + pid) * {r} + r1, p, mask=r1 < {r})
    tl.debug_barrier()  # every thread's partials are stored before the count
    done = tl.atomic_add(counters + pid, 1, sem="acq_rel")
    if done == {s} - 1:  # the last chunk of this outer kept point: combine, reset
        {name}_final(pid, part, out0)
        tl.store(counters + pid, 0)
'''


@dataclasses.dataclass(frozen=True)
class Problem:
    """A workload as ``M`` outer kept points x ``N`` reduced points x a run of ``R`` channels,
    contiguous (``ROW = N * R`` elements per outer kept point)."""

    op: str
    dtype: str
    m: int
    n: int
    r: int

    @property
    def row(self) -> int:
        return self.n * self.r

    @property
    def rp(self) -> int:
        return 1 << (self.r - 1).bit_length()

    @property
    def init(self) -> str:
        return "0" if self.op == "sum" else "INF"

    @property
    def tl_dtype(self) -> str:
        return {"float32": "tl.float32", "float64": "tl.float64"}[self.dtype]

    @property
    def sig(self) -> str:
        return {"float32": "*fp32", "float64": "*fp64"}[self.dtype]


def _comb(p: Problem, nan: bool = True) -> str:
    if p.op == "sum":
        return "a + b"
    return "tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)" if nan else "tl.minimum(a, b)"


def _splits(p: Problem, chunk: int) -> tuple[int, int]:
    """(partials per outer kept point, next power of two of it)."""
    s = -(-p.n // chunk)
    return s, 1 << (s - 1).bit_length()


def run_fastest_source(p: Problem, name: str, bn: int, chunk: int, nan: bool = True) -> str:
    """Tiles of ``[bn reduced points, run padded]``: the run along the fastest dimension."""
    s, p2 = _splits(p, chunk)
    f = dict(name=name, comb=_comb(p, nan), p2=p2, rp=p.rp, s=s, r=p.r, m=p.m, init=p.init)
    body = f'''
@triton.jit
def {name}(p_in0, part, counters, out0):
    pid = tl.program_id(0)  # outer kept point
    chunk = tl.program_id(1)  # chunk of {chunk} reduced points, of {s}
    run = tl.arange(0, {p.rp})[None, :]
    run_mask = run < {p.r}
    acc = tl.full([{bn}, {p.rp}], {p.init}, {p.tl_dtype})
    for k in range(0, {chunk}, {bn}):
        cols = chunk * {chunk} + k + tl.arange(0, {bn})[:, None]  # reduced point
        mask = (cols < {p.n}) & run_mask
        v = tl.load(p_in0 + pid * {p.row} + cols * {p.r} + run, mask=mask, other={p.init})
        acc = _comb(acc, v)
    p = tl.reduce(acc, 0, _comb)  # [{p.rp}]: one partial per channel
    r1 = tl.arange(0, {p.rp})
'''
    return _HEADER.format(**f) + body + _COUNT.format(**f) + _FINAL.format(**f)


def flat_source(p: Problem, name: str, block: int, chunk: int, nan: bool = True) -> str:
    """Tiles of ``block`` contiguous elements; channel ``offset % R``, R accumulators."""
    s, p2 = _splits(p, chunk)
    f = dict(name=name, comb=_comb(p, nan), p2=p2, rp=p.rp, s=s, r=p.r, m=p.m, init=p.init)
    ce = chunk * p.r  # elements per chunk (a multiple of block)
    accs = "".join(f"    acc{c} = tl.full([{block}], {p.init}, {p.tl_dtype})\n" for c in range(p.r))
    steps = "".join(f"        acc{c} = _comb(acc{c}, tl.where(ch == {c}, v, {p.init}))\n"
                    for c in range(p.r))
    sums = "".join(f"    s{c} = tl.reduce(acc{c}, 0, _comb)\n" for c in range(p.r))
    body = f'''
@triton.jit
def {name}(p_in0, part, counters, out0):
    pid = tl.program_id(0)  # outer kept point
    chunk = tl.program_id(1)  # chunk of {ce} elements, of {s}
    lane = tl.arange(0, {block})
{accs}    for k in range(0, {ce}, {block}):
        offs = chunk * {ce} + k + lane  # element of this outer kept point's block
        v = tl.load(p_in0 + pid * {p.row} + offs, mask=offs < {p.row}, other={p.init})
        ch = offs % {p.r}
{steps}{sums}    r1 = tl.arange(0, {p.rp})
    p = {_select(p.r, 's')}
'''
    return _HEADER.format(**f) + body + _COUNT.format(**f) + _FINAL.format(**f)


def flat_fixed_source(p: Problem, name: str, block: int, chunk: int, nan: bool = True) -> str:
    """R loads of ``block`` contiguous elements per step of ``R * block`` (chunks start on a
    multiple of R): accumulator ``j``'s lane ``l`` always holds channel ``(j * block + l) %
    R``, so the channels are told apart once, after the loop."""
    s, p2 = _splits(p, chunk)
    f = dict(name=name, comb=_comb(p, nan), p2=p2, rp=p.rp, s=s, r=p.r, m=p.m, init=p.init)
    ce = chunk * p.r  # elements per chunk (a multiple of R * block)
    accs = "".join(f"    acc{j} = tl.full([{block}], {p.init}, {p.tl_dtype})\n" for j in range(p.r))
    loads = "".join(
        f"        o{j} = offs + {j * block}\n"
        f"        acc{j} = _comb(acc{j}, tl.load(base + o{j}, mask=o{j} < {p.row}, "
        f"other={p.init}))\n" for j in range(p.r))
    sums = ""
    for c in range(p.r):
        parts = [f"tl.reduce(tl.where((lane + {j * block}) % {p.r} == {c}, acc{j}, {p.init}), "
                 f"0, _comb)" for j in range(p.r)]
        expr = parts[0]
        for q in parts[1:]:
            expr = f"_comb({expr}, {q})"
        sums += f"    s{c} = {expr}\n"
    body = f'''
@triton.jit
def {name}(p_in0, part, counters, out0):
    pid = tl.program_id(0)  # outer kept point
    chunk = tl.program_id(1)  # chunk of {ce} elements, of {s}
    base = p_in0 + pid * {p.row}
    lane = tl.arange(0, {block})
{accs}    for k in range(0, {ce}, {p.r * block}):
        offs = chunk * {ce} + k + lane
{loads}{sums}    r1 = tl.arange(0, {p.rp})
    p = {_select(p.r, 's')}
'''
    return _HEADER.format(**f) + body + _COUNT.format(**f) + _FINAL.format(**f)


def _select(r: int, prefix: str) -> str:
    """``where(r1 == 0, s0, where(r1 == 1, s1, ...))``: R scalars as a vector over ``r1``."""
    expr = f"{prefix}{r - 1}"
    for c in range(r - 2, -1, -1):
        expr = f"tl.where(r1 == {c}, {prefix}{c}, {expr})"
    return expr


FAMILIES = {"run_fastest": run_fastest_source, "flat": flat_source,
            "flat_fixed": flat_fixed_source}


def merged_source(src: str, p: Problem) -> str:
    """The emitted tile's index lines (div/mods of the flat reduced index) replaced by
    ``run_outer * ROW + cols * R + run``; ValueError when the source has none."""
    pattern = re.compile(r"^(?P<ind> +)i = cols // \d+\n(?:(?P=ind)i_\d+ = .*\n)*"
                         r"(?P=ind)off_v_in0 = .*\+ run\n", re.M)
    found = pattern.search(src)
    if found is None or "run_outer" not in src:
        raise ValueError("no div/mod index lines: the emitted index is already merged")
    line = f"{found['ind']}off_v_in0 = run_outer * {p.row} + cols * {p.r} + run\n"
    return src[:found.start()] + line + src[found.end():]


def nonan_source(src: str) -> str:
    """The emitted min without NaN propagation (a measure of its cost, wrong for NaN)."""
    if "propagate_nan=tl.PropagateNan.ALL" not in src:
        raise ValueError("no NaN-propagating minimum")
    return src.replace(", propagate_nan=tl.PropagateNan.ALL", "")


def identity_source(src: str, p: Problem) -> str:
    """(third call) The emitted kernel with its masked load filled with the reduction's
    identity (``other=``) and the ``tl.where`` that put the identity in dropped: run_fastest
    has neither, and its layout is the emitted one's (the same TTGIR blocked layout)."""
    load = re.search(r"(v_in0 = tl\.load\(p_in0 \+ off_v_in0, mask=[^,]+, )other=0\)", src)
    where = re.search(r"^( +)x_v0 = tl\.where\([^,]+, v_in0, [^)]+\)$", src, re.M)
    if load is None or where is None:
        raise ValueError("no masked load of %in0 followed by a where")
    ident = "0" if p.op == "sum" else "INF"
    src = src[:load.start()] + f"{load[1]}other={ident})" + src[load.end():]
    where = re.search(r"^( +)x_v0 = tl\.where\([^,]+, v_in0, [^)]+\)$", src, re.M)
    assert where is not None
    return src[:where.start()] + f"{where[1]}x_v0 = v_in0" + src[where.end():]


def ranges_source(src: str) -> str:
    """(third call) The emitted kernel's run index as ``tl.arange`` and its outer point as the
    program id, where it computed both from ``kept_pad`` with a modulo and a division (a tile
    holds one padded run: block_m equals the run's padded size)."""
    found = re.search(r"^( +)kept_pad = pid \* (\d+) \+ tl\.arange\(0, (\d+)\)\[:, None\].*\n"
                      r"\1run = kept_pad % \d+.*\n\1run_outer = kept_pad // \d+\n", src, re.M)
    if found is None or found[2] != found[3]:
        raise ValueError("no kept_pad lines of one padded run a tile")
    ind, size = found[1], found[3]
    lines = f"{ind}run = tl.arange(0, {size})[:, None]\n{ind}run_outer = pid\n"
    return src[:found.start()] + lines + src[found.end():]


def emitted_tiles(src: str) -> tuple[int, int, int, int]:
    """(block_m, block_n, chunk of reduced points, chunks) read from an emitted split kernel."""
    tile = re.search(r"acc_v0 = tl\.full\(\[(\d+), (\d+)\]", src)
    chunk = re.search(r"chunk of (\d+) reduced elements, of (\d+)", src)
    if tile is None or chunk is None:
        raise ValueError("not a split reduction over padded runs")
    return int(tile[1]), int(tile[2]), int(chunk[1]), int(chunk[2])


def hand_written(base: Any, p: Problem, family: str, name: str, block: int, warps: int,
                 chunk: int, nan: bool = True) -> tuple[Any, str]:
    """An EmittedKernel of a hand-written variant (the emitted one's arguments) and its
    description; ``chunk`` (reduced points per program) is rounded up to a multiple of the
    block (in reduced points for run_fastest, in elements for the flat ones)."""
    from fusejit.codegen import Launch
    chunk = -(-chunk // block) * block
    s, _ = _splits(p, chunk)
    fn = f"s16_{p.op}_{family}_b{block}_w{warps}_c{chunk}{'' if nan else '_nonan'}"
    src = FAMILIES[family](p, fn, block, chunk, nan)
    launch = Launch(fn_name=fn, grid=(p.m, s, 1), num_warps=warps,
                    args=(("in", 0), ("scratch", 0), ("counters", 0), ("out", 0)),
                    signature={"p_in0": p.sig, "part": p.sig, "counters": "*i32",
                               "out0": p.sig}, num_stages=0)
    emitted = dataclasses.replace(base, name=fn, source=src, launches=(launch,),
                                  scratch=((np.dtype(p.dtype), s * p.m * p.r),),
                                  counters=p.m, candidates=(), tiling=())
    what = f"block {block}, {warps} warps, chunk {chunk}, {p.m * s} programs"
    return emitted, what


def variants(kernel_emitted: Any, p: Problem, dry: bool) -> list[tuple[str, Any, str, bool]]:
    """(name, EmittedKernel or an exception saying why not, description, main) of every
    variant of one workload; ``main``: a default configuration (the dry run compiles those)."""
    src = kernel_emitted.source
    (launch,) = kernel_emitted.launches
    bm, bn, chunk, _ = emitted_tiles(src)
    out: list[tuple[str, Any, str, bool]] = []
    programs = math.prod(launch.grid)
    what = f"{bm}x{bn} tiles, {launch.num_warps} warps, chunk {chunk}, {programs} programs"
    out.append(("emitted", kernel_emitted, what, True))
    w4 = dataclasses.replace(launch, num_warps=4 if launch.num_warps != 4 else 8)
    out.append((f"emitted w{w4.num_warps}", dataclasses.replace(kernel_emitted, launches=(w4,)),
                f"{bm}x{bn} tiles, {w4.num_warps} warps, chunk {chunk}, {programs} programs",
                False))
    try:
        merged: Any = dataclasses.replace(kernel_emitted, source=merged_source(src, p))
    except ValueError as exc:
        merged = exc
    out.append(("merged", merged, what, True))
    if p.op == "min":
        try:
            nonan: Any = dataclasses.replace(kernel_emitted, source=nonan_source(src))
        except ValueError as exc:
            nonan = exc
        out.append(("emitted no NaN", nonan, what, True))
    for label, edit in (("identity", lambda t: identity_source(t, p)), ("ranges", ranges_source),
                        ("identity+ranges", lambda t: ranges_source(identity_source(t, p)))):
        try:
            edited: Any = dataclasses.replace(kernel_emitted, source=edit(src))
        except ValueError as exc:
            edited = exc
        out.append((f"emitted {label}", edited, what, True))
        if not isinstance(edited, Exception):
            out.append((f"emitted {label} w{w4.num_warps}",
                        dataclasses.replace(edited, launches=(w4,)),
                        f"{bm}x{bn} tiles, {w4.num_warps} warps, chunk {chunk}, {programs} "
                        f"programs", False))
    itemsize = np.dtype(p.dtype).itemsize
    vector = 0 if dry else 32 * 8 * 16 // itemsize  # 16 bytes a thread at 8 warps
    w = launch.num_warps
    defaults = {"run_fastest": bn, "flat": bm * bn, "flat_fixed": max(bn, vector)}
    for family, block in defaults.items():
        configs = [(block, w, chunk), (block, 4 if w != 4 else 8, chunk), (block // 2, w, chunk),
                   (block * 2, w, chunk), (block, w, chunk * 2), (block, w, max(1, chunk // 2))]
        seen = set()
        for i, (b, ww, c) in enumerate(configs):
            c = -(-c // b) * b  # (as hand_written rounds it)
            if (b, ww, c) in seen:
                continue
            seen.add((b, ww, c))
            emitted, what = hand_written(kernel_emitted, p, family, family, b, ww, c)
            out.append((family if i == 0 else f"{family} b{b} w{ww} c{c}", emitted, what, i == 0))
        if p.op == "min" and family == "flat_fixed":
            emitted, what = hand_written(kernel_emitted, p, family, family, block, w, chunk,
                                         nan=False)
            out.append((f"{family} no NaN", emitted, what, True))
    return out


def _compile_one(emitted: Any, cc: int) -> str:
    """Compile every launch of ``emitted`` for ``cc`` (into the disk cache); '' or the
    error. (Run in a worker process.)"""
    try:
        from fusejit.runtime.compile import compile_launch
        for launch in emitted.launches:
            compile_launch(emitted, launch, tuple(True for _ in launch.signature), cc)
        return ""
    except Exception as exc:  # noqa: BLE001  (reported per variant)
        return f"{type(exc).__name__}: {exc}"[:400]


def compile_all(kernels: list[Any], cc: int, workers: int) -> list[str]:
    """Compile ``kernels`` in parallel processes (spawned: no CUDA state crosses)."""
    if workers <= 1 or len(kernels) <= 1:
        return [_compile_one(k, cc) for k in kernels]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(_compile_one, kernels, [cc] * len(kernels)))


class Runner:
    """Binds an EmittedKernel to an input: the ``cuda`` backend's compile, load and launch
    (CuPy), or on a dry run Triton's interpreter on NumPy buffers."""

    def __init__(self, dry: bool, cp: Any) -> None:
        self.dry, self.cp = dry, cp
        if not dry:
            from fusejit.runtime import current
            self.backend = current()
            self.dev = self.backend.device()

    def bind(self, kernel: Any, emitted: Any, x: Any) -> tuple[list[Any], Any, list[Any]]:
        """(outputs, a function launching the kernel into them, counter buffers)."""
        if not self.dry:
            from fusejit.runtime.cuda_backend import array_spec
            info = self.backend.kernel_info(kernel, emitted, (array_spec(x),), self.dev)
            outs, launch = self.backend.bind_launches(info, [x])
            return outs, launch, [c for bufs in info.held.values() for c in bufs]
        from fusejit.runtime import kernel_cache as kc
        from fusejit.runtime.interpret_backend import HostBuffer
        module = kc.import_source(kc.write_source(emitted), interpret=True)
        outs = [np.empty(t.shape, t.dtype) for t in emitted.out_types]
        scratch = [np.empty(n, d) for d, n in emitted.scratch]
        counters = [np.zeros(max(1, emitted.counters), np.int32)]
        groups = {"in": [x], "out": outs, "scratch": scratch, "counters": counters}
        calls = [(getattr(module, la.fn_name), la.grid,
                  [HostBuffer(groups[kind][i]) for kind, i in la.args])
                 for la in emitted.launches]

        def launch() -> None:
            with kc.TRITON_LOCK:
                for fn, grid, bound in calls:
                    fn[grid](*bound)
        return outs, launch, counters


def host(cp: Any, a: Any) -> np.ndarray:
    return cp.asnumpy(a) if hasattr(cp, "asnumpy") else np.asarray(a)


def check(p: Problem, got: Any, want: np.ndarray, cp: Any) -> tuple[bool, float]:
    """(right, error): relative to the largest reference value for the sum, exact for min."""
    g = host(cp, got).astype(np.float64)
    if g.shape != want.shape:
        return False, float("inf")
    if p.op == "sum":
        err = float(np.abs(g - want).max() / max(np.abs(want).max(), 1e-300))
        return err <= 1e-5, err
    err = float(np.abs(g - want).max())
    return bool(np.array_equal(g, want)), err


def copy_rate(cp: Any, dry: bool) -> float:
    """Bytes per second of a device copy, read plus written (1 GiB; a dry run: NumPy, 8 MiB)."""
    if not dry:
        from suite import copy_bandwidth
        return copy_bandwidth(cp)["copy_gbps"] * 1e9
    a = np.ones(1 << 21, np.float32)
    b = np.empty_like(a)
    t0 = time.perf_counter()
    np.copyto(b, a)
    return 2 * a.nbytes / max(time.perf_counter() - t0, 1e-9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: NumPy for CuPy, the interpreter, small shapes (a check)")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="", help="regex over workload names")
    parser.add_argument("--jobs", type=int, default=0,
                        help="compiling processes (default: the CPU count, at most 16)")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()

    import fusejit as fj
    from fusejit.codegen import emit_kernel
    from fusejit.codegen.heuristics import SplitTiles
    from fusejit.ir.graph import structural_key
    from fusejit.runtime import current, kernel_cache
    cp, timer = backend_and_timer(args.dry)
    runner = Runner(args.dry, cp)
    cc = 90 if args.dry else runner.dev.cc
    jobs = args.jobs or min(16, os.cpu_count() or 1)
    meta: dict[str, Any] = {"dry": args.dry, "triton": kernel_cache.triton_version()}
    if not args.dry:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        meta["device"] = props["name"].decode() if isinstance(props["name"], bytes) \
            else str(props["name"])
    rate = copy_rate(cp, args.dry)
    meta["copy_gbps"] = rate / 1e9
    print(f"copy {rate / 1e9:.0f} GB/s (read + written){' (dry: NumPy)' if args.dry else ''}",
          flush=True)

    # every workload's variants first, compiled in parallel (a dry run: the defaults only)
    rng = np.random.default_rng(0)
    plans: list[tuple[str, Problem, Any, Any, Any, list[Any]]] = []
    for name, (op, axes, dtype, shape, dry_shape) in WORKLOADS.items():
        if args.only and not re.search(args.only, name):
            continue
        if args.dry:
            shape = dry_shape
        m = math.prod(shape[:min(axes)])
        p = Problem(op, dtype, m, math.prod(shape[a] for a in axes), shape[-1])
        if args.dry:
            x = rng.random(shape).astype(dtype)
        else:
            x = cp.random.random(shape, dtype=dtype)
        xf = fj.asarray(x)
        y = xf.sum(axis=axes) if op == "sum" else xf.min(axis=axes)
        plan = fj.plan(y)
        (kernel,) = plan.program.kernels
        tiles = None
        if args.dry:  # the GPU shape's form (one launch, padded runs across), small tiles
            kernel = dataclasses.replace(kernel, attrs={**kernel.attrs, "kind": "split_reduction"})
            tiles = SplitTiles(*DRY_TILES)
        elif kernel.attrs.get("kind") != "split_reduction":
            print(f"{name}: the plan's kernel is kind={kernel.attrs.get('kind')}, not a split "
                  f"reduction: the variants below assume one", flush=True)
        emitted = emit_kernel(kernel, None, "cuda", tiles)
        vs = variants(emitted, p, args.dry)
        plans.append((name, p, x, (xf, y, plan, kernel), emitted, vs))
    todo = [e for *_, vs in plans for _, e, _, main in vs
            if not isinstance(e, Exception) and (main or not args.dry)]
    t0 = time.perf_counter()
    errors = compile_all(todo, cc, jobs)
    failed_compile = {id(e): err for e, err in zip(todo, errors) if err}
    print(f"compiled {len(todo)} kernels for sm_{cc} in {time.perf_counter() - t0:.1f} s "
          f"({jobs} processes), {len(failed_compile)} failed", flush=True)

    rows: list[dict[str, Any]] = []
    failures = 0
    for name, p, x, (xf, y, plan, kernel), emitted, vs in plans:
        axes = WORKLOADS[name][1]
        if p.op == "sum":  # (float64 on the device: CuPy, or NumPy on a dry run)
            want = host(cp, x.astype(np.float64).sum(axis=axes))
        else:
            want = host(cp, x.min(axis=axes)).astype(np.float64)
        moved = x.nbytes + want.size * x.dtype.itemsize
        src_lines = [ln for ln in emitted.source.splitlines() if ln.startswith("# tiling")]
        print(f"{name}: {p.m} x {p.n} x {p.r} {p.dtype}, {moved / 1e6:.1f} MB moved; emitted "
              f"{emitted.launches[0].grid} programs, {emitted.launches[0].num_warps} warps",
              flush=True)
        for line in src_lines[:3]:
            print(f"  {line}", flush=True)
        # fusejit's own path: the plan's launches, and the expression realized each call
        backend = current()
        buffers = [leaf.buffer for leaf in structural_key([y._node])[1]]
        got = backend.execute(plan.program, buffers, plan)[0]
        ok, err = check(p, got, want, cp)
        plan_s = timer(lambda b=backend, pl=plan, bf=buffers: b.execute(pl.program, bf, pl))

        def fresh(xf: Any = xf, op: str = p.op, axes: tuple[int, ...] = axes) -> Any:
            return (xf.sum(axis=axes) if op == "sum" else xf.min(axis=axes)).realize()
        realize_s = timer(fresh)
        for label, s in (("fusejit plan", plan_s), ("fusejit realize", realize_s)):
            row = {"workload": name, "variant": label, "us": s * 1e6,
                   "gbps": moved / s / 1e9, "copy_share": moved / s / rate, "ok": ok,
                   "err": err, "what": "the default path" if "realize" in label else
                   "backend.execute of the plan"}
            rows.append(row)
            print(f"  {label:34s} {s * 1e6:9.1f} us {row['gbps']:7.0f} GB/s "
                  f"{100 * row['copy_share']:5.1f}% of copy  {'ok' if ok else 'WRONG'} "
                  f"(err {err:.1e})", flush=True)
            failures += not ok
        for label, em, what, main in vs:
            row = {"workload": name, "variant": label, "what": what}
            if isinstance(em, Exception):
                row["skipped"] = str(em)
                rows.append(row)
                print(f"  {label:34s} skipped: {em}", flush=True)
                continue
            if args.dry and not main:
                row["compiled"] = False  # (a dry run compiles the defaults only)
            row["source_hash"] = kernel_cache.source_hash(em.source)
            try:
                if id(em) in failed_compile:
                    raise RuntimeError(f"compile failed: {failed_compile[id(em)]}")
                outs, launch, counters = runner.bind(kernel, em, x)
                outs[0].fill(np.nan)
                launch()
                ok, err = check(p, outs[0], want, cp)
                s = timer(launch)
                again, err2 = True, 0.0
                if not args.dry:  # (a dry run: the counters' check alone, the interpreter is slow)
                    outs[0].fill(np.nan)
                    launch()
                    again, err2 = check(p, outs[0], want, cp)
                zero = all(not bool((c != 0).any()) for c in counters)
                ok = ok and again and zero
                row.update(us=s * 1e6, gbps=moved / s / 1e9, copy_share=moved / s / rate,
                           ok=ok, err=max(err, err2), counters_zero=zero)
                print(f"  {label:34s} {s * 1e6:9.1f} us {row['gbps']:7.0f} GB/s "
                      f"{100 * row['copy_share']:5.1f}% of copy  {'ok' if ok else 'WRONG'} "
                      f"(err {max(err, err2):.1e}{'' if zero else ', counters left nonzero'})"
                      f"  [{what}]", flush=True)
                failures += not ok
            except Exception as exc:  # noqa: BLE001  (report, go on)
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                print(f"  {label:34s} failed: {row['error']}", flush=True)
                failures += 1
            rows.append(row)
        timed = [r for r in rows if r["workload"] == name and r.get("ok") and "us" in r
                 and not r["variant"].startswith("fusejit") and "NaN" not in r["variant"]]
        if timed:
            best = min(timed, key=lambda r: r["us"])
            print(f"  best: {best['variant']} {best['us']:.1f} us, "
                  f"{100 * best['copy_share']:.1f}% of copy", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        del x, xf, y, plan
        if not args.dry:
            cp.get_default_memory_pool().free_all_blocks()
    meta["wall_s"] = time.perf_counter() - t_start
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"done in {meta['wall_s']:.1f} s, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
