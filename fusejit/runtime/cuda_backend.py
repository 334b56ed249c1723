"""The ``cuda`` backend: generated Triton compiled to cubins, loaded and launched by CuPy.

Triton is used as a compiler only (``fusejit.runtime.compile``); its own
launcher (``kernel[grid]``, ``triton.runtime.driver.active``) imports torch
and is never touched. A cubin is loaded with ``cupy.cuda.function.Module``
and launched on CuPy's current stream with ``32 * num_warps`` threads, the
kernel's shared memory, and NULL for the trailing scratch pointers Triton
appends (their count is read from the compiled PTX).

Streams: every launch, allocation and upload goes on CuPy's current stream
(``with cupy.cuda.Stream() as s:``); ``Function.__call__`` without a ``stream``
argument launches on it. Nothing synchronizes: a realize returns once the
kernels are queued. ``runtime.realize`` records the stream on the realized
tensors (``current_stream``), so their buffer exports name it.

Counters: a split reduction counts its finished programs on int32 counters
(``EmittedKernel.counters``) that must be zero when a launch starts; the launch
leaves them zero (its last program per row block resets its own). They are
zeroed once (``cupy.zeros``, ordered on the stream like a launch) and kept: a
memset before every launch would cost as much as the second launch it saves.
Two launches that share counters must not overlap, so they are kept per stream:
a plan runner (and a region's launcher) holds one set per (device, stream it
ran on), keyed by the stream's handle; launches on one stream run in order.
Assumed: a stream whose handle CUDA hands out again (after the old stream was
destroyed) starts only after the old stream's work ended; and a launch that dies
half-way (a device fault) leaves the context unusable anyway.

Inputs: CuPy arrays are used in place (views keep their strides; the view's
own data pointer is passed, so offsets cost nothing), NumPy arrays are copied
to the device (a realized leaf keeps its copy, one per device, for later
realizes). Outputs are new CuPy arrays; kernels whose outputs are all empty
launch nothing.

Devices: a program runs on CuPy's current device (``with
cupy.cuda.Device(i):``). Modules are loaded into each device's context
separately, and the compute capability that a cubin is compiled for is the
device's own, so every cache below is keyed by the device id. CuPy inputs
must live on the current device: inputs on another device, or on two, raise
``DeviceError`` naming the devices.

Caching: per Program object (a plan's fused program, and backend instance), a
dict from (device, input specialization: the element strides and 16-byte
alignment of each buffer input, None for a scalar param) to a *plan runner*:
every launch of every kernel bound to slots, so a repeated ``realize`` (or an
``fj.jit`` call) converts its scalars, allocates the results and launches,
with no per-kernel lookup. A realize finds its runner without building that key
when its leaves have the specialization of the program's last realize on the
device (``execute_leaves``: the loop case). Per Kernel object, the emitted,
compiled and loaded launches by argument specialization (shared by structurally
equal kernels).

Scalar params are passed by value as NumPy scalars of their carrier dtype
(``codegen.lowering.SCALAR_ARG``): CuPy packs them like C scalars. Nothing here
synchronizes with the device, except autotuning: with ``FUSEJIT_AUTOTUNE=1`` the first
build of a kernel for a specialization times its candidate tiles (``runtime/autotune.py``,
once per kernel, specialization and GPU model: the choice is kept in the disk cache).

Threads: the backend is shared by all threads. Cache hits take no lock;
building a launcher (emit, compile, load) holds the backend's lock, so a
kernel that several threads need at once is built once. Each thread launches
on its own current device and stream (CuPy keeps both per thread), with
parameter blocks of its own (``_RawLaunch``).

Errors: a missing CuPy or Triton, no GPU, or a GPU older than
``MIN_COMPUTE_CAPABILITY`` raise ``BackendUnavailableError`` naming what is
missing and which backends would work; CuPy running out of device memory is
a ``DeviceMemoryError`` naming the device and the bytes asked for.
"""

from __future__ import annotations

import itertools
import operator
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..codegen import heuristics
from ..codegen.lowering import SCALAR_ARG, scalar_arg
from ..errors import BackendError, DeviceError, DeviceMemoryError
from ..ir.program import Kernel, Program, contiguous_strides, empty_pitched, pitched
from . import autotune
from . import kernel_cache as kc
from .compile import compile_launch, stack_bytes

_MAX_STATIC_SHARED = 48 * 1024
#: The oldest GPUs the backend runs on: Turing (sm_75). Triton documents 8.0 as its floor;
#: 7.5 is known to work for the kernels fusejit emits; older GPUs are refused up front.
MIN_COMPUTE_CAPABILITY = 75
_INSTANCES = itertools.count()
_INSTALL = "pip install 'fusejit[cuda12]' or 'fusejit[cuda13]'"


def _import_cupy() -> Any:
    from . import _module_status, unavailable
    problem = _module_status("cupy")
    if problem is not None:
        raise unavailable("cuda", "CuPy and a CUDA GPU", f"CuPy {problem} ({_INSTALL})")
    import cupy
    return cupy


def _out_of_memory(exc: BaseException, device: int, asked: int | None,
                   what: str) -> DeviceMemoryError:
    """The error for CuPy's ``OutOfMemoryError``: the device, what was being allocated, how
    many bytes (``asked``; None: as CuPy's own message says) and what to do about it."""
    amount = f": {asked:,} bytes asked for" if asked is not None else ""
    return DeviceMemoryError(
        f"out of GPU memory on CUDA device {device} {what}{amount} ({exc}); "
        f"free CuPy arrays that are no longer needed (and then "
        f"cupy.get_default_memory_pool().free_all_blocks()), or run a smaller problem (split "
        f"it into pieces)")


