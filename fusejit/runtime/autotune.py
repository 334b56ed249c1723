"""``FUSEJIT_AUTOTUNE=1``: time a few candidate tilings of a kernel once, keep the fastest.

Every kernel's tiles (block sizes, rows per program, ``num_warps``, GEMM stages, split
factors) come from ``codegen/heuristics.py``, which also lists a few neighbours of each
choice (``EmittedKernel.candidates``, the heuristic's first). With ``FUSEJIT_AUTOTUNE=1``
the ``cuda`` backend, the first time it builds a kernel for an argument specialization
(the kernel cache's key: the region's structure, and per input its element strides and
16-byte alignment), emits and compiles each candidate, times it on the current device and
stream, and launches the fastest from then on. A candidate replaces the heuristic's choice
only when it is ``MIN_GAIN`` faster (timing noise must not flip choices). The choice is kept
in the disk cache (``$FUSEJIT_CACHE_DIR/autotune/<key>.json``, keyed also by the GPU's name
and compute capability, the Triton version and the candidate list), so a later process
reuses it without measuring. An entry that does not check out (its checksum, or a choice
that is not one of the candidates) is measured again, with a warning.

What is timed: the candidate's launches on *scratch arguments* of the exact
specialization (shape, dtype, strides, alignment; filled with ones; scalar params 1),
into results of its own. The user's buffers are never read or written, so aliasing and
in-place updates cannot matter; the real arguments are not used because a plan binds every
kernel's launches before any intermediate buffer exists, and no op addresses memory by a
loaded value (no gather), so the time does not depend on the data. Timing synchronizes
with the device (CUDA events, ``cuda_event_timer``): acceptable on this first-use path
only. The ``numpy`` and ``interpret`` backends never tune (their emissions have one
candidate, and neither calls this module).

Off (the default, ``FUSEJIT_AUTOTUNE=0``), nothing here runs: the backend's one check is
on building a kernel, never per launch. ``plan.explain()`` and each kernel's header say
where its tiles came from (``describe``): the heuristics, the IR's attributes, or
autotune with the measured time of every candidate.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..codegen import EmittedKernel, describe_tiling, emit_kernel
from ..codegen.heuristics import config_fields
from ..codegen.lowering import scalar_arg
from ..errors import BackendError
from ..ir.program import Kernel, contiguous_strides
from . import kernel_cache as kc

log = logging.getLogger("fusejit.autotune")

#: The environment variable: ``1`` tunes, ``0`` (or unset) keeps the heuristics' tiles.
VARIABLE = "FUSEJIT_AUTOTUNE"
#: Version of the cache entries (part of every key: a new format never reads an old entry).
FORMAT = 1
#: A candidate replaces the heuristic's tiles only when at least this much faster.
MIN_GAIN = 0.03
#: Timed rounds (the best counts per candidate); in each round every candidate runs in turn
#: for about ``ROUND_SECONDS`` of back-to-back launches.
ROUNDS = 3
ROUND_SECONDS = 0.004
#: Launches of the first candidate before any is timed, for about this long (GPU clocks
#: ramp up: the candidate timed first must not pay for it).
WARMUP_SECONDS = 0.02
#: Most launches in one batch (tiny kernels).
MAX_REPS = 500

#: Times the candidates: given per candidate a function that queues its launches once,
#: returns per candidate the seconds one call takes on the device.
Timer = Callable[[list[Callable[[], None]]], list[float]]
#: The timer in use; None: CUDA events on CuPy's current stream (``cuda_event_timer``).
#: Tests put a fake here (the fake CuPy runs nothing).
timer: Timer | None = None

#: What this process did: kernels tuned (measured), reused (from the disk cache), and the
#: seconds spent tuning (compiles included).
stats: dict[str, float] = {"tuned": 0, "reused": 0, "seconds": 0.0}

#: The latest choice per (kernel structure, strides): (tiles or None, origin line), for
#: ``describe`` (``plan.explain()``).
_recent: dict[tuple[str, tuple[Any, ...]], tuple[Any, str]] = {}
#: GPU names by device id.
_names: dict[int, str] = {}


def enabled() -> bool:
    """Whether ``FUSEJIT_AUTOTUNE`` asks for tuning (read when a kernel is first built)."""
    value = os.environ.get(VARIABLE, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise BackendError(f"{VARIABLE}={value!r} is not 0 or 1")


def clear() -> None:
    """Forget this process's choices (the disk cache keeps them) and zero ``stats``."""
    _recent.clear()
    stats.update(tuned=0, reused=0, seconds=0.0)


