"""``fj.jit``: recorded once per input signature, replayed after; dynamic floats are kernel
parameters; the function must not look at values while it is recorded.

The ``numpy`` and ``interpret`` backends run here; the ``cuda`` backend's host logic runs
on ``FakeCupy`` (launches recorded, not run); tests marked ``gpu`` run it on a GPU.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

import fusejit as fj
from fusejit import fuse, runtime
from fusejit.runtime import gpu_available
from fusejit.testing import assert_matches_numpy, check_program, programs

from .fake_cupy import FakeCupy

RNG = np.random.default_rng(0)
X = RNG.standard_normal(1024).astype(np.float32)
Y = RNG.standard_normal(1024).astype(np.float32)


def five(x: Any, y: Any, s: Any) -> Any:
    return fj.maximum(x * s + y, 0.0) * 0.5 - 1.0


def five_np(x: np.ndarray, y: np.ndarray, s: float) -> np.ndarray:
    return np.maximum(x * s + y, 0.0) * 0.5 - 1.0


# -- what a call returns -----------------------------------------------------------------

@pytest.mark.parametrize("name", ["numpy", "interpret"])
def test_results_match_numpy_and_later_calls_replay(name: str) -> None:
    if name == "interpret":
        pytest.importorskip("triton")
    with fj.using_backend(name):
        f = fj.jit(five)
        for s in (2.0, -1.5, 0.25, 2.0):
            out = f(X, Y, s)
            assert isinstance(out, fj.Tensor) and out.is_realized
            assert_matches_numpy(out, five_np(X, Y, s))
        assert f.recordings == 1


def test_decorator_forms_and_output_structure() -> None:
    @fj.jit
    def pair(x: Any, y: Any) -> Any:
        return x + y, {"prod": x * y, "both": [x - y, fj.sum(x)]}

    @fj.jit(static_argnames=("axis",))
    def total(x: Any, axis: int) -> Any:
        return x.sum(axis=axis)

    s, d = pair(X, Y)
    assert_matches_numpy(s, X + Y)
    assert_matches_numpy(d["prod"], X * Y)
    assert_matches_numpy(d["both"][0], X - Y)
    assert_matches_numpy(d["both"][1], np.sum(X))
    assert isinstance(d["both"], list) and list(d) == ["prod", "both"]
    m = X.reshape(32, 32)
    assert_matches_numpy(total(m, axis=0), m.sum(axis=0))
    assert_matches_numpy(total(m, axis=1), m.sum(axis=1))
    assert total.recordings == 2  # a static argument is part of the signature
    assert "fj.jit(" in repr(total)


def test_inputs_of_every_kind_and_outputs_that_are_inputs_or_constants() -> None:
    w = fj.asarray(np.full(1024, 2.0, np.float32))  # captured: a constant of the plan
    lazy = fj.asarray(X) * 1.0  # a lazy tensor argument is realized first

    @fj.jit
    def f(x: Any, y: Any) -> Any:
        return x * w + y, x, w

    for x, y in ((X, Y), (fj.asarray(X), Y), (lazy, fj.asarray(Y))):
        out, same, const = f(x, y)
        assert_matches_numpy(out, X * 2 + Y)
        assert_matches_numpy(same, X)
        assert_matches_numpy(const, np.full(1024, 2.0, np.float32))
    assert f.recordings == 1  # tensors and arrays of one dtype, shape and layout: one signature


def test_signature_changes_record_again_and_the_cache_is_bounded() -> None:
    f = fj.jit(lambda x: x * 2 + 1, cache_size=2)
    f(X)
    f(X[::2])  # another shape
    f(X.astype(np.float64))  # another dtype
    assert f.recordings == 3
    f(X)  # dropped (least recently used): records again
    assert f.recordings == 4
    m = X.reshape(32, 32)
    f(m)
    f(m.T)  # another layout (strides): its own kernels
    assert f.recordings == 6
    assert_matches_numpy(f(m.T), m.T * 2 + 1)
    f.clear_cache()
    f(X)
    assert f.recordings == 7


def test_the_cache_drops_the_least_recently_used_signature() -> None:
    f = fj.jit(lambda x: x * 2 + 1, cache_size=2)
    a, b, c = X, X[::2], X[::4]
    for call in (a, b, a, a, c):  # a used again after b: c drops b
        f(call)
    assert f.recordings == 3
    f(a)
    f(c)
    assert f.recordings == 3
    f(b)  # dropped: records again, and drops a (used before c)
    f(c)
    assert f.recordings == 4
    f(a)
    assert f.recordings == 5


def test_static_values_and_unhashable_statics() -> None:
    f = fj.jit(lambda x, n, flag, name: (x * n if flag else x - n) + len(name))
    assert_matches_numpy(f(X, 3, True, "ab"), X * 3 + 2)
    assert_matches_numpy(f(X, 3, False, "ab"), X - 3 + 2)
    assert f.recordings == 2
    g = fj.jit(lambda x, opts: x * opts["k"], static_argnums=1)
    with pytest.raises(fj.JitError, match="not hashable"):
        g(X, {"k": 2})
    h = fj.jit(lambda x, k: x * k, static_argnums=(1,))
    h(X, 2.5)
    h(X, 3.5)
    assert h.recordings == 2  # a static float: its value is part of the signature
    with pytest.raises(fj.JitError, match="returned int"):
        fj.jit(lambda x: 3)(X)


# -- dynamic scalars ----------------------------------------------------------------------

def test_python_float_arithmetic_is_replayed_with_new_values() -> None:
    @fj.jit
    def f(x: Any, a: float, b: float) -> Any:
        return x * (1 - a) + (a * b) / 2 - abs(-b) + a ** 2

    for a, b in ((0.1, 2.0), (0.7, -3.0), (2.0, 0.5)):
        with np.errstate(all="ignore"):
            expected = X * (1 - a) + (a * b) / 2 - abs(-b) + a ** 2
        assert_matches_numpy(f(X, a, b), expected.astype(np.float32))
    assert f.recordings == 1


def test_weak_and_strong_float_arguments() -> None:
    f = fj.jit(lambda x, s: x * s)
    h = X.astype(np.float16)
    assert f(h, 2.5).dtype == np.float16  # a Python float stays weak (NumPy 2)
    assert f(h, np.float32(2.5)).dtype == np.float32  # a NumPy float is strongly typed
    assert_matches_numpy(f(h, np.float32(0.1)), h * np.float32(0.1))
    assert_matches_numpy(f(h, np.float64(0.3)), h * np.float64(0.3))
    assert f.recordings == 3
    f(h, np.float32(7.0))
    assert f.recordings == 3


def test_dynamic_floats_in_other_places() -> None:
    @fj.jit
    def f(x: Any, s: float) -> Any:
        return fj.where(x > 0, s, -s) + fj.full(x.shape, s) + fj.exp(fj.asarray(s)) + fj.clip(x, -s, s)

    for s in (0.5, 1.5):
        expected = np.where(X > 0, s, -s) + np.full(X.shape, s) + np.exp(s) + np.clip(X, -s, s)
        assert_matches_numpy(f(X, s), expected)
    assert f.recordings == 1


@pytest.mark.parametrize("exponent", [3.0, 2.0, 0.5, -1.0, 2.5, 2.0, 0.5])
def test_a_power_exponent_is_guarded(exponent: float) -> None:
    # NumPy computes ** 2, 0.5 and -1 as square, sqrt and reciprocal (sqrt(-0.0) is -0.0,
    # sqrt(-inf) is nan, unlike pow): a dynamic exponent in that class records a variant
    x = np.array([-0.0, -np.inf, 4.0, 0.25, 9.0, -2.0], np.float32)
    with np.errstate(all="ignore"):
        expected_op = x ** exponent
        expected_fn = np.power(x, np.float32(exponent))
    assert_matches_numpy(_POWER_OP(x, exponent), expected_op)
    assert_matches_numpy(_POWER_FN(x, exponent), expected_fn)


_POWER_OP = fj.jit(lambda x, e: x ** e)
_POWER_FN = fj.jit(lambda x, e: fj.power(x, e))


def test_power_variants_are_recorded_once_each() -> None:
    f = fj.jit(lambda x, e: x ** e)
    for e in (3.0, 2.0, 2.5, 2.0, 0.5, 3.5, -1.0, 0.5):
        assert_matches_numpy(f(np.abs(X) + 1, e), (np.abs(X) + 1) ** e)
    assert f.recordings == 4  # the others, 2, 0.5 and -1


def test_a_changing_scalar_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 iterations with a new scalar each: one fusion run and one kernel emitted, with
    fj.jit and with plain realize (on the interpret backend: emitted = compiled)."""
    pytest.importorskip("triton")
    from fusejit.runtime import kernel_cache as kc
    emitted: list[str] = []
    original = kc.emit_kernel

    def counting(kernel: Any, strides: Any, target: str, *tiles: Any) -> Any:
        emitted.append(kernel.name)
        return original(kernel, strides, target, *tiles)

    monkeypatch.setattr(kc, "emit_kernel", counting)
    monkeypatch.setattr(kc, "_emit_cache", {})
    fuse.clear_cache()
    monkeypatch.setattr(runtime, "_plans", {})
    x = RNG.standard_normal(777).astype(np.float32)  # a shape no other test uses
    y = RNG.standard_normal(777).astype(np.float32)
    runs = fuse.stats["fusion_runs"]
    with fj.using_backend("interpret"):
        f = fj.jit(five)
        for i in range(100):
            s = 0.01 * i - 0.3
            assert_matches_numpy(f(x, y, s), five_np(x, y, s))
        assert f.recordings == 1 and len(emitted) == 1
        assert fuse.stats["fusion_runs"] - runs == 1
        # named as f's arguments are (names are part of the program): the same plan
        tx, ty = fj.asarray(x, name="x"), fj.asarray(y, name="y")
        for i in range(100):
            s = 0.03 * i + 0.5
            assert_matches_numpy(five(tx, ty, s), five_np(x, y, s))
        assert len(emitted) == 1  # the same plan: realize's plan cache, jit's entry
        assert fuse.stats["fusion_runs"] - runs == 1


