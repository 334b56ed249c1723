"""``fj.jit``: record a function once per input signature, then replay its plan.

The first call with a given *signature* (the backend; per array argument its
kind, dtype, shape, strides when not C-contiguous, and on CuPy its device and
16-byte alignment; per static argument its value; the structure of nested
tuples, lists and dicts) calls the function on lazy tensors, plans the result
(through the same plan cache as ``realize``) and keeps an *entry*: where each
input of the plan comes from (an argument, a value computed from float
arguments, or a constant captured by the function) and, on the ``cuda``
backend, the plan's bound launches. A later call with the same signature only
computes the signature, binds the inputs and replays: no recording, no
planning, no per-kernel lookup.

Arguments:

* arrays (fusejit tensors, NumPy and CuPy arrays, objects with
  ``__cuda_array_interface__`` or ``__dlpack__``) are inputs; the function sees
  them as tensors whose values it must not read while it is recorded;
* Python floats and NumPy floating scalars are *dynamic*: kernel parameters,
  so a new value reuses everything (Python floats stay weak for NumPy's type
  promotion: the function sees ``DynamicFloat``, on which Python arithmetic
  is recorded too; NumPy floats are 0-d tensors of their dtype);
* ints, bools, strings, None, and any other hashable value are *static*: part
  of the signature (a new value records again), passed as they are;
  ``static_argnums`` / ``static_argnames`` make any argument static, as in
  ``jax.jit``;
* tuples, lists and dicts are walked (their structure is part of the signature).

Outputs are realized tensors in the function's structure (a tensor, or tuples,
lists and dicts of them). Entries are kept per jitted function in an LRU cache
of ``cache_size`` signatures. Where NumPy's result depends on a dynamic
float's value (a power's exponent of 2, 0.5 or -1), the recording specializes
on it and keeps a guard; a later call whose value falls in another class
records a variant.

Not done: CUDA graphs of a whole plan (their pay-off has to be measured on the
GPU first), and donating input buffers.
"""

from __future__ import annotations

import functools
import inspect
import operator
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .. import runtime as _runtime
from ..codegen.lowering import scalar_arg
from ..dtypes import IR_NAMES, as_dtype
from ..errors import JitError
from ..frontend.scalars import RECORDING, DynamicFloat, Recording, scalar_value
from ..frontend.tensor import Tensor, _wrap
from ..ir.graph import NAME_PATTERN, Node, _intern, make_input, make_scalar, structural_key
from . import backend_instance, get_backend

# leaf kinds of a flattened argument
_ARRAY, _FLOAT, _NPFLOAT, _STATIC = 0, 1, 2, 3
# how an input of the plan is bound on a call (first field of a binder)
_FROM_ARG, _CONSTANT, _FROM_FLOAT, _FROM_EXPR, _UPLOAD = 0, 1, 2, 3, 4
# how an output is produced (first field of an output spec)
_OUT_PLAN, _OUT_ARG, _OUT_CONST, _OUT_SCALAR = 0, 1, 2, 3

#: signature part of a Python float argument (its value is not part of the signature)
_FLOAT_KEY = ("float",)


def jit(fn: Callable[..., Any] | None = None, *, static_argnums: int | Iterable[int] = (),
        static_argnames: str | Iterable[str] = (), cache_size: int = 64) -> Any:
    """Compile ``fn`` once per input signature; later calls only bind inputs and launch.

    Usable as ``fj.jit(fn)``, ``@fj.jit`` or ``@fj.jit(static_argnames=("axis",))``.
    See ``fusejit.runtime.jit`` for what is an input, a dynamic scalar or a static
    argument. ``cache_size`` bounds the signatures kept (least recently used dropped).
    """
    if fn is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, cache_size=cache_size)
    return Jitted(fn, static_argnums, static_argnames, cache_size)