@dataclass(frozen=True)
class Choice:
    """The outcome of timing a kernel's candidates: the index of the one chosen, and the
    seconds per call of each (None: it did not compile, load or run)."""

    index: int
    times: tuple[float | None, ...]

    def origin(self, candidates: tuple[Any, ...]) -> str:
        """The header's and explain()'s line: the choice and every measured time."""
        n = len(candidates)
        measured = ", ".join(f"#{i + 1} {_us(t)}" for i, t in enumerate(self.times))
        if self.index == 0:
            head = f"autotune kept the heuristic's tiles (#1 of {n}"
            head += ")" if self.times[0] is None else f", {_us(self.times[0])})"
        else:
            why = getattr(candidates[self.index], "why", "") or "a neighbour"
            head = (f"autotune chose #{self.index + 1} of {n} ({why}), "
                    f"{_us(self.times[self.index])} against the heuristic's {_us(self.times[0])}")
        return f"{head}; measured: {measured}"


def _us(seconds: float | None) -> str:
    return "failed" if seconds is None else f"{seconds * 1e6:.3g} us"


# -- the backend's hook ---------------------------------------------------------------------

def tuned(backend: Any, kernel: Kernel, spec: tuple[Any, ...], dev: Any,
          emitted: EmittedKernel) -> EmittedKernel:
    """The emission of ``kernel`` to launch for arguments of ``spec`` on ``dev``: the fastest
    of ``emitted.candidates``, from the disk cache or measured now (``emitted``, the
    heuristic's, when nothing could be measured)."""
    candidates = emitted.candidates
    strides = tuple(() if s is None else s[0] for s in spec)
    path = kc.cache_dir() / "autotune" / f"{_key(backend, kernel, spec, dev, candidates)}.json"
    choice = _load(path, candidates)
    how = "from the disk cache"
    if choice is not None:
        stats["reused"] += 1
    else:
        started = time.perf_counter()
        choice = _measure(backend, kernel, spec, dev, emitted, strides)
        spent = time.perf_counter() - started
        stats["seconds"] += spent
        if choice is None:
            return emitted
        stats["tuned"] += 1
        how = f"tuned in {spent:.2f} s"
        _store(path, kernel, choice, candidates, spent)
    origin = choice.origin(candidates)
    tiles = candidates[choice.index] if choice.index else None
    _recent[(kc.kernel_key(kernel), strides)] = (tiles, origin)
    if kc.log_enabled("autotune"):
        print(f"# fusejit autotune {kernel.name} ({how}): {origin}", file=sys.stderr, flush=True)
    log.debug("kernel %s (%s): %s", kernel.name, how, origin)
    return emit_kernel(kernel, list(strides), "cuda", tiles, origin)


def describe(kernel: Kernel) -> list[str]:
    """``describe_tiling`` of ``kernel`` on ``cuda`` (contiguous buffers), with the tiles and
    times autotune chose in this process when it tuned (or reused) this kernel."""
    strides = tuple(() if p.scalar else contiguous_strides(p.type.shape) for p in kernel.params)
    tiles, origin = _recent.get((kc.kernel_key(kernel), strides), (None, None))
    return describe_tiling(kernel, "cuda", tiles, origin)


# -- measuring ------------------------------------------------------------------------------

