"""A stand-in for CuPy, backed by NumPy, to test the ``cuda`` backend's host logic without a GPU.

It has the surface ``fusejit.runtime.cuda_backend`` touches: arrays that know
their device, a per-thread current device (``with cp.cuda.Device(i):``), device
counts and compute capabilities, a memory limit per device that raises CuPy's
``OutOfMemoryError``, and ``Module``/``Function`` objects that remember the
device they were loaded on and refuse launches from another one or with arrays
of another device (as CUDA does). Kernels do not compute anything: launches
are recorded in ``launches`` (tests check where they ran, not their values),
and the stream of each in ``launch_streams``.

Autotuning: ``ones``, basic slicing and ``lib.stride_tricks.as_strided`` (for the
scratch arguments candidates are timed on; the timing itself is injected by the tests).

Interop: streams (``cp.cuda.Stream``, a per-thread current stream, ``Stream.null``
with pointer 0), arrays exporting ``__cuda_array_interface__`` (naming the current
stream, as CuPy does) and DLPack (each export recorded in ``dlpack_exports`` as
``(consumer stream argument, current stream pointer)``), ``from_dlpack`` and
``asarray`` of an object exporting ``__cuda_array_interface__``, both sharing the
exporter's memory (fake device memory is host memory).

Install it with ``monkeypatch.setitem(sys.modules, "cupy", FakeCupy(...))``.
"""

from __future__ import annotations

import itertools
import threading
import types
from typing import Any

import numpy as np


class OutOfMemoryError(MemoryError):
    """CuPy's ``cupy.cuda.memory.OutOfMemoryError`` (same constructor and message)."""

    def __init__(self, size: int, total: int, limit: int = 0) -> None:
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes).")


class CUDARuntimeError(RuntimeError):
    """CuPy's ``cupy.cuda.runtime.CUDARuntimeError``."""


class CUDADriverError(RuntimeError):
    """CuPy's ``cupy.cuda.driver.CUDADriverError``."""


class _Pointer:
    def __init__(self, host: np.ndarray, device_id: int) -> None:
        self.ptr = int(host.__array_interface__["data"][0])
        self.device_id = device_id


class _HostView:
    """A CUDA array interface seen as NumPy's array interface (fake device memory is host
    memory): ``np.asarray`` of it shares the exporter's memory and keeps ``owner`` alive."""

    def __init__(self, cai: dict[str, Any], owner: Any) -> None:
        self.owner = owner
        self.__array_interface__ = {"shape": tuple(cai["shape"]), "typestr": cai["typestr"],
                                    "data": cai["data"], "strides": cai.get("strides"),
                                    "version": 3}