def _nbytes(shape: tuple[int, ...], dtype: Any) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


class _Device:
    """What the backend keeps per CUDA device: compute capability, loaded modules, constants."""

    __slots__ = ("id", "cc", "sms", "max_shared", "modules", "small")

    def __init__(self, device_id: int, cc: int, sms: int, max_shared: int) -> None:
        self.id = device_id
        self.cc = cc
        #: streaming multiprocessors (a persistent GEMM launches at most one program per SM)
        self.sms = sms
        #: most shared memory one program may ask for (bytes, opted in)
        self.max_shared = max_shared
        #: (cubin, symbol) -> (Module, Function) loaded into this device's context
        self.modules: dict[tuple[bytes, str], tuple[Any, Any]] = {}
        #: small host constants uploaded once: (dtype, shape, bytes) -> device array
        self.small: dict[tuple[str, tuple[int, ...], bytes], Any] = {}


class CudaBackend:
    """Runs every Kernel block of a fused Program as compiled Triton on the current CuPy device."""

    name = "cuda"
    #: whether buffers live in device memory (host inputs are then copied there once)
    device_memory = True

    def __init__(self) -> None:
        from . import require_triton, unavailable
        cp = self.cp = _import_cupy()
        require_triton("cuda", _INSTALL)
        try:
            count = int(cp.cuda.runtime.getDeviceCount())
        except Exception as exc:  # noqa: BLE001  (no driver, driver too old: CuPy's errors vary)
            raise unavailable("cuda", "CuPy and a CUDA GPU", f"CuPy finds no usable GPU ({exc})") \
                from None
        if count < 1:
            raise unavailable("cuda", "CuPy and a CUDA GPU", "CuPy sees no CUDA device")
        self._lock = threading.RLock()
        self._devices: dict[int, _Device] = {}
        #: (device, kernel structure, specialization) -> launcher: structurally equal Kernel
        #: objects (a plan rebuilt by the fuser) share launchers
        self._runners: dict[Any, _KernelInfo] = {}
        self._oom: type[BaseException] = cp.cuda.memory.OutOfMemoryError
        #: the attribute of a Kernel holding this instance's launchers (per instance: a
        #: launcher holds functions loaded by this instance's CuPy)
        self._slot = f"_fusejit_cuda{next(_INSTANCES)}"
        #: the attribute of a Program holding, per device, the specialization of the leaves
        #: its last realize had and that specialization's runner (``execute_leaves``)
        self._leaf_slot = self._slot + "_leaves"
        self._get_device = cp.cuda.runtime.getDevice
        #: ``current_stream()``: CuPy's current stream (of this thread and the current
        #: device), what kernels launch on (CuPy's own function: nothing to add per call)
        self.current_stream = cp.cuda.get_current_stream
        self.device()  # the current device is checked now (a GPU too old is refused here)

    def forget(self) -> None:
        """Drop the launchers shared between structurally equal kernels (``forget_plans``:
        after a heuristics change a kernel of the same structure may emit other source)."""
        with self._lock:
            self._runners.clear()

    # -- devices -------------------------------------------------------------------
    def device(self, device_id: int | None = None) -> _Device:
        """The per-device state of ``device_id`` (default: CuPy's current device)."""
        if device_id is None:
            device_id = int(self._get_device())
        found = self._devices.get(device_id)
        if found is not None:
            return found
        with self._lock:
            found = self._devices.get(device_id)
            if found is None:
                found = self._devices[device_id] = _Device(device_id, self._check_device(device_id),
                                                           *self._limits(device_id))
        return found

    def _check_device(self, device_id: int) -> int:
        from . import unavailable
        cp = self.cp
        cc = int(cp.cuda.Device(device_id).compute_capability)
        if cc < MIN_COMPUTE_CAPABILITY:
            try:
                name = cp.cuda.runtime.getDeviceProperties(device_id)["name"]
                name = name.decode() if isinstance(name, bytes) else str(name)
            except Exception:  # noqa: BLE001  (the name is only for the message)
                name = "unknown GPU"
            low = MIN_COMPUTE_CAPABILITY
            raise unavailable("cuda", f"a GPU of compute capability {low // 10}.{low % 10} or newer "
                                      f"(what Triton compiles for)",
                              f"CUDA device {device_id} ({name}) has compute capability "
                              f"{cc // 10}.{cc % 10}")
        return cc

    def _limits(self, device_id: int) -> tuple[int, int]:
        """The device's SM count and the most shared memory a program may opt in to (an
        H100/H200's, ``heuristics.SMS`` and ``GEMM_SHARED_LIMIT``, where CuPy cannot say)."""
        try:
            props = self.cp.cuda.runtime.getDeviceProperties(device_id)
        except Exception:  # noqa: BLE001  (the limits only shape launches and messages)
            props = {}
        return (int(props.get("multiProcessorCount", heuristics.SMS)),
                int(props.get("sharedMemPerBlockOptin", heuristics.GEMM_SHARED_LIMIT)))

    @staticmethod
    def device_of(array: Any) -> int:
        """The id of the CUDA device holding a CuPy array."""
        return int(array.data.device_id)

    # -- buffers ---------------------------------------------------------------------
    def to_device(self, array: Any) -> Any:
        """``array`` as a buffer on the current device (copied only when it is host data)."""
        if isinstance(array, self.cp.ndarray):
            return array
        return self._upload(np.asarray(array), self.device())

    def _upload(self, host: np.ndarray, dev: _Device) -> Any:
        cp = self.cp
        if host.size <= 16:
            # small host constants (scalars of a recorded program) are uploaded once: an
            # upload per realize would be a synchronous copy waiting for earlier kernels
            key = (host.dtype.str, host.shape, host.tobytes())
            found = dev.small.get(key)
            if found is None:
                # through an unsigned view: the bytes as they are (a 0-d float16 -0.0 is kept)
                bits = np.ascontiguousarray(host).view(f"u{host.dtype.itemsize}")
                found = dev.small[key] = cp.asarray(bits).view(host.dtype)
            return found
        try:
            # C order always (CuPy keeps a Fortran-ordered host array's order), so that an
            # upload's strides are known before it is made (fj.jit binds host arguments so)
            return cp.asarray(np.ascontiguousarray(host))
        except self._oom as exc:
            raise _out_of_memory(exc, dev.id, host.nbytes,
                                 f"copying a {host.dtype}{list(host.shape)} input there") from None

    def leaf_buffers(self, leaves: tuple[Any, ...]) -> list[Any]:
        """The buffers of a realize's leaves on the current device (scalar leaves: their
        values).

        Host data is copied to each device once: the leaf keeps its copies (``leaf.copies``,
        by device id) for later realizes and keeps its host array as its buffer.
        """
        dev = self.device()
        return [leaf.buffer if leaf.op == "scalar" else self._leaf_array(leaf, dev)[0]
                for leaf in leaves]

    def _leaf_array(self, leaf: Any, dev: _Device) -> tuple[Any, Any]:
        """An input leaf's array on ``dev`` and its specialization (``array_spec``), kept on
        the leaf (``leaf.copies``, by device id): host data is copied there once, CuPy
        arrays are used in place (one on another device is returned as it is, for the
        caller's device check; strides that are not whole elements get a contiguous copy)."""
        copies = leaf.copies
        if copies is not None:
            found = copies.get(dev.id)
            if found is not None:
                return found
        else:
            copies = leaf.copies = {}
        b = leaf.buffer
        if not isinstance(b, self.cp.ndarray):
            b = self._upload(np.asarray(b), dev)
        elif b.data.device_id != dev.id:
            return b, None  # not kept: an error for the caller
        entry = array_spec(b)
        if entry is None:
            b = self.cp.ascontiguousarray(b)
            entry = array_spec(b)
        found = copies[dev.id] = (b, _interned(entry))
        return found

    def execute_leaves(self, program: Program, leaves: tuple[Any, ...],
                       plan: Any = None) -> list[Any]:
        """``execute`` for a realize: the program's inputs are graph leaves, whose arrays and
        specializations are kept on the leaves (so a repeated realize computes neither).

        Per device, the program keeps the specialization of the leaves of its last realize
        and that specialization's runner: a realize whose leaves have the same one (the
        loop case) binds them and runs, with no specialization key built or looked up.
        """
        dev_id = self._get_device()
        bindings = program.__dict__.get(self._leaf_slot)
        found = bindings.get(dev_id) if bindings is not None else None
        if found is not None:
            want, run = found
            arrays: list[Any] = []
            append = arrays.append
            for leaf, spec in zip(leaves, want):
                if spec is None:  # a scalar param: its value
                    append(leaf.buffer)
                    continue
                copies = leaf.copies
                kept = copies.get(dev_id) if copies is not None else None
                if kept is None or kept[1] is not spec:
                    break  # another specialization, or not on this device yet
                append(kept[0])
            else:
                return run(arrays)  # (it names what it could not allocate)
        return self._execute_leaves(program, leaves, dev_id)

    def _execute_leaves(self, program: Program, leaves: tuple[Any, ...], dev_id: int
                        ) -> list[Any]:
        dev = self.device(dev_id)
        arrays: list[Any] = []
        spec: list[Any] = []
        for leaf in leaves:
            if leaf.op == "scalar":
                arrays.append(leaf.buffer)
                spec.append(None)
                continue
            array, entry = self._leaf_array(leaf, dev)
            if entry is None:  # on another device: the general path says which
                return self.execute(program, self.leaf_buffers(leaves), None)
            arrays.append(array)
            spec.append(entry)
        want = tuple(spec)
        try:
            run = self.plan_runner(program, want, dev)
            bindings = program.__dict__.get(self._leaf_slot)
            if bindings is None:
                bindings = program.__dict__.setdefault(self._leaf_slot, {})
            bindings[dev_id] = (want, run)
            return run(arrays)
        except self._oom as exc:
            raise _out_of_memory(exc, dev.id, _asked(exc), f"while running @{program.name}") \
                from None

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""
        if isinstance(buffer, np.ndarray):
            return buffer
        return self.cp.asnumpy(buffer)

    # -- programs ----------------------------------------------------------------------
    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[Any]:
        """Run the fused program on the current device; returns one CuPy array per output.

        Scalar params take their values (``buffers`` holds the value at their position).
        """
        dev = self.device()
        try:
            arrays, spec = self.bind(program, buffers, dev)
            return self.plan_runner(program, spec, dev)(arrays)
        except self._oom as exc:  # a copy or an allocation not named more precisely below
            raise _out_of_memory(exc, dev.id, _asked(exc), f"while running @{program.name}") \
                from None

    def bind(self, program: Program, buffers: list[Any], dev: _Device | None = None
             ) -> tuple[list[Any], tuple[Any, ...]]:
        """The arrays for a program's inputs on ``dev`` (host data uploaded, strides that are
        not whole elements made contiguous) and their specialization: per input, its element
        strides and 16-byte alignment, or None for a scalar param (``plan_runner``'s key)."""
        cp = self.cp
        if dev is None:
            dev = self.device()
        arrays: list[Any] = []
        spec: list[Any] = []
        for p, b in zip(program.inputs, buffers):
            if p.scalar:
                arrays.append(b)
                spec.append(None)
                continue
            if not isinstance(b, cp.ndarray):
                b = self._upload(np.asarray(b), dev)
            elif b.data.device_id != dev.id:
                raise self._device_error(program, buffers, dev.id)
            entry = array_spec(b)
            if entry is None:
                b = cp.ascontiguousarray(b)
                entry = array_spec(b)
            arrays.append(b)
            spec.append(entry)
        return arrays, tuple(spec)

    def _device_error(self, program: Program, arrays: list[Any], current: int) -> DeviceError:
        where: dict[int, list[str]] = {}
        for p, a in zip(program.inputs, arrays):
            if isinstance(a, self.cp.ndarray):
                where.setdefault(self.device_of(a), []).append(f"%{p.name}")
        devices = sorted(where)
        listing = "; ".join(f"device {d}: {', '.join(where[d])}" for d in devices)
        if len(devices) > 1:
            return DeviceError(
                f"@{program.name} mixes arrays from CUDA devices "
                f"{', '.join(map(str, devices[:-1]))} and {devices[-1]} ({listing}; the current "
                f"device is {current}); a program runs on one device: copy its inputs there "
                f"first (inside `with cupy.cuda.Device(i):`, `a.copy()` copies `a` to device i)")
        return DeviceError(
            f"the inputs of @{program.name} live on CUDA device {devices[0]} ({listing}) but the "
            f"current CuPy device is {current}: realize inside `with cupy.cuda.Device("
            f"{devices[0]}):`, or copy the inputs to device {current}")

    # -- a whole plan as one replay --------------------------------------------------
    def plan_runner(self, program: Program, spec: tuple[Any, ...], dev: _Device | None = None,
                    prepared: bool = False) -> Callable[[list[Any]], list[Any]]:
        """The replay of a fused program for inputs of specialization ``spec`` (``bind``).

        Built once per (program, device, spec) and kept on the Program: it holds every
        launch of every kernel, bound to slots (the inputs, then each kernel's results and
        scratch), so a replay converts the scalar params (not when ``prepared``: the caller
        passes them as ``codegen.lowering.scalar_arg`` makes them), allocates the results
        and launches, with no per-kernel lookup.
        """
        if dev is None:
            dev = self.device()
        key = (dev.id, spec, prepared)
        cache = program.__dict__.get(self._slot)
        if cache is None:
            cache = program.__dict__.setdefault(self._slot, {})
        runner = cache.get(key)
        if runner is None:
            with self._lock:
                runner = cache.get(key)
                if runner is None:
                    runner = cache[key] = self._build_plan(program, spec, dev, prepared)
        return runner

    def _build_plan(self, program: Program, spec: tuple[Any, ...], dev: _Device,
                    prepared: bool = False) -> Callable[[list[Any]], list[Any]]:
        n_in = len(program.inputs)
        slot_of = {p.name: i for i, p in enumerate(program.inputs)}
        slot_spec: list[Any] = list(spec)
        scalars = [] if prepared else \
            [(i, SCALAR_ARG[p.type.dtype][0].type, p.type.dtype)
             for i, p in enumerate(program.inputs) if p.scalar and p.type.dtype != np.uint64]
        if not prepared:  # uint64 travels as its bits: always converted
            scalars += [(i, None, p.type.dtype) for i, p in enumerate(program.inputs)
                        if p.scalar and p.type.dtype == np.uint64]
        allocs: list[tuple[int, tuple[int, ...], np.dtype, str]] = []
        #: (slot, number of int32 counters) of each kernel that counts (``EmittedKernel.counters``)
        counter_slots: list[tuple[int, int]] = []
        launches: list[tuple[Any, ...]] = []
        pitch_of: dict[int, int] = {}
        null_slot = n_in  # a slot that always holds None (Triton's trailing scratch pointers)
        slot_spec.append(None)

        def new_slot(shape: tuple[int, ...], dtype: np.dtype, what: str, pitch: int = 0) -> int:
            allocs.append((len(slot_spec), shape, dtype, what))
            if pitch:  # rows padded in memory (a kernel's row_pitch): a view of a wider array
                pitch_of[len(slot_spec)] = pitch
            # fresh: contiguous (along padded rows), aligned
            slot_spec.append((contiguous_strides(pitched(shape, pitch)), True))
            return len(slot_spec) - 1

        for kernel in program.body:  # a plan's program holds kernel blocks only
            arg_slots = [slot_of[a] for a in kernel.args]
            info = self._kernel_info(kernel, tuple(slot_spec[i] for i in arg_slots), dev)
            what = f"allocating the outputs of kernel {kernel.name}"
            res_slots = [new_slot(shape, dtype, what, kernel.row_pitch)
                         for shape, dtype in info.out_types]
            scratch_slots = [new_slot((n,), dtype, what) for dtype, n in info.scratch]
            counters = []
            if info.counters:  # bound per stream at each run, never allocated per run
                counters.append(len(slot_spec))
                counter_slots.append((len(slot_spec), info.counters))
                slot_spec.append(((1,), True))
            groups = (arg_slots, res_slots, scratch_slots, counters)
            for fn, grid, block, shared, selectors, n_nulls, global_scratch, kinds in info.launches:
                nulls = [null_slot] * n_nulls
                if global_scratch:  # TMA descriptors made by the kernel live there
                    nulls[0] = new_slot((global_scratch,), np.dtype(np.uint8), what)
                sel = tuple([groups[g][i] for g, i in selectors] + nulls)
                launches.append((fn, grid, block, shared, sel, kinds))
            slot_of.update(zip(kernel.results, res_slots))
        outputs = [(slot_of[name], slot_of[name] < n_in) for name in program.outputs]
        n_slots = len(slot_spec)
        pad = [None] * (n_slots - n_in)
        empty, oom, device_id, name = self.cp.empty, self._oom, dev.id, program.name
        stream_of, held = self.cp.cuda.get_current_stream, {}
        sizes = [n for _, n in counter_slots]
        # per launch: a callable of (slots, stream handle); through the driver's
        # cuLaunchKernel with a parameter block built once (``_RawLaunch``) where CuPy has it
        launch_kernel = getattr(self.cp.cuda.driver, "launchKernel", None)
        bound = tuple(_RawLaunch(launch_kernel, fn, grid, block, shared, sel, kinds, null_slot)
                      if launch_kernel is not None and _RawLaunch.takes(kinds) else
                      _CupyLaunch(fn, grid, block, shared, _getter(sel))
                      for fn, grid, block, shared, sel, kinds in launches)
        fresh = [(i, shape, dtype) for i, shape, dtype, _ in allocs if i not in pitch_of]
        # (``ir.program.empty_pitched``, its shape and view taken once here: the per-call loop)
        padded = [(i, pitched(shape, pitch_of[i]), dtype, (Ellipsis, slice(0, shape[-1])))
                  for i, shape, dtype, _ in allocs if i in pitch_of]
        single = outputs[0][0] if len(outputs) == 1 and not outputs[0][1] else None

        def run(arrays: list[Any]) -> list[Any]:
            slots = arrays + pad
            for i, carrier, dtype in scalars:
                if type(slots[i]) is not carrier:
                    slots[i] = scalar_arg(slots[i], dtype)
            stream = stream_of().ptr  # (the launches' and the counters' stream)
            try:
                if counter_slots:
                    bufs = held.get(stream) or self._counters(held, sizes)
                    for (i, _), buf in zip(counter_slots, bufs):
                        slots[i] = buf
                for i, shape, dtype in fresh:
                    slots[i] = empty(shape, dtype)
                for i, shape, dtype, rows in padded:
                    slots[i] = empty(shape, dtype)[rows]
            except oom as exc:
                raise _out_of_memory(exc, device_id, _asked(exc), _failed_alloc(allocs, slots)) \
                    from None
            for launch in bound:
                launch(slots, stream)
            if single is not None:
                return [slots[single]]
            try:  # (an output that is an input is returned as a copy)
                return [slots[i].copy() if is_input else slots[i] for i, is_input in outputs]
            except oom as exc:
                raise _out_of_memory(exc, device_id, _asked(exc), f"while running @{name}") \
                    from None

        run.counters = held  # type: ignore[attr-defined]  (read by checks: left zero?)
        return run

    def _counters(self, held: dict[int, list[Any]], sizes: list[int]) -> list[Any]:
        """The counter buffers of ``sizes`` for the current stream, zeroed on first use on it
        and kept in ``held`` (by stream handle): see Counters in the module docstring."""
        cp = self.cp
        bufs = [cp.zeros(n, np.int32) for n in sizes]
        return held.setdefault(cp.cuda.get_current_stream().ptr, bufs)

    # -- one region ----------------------------------------------------------------
    def run_kernel(self, kernel: Kernel, args: list[Any], dev: _Device | None = None) -> list[Any]:
        """Launch one region on ``dev`` (default: the current device); returns its result arrays."""
        cp = self.cp
        if dev is None:
            dev = self.device()
        spec: list[Any] = []
        for i, (a, p) in enumerate(zip(args, kernel.params)):
            if p.scalar:
                spec.append(None)
                args[i] = scalar_arg(a, p.type.dtype)
                continue
            entry = array_spec(a)
            if entry is None:
                a = args[i] = cp.ascontiguousarray(a)
                entry = array_spec(a)
            spec.append(entry)
        info = self._kernel_info(kernel, tuple(spec), dev)
        try:
            outs, launch = self.bind_launches(info, args)
        except self._oom as exc:
            raise _out_of_memory(exc, dev.id, info.asked,
                                 f"allocating the outputs of kernel {kernel.name}") from None
        launch()
        return outs

    def bind_launches(self, info: _KernelInfo, args: list[Any]
                      ) -> tuple[list[Any], Callable[[], None]]:
        """New result arrays for one region's launches on ``args``, and a function that
        launches them all (again at each call, into the same results: autotune times it)."""
        cp = self.cp
        outs = [empty_pitched(cp.empty, s, d, info.row_pitch) for s, d in info.out_types]
        scratch = [cp.empty(n, d) for d, n in info.scratch]
        counters = []
        if info.counters:  # split kernels' counters: zeroed once per stream, then reused
            counters = info.held.get(cp.cuda.get_current_stream().ptr) or \
                self._counters(info.held, [info.counters])
        groups = (args, outs, scratch, counters)
        calls = []
        for fn, grid, block, shared, selectors, n_nulls, global_scratch, _ in info.launches:
            nulls: list[Any] = [None] * n_nulls
            if global_scratch:  # TMA descriptors made by the kernel live there
                nulls[0] = cp.empty(global_scratch, np.uint8)
            calls.append((fn, grid, block, [groups[g][i] for g, i in selectors] + nulls, shared))

        def launch() -> None:
            for fn, grid, block, bound, shared in calls:
                fn(grid, block, bound, shared_mem=shared)
        return outs, launch

    def _kernel_info(self, kernel: Kernel, spec: tuple[Any, ...], dev: _Device) -> _KernelInfo:
        """The launches of one region for arguments of ``spec`` on ``dev`` (emitted, compiled
        and loaded on first use; structurally equal Kernel objects share them)."""
        key = (dev.id, spec)
        cache = kernel.__dict__.get(self._slot)
        if cache is None:
            cache = kernel.__dict__.setdefault(self._slot, {})
        info = cache.get(key)
        if info is None:
            with self._lock:  # one build at a time: a kernel several threads need is built once
                skey = (kc.kernel_key(kernel), key)
                info = self._runners.get(skey)
                if info is None:
                    info = self._runners[skey] = self._build(kernel, spec, dev)
                cache[key] = info
        return info

    def _build(self, kernel: Kernel, spec: tuple[Any, ...], dev: _Device) -> _KernelInfo:
        out_types = tuple((t.shape, t.dtype) for t in kernel.result_types)
        if all(int(np.prod(s)) == 0 for s, _ in out_types):
            return _KernelInfo(out_types, (), (), 0, 0)
        strides = tuple(() if s is None else s[0] for s in spec)
        emitted = kc.emitted_for(kernel, strides, "cuda")
        source_kernel = kernel
        if any(not spec[i][1] for i in emitted.windowed):
            # a row window reads the words around each row: inside the buffer only when it
            # starts on a 16-byte boundary (triton_emitter._Emitter._row_window)
            source_kernel = replace(kernel, attrs={**kernel.attrs, "window": 0})
            emitted = kc.emitted_for(source_kernel, strides, "cuda")
        persistent = emitted.auto_persistent  # by the heuristic's choice (gemm.py)
        if emitted.auto_tma:  # (persistent or not)
            fix = self._persistence_fix(emitted, spec, dev)
            if fix:
                persistent = bool(fix["programs"])
                source_kernel = replace(kernel, attrs={**kernel.attrs, **fix})
                emitted = kc.emitted_for(source_kernel, strides, "cuda")
        if persistent and any(
                compile_launch(emitted, launch, self._divisible(launch, spec), dev.cc).shared
                > dev.max_shared for launch in emitted.launches):
            # the heuristic's persistent loop keeps the next tile's loads in shared memory
            # while this tile's epilogue converts its accumulator there too: past the device's
            # limit (a TF32 7100x5649x4056 product of 256x128 tiles asked 278,552 bytes of
            # 232,448 on the H200, an unseen GEMM draw), one program per tile instead
            persistent = False
            source_kernel = replace(kernel, attrs={**kernel.attrs, "tma": 0, "programs": 0})
            emitted = kc.emitted_for(source_kernel, strides, "cuda")
        written_persistent = bool(kernel.attrs.get("programs"))  # (left as written)
        if emitted.relayable and not written_persistent and any(
                compile_launch(emitted, launch, self._divisible(launch, spec), dev.cc)
                .serialized_mma for launch in emitted.launches):
            # ptxas serialized the GEMM's main loop for its epilogue: the epilogue reads the
            # product back from its output instead (gemm.py, _relay_output), one program per
            # tile: in a persistent kernel's loop the relay ran at 224-235 TFLOP/s (H200, the
            # MLP's first layer) against 592 not relayed; a persistent kernel the user wrote
            # (programs=P) is left as written
            relay = {"relay": 1, **({"tma": 0, "programs": 0} if persistent else {})}
            source_kernel = replace(source_kernel, attrs={**source_kernel.attrs, **relay})
            emitted = kc.emitted_for(source_kernel, strides, "cuda")
        if emitted.epilogue_splittable:
            source_kernel, emitted = self._epilogue_split_if_spilled(source_kernel, emitted,
                                                                     strides, spec, dev)
        if len(emitted.candidates) > 1 and autotune.enabled():
            emitted = autotune.tuned(self, source_kernel, spec, dev, emitted)
        return self.kernel_info(kernel, emitted, spec, dev)

    def _epilogue_split_if_spilled(self, kernel: Kernel, emitted: Any, strides: tuple[Any, ...],
                                   spec: tuple[Any, ...], dev: _Device) -> tuple[Kernel, Any]:
        """A GEMM whose compiled kernel spills registers, emitted again with its epilogue in
        slices of the tile's columns (``heuristics.GEMM_EPILOGUE_SPLIT_SPILLED``), which is
        kept where it spills less: a 128 x 256 tile whose epilogue loads and stores one
        element at a time held every element's address at once (``gemm.py``,
        ``_epilogue_slices``)."""
        def stack(e: Any) -> int:
            return max(stack_bytes(compile_launch(e, launch, self._divisible(launch, spec),
                                                  dev.cc)) for launch in e.launches)
        spilled = stack(emitted)
        if not spilled:
            return kernel, emitted
        split = replace(kernel, attrs={**kernel.attrs,
                                       "epilogue_split": heuristics.GEMM_EPILOGUE_SPLIT_SPILLED})
        again = kc.emitted_for(split, strides, "cuda")
        return (split, again) if stack(again) < spilled else (kernel, emitted)

    @staticmethod
    def _persistence_fix(emitted: Any, spec: tuple[Any, ...], dev: _Device) -> dict[str, int]:
        """The attributes a GEMM the heuristic gave TMA loads (persistent or not) needs on
        these arguments and this device: none, or ``tma=0 programs=0`` when a buffer it reads
        through TMA does not start on a 16-byte boundary (an offset view), or one program per
        SM when the device has fewer SMs than the heuristic's programs (or tiles)."""
        if any(not spec[i][1] for i in emitted.aligned):
            return {"tma": 0, "programs": 0}
        if emitted.launches[0].grid[0] > dev.sms:
            return {"tma": 1, "programs": dev.sms}
        return {}

    @staticmethod
    def _divisible(launch: Any, spec: tuple[Any, ...]) -> tuple[bool, ...]:
        """Per argument of ``launch``: is its buffer 16-byte aligned? (Outputs and scratch
        are fresh CuPy allocations, 256-byte aligned; inputs as ``spec`` says.)"""
        return tuple((spec[i] is not None and spec[i][1]) if kind == "in" else True
                     for kind, i in launch.args)

    def kernel_info(self, kernel: Kernel, emitted: Any, spec: tuple[Any, ...],
                    dev: _Device) -> _KernelInfo:
        """The launches of ``emitted`` (one emission of ``kernel``) for arguments of ``spec``
        on ``dev``: compiled (cached on disk) and loaded."""
        out_types = tuple((t.shape, t.dtype) for t in kernel.result_types)
        for i in emitted.aligned:
            if not spec[i][1]:
                raise BackendError(
                    f"kernel {kernel.name} reads %{kernel.params[i].name} through TMA (tma=1), "
                    f"which needs its buffer to start on a 16-byte boundary; this one does not "
                    f"(an offset view): remove tma=1 or pass an aligned copy")
        launches = tuple(self._prepare(emitted, launch, spec, dev) for launch in emitted.launches)
        scratch = tuple(emitted.scratch)
        asked = (sum(_nbytes(pitched(s, kernel.row_pitch), d) for s, d in out_types)
                 + sum(_nbytes((n,), d) for d, n in scratch))
        return _KernelInfo(out_types, scratch, launches, asked, emitted.counters, kernel.row_pitch)

    def _prepare(self, emitted: Any, launch: Any, spec: tuple[Any, ...],
                 dev: _Device) -> tuple[Any, ...]:
        # outputs and scratch are fresh CuPy allocations: always 256-byte aligned; scalar
        # params are values (never marked divisible)
        selectors = [({"in": 0, "out": 1, "scratch": 2, "counters": 3}[kind], i)
                     for kind, i in launch.args]
        compiled = compile_launch(emitted, launch, self._divisible(launch, spec), dev.cc)
        mkey = (compiled.cubin, compiled.name)
        loaded = dev.modules.get(mkey)
        if loaded is None:
            loaded = dev.modules[mkey] = self._load(compiled, dev)
        block = (32 * compiled.num_warps, 1, 1)
        n_nulls = compiled.n_params - compiled.n_args
        # global scratch: one slice per program (CuPy's allocations are 256-byte aligned)
        programs = launch.grid[0] * launch.grid[1] * launch.grid[2]
        global_scratch = compiled.scratch * programs if n_nulls else 0
        if compiled.scratch_align > 256:
            raise BackendError(f"kernel {compiled.name} asks for global scratch aligned to "
                               f"{compiled.scratch_align} bytes (CuPy gives 256)")
        # each parameter's type: the signature's, in the order of the launch's arguments, then
        # Triton's trailing scratch pointers (``_RawLaunch`` packs the parameters by them)
        assert len(launch.signature) == len(selectors), launch.fn_name
        kinds = tuple(launch.signature.values()) + ("*",) * n_nulls
        return (loaded[1], launch.grid, block, compiled.shared, tuple(selectors), n_nulls,
                global_scratch, kinds)

    def _load(self, compiled: Any, dev: _Device) -> tuple[Any, Any]:
        """Load a cubin into the current device's context (which is ``dev``'s)."""
        cp = self.cp
        if compiled.shared > dev.max_shared:
            raise BackendError(
                f"kernel {compiled.name} needs {compiled.shared} bytes of shared memory per "
                f"program; CUDA device {dev.id} allows {dev.max_shared}: fewer stages "
                f"(num_stages) or smaller tiles")
        module = cp.cuda.function.Module()
        try:
            module.load(compiled.cubin)
            fn = module.get_function(compiled.name)
            if compiled.shared > _MAX_STATIC_SHARED:
                drv = cp.cuda.driver
                attr = getattr(drv, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
                drv.funcSetAttribute(fn.ptr, attr, compiled.shared)
        except cp.cuda.driver.CUDADriverError as exc:
            raise BackendError(f"CUDA device {dev.id} (compute capability {dev.cc // 10}."
                               f"{dev.cc % 10}) cannot load kernel {compiled.name}: {exc}") from None
        return module, fn


class _KernelInfo:
    """One region's launches for one argument specialization: result and scratch types, and
    per launch (function, grid, block, shared memory, argument selectors, trailing NULLs);
    its number of counters and, for ``run_kernel``, their buffers by stream handle."""

    __slots__ = ("out_types", "scratch", "launches", "asked", "counters", "held", "row_pitch")

    def __init__(self, out_types: tuple, scratch: tuple, launches: tuple, asked: int,
                 counters: int, row_pitch: int = 0) -> None:
        self.out_types, self.scratch, self.launches, self.asked = out_types, scratch, launches, asked
        self.counters, self.row_pitch = counters, row_pitch
        self.held: dict[int, list[Any]] = {}


#: array specializations met, one object each (``execute_leaves`` compares them by identity)
_SPECS: dict[tuple[tuple[int, ...], bool], tuple[tuple[int, ...], bool]] = {}


def _interned(spec: tuple[tuple[int, ...], bool]) -> tuple[tuple[int, ...], bool]:
    """The one object for ``spec`` (past 4096 of them the table starts again: leaves that
    keep an older object then take the general path once, which binds their objects)."""
    found = _SPECS.get(spec)
    if found is None:
        if len(_SPECS) >= 4096:
            _SPECS.clear()
        found = _SPECS.setdefault(spec, spec)
    return found


class _CupyLaunch:
    """One launch through CuPy's ``Function.__call__`` (its arguments taken from the slots)."""

    __slots__ = ("fn", "grid", "block", "shared", "args")

    def __init__(self, fn: Any, grid: tuple[int, ...], block: tuple[int, ...], shared: int,
                 args: Callable[[list[Any]], tuple[Any, ...]]) -> None:
        self.fn, self.grid, self.block, self.shared, self.args = fn, grid, block, shared, args

    def __call__(self, slots: list[Any], stream: int) -> None:
        # (CuPy's launch goes on the current stream, whose handle ``stream`` is)
        self.fn(self.grid, self.block, self.args(slots), shared_mem=self.shared)


#: Parameter types of a Triton signature that are not pointers -> the NumPy type of their
#: value (``codegen.lowering.SCALAR_ARG``'s carriers)
_SCALAR_PARAM = {"fp32": np.float32, "fp64": np.float64, "i32": np.int32, "i64": np.int64}


class _RawLaunch:
    """One launch through the driver's ``cuLaunchKernel`` (CuPy's ``driver.launchKernel``)
    with its parameter block built once per thread: an 8-byte cell per parameter and the
    array of the cells' addresses the driver reads. A launch writes the values that change
    (the buffers' device pointers, the scalar params) into the cells and launches. CuPy's
    ``Function.__call__`` builds an argument object per argument per launch: 6.0 us for the
    5-op program's kernel on the H200 machine's host, where ``cupy.fuse``'s whole call took
    10.8 (``bench/diag_dispatch.py``). The driver copies the parameters when it is called,
    so the cells may change as soon as it returns; CuPy releases the GIL around the call, so
    each thread writes a block of its own (a lock around the writes and the call cost more
    than the rest of the launch's Python: 0.15 to 0.3 us against a thread-local's 0.05)."""

    __slots__ = ("launch_kernel", "fn", "ptr", "grid", "block", "shared", "sel", "kinds",
                 "pointers", "local")

    def __init__(self, launch_kernel: Callable[..., Any], fn: Any, grid: tuple[int, ...],
                 block: tuple[int, ...], shared: int, sel: tuple[int, ...],
                 kinds: tuple[str, ...], null_slot: int) -> None:
        self.launch_kernel, self.fn, self.ptr = launch_kernel, fn, int(fn.ptr)
        self.grid, self.block, self.shared, self.sel = tuple(grid), tuple(block), shared, sel
        self.kinds = kinds
        #: (cell, slot) of each pointer parameter (a null pointer's cell stays 0)
        self.pointers = tuple((j, i) for j, (i, kind) in enumerate(zip(sel, kinds))
                              if kind.startswith("*") and i != null_slot)
        self.local = threading.local()

    @staticmethod
    def takes(kinds: tuple[str, ...]) -> bool:
        """Whether a launch of these parameter types can go this way (pointers and
        ``_SCALAR_PARAM``'s scalars; CuPy's ``Function`` call passes anything else)."""
        return bool(kinds) and all(k.startswith("*") or k in _SCALAR_PARAM for k in kinds)

    def _params(self) -> tuple[Any, ...]:
        """The calling thread's parameter block: its cells, per scalar (view of the cells as
        the value's type, index in that view, slot), the address of the cells' addresses (and
        the array holding those, kept alive with the block)."""
        n = max(1, len(self.sel))
        cells = np.zeros(n, np.uint64)
        addresses = cells.ctypes.data + 8 * np.arange(n, dtype=np.uint64)
        views = {kind: cells.view(t) for kind, t in _SCALAR_PARAM.items()}
        scalars = []
        for j, (i, kind) in enumerate(zip(self.sel, self.kinds)):
            if not kind.startswith("*"):
                view = views[kind]
                scalars.append((view, j * 8 // view.itemsize, i))
        params = self.local.params = (cells, tuple(scalars), int(addresses.ctypes.data),
                                      addresses)
        return params

    def __call__(self, slots: list[Any], stream: int) -> None:
        try:
            cells, scalars, addresses, _ = self.local.params
        except AttributeError:  # this thread's first launch
            cells, scalars, addresses, _ = self._params()
        for j, i in self.pointers:
            cells[j] = slots[i].data.ptr
        for view, k, i in scalars:
            view[k] = slots[i]
        (gx, gy, gz), (bx, by, bz) = self.grid, self.block
        self.launch_kernel(self.ptr, gx, gy, gz, bx, by, bz, self.shared, stream, addresses, 0)


def _getter(sel: tuple[int, ...]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """The function taking a launch's arguments (slots ``sel``) from a list of slots."""
    if len(sel) == 1:
        i = sel[0]
        return lambda slots: (slots[i],)
    if not sel:
        return lambda slots: ()
    return operator.itemgetter(*sel)


def array_spec(array: Any) -> tuple[tuple[int, ...], bool] | None:
    """A device array's specialization: element strides and whether its data pointer is
    16-byte aligned (None when a stride is not a whole number of elements)."""
    itemsize = array.itemsize
    strides = array.strides
    for st in strides:
        if st % itemsize:
            return None
    return tuple([st // itemsize for st in strides]), array.data.ptr % 16 == 0


def _failed_alloc(allocs: list[tuple[int, tuple[int, ...], np.dtype, str]], slots: list[Any]) -> str:
    """What was being allocated when CuPy ran out of memory (the first slot still empty)."""
    for i, _, _, what in allocs:
        if slots[i] is None:
            return what
    return "allocating kernel outputs"


def _asked(exc: BaseException) -> int | None:
    """The bytes a CuPy ``OutOfMemoryError`` says were asked for (None when it does not say)."""
    m = re.search(r"allocating ([\d,]+) bytes", str(exc))
    return int(m.group(1).replace(",", "")) if m else None
