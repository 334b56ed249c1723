"""Zero-copy interop: DLPack and the CUDA array interface, both ways, and CuPy's streams.

Host backends are tested fully here (``numpy`` and ``interpret``). The ``cuda``
backend's host logic runs on ``FakeCupy`` (``tests/fake_cupy.py``: NumPy memory
posing as device memory, streams that only record where work was queued). Tests
marked ``gpu`` check the same on a real GPU: shared pointers, and results read
through another stream without a copy or an explicit synchronization.

No test imports torch or jax: objects exposing only one protocol stand in for them.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import fusejit as fj
from fusejit import runtime

from .fake_cupy import FakeCupy

HOST_BACKENDS = ["numpy", "interpret"]


@pytest.fixture(params=HOST_BACKENDS)
def host_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Each host backend in turn (``interpret`` skips without Triton)."""
    if request.param == "interpret" and importlib.util.find_spec("triton") is None:
        pytest.skip("the interpret backend needs Triton")
    with fj.using_backend(request.param):
        yield request.param


class DLPackOnly:
    """Another library's array, seen only through DLPack (as a torch or jax array is)."""

    def __init__(self, array: Any, device: tuple[int, int] | None = (1, 0)) -> None:
        self.array = array
        self.device = device
        self.calls: list[dict[str, Any]] = []

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.array.__dlpack__(**kwargs)

    def __getattr__(self, name: str) -> Any:  # __dlpack_device__ only when a device is given
        if name == "__dlpack_device__" and self.device is not None:
            return lambda: self.device
        raise AttributeError(name)


class ArrayInterfaceOnly:
    """A host buffer seen only through NumPy's ``__array_interface__``."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.__array_interface__ = array.__array_interface__


class CudaInterfaceOnly:
    """A device buffer seen only through ``__cuda_array_interface__`` (as a numba array is)."""

    def __init__(self, interface: dict[str, Any], owner: Any = None) -> None:
        self.owner = owner
        self.__cuda_array_interface__ = interface


def _host_interface(a: np.ndarray, stream: int | None = 1) -> dict[str, Any]:
    """A CUDA array interface over host memory (what FakeCupy's device memory is)."""
    return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
            "strides": None, "version": 3, "stream": stream}


# -- host backends: exporting ------------------------------------------------------------------

def test_np_from_dlpack_shares_the_buffer_of_a_realized_tensor(host_backend: str) -> None:
    t = (fj.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)) * 2).realize()
    b = np.from_dlpack(t)
    np.testing.assert_array_equal(b, np.arange(6).reshape(2, 3) * 2)
    assert np.shares_memory(b, t.numpy())  # numpy() of a host buffer is the buffer itself
    b[0, 0] = 99  # writing through the view is seen by the tensor
    assert t.numpy()[0, 0] == 99
    assert t.__dlpack_device__() == (1, 0)


def test_dlpack_realizes_a_lazy_tensor_first(host_backend: str) -> None:
    x = np.array([1.0, 2.0, 3.0])
    t = fj.exp(fj.asarray(x)) + 1
    assert not t.is_realized
    np.testing.assert_allclose(np.from_dlpack(t), np.exp(x) + 1)
    assert t.is_realized


def test_dlpack_of_a_leaf_is_the_users_array(host_backend: str) -> None:
    a = np.arange(12, dtype=np.int32)[::2]  # a strided view: exported with its strides
    b = np.from_dlpack(fj.asarray(a))
    assert np.shares_memory(a, b) and b.strides == a.strides


def test_dlpack_arguments_are_passed_to_numpy(host_backend: str) -> None:
    t = fj.asarray(np.ones(4, np.float32)).realize()
    assert not np.shares_memory(np.from_dlpack(t, copy=True), t.numpy())
    with pytest.raises((RuntimeError, BufferError), match="stream"):
        t.__dlpack__(stream=1)  # host memory: NumPy accepts no stream


def test_host_tensor_has_no_cuda_array_interface(host_backend: str) -> None:
    lazy = fj.asarray(np.ones(3)) + 1
    assert not hasattr(lazy, "__cuda_array_interface__")
    assert not lazy.is_realized  # asking computed nothing
    with pytest.raises(fj.NotOnDeviceError, match="host memory") as info:
        lazy.realize().__cuda_array_interface__  # noqa: B018
    assert isinstance(info.value, AttributeError) and isinstance(info.value, fj.FusejitError)


