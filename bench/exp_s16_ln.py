"""Does the cooperative layer norm lose to its registers? (sixteenth session; issue 9, wide rows)

fusejit's cooperative row kernel for a layer norm with a weight and a bias over 256 rows of
2**18 float32 (each row over 32 programs of 8192 elements held in registers, 4 warps, 64
floats a thread) runs at ~79% of the copy rate on an H100 (67-74% on an H200); without the
weight and the bias it ran at 91.5%, softmax at 91%. ``bench/exp_coop_ln.py`` ruled out the
weight's and bias's L2 traffic, loading them before the wait, an L1 prefetch, 8 warps,
chunks of 4096 and several rows per program. Not tried: registers. A program holds its
chunk of x (64 registers a thread) and, in the epilogue, all 64 of the weight and 64 of the
bias at once: 166-168 registers, three programs per SM where 4 warps of at most 128 would
fit four. This launches edits of the EMITTED source (text transformations: the protocol of
tickets, arrival, spin, give-up path and finish stays as emitted) that hold at most one
sub-block of the weight and the bias at a time:

* ``emitted``: as fusejit emits it;
* ``halves`` / ``quarters`` / ``eighths`` (S = 2, 4, 8): the chunk loaded as S tensors
  (``cols_s = chunk * 8192 + s * 8192 / S + arange(8192 / S)``); the chunk's sum is the sum
  of the S sub-block sums, its mean from it, its m2 the sum of the S sub-blocks' sums of
  squared deviations from that one chunk mean (the emitted formula, summed in another
  order); the epilogue finishes sub-block s (loads w_s and b_s, normalizes, stores) before
  it starts the next, so the weight and bias of one sub-block are live at a time;
* ``... w/b after arrival``: the same with the first sub-block's weight and bias loaded
  right after the arrival atomic, before the spin (in flight while the row's other programs
  arrive; the arrival's release does not wait for them, as it did for ``hoisted``), at S =
  2, 4 and 8; ``emitted, w/b after arrival`` (S = 1: all of w and b held over the wait) is
  the control.

Registers for sm_90 (the dry run, Triton 3.9's ptxas, no spills in any): emitted 168 (3
programs per SM), halves 149 (3), quarters 128 (4), eighths 128 (4); w/b after arrival:
emitted 254 (2), halves 164 (3), quarters 146 (3), eighths 139 (3); the same at all three
shapes.

Each variant is compiled for the device (Triton as a compiler only, parallel processes) and
its registers and spills reported: ``cuobjdump --dump-resource-usage`` of the cubin (REG,
and spills as STACK/LOCAL bytes; on the GPU also the loaded function's NUM_REGS and
LOCAL_SIZE_BYTES (``cuFuncGetAttribute``), which Triton's ``CompiledKernel.n_regs`` and
``n_spills`` (local bytes / 4) read), with the programs per SM those registers allow. Then
it is launched through the ``cuda`` backend (CuPy; counters allocated and zeroed as the
backend does, left zero by the kernel: checked), checked against a float64 layer norm
(CuPy, ``exp_coop_ln.layer_norm_reference``; x ~ 4 N(0, 1) + 1, w, b ~ N(0, 1): max abs
error at most 1e-4, checked after the first launch and after the last timed one) and timed
by CUDA events (``exp_reductions.event_time``: median of 7 rounds of 20 launches; each
variant timed in 5 interleaved passes, the median reported; ``x emitted``: the emitted
kernel's time over the variant's). Shares are of a device copy's rate (CuPy, 1 GiB, bytes
read plus written: ``suite.copy_bandwidth``) measured in the same run; bytes = x read + out
written + w and b read once.

Shapes: 256x2**18 (the target), 64x2**16 (8 programs a row) and 512x2**17 (16), float32,
each only if the heuristics give it the cooperative kernel (``plan.explain()``; a shape
that does not get it is skipped, and the line says so).

Run on the GPU machine: ``python3 bench/exp_s16_ln.py [--json FILE] [--dry]``. ``--dry``
(no GPU; ``tests/test_bench_experiments.py`` runs it): every variant of the GPU shapes
transformed and compiled for sm_90 (registers and spills reported), then run in Triton's
interpreter on NumPy at small shapes ((3, 1024), (2, 512), (4, 2048)) with the cooperative
kernel forced at chunks of 256 elements (``heuristics``) and the cuda source's spin limited
to 1 (the interpreter runs programs one after another: a program spinning on a row whose
other programs run later would never see them, so it gives up at once, as on the GPU it
would after ``COOP_SPIN_LIMIT`` spins, and the row's last program re-reads its chunk). Twice
per variant: as launched (every chunk of a row but the last given up, so the variant's own
epilogue writes one chunk a row), then with every row's arrival counter preset to chunks - 1
(every program finds its row arrived and writes its chunk through the variant's epilogue;
the partials of the chunks that run later are the first launch's, the same values): both
within 1e-4 of the float64 layer norm, every counter zero after each.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import dataclasses
import json
import multiprocessing
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the GPU shapes (rows, columns), float32
SHAPES = ((256, 1 << 18), (64, 1 << 16), (512, 1 << 17))
#: a dry run's shapes (chunks of ``DRY_BLOCK``: 4, 2 and 8 programs a row)
DRY_SHAPES = ((3, 1024), (2, 512), (4, 2048))
DRY_BLOCK = 256
EPS = 1e-5
#: max abs error against the float64 layer norm (outputs of unit scale, at most ~30)
TOLERANCE = 1e-4
#: name -> (sub-blocks, the first sub-block's weight and bias loaded after the arrival,
#: ptxas's register cap: ``Launch.max_registers``, 0 for none)
VARIANTS: dict[str, tuple[int, bool, int]] = {
    "emitted": (1, False, 0),
    "halves": (2, False, 0),
    "quarters": (4, False, 0),
    "eighths": (8, False, 0),
    "emitted, w/b after arrival": (1, True, 0),
    "halves, w/b after arrival": (2, True, 0),
    "quarters, w/b after arrival": (4, True, 0),
    "eighths, w/b after arrival": (8, True, 0),
}
#: ``--set registers`` (seventeenth session): the emitted kernel and sub-blocks with ptxas's
#: registers capped (128 a thread: four programs of 4 warps an SM, as quarters reached by
#: themselves; 96: five)
REGISTER_VARIANTS: dict[str, tuple[int, bool, int]] = {
    "emitted": (1, False, 0),
    "emitted, 128 registers": (1, False, 128),
    "emitted, 96 registers": (1, False, 96),
    "halves, 128 registers": (2, False, 128),
    "quarters": (4, False, 0),
    "quarters, 96 registers": (4, False, 96),
}
PASSES = 5

# -- the source transformation --------------------------------------------------------------

_ASSIGN = re.compile(r"^(?P<ind> +)(?P<name>[A-Za-z_]\w*) = (?P<expr>.*)$")
_SUM = re.compile(r"^tl\.reduce\((?P<arg>.*), 1, tl\.standard\._sum_combine\)\[:, None\]$")
_COLS = re.compile(r"^    cols = chunk \* (?P<b>\d+) \+ tl\.arange\(0, (?P=b)\)\[None, :\]"
                   r"  # flat reduced index$")
_ARRIVE = re.compile(r'^    arrived = tl\.atomic_add\(counters \+ (?P<at>\d+) \+ pid, 1, '
                     r'sem="acq_rel"\) \+ 1')
_AFFINE_LOAD = re.compile(r"^ +\w+ = tl\.load\(p_in\d+ \+ cols_0\)$")


def _split(line: str) -> tuple[str, str]:
    """(code, comment with its leading two spaces) of an emitted line."""
    code, sep, comment = line.partition("  # ")
    return code, sep + comment


def _names(code: str) -> set[str]:
    """The identifiers of ``code`` (not attributes: ``tl.load`` gives ``tl``)."""
    return set(re.findall(r"(?<![\w.])[A-Za-z_]\w*", code))


def _rename(code: str, tile: set[str], k: int) -> str:
    """``code`` with every name of ``tile`` suffixed ``_k`` (sub-block ``k``'s copy)."""
    alts = "|".join(sorted(tile, key=len, reverse=True))
    return re.sub(rf"(?<![\w.])({alts})(?!\w)", lambda m: f"{m[1]}_{k}", code)


def _find(lines: list[str], pattern: re.Pattern[str] | str, start: int = 0) -> int:
    """Index of the first line from ``start`` that ``pattern`` matches; ValueError if none."""
    for i in range(start, len(lines)):
        if re.match(pattern, lines[i]):
            return i
    raise ValueError(f"emitted source: no line matching {getattr(pattern, 'pattern', pattern)!r}")


def _main_span(src: str, fn: str) -> tuple[int, int]:
    """(start, end) of the body of the kernel function ``fn`` in ``src``."""
    head = src.find(f"\ndef {fn}(")
    if head < 0:
        raise ValueError(f"emitted source: no function {fn}")
    start = src.index("\n", head + 1) + 1
    end = src.find("\n\n\n", start)
    return start, len(src) if end < 0 else end


def sub_blocks(src: str, fn: str, s: int, early: bool = False) -> str:
    """The cooperative row kernel ``fn`` of ``src`` with its chunk held as ``s`` sub-blocks
    (see the module docstring); ``early``: the first sub-block's weight and bias (the loads
    indexed by ``cols`` alone) loaded right after the arrival. Relies on the emitted line
    structure of a layer norm's cooperative kernel; ValueError where it differs."""
    if s == 1 and not early:
        return src
    a, z = _main_span(src, fn)
    lines = src[a:z].split("\n")
    i_cols = _find(lines, _COLS)
    block = int(_COLS.match(lines[i_cols])["b"])  # type: ignore[index]
    if block % s:
        raise ValueError(f"a chunk of {block} does not split in {s}")
    sub = block // s
    i_part = _find(lines, r"^    tl\.store\(part_", i_cols)
    i_arrive = _find(lines, _ARRIVE, i_part)
    i_if = _find(lines, r"^    if arrived >= \d+:", i_arrive)
    # the chunk's loads and partials: tile lines once per sub-block, sums of sub-block sums
    tile = {"cols"}
    pro = [f"    cols_{k} = chunk * {block} + {k * sub} + tl.arange(0, {sub})[None, :]"
           f"  # flat reduced index, sub-block {k} of {s}" for k in range(s)]
    for line in lines[i_cols + 1:i_part]:
        code, comment = _split(line)
        m = _ASSIGN.match(code)
        if m is None or m["ind"] != "    " or "mask" in code:
            raise ValueError(f"emitted source: unexpected line before the partials: {line!r}")
        if not _names(m["expr"]) & tile:
            pro.append(line)  # (a value of the chunk, not of its elements)
            continue
        red = _SUM.match(m["expr"])
        if red is not None:
            parts = [f"tl.reduce({_rename(red['arg'], tile, k)}, 1, tl.standard._sum_combine)"
                     f"[:, None]" for k in range(s)]
            pro.append(f"    {m['name']} = {' + '.join(parts)}{comment}")
            continue
        if "tl.reduce" in code:
            raise ValueError(f"emitted source: a reduction other than a sum: {line!r}")
        tile.add(m["name"])
        pro += [_rename(code, tile, k) + comment for k in range(s)]
    # the fast path's epilogue: values of the row first, then each sub-block whole
    j = i_if + 1
    while j < len(lines) and lines[j].startswith("        "):
        j += 1
    body = lines[i_if + 1:j]
    is_tile = []
    for line in body:
        code, _ = _split(line)
        m = _ASSIGN.match(code)
        hit = bool(_names(m["expr"] if m else code) & tile)
        if hit and m is not None:
            tile.add(m["name"])
        is_tile.append(hit)
    if True not in is_tile:
        raise ValueError("emitted source: the fast path writes nothing of the chunk")
    first = is_tile.index(True)
    last = len(body) - 1 - is_tile[::-1].index(True)
    between = [ln for ln, t in zip(body[first:last + 1], is_tile[first:last + 1]) if not t]
    if any(_ASSIGN.match(_split(ln)[0]) is None for ln in between):
        raise ValueError("emitted source: a statement with effects among the chunk's lines")
    tiles = [ln for ln, t in zip(body[first:last + 1], is_tile[first:last + 1]) if t]
    moved, per_sub = [], []
    for k in range(s):
        for line in tiles:
            code, comment = _split(line)
            new = _rename(code, tile, k)
            if early and k == 0 and _AFFINE_LOAD.match(new):
                moved.append(f"    {new.strip()}{comment} (after the arrival)")
            else:
                per_sub.append(new + comment)
    if early and not moved:
        raise ValueError("emitted source: no weight or bias load to move")
    epilogue = body[:first] + between + per_sub + body[last + 1:]
    out = (lines[:i_cols] + pro + lines[i_part:i_arrive + 1] + moved
           + lines[i_arrive + 1:i_if + 1] + epilogue + lines[j:])
    code_only = "\n".join(_split(ln)[0] for ln in out)
    left = sorted(n for n in tile if re.search(rf"(?<![\w.]){n}(?!\w)", code_only))
    if left:
        raise ValueError(f"emitted source: {left} left unsplit")
    return src[:a] + "\n".join(out) + src[z:]


def spin_once(src: str) -> str:
    """The cuda source's spin limited to 1 (a dry run: the interpreter's programs run one
    after another, so a program whose row is not all arrived gives its chunk up at once)."""
    new, n = re.subn(r"\(spins < \d+\)", "(spins < 1)", src)
    if n != 1:
        raise ValueError(f"emitted source: {n} spin loops, expected 1")
    return new


def coop_layout(src: str) -> tuple[int, int]:
    """(chunks per row, index of the first row's arrival counter) of an emitted kernel."""
    chunks = re.search(r"^    chunk = ticket % (\d+)", src, re.M)
    arrive = re.search(_ARRIVE.pattern, src, re.M)
    if chunks is None or arrive is None:
        raise ValueError("emitted source: not a cooperative row kernel")
    return int(chunks[1]), int(arrive["at"])


# -- compiling, registers -------------------------------------------------------------------

def resource_usage(cubin: bytes) -> dict[str, int]:
    """REG, STACK and LOCAL of the cubin's kernel (``cuobjdump --dump-resource-usage``,
    from Triton's own tools): spills are STACK (or LOCAL) bytes."""
    import triton
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True,
                              text=True, timeout=120).stdout
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    if found is None:
        raise RuntimeError(f"cuobjdump: no resource usage in {text[-300:]!r}")
    return dict(zip(("regs", "stack", "shared", "local"), map(int, found.groups())))


