"""The ``cuda`` backend: generated Triton compiled to cubins, loaded and launched by CuPy.

Triton is used as a compiler only (``fusejit.runtime.compile``); its own
launcher (``kernel[grid]``, ``triton.runtime.driver.active``) imports torch
and is never touched. A cubin is loaded with ``cupy.cuda.function.Module``
and launched on CuPy's current stream with ``32 * num_warps`` threads, the
kernel's shared memory, and NULL for the trailing scratch pointers Triton
appends (their count is read from the compiled PTX).

Inputs: CuPy arrays are used in place (views keep their strides; the view's
own data pointer is passed, so offsets cost nothing), NumPy arrays are copied
to the device once. Outputs are new CuPy arrays; kernels whose outputs are
all empty launch nothing.

Caching: per Kernel object, a dict from the buffer specialization (strides
and 16-byte alignment of each argument) to a pre-bound launcher, so a
repeated ``realize`` does a few dict lookups, allocations and launches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import BackendError
from ..ir.program import Kernel, Program
from . import kernel_cache as kc
from .compile import compile_launch

_MAX_STATIC_SHARED = 48 * 1024


class CudaBackend:
    """Runs every Kernel block of a fused Program as compiled Triton on the current CuPy device."""

    name = "cuda"
    #: whether buffers live in device memory (host inputs are then copied there once)
    device_memory = True

    def __init__(self) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise BackendError(f"the cuda backend needs CuPy (install fusejit[cuda12] or "
                               f"fusejit[cuda13]): {exc}") from None
        self.cp = cupy
        try:
            self.cc = int(cupy.cuda.Device().compute_capability)
        except Exception as exc:  # noqa: BLE001  (no driver or no device: CuPy's errors vary)
            raise BackendError(f"the cuda backend found no usable GPU: {exc}") from None
        self._modules: dict[Any, Any] = {}
        self._small: dict[Any, Any] = {}
        self._runners: dict[Any, Any] = {}

    def to_device(self, array: Any) -> Any:
        """``array`` as a buffer this backend computes on (copied only when needed)."""
        cp = self.cp
        if isinstance(array, cp.ndarray):
            return array
        host = np.asarray(array)
        if host.size <= 16:
            # small host constants (scalars of a recorded program) are uploaded once: an
            # upload per realize would be a synchronous copy waiting for earlier kernels
            key = (host.dtype.str, host.shape, host.tobytes())
            dev = self._small.get(key)
            if dev is None:
                dev = cp.asarray(host)
                self._small[key] = dev
            return dev
        return cp.asarray(host)

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""
        if isinstance(buffer, np.ndarray):
            return buffer
        return self.cp.asnumpy(buffer)

    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[Any]:
        """Run the fused program; returns one CuPy array per program output."""
        env = {p.name: self.to_device(b) for p, b in zip(program.inputs, buffers)}
        inputs = {id(v) for v in env.values()}
        for kernel in program.body:  # a plan's program holds kernel blocks only
            results = self.run_kernel(kernel, [env[a] for a in kernel.args])
            env.update(zip(kernel.results, results))
        outs = []
        for name in program.outputs:
            value = env[name]
            if id(value) in inputs:
                value = value.copy()
            outs.append(value)
        return outs

    # -- one region ----------------------------------------------------------------
    def run_kernel(self, kernel: Kernel, args: list[Any]) -> list[Any]:
        """Launch one region; returns its result arrays."""
        cp = self.cp
        spec = []
        for i, a in enumerate(args):
            itemsize = a.itemsize
            st = a.strides
            if any(s % itemsize for s in st):
                a = cp.ascontiguousarray(a)
                args[i] = a
                st = a.strides
            spec.append((tuple(s // itemsize for s in st), a.data.ptr % 16 == 0))
        key = tuple(spec)
        cache = kernel.__dict__.setdefault("_fusejit_cuda", {})
        runner = cache.get(key)
        if runner is None:
            # a structurally equal Kernel object (a plan rebuilt by the fuser) reuses the runner
            skey = (kc.kernel_key(kernel), key)
            runner = self._runners.get(skey)
            if runner is None:
                runner = self._build(kernel, key)
                self._runners[skey] = runner
            cache[key] = runner
        return runner(args)

    def _build(self, kernel: Kernel, spec: tuple[Any, ...]) -> Callable[[list[Any]], list[Any]]:
        cp = self.cp
        out_types = [(t.shape, t.dtype) for t in kernel.result_types]
        if all(int(np.prod(s)) == 0 for s, _ in out_types):
            return lambda args: [cp.empty(s, d) for s, d in out_types]
        strides = tuple(s for s, _ in spec)
        emitted = kc.emitted_for(kernel, strides, "cuda")
        scratch_specs = list(emitted.scratch)
        launches = []
        for launch in emitted.launches:
            launches.append(self._prepare(emitted, launch, spec))
        empty = cp.empty

        def run(args: list[Any]) -> list[Any]:
            outs = [empty(s, d) for s, d in out_types]
            scratch = [empty(n, d) for d, n in scratch_specs]
            groups = (args, outs, scratch)
            for fn, grid, block, shared, selectors, nulls, _divisible_out in launches:
                bound = [groups[g][i] for g, i in selectors]
                fn(grid, block, bound + nulls, shared_mem=shared)
            return outs

        return run

    def _prepare(self, emitted: Any, launch: Any, spec: tuple[Any, ...]) -> tuple[Any, ...]:
        # outputs and scratch are fresh CuPy allocations: always 256-byte aligned
        divisible = []
        selectors = []
        for kind, i in launch.args:
            g = {"in": 0, "out": 1, "scratch": 2}[kind]
            selectors.append((g, i))
            divisible.append(spec[i][1] if kind == "in" else True)
        compiled = compile_launch(emitted, launch, tuple(divisible), self.cc)
        mkey = (compiled.cubin, compiled.name)
        fn = self._modules.get(mkey)
        if fn is None:
            module = self.cp.cuda.function.Module()
            module.load(compiled.cubin)
            fn = module.get_function(compiled.name)
            if compiled.shared > _MAX_STATIC_SHARED:
                drv = self.cp.cuda.driver
                attr = getattr(drv, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
                drv.funcSetAttribute(fn.ptr, attr, compiled.shared)
            self._modules[mkey] = (module, fn)
        else:
            fn = fn[1]
        nulls = [None] * (compiled.n_params - compiled.n_args)
        block = (32 * compiled.num_warps, 1, 1)
        return (fn, launch.grid, block, compiled.shared, selectors, nulls, True)