def test_cupy_without_cupy_is_a_clear_error(host_backend: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # CuPy cannot be imported
    with pytest.raises(fj.InteropError, match=r"Tensor\.cupy\(\) needs CuPy.*numpy\(\)"):
        (fj.asarray(np.ones(3)) + 1).cupy()


# -- host backends: taking buffers ---------------------------------------------------------------

def test_from_dlpack_of_a_numpy_array_shares_memory(host_backend: str) -> None:
    a = np.arange(6, dtype=np.float32)
    t = fj.from_dlpack(a, name="x")
    assert "%x" in fj.dump(t + 1)
    a[0] = 10  # read when realized: the tensor sees the write
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)
    assert np.shares_memory(t.numpy(), a)
    assert not np.shares_memory(fj.from_dlpack(a, copy=True).numpy(), a)


@pytest.mark.parametrize("device", [(1, 0), None], ids=["with_device", "without_device"])
@pytest.mark.parametrize("take", [fj.from_dlpack, fj.asarray], ids=["from_dlpack", "asarray"])
def test_an_object_with_only_dlpack_is_taken_without_a_copy(host_backend: str, take: Any,
                                                            device: Any) -> None:
    a = np.arange(8, dtype=np.int64).reshape(2, 4)
    src = DLPackOnly(a, device)
    assert not hasattr(src, "__array__") and not hasattr(src, "__array_interface__")
    t = take(src)
    assert src.calls and all(c.get("stream") is None for c in src.calls)  # host: no stream
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_array_equal(fj.sum(t, axis=1).numpy(), a.sum(axis=1))


@pytest.mark.parametrize("take", [fj.from_dlpack, fj.asarray], ids=["from_dlpack", "asarray"])
def test_an_object_with_only_the_array_interface_is_taken_without_a_copy(host_backend: str,
                                                                         take: Any) -> None:
    a = np.linspace(0, 1, 5)
    t = take(ArrayInterfaceOnly(a))
    assert np.shares_memory(t.numpy(), a)
    np.testing.assert_allclose((t + 1).numpy(), a + 1)


def test_read_only_buffers_are_taken(host_backend: str) -> None:
    a = np.arange(4.0)
    a.flags.writeable = False
    t = fj.from_dlpack(DLPackOnly(a))
    np.testing.assert_array_equal((t + 1).numpy(), a + 1)


def test_from_dlpack_refuses_what_exports_no_buffer(host_backend: str) -> None:
    with pytest.raises(fj.InteropError, match=r"list exports no buffer.*fj\.asarray"):
        fj.from_dlpack([1, 2, 3])
    with pytest.raises(TypeError):  # InteropError is also a TypeError
        fj.from_dlpack(3.0)


def test_an_exporters_error_is_named(host_backend: str) -> None:
    class Broken(DLPackOnly):
        def __dlpack__(self, **kwargs: Any) -> Any:
            raise BufferError("cannot export a tensor that requires grad")
    with pytest.raises(fj.InteropError, match="Broken.*requires grad"):
        fj.from_dlpack(Broken(np.ones(2)))


@pytest.mark.parametrize("take", [fj.from_dlpack, fj.asarray], ids=["from_dlpack", "asarray"])
def test_device_memory_on_a_host_backend_is_refused(host_backend: str, take: Any) -> None:
    a = np.ones(4, np.float32)
    for src in (DLPackOnly(a, (2, 1)), CudaInterfaceOnly(_host_interface(a))):
        with pytest.raises(fj.DeviceError) as info:
            take(src)
        text = str(info.value)
        assert f"current backend {host_backend!r} computes in host memory" in text
        assert "fj.using_backend('cuda')" in text and "cupy.asnumpy" in text
    with pytest.raises(fj.DeviceError, match="CUDA device 1"):
        take(DLPackOnly(a, (2, 1)))


def test_unsupported_dlpack_devices_are_named(host_backend: str) -> None:
    with pytest.raises(fj.DeviceError, match="ROCm memory"):
        fj.from_dlpack(DLPackOnly(np.ones(2), (10, 0)))


# -- the cuda backend's host logic, on FakeCupy ------------------------------------------------