def programs_per_sm(regs: int, warps: int) -> int:
    """Programs of ``warps`` warps that ``regs`` registers a thread let an sm_90 SM hold
    (65536 registers, allocated per warp in units of 256; at most 64 warps, 32 programs)."""
    per_warp = -(-regs * 32 // 256) * 256
    return min(64 // warps, 32, (65536 // per_warp) // warps)


def _compile_one(emitted: Any, divisible: tuple[bool, ...], cc: int) -> dict[str, Any]:
    """Compile ``emitted``'s launch for ``cc`` (into the disk cache, where the ``cuda``
    backend finds it) and read its resource usage. (Run in a worker process.)"""
    from fusejit.runtime.compile import compile_launch
    (launch,) = emitted.launches
    t0 = time.perf_counter()
    try:
        compiled = compile_launch(emitted, launch, divisible, cc)
    except Exception as exc:  # noqa: BLE001  (reported per variant)
        return {"error": f"{type(exc).__name__}: {exc}"[:400]}
    usage: dict[str, Any] = {"compile_s": time.perf_counter() - t0}
    try:
        usage.update(resource_usage(compiled.cubin))
        usage["programs_per_sm"] = programs_per_sm(usage["regs"], launch.num_warps)
    except Exception as exc:  # noqa: BLE001  (the launch goes on without the counts)
        usage["usage_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return usage


def compile_all(jobs: list[tuple[Any, tuple[bool, ...]]], cc: int, workers: int
                ) -> list[dict[str, Any]]:
    """``_compile_one`` of each (emitted, divisible), in spawned processes."""
    if workers <= 1 or len(jobs) <= 1:
        return [_compile_one(e, d, cc) for e, d in jobs]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(_compile_one, [e for e, _ in jobs], [d for _, d in jobs],
                             [cc] * len(jobs)))


def _usage_text(u: dict[str, Any]) -> str:
    if "error" in u:
        return f"compile failed: {u['error']}"
    if "regs" in u:
        text = (f"{u['regs']} regs, spills: stack {u['stack']} B local {u['local']} B, "
                f"{u['programs_per_sm']} programs/SM by regs")
    else:
        text = f"registers unknown ({u.get('usage_error')})"
    if "driver_regs" in u:
        text += f" (driver: {u['driver_regs']} regs, {u['driver_local']} B local)"
    return text


# -- planning, launching --------------------------------------------------------------------

@contextlib.contextmanager
def small_chunks(block: int) -> Iterator[None]:
    """The cooperative kernel for small rows on ``cuda`` (a dry run): chunks of ``block``."""
    from fusejit.codegen import heuristics as h
    saved = (h.COOPERATIVE_ROWS, h.COOP_MIN_ROW_BYTES, dict(h.COOP_CHUNK),
             dict(h.PERSISTENT_LIMIT))
    h.COOPERATIVE_ROWS, h.COOP_MIN_ROW_BYTES = True, 0
    h.COOP_CHUNK["cuda"] = h.PERSISTENT_LIMIT["cuda"] = block
    try:
        yield
    finally:
        h.COOPERATIVE_ROWS, h.COOP_MIN_ROW_BYTES = saved[:2]
        h.COOP_CHUNK.update(saved[2])
        h.PERSISTENT_LIMIT.update(saved[3])


def plan_shape(rows: int, cols: int) -> tuple[Any, Any, str]:
    """(the layer norm's Kernel, its emitted cuda source, the plan's tiling line) for float32
    ``rows x cols`` with a weight and a bias (planned on host zeros: nothing runs), emitted
    as the sixteenth session did: the chunk as one tile, whatever ``coop_sub_blocks`` says
    now (its choice is the variant ``fusejit now``)."""
    import fusejit as fj
    from fusejit.codegen import emit_kernel
    from fusejit.codegen import heuristics as h
    from fusejit.runtime import forget_plans
    saved = h.COOP_SUB_BLOCK_OPS
    h.COOP_SUB_BLOCK_OPS = frozenset()
    forget_plans()
    try:
        with fj.using_backend("interpret"):
            args = [fj.asarray(np.zeros(s, np.float32)) for s in ((rows, cols), (cols,), (cols,))]
            plan = fj.plan(fj.layer_norm(args[0], args[1], args[2], eps=EPS))
        tiling = next((ln.strip() for ln in plan.explain().splitlines() if "tiling:" in ln), "")
        (kernel,) = plan.program.kernels
        return kernel, emit_kernel(kernel, None, "cuda"), tiling
    finally:
        h.COOP_SUB_BLOCK_OPS = saved
        forget_plans()


def variant_sources(emitted: Any, dry: bool, kernel: Any = None) -> dict[str, Any]:
    """name -> the EmittedKernel of each variant (or the ValueError saying why not); with
    ``kernel``, also ``fusejit now``: the kernel as emitted today."""
    fn = emitted.launches[0].fn_name
    out: dict[str, Any] = {}
    if kernel is not None:  # the kernel as fusejit emits it today (``coop_sub_blocks``)
        from fusejit.codegen import emit_kernel
        now = emit_kernel(kernel, None, "cuda")
        out["fusejit now"] = dataclasses.replace(now, source=spin_once(now.source)) if dry \
            else now
    for name, (s, early, registers) in VARIANTS.items():
        try:
            src = sub_blocks(emitted.source, fn, s, early)
            launches = tuple(dataclasses.replace(la, max_registers=registers)
                             for la in emitted.launches)
            out[name] = dataclasses.replace(emitted, source=spin_once(src) if dry else src,
                                            launches=launches)
        except ValueError as exc:
            out[name] = exc
    return out


def divisible(emitted: Any, kernel: Any) -> tuple[bool, ...]:
    """The ``cuda`` backend's specialization of the launch (fresh CuPy arrays: pointers
    16-byte aligned; the scalar eps not)."""
    (launch,) = emitted.launches
    return tuple(not (kind == "in" and kernel.params[i].scalar) for kind, i in launch.args)


def reference(xp: Any, x: Any, w: Any, b: Any) -> Any:
    """The float64 layer norm (``exp_coop_ln.layer_norm_reference``'s formula) by ``xp``."""
    if xp is not np:
        from exp_coop_ln import layer_norm_reference
        return layer_norm_reference(x, w, b, EPS)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    return (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=1, keepdims=True) + EPS) * w + b


def bind_dry(kernel: Any, emitted: Any, args: list[Any]) -> tuple[list[Any], Any, Any]:
    """(outputs, a launch in Triton's interpreter, the counters) of ``emitted`` on NumPy
    ``args`` (the kernel's params in order), as the ``interpret`` backend binds them."""
    from fusejit.runtime import kernel_cache as kc
    from fusejit.runtime.interpret_backend import HostBuffer, _init_scalar_types, _scalar
    _init_scalar_types()
    module = kc.import_source(kc.write_source(emitted), interpret=True)
    outs = [np.empty(t.shape, t.dtype) for t in emitted.out_types]
    scratch = [np.empty(n, d) for d, n in emitted.scratch]
    counters = np.zeros(max(1, emitted.counters), np.int32)
    ins = [_scalar(a, p.type.dtype) if p.scalar else HostBuffer(a)
           for a, p in zip(args, kernel.params)]
    groups = {"in": ins, "out": [HostBuffer(o) for o in outs],
              "scratch": [HostBuffer(s) for s in scratch], "counters": [HostBuffer(counters)]}
    (launch,) = emitted.launches
    fn = getattr(module, launch.fn_name)
    bound = [groups[kind][i] for kind, i in launch.args]

    def run() -> None:
        with kc.TRITON_LOCK:
            fn[launch.grid](*bound)
    return outs, run, counters


def bind_cuda(backend: Any, dev: Any, kernel: Any, emitted: Any, args: list[Any]
              ) -> tuple[list[Any], Any, Any, dict[str, int]]:
    """(outputs, a launch, the counters, the driver's register and local-memory counts) of
    ``emitted`` through the ``cuda`` backend (compiled, loaded, counters zeroed on first use
    and kept per stream, as it launches its own kernels)."""
    import cupy as cp

    from fusejit.codegen.lowering import scalar_arg
    from fusejit.runtime.cuda_backend import array_spec
    spec = tuple(None if p.scalar else array_spec(a) for a, p in zip(args, kernel.params))
    info = backend.kernel_info(kernel, emitted, spec, dev)
    bound = [scalar_arg(a, p.type.dtype) if p.scalar else a for a, p in zip(args, kernel.params)]
    outs, launch = backend.bind_launches(info, bound)
    counters = info.held[cp.cuda.get_current_stream().ptr][0]
    fn = info.launches[0][0]
    driver: dict[str, int] = {}
    with contextlib.suppress(Exception):  # (cuFuncGetAttribute: NUM_REGS 4, LOCAL_SIZE_BYTES 3)
        get = cp.cuda.driver.funcGetAttribute
        driver = {"driver_regs": int(get(4, fn.ptr)), "driver_local": int(get(3, fn.ptr))}
    return outs, launch, counters, driver


def _host(a: Any) -> np.ndarray:
    get = getattr(a, "get", None)
    return np.asarray(get() if get is not None else a)


# -- the run --------------------------------------------------------------------------------

def copy_rate(cp: Any, dry: bool) -> float:
    """Bytes per second of a device copy, read plus written (CuPy, 1 GiB:
    ``suite.copy_bandwidth``; a dry run: NumPy, 8 MiB)."""
    if not dry:
        from suite import copy_bandwidth
        return float(copy_bandwidth(cp)["copy_gbps"]) * 1e9
    a = np.ones(1 << 21, np.float32)
    b = np.empty_like(a)
    t0 = time.perf_counter()
    np.copyto(b, a)
    return 2 * a.nbytes / max(time.perf_counter() - t0, 1e-9)


def dry_check(kernel: Any, emitted: Any, rng: np.random.Generator) -> dict[str, Any]:
    """One variant in the interpreter at a dry shape: a launch as it comes (all chunks of a
    row but the last given up), then one with the arrivals preset (every chunk through the
    fast path): max abs errors and whether the counters end zero."""
    (rows, cols) = emitted.out_types[0].shape
    chunks, at = coop_layout(emitted.source)
    x = (rng.standard_normal((rows, cols)) * 4 + 1).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    want = reference(np, x, w, b)
    outs, run, counters = bind_dry(kernel, emitted, [x, EPS, w, b])
    row: dict[str, Any] = {}
    for label, preset in (("given_up", False), ("fast", True)):
        outs[0].fill(np.nan)
        if preset:
            counters[at:at + rows] = chunks - 1
        run()
        row[f"err_{label}"] = float(np.abs(outs[0] - want).max())
        row[f"zero_{label}"] = not counters.any()
    row["ok"] = bool(row["err_given_up"] <= TOLERANCE and row["err_fast"] <= TOLERANCE
                     and row["zero_given_up"] and row["zero_fast"])
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dry", action="store_true",
                        help="no GPU: compile for sm_90, run small shapes in the interpreter")
    parser.add_argument("--json", default="")
    parser.add_argument("--set", choices=("sub-blocks", "registers"), default="sub-blocks",
                        help="registers: the REGISTER_VARIANTS (capped registers)")
    parser.add_argument("--jobs", type=int, default=0,
                        help="compiling processes (default: the CPU count, at most 16)")
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    global VARIANTS
    if args.set == "registers":
        VARIANTS = REGISTER_VARIANTS

    import fusejit as fj
    from fusejit.runtime import kernel_cache
    cp: Any = np
    backend = dev = None
    if not args.dry:
        import cupy as cp
        fj.set_backend("cuda")
        from fusejit.runtime import current
        backend = current()
        dev = backend.device()
    cc = 90 if args.dry else dev.cc  # type: ignore[union-attr]
    meta: dict[str, Any] = {"dry": args.dry, "triton": kernel_cache.triton_version(),
                            "tolerance": TOLERANCE, "cc": cc}
    if not args.dry:
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"]
        meta["device"] = name.decode() if isinstance(name, bytes) else str(name)
    rows_out: list[dict[str, Any]] = []

    def dump() -> None:
        if args.json:
            Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows_out}, indent=1))

    # every GPU shape's variants, compiled for the device in parallel (registers)
    shapes: list[tuple[tuple[int, int], Any, Any, dict[str, Any]]] = []
    for rows, cols in SHAPES:
        kernel, emitted, tiling = plan_shape(rows, cols)
        if "cooperative rows" not in tiling:
            print(f"{rows}x{cols}: skipped, not the cooperative kernel: {tiling}", flush=True)
            rows_out.append({"shape": f"{rows}x{cols}", "skipped": tiling})
            continue
        print(f"{rows}x{cols}: {tiling}", flush=True)
        shapes.append(((rows, cols), kernel, emitted, variant_sources(emitted, False, kernel)))
    jobs = [(e, divisible(e, k)) for _, k, _, vs in shapes for e in vs.values()
            if not isinstance(e, Exception)]
    workers = args.jobs or min(16, os.cpu_count() or 1)
    t0 = time.perf_counter()
    usage = dict(zip([id(e) for e, _ in jobs], compile_all(jobs, cc, workers)))
    failed = sum("error" in u for u in usage.values())
    print(f"compiled {len(jobs)} kernels for sm_{cc} in {time.perf_counter() - t0:.1f} s "
          f"({workers} processes), {failed} failed", flush=True)
    if args.dry:
        for (rows, cols), _, _, vs in shapes:
            for name, e in vs.items():
                row = {"shape": f"{rows}x{cols}", "variant": name, "sm": cc}
                if isinstance(e, Exception):
                    row["error"] = str(e)
                    print(f"{rows:>4d}x{cols:<7d} {name:28s} transform failed: {e}", flush=True)
                    failed += 1
                else:
                    row.update(usage[id(e)])
                    print(f"{rows:>4d}x{cols:<7d} {name:28s} sm_{cc}: {_usage_text(usage[id(e)])}",
                          flush=True)
                rows_out.append(row)
        # small shapes in the interpreter, the cooperative kernel forced
        rng = np.random.default_rng(0)
        for rows, cols in DRY_SHAPES:
            with small_chunks(DRY_BLOCK):
                kernel, emitted, tiling = plan_shape(rows, cols)
                variants = variant_sources(emitted, True, kernel)
            if "cooperative rows" not in tiling:
                raise SystemExit(f"dry {rows}x{cols}: not the cooperative kernel: {tiling}")
            chunks, _ = coop_layout(emitted.source)
            for name, e in variants.items():
                row = {"shape": f"dry {rows}x{cols}", "variant": name, "chunks": chunks}
                try:
                    if isinstance(e, Exception):
                        raise e
                    row.update(dry_check(kernel, e, rng))
                    print(f"dry {rows}x{cols} ({chunks} chunks of {DRY_BLOCK}) {name:28s} "
                          f"max abs err {row['err_given_up']:.1e} as launched, "
                          f"{row['err_fast']:.1e} all fast path; counters zero: "
                          f"{row['zero_given_up'] and row['zero_fast']}  "
                          f"{'ok' if row['ok'] else 'WRONG'}", flush=True)
                    failed += not row["ok"]
                except Exception as exc:  # noqa: BLE001  (report, go on)
                    row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                    print(f"dry {rows}x{cols} {name:28s} failed: {row['error']}", flush=True)
                    failed += 1
                rows_out.append(row)
        meta["wall_s"] = time.perf_counter() - t_start
        dump()
        print(f"done in {meta['wall_s']:.1f} s, {failed} failed", flush=True)
        return 1 if failed else 0

    from exp_reductions import event_time
    failed = 0  # (a variant that did not compile fails below, once)
    rate = copy_rate(cp, False)
    meta["copy_gbps"] = rate / 1e9
    print(f"{meta['device']}: copy {rate / 1e9:.0f} GB/s (read + written, CuPy 1 GiB)",
          flush=True)
    for (rows, cols), kernel, _, vs in shapes:
        x = cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4 + 1
        w = cp.random.standard_normal(cols, dtype=cp.float32)
        b = cp.random.standard_normal(cols, dtype=cp.float32)
        want = reference(cp, x, w, b)
        moved = 2 * x.nbytes + w.nbytes + b.nbytes
        bound: dict[str, Any] = {}
        mine: list[dict[str, Any]] = []
        for name, e in vs.items():
            subs, early, cap = VARIANTS.get(name, (0, False, e.launches[0].max_registers
                                                     if not isinstance(e, Exception) else 0))
            row = {"shape": f"{rows}x{cols}", "variant": name, "bytes": moved,
                   "sub_blocks": subs, "early": early, "max_registers": cap}
            try:
                if isinstance(e, Exception):
                    raise e
                row.update(usage[id(e)])
                if "error" in usage[id(e)]:
                    raise RuntimeError(usage[id(e)]["error"])
                outs, launch, counters, driver = bind_cuda(backend, dev, kernel, e,
                                                           [x, EPS, w, b])
                row.update(driver)
                outs[0].fill(np.nan)
                launch()
                err = float(cp.abs(outs[0] - want).max())
                row.update(err=err, ok=err <= TOLERANCE, times=[])
                bound[name] = (launch, counters, outs)
            except Exception as exc:  # noqa: BLE001  (report, go on)
                row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                print(f"{rows:>4d}x{cols:<7d} {name:28s} failed: {row['error']}", flush=True)
            mine.append(row)
        for _ in range(PASSES):  # interleaved: drift shared by every variant
            for row in mine:
                if row["variant"] in bound:
                    row["times"].append(event_time(bound[row["variant"]][0]) * 1e6)
        base = float(np.median(mine[0]["times"])) if mine[0]["variant"] in bound else 0.0
        for row in mine:
            if row["variant"] in bound:
                _, counters, outs = bound[row["variant"]]
                err = float(cp.abs(outs[0] - want).max())  # (the last timed launch's)
                zero = not bool(counters.any())
                us = float(np.median(row["times"]))
                row.update(us=us, gbps=moved / us / 1e3, copy_share=moved / (us * 1e-6) / rate,
                           err=max(err, row["err"]), counters_zero=zero)
                row["ok"] = bool(row["err"] <= TOLERANCE and zero)
                vs_emitted = f"{base / us:5.3f}x emitted" if base else ""
                print(f"{rows:>4d}x{cols:<7d} {row['variant']:28s} {us:8.1f} us "
                      f"{row['gbps']:6.0f} GB/s {100 * row['copy_share']:5.1f}% of copy "
                      f"{vs_emitted}  {_usage_text(row)}  max abs err {row['err']:.1e}"
                      f"{'' if zero else ', counters left nonzero'}  "
                      f"{'ok' if row['ok'] else 'WRONG'}", flush=True)
                failed += not row["ok"]
            else:
                failed += 1
            rows_out.append(row)
        dump()
        del x, w, b, want, bound
        cp.get_default_memory_pool().free_all_blocks()
    meta["wall_s"] = time.perf_counter() - t_start
    dump()
    print(f"done in {meta['wall_s']:.1f} s, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
