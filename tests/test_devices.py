"""The ``cuda`` backend's devices and resources: per-device caches, mixed devices, missing
packages, no GPU, old GPUs, out of memory.

Most tests run the real backend code on ``FakeCupy`` (``tests/fake_cupy.py``:
NumPy arrays that know their device, modules that refuse launches from another
device), so they need no GPU; the kernels are not run (the fake records
launches), only the host logic is checked. Tests marked ``gpu`` do the same on
real devices (the two-device ones skip with fewer than 2 GPUs).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

import fusejit as fj
from fusejit import runtime
from fusejit.runtime import gpu_available

from .fake_cupy import CUDARuntimeError, FakeCupy

pytest.importorskip("triton")  # the cuda backend needs Triton to exist (it is not run here)


def _fake_compile(log: list[tuple[str, int]]) -> Any:
    """A stand-in for ``compile_launch``: a tiny "cubin", the compute capability logged."""
    from fusejit.runtime.compile import Compiled

    def compile_launch(emitted: Any, launch: Any, divisible: Any, cc: int = 90) -> Compiled:
        log.append((launch.fn_name, cc))
        n = len(launch.signature)
        return Compiled(launch.fn_name, b"\x7fELF" + launch.fn_name.encode(), 0, launch.num_warps,
                        n + 2, n)
    return compile_launch


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[FakeCupy]:
    """A fresh cuda backend on a FakeCupy (``@pytest.mark.parametrize("fake", [...], indirect=True)``
    gives its keyword arguments), with compiles faked; yields the fake module."""
    from fusejit.runtime import cuda_backend
    kwargs = getattr(request, "param", {})
    cp = FakeCupy(**kwargs)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    cp.compiled = []  # type: ignore[attr-defined]
    monkeypatch.setattr(cuda_backend, "compile_launch", _fake_compile(cp.compiled))  # type: ignore[attr-defined]
    yield cp


def _program(x: fj.Tensor) -> fj.Tensor:
    return fj.exp(x * 2) + 1


# -- per-device caches -------------------------------------------------------------------------

@pytest.mark.parametrize("fake", [{"devices": (90, 90)}], indirect=True)
def test_kernels_load_on_the_current_device(fake: FakeCupy) -> None:
    host = np.ones((8, 8), np.float32)
    with fj.using_backend("cuda"):
        y0 = _program(fj.asarray(host)).realize()
        assert [d for d, _ in fake.loads] == [0]
        with fake.cuda.Device(1):
            y1 = _program(fj.asarray(host)).realize()
        assert [d for d, _ in fake.loads] == [0, 1]          # loaded again, into device 1
        assert [d for d, _, _ in fake.launches] == [0, 1]    # and launched there
        _program(fj.asarray(host)).realize()                 # device 0 again: all cached
        with fake.cuda.Device(1):
            _program(fj.asarray(host)).realize()
    assert [d for d, _ in fake.loads] == [0, 1]
    assert [d for d, _, _ in fake.launches] == [0, 1, 0, 1]
    assert y0._node.buffer.data.device_id == 0 and y1._node.buffer.data.device_id == 1
    assert [cc for _, cc in fake.compiled] == [90, 90]  # once per device (the 2nd: a disk hit)


def test_a_new_backend_instance_never_uses_anothers_launchers(fake: FakeCupy,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Launchers hold functions of one CuPy (here: of one fake): a backend created later (a
    test's fake replaced by the real CuPy) builds its own, although the plan is shared."""
    host = np.ones(32, np.float32)
    with fj.using_backend("cuda"):
        _program(fj.asarray(host)).realize()
    second = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", second)
    monkeypatch.setattr(runtime, "_backends", {})
    with fj.using_backend("cuda"):
        y = _program(fj.asarray(host)).realize()
    assert len(fake.launches) == 1 and len(second.launches) == 1 and len(second.loads) == 1
    assert isinstance(y._node.buffer, second.ndarray)


@pytest.mark.parametrize("fake", [{"devices": (80, 90)}], indirect=True)
def test_cubins_compiled_for_each_devices_capability(fake: FakeCupy) -> None:
    host = np.ones(64, np.float32)
    with fj.using_backend("cuda"):
        _program(fj.asarray(host)).realize()
        with fake.cuda.Device(1):
            _program(fj.asarray(host)).realize()
    assert [cc for _, cc in fake.compiled] == [80, 90]


def test_device_cache_keys_with_real_compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Real cubins (Triton compiles for sm_80 and sm_90 without a GPU) on two fake devices:
    two disk entries, and each device loads the cubin of its own capability."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    cp = FakeCupy(devices=(80, 90))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    with fj.using_backend("cuda"):
        x = fj.asarray(np.ones(256, np.float32))
        (x + 1).realize()
        with cp.cuda.Device(1):
            (x + 1).realize()
        backend = runtime.backend_instance("cuda")
    entries = sorted(p.name for p in (tmp_path / "cubin").iterdir())
    assert len(entries) == 2 and "-sm80-" in entries[0] and "-sm90-" in entries[1], entries
    cubins = [next(iter(backend.device(d).modules))[0] for d in (0, 1)]
    assert cubins[0] != cubins[1] and all(c[:4] == b"\x7fELF" for c in cubins)