@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCupy]:
    """The cuda backend selected, on a fresh FakeCupy with compiles faked; yields the fake."""
    pytest.importorskip("triton")  # the cuda backend needs Triton to exist (it is not run here)
    from fusejit.runtime import cuda_backend

    from .test_devices import _fake_compile
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(cuda_backend, "compile_launch", _fake_compile([]))
    with fj.using_backend("cuda"):
        yield cp


def _computed(host: np.ndarray) -> fj.Tensor:
    return (fj.asarray(host) * 2 + 1).realize()


def test_cuda_tensor_exports_its_buffer_through_the_cuda_array_interface(fake: FakeCupy) -> None:
    t = _computed(np.ones((4, 8), np.float32))
    buf = t.cupy()
    assert isinstance(buf, fake.ndarray) and t.cupy() is buf  # the buffer itself, no copy
    cai = t.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4, 8) and cai["typestr"] == "<f4"
    assert cai["data"] == (buf.data.ptr, False) and cai["strides"] is None
    assert cai["stream"] == 1  # computed on the null stream: 0 is disallowed, 1 is legacy
    assert np.shares_memory(fake.asarray(t)._host, buf._host)  # cupy.asarray(t): no copy
    assert t.__dlpack_device__() == (2, 0)


def test_a_cupy_leaf_exports_the_users_array_with_its_strides(fake: FakeCupy) -> None:
    strided = fake.ndarray(np.zeros((4, 6), np.float32)[:, ::2], 0)
    t = fj.asarray(strided)  # a CuPy array is taken as it is
    assert t.cupy() is strided
    cai = t.__cuda_array_interface__
    assert cai["strides"] == (24, 8) and cai["shape"] == (4, 3)
    assert cai["data"][0] == strided.data.ptr


def test_launches_go_on_the_current_stream_and_exports_name_it(fake: FakeCupy) -> None:
    host = np.ones(16, np.float32)
    s = fake.cuda.Stream(non_blocking=True)
    with s:
        t = _computed(host)
    assert fake.launch_streams and set(fake.launch_streams) == {s.ptr}  # none on the null stream
    # exported outside the block: still the stream the kernels were queued on
    assert t.__cuda_array_interface__["stream"] == s.ptr
    t.__dlpack__(stream=7)
    assert fake.dlpack_exports[-1] == (7, s.ptr)  # consumer stream 7 waits for s
    with fake.cuda.Stream() as other:
        assert t.__cuda_array_interface__["stream"] == s.ptr
        fake.from_dlpack(t)  # CuPy passes its current stream as the consumer's
        assert fake.dlpack_exports[-1] == (other.ptr, s.ptr)
    assert fake.cuda.get_current_stream() is fake.cuda.Stream.null  # the blocks restored it


def test_fj_realize_and_jit_results_remember_their_stream_not_as_a_signature(fake: FakeCupy) -> None:
    # fj.realize passed the stream where make_input takes the leaf's signature: every result
    # of fj.realize on cuda had the same "signature" (the stream), so programs over results of
    # different shapes shared a plan; fj.jit's results did not remember their stream at all
    from fusejit.ir.graph import structural_key
    s = fake.cuda.Stream(non_blocking=True)
    jitted = fj.jit(lambda x: x * 2 + 1)
    with s:
        a, b = fj.asarray(np.ones(4, np.float32)) * 2, fj.asarray(np.ones(8, np.float32)) * 2
        fj.realize(a, b)
        c = jitted(np.ones(4, np.float32))
        d, = jitted(np.ones((2, 3), np.float32)),
    for t in (a, b, c, d):
        assert t._node.stream is s and t.__cuda_array_interface__["stream"] == s.ptr
    assert structural_key([fj.sum(a)._node])[0] != structural_key([fj.sum(b)._node])[0]
    assert fj.plan(fj.sum(b)).program.inputs[0].type.shape == (8,)


def test_a_fortran_ordered_host_argument_reaches_the_kernel_as_bound(fake: FakeCupy) -> None:
    # fj.jit binds a host argument as the C-ordered upload it will be; CuPy kept a Fortran-ordered
    # host array's order, so the kernel, specialized for C strides, read it transposed
    host = np.asfortranarray(np.arange(64, dtype=np.float32).reshape(8, 8))
    fj.jit(lambda x: x * 2 + 1)(host)
    (x_arg,) = [a for a in fake.launch_args[-1] if isinstance(a, fake.ndarray)][:1]
    assert x_arg.flags.c_contiguous and np.array_equal(x_arg.get(), host)