# -- what the function must not do while recorded -----------------------------------------

@pytest.mark.parametrize("body, what", [
    (lambda x, s: x * float(x.sum()), "float()"),
    (lambda x, s: x if x.sum() > 0 else -x, "bool()"),
    (lambda x, s: x + x.numpy()[0], r"\.numpy\(\)"),
    (lambda x, s: x.realize(), r"\.realize\(\)"),
    (lambda x, s: fj.realize(x * 2)[0], r"fj\.realize\(\)"),
    (lambda x, s: x + np.asarray(x).sum(), "numpy.asarray"),
    (lambda x, s: x * s if s > 0 else x, r"a comparison \(>\)"),
    (lambda x, s: x * int(s), r"int\(\)"),
    (lambda x, s: x * round(s), r"round\(\)"),
    (lambda x, s: x[: int(s)], r"int\(\)"),
    (lambda x, s: x * (s + np.ones(3)), "meets Python ints and floats"),
])
def test_looking_at_values_while_recorded_is_a_clear_error(body: Any, what: str) -> None:
    f = fj.jit(body)
    with pytest.raises(fj.RecordingError, match=what) as info:
        f(X, 1.5)
    assert "fj.jit" in str(info.value)
    # outside a recording, the same tensors can be read
    assert float(fj.asarray(X).sum()) == pytest.approx(float(X.sum()), rel=1e-4)