class FakeCupy(types.ModuleType):
    """A fake ``cupy`` module: ``devices`` gives each device's compute capability."""

    def __init__(self, devices: tuple[int, ...] = (90,), memory: int | None = None,
                 count_error: Exception | None = None, raw_launch: bool = False) -> None:
        super().__init__("cupy")
        fake = self
        self.devices = list(devices)
        self.memory_limit = memory            # bytes per device (None: unlimited)
        self.sms = 132                        # SMs per device (an H100/H200's)
        self.allocated = [0] * len(devices)
        self.count_error = count_error        # raised by getDeviceCount (no driver, ...)
        self.launches: list[tuple[int, str, tuple[int, ...]]] = []
        #: the argument list of each launch, in order
        self.arguments: list[list[Any]] = []
        self.launch_args: list[tuple[Any, ...]] = []  # each launch's arguments
        self.loads: list[tuple[int, str]] = []
        self.uploads: list[tuple[int, tuple[int, ...]]] = []
        #: (device, stream handle, shape) of each ``zeros`` (a split reduction's counters)
        self.zeroed: list[tuple[int, int, tuple[int, ...]]] = []
        self.launch_streams: list[int] = []
        self.dlpack_exports: list[tuple[Any, int]] = []
        self.cai_imports: list[Any] = []  # the "stream" of each interface asarray took
        self._local = threading.local()
        serial = itertools.count(0x1000, 0x10)

        class ndarray:  # noqa: N801  (CuPy's name)
            """A NumPy array on a fake device."""

            def __init__(self, host: np.ndarray, device_id: int) -> None:
                self._host = host
                self.data = _Pointer(host, device_id)
                self.dtype, self.shape, self.strides = host.dtype, host.shape, host.strides
                self.itemsize, self.size = host.itemsize, host.size
                self.flags = types.SimpleNamespace(c_contiguous=host.flags.c_contiguous)

            @property
            def device(self) -> Any:
                return fake.cuda.Device(self.data.device_id)

            def copy(self) -> ndarray:
                return fake._new(self._host.copy())  # on the current device, as CuPy's copy

            def view(self, dtype: Any) -> ndarray:
                """The same memory seen as another dtype (on the same device), as CuPy's."""
                return ndarray(self._host.view(dtype), self.data.device_id)

            def get(self) -> np.ndarray:
                return self._host.copy()

            def __getitem__(self, index: Any) -> ndarray:
                """A basic-slicing view (same memory, same device), as CuPy's."""
                return ndarray(self._host[index], self.data.device_id)

            @property
            def __cuda_array_interface__(self) -> dict[str, Any]:
                host = self._host
                return {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr,
                        "data": (self.data.ptr if self.size else 0, False), "version": 3,
                        "strides": None if host.flags.c_contiguous else self.strides,
                        "stream": fake.cuda.get_current_stream().ptr or 1}  # 0 is disallowed

            def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
                fake.dlpack_exports.append((stream, fake.cuda.get_current_stream().ptr))
                return self._host.__dlpack__(**kwargs)

            def __dlpack_device__(self) -> tuple[int, int]:
                return (2, self.data.device_id)

        self.ndarray = ndarray

        class Stream:
            """``cupy.cuda.Stream``: ``with s:`` makes it the thread's current stream."""

            null: Stream

            def __init__(self, null: bool = False, non_blocking: bool = False) -> None:
                self.ptr = 0 if null else next(serial)
                self.non_blocking = non_blocking

            def use(self) -> Stream:
                fake._local.stream = self
                return self

            def synchronize(self) -> None:
                pass

            def __enter__(self) -> Stream:
                fake._local.__dict__.setdefault("streams", []).append(get_current_stream())
                return self.use()

            def __exit__(self, *exc: Any) -> None:
                fake._local.stream = fake._local.streams.pop()

        Stream.null = Stream(null=True)

        def get_current_stream() -> Stream:
            return getattr(fake._local, "stream", Stream.null)

        class Device:
            """``cupy.cuda.Device``: a context manager that makes a device current."""

            def __init__(self, device_id: int | None = None) -> None:
                self.id = fake.current() if device_id is None else device_id
                if not 0 <= self.id < len(fake.devices):
                    raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")

            @property
            def compute_capability(self) -> str:
                return str(fake.devices[self.id])

            def use(self) -> None:
                fake._local.device = self.id

            def __enter__(self) -> Device:
                stack = fake._local.__dict__.setdefault("stack", [])
                stack.append(fake.current())
                self.use()
                return self

            def __exit__(self, *exc: Any) -> None:
                fake._local.device = fake._local.stack.pop()

        class Function:
            def __init__(self, device_id: int, name: str) -> None:
                self.device_id, self.name, self.ptr = device_id, name, id(self)

            def __call__(self, grid: tuple[int, ...], block: tuple[int, ...], args: list[Any],
                         shared_mem: int = 0, stream: Any = None) -> None:
                if fake.current() != self.device_id:
                    raise CUDADriverError("CUDA_ERROR_INVALID_HANDLE: launched from another device")
                for a in args:
                    if isinstance(a, ndarray) and a.data.device_id != self.device_id:
                        raise CUDADriverError("CUDA_ERROR_ILLEGAL_ADDRESS: an array of another device")
                    if not (a is None or isinstance(a, (ndarray, np.generic))):
                        raise TypeError(f"Unsupported type {type(a)}")  # as CuPy's launcher
                fake.launches.append((self.device_id, self.name, tuple(grid)))
                fake.launch_streams.append((stream or get_current_stream()).ptr)
                fake.arguments.append(list(args))
                fake.launch_args.append(tuple(args))

        class Module:
            def __init__(self) -> None:
                self.device_id: int | None = None

            def load(self, cubin: bytes) -> None:
                if cubin[:4] != b"\x7fELF":
                    raise CUDADriverError("CUDA_ERROR_INVALID_IMAGE: not a cubin")
                self.device_id = fake.current()

            def get_function(self, name: str) -> Function:
                assert self.device_id is not None
                fake.loads.append((self.device_id, name))
                return Function(self.device_id, name)

        def get_device_count() -> int:
            if fake.count_error is not None:
                raise fake.count_error
            return len(fake.devices)

        def properties(device_id: int) -> dict[str, Any]:
            return {"name": f"Fake GPU sm_{fake.devices[device_id]}".encode(),
                    "multiProcessorCount": fake.sms}

        runtime = types.SimpleNamespace(getDeviceCount=get_device_count, getDevice=self.current,
                                        getDeviceProperties=properties,
                                        CUDARuntimeError=CUDARuntimeError)
        #: with ``raw_launch``: each ``driver.launchKernel`` call's arguments (function handle,
        #: grid, block, shared memory, stream handle, address of the parameter addresses)
        self.raw_launches: list[tuple[Any, ...]] = []

        def launch_kernel(f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int,
                          shared: int, stream: int, params: int, extra: int) -> None:
            fake.raw_launches.append((f, (gx, gy, gz), (bx, by, bz), shared, stream, params))

        driver = types.SimpleNamespace(CUDADriverError=CUDADriverError,
                                       funcSetAttribute=lambda *a: None)
        if raw_launch:
            driver.launchKernel = launch_kernel
        def as_strided(a: Any, shape: Any = None, strides: Any = None) -> Any:
            """``cupy.lib.stride_tricks.as_strided``: a view of ``a``'s memory (no checks)."""
            host = np.lib.stride_tricks.as_strided(a._host, shape, strides)
            return ndarray(host, a.data.device_id)

        self.lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(as_strided=as_strided))
        self.cuda = types.SimpleNamespace(
            Device=Device, Stream=Stream, get_current_stream=get_current_stream,
            runtime=runtime, driver=driver,
            memory=types.SimpleNamespace(OutOfMemoryError=OutOfMemoryError),
            function=types.SimpleNamespace(Module=Module))

    # -- the module-level functions the backend calls ------------------------------------
    def current(self) -> int:
        """The calling thread's current device (0 until it selects another)."""
        return getattr(self._local, "device", 0)

    def _new(self, host: np.ndarray) -> Any:
        dev = self.current()
        if self.memory_limit is not None and self.allocated[dev] + host.nbytes > self.memory_limit:
            raise OutOfMemoryError(host.nbytes, self.allocated[dev])
        self.allocated[dev] += host.nbytes
        return self.ndarray(host, dev)

    def empty(self, shape: Any, dtype: Any) -> Any:
        return self._new(np.empty(shape, dtype))

    def ones(self, shape: Any, dtype: Any) -> Any:
        return self._new(np.ones(shape, dtype))

    def zeros(self, shape: Any, dtype: Any) -> Any:
        self.zeroed.append((self.current(), self.cuda.get_current_stream().ptr, tuple(
            np.atleast_1d(shape))))
        return self._new(np.zeros(shape, dtype))

    def asarray(self, a: Any) -> Any:
        if isinstance(a, self.ndarray):
            return a
        if hasattr(a, "__cuda_array_interface__"):  # wrapped, not copied (as CuPy does)
            cai = a.__cuda_array_interface__
            self.cai_imports.append(cai.get("stream"))
            return self.ndarray(np.asarray(_HostView(cai, a)), self.current())
        host = np.array(a, copy=True)
        self.uploads.append((self.current(), host.shape))
        return self._new(host)

    def array(self, a: Any, copy: bool = True) -> Any:
        found = self.asarray(a)
        return found.copy() if copy else found

    def from_dlpack(self, a: Any) -> Any:
        """CuPy's ``from_dlpack``: device memory only; the exporter is given the current stream."""
        kind, device_id = a.__dlpack_device__()
        if kind not in (2, 13):
            raise TypeError(f"CuPy takes CUDA memory only, got DLPack device type {kind}")
        consumer = self.cuda.get_current_stream().ptr or 1

        class Capsule:  # the exporter's capsule, read by NumPy (fake device memory is host memory)
            def __dlpack__(self, **kwargs: Any) -> Any:
                return a.__dlpack__(stream=consumer, **kwargs)

            def __dlpack_device__(self) -> tuple[int, int]:
                return (1, 0)

        return self.ndarray(np.from_dlpack(Capsule()), device_id)

    def ascontiguousarray(self, a: Any) -> Any:
        return self._new(np.ascontiguousarray(a._host))

    def asnumpy(self, a: Any) -> np.ndarray:
        return a.get()
