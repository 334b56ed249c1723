"""The ``interpret`` backend: generated Triton run by Triton's interpreter on NumPy buffers.

This is how CI, which has no GPU, executes every emitted kernel. The kernels
are the ones the ``cuda`` backend compiles, emitted for the ``interpret``
target (formulas instead of libdevice math, larger blocks), imported from
the cache directory with Triton's interpreter mode on, and called on NumPy
arrays through ``HostBuffer``; scalar params are passed as the interpreter's own
0-d tensors of their carrier dtype (it would make a Python float a float32).
Inputs are used in place (views keep their strides: the strides are specialized
into the source).

Threads: Triton's interpreter patches ``triton.language`` and keeps the
current program id in one global builder while a kernel runs, so two threads
interpreting at once break each other ("Did you forget to add @triton.jit?").
Launches therefore hold ``kernel_cache.TRITON_LOCK``: threads realize
concurrently, but interpreted kernels run one at a time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..codegen.lowering import scalar_arg
from ..ir.program import Kernel, Program, empty_pitched
from . import kernel_cache as kc


class HostBuffer:
    """A NumPy array seen through the tensor surface Triton's interpreter touches."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.dtype = a.dtype

    def data_ptr(self) -> int:
        return int(self.a.ctypes.data)

    def untyped_storage(self) -> HostBuffer:
        return self

    def cpu(self) -> HostBuffer:
        return self

    def new_empty(self, *args: Any, **kwargs: Any) -> HostBuffer:
        return HostBuffer(self.a)

    def set_(self, *args: Any) -> HostBuffer:
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.a.shape

    def stride(self) -> tuple[int, ...]:
        return self.a.strides

    def copy_(self, other: Any) -> None:
        pass


def _host(a: np.ndarray) -> HostBuffer:
    if a.dtype == np.bool_:
        a = a.view(np.uint8)
    return HostBuffer(a)


def _scalar(value: Any, dtype: np.dtype) -> Any:
    """A scalar param's value as the interpreter's own 0-d tensor of the carrier dtype.

    The interpreter would turn a Python float into float32 and a Python int into int32 or
    int64 by its value; a ``tl.tensor`` passes through exactly as built.
    """
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle
    arg = scalar_arg(value, dtype)
    ty = _TL_SCALAR[arg.dtype.name]
    return tl.tensor(TensorHandle(np.array([arg], arg.dtype), ty), ty)


_TL_SCALAR: dict[str, Any] = {}


def _init_scalar_types() -> None:
    import triton.language as tl
    _TL_SCALAR.update(int32=tl.int32, int64=tl.int64, float32=tl.float32, float64=tl.float64)


class InterpretBackend:
    """Runs every Kernel block of a fused Program through Triton's interpreter."""

    name = "interpret"
    #: whether buffers live in device memory (host inputs are then copied there once)
    device_memory = False

    def __init__(self) -> None:
        from . import require_triton
        require_triton("interpret", "pip install 'fusejit[triton]'")  # a missing Triton is named at once
        self._fns: dict[Any, Any] = {}
        #: kernel source -> its counters (``counters``)
        self._counters: dict[str, np.ndarray] = {}
        _init_scalar_types()

    def to_device(self, array: Any) -> np.ndarray:
        """``array`` as a buffer this backend computes on (copied only when needed)."""
        if isinstance(array, np.ndarray):
            return array
        get = getattr(array, "get", None)
        return np.asarray(get() if get is not None else array)

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""
        return self.to_device(buffer)

    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[np.ndarray]:
        """Run the fused program; returns one new array per program output."""
        env: dict[str, Any] = {p.name: b if p.scalar else self.to_device(b)
                               for p, b in zip(program.inputs, buffers)}
        inputs = {id(v) for v in env.values()}
        with np.errstate(all="ignore"):
            for kernel in program.body:  # a plan's program holds kernel blocks only
                results = self.run_kernel(kernel, [env[a] for a in kernel.args])
                env.update(zip(kernel.results, results))
        outs = []
        for name in program.outputs:
            value = env[name]
            if id(value) in inputs or value.base is not None or not value.flags.writeable:
                value = np.array(value, copy=True)
            outs.append(value)
        return outs

    def run_kernel(self, kernel: Kernel, args: list[np.ndarray],
                   tiles: Any = None) -> list[np.ndarray]:
        """Launch one region on host arrays (scalar params: their values); returns its results.

        ``tiles``: one of the kernel's candidate configs (``EmittedKernel.candidates``) in
        place of the heuristic's, so that tests run every candidate autotune may pick."""
        arrays: list[Any] = []
        for a, p in zip(args, kernel.params):
            if p.scalar:
                arrays.append(_scalar(a, p.type.dtype))
                continue
            a = np.asarray(a)
            if kc.element_strides(a) is None:
                a = np.ascontiguousarray(a)
            arrays.append(a)
        outs = [empty_pitched(np.empty, t.shape, t.dtype, kernel.row_pitch)
                for t in kernel.result_types]
        if all(o.size == 0 for o in outs):
            return outs
        strides = tuple(() if p.scalar else kc.element_strides(a)
                        for a, p in zip(arrays, kernel.params))
        emitted = kc.emitted_for(kernel, strides, "interpret", tiles)
        if any(arrays[i].ctypes.data % 16 for i in emitted.windowed):
            # a row window reads the words around each row: inside the buffer only when it
            # starts on a 16-byte boundary (triton_emitter._Emitter._row_window)
            kernel = replace(kernel, attrs={**kernel.attrs, "window": 0})
            emitted = kc.emitted_for(kernel, strides, "interpret", tiles)
        module = self._module(emitted)
        scratch = [np.empty(n, dt) for dt, n in emitted.scratch]
        with kc.TRITON_LOCK:
            counters = [self.counters(emitted)] if emitted.counters else []
            for launch in emitted.launches:
                fn = getattr(module, launch.fn_name)
                bound = []
                for kind, i in launch.args:
                    if kind == "in" and kernel.params[i].scalar:
                        bound.append(arrays[i])
                        continue
                    src = {"in": arrays, "out": outs, "scratch": scratch,
                           "counters": counters}[kind]
                    bound.append(_host(src[i]))
                fn[launch.grid](*bound)
        return outs

    def counters(self, emitted: Any) -> np.ndarray:
        """The counters of a kernel (``EmittedKernel.counters``): zeroed once, kept, and left
        zero by every launch. One buffer per kernel: interpreted launches run one at a time."""
        found = self._counters.get(emitted.source)
        if found is None:
            found = self._counters[emitted.source] = np.zeros(emitted.counters, np.int32)
        return found

    def _module(self, emitted: Any) -> Any:
        key = emitted.source
        mod = self._fns.get(key)
        if mod is None:
            path = kc.write_source(emitted)
            mod = kc.import_source(path, interpret=True)
            self._fns[key] = mod
        return mod