class Jitted:
    """A function wrapped by ``fj.jit`` (call it like the function)."""

    def __init__(self, fn: Callable[..., Any], static_argnums: int | Iterable[int] = (),
                 static_argnames: str | Iterable[str] = (), cache_size: int = 64) -> None:
        if not callable(fn):
            raise JitError(f"fj.jit needs a function, got {type(fn).__name__}")
        if not isinstance(cache_size, int) or cache_size < 1:
            raise JitError(f"fj.jit: cache_size must be a positive int, got {cache_size!r}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._label = getattr(fn, "__qualname__", None) or repr(fn)
        nums = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)
        names = {static_argnames} if isinstance(static_argnames, str) else set(static_argnames)
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            params = []
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for n in list(nums):  # as jax.jit: a static position makes its name static too
            if not isinstance(n, int):
                raise JitError(f"fj.jit: static_argnums must be ints, got {n!r}")
            if n < 0:
                nums.discard(n)
                n += len(positional)
                nums.add(n)
            if 0 <= n < len(positional):
                names.add(positional[n])
        for name in names:
            if name in positional:
                nums.add(positional.index(name))
        self._static_nums = frozenset(nums)
        self._static_names = frozenset(names)
        self._positional = positional
        self._cache: OrderedDict[tuple, _Entry] = OrderedDict()
        #: the entry last moved to (or put at) the LRU's end
        self._latest: _Entry | None = None
        self._cache_size = cache_size
        self._lock = threading.Lock()
        #: how many times the function was recorded (a new signature, or a guard's variant)
        self.recordings = 0

    def __repr__(self) -> str:
        return f"fj.jit({self._label})"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def clear_cache(self) -> None:
        """Forget every recorded signature."""
        with self._lock:
            self._cache.clear()
            self._latest = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if RECORDING.get() is not None:
            return self._fn(*args, **kwargs)  # called while another jit records: inline it
        backend = get_backend()
        key: list[Any] = [backend]
        dyn: list[Any] = []
        static = self._static_nums
        cupy_type, c_contiguous = _CUPY
        for i, a in enumerate(args):
            t = type(a)
            if static and i in static:
                key.append(_static_key(a, self._arg_label(i)))
            # the common cases inline (``_array_key``'s keys, without its calls)
            elif t is cupy_type and (dtype := a.dtype) in IR_NAMES:
                data = a.data
                key.append(("cupy", dtype, a.shape, None if c_contiguous(a) else a.strides,
                            data.device_id, data.ptr % 16 == 0))
                dyn.append(a)
            elif t is np.ndarray and (dtype := a.dtype) in IR_NAMES:
                key.append((dtype, a.shape, None if a.flags.c_contiguous else a.strides))
                dyn.append(a)
            elif t is float:
                key.append(_FLOAT_KEY)
                dyn.append(a)
            else:
                key.append(self._flatten(a, dyn, backend, self._arg_label(i)))
        if kwargs:
            for name in sorted(kwargs):
                v = kwargs[name]
                key.append(name)
                key.append(_static_key(v, name) if name in self._static_names
                           else self._flatten(v, dyn, backend, name))
        if backend == "cuda":  # the current device (CuPy's getDevice, bound by the backend)
            instance = _runtime._backends.get("cuda")
            key.append((instance or backend_instance("cuda"))._get_device())
        tkey = tuple(key)
        entry = self._cache.get(tkey)
        if entry is None:
            entry = self._record(args, kwargs, tkey, dyn, backend)
        else:
            if entry is not self._latest:  # (the latest is at the LRU's end already)
                try:
                    self._cache.move_to_end(tkey)
                except KeyError:  # dropped by another thread meanwhile
                    pass
                self._latest = entry
            if entry.guards:
                entry = self._variant(entry, args, kwargs, tkey, dyn, backend)
        return entry.run(dyn)

    # -- signatures ------------------------------------------------------------------
    def _arg_label(self, i: int) -> str:
        return self._positional[i] if i < len(self._positional) else f"args[{i}]"

    def _flatten(self, x: Any, dyn: list[Any], backend: str, label: str) -> Any:
        """The signature part of one argument; its dynamic leaves are appended to ``dyn``."""
        t = type(x)
        if t is float:
            dyn.append(x)
            return _FLOAT_KEY
        if t is Tensor:
            node = x._node
            if node.op != "input":
                x.realize()
                node = x._node
            return _array_key(node.buffer, dyn, label)
        if t is tuple or t is list:
            return (t.__name__, tuple(self._flatten(v, dyn, backend, f"{label}[{i}]")
                                      for i, v in enumerate(x)))
        if t is dict:
            items = sorted(x.items(), key=lambda kv: repr(kv[0]))
            return ("dict", tuple((k, self._flatten(v, dyn, backend, f"{label}[{k!r}]"))
                                  for k, v in items))
        if isinstance(x, np.floating):
            dyn.append(x)
            return ("npfloat", as_dtype(x.dtype, where=f"fj.jit argument {label}"))
        if x is None or isinstance(x, (bool, int, str, bytes, np.integer, np.bool_)):
            return _static_key(x, label)
        if isinstance(x, np.ndarray) or _is_cupy(x):
            return _array_key(x, dyn, label)
        if hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
            return _array_key(_import_array(x, label), dyn, label)
        return _static_key(x, label)

    # -- recording ---------------------------------------------------------------------
    def _record(self, args: tuple, kwargs: dict, key: tuple, dyn: list[Any],
                backend: str, variant_of: _Entry | None = None) -> _Entry:
        rec = Recording(self._label)
        counter = iter(range(len(dyn)))
        static = self._static_nums
        traced_args = [a if i in static else self._trace(a, dyn, counter, rec, self._arg_label(i))
                       for i, a in enumerate(args)]
        traced_kwargs = {}
        for name in sorted(kwargs):
            v = kwargs[name]
            traced_kwargs[name] = v if name in self._static_names else \
                self._trace(v, dyn, counter, rec, name)
        token = RECORDING.set(rec)
        try:
            result = self._fn(*traced_args, **traced_kwargs)
        finally:
            RECORDING.reset(token)
        entry = _build_entry(self._label, result, rec, backend, dyn)
        with self._lock:
            self.recordings += 1
            if variant_of is not None:
                return entry
            self._cache[key] = entry
            self._latest = entry
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return entry

    def _variant(self, entry: _Entry, args: tuple, kwargs: dict, key: tuple, dyn: list[Any],
                 backend: str) -> _Entry:
        """The entry for this call's classes of guarded values (the signature's first entry
        keeps its variants, by the classes its own guards give)."""
        classes = _classes(entry.guards, dyn)
        if classes == entry.classes:
            return entry
        found = entry.variants.get(classes)
        if found is None or _classes(found.guards, dyn) != found.classes:
            found = self._record(args, kwargs, key, dyn, backend, variant_of=entry)
            entry.variants[classes] = found
        return found

    def _trace(self, x: Any, dyn: list[Any], counter: Any, rec: Recording, label: str) -> Any:
        """What the function sees for argument ``x`` while it is recorded (walks containers in
        the order ``_flatten`` did, so leaf ``k`` is ``dyn[k]``)."""
        t = type(x)
        if t is float:
            return DynamicFloat(x, next(counter), label)
        if t is tuple or t is list:
            return t(self._trace(v, dyn, counter, rec, f"{label}_{i}") for i, v in enumerate(x))
        if t is dict:
            items = sorted(x.items(), key=lambda kv: repr(kv[0]))
            traced = {k: self._trace(v, dyn, counter, rec, f"{label}_{k}") for k, v in items}
            return {k: traced[k] for k in x}
        if isinstance(x, np.floating):
            k = next(counter)
            dt = as_dtype(x.dtype, where=f"fj.jit argument {label}")
            return Tensor(make_scalar(scalar_value(x.item(), dt), dt, k))
        if x is None or isinstance(x, (bool, int, str, bytes, np.integer, np.bool_)):
            return x
        if t is Tensor or isinstance(x, np.ndarray) or _is_cupy(x) or \
                hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
            k = next(counter)
            buffer = dyn[k]
            name = label if NAME_PATTERN.match(label) else None
            node = make_input(buffer, as_dtype(buffer.dtype), tuple(buffer.shape), name)
            rec.traced.add(id(node))
            node.arg = k
            return Tensor(node)
        return x