def _measure(backend: Any, kernel: Kernel, spec: tuple[Any, ...], dev: Any,
             emitted: EmittedKernel, strides: tuple[Any, ...]) -> Choice | None:
    """Time every candidate on scratch arguments; None when there is no memory for them."""
    candidates = emitted.candidates
    n = len(candidates)
    cp = backend.cp
    oom = cp.cuda.memory.OutOfMemoryError
    measure = timer if timer is not None else cuda_event_timer(cp)
    try:
        args = scratch_arguments(cp, kernel, spec)
    except oom:
        warnings.warn(f"fusejit: not enough GPU memory to autotune kernel {kernel.name}; "
                      f"it keeps the heuristic's tiles", stacklevel=2)
        return None
    built: list[tuple[int, Callable[[], None]]] = []  # (candidate, its launches)
    for i, tiles in enumerate(candidates):
        try:
            em = emitted if i == 0 else emit_kernel(
                kernel, list(strides), "cuda", tiles,
                f"autotune candidate #{i + 1} of {n} ({tiles.why}), being timed")
            info = backend.kernel_info(kernel, em, spec, dev)
            built.append((i, backend.bind_launches(info, args)[1]))
        except oom:  # no memory for this candidate's results
            continue
        except Exception as exc:  # a candidate that does not compile or load is skipped
            if i == 0:
                raise  # the heuristic's own tiles: the error the plain path would raise
            warnings.warn(f"fusejit: autotune skips candidate #{i + 1} of kernel {kernel.name} "
                          f"({tiles!r}): {type(exc).__name__}: {exc}", stacklevel=2)
    times: list[float | None] = [None] * n
    if built:
        measured = measure([launch for _, launch in built])
        for (i, _), t in zip(built, measured):
            times[i] = float(t)
    timed = [(t, i) for i, t in enumerate(times) if t is not None]
    if not timed:
        warnings.warn(f"fusejit: no candidate of kernel {kernel.name} could be timed "
                      f"(out of GPU memory); it keeps the heuristic's tiles", stacklevel=2)
        return None
    best_time, best = min(timed)
    base = times[0]
    if base is not None and best_time > base * (1 - MIN_GAIN):
        best = 0
    return Choice(best, tuple(times))


def cuda_event_timer(cp: Any) -> Timer:
    """A timer of CUDA events on CuPy's current stream: each candidate launched once untimed
    (a module's first launch costs extra), the first one for ``WARMUP_SECONDS``, then
    ``ROUNDS`` rounds in which every candidate runs a batch of back-to-back launches (sized
    from the first candidate's time); per candidate its best batch."""

    def measure(launches: list[Callable[[], None]]) -> list[float]:
        stream = cp.cuda.get_current_stream()
        for launch in launches:
            launch()
        stream.synchronize()
        start, end = cp.cuda.Event(), cp.cuda.Event()

        def batch(launch: Callable[[], None], reps: int) -> float:
            start.record(stream)
            for _ in range(reps):
                launch()
            end.record(stream)
            end.synchronize()
            return cp.cuda.get_elapsed_time(start, end) * 1e-3 / reps

        once = max(batch(launches[0], 1), 1e-7)
        batch(launches[0], max(1, min(MAX_REPS, int(WARMUP_SECONDS / once))))
        reps = max(1, min(MAX_REPS, int(ROUND_SECONDS / once)))
        best = [float("inf")] * len(launches)
        for _ in range(ROUNDS):  # interleaved: a drift of the clocks hits every candidate
            for j, launch in enumerate(launches):
                best[j] = min(best[j], batch(launch, reps))
        return best

    return measure