def test_a_captured_realized_tensor_can_be_read_while_recorded() -> None:
    w = fj.asarray(np.array([3.0], np.float32))
    f = fj.jit(lambda x: x * float(w.numpy()[0]))  # w is data of the program, not an argument
    assert_matches_numpy(f(X), X * 3)


def test_nested_jit_calls_are_inlined() -> None:
    inner = fj.jit(lambda x, s: x * s)
    outer = fj.jit(lambda x, s: inner(x, s) + 1)
    assert_matches_numpy(outer(X, 2.0), X * 2 + 1)
    assert_matches_numpy(outer(X, 3.0), X * 3 + 1)
    assert outer.recordings == 1 and inner.recordings == 0


def test_threads_share_a_jitted_function() -> None:
    f = fj.jit(five)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for k in range(20):
                s = 0.1 * (i + k)
                assert_matches_numpy(f(X, Y, s), five_np(X, Y, s))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# -- the fuzzer, through fj.jit --------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(programs(max_steps=6))
def test_random_programs_through_jit_match_numpy(recipe: Any) -> None:
    check_program(recipe, backend="numpy", jit=True)


@settings(max_examples=40, deadline=None)
@given(programs(max_steps=4))
def test_random_programs_through_jit_match_numpy_interpret(recipe: Any) -> None:
    pytest.importorskip("triton")
    check_program(recipe, backend="interpret", jit=True)