@pytest.mark.parametrize("fake", [{"devices": (90, 90)}], indirect=True)
def test_host_input_is_copied_once_per_device(fake: FakeCupy) -> None:
    host = np.arange(1000, dtype=np.float32)
    x = fj.asarray(host)
    with fj.using_backend("cuda"):
        (x * 2).realize()
        (x + 1).realize()
        with fake.cuda.Device(1):
            (x - 1).realize()
            (x * 3).realize()
    assert fake.uploads == [(0, (1000,)), (1, (1000,))]
    assert x._node.buffer is host                           # the leaf keeps its host data
    assert sorted(x._node.copies) == [0, 1]
    assert x._node.copies[1][0].data.device_id == 1  # (array, its specialization)


@pytest.mark.parametrize("fake", [{"devices": (90, 90)}], indirect=True)
def test_cuda_realize_binds_the_leaves_of_each_specialization(fake: FakeCupy,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    # a program keeps, per device, its last realize's leaf specialization and runner: a
    # realize over leaves of another one (strides, alignment, device) takes the general path
    base = np.arange(80, dtype=np.float32)
    assert base.ctypes.data % 16 == 0
    arrays = {"contiguous": fake.ndarray(base[:16].copy(), 0),
              "strided": fake.ndarray(base[::5], 0),          # element stride 5
              "offset": fake.ndarray(base[1:17], 0)}         # 4 bytes past a 16-byte boundary
    with fake.cuda.Device(1):
        arrays["device 1"] = fake.asarray(base[:16])
    backend = runtime.backend_instance("cuda")
    built: list[Any] = []
    ran: list[Any] = []
    original = backend._build_plan

    def tracked(program: Any, spec: Any, dev: Any, prepared: bool = False) -> Any:
        built.append((dev.id, spec[0]))
        run = original(program, spec, dev, prepared)
        return lambda arrays: ran.append((dev.id, spec[0])) or run(arrays)

    monkeypatch.setattr(backend, "_build_plan", tracked)
    inputs = {name: fj.asarray(a) for name, a in arrays.items()}  # (leaves met again)
    order = ["contiguous", "strided", "contiguous", "offset", "offset", "device 1", "strided",
             "contiguous", "contiguous", "device 1", "offset", "strided"]
    expected = {"contiguous": (0, ((1,), True)), "strided": (0, ((5,), True)),
                "offset": (0, ((1,), False)), "device 1": (1, ((1,), True))}
    for i, name in enumerate(order):
        x = fj.asarray(arrays[name]) if i in (2, 4) else inputs[name]  # (two leaves new)
        with fj.using_backend("cuda"), fake.cuda.Device(1 if name == "device 1" else 0):
            out = (x * float(i) + 1).realize()
        assert ran[-1] == expected[name], (i, name)  # the runner of this realize's leaves
        args = fake.launch_args[-1]
        assert args[0] is arrays[name] and float(args[1]) == i and out._node.buffer is args[3]
    assert sorted(built) == sorted(expected.values())  # once per (device, specialization)


@pytest.mark.parametrize("fake", [{"devices": (90, 90)}], indirect=True)
def test_mixing_devices_is_a_device_error(fake: FakeCupy) -> None:
    a = fake.asarray(np.ones(4, np.float32))
    with fake.cuda.Device(1):
        b = fake.asarray(np.ones(4, np.float32))
    with fj.using_backend("cuda"):
        msg = ("@main mixes arrays from CUDA devices 0 and 1 (device 0: %a; device 1: %b; the current "
               "device is 0); a program runs on one device")
        with pytest.raises(fj.DeviceError, match=re.escape(msg)):
            (fj.asarray(a, name="a") + fj.asarray(b, name="b")).realize()
        msg = ("the inputs of @main live on CUDA device 1 (device 1: %b) but the current CuPy device "
               "is 0: realize inside `with cupy.cuda.Device(1):`")
        with pytest.raises(fj.DeviceError, match=re.escape(msg)):
            (fj.asarray(b, name="b") * 2).realize()
        program = fj.parse(fj.dump(fj.asarray(a, name="a") + fj.asarray(b, name="b")))
        with fake.cuda.Device(1), pytest.raises(fj.DeviceError, match="mixes arrays from CUDA devices"):
            program.run(a, b)
    assert fake.launches == []  # nothing ran


@pytest.mark.parametrize("fake", [{"devices": (90, 90)}], indirect=True)
def test_threads_on_two_devices(fake: FakeCupy) -> None:
    """8 threads, each on its device, share the backend; every launch runs where its thread is."""
    barrier = threading.Barrier(8)

    def work(i: int) -> list[int]:
        dev = i % 2
        seen = []
        with fake.cuda.Device(dev), fj.using_backend("cuda"):
            barrier.wait()
            for r in range(20):
                x = fj.asarray(np.full((4, 8), i, np.float32))
                y = (fj.exp(x) * (r % 3) + x.sum(axis=1, keepdims=True)).realize()
                seen.append(y._node.buffer.data.device_id)
        return seen

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(work, range(8)))
    assert results == [[i % 2] * 20 for i in range(8)]
    # each (kernel, device) pair loaded once, although 4 threads per device raced for it
    assert len(fake.loads) == len(set(fake.loads))
    assert {d for d, _ in fake.loads} == {0, 1}