def scratch_arguments(cp: Any, kernel: Kernel, spec: tuple[Any, ...]) -> list[Any]:
    """Arguments for timing ``kernel``: per buffer param a new array of its shape, dtype and
    element strides (``spec``), starting on a 16-byte boundary, filled with ones; per scalar
    param the value 1."""
    args: list[Any] = []
    for p, s in zip(kernel.params, spec):
        dtype = p.type.dtype
        if p.scalar or s is None:
            args.append(scalar_arg(1, dtype))
            continue
        shape, strides = p.type.shape, s[0]
        if math.prod(shape) == 0:
            args.append(cp.empty(shape, dtype))
            continue
        size = dtype.itemsize
        lead = -sum((d - 1) * st for d, st in zip(shape, strides) if st < 0)  # negative strides
        reach = sum((d - 1) * st for d, st in zip(shape, strides) if st > 0)
        pad = -lead % max(1, 16 // size)  # elements before the view, so it starts aligned
        base = cp.ones((pad + lead + reach + 1,), dtype)
        args.append(cp.lib.stride_tricks.as_strided(base[pad + lead:], shape,
                                                    tuple(st * size for st in strides)))
    return args


# -- the disk cache -------------------------------------------------------------------------

def _device_name(backend: Any, dev: Any) -> str:
    name = _names.get(dev.id)
    if name is None:
        raw = backend.cp.cuda.runtime.getDeviceProperties(dev.id)["name"]
        name = _names[dev.id] = raw.decode() if isinstance(raw, bytes) else str(raw)
    return name


def _key(backend: Any, kernel: Kernel, spec: tuple[Any, ...], dev: Any,
         candidates: tuple[Any, ...]) -> str:
    """The entry's name: a hash of everything a choice depends on."""
    what = [FORMAT, kc.kernel_key(kernel),
            [None if s is None else [list(s[0]), bool(s[1])] for s in spec],
            _device_name(backend, dev), dev.cc, kc.triton_version(),
            [config_fields(c) for c in candidates]]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:32]


def _digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def encode_entry(kernel: Kernel, choice: Choice, candidates: tuple[Any, ...],
                 seconds: float) -> bytes:
    """A cache entry: the choice, the chosen config, every time, and a SHA-256 of the rest."""
    payload = {"format": FORMAT, "kernel": kernel.name, "index": choice.index,
               "chosen": config_fields(candidates[choice.index]), "times": list(choice.times),
               "candidates": [config_fields(c) for c in candidates], "seconds": seconds}
    return json.dumps({**payload, "sha256": _digest(payload)}, sort_keys=True).encode() + b"\n"


def decode_entry(data: bytes, candidates: tuple[Any, ...]) -> Choice:
    """The Choice of an entry; ValueError when it is corrupt or not about ``candidates``."""
    try:
        payload = json.loads(data)
        digest = payload.pop("sha256")
        index, times, chosen = payload["index"], payload["times"], payload["chosen"]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"bad entry: {exc}") from None
    if digest != _digest(payload):
        raise ValueError("it does not match its checksum")
    if not (type(index) is int and 0 <= index < len(candidates) and isinstance(times, list)
            and len(times) == len(candidates)
            and all(t is None or type(t) is float for t in times) and times[index] is not None):
        raise ValueError("bad fields")
    if chosen != config_fields(candidates[index]):
        raise ValueError("its choice is not the candidate it names")
    return Choice(index, tuple(times))


def _load(path: Any, candidates: tuple[Any, ...]) -> Choice | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        warnings.warn(f"fusejit: cannot read the autotune cache entry {path} ({exc}); "
                      f"timing the candidates again", stacklevel=3)
        return None
    try:
        return decode_entry(data, candidates)
    except ValueError as exc:
        warnings.warn(f"fusejit: corrupt autotune cache entry {path} ({exc}); "
                      f"timing the candidates again", stacklevel=3)
        return None


def _store(path: Any, kernel: Kernel, choice: Choice, candidates: tuple[Any, ...],
           seconds: float) -> None:
    try:
        kc.atomic_write(path, encode_entry(kernel, choice, candidates, seconds))
    except BackendError as exc:  # the choice still holds for this process
        warnings.warn(f"fusejit: autotune choice not kept on disk: {exc}", stacklevel=3)


def entries(root: Any = None) -> list[dict[str, Any]]:
    """The autotune entries in the cache directory (or ``root``), as dicts (for reports)."""
    folder = (kc.cache_dir() if root is None else root) / "autotune"
    out = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out.append(json.loads(path.read_bytes()))
        except (OSError, ValueError):
            continue
    return out