# -- the cuda backend's host logic, on FakeCupy ------------------------------------------------

@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[FakeCupy]:
    """A fresh cuda backend on a FakeCupy, compiles faked (as tests/test_devices.py;
    ``indirect=True`` parameters are the FakeCupy's keyword arguments)."""
    pytest.importorskip("triton")
    from fusejit.runtime import cuda_backend

    from .test_devices import _fake_compile
    cp = FakeCupy(**getattr(request, "param", {}))
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    cp.compiled = []  # type: ignore[attr-defined]
    monkeypatch.setattr(cuda_backend, "compile_launch", _fake_compile(cp.compiled))  # type: ignore[attr-defined]
    with fj.using_backend("cuda"):
        yield cp


def test_cuda_replay_launches_with_typed_scalars_and_builds_once(fake: FakeCupy,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    x, y = fake.asarray(X), fake.asarray(Y)
    h = fake.asarray(X.astype(np.float16))
    f = fj.jit(lambda a, b, s, t: (a * s + b, fj.exp(a) * t))
    f(x, y, 2.0, np.float64(1.5))
    backend = runtime.backend_instance("cuda")
    builds: list[Any] = []
    original = backend._build_plan
    monkeypatch.setattr(backend, "_build_plan", lambda *a: builds.append(a) or original(*a))
    before = len(fake.launches)
    for i in range(10):
        out, other = f(x, y, 0.5 * i, np.float64(i))
        assert out.dtype == np.float32 and other.dtype == np.float64
    assert f.recordings == 1 and builds == [] and len(fake.compiled) == 1
    assert len(fake.launches) - before == 10
    kinds = [type(a) for a in fake.launch_args[-1] if isinstance(a, np.generic)]
    assert kinds == [np.float32, np.float64]  # scalar params: NumPy scalars of their carrier
    g = fj.jit(lambda a, s: a * s + 1)
    g(h, 3.0)
    assert [type(a) for a in fake.launch_args[-1] if isinstance(a, np.generic)] == \
        [np.float32, np.float32]  # float16 params travel as float32


def test_cuda_host_inputs_are_uploaded_each_call_and_captured_ones_once(fake: FakeCupy) -> None:
    w = fj.asarray(np.ones(1024, np.float32))
    f = fj.jit(lambda a: a + w)
    f(X)
    f(X)
    assert [shape for _, shape in fake.uploads] == [(1024,), (1024,), (1024,)]


def test_cuda_realize_reuses_the_plan_runner(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    x = fj.asarray(fake.asarray(X))
    (x * 2.0 + 1).realize()
    backend = runtime.backend_instance("cuda")
    builds: list[Any] = []
    original = backend._build_plan
    monkeypatch.setattr(backend, "_build_plan", lambda *a: builds.append(a) or original(*a))
    for i in range(5):
        (x * float(i) + 1).realize()
    assert builds == []


def test_cuda_signatures_read_cupys_contiguity_attribute(fake: FakeCupy,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the array type has CuPy's ``_c_contiguous``, a call's signature reads it rather
    than ``flags`` (which CuPy builds per read); the first call's key (``_array_key``) and a
    replay's (``Jitted.__call__``'s inline one) are the same; a strided view is another."""
    flag_reads: list[int] = []

    def flags(self: Any) -> Any:
        flag_reads.append(1)
        return self.__dict__["_flags"]

    monkeypatch.setattr(fake.ndarray, "flags", property(
        flags, lambda self, v: self.__dict__.__setitem__("_flags", v)), raising=False)
    monkeypatch.setattr(fake.ndarray, "_c_contiguous", property(
        lambda self: self.__dict__["_flags"].c_contiguous), raising=False)
    f = fj.jit(lambda a, b: a * b + 1.0)
    x, y = fake.asarray(X), fake.asarray(Y)
    f(x, y)
    flag_reads.clear()
    for _ in range(3):
        f(x, y)
    assert f.recordings == 1 and flag_reads == []
    f(x[::2], y[::2])
    f(x[::2], y[::2])
    assert f.recordings == 2


@pytest.mark.parametrize("fake", [{"raw_launch": True}], indirect=True)
def test_cuda_launches_of_each_thread_write_their_own_parameter_block(fake: FakeCupy) -> None:
    """The driver copies a launch's parameters when it is called, but CuPy lets other threads
    run meanwhile: each thread fills a block of its own, which another thread's launch of the
    same kernel leaves as it was."""
    import ctypes
    f = fj.jit(lambda a, b: a * b + 1.0)
    (a0, b0), (a1, b1) = [(fake.asarray(X), fake.asarray(Y)) for _ in range(2)]
    f(a0, b0)
    launched, done = threading.Event(), threading.Event()
    params: list[int] = []

    def other_thread() -> None:  # launches, then stays alive (its block with it)
        with fj.using_backend("cuda"):  # (a new thread starts on the default backend)
            f(a1, b1)
        params.append(fake.raw_launches[-1][-1])
        launched.set()
        done.wait(10)

    t = threading.Thread(target=other_thread)
    t.start()
    try:
        assert launched.wait(10)
        f(a0, b0)
        params.append(fake.raw_launches[-1][-1])
    finally:
        done.set()
        t.join()

    def first_cell(p: int) -> int:  # the first parameter's value (the pointer to ``a``)
        return ctypes.c_uint64.from_address(ctypes.c_uint64.from_address(p).value).value

    assert params[0] != params[1]  # the other thread's block, after this thread's launch:
    assert first_cell(params[0]) == a1.data.ptr and first_cell(params[1]) == a0.data.ptr
    assert f.recordings == 1


# -- on a GPU ----------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")


@pytest.mark.gpu
@gpu
def test_gpu_jit_matches_numpy_and_compiles_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import cupy as cp

    from fusejit.runtime import cuda_backend
    compiled: list[str] = []
    original = cuda_backend.compile_launch

    def counting(emitted: Any, launch: Any, divisible: Any, cc: int = 90) -> Any:
        compiled.append(launch.fn_name)
        return original(emitted, launch, divisible, cc)

    monkeypatch.setattr(cuda_backend, "compile_launch", counting)
    x = cp.asarray(RNG.standard_normal(1031).astype(np.float32))  # a shape of its own
    y = cp.asarray(RNG.standard_normal(1031).astype(np.float32))
    with fj.using_backend("cuda"):
        f = fj.jit(five)
        for i in range(100):
            s = 0.01 * i - 0.3
            out = f(x, y, s)
            assert isinstance(out._node.buffer, cp.ndarray)
            assert_matches_numpy(out.numpy(), five_np(x.get(), y.get(), s))
        assert f.recordings == 1 and len(compiled) == 1
        tx, ty = fj.asarray(x, name="x"), fj.asarray(y, name="y")
        for i in range(20):
            assert_matches_numpy(five(tx, ty, 0.1 * i).numpy(), five_np(x.get(), y.get(), 0.1 * i))
        assert len(compiled) == 1


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64",
                                   "uint8", "uint32", "uint64", "bool"])
def test_gpu_scalar_params_of_every_dtype(dtype: str) -> None:
    import cupy as cp
    a = (np.abs(RNG.standard_normal(300)) * 20).astype(dtype)  # (no negatives to unsigned)
    x = fj.asarray(cp.asarray(a))
    with fj.using_backend("cuda"), np.errstate(all="ignore"):
        if dtype == "bool":
            got, want = fj.where(x, np.float32(2.5), -1.5), np.where(a, np.float32(2.5), -1.5)
        elif dtype == "uint64":
            got, want = x + np.uint64(2**63 + 5), a + np.uint64(2**63 + 5)
        elif dtype.startswith("float"):
            got, want = x * 0.1 - 3.5, a * 0.1 - 3.5
        else:
            got, want = x * 3 + np.array(7, dtype)[()], a * 3 + np.array(7, dtype)[()]
        assert_matches_numpy(got.numpy(), want)


@pytest.mark.gpu
@gpu
def test_gpu_no_device_synchronization_on_jit_and_realize(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither path waits for the device: the synchronizing calls fusejit could make through
    CuPy's Python API refuse to run, and a burst of large kernels is issued in a small part
    of the time they take on the GPU."""
    import time

    import cupy as cp
    # 512 MiB: each call moves about 1 GB, some 250 us of the GPU's time, far more than
    # the host needs to issue it
    x = cp.random.standard_normal((32768, 4096), dtype=cp.float32)
    w = cp.asarray(np.ones(4096, np.float32))
    b = cp.asarray(np.zeros(4096, np.float32))
    v, u = cp.asarray(X), cp.asarray(Y)
    with fj.using_backend("cuda"):
        ln = fj.jit(lambda a, w, b, eps: fj.layer_norm(a, w, b, eps=eps))
        f = fj.jit(five)
        tx, big = fj.asarray(v), fj.asarray(x)
        # warm: every structure timed below compiled and planned (the first realize of
        # big * s + 1 plans and compiles: 50 ms, which once made this test fail)
        ln(x, w, b, 1e-5), f(v, u, 2.0), (tx * 2.0 + 1).realize(), (big * 2.0 + 1.0).realize()
        cp.cuda.get_current_stream().synchronize()
        synced: list[str] = []

        def refuse(name: str) -> Any:
            def sync(*args: Any, **kwargs: Any) -> None:
                synced.append(name)
                raise AssertionError(f"{name} called on the jit/realize path")
            return sync

        patched = []
        for owner, name in ((cp.cuda.Stream, "synchronize"), (cp.cuda.runtime, "deviceSynchronize"),
                            (cp.cuda.runtime, "streamSynchronize"), (cp, "asnumpy"),
                            (cp.cuda.Event, "synchronize")):
            try:
                monkeypatch.setattr(owner, name, refuse(f"{getattr(owner, '__name__', owner)}.{name}"))
                patched.append(name)
            except (TypeError, AttributeError):  # an extension type: left as it is
                pass
        assert "deviceSynchronize" in patched
        for i in range(20):
            ln(x, w, b, 1e-5 * (i + 1))
            f(v, u, 0.1 * i)
            (tx * (0.1 * i) + 1).realize()
        monkeypatch.undo()
        assert synced == []
        for path in ("jit", "realize"):
            cp.cuda.get_current_stream().synchronize()
            t0 = time.perf_counter()
            for i in range(30):
                if path == "jit":
                    ln(x, w, b, 1e-5 * (i + 1))
                else:
                    (big * float(i) + 1.0).realize()
            issued = time.perf_counter() - t0
            cp.cuda.get_current_stream().synchronize()
            total = time.perf_counter() - t0
            assert issued < 0.6 * total, (path, issued, total)  # a sync per call: issued ~ total


def test_a_dynamic_scalar_returned_unchanged_is_each_calls_value(backend: str) -> None:
    """A float argument returned as it came (a 0-d NumPy array in a random program reaches
    fj.jit as a NumPy scalar: ``flip(flip(v))`` is ``v``) is a 0-d tensor of that call's value,
    not a constant of the first call (found by ``fusejit fuzz --jit``; it raised JitError)."""
    f = fj.jit(lambda x, s: (x * 2, fj.asarray(s), fj.flip(fj.flip(s, axis=()), axis=())))
    x = np.ones(3, np.float32)
    for s in (np.float64(1.5), np.float64(-2.0), np.float64(0.25)):
        y, a, b = f(x, s)
        assert_matches_numpy(y, x * 2)
        for t in (a, b):
            assert t.shape == () and t.dtype == np.float64 and float(t.numpy()) == float(s)
    assert f.recordings == 1


def test_a_dynamic_exponent_is_guarded_once() -> None:
    # x ** a with an exponent of no special class classified a twice (the operator's
    # square/sqrt/reciprocal check, then power's 0.5 check), so every later call checked
    # the same guard twice
    with fj.using_backend("numpy"):
        f = fj.jit(lambda x, a: x ** a)
        x = np.full(3, 2.0, np.float32)
        f(x, 3.0)
        np.testing.assert_array_equal(f(x, 1.5).numpy(), x ** np.float32(1.5))
        (entry,) = f._cache.values()
        assert len(entry.guards) == 1 and f.recordings == 1
        np.testing.assert_array_equal(f(x, 0.5).numpy(), np.sqrt(x))
        assert f.recordings == 2  # another class of exponent: a variant
