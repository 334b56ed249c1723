"""Autotuning (``FUSEJIT_AUTOTUNE=1``): every candidate tiling is correct, and the choice is
measured once, persisted, reused, and off by default.

Candidates (``heuristics.*_candidates``) are what autotune may launch instead of the
heuristic's tiles, so each one must compute the same results: every candidate of every
kernel of a set of representative programs (pointwise 1-D and 2-D, inner persistent and
looped reductions, online softmax, an outer reduction, split sums, a split variance and an
outer split, integer sums, GEMMs with and without split-K) runs on the ``interpret``
backend and is compared with NumPy. Tolerances: inputs are uniform in [0, 1) (no
cancellation), float32 results within ``rtol=1e-5`` (float64 references) and integer
results exact; GEMM results within ``testing.matmul_error_bound`` (any summation order).
A deterministic sample of the candidates also compiles to sm_90 cubins.

The timing and persistence run the real ``cuda`` backend code on ``tests/fake_cupy.py``
(no GPU: launches are recorded, not run), with compiles faked and a timer injected
(``autotune.timer``) that decides which candidate is "fastest".
"""

from __future__ import annotations

import json
import random
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("triton")

import fusejit as fj  # noqa: E402
from fusejit import runtime  # noqa: E402
from fusejit.codegen import emit_kernel  # noqa: E402
from fusejit.codegen import heuristics as h  # noqa: E402
from fusejit.runtime import autotune  # noqa: E402
from fusejit.testing import matmul_error_bound, recorded_inputs  # noqa: E402

from .fake_cupy import FakeCupy  # noqa: E402

F32 = np.float32


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache directory per test, and no choices left from another test."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    autotune.clear()
    yield tmp_path / "cache"
    autotune.clear()


def _uniform(*shape: int, dtype: Any = F32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random(shape).astype(dtype)


def _softmax(xp: Any, x: Any) -> Any:
    e = xp.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _layernorm(xp: Any, x: Any) -> Any:
    d = x - x.mean(axis=-1, keepdims=True)
    return d / xp.sqrt((d * d).mean(axis=-1, keepdims=True) + F32(1e-5))


#: name -> (program of (xp, *arrays), inputs, the kernel kind it must contain)
PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], list[np.ndarray]], str]] = {
    "pointwise": (lambda xp, x, y: xp.exp(x) * F32(2) + y,
                  lambda: [_uniform(256, 300), _uniform(300, seed=1)], "pointwise"),
    "transpose_2d": (lambda xp, x, y: x.T + y,
                     lambda: [_uniform(300, 260), _uniform(260, 300, seed=1)], "pointwise"),
    "softmax": (_softmax, lambda: [_uniform(128, 600)], "inner_reduction"),
    "softmax_looped": (_softmax, lambda: [_uniform(4, 20000)], "inner_reduction"),
    "layernorm": (_layernorm, lambda: [_uniform(128, 700)], "inner_reduction"),
    "row_sum_looped": (lambda xp, x: (x * x).sum(axis=1), lambda: [_uniform(4, 20000)],
                       "inner_reduction"),
    "outer": (lambda xp, x: x.sum(axis=0), lambda: [_uniform(300, 1024)], "outer_reduction"),
    "split_sum": (lambda xp, x: x.sum(), lambda: [_uniform(1 << 17)], "split_reduction"),
    "split_var": (lambda xp, x: x.var(), lambda: [_uniform(1 << 17)], "split_reduction"),
    "outer_split": (lambda xp, x: x.sum(axis=0), lambda: [_uniform(1 << 14, 64)],
                    "split_reduction"),
    "int_sum": (lambda xp, x: x.sum(axis=1),
                lambda: [np.random.default_rng(0).integers(-9, 9, (64, 2048)).astype(np.int32)],
                "inner_reduction"),
    "gemm": (lambda xp, a, b: a @ b, lambda: [_uniform(128, 256), _uniform(256, 192, seed=1)],
             "gemm"),
    "gemm_f16_split_k": (lambda xp, a, b: a @ b,
                         lambda: [_uniform(64, 4096, dtype=np.float16),
                                  _uniform(4096, 64, dtype=np.float16, seed=1)], "gemm"),
}


