"""Backends and the realize path: lower, plan (cached), execute, rebind.

Backends: ``numpy`` (reference evaluator), ``interpret`` (generated Triton
run by Triton's interpreter) and ``cuda`` (generated Triton compiled to a
cubin, launched with CuPy). Select one with ``FUSEJIT_BACKEND``,
``set_backend`` or the ``using_backend`` context manager; the default is
``cuda`` when CuPy sees a GPU, else ``numpy``.

Threads: ``set_backend`` sets the process-wide default; ``using_backend``
overrides it for the current thread (a ``contextvars`` variable, so asyncio
tasks get their own too) and never changes what other threads use. A new
thread starts with the process default, not with the override of the thread
that started it. Each backend has one instance per process, shared by all
threads; it and the plan cache are thread-safe.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import threading
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

from ..errors import BackendError, BackendUnavailableError, InputError
from ..frontend.scalars import RECORDING, check_value_access
from ..fuse import plan_for
from ..fuse.plan import TILING_DESCRIBERS
from ..ir.graph import build_program, make_input, structural_key, topological_order
from ..ir.program import Program

BACKEND_NAMES = ("cuda", "interpret", "numpy")


def _gpu_tiling(kernel: Any) -> list[str]:
    """The tiles the ``cuda`` target launches ``kernel`` with (contiguous buffers), for explain()
    (those autotune chose, when this process tuned the kernel)."""
    from . import autotune
    return [f"(on cuda) {line}" for line in autotune.describe(kernel)]


TILING_DESCRIBERS.append(_gpu_tiling)


class Backend(Protocol):
    """What every backend provides (``numpy_backend``, ``interpret_backend``, ``cuda_backend``).

    A backend with ``device_memory`` also has ``leaf_buffers(leaves)``: the buffers
    of a realize's leaves on the current device (host data copied there once), and
    ``current_stream()``: the stream it launches on now (realized tensors remember it, so
    ``__cuda_array_interface__`` and ``__dlpack__`` name the stream their data was made on).
    ``execute_leaves(program, leaves, plan)``: ``execute`` with those buffers.
    """

    name: str
    #: whether buffers live in device memory (then ``leaf_buffers`` places host inputs there)
    device_memory: bool

    def to_device(self, array: Any) -> Any:
        """``array`` as a buffer this backend computes on (copied only when needed)."""

    def to_numpy(self, buffer: Any) -> np.ndarray:
        """A host NumPy array of ``buffer``."""

    def execute(self, program: Program, buffers: list[Any], plan: Any = None) -> list[Any]:
        """Run a fused program on ``buffers`` (one per input); one new array per output."""


_backends: dict[str, Any] = {}
#: serializes creating backend instances and changing the plan cache (lookups take no lock)
_lock = threading.Lock()
#: the process-wide default (``set_backend``, else ``FUSEJIT_BACKEND`` or detection)
_selected: str | None = None
#: this thread's (or asyncio task's) override from ``using_backend``
_override: contextvars.ContextVar[str | None] = contextvars.ContextVar("fusejit_backend",
                                                                      default=None)


def _module_status(module: str) -> str | None:
    """None when ``module`` imports, else why not (for an error message)."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name == module:
            return "is not installed"
        return f"cannot be imported ({exc})"
    return None


def alternatives(name: str) -> list[str]:
    """The backends other than ``name`` that can run here (``numpy`` always can)."""
    out = []
    if name != "interpret" and _module_status("triton") is None:
        out.append("interpret")
    if name != "numpy":
        out.append("numpy")
    return out


def unavailable(name: str, needs: str, problem: str) -> BackendUnavailableError:
    """The error for backend ``name`` that cannot run: what it needs, what is wrong, what
    would work instead (``FUSEJIT_BACKEND=...`` or ``fj.set_backend``)."""
    others = alternatives(name)
    return BackendUnavailableError(
        f"backend {name!r} needs {needs}; {problem}; use FUSEJIT_BACKEND="
        f"{' or '.join(others)} (or fj.set_backend({others[0]!r}))")


def require_triton(backend: str, install: str) -> None:
    """Raise ``BackendUnavailableError`` unless Triton imports; ``install`` says how to get it."""
    problem = _module_status("triton")
    if problem is not None:
        raise unavailable(backend, "Triton" if backend == "interpret" else "Triton to compile kernels",
                          f"Triton {problem} ({install})")


def _create(name: str) -> Backend:
    if name == "numpy":
        from .numpy_backend import NumpyBackend
        return NumpyBackend()
    if name == "interpret":
        from .interpret_backend import InterpretBackend
        return InterpretBackend()
    if name == "cuda":
        from .cuda_backend import CudaBackend
        return CudaBackend()
    raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")