def _static_key(x: Any, label: str) -> Any:
    try:
        hash(x)
    except TypeError:
        raise JitError(f"fj.jit: static argument {label} ({type(x).__name__}) is not hashable; "
                       f"a static argument is part of the signature") from None
    return ("static", type(x), x)


def _cupy() -> Any:
    from .cuda_backend import _import_cupy
    return _import_cupy()


#: CuPy's ndarray type once a CuPy array was met, and how its C-contiguity is read: CuPy's
#: ``_c_contiguous`` attribute where it has one (``flags`` builds an object per read: 0.24 to
#: 0.52 us per array argument on the H200 machine's host, ``_c_contiguous`` 0.11, by
#: ``bench/diag_dispatch.py``)
_CUPY: list[Any] = [None, None]


def _is_cupy(x: Any) -> bool:
    cp = sys.modules.get("cupy")
    if cp is None:
        return False
    if _CUPY[0] is not cp.ndarray:
        _CUPY[:] = [cp.ndarray, operator.attrgetter(
            "_c_contiguous" if hasattr(cp.ndarray, "_c_contiguous") else "flags.c_contiguous")]
    return isinstance(x, cp.ndarray)


def _array_key(a: Any, dyn: list[Any], label: str) -> tuple:
    """The signature part of an array argument (appended to ``dyn``; ``Jitted.__call__``
    makes the same keys inline)."""
    dtype = a.dtype
    if dtype not in IR_NAMES:
        dtype = as_dtype(dtype, where=f"fj.jit argument {label}")  # unsupported: an error
        a = a.astype(dtype)  # byte-swapped: native order
    dyn.append(a)
    if isinstance(a, np.ndarray):
        return (dtype, a.shape, None if a.flags.c_contiguous else a.strides)
    contiguous = _CUPY[1](a) if type(a) is _CUPY[0] else a.flags.c_contiguous
    data = a.data
    return ("cupy", dtype, a.shape, None if contiguous else a.strides, data.device_id,
            data.ptr % 16 == 0)