def _plan(name: str) -> tuple[Any, list[Any], list[np.ndarray]]:
    """The plan of a program, its inputs in the plan's order, and NumPy's results."""
    fn, make, _ = PROGRAMS[name]
    arrays = make()
    outs = fn(fj, *[fj.asarray(a) for a in arrays])
    outs = outs if isinstance(outs, tuple) else (outs,)
    with np.errstate(all="ignore"):
        expected = fn(np, *[a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays])
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    return fj.plan(*outs), recorded_inputs(*outs), expected


def _run(plan: Any, inputs: list[Any], which: int, tiles: Any) -> list[np.ndarray]:
    """The plan on the interpret backend, kernel ``which`` launched with ``tiles``."""
    backend = runtime.backend_instance("interpret")
    env = {p.name: v for p, v in zip(plan.program.inputs, inputs)}
    for j, k in enumerate(plan.program.body):
        outs = backend.run_kernel(k, [env[a] for a in k.args], tiles if j == which else None)
        env.update(zip(k.results, outs))
    return [env[o] for o in plan.program.outputs]


def _check(name: str, actual: np.ndarray, expected: np.ndarray, inputs: list[Any],
           what: str) -> None:
    assert actual.shape == expected.shape, what
    if actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
    elif name.startswith("gemm"):
        a, b = inputs
        bound = matmul_error_bound(a, b, a.dtype)
        assert np.all(np.abs(actual.astype(np.float64) - expected) <= bound), what
    else:
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_candidate_is_correct_on_the_interpreter(name: str) -> None:
    plan, inputs, expected = _plan(name)
    kinds = [k.kind for k in plan.program.kernels]
    assert PROGRAMS[name][2] in kinds, plan.explain()
    tuned = 0
    for i, kernel in enumerate(plan.program.kernels):
        candidates = emit_kernel(kernel, None, "cuda").candidates
        assert candidates and len(set(candidates)) == len(candidates)
        assert len(candidates) <= h.MAX_CANDIDATES
        tuned += len(candidates) > 1
        for c, tiles in enumerate(candidates):
            got = _run(plan, inputs, i, tiles)
            for out, (a, e) in enumerate(zip(got, expected)):
                _check(name, np.asarray(a), e, inputs,
                       f"{name}: kernel {kernel.name} candidate #{c + 1} {tiles!r}, output {out}")
    assert tuned, f"{name}: no kernel has candidates to tune"


def test_cubins_of_sampled_candidates() -> None:
    """A seeded sample of the candidates (one per kernel, two per GEMM; the heuristic's are
    compiled by test_cubin.py) compile to sm_90 cubins, with pointers divisible by 16 or not."""
    from fusejit.runtime.compile import compile_all
    pick = random.Random(9)
    compiled = 0
    for name in sorted(PROGRAMS):
        plan, _, _ = _plan(name)
        for kernel in plan.program.kernels:
            candidates = emit_kernel(kernel, None, "cuda").candidates[1:]
            take = 2 if kernel.kind == "gemm" else 1
            for tiles in pick.sample(candidates, min(take, len(candidates))):
                emitted = emit_kernel(kernel, None, "cuda", tiles)
                for c in compile_all(emitted, 90, divisible=compiled % 2 == 0):
                    assert c.cubin[:4] == b"\x7fELF" and c.n_params >= c.n_args
                compiled += 1
    assert compiled >= 15


# -- measuring, persisting, reusing (the cuda backend on a fake CuPy) ---------------------------

def _fake_compile(log: list[tuple[str, int]], sources: list[str]) -> Any:
    """A stand-in for ``compile_launch``: a tiny "cubin"; logs (function, num_warps) and the
    source compiled."""
    from fusejit.runtime.compile import Compiled

    def compile_launch(emitted: Any, launch: Any, divisible: Any, cc: int = 90) -> Compiled:
        log.append((launch.fn_name, launch.num_warps))
        sources.append(emitted.source)
        n = len(launch.signature)
        return Compiled(launch.fn_name, b"\x7fELF" + launch.fn_name.encode(), 0, launch.num_warps,
                        n + 2, n)
    return compile_launch


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCupy]:
    """A fresh cuda backend on a FakeCupy with compiles faked and ``FUSEJIT_AUTOTUNE=1``."""
    from fusejit.runtime import cuda_backend
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(runtime, "_backends", {})
    cp.compiled, cp.sources = [], []  # type: ignore[attr-defined]
    monkeypatch.setattr(cuda_backend, "compile_launch",
                        _fake_compile(cp.compiled, cp.sources))  # type: ignore[attr-defined]
    monkeypatch.setenv("FUSEJIT_AUTOTUNE", "1")
    yield cp