# -- a GPU the backend cannot use -------------------------------------------------------------

def _unavailable(monkeypatch: pytest.MonkeyPatch, cp: Any) -> str:
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    with pytest.raises(fj.BackendUnavailableError) as info:
        fj.set_backend("cuda")
    return str(info.value)


def test_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    error = CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
    assert _unavailable(monkeypatch, FakeCupy(count_error=error)) == (
        "backend 'cuda' needs CuPy and a CUDA GPU; CuPy finds no usable GPU (cudaErrorNoDevice: no "
        "CUDA-capable device is detected); use FUSEJIT_BACKEND=interpret or numpy (or "
        "fj.set_backend('interpret'))")
    assert _unavailable(monkeypatch, FakeCupy(devices=())) .startswith(
        "backend 'cuda' needs CuPy and a CUDA GPU; CuPy sees no CUDA device; use FUSEJIT_BACKEND=")


def test_gpu_too_old(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _unavailable(monkeypatch, FakeCupy(devices=(61,))) == (
        "backend 'cuda' needs a GPU of compute capability 7.5 or newer (what Triton compiles for); "
        "CUDA device 0 (Fake GPU sm_61) has compute capability 6.1; use FUSEJIT_BACKEND=interpret "
        "or numpy (or fj.set_backend('interpret'))")


@pytest.mark.parametrize("fake", [{"devices": (90, 70)}], indirect=True)
def test_second_gpu_too_old(fake: FakeCupy) -> None:
    with fj.using_backend("cuda"):
        (fj.asarray(np.ones(4, np.float32)) + 1).realize()   # device 0 is fine
        with fake.cuda.Device(1), pytest.raises(fj.BackendUnavailableError,
                                                match=re.escape("CUDA device 1 (Fake GPU sm_70) has "
                                                                "compute capability 7.0")):
            (fj.asarray(np.ones(4, np.float32)) + 1).realize()


def test_env_cuda_without_gpu_fails_at_first_realize(monkeypatch: pytest.MonkeyPatch) -> None:
    """``FUSEJIT_BACKEND=cuda`` without CuPy: importing works, realize says what is missing."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(runtime, "_backends", {})
    monkeypatch.setattr(runtime, "_selected", None)
    monkeypatch.setenv("FUSEJIT_BACKEND", "cuda")
    assert fj.get_backend() == "cuda"
    with pytest.raises(fj.BackendUnavailableError,
                       match=re.escape("backend 'cuda' needs CuPy and a CUDA GPU; CuPy is not installed")):
        (fj.asarray(np.ones(3)) + 1).realize()
    fj.set_backend("numpy")  # the advice in the message works
    np.testing.assert_array_equal((fj.asarray(np.ones(3)) + 1).numpy(), np.full(3, 2.0))


def test_cupy_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CuPy that is installed but broken (e.g. built for another CUDA) is named as such."""
    import importlib

    real = importlib.import_module

    def broken(name: str, *args: Any) -> Any:
        if name == "cupy":
            raise ImportError("libcudart.so.12: cannot open shared object file")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", broken)
    monkeypatch.setattr(runtime, "_backends", {})
    with pytest.raises(fj.BackendUnavailableError, match=re.escape(
            "CuPy cannot be imported (libcudart.so.12: cannot open shared object file)")):
        fj.set_backend("cuda")


# -- out of memory ----------------------------------------------------------------------------

@pytest.mark.parametrize("fake", [{"memory": 1 << 20}], indirect=True)
def test_out_of_memory_allocating_outputs(fake: FakeCupy) -> None:
    x = fake.asarray(np.ones(1000, np.float32))
    big = fj.broadcast_to(fj.asarray(x), (1000, 1000)) + 1    # 4,000,000 bytes of output
    with fj.using_backend("cuda"):
        with pytest.raises(fj.DeviceMemoryError) as info:
            big.realize()
    msg = str(info.value)
    assert msg.startswith("out of GPU memory on CUDA device 0 allocating the outputs of kernel ")
    assert ": 4,000,000 bytes asked for (Out of memory allocating 4,000,000 bytes" in msg
    assert "or run a smaller problem" in msg
    assert isinstance(info.value, MemoryError)


@pytest.mark.parametrize("fake", [{"memory": 1 << 20}], indirect=True)
def test_out_of_memory_in_a_jit_replay_and_a_repeated_realize(fake: FakeCupy) -> None:
    """The plan runner names what it could not allocate itself, on every path that replays it
    (fj.jit's calls and a realize whose leaves are bound already)."""
    small = fake.asarray(np.ones(1000, np.float32))
    with fj.using_backend("cuda"):
        f = fj.jit(lambda x: x * 2 + 1)
        f(small)
        x = fj.asarray(small)
        (x * 3 + 1).realize()  # recorded, planned and bound: the next call replays
        # leave less than one more output of 4,000 bytes
        filler = fake.asarray(np.ones((fake.memory_limit - fake.allocated[0] - 3000) // 4,
                                      np.float32))
        for call in (lambda: f(small), lambda: (x * 3 + 1).realize()):
            with pytest.raises(fj.DeviceMemoryError, match="allocating the outputs of kernel "):
                call()
    del filler


@pytest.mark.parametrize("fake", [{"memory": 1 << 20}], indirect=True)
def test_out_of_memory_copying_an_input(fake: FakeCupy) -> None:
    x = fj.asarray(np.ones((512, 1024), np.float32))  # 2 MiB of host data
    with fj.using_backend("cuda"), pytest.raises(fj.DeviceMemoryError, match=re.escape(
            "out of GPU memory on CUDA device 0 copying a float32[512, 1024] input there: "
            "2,097,152 bytes asked for")):
        (x + 1).realize()


@pytest.mark.parametrize("fake", [{"memory": 6000}], indirect=True)
def test_out_of_memory_anywhere_else_names_the_program(fake: FakeCupy) -> None:
    """An allocation not named more precisely (here: the copy of an input returned as an
    output) still says the device and, from CuPy's message, the bytes asked for."""
    program = fj.parse("func @ident(%x: f32[1000]) -> f32[1000] {\n  return %x\n}\n")
    x = fake.asarray(np.ones(1000, np.float32))  # 4,000 of the 6,000 bytes
    with fj.using_backend("cuda"), pytest.raises(fj.DeviceMemoryError, match=re.escape(
            "out of GPU memory on CUDA device 0 while running @ident: 4,000 bytes asked for "
            "(Out of memory allocating 4,000 bytes (allocated so far: 4,000 bytes).)")):
        program.run(x)


# -- the same on real GPUs ----------------------------------------------------------------------

def _device_count() -> int:
    if not gpu_available():
        return 0
    import cupy
    return int(cupy.cuda.runtime.getDeviceCount())


two_gpus = pytest.mark.skipif(_device_count() < 2, reason="needs 2 CUDA GPUs")


@pytest.mark.gpu
@two_gpus
def test_two_real_devices() -> None:
    import cupy as cp

    from fusejit.runtime import backend_instance
    host = np.random.default_rng(0).standard_normal((64, 1000)).astype(np.float32)
    expected = np.exp(host - host.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    x = fj.asarray(host)  # one host leaf used on both devices
    with fj.using_backend("cuda"):
        for dev in (0, 1, 0, 1):
            with cp.cuda.Device(dev):
                y = fj.softmax(x).realize()
                assert y._node.buffer.device.id == dev
                np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-7)
                d_in = cp.asarray(host)  # a CuPy input made on this device
                z = fj.softmax(fj.asarray(d_in)).realize()
                np.testing.assert_allclose(z.numpy(), expected, rtol=1e-5, atol=1e-7)
        backend = backend_instance("cuda")
        assert backend.device(0).modules and backend.device(1).modules
        assert sorted(x._node.copies) == [0, 1]


@pytest.mark.gpu
@two_gpus
def test_two_real_devices_mixed_is_a_device_error() -> None:
    import cupy as cp
    with cp.cuda.Device(0):
        a = cp.ones(16, cp.float32)
    with cp.cuda.Device(1):
        b = cp.ones(16, cp.float32)
    with fj.using_backend("cuda"), pytest.raises(fj.DeviceError,
                                                 match="mixes arrays from CUDA devices 0 and 1"):
        (fj.asarray(a) + fj.asarray(b)).realize()


@pytest.mark.gpu
@two_gpus
def test_threads_on_two_real_devices() -> None:
    import cupy as cp
    rng = np.random.default_rng(1)
    hosts = [rng.standard_normal((32, 300)).astype(np.float32) for _ in range(8)]

    def work(i: int) -> None:
        with cp.cuda.Device(i % 2), fj.using_backend("cuda"):
            for r in range(20):
                h = hosts[(i + r) % 8]
                y = (fj.exp(fj.asarray(cp.asarray(h))) * np.float32(i) + r).sum(axis=1).realize()
                assert y._node.buffer.device.id == i % 2
                np.testing.assert_allclose(y.numpy(), (np.exp(h) * np.float32(i) + r).sum(axis=1),
                                           rtol=1e-5, atol=1e-3)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(work, range(8)))


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_real_out_of_memory_is_a_device_memory_error() -> None:
    import cupy as cp
    x = fj.asarray(cp.ones(1, cp.float32))
    huge = fj.broadcast_to(x, (1 << 40,)) + 1  # 4 TiB of output
    with fj.using_backend("cuda"), pytest.raises(fj.DeviceMemoryError) as info:
        huge.realize()
    assert "4,398,046,511,104 bytes asked for" in str(info.value)
    assert (fj.asarray(cp.ones(8, cp.float32)) + 1).numpy().tolist() == [2.0] * 8  # still usable


