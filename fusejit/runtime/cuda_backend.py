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

Caching: per Kernel object (and backend instance), a dict from (device, buffer
specialization: the strides and 16-byte alignment of each argument) to a
pre-bound launcher, so a repeated ``realize`` does a few dict lookups,
allocations and launches.

Threads: the backend is shared by all threads. Cache hits take no lock;
building a launcher (emit, compile, load) holds the backend's lock, so a
kernel that several threads need at once is built once. Each thread launches
on its own current device and stream (CuPy keeps both per thread).

Errors: a missing CuPy or Triton, no GPU, or a GPU older than
``MIN_COMPUTE_CAPABILITY`` raise ``BackendUnavailableError`` naming what is
missing and which backends would work; CuPy running out of device memory is
a ``DeviceMemoryError`` naming the device and the bytes asked for.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import BackendError, DeviceError, DeviceMemoryError
from ..ir.program import Kernel, Program
from . import kernel_cache as kc
from .compile import compile_launch

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

    __slots__ = ("id", "cc", "modules", "small")

    def __init__(self, device_id: int, cc: int) -> None:
        self.id = device_id
        self.cc = cc
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
        self._runners: dict[Any, Callable[[list[Any]], list[Any]]] = {}
        self._oom: type[BaseException] = cp.cuda.memory.OutOfMemoryError
        #: the attribute of a Kernel holding this instance's launchers (per instance: a
        #: launcher holds functions loaded by this instance's CuPy)
        self._slot = f"_fusejit_cuda{next(_INSTANCES)}"
        self.device()  # the current device is checked now (a GPU too old is refused here)

    # -- devices -------------------------------------------------------------------
    def device(self, device_id: int | None = None) -> _Device:
        """The per-device state of ``device_id`` (default: CuPy's current device)."""
        if device_id is None:
            device_id = int(self.cp.cuda.runtime.getDevice())
        found = self._devices.get(device_id)
        if found is not None:
            return found
        with self._lock:
            found = self._devices.get(device_id)
            if found is None:
                found = self._devices[device_id] = _Device(device_id, self._check_device(device_id))
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
            return cp.asarray(host)
        except self._oom as exc:
            raise _out_of_memory(exc, dev.id, host.nbytes,
                                 f"copying a {host.dtype}{list(host.shape)} input there") from None

    def leaf_buffers(self, leaves: tuple[Any, ...]) -> list[Any]:
        """The buffers of a realize's leaves on the current device.

        Host data is copied to each device once: the leaf keeps its copies (``leaf.copies``,
        by device id) for later realizes and keeps its host array as its buffer.
        """
        cp = self.cp
        out = []
        dev: _Device | None = None
        for leaf in leaves:
            b = leaf.buffer
            if not isinstance(b, cp.ndarray):
                if dev is None:
                    dev = self.device()
                copies = leaf.copies
                if copies is None:
                    copies = leaf.copies = {}
                on_device = copies.get(dev.id)
                if on_device is None:
                    on_device = copies[dev.id] = self._upload(np.asarray(b), dev)
                b = on_device
            out.append(b)
        return out

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""
        if isinstance(buffer, np.ndarray):
            return buffer
        return self.cp.asnumpy(buffer)

    def current_stream(self) -> Any:
        """CuPy's current stream (of this thread and the current device): what kernels launch on."""
        return self.cp.cuda.get_current_stream()

    # -- programs ----------------------------------------------------------------------
    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[Any]:
        """Run the fused program on the current device; returns one CuPy array per output."""
        cp = self.cp
        dev = self.device()
        try:
            arrays = [b if isinstance(b, cp.ndarray) else self._upload(np.asarray(b), dev)
                      for b in buffers]
            for a in arrays:
                if a.data.device_id != dev.id:
                    raise self._device_error(program, arrays, dev.id)
            env = {p.name: a for p, a in zip(program.inputs, arrays)}
            inputs = {id(a) for a in arrays}
            for kernel in program.body:  # a plan's program holds kernel blocks only
                results = self.run_kernel(kernel, [env[a] for a in kernel.args], dev)
                env.update(zip(kernel.results, results))
            outs = []
            for name in program.outputs:
                value = env[name]
                if id(value) in inputs:
                    value = value.copy()
                outs.append(value)
            return outs
        except self._oom as exc:  # a copy or an allocation not named more precisely below
            raise _out_of_memory(exc, dev.id, _asked(exc), f"while running @{program.name}") \
                from None

    def _device_error(self, program: Program, arrays: list[Any], current: int) -> DeviceError:
        where: dict[int, list[str]] = {}
        for p, a in zip(program.inputs, arrays):
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

    # -- one region ----------------------------------------------------------------
    def run_kernel(self, kernel: Kernel, args: list[Any], dev: _Device | None = None) -> list[Any]:
        """Launch one region on ``dev`` (default: the current device); returns its result arrays."""
        cp = self.cp
        if dev is None:
            dev = self.device()
        spec = []
        for i, a in enumerate(args):
            itemsize = a.itemsize
            st = a.strides
            if any(s % itemsize for s in st):
                a = cp.ascontiguousarray(a)
                args[i] = a
                st = a.strides
            spec.append((tuple(s // itemsize for s in st), a.data.ptr % 16 == 0))
        key = (dev.id, tuple(spec))
        cache = kernel.__dict__.get(self._slot)
        if cache is None:
            cache = kernel.__dict__.setdefault(self._slot, {})
        runner = cache.get(key)
        if runner is None:
            with self._lock:  # one build at a time: a kernel several threads need is built once
                # a structurally equal Kernel object (a plan rebuilt by the fuser) reuses the runner
                skey = (kc.kernel_key(kernel), key)
                runner = self._runners.get(skey)
                if runner is None:
                    runner = self._runners[skey] = self._build(kernel, key[1], dev)
                cache[key] = runner
        return runner(args)

    def _build(self, kernel: Kernel, spec: tuple[Any, ...],
               dev: _Device) -> Callable[[list[Any]], list[Any]]:
        cp = self.cp
        out_types = [(t.shape, t.dtype) for t in kernel.result_types]
        if all(int(np.prod(s)) == 0 for s, _ in out_types):
            return lambda args: [cp.empty(s, d) for s, d in out_types]
        strides = tuple(s for s, _ in spec)
        emitted = kc.emitted_for(kernel, strides, "cuda")
        for i in emitted.aligned:
            if not spec[i][1]:
                raise BackendError(
                    f"kernel {kernel.name} reads %{kernel.params[i].name} through TMA (tma=1), "
                    f"which needs its buffer to start on a 16-byte boundary; this one does not "
                    f"(an offset view): remove tma=1 or pass an aligned copy")
        scratch_specs = list(emitted.scratch)
        launches = []
        for launch in emitted.launches:
            launches.append(self._prepare(emitted, launch, spec, dev))
        empty = cp.empty
        oom = self._oom
        asked = (sum(_nbytes(s, d) for s, d in out_types)
                 + sum(_nbytes((n,), d) for d, n in scratch_specs))
        what = f"allocating the outputs of kernel {kernel.name}"
        device_id = dev.id

        def run(args: list[Any]) -> list[Any]:
            try:
                outs = [empty(s, d) for s, d in out_types]
                scratch = [empty(n, d) for d, n in scratch_specs]
            except oom as exc:
                raise _out_of_memory(exc, device_id, asked, what) from None
            groups = (args, outs, scratch)
            for fn, grid, block, shared, selectors, nulls, global_scratch in launches:
                bound = [groups[g][i] for g, i in selectors]
                if global_scratch:  # TMA descriptors made by the kernel live there
                    nulls = [empty(global_scratch, np.uint8)] + nulls[1:]
                fn(grid, block, bound + nulls, shared_mem=shared)
            return outs

        return run

    def _prepare(self, emitted: Any, launch: Any, spec: tuple[Any, ...],
                 dev: _Device) -> tuple[Any, ...]:
        # outputs and scratch are fresh CuPy allocations: always 256-byte aligned
        divisible = []
        selectors = []
        for kind, i in launch.args:
            g = {"in": 0, "out": 1, "scratch": 2}[kind]
            selectors.append((g, i))
            divisible.append(spec[i][1] if kind == "in" else True)
        compiled = compile_launch(emitted, launch, tuple(divisible), dev.cc)
        mkey = (compiled.cubin, compiled.name)
        loaded = dev.modules.get(mkey)
        if loaded is None:
            loaded = dev.modules[mkey] = self._load(compiled, dev)
        nulls = [None] * (compiled.n_params - compiled.n_args)
        block = (32 * compiled.num_warps, 1, 1)
        # global scratch: one slice per program (CuPy's allocations are 256-byte aligned)
        programs = launch.grid[0] * launch.grid[1] * launch.grid[2]
        global_scratch = compiled.scratch * programs if nulls else 0
        if compiled.scratch_align > 256:
            raise BackendError(f"kernel {compiled.name} asks for global scratch aligned to "
                               f"{compiled.scratch_align} bytes (CuPy gives 256)")
        return (loaded[1], launch.grid, block, compiled.shared, selectors, nulls, global_scratch)

    def _load(self, compiled: Any, dev: _Device) -> tuple[Any, Any]:
        """Load a cubin into the current device's context (which is ``dev``'s)."""
        cp = self.cp
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


def _asked(exc: BaseException) -> int | None:
    """The bytes a CuPy ``OutOfMemoryError`` says were asked for (None when it does not say)."""
    m = re.search(r"allocating ([\d,]+) bytes", str(exc))
    return int(m.group(1).replace(",", "")) if m else None