def _import_array(x: Any, label: str) -> Any:
    """A CuPy or NumPy array viewing an object with ``__cuda_array_interface__`` or
    ``__dlpack__`` (no copy)."""
    if hasattr(x, "__cuda_array_interface__"):
        return _cupy().asarray(x)
    device = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
    if device == 1:  # kDLCPU
        return np.from_dlpack(x)
    if device == 2:  # kDLCUDA
        return _cupy().from_dlpack(x)
    raise JitError(f"fj.jit argument {label}: DLPack device type {device} is neither the host "
                   f"nor a CUDA device")


def _upload(backend: Any, k: int, dev: Any, dyn: list[Any]) -> Any:
    """Argument ``k`` of a call, a host array, copied to device ``dev`` (the entry's)."""
    return backend._upload(np.asarray(dyn[k]), dev)


def _source_value(src: Any, dyn: list[Any]) -> Any:
    return dyn[src] if type(src) is int else src(dyn)


def _classes(guards: tuple, dyn: list[Any]) -> tuple:
    """The class of each guarded value in the call whose dynamic leaves are ``dyn``."""
    return tuple(classify(_source_value(src, dyn)) for src, classify, _ in guards)


# -- entries: what a call binds and launches -----------------------------------------------

class _Entry:
    """One recorded signature: how a call binds the plan's inputs, its runner, its outputs.

    Binding: ``template`` holds the constants (captured buffers, fixed scalars) at their
    input positions; per call, ``from_args`` copies arguments in, ``from_floats`` converts
    dynamic floats (to the dtype of their parameter, on ``cuda`` to the value the launch
    passes), and ``computed`` runs the rest (floats computed from arguments, uploads).
    """

    __slots__ = ("template", "from_args", "from_floats", "computed", "runner", "outputs",
                 "single", "treedef", "guards", "classes", "variants", "stream_of")

    def __init__(self) -> None:
        self.variants: dict[tuple, _Entry] = {}

    def run(self, dyn: list[Any]) -> Any:
        """Bind the inputs of a call (``dyn``: its dynamic leaves), launch, wrap the outputs."""
        buffers = self.template.copy()
        for i, k in self.from_args:
            buffers[i] = dyn[k]
        for i, k, conv in self.from_floats:
            buffers[i] = conv(dyn[k])
        for i, fn in self.computed:
            buffers[i] = fn(dyn)
        results = self.runner(buffers) if self.runner is not None else []
        # the stream the plan ran on (a device backend's): exports of the results wait for it
        stream = self.stream_of() if self.stream_of is not None else None
        single = self.single
        if single is not None:  # one tensor from the plan: the common case
            dtype, shape, sig = single
            return _wrap(make_input(results[0], dtype, shape, None, sig, stream))
        tensors = []
        for kind, a, (dtype, shape, sig) in self.outputs:
            if kind == _OUT_PLAN:
                buffer, at = results[a], stream
            elif kind == _OUT_ARG:
                buffer, at = dyn[a], None
            elif kind == _OUT_SCALAR:  # a dynamic scalar returned as it came: this call's value
                buffer, at = np.asarray(dyn[a], dtype), None
            else:
                buffer, at = a, None
            tensors.append(_wrap(make_input(buffer, dtype, shape, None, sig, at)))
        return _unflatten(self.treedef, iter(tensors))