def test_a_buffer_fusejit_did_not_compute_names_the_current_stream(fake: FakeCupy) -> None:
    t = fj.asarray(fake.asarray(np.ones(4, np.float32)))  # a CuPy array: made by the user
    with fake.cuda.Stream() as s:
        assert t.__cuda_array_interface__["stream"] == s.ptr  # as CuPy does for its arrays
    assert t.__cuda_array_interface__["stream"] == 1


def test_a_lazy_tensor_is_realized_by_the_cuda_array_interface(fake: FakeCupy) -> None:
    t = fj.asarray(np.ones(4, np.float32)) + 1
    with fake.cuda.Stream() as s:
        assert hasattr(t, "__cuda_array_interface__")
        assert t.is_realized and fake.launch_streams == [s.ptr]
    assert t.__cuda_array_interface__["stream"] == s.ptr


def test_from_dlpack_takes_device_memory_without_a_copy(fake: FakeCupy) -> None:
    src = fake.asarray(np.arange(6, dtype=np.float32))
    other = DLPackOnly(src, (2, 0))  # a torch-like device array: DLPack only
    with fake.cuda.Stream() as s:
        t = fj.from_dlpack(other)
    assert other.calls[-1]["stream"] == s.ptr  # CuPy asked the exporter for its stream
    assert np.shares_memory(t.cupy()._host, src._host)
    assert fake.uploads == [(0, (6,))]  # only the source's own upload
    (t * 2).realize()
    assert fj.from_dlpack(src).cupy() is src  # a CuPy array itself: as asarray takes it


def test_asarray_takes_the_cuda_array_interface_without_a_copy(fake: FakeCupy) -> None:
    host = np.arange(5, dtype=np.int32)
    src = CudaInterfaceOnly(_host_interface(host, stream=1234), owner=host)
    t = fj.asarray(src)
    assert fake.cai_imports == [1234] and fake.uploads == []
    assert np.shares_memory(t.cupy()._host, host)
    host[0] = 7  # the same memory
    assert t.cupy()._host[0] == 7
    (t + 1).realize()
    copied = fj.from_dlpack(src, copy=True)
    assert not np.shares_memory(copied.cupy()._host, host)


def test_host_data_under_the_cuda_backend(fake: FakeCupy) -> None:
    host = np.arange(4, dtype=np.float32)
    leaf = fj.asarray(host)  # not computed: its buffer is the host array
    assert leaf.__dlpack_device__() == (1, 0)
    assert not hasattr(leaf, "__cuda_array_interface__")
    assert np.shares_memory(np.from_dlpack(leaf), host)
    up = leaf.cupy()  # an explicit copy to the device
    assert isinstance(up, fake.ndarray) and not np.shares_memory(up._host, host)
    assert fake.uploads == [(0, (4,))]
    t = fj.from_dlpack(DLPackOnly(host))  # host DLPack under cuda: a host leaf, no copy
    assert np.shares_memory(t.numpy(), host)


def test_cupy_of_a_host_tensor_uploads_it(fake: FakeCupy) -> None:
    with fj.using_backend("numpy"):
        t = (fj.asarray(np.arange(3.0)) + 1).realize()
        up = t.cupy()
    assert isinstance(up, fake.ndarray)
    np.testing.assert_array_equal(up.get(), [1.0, 2.0, 3.0])
    assert not np.shares_memory(up._host, t.numpy())