def test_gemm_launches_with_real_compiles(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A split-K GEMM on the cuda backend (real sm_90 cubins, a fake device): the partials
    launch over (tiles, chunks), then the combine launch, each with its pipelining depth in
    the cubin's cache key and more than 48 KB of shared memory enabled."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    cp = FakeCupy(devices=(90,))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    with fj.using_backend("cuda"):
        a = fj.asarray(np.ones((64, 8192), np.float16))
        b = fj.asarray(np.ones((8192, 256), np.float16))
        y = fj.maximum(a @ b, 0)
        (kernel,) = fj.plan(y).regions
        split, stages = kernel.attrs["split_k"], kernel.attrs["num_stages"]
        assert split > 1
        y.realize()
    names = [(name, grid) for _, name, grid in cp.launches]
    assert [n for n, _ in names] == [f"{kernel.name}_partials", f"{kernel.name}_combine"]
    assert names[0][1][1] == split and names[1][1][1] == 1
    entries = sorted(p.name for p in (tmp_path / "cubin").iterdir())
    assert any(f"-s{stages}-" in e and "_partials" in e for e in entries), entries


def test_tma_gemm_gets_global_scratch_and_aligned_inputs(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Any) -> None:
    """A gemm kernel with ``tma=1`` (descriptors made in the kernel, real sm_90 cubins) is
    launched with a global scratch buffer of one slice per program; an operand that does not
    start on a 16-byte boundary is refused with a BackendError naming it."""
    import re
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    cp = FakeCupy(devices=(90,))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    a, b = np.ones((256, 128), np.float16), np.ones((128, 256), np.float16)
    text = fj.dump(fj.asarray(a, name="a") @ fj.asarray(b, name="b"), fused=True)
    prog = fj.parse(re.sub(r"kind=gemm", "kind=gemm tma=1", text))
    with fj.using_backend("cuda"):
        prog.run(cp.asarray(a), cp.asarray(b))
        (_, _, grid), args = cp.launches[-1], cp.arguments[-1]
        scratch = args[3]  # a, b, out, then Triton's global scratch
        assert isinstance(scratch, cp.ndarray) and scratch.dtype == np.uint8
        assert scratch.size % (grid[0] * grid[1] * grid[2]) == 0 and scratch.size > 0
        offset = cp.ndarray(np.ones(256 * 128 + 1, np.float16)[1:].reshape(256, 128), 0)
        with pytest.raises(fj.BackendError, match="16-byte boundary"):
            prog.run(offset, cp.asarray(b))  # starts 2 bytes into its allocation


def test_default_persistent_gemm_falls_back_per_buffer_and_device(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A float16 GEMM the heuristic made persistent with TMA loads (real sm_90 cubins, FakeCupy
    launches): launched with one program per SM of the heuristic (``heuristics.SMS``), on a
    device with fewer SMs with one per SM of the device, and on an operand that does not
    start on a 16-byte boundary (which TMA cannot read) as one program per tile without TMA:
    not an error, as it is for a ``tma=1`` the user wrote."""
    from fusejit.codegen import heuristics
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(heuristics, "SMS", 2)  # 4 tiles of 128 x 256: 2 waves of 2 programs
    cp = FakeCupy(devices=(90,))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    a, b = np.ones((256, 128), np.float16), np.ones((128, 512), np.float16)
    text = fj.dump(fj.asarray(a, name="a") @ fj.asarray(b, name="b"), fused=True)
    prog = fj.parse(text)
    assert prog.kernels[0].attrs["block_m"] * prog.kernels[0].attrs["block_n"] == 128 * 256
    offset = cp.ndarray(np.ones(256 * 128 + 1, np.float16)[1:].reshape(256, 128), 0)
    with fj.using_backend("cuda"):
        prog.run(cp.asarray(a), cp.asarray(b))
        assert cp.launches[-1][2] == (2, 1, 1)
        prog.run(offset, cp.asarray(b))  # starts 2 bytes into its allocation
        assert cp.launches[-1][2] == (4, 1, 1)
    cp = FakeCupy(devices=(90,))
    cp.sms = 1
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    with fj.using_backend("cuda"):
        fj.parse(text).run(cp.asarray(a), cp.asarray(b))
        assert cp.launches[-1][2] == (1, 1, 1)


def _persistent_gemm_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                           edit: Callable[[Any, bool], dict[str, Any]]
                           ) -> tuple[FakeCupy, list[str]]:
    """A fresh cuda backend on a FakeCupy whose compiles are real sm_90 ones, each result
    changed by ``edit(compiled, persistent)`` (fields to replace; persistent: the source has
    the persistent loop), with 2 SMs (4 tiles of 128 x 256: 2 waves of 2 programs); returns
    the fake and the list of every compiled source, in order."""
    from dataclasses import replace

    from fusejit.codegen import heuristics
    from fusejit.runtime import compile as compile_module
    from fusejit.runtime import cuda_backend, kernel_cache
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(heuristics, "SMS", 2)
    monkeypatch.setattr(kernel_cache, "_emit_cache", {})  # (emissions under other SMS counts)
    loaded: list[str] = []

    def compile_launch(emitted: Any, *args: Any, **kwargs: Any) -> Any:
        c = compile_module.compile_launch(emitted, *args, **kwargs)
        loaded.append(emitted.source)
        return replace(c, **edit(c, "flatten=True" in emitted.source))
    monkeypatch.setattr(cuda_backend, "compile_launch", compile_launch)
    cp = FakeCupy(devices=(90,))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    return cp, loaded


def test_a_serialized_persistent_gemm_is_relayed_with_one_program_per_tile(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """When ptxas serializes the main loop of a GEMM the heuristic made persistent (CUDA 13's
    ptxas does for tanh after a bias), the backend relays the product with one program per
    tile (``tma=0 programs=0 relay=1``: a relay inside the persistent loop ran at a third of
    the speed); a persistent kernel the user wrote (``programs=2``) is left as written. Real
    sm_90 compiles; which compiles ptxas "serializes" is decided here (persistent ones)."""
    cp, loaded = _persistent_gemm_setup(
        monkeypatch, tmp_path, lambda c, persistent: {"serialized_mma": persistent})
    a, b, c = np.ones((256, 128), np.float16), np.ones((128, 512), np.float16), np.ones(512, np.float16)
    text = fj.dump(fj.tanh(fj.asarray(a, name="a") @ fj.asarray(b, name="b")
                           + fj.asarray(c, name="c")), fused=True)
    with fj.using_backend("cuda"):
        fj.parse(text).run(cp.asarray(a), cp.asarray(b), cp.asarray(c))
        assert "flatten=True" in loaded[0] and "relayed through L2" not in loaded[0]
        assert "flatten=True" not in loaded[-1] and "relayed through L2" in loaded[-1]
        assert cp.launches[-1][2] == (4, 1, 1)
        loaded.clear()
        fj.parse(text.replace("kind=gemm", "kind=gemm programs=2 tma=1")).run(
            cp.asarray(a), cp.asarray(b), cp.asarray(c))
        assert all("flatten=True" in s and "relayed" not in s for s in loaded)
        assert cp.launches[-1][2] == (2, 1, 1)


def test_a_one_wave_gemm_loads_through_tma_or_falls_back_per_buffer(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A float16 GEMM of half a wave to one (4 tiles of 128 x 256 on 6 SMs) loads through TMA
    with one program per tile by the heuristic's choice (real sm_90 cubins, FakeCupy
    launches); an operand that does not start on a 16-byte boundary gets pointer loads."""
    from fusejit.codegen import heuristics
    cp, loaded = _persistent_gemm_setup(monkeypatch, tmp_path, lambda c, persistent: {})
    monkeypatch.setattr(heuristics, "SMS", 6)
    a, b = np.ones((256, 128), np.float16), np.ones((128, 512), np.float16)
    text = fj.dump(fj.asarray(a, name="a") @ fj.asarray(b, name="b"), fused=True)
    offset = cp.ndarray(np.ones(256 * 128 + 1, np.float16)[1:].reshape(256, 128), 0)
    with fj.using_backend("cuda"):
        fj.parse(text).run(cp.asarray(a), cp.asarray(b))
        assert "(TMA)" in loaded[-1] and "flatten=True" not in loaded[-1]
        assert cp.launches[-1][2] == (4, 1, 1)
        fj.parse(text).run(offset, cp.asarray(b))  # starts 2 bytes into its allocation
        assert "(TMA)" not in loaded[-1] and cp.launches[-1][2] == (4, 1, 1)


def test_a_persistent_gemm_past_the_shared_memory_limit_runs_one_program_per_tile(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A GEMM the heuristic made persistent whose compiled kernel asks for more shared memory
    than the device allows (its epilogue's conversion beside the next tile's loads: a TF32
    7100x5649x4056 product asked 278,552 bytes of 232,448 on the H200) runs with one program
    per tile (``tma=0 programs=0``), not an error. Real sm_90 compiles; which compiles ask for
    too much is decided here (the persistent ones)."""
    cp, loaded = _persistent_gemm_setup(
        monkeypatch, tmp_path, lambda c, persistent: {"shared": 300000} if persistent else {})
    a, b = np.ones((256, 128), np.float16), np.ones((128, 512), np.float16)
    text = fj.dump(fj.asarray(a, name="a") @ fj.asarray(b, name="b"), fused=True)
    with fj.using_backend("cuda"):
        fj.parse(text).run(cp.asarray(a), cp.asarray(b))
        assert "flatten=True" in loaded[0] and "flatten=True" not in loaded[-1]
        assert cp.launches[-1][2] == (4, 1, 1)


def test_launches_go_through_the_driver_with_their_parameters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Where CuPy has ``driver.launchKernel`` a plan's launches go through it, with a
    parameter block built once: each launch passes the current stream's handle and the
    addresses of cells holding, in the kernel's parameter order, the buffers' device pointers
    and the scalar params' values in their carrier types, then Triton's null scratch
    pointers; a second call (a new scalar, new inputs, a new output) rewrites them."""
    import ctypes
    cp = FakeCupy(devices=(90,), raw_launch=True)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    x, y = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    five = fj.jit(lambda a, b, s: fj.maximum(a * s + b, 0.0) * 0.5 - 1.0)
    with fj.using_backend("cuda"):
        stream = cp.cuda.Stream()
        with stream:
            for scale in (2.0, -3.5):
                a, b = cp.asarray(x), cp.asarray(y)
                out = five(a, b, scale)
                f, grid, block, shared, handle, params = cp.raw_launches[-1]
                assert handle == stream.ptr and grid == (1, 1, 1) and not cp.launches
                n = 8  # a, s, b, the three constants, out, then Triton's scratch pointers
                addresses = list((ctypes.c_uint64 * n).from_address(params))
                cells = [ctypes.c_uint64.from_address(ad).value for ad in addresses]
                floats = [ctypes.c_float.from_address(ad).value for ad in addresses]
                (kernel,) = fj.plan(fj.maximum(fj.asarray(x) * scale + fj.asarray(y), 0.0) * 0.5
                                    - 1.0).program.kernels
                assert [p.scalar for p in kernel.params] == [False, True, False, True, True, True]
                assert cells[0] == a.data.ptr and cells[2] == b.data.ptr
                assert floats[1] == np.float32(scale)
                assert floats[3:6] == [0.0, 0.5, 1.0]
                assert cells[6] == out._node.buffer.data.ptr and cells[7] == 0


def test_only_pointers_and_carrier_scalars_launch_through_the_driver() -> None:
    """The driver path takes pointers and the scalar carriers (float32, float64, int32,
    int64); a launch with any other parameter type goes through CuPy's Function call."""
    from fusejit.runtime.cuda_backend import _RawLaunch
    assert _RawLaunch.takes(("*fp32", "fp32", "*i8", "i64", "fp64", "i32", "*"))
    assert not _RawLaunch.takes(("*fp32", "fp16")) and not _RawLaunch.takes(())


def test_tiles_that_need_too_much_shared_memory_are_a_clear_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Edited tiles whose compiled kernel asks for more shared memory than the device allows
    (TF32 128x256x32 tiles in 3 stages, persistent with TMA loads: their epilogue's layout
    change needs more on top of the pipeline's buffers; the H200 refused to load it with
    "CUDA_ERROR_INVALID_VALUE") fail with a BackendError naming the kernel and the sizes."""
    import re
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path))
    cp = FakeCupy(devices=(90,))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    a, bt = np.ones((4096, 4096), np.float32), np.ones((4096, 4096), np.float32)
    y = fj.matmul(fj.asarray(a, name="a"), fj.asarray(bt, name="bt").T, precision="tf32")
    text = fj.dump(y, fused=True)
    for name, value in (("block_m", 128), ("block_n", 256), ("block_k", 32), ("num_warps", 8),
                        ("num_stages", 3)):
        text = re.sub(rf"\b{name}=\d+", f"{name}={value}", text)
    prog = fj.parse(text.replace("kind=gemm", "kind=gemm programs=132 tma=1"))
    with fj.using_backend("cuda"), pytest.raises(
            fj.BackendError, match=r"kernel matmul_f32_4096x4096 needs \d+ bytes of shared memory "
                                   r"per program; CUDA device 0 allows 232448: fewer stages"):
        prog.run(cp.asarray(a), cp.asarray(bt))


def test_outputs_die_with_their_tensors(fake: FakeCupy) -> None:
    """The cuda backend's realize and jit paths keep no cycle through an output (a cycle kept
    every 256 MB output of a layer-norm loop alive until the garbage collector ran: a fresh
    device allocation per call, 27 GB held on the H200)."""
    from .test_regressions import check_buffers_die_with_their_tensors
    with fj.using_backend("cuda"):
        def forget() -> None:  # the fake logs every launch's arguments
            fake.arguments.clear()
            fake.launch_args.clear()
        check_buffers_die_with_their_tensors(forget)


def test_split_reduction_counters_zeroed_once_per_stream(fake: FakeCupy) -> None:
    """A split reduction is one launch that counts its finished programs on int32 counters,
    zero when a launch starts and left zero by it: they are zeroed once per (device, stream)
    and then reused (no memset per launch); launches on another stream get their own set,
    so two streams running the same plan at once never share a count."""
    x = np.ones(1 << 20, np.float32)

    def counters() -> Any:
        (found,) = [a for a in fake.arguments[-1] if isinstance(a, fake.ndarray)
                    and a.dtype == np.int32]
        return found

    with fj.using_backend("cuda"):
        fj.asarray(x).sum().realize()
        first = counters()
        fj.asarray(x).sum().realize()
        assert counters() is first
        with fake.cuda.Stream() as s:
            fj.asarray(x).sum().realize()
            other = counters()
        fj.asarray(x).sum().realize()
        assert counters() is first
    assert other is not first and len(fake.launches) == 4  # one launch per realize
    assert fake.zeroed == [(0, 0, (1,)), (0, s.ptr, (1,))]  # one row block: one counter
    # (that the last program zeroes them again needs kernels that run: test_gpu's split
    # reductions run twice on the same counters and must give the same bits)


def test_forget_plans_drops_the_cuda_launchers_shared_by_structure(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``runtime.forget_plans`` a heuristics switch takes effect on ``cuda`` too: the
    backend's launchers, shared between structurally equal kernels, are built again from the
    source emitted under the switch (the H200 run timed the cached looped softmax as the
    "cooperative" one before this)."""
    import fusejit.codegen.heuristics as heuristics
    from fusejit.runtime import cuda_backend
    sources: list[str] = []
    fake_compile = cuda_backend.compile_launch

    def compile_launch(emitted: Any, *args: Any, **kwargs: Any) -> Any:
        sources.append(emitted.source)
        return fake_compile(emitted, *args, **kwargs)
    monkeypatch.setattr(cuda_backend, "compile_launch", compile_launch)
    x = np.ones((2, 1 << 17), np.float32)  # 512 KB rows: cooperative when switched on
    monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", False)
    runtime.forget_plans()
    with fj.using_backend("cuda"):
        fj.softmax(fj.asarray(x), axis=-1).realize()
        # (two rows too wide for one program each, no cooperative kernel: the statistics
        # split across the GPU, then a pointwise kernel: rules.rule_broadcast_back_fills_gpu)
        assert len(sources) == 2 and not any("_finish(" in s for s in sources)
        monkeypatch.setattr(heuristics, "COOPERATIVE_ROWS", True)
        runtime.forget_plans()
        fj.softmax(fj.asarray(x), axis=-1).realize()
    assert len(sources) == 3 and "_finish(" in sources[2]


def test_a_serialized_gemm_is_compiled_again_with_its_product_relayed(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """GELU after a bias on a float16 product (the MLP's first layer): compiled for sm_90 with
    the installed Triton (no GPU: FakeCupy loads and "launches"), ptxas serializes the main
    loop's wgmma, so the backend emits the kernel again with ``relay=1`` (the epilogue reads
    the product back from its output) and that is the kernel it loads: ptxas pipelines it.
    (With one program per tile: the default persistent kernel with TMA loads keeps GELU
    pipelined, tests/test_cubin.py.)"""
    from fusejit.codegen import heuristics
    from fusejit.runtime import compile as compile_module
    from fusejit.runtime import cuda_backend
    monkeypatch.setattr(heuristics, "GEMM_PERSISTENT", "0")
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    compiled: list[tuple[bool, bool]] = []  # (relayed source, ptxas serialized), in order

    def compile_launch(emitted: Any, *args: Any, **kwargs: Any) -> Any:
        c = compile_module.compile_launch(emitted, *args, **kwargs)
        compiled.append(("relayed through L2" in emitted.source, c.serialized_mma))
        return c
    monkeypatch.setattr(cuda_backend, "compile_launch", compile_launch)
    x, w, b = (np.zeros(s, np.float16) for s in ((8192, 2048), (2048, 8192), 8192))
    with fj.using_backend("cuda"):
        y = fj.asarray(x) @ fj.asarray(w) + fj.asarray(b)
        (0.5 * y * (1 + fj.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))).realize()
    assert compiled[0] == (False, True)  # the first emission: serialized
    assert compiled[-1] == (True, False) and len(fake.loads) == 1  # loaded: the relayed one