def backend_instance(name: str) -> Backend:
    """The (shared) instance of a backend by name; ``BackendUnavailableError`` if it cannot run."""
    backend = _backends.get(name)
    if backend is None:
        with _lock:
            backend = _backends.get(name)
            if backend is None:
                backend = _backends[name] = _create(name)
    return backend


def gpu_available() -> bool:
    """Whether CuPy is importable and sees a CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001  (no CuPy, no driver, no device: all mean "no")
        return False


def default_backend_name() -> str:
    """``FUSEJIT_BACKEND`` if set, else ``cuda`` when CuPy sees a GPU, else ``numpy``."""
    env = os.environ.get("FUSEJIT_BACKEND")
    if env:
        if env not in BACKEND_NAMES:
            raise BackendError(f"FUSEJIT_BACKEND={env!r} is not a backend; choose one of "
                               f"{', '.join(BACKEND_NAMES)}")
        return env
    return "cuda" if gpu_available() else "numpy"


def get_backend() -> str:
    """Name of the backend that ``realize`` uses now, in this thread."""
    name = _override.get()
    if name is not None:
        return name
    global _selected
    if _selected is None:
        _selected = default_backend_name()
    return _selected


def _check_name(name: str) -> None:
    if name not in BACKEND_NAMES:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)}")


def set_backend(name: str) -> None:
    """Select the process-wide default backend: ``cuda``, ``interpret`` or ``numpy``.

    Every thread without a ``using_backend`` block of its own uses it. Raises
    ``BackendUnavailableError`` at once when the backend cannot run here.
    """
    _check_name(name)
    backend_instance(name)
    global _selected
    _selected = name


@contextlib.contextmanager
def using_backend(name: str) -> Iterator[None]:
    """Context manager: use backend ``name`` in this thread inside the block.

    Other threads keep their own selection. Raises ``BackendUnavailableError``
    at once when the backend cannot run here.
    """
    _check_name(name)
    backend_instance(name)
    token = _override.set(name)
    try:
        yield
    finally:
        _override.reset(token)


def current() -> Backend:
    """The instance of the backend selected in this thread."""
    return backend_instance(get_backend())


def to_numpy(buffer: Any) -> np.ndarray:
    """A host NumPy array from any buffer a backend produced."""
    if isinstance(buffer, np.ndarray):
        return buffer
    get = getattr(buffer, "get", None)
    return np.asarray(get() if get is not None else buffer)


#: Graph structure -> plan, so a repeated realize of the same structure skips lowering and fusion.
_plans: dict[tuple, Any] = {}
#: Plans kept at most; past that the oldest half is dropped (a program generator must not leak).
MAX_PLANS = 4096


def _remember(key: tuple, plan: Any) -> None:
    with _lock:
        if len(_plans) >= MAX_PLANS:
            for old in list(_plans)[:MAX_PLANS // 2]:
                _plans.pop(old, None)
        _plans[key] = plan


def forget_plans() -> None:
    """Forget every plan, fusion result and emitted kernel source of this process, so that a
    change to ``fusejit.codegen.heuristics`` (a switch, a limit) takes effect on the next
    realize. Compiled kernels on disk are keyed by their source and stay valid; a backend's
    launchers shared by structure (the ``cuda`` backend's) are dropped."""
    from ..fuse import clear_cache
    from . import kernel_cache
    with _lock:
        _plans.clear()
        backends = list(_backends.values())
    clear_cache()
    kernel_cache._emit_cache.clear()
    for backend in backends:
        forget = getattr(backend, "forget", None)
        if forget is not None:
            forget()


def plan_of(nodes: list[Any], key: tuple, leaves: tuple[Any, ...]) -> Any:
    """The plan of graph outputs ``nodes`` (``key`` and ``leaves``: their ``structural_key``),
    from the plan cache, else built, fused and remembered."""
    plan = _plans.get(key)
    if plan is None:
        plan = plan_for(build_program(topological_order(nodes), nodes, leaves=leaves), key)
        _remember(key, plan)
    return plan


def realize_one(t: Any) -> None:
    """``realize(t)`` for one tensor (``Tensor.realize``: the loop case), with what the
    general path looks up inlined: the plan by the node's signature, the backend."""
    node = t._node
    op = node.op
    if op == "input":
        return
    if op == "scalar":  # (while recording, Tensor.realize has raised before this)
        realize(t)  # (the general path: a NumPy scalar as an array)
        return
    key = (node.sig,)  # structural_key([node])
    leaves = node.leaves
    if type(leaves) is not tuple:
        leaves = tuple(leaves)
    plan = _plans.get(key)
    if plan is None:
        plan = plan_of([node], key, leaves)
    name = _override.get()
    if name is None:
        name = _selected if _selected is not None else get_backend()
    backend = _backends.get(name)
    if backend is None:
        backend = backend_instance(name)
    outs, stream = _execute(backend, plan, leaves)
    t._node = make_input(outs[0], node.dtype, node.shape, None, stream=stream)


def _execute(backend: Backend, plan: Any, leaves: tuple[Any, ...]) -> tuple[list[Any], Any]:
    """Run ``plan`` on its graph leaves: the outputs, and the CuPy stream they were queued on
    (None on a host backend)."""
    if backend.device_memory:
        outs = backend.execute_leaves(plan.program, leaves, plan)
        return outs, backend.current_stream()
    return backend.execute(plan.program, [leaf.buffer for leaf in leaves], plan), None


def realize(*tensors: Any) -> tuple[Any, ...]:
    """Compute several tensors with one plan; shared subexpressions run once.

    Thread-safe: threads may realize at once (even the same tensor: each computes
    it, and the tensor ends up holding one of the equal results).
    """
    pending, seen = [], set()
    for t in tensors:
        node = t._node
        if node.op != "input" and id(node) not in seen:
            check_value_access(node, "fj.realize()")
            if node.op == "scalar":  # a NumPy scalar seen as a tensor: its value, as an array
                t._node = make_input(np.asarray(node.buffer, node.dtype), node.dtype, (), None)
                continue
            seen.add(id(node))
            pending.append(t)
    if pending:
        nodes = [t._node for t in pending]
        key, leaves = structural_key(nodes)
        plan = _plans.get(key)
        if plan is None:  # first time this structure is seen: build, fuse, remember
            plan = plan_of(nodes, key, leaves)
        outs, stream = _execute(current(), plan, leaves)
        by_node = {id(n): out for n, out in zip(nodes, outs)}
        for t in tensors:
            if id(t._node) in by_node:
                node = t._node
                t._node = make_input(by_node[id(node)], node.dtype, node.shape, None,
                                     stream=stream)
    return tensors


def check_inputs(program: Program, arrays: tuple[Any, ...], named: dict[str, Any]) -> list[Any]:
    """Inputs in signature order, checked for count, names, shapes and dtypes."""
    params = program.inputs
    if len(arrays) > len(params):
        raise InputError(f"@{program.name} takes {len(params)} inputs, got {len(arrays)} "
                         f"positional arrays")
    bound: dict[str, Any] = {p.name: a for p, a in zip(params, arrays)}
    known = {p.name for p in params}
    for name, value in named.items():
        if name not in known:
            raise InputError(f"@{program.name} has no input named {name!r} (inputs: "
                             f"{', '.join(p.name for p in params) or 'none'})")
        if name in bound:
            raise InputError(f"input {name!r} given both by position and by name")
        bound[name] = value
    missing = [p.name for p in params if p.name not in bound]
    if missing:
        raise InputError(f"@{program.name} is missing input{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}")
    out = []
    for p in params:
        value = bound[p.name]
        if p.scalar:
            out.append(scalar_input(p, value))
            continue
        if not hasattr(value, "dtype") or not hasattr(value, "shape"):
            value = np.asarray(value)
        if tuple(value.shape) != p.type.shape:
            raise InputError(f"input {p.name!r}: expected shape {p.type.shape}, got "
                             f"{tuple(value.shape)}")
        if np.dtype(value.dtype) != p.type.dtype:
            raise InputError(f"input {p.name!r}: expected dtype {p.type.dtype}, got {value.dtype}")
        out.append(value)
    return out


def scalar_input(param: Any, value: Any) -> Any:
    """The value for a scalar param (passed by value): a Python scalar (converted as NumPy
    converts a weak scalar), or a NumPy scalar or host 0-d array of the param's dtype."""
    from ..frontend.scalars import scalar_value
    dtype = param.type.dtype
    what = f"input {param.name!r} (a scalar {dtype} param, passed by value)"
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        if isinstance(value, bool) != (dtype.kind == "b") or (
                isinstance(value, float) and dtype.kind != "f"):
            raise InputError(f"{what}: cannot take the Python {type(value).__name__} {value!r}")
        if isinstance(value, bool):
            return value
        if dtype.kind in "iu" and not np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
            raise InputError(f"{what}: {value} is out of bounds for {dtype}")
        return scalar_value(value, dtype)
    if isinstance(value, (np.generic, np.ndarray)) and np.shape(value) == ():
        if np.dtype(value.dtype) != dtype:
            raise InputError(f"{what}: expected dtype {dtype}, got {value.dtype}")
        return np.asarray(value)[()]
    raise InputError(f"{what}: expected a Python or NumPy scalar, got {type(value).__name__}"
                     + (f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else "")
                     + " (device arrays are not read back: pass host values)")


def run_program(program: Program, arrays: tuple[Any, ...], named: dict[str, Any]) -> list[Any]:
    """Run a Program on the current backend: checked inputs in, one array per output out."""
    buffers = check_inputs(program, arrays, named)
    backend = current()
    plan = plan_for(program, None)
    return backend.execute(plan.program, buffers, plan)
