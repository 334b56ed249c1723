"""Zero-copy exchange of buffers with other array libraries: DLPack and the CUDA array interface.

Taking buffers (``fj.asarray``, ``fj.from_dlpack``): an object exporting DLPack
(``__dlpack__``) or the CUDA array interface (``__cuda_array_interface__``)
becomes a NumPy array (host memory, through ``np.from_dlpack``) or a CuPy array
(device memory, through ``cupy.from_dlpack`` or ``cupy.asarray``) over the
same memory, and the tensor reads it in place. torch, jax and the others are
never imported: the protocols are all that is used. Device memory needs the
``cuda`` backend; a host backend refuses it with ``DeviceError``.

Handing buffers out (``Tensor.__dlpack__``, ``__dlpack_device__``,
``__cuda_array_interface__``, ``Tensor.cupy()``): the realized buffer itself,
a NumPy array or a CuPy array, exported by its own library. Device buffers
name the CuPy stream that their kernels were queued on (recorded when the
tensor was realized), so a consumer waits for exactly that work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DeviceError, InteropError, NotOnDeviceError

#: DLPack device types (``DLDeviceType``) whose memory the host can read
HOST_DEVICE_TYPES = {1: "CPU", 3: "CUDA pinned host"}
#: DLPack device types that the ``cuda`` backend computes on
CUDA_DEVICE_TYPES = {2: "CUDA", 13: "CUDA managed"}
#: the names of other DLPack device types, for error messages
_OTHER_DEVICE_TYPES = {4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
                       11: "ROCm pinned host", 12: "ExtDev", 14: "oneAPI", 15: "WebGPU",
                       16: "Hexagon", 17: "MAIA"}


def _cupy_module() -> Any:
    import sys
    return sys.modules.get("cupy")


def is_cupy_array(obj: Any) -> bool:
    """Whether ``obj`` is a CuPy array (without importing CuPy)."""
    cp = _cupy_module()
    return cp is not None and isinstance(obj, cp.ndarray)


def exports_buffer(obj: Any) -> bool:
    """Whether ``obj`` offers DLPack or the CUDA array interface (checked before ``np.asarray``)."""
    return hasattr(obj, "__dlpack__") or hasattr(obj, "__cuda_array_interface__")


def _dlpack_device(obj: Any, what: str) -> tuple[int, int] | None:
    """``obj.__dlpack_device__()`` as ints; None when ``obj`` does not have it."""
    method = getattr(obj, "__dlpack_device__", None)
    if method is None:
        return None
    try:
        kind, index = method()
        return int(kind), int(index)
    except Exception as exc:  # noqa: BLE001  (the exporter's own errors vary)
        raise InteropError(f"{what}: {type(obj).__name__}.__dlpack_device__() failed: {exc}") \
            from exc


def _device_name(kind: int) -> str:
    return (HOST_DEVICE_TYPES.get(kind) or CUDA_DEVICE_TYPES.get(kind)
            or _OTHER_DEVICE_TYPES.get(kind) or f"device type {kind}")


def _cuda_backend(obj: Any, where: str, what: str) -> Any:
    """The CuPy module of the ``cuda`` backend, when it is the current backend; else the
    ``DeviceError`` for device memory given to a host backend."""
    from ..runtime import backend_instance, get_backend
    name = get_backend()
    if name != "cuda":
        raise DeviceError(
            f"{what}: this {type(obj).__name__} lives in GPU memory ({where}), but the current "
            f"backend {name!r} computes in host memory and does not copy device buffers; select "
            f"the cuda backend (fj.set_backend('cuda') or `with fj.using_backend('cuda'):`), or "
            f"copy the data to host memory first (cupy.asnumpy(x), x.cpu() for a torch tensor, "
            f"np.asarray(jax_array))")
    return backend_instance("cuda").cp  # type: ignore[attr-defined]


def import_buffer(obj: Any, *, copy: bool | None = None, what: str = "from_dlpack") -> Any:
    """A NumPy or CuPy array over the memory of ``obj`` (DLPack first, then the CUDA array
    interface); None when ``obj`` offers neither. ``copy``: as in ``np.from_dlpack`` (None: no
    copy unless the exporter needs one; True: always; False: never)."""
    kwargs = {} if copy is None else {"copy": copy}
    if hasattr(obj, "__dlpack__"):
        device = _dlpack_device(obj, what)
        if device is None or device[0] in HOST_DEVICE_TYPES:
            try:
                return np.from_dlpack(obj, **kwargs)
            except Exception as exc:  # noqa: BLE001  (BufferError, TypeError, RuntimeError, ...)
                raise InteropError(f"{what}: NumPy cannot take the DLPack buffer of "
                                   f"{type(obj).__name__} ({type(exc).__name__}: {exc})") from exc
        if device[0] in CUDA_DEVICE_TYPES:
            where = (f"CUDA device {device[1]}" if device[0] == 2
                     else f"CUDA managed memory, device {device[1]}")
            cp = _cuda_backend(obj, where, what)
            try:
                return cp.from_dlpack(obj, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise InteropError(f"{what}: CuPy cannot take the DLPack buffer of "
                                   f"{type(obj).__name__} ({type(exc).__name__}: {exc})") from exc
        raise DeviceError(f"{what}: this {type(obj).__name__} lives in {_device_name(device[0])} "
                          f"memory (device {device[1]}); fusejit computes in host memory or on "
                          f"CUDA GPUs: copy it to one of those first")
    if hasattr(obj, "__cuda_array_interface__"):
        cp = _cuda_backend(obj, "it exports __cuda_array_interface__", what)
        try:
            # CuPy wraps the pointer without copying (keeping obj alive) and waits for the
            # interface's stream, as version 3 of the interface asks
            return cp.array(obj, copy=True) if copy else cp.asarray(obj)
        except Exception as exc:  # noqa: BLE001
            raise InteropError(f"{what}: CuPy cannot take the __cuda_array_interface__ of "
                               f"{type(obj).__name__} ({type(exc).__name__}: {exc})") from exc
    return None


# -- exporting a tensor's buffer ---------------------------------------------------------------

def on_device(tensor: Any) -> bool:
    """Whether the buffer of ``tensor`` is (or, lazy, would be) in device memory: a realized
    tensor by its buffer, a lazy one by the current backend (no computation)."""
    node = tensor._node
    if node.op == "input":
        return is_cupy_array(node.buffer)
    from ..runtime import current
    return bool(current().device_memory)


def realized_buffer(tensor: Any) -> Any:
    """The buffer of ``tensor`` (realized first when lazy): a NumPy or CuPy array."""
    tensor.realize()
    return tensor._node.buffer


def cuda_array_interface(tensor: Any) -> dict[str, Any]:
    """The ``__cuda_array_interface__`` of a tensor whose buffer is in device memory."""
    if not on_device(tensor):
        raise NotOnDeviceError(
            f"this {tensor!r} is in host memory, so it has no __cuda_array_interface__ "
            f"(use __array__ / np.asarray, __dlpack__, or t.cupy() for a device copy)")
    buf = realized_buffer(tensor)
    if not is_cupy_array(buf):  # lazy, but computed by a host backend meanwhile
        raise NotOnDeviceError(f"this {tensor!r} is in host memory, so it has no "
                               f"__cuda_array_interface__")
    stream = tensor._node.stream
    if stream is None:  # not computed here: CuPy names its current stream, as for its own arrays
        return dict(buf.__cuda_array_interface__)
    with buf.device, stream:  # CuPy names the current stream: make it the one we launched on
        return dict(buf.__cuda_array_interface__)


def dlpack(tensor: Any, stream: Any, max_version: tuple[int, int] | None,
           dl_device: tuple[int, int] | None, copy: bool | None) -> Any:
    """``Tensor.__dlpack__``: the buffer's own ``__dlpack__``, arguments passed through."""
    buf = realized_buffer(tensor)
    kwargs: dict[str, Any] = {}
    if max_version is not None:  # only what was given: an older exporter may not know these
        kwargs["max_version"] = max_version
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    if isinstance(buf, np.ndarray):
        return buf.__dlpack__(stream=stream, **kwargs)
    producer = tensor._node.stream
    if producer is None:
        return buf.__dlpack__(stream=stream, **kwargs)
    # CuPy makes the consumer's stream wait for its current stream: make that the stream our
    # kernels were queued on
    with buf.device, producer:
        return buf.__dlpack__(stream=stream, **kwargs)


def download(buffer: Any, stream: Any) -> np.ndarray:
    """A host copy of a CuPy ``buffer`` computed on ``stream``: copied on that stream, which
    CuPy then waits for, so the copy sees the kernels' results whatever stream is current."""
    with buffer.device, stream:
        return buffer.get()


def to_cupy(tensor: Any) -> Any:
    """``Tensor.cupy()``: the CuPy buffer itself, or a copy of a host buffer on the current
    device."""
    buf = realized_buffer(tensor)
    if is_cupy_array(buf):
        return buf
    from ..runtime import _module_status, gpu_available
    problem = _module_status("cupy")
    if problem is not None:
        raise InteropError(f"Tensor.cupy() needs CuPy, which {problem} (pip install "
                           f"'fusejit[cuda12]' or 'fusejit[cuda13]'); t.numpy() gives a host array")
    if not gpu_available():
        raise InteropError("Tensor.cupy() needs a CUDA GPU, and CuPy sees none; t.numpy() gives "
                           "a host array")
    import cupy
    return cupy.asarray(np.asarray(buf))