def test_numpy_copies_on_the_stream_the_tensor_was_computed_on(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    monkeypatch.setattr(fake.ndarray, "get", lambda self: seen.append(
        fake.cuda.get_current_stream().ptr) or self._host.copy())
    with fake.cuda.Stream() as s:
        t = _computed(np.ones(4, np.float32))
    t.numpy()
    assert seen == [s.ptr]


# -- on a GPU ------------------------------------------------------------------------------------

_SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""


def _spinner() -> Any:
    """``spin(seconds)``: a kernel that keeps the current stream busy that long (compiled and
    run once here, so that later calls only launch)."""
    import cupy as cp
    kernel = cp.RawKernel(_SPIN, "spin")
    kernel((1,), (1,), (np.uint64(0),))
    cp.cuda.Device().synchronize()

    def spin(seconds: float) -> None:
        kernel((1,), (1,), (np.uint64(seconds * 1e9),))
    return spin


def _gpu_program(x: Any) -> fj.Tensor:
    return (fj.asarray(x) * 2 + 1).realize()


@pytest.fixture
def gpu() -> Iterator[Any]:
    """The cuda backend on a real GPU, with the test program and CuPy's kernels warmed up
    (compiled) so that a spin of a few hundred ms outlasts everything the host does."""
    import cupy as cp
    with fj.using_backend("cuda"):
        x = cp.zeros(1 << 20, cp.float32)
        x += 1
        _gpu_program(x)
        cp.cuda.Device().synchronize()
        yield cp


@pytest.mark.gpu
def test_gpu_realize_on_a_non_default_stream(gpu: Any) -> None:
    cp = gpu
    spin = _spinner()
    x = cp.zeros(1 << 20, cp.float32)
    cp.cuda.Device().synchronize()
    with cp.cuda.Stream(non_blocking=True) as s:
        spin(0.5)            # s is busy for half a second
        x += 1               # queued behind the spin, on s
        y = _gpu_program(x)  # on s, fusejit's kernel runs after x += 1: y = 3
        assert not s.done    # nothing has run yet: the host did not wait
        # the null stream holds nothing that waits for s: an event on it completes while s
        # still spins (had the kernel gone there, it would have run at once, on x = 0, and
        # y would be 1, not 3)
        done = cp.cuda.Event()
        done.record(cp.cuda.Stream.null)
        done.synchronize()
        assert not s.done
    assert y.__cuda_array_interface__["stream"] == s.ptr
    s.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(y.cupy()), np.full(1 << 20, 3, np.float32))
    assert "torch" not in sys.modules and "jax" not in sys.modules


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["cuda_array_interface", "dlpack", "numpy"])
def test_gpu_consumers_wait_for_the_stream_the_tensor_was_computed_on(gpu: Any, how: str) -> None:
    """Read on the null stream, with no synchronization by the user: the export names the
    producing stream, so the consumer waits for it."""
    cp = gpu
    spin = _spinner()
    x = cp.zeros(1 << 20, cp.float32)
    cp.cuda.Device().synchronize()
    with cp.cuda.Stream(non_blocking=True) as s:
        spin(0.3)
        x += 1
        y = _gpu_program(x)
    assert not s.done
    if how == "cuda_array_interface":
        got = cp.asarray(y)     # CuPy synchronizes on the interface's stream
        assert got.data.ptr == y.cupy().data.ptr
        got = cp.asnumpy(got)
    elif how == "dlpack":
        got = cp.from_dlpack(y)  # the null stream waits for s (an event, no host wait)
        assert got.data.ptr == y.cupy().data.ptr
        got = cp.asnumpy(got)
    else:
        got = y.numpy()          # copied on s
    np.testing.assert_array_equal(got, np.full(1 << 20, 3, np.float32))


@pytest.mark.gpu
def test_gpu_zero_copy_both_ways(gpu: Any) -> None:
    cp = gpu
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    t = fj.asarray(a)
    assert t.cupy() is a and t.__dlpack_device__() == (2, a.device.id)
    # other libraries' device arrays, seen through one protocol each
    by_cai = fj.asarray(CudaInterfaceOnly(a.__cuda_array_interface__, owner=a))
    by_dlpack = fj.from_dlpack(DLPackOnly(a, (2, a.device.id)))
    for u in (by_cai, by_dlpack):
        assert u.cupy().data.ptr == a.data.ptr
        np.testing.assert_array_equal((u * 2).numpy(), cp.asnumpy(a) * 2)
    y = (t + 1).realize()
    assert cp.asarray(y).data.ptr == y.cupy().data.ptr
    assert cp.from_dlpack(y).data.ptr == y.cupy().data.ptr
    host = np.ones(3, np.float32)
    leaf = fj.asarray(host)
    assert leaf.__dlpack_device__() == (1, 0) and np.shares_memory(np.from_dlpack(leaf), host)
    np.testing.assert_array_equal(cp.asnumpy(leaf.cupy()), host)  # an upload
    with pytest.raises(fj.DeviceError, match="'numpy' computes in host memory"):
        with fj.using_backend("numpy"):
            fj.from_dlpack(DLPackOnly(a, (2, a.device.id)))
    assert "torch" not in sys.modules and "jax" not in sys.modules