def _float_converter(dtype: np.dtype, carrier: bool) -> Callable[[Any], Any]:
    """Per call: a dynamic float's value for a parameter of ``dtype`` (``carrier``: as the
    NumPy scalar a cuda launch passes, ``codegen.lowering.SCALAR_ARG``)."""
    if not carrier:
        return functools.partial(_scalar_value_of, dtype=dtype)
    if dtype == np.float64:
        return np.float64
    if dtype == np.float32:
        limit = float(np.finfo(np.float32).max)
        f32 = np.float32
        return lambda v: f32(v) if -limit <= v <= limit else scalar_value(v, dtype)
    return lambda v: scalar_arg(scalar_value(v, dtype), dtype)


def _scalar_value_of(value: Any, dtype: np.dtype) -> Any:
    return scalar_value(value, dtype)


def _build_entry(label: str, result: Any, rec: Recording, backend_name: str,
                 dyn: list[Any]) -> _Entry:
    """Plan the recorded outputs and bind them: the entry for one signature."""
    from . import backend_instance, plan_of
    outputs: list[Tensor] = []
    treedef = _flatten_outputs(result, outputs, label)
    pending: list[Node] = []
    index: dict[int, int] = {}
    for t in outputs:
        node = t._node
        if node.op not in ("input", "scalar") and id(node) not in index:
            index[id(node)] = len(pending)
            pending.append(node)
    backend = backend_instance(backend_name)
    carrier = backend.name == "cuda"
    entry = _Entry()
    entry.treedef = treedef
    entry.guards = tuple(rec.guards)
    entry.classes = tuple(cls for _, _, cls in rec.guards)
    entry.stream_of = backend.current_stream if getattr(backend, "device_memory", False) \
        else None
    template: list[Any] = []
    from_args: list[tuple[int, int]] = []
    from_floats: list[tuple[int, int, Any]] = []
    computed: list[tuple[int, Any]] = []
    binders: list[tuple[int, Any, Any]] = []
    if pending:
        key, leaves = structural_key(pending)
        plan = plan_of(pending, key, leaves)
        device = getattr(backend, "device_memory", False)
        for i, leaf in enumerate(leaves):
            arg = leaf.arg if (leaf.op == "scalar" or id(leaf) in rec.traced) else None
            value: Any = None
            if leaf.op == "scalar":
                dt = leaf.dtype
                if arg is None:
                    value = scalar_arg(leaf.buffer, dt) if carrier else leaf.buffer
                    binders.append((_CONSTANT, leaf.buffer, None))
                elif type(arg) is int:
                    from_floats.append((i, arg, _float_converter(dt, carrier)))
                    binders.append((_FROM_FLOAT, arg, dt))
                else:
                    conv = _float_converter(dt, carrier)
                    computed.append((i, lambda d, f=arg, c=conv: c(f(d))))
                    binders.append((_FROM_EXPR, arg, dt))
            elif arg is not None:
                if device and isinstance(dyn[arg], np.ndarray):
                    # (the signature fixes the device: the entry's own, and host arrays)
                    computed.append((i, functools.partial(_upload, backend, arg, backend.device())))
                    binders.append((_UPLOAD, backend.to_device, arg))
                else:
                    from_args.append((i, arg))
                    binders.append((_FROM_ARG, arg, None))
            else:  # a tensor the function captured: its buffer (on the device: copied once)
                value = backend.leaf_buffers([leaf])[0] if device else leaf.buffer
                binders.append((_CONSTANT, value, None))
            template.append(value)
        entry.runner = _runner(backend, plan, tuple(binders), dyn)
    else:
        entry.runner = None
    entry.template = template
    entry.from_args, entry.from_floats = tuple(from_args), tuple(from_floats)
    entry.computed = tuple(computed)
    specs = []
    for t in outputs:
        node = t._node
        out = (node.dtype, node.shape, _intern(("input", None, node.dtype, node.shape)))
        if node.op == "scalar":
            if node.arg is not None:  # returned as it came: each call's value, as a 0-d tensor
                specs.append((_OUT_SCALAR, node.arg, out))
            else:
                specs.append((_OUT_CONST, np.asarray(node.buffer, node.dtype), out))
        elif node.op == "input":
            if id(node) in rec.traced:
                specs.append((_OUT_ARG, node.arg, out))
            else:
                specs.append((_OUT_CONST, node.buffer, out))
        else:
            specs.append((_OUT_PLAN, index[id(node)], out))
    entry.outputs = tuple(specs)
    entry.single = specs[0][2] if (treedef is None and specs[0][0] == _OUT_PLAN) else None
    return entry