class FakeTimer:
    """``autotune.timer`` for tests: launches each candidate it is given once and reports
    ``times`` (seconds per call, one per candidate given); remembers each one's launches."""

    def __init__(self, fake: FakeCupy, times: list[float]) -> None:
        self.fake, self.times, self.launches = fake, list(times), []

    def __call__(self, launches: list[Callable[[], None]]) -> list[float]:
        assert len(launches) == len(self.times)
        for launch in launches:
            before = len(self.fake.launches)
            launch()
            self.launches.append(self.fake.launch_args[before:])
        return self.times


def _no_timing(launches: list[Callable[[], None]]) -> list[float]:
    raise AssertionError("candidates were timed")


def _pointwise(x: Any) -> fj.Tensor:
    return fj.exp(fj.asarray(x)) * 2


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "autotune").glob("*.json"))


def test_the_fastest_candidate_is_chosen_persisted_and_reused(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    x = fake.asarray(np.ones((1024, 1024), F32))
    (kernel,) = fj.plan(_pointwise(x)).program.kernels
    candidates = emit_kernel(kernel, None, "cuda").candidates
    assert len(candidates) == 5 and candidates[2] == h.PointwiseTiles(4096, 8)
    timer = FakeTimer(fake, [10e-6, 9.9e-6, 5e-6, 8e-6, 12e-6])  # candidate #3 is fastest
    monkeypatch.setattr(autotune, "timer", timer)
    with fj.using_backend("cuda"):
        y = _pointwise(x).realize()
    assert len(timer.launches) == 5                      # each candidate timed once
    for launched in timer.launches:                      # on scratch arguments, never on x
        assert len(launched) == 1 and all(a is not x for a in launched[0])
    assert fake.launches[-1][2] == (1024 * 1024 // 4096, 1, 1)  # then launched with #3's blocks
    final = fake.launch_args[-1]                         # on x, into the user's own result
    assert any(a is x for a in final) and any(a is y._node.buffer for a in final)
    assert autotune.stats["tuned"] == 1
    (entry,) = _entries(_cache)
    data = json.loads(entry.read_text())
    assert data["index"] == 2 and data["chosen"] == {"type": "PointwiseTiles", "block": 4096,
                                                     "num_warps": 8}
    assert data["times"] == [10e-6, 9.9e-6, 5e-6, 8e-6, 12e-6]
    # explain() and the kernel's header say so, with every measured time
    text = fj.plan(_pointwise(x)).explain()
    assert "autotune chose #3 of 5 (4x the block, 8 warps), 5 us against the heuristic's 10 us" \
        in text, text
    assert "1-D blocks of 4096 elements" in text and "#5 12 us" in text
    assert "\n# tiling: autotune chose #3 of 5 (4x the block" in fake.sources[-1]
    assert "\n# tiling: autotune candidate #2 of 5 (2x the block), being timed" in fake.sources[1]

    # a fresh process (new backend, no choices in memory) reuses the entry without timing
    monkeypatch.setattr(runtime, "_backends", {})
    autotune.clear()
    monkeypatch.setattr(autotune, "timer", _no_timing)
    launches = len(fake.launches)
    with fj.using_backend("cuda"):
        _pointwise(x).realize()
    assert fake.launches[launches:] == [(0, kernel.name, (256, 1, 1))]
    assert autotune.stats == {"tuned": 0, "reused": 1, "seconds": 0.0}
    assert "autotune chose #3 of 5" in fj.plan(_pointwise(x)).explain()


@pytest.mark.parametrize("value", [None, "0", ""])
def test_off_means_no_timing_and_the_heuristics_tiles(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch,
                                                       _cache: Path, value: str | None) -> None:
    if value is None:
        monkeypatch.delenv("FUSEJIT_AUTOTUNE")
    else:
        monkeypatch.setenv("FUSEJIT_AUTOTUNE", value)
    monkeypatch.setattr(autotune, "timer", _no_timing)
    x = fake.asarray(np.ones((1024, 1024), F32))
    with fj.using_backend("cuda"):
        _pointwise(x).realize()
    assert fake.launches == [(0, fake.launches[0][1], (1024, 1, 1))]  # blocks of 1024
    assert len(fake.compiled) == 1 and not (_cache / "autotune").exists()
    text = fj.plan(_pointwise(x)).explain()
    assert "from the heuristics (FUSEJIT_AUTOTUNE=1 times 5 candidates on first use)" in text


def test_a_bad_setting_is_an_error(fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEJIT_AUTOTUNE", "yes")
    with fj.using_backend("cuda"), pytest.raises(fj.BackendError,
                                                 match="FUSEJIT_AUTOTUNE='yes' is not 0 or 1"):
        _pointwise(fake.asarray(np.ones((1024, 1024), F32))).realize()


def test_the_heuristic_stays_unless_a_candidate_is_clearly_faster(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autotune, "timer", FakeTimer(fake, [10e-6, 9.9e-6, 9.8e-6, 11e-6, 12e-6]))
    x = fake.asarray(np.ones((1024, 1024), F32))
    with fj.using_backend("cuda"):
        _pointwise(x).realize()
    assert fake.launches[-1][2] == (1024, 1, 1)
    assert "autotune kept the heuristic's tiles (#1 of 5, 10 us); measured: #1 10 us, #2 9.9 us" \
        in fj.plan(_pointwise(x)).explain()


def _corrupt(data: bytes) -> dict[str, bytes]:
    entry = json.loads(data)
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x01
    wrong = {k: v for k, v in entry.items() if k != "sha256"}
    wrong["index"] = 1                                   # checksum right, choice wrong
    from fusejit.runtime.autotune import _digest
    return {"garbage": b"\x00\xff" * 40, "empty": b"", "truncated": data[: len(data) // 2],
            "a bit flipped": bytes(flipped),
            "another choice": json.dumps({**wrong, "sha256": _digest(wrong)}).encode()}


@pytest.mark.parametrize("how", ["garbage", "empty", "truncated", "a bit flipped", "another choice"])
def test_a_corrupt_entry_is_measured_again_with_a_warning(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, _cache: Path, how: str) -> None:
    x = fake.asarray(np.ones((1024, 1024), F32))
    monkeypatch.setattr(autotune, "timer", FakeTimer(fake, [10e-6, 9e-6, 5e-6, 8e-6, 12e-6]))
    with fj.using_backend("cuda"):
        _pointwise(x).realize()
    (entry,) = _entries(_cache)
    good = entry.read_bytes()
    entry.write_bytes(_corrupt(good)[how])
    monkeypatch.setattr(runtime, "_backends", {})
    autotune.clear()
    timer = FakeTimer(fake, [10e-6, 9e-6, 5e-6, 8e-6, 12e-6])
    monkeypatch.setattr(autotune, "timer", timer)
    with fj.using_backend("cuda"), pytest.warns(UserWarning, match="corrupt autotune cache entry"):
        _pointwise(x).realize()
    assert len(timer.launches) == 5 and fake.launches[-1][2] == (256, 1, 1)
    assert json.loads(entry.read_bytes())["index"] == 2  # rewritten


def test_a_candidate_that_fails_to_build_is_skipped(fake: FakeCupy,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit.runtime import cuda_backend
    compile_ok = cuda_backend.compile_launch

    def compile_launch(emitted: Any, launch: Any, divisible: Any, cc: int = 90) -> Any:
        if launch.num_warps == 8:
            raise RuntimeError("out of resources")
        return compile_ok(emitted, launch, divisible, cc)
    monkeypatch.setattr(cuda_backend, "compile_launch", compile_launch)
    timer = FakeTimer(fake, [10e-6, 9e-6, 8e-6])  # #3 and #5 (8 warps) never reach the timer
    monkeypatch.setattr(autotune, "timer", timer)
    x = fake.asarray(np.ones((1024, 1024), F32))
    with fj.using_backend("cuda"), pytest.warns(UserWarning) as caught:
        _pointwise(x).realize()
    assert [str(w.message).split(" (")[0] for w in caught] == [
        f"fusejit: autotune skips candidate #{i} of kernel {fake.launches[-1][1]}" for i in (3, 5)]
    assert "RuntimeError: out of resources" in str(caught[0].message)
    assert len(timer.launches) == 3 and fake.launches[-1][2] == (2048, 1, 1)  # #4: half the block
    assert "#3 failed" in fj.plan(_pointwise(x)).explain()


def test_split_reduction_and_gemm_choices_travel_as_attributes(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch) -> None:
    """A split reduction's chosen partial count and a GEMM's chosen tiles are the kernel's
    attributes (as a user would write them): the launches and the header show them."""
    v = fake.asarray(np.ones(1 << 22, F32))
    (kernel,) = fj.plan(fj.asarray(v).sum()).program.kernels
    candidates = emit_kernel(kernel, None, "cuda").candidates
    half = next(i for i, c in enumerate(candidates) if c.why == "half the partials")
    times = [10e-6] * len(candidates)
    times[half] = 1e-6
    monkeypatch.setattr(autotune, "timer", FakeTimer(fake, times))
    with fj.using_backend("cuda"):
        fj.asarray(v).sum().realize()
    partials = fake.launches[-1]  # one launch (its last program combines the partials)
    grids = [emit_kernel(kernel, None, "cuda", c).launches[0].grid for c in candidates]
    assert partials[2] == grids[half] != grids[0]
    assert grids[half][1] < grids[0][1]                  # fewer partials (whole tiles each)

    a = fake.asarray(np.ones((512, 512), np.float16))
    (mm,) = fj.plan(fj.asarray(a) @ fj.asarray(a)).program.kernels
    configs = emit_kernel(mm, None, "cuda").candidates
    assert configs[0] == h.gemm_config(512, 512, 512, 1, "float16") and len(configs) > 2
    times = [10e-6] * len(configs)
    times[1] = 1e-6
    monkeypatch.setattr(autotune, "timer", FakeTimer(fake, times))
    with fj.using_backend("cuda"):
        (fj.asarray(a) @ fj.asarray(a)).realize()
    assert fake.compiled[-1] == (mm.name, configs[1].num_warps) != (mm.name, configs[0].num_warps)
    text = fj.plan(fj.asarray(a) @ fj.asarray(a)).explain()
    assert f"{configs[1].num_warps} warps, {configs[1].num_stages} stages" in text
    assert "autotune chose #2 of" in text


def test_edited_gemm_tiles_and_split_counts_are_not_tuned(fake: FakeCupy,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    a = np.ones((512, 512), np.float16)
    (mm,) = fj.plan(fj.asarray(a) @ fj.asarray(a)).program.kernels
    mm.attrs["num_warps"] = 8 if mm.attrs["num_warps"] == 4 else 4
    emitted = emit_kernel(mm, None, "cuda")
    assert len(emitted.candidates) == 1
    assert "# tiling: from the kernel's tile attributes (edited: not tuned)" in emitted.source
    (s,) = fj.plan(fj.asarray(np.ones(1 << 22, F32)).sum()).program.kernels
    s.attrs["split"] = 7
    assert len(emit_kernel(s, None, "cuda").candidates) == 1


def test_scratch_arguments_keep_the_specialization(fake: FakeCupy) -> None:
    """Strides (negative and zero too) and 16-byte alignment as the spec says; all ones."""
    from fusejit.ir.program import Kernel, Param, TensorType
    k = Kernel("k", (), ("a", "b", "c"),
               (Param("a", TensorType(np.dtype(F32), (4, 8))),
                Param("b", TensorType(np.dtype(np.float16), (3, 5))),
                Param("c", TensorType(np.dtype(F32), ()), scalar=True)), [], (), ())
    spec = (((-8, -1), True), ((0, 1), True), None)
    a, b, c = autotune.scratch_arguments(fake, k, spec)
    assert a.strides == (-32, -4) and a.shape == (4, 8) and a.data.ptr % 16 == 0
    assert b.strides == (0, 2) and b.shape == (3, 5) and b.data.ptr % 16 == 0
    assert np.all(a.get() == 1) and np.all(b.get() == 1) and c == F32(1)


def test_interpret_and_numpy_never_tune(monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    monkeypatch.setenv("FUSEJIT_AUTOTUNE", "1")
    monkeypatch.setattr(autotune, "timer", _no_timing)
    x = np.ones((256, 300), F32)
    for backend in ("interpret", "numpy"):
        with fj.using_backend(backend), warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_allclose(_pointwise(x).numpy(), np.exp(x) * 2, rtol=1e-6)
    (kernel,) = fj.plan(_pointwise(x)).program.kernels
    assert len(emit_kernel(kernel, None, "interpret").candidates) == 1
    assert not (_cache / "autotune").exists()


def test_the_default_timer_warms_up_and_interleaves(fake: FakeCupy,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``cuda_event_timer`` on a simulated device clock whose first 20 ms of work run at half
    speed (clocks ramping up): every candidate still gets its own time, the first one too."""
    clock = {"t": 0.0}

    class Event:
        def record(self, stream: Any = None) -> None:
            self.t = clock["t"]

        def synchronize(self) -> None:
            pass

    def elapsed(start: Event, end: Event) -> float:
        return (end.t - start.t) * 1e3  # milliseconds, as CuPy's

    def launcher(cost: float) -> Callable[[], None]:
        def launch() -> None:
            clock["t"] += cost * (2 if clock["t"] < 0.02 else 1)
        return launch

    monkeypatch.setattr(fake.cuda, "Event", Event, raising=False)
    monkeypatch.setattr(fake.cuda, "get_elapsed_time", elapsed, raising=False)
    costs = [100e-6, 120e-6, 90e-6]
    times = autotune.cuda_event_timer(fake)([launcher(c) for c in costs])
    assert times == pytest.approx(costs, rel=1e-9)


def test_no_memory_for_scratch_arguments_keeps_the_heuristic(
        fake: FakeCupy, monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    from .fake_cupy import OutOfMemoryError

    def no_memory(*args: Any) -> Any:
        raise OutOfMemoryError(1 << 30, 0)
    monkeypatch.setattr(autotune, "scratch_arguments", no_memory)
    monkeypatch.setattr(autotune, "timer", _no_timing)
    x = fake.asarray(np.ones((1024, 1024), F32))
    with fj.using_backend("cuda"), pytest.warns(UserWarning, match="not enough GPU memory to "
                                                "autotune kernel exp_mul_f32_1024x1024"):
        _pointwise(x).realize()
    assert fake.launches[-1][2] == (1024, 1, 1) and not _entries(_cache)


# -- on a real GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
def test_on_a_gpu_choices_are_correct_persisted_and_reused(monkeypatch: pytest.MonkeyPatch,
                                                           _cache: Path) -> None:
    """Real timing (CUDA events) and scratch arguments, among them a reversed view (negative
    strides); results equal NumPy's; a new backend reads every choice from the disk cache."""
    import cupy as cp
    monkeypatch.setenv("FUSEJIT_AUTOTUNE", "1")
    monkeypatch.setattr(runtime, "_backends", {})
    host = _uniform(2048, 1024)
    x = cp.asarray(host)[::-1]
    expected = [_softmax(np, host[::-1].astype(np.float64)), host[::-1].sum(0, dtype=np.float64),
                np.exp(host[::-1].astype(np.float64)) * 2]

    def run() -> list[np.ndarray]:
        with fj.using_backend("cuda"):
            a = fj.asarray(x)
            return [t.numpy() for t in fj.realize(fj.softmax(a), a.sum(axis=0), _pointwise(x))]

    for got, want in zip(run(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    tuned = autotune.stats["tuned"]
    assert tuned >= 3 and len(_entries(_cache)) == tuned
    for path in _entries(_cache):
        entry = json.loads(path.read_text())
        assert all(t is None or 0 < t < 1 for t in entry["times"]) and entry["times"][0]
    monkeypatch.setattr(runtime, "_backends", {})
    autotune.clear()
    monkeypatch.setattr(autotune, "timer", _no_timing)
    for got, want in zip(run(), expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert autotune.stats["reused"] == tuned and autotune.stats["tuned"] == 0