def _runner(backend: Any, plan: Any, binders: tuple, dyn: list[Any]) -> Callable[[list], list]:
    """The replay of ``plan`` on ``backend`` for calls of one signature (on ``cuda``, it
    takes scalar params as the values a launch passes: ``_float_converter``)."""
    program = plan.program
    if backend.name != "cuda":
        return functools.partial(backend.execute, program, plan=plan)
    from ..ir.program import contiguous_strides
    from .cuda_backend import array_spec
    # the signature fixes every input's specialization (strides, alignment, device) for all
    # calls: the replay is the plan runner itself, with nothing to check per call
    dev = backend.device()
    spec: list[Any] = []
    for (kind, a, _), p in zip(binders, program.inputs):
        if p.scalar:
            spec.append(None)
        elif kind == _UPLOAD:  # a host argument, copied to a fresh (aligned) device array
            spec.append((contiguous_strides(p.type.shape), True))
        else:
            array = dyn[a] if kind == _FROM_ARG else a
            entry = array_spec(array)
            if array.data.device_id != dev.id or entry is None:
                # another device (an error), or strides that are not whole elements (a copy
                # on every call): the general path
                backend.bind(program, [_bound(binder, dyn) for binder in binders], dev)
                return functools.partial(backend.execute, program, plan=plan)
            spec.append(entry)
    # (the runner names what it could not allocate: nothing to wrap per call)
    return backend.plan_runner(program, tuple(spec), dev, prepared=True)


def _bound(binder: tuple[int, Any, Any], dyn: list[Any]) -> Any:
    """What one binder gives for a call, as the backend's ``execute`` takes it."""
    kind, a, b = binder
    if kind == _FROM_ARG:
        return dyn[a]
    if kind == _CONSTANT:
        return a
    if kind == _FROM_FLOAT:
        return scalar_value(dyn[a], b)
    if kind == _FROM_EXPR:
        return scalar_value(a(dyn), b)
    return a(dyn[b])


# -- output structure ------------------------------------------------------------------------

def _flatten_outputs(x: Any, out: list[Tensor], label: str) -> Any:
    """The structure of a result (a tensor, or tuples, lists and dicts of them); its tensors
    are appended to ``out``."""
    if isinstance(x, Tensor):
        out.append(x)
        return None
    if type(x) in (tuple, list):
        return (type(x), tuple(_flatten_outputs(v, out, label) for v in x))
    if type(x) is dict:
        return (dict, tuple((k, _flatten_outputs(v, out, label)) for k, v in x.items()))
    raise JitError(f"fj.jit: {label} returned {type(x).__name__}; a jitted function returns "
                   f"tensors, or tuples, lists and dicts of tensors")


def _unflatten(treedef: Any, tensors: Any) -> Any:
    if treedef is None:
        return next(tensors)
    kind, children = treedef
    if kind is dict:
        return {k: _unflatten(c, tensors) for k, c in children}
    return kind(_unflatten(c, tensors) for c in children)
