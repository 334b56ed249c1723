"""bench/suite.py on the CPU: every workload's fusejit program against its NumPy reference
(numpy backend, tiny sizes), the peers' NumPy-compatible bodies, the option parsing, the
timing loop, the workers run in-process on a NumPy stand-in for CuPy, and the writers on
made-up results. torch and jax are never imported here (the GPU machine runs those peers).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusejit as fj

_PATH = Path(__file__).resolve().parent.parent / "bench" / "suite.py"


def _load_suite() -> types.ModuleType:
    name = "fusejit_bench_suite"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


suite = _load_suite()
NAMES = [w.name for w in suite.REGISTRY]


def _rel_err(out: Any, ref: np.ndarray) -> float:
    out = np.asarray(out, dtype=np.float64)
    den = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (den if den else 1.0))


def _check_outputs(w: Any, outs: tuple[Any, ...], refs: list[np.ndarray], what: str) -> None:
    assert len(outs) == len(refs), what
    for o, r in zip(outs, refs):
        o = np.asarray(o)
        assert o.shape == r.shape, f"{what}: shape {o.shape}, reference {r.shape}"
        assert str(o.dtype) == w.dtype, f"{what}: dtype {o.dtype}, workload {w.dtype}"
        assert np.isfinite(o).all(), what
        assert _rel_err(o, r) <= suite.TOLERANCE[w.dtype], f"{what}: rel err {_rel_err(o, r):.2e}"
    assert w.tolerance >= suite.TOLERANCE[w.dtype]


def test_registry_covers_the_families() -> None:
    families = {w.family for w in suite.REGISTRY}
    for family in ("reduce-inner", "reduce-middle", "reduce-leading", "reduce-full", "reduce-multi",
                   "wide-rows", "float16", "float64", "pointwise", "pointwise-broadcast",
                   "pointwise-views", "multi-output", "softmax", "layer-norm", "batch-norm", "var-std",
                   "logsumexp", "compute-heavy"):
        assert family in families
    assert len(set(NAMES)) == len(NAMES)
    for w in suite.REGISTRY:
        assert 2 <= len(w.sizes) <= 3, w.name
        assert w.dtype in suite.TOLERANCE
        wide = [a.shape[-1] for a in w.args(list(w.sizes)[-1])]
        if w.family == "wide-rows":
            assert 65536 <= min(wide) and max(wide) <= 262144


@pytest.mark.parametrize("name", NAMES)
def test_fusejit_program_matches_numpy_reference(name: str, numpy_backend: str) -> None:
    w = suite.BY_NAME[name]
    xs = suite.make_inputs(np, w, "tiny", 0)
    refs = suite.reference(w, xs)
    outs = suite.as_tuple(w.fj(fj, *[fj.asarray(x) for x in xs]))
    assert [(o.shape, str(o.dtype)) for o in outs] == suite.output_specs(w, "tiny")
    fj.realize(*outs)
    _check_outputs(w, tuple(o.numpy() for o in outs), refs, f"{name} fusejit")


@pytest.mark.parametrize("name", NAMES)
def test_cupy_and_fuse_bodies_match_numpy_reference(name: str) -> None:
    """The CuPy peers are NumPy-compatible code: run them with NumPy as the module."""
    w = suite.BY_NAME[name]
    xs = suite.make_inputs(np, w, "tiny", 1)
    refs = suite.reference(w, xs)
    assert w.cupy is not None
    _check_outputs(w, suite.as_tuple(w.cupy(np, *xs)), refs, f"{name} cupy")
    if w.fuse is not None:
        views = w.fuse_views or (lambda *a: a)
        _check_outputs(w, suite.as_tuple(w.fuse(np, *views(*xs))), refs, f"{name} cupy.fuse body")
    assert w.torch is not None and w.jax is not None  # every workload has both compilers


def test_sizes_are_moderate_and_bytes_count_inputs_and_outputs() -> None:
    for w, size in suite.select():
        e = suite.plan_entry(w, size)
        assert e["bytes"] == e["in_bytes"] + e["out_bytes"]
        assert e["bytes"] <= 600e6, e["key"]
        assert e["sets"] in (1, suite.MAX_SETS) or e["bytes"] * e["sets"] >= suite.ROTATE_BYTES
    e = suite.plan_entry(suite.BY_NAME["transpose_add"], "L")
    assert e["in_bytes"] == 2 * 4096 * 8192 * 4 and e["out_bytes"] == 4096 * 8192 * 4
    assert suite.n_sets(10_000_000) == 15 and suite.n_sets(200_000_000) == 1


def test_selection_and_arguments() -> None:
    full = suite.select()
    assert len(full) == sum(len(w.sizes) for w in suite.REGISTRY)
    first = {w.name for w, size in full[:len(suite.REGISTRY)]}
    assert first == set(NAMES)  # the largest size of every workload runs first
    quick = suite.select(quick=True)
    assert [(w.name, s) for w, s in quick] == [(w.name, list(w.sizes)[-1]) for w in suite.REGISTRY]
    soft = suite.select(only="softmax")
    assert {w.name for w, _ in soft} == {"softmax", "softmax_wide", "softmax_f16"}
    assert [(w.name, s) for w, s in suite.select(only="^sum_rows:M$")] == [("sum_rows", "M")]
    assert {w.family for w, _ in suite.select(only="var-std")} == {"var-std"}
    assert {s for _, s in suite.select(sizes=["S"])} == {"S"}
    assert {s for _, s in suite.select(sizes=["tiny"])} == {"tiny"}

    args = suite.parse_args(["--out", "o", "--impls", "torch.compile,jax.jit,fusejit", "--quick",
                             "--only", "soft", "--sizes", "S,L", "--budget", "100"])
    assert args.impl_list == ["torch", "jax", "fusejit"]
    assert args.quick and args.only == "soft" and args.size_list == ["S", "L"] and args.budget == 100
    assert suite.parse_args([]).impl_list == ["fusejit", "cupy", "cupy.fuse", "jax", "torch"]
    for bad in (["--impls", "tinygrad"], ["--only", "("]):
        with pytest.raises(SystemExit):
            suite.parse_args(bad)


def test_deadlines_share_the_budget_by_weight() -> None:
    workers = ["prep", "fusejit", "torch"]
    deadline = suite.worker_deadlines(workers, 1000.0, 100.0)
    total = sum(suite.WORKER_WEIGHT[w] for w in workers)
    assert deadline("prep", 1000.0) == pytest.approx(1000.0 + 100.0 * suite.WORKER_WEIGHT["prep"] / total)
    assert deadline("torch", 1050.0) == pytest.approx(1100.0)  # the last one gets all that is left
    assert deadline("torch", 1200.0) == pytest.approx(1200.0)  # nothing left: stop at once


class _StepClock:
    """A clock where every call costs 1 ms: checks the calls-per-round choice and the median."""

    keeps = True

    def __init__(self) -> None:
        self.calls = 0
        self.kept: list[int] = []

    def start(self) -> int:
        return self.calls

    def stop(self, start: int, results: list[Any]) -> float:
        self.kept.append(len(results))
        return (self.calls - start) * 1e-3


def test_measure_rotates_sets_and_reports_the_median() -> None:
    clock = _StepClock()
    seen: list[int] = []

    def call(k: int) -> int:
        clock.calls += 1
        seen.append(k)
        return k

    t = suite.measure(call, 3, clock, rounds=5, target_s=4e-3, out_bytes=1, keep_bytes=1e9)
    assert t.calls == 4 and t.rounds == 5 and t.sets == 3
    assert t.median == pytest.approx(1e-3) and t.low == pytest.approx(1e-3)
    assert seen[:5] == [0, 1, 2, 0, 1]  # warm-up over every set
    assert set(seen[5:]) == {0, 1, 2}
    assert clock.kept[1:] == [4] * 5  # a keeping clock gets every result of the round
    capped = suite.measure(call, 1, clock, rounds=1, target_s=1.0, out_bytes=10, keep_bytes=25)
    assert capped.calls == 2  # at most keep_bytes of results held


# -- the workers in-process, on a NumPy stand-in for CuPy ------------------------------------------

def _fake_cupy() -> types.ModuleType:
    """NumPy dressed as the part of CuPy the suite touches (events time with the host clock)."""
    cp = types.ModuleType("cupy")
    for name in ("float16", "float32", "float64", "full", "arange", "empty_like", "sqrt", "sum", "exp",
                 "log", "tanh", "sin", "cos", "maximum", "isfinite", "count_nonzero", "asarray"):
        setattr(cp, name, getattr(np, name))
    cp.__version__ = "fake"
    cp.ndarray = np.ndarray
    cp.asnumpy = np.asarray

    class RandomState:
        def __init__(self, seed: int) -> None:
            self.rng = np.random.default_rng(seed)

        def standard_normal(self, size: Any, dtype: Any = float) -> np.ndarray:
            return self.rng.standard_normal(size, dtype=dtype)

    class Event:
        def record(self) -> None:
            self.t = time.perf_counter()

        def synchronize(self) -> None:
            pass

    stream = types.SimpleNamespace(synchronize=lambda: None)
    pool = types.SimpleNamespace(free_all_blocks=lambda: None)
    cp.random = types.SimpleNamespace(RandomState=RandomState)
    cp.cuda = types.SimpleNamespace(
        Event=Event, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3, get_current_stream=lambda: stream,
        Device=lambda: types.SimpleNamespace(id=0),
        runtime=types.SimpleNamespace(getDeviceProperties=lambda i: {"name": b"fake", "l2CacheSize": 0,
                                                                     "multiProcessorCount": 1}))
    cp.get_default_memory_pool = lambda: pool
    cp.ElementwiseKernel = lambda *a: (lambda x, y: np.copyto(y, x))
    cp.fuse = lambda **kw: (lambda f: f)
    return cp


def _context(tmp_path: Path, worker: str, keys: list[str]) -> Any:
    entries = [suite.plan_entry(suite.BY_NAME[k.split(":")[0]], k.split(":")[1]) for k in keys]
    plan = {"combos": entries, "settings": {"rounds": 2, "target_s": 1e-4, "copy_bytes": 1 << 16}}
    return suite.Context(worker, plan, tmp_path, tmp_path / "parts" / f"{worker}.json", time.time() + 60)


_KEYS = ["softmax:tiny", "batch_norm:tiny", "sum_all:tiny", "silu_fwd_bwd:tiny"]


def test_workers_run_on_a_stand_in_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          numpy_backend: str) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setenv("FUSEJIT_BACKEND", "numpy")
    prep = _context(tmp_path, "prep", _KEYS)
    suite.worker_prep(prep)
    assert prep.meta["copy"]["copy_gbps"] > 0
    assert [r for r in prep.records if "error" in r] == []
    assert set(json.loads((tmp_path / "fingerprints.json").read_text())) == set(_KEYS)

    ctx = _context(tmp_path, "fusejit", _KEYS)
    suite.worker_fusejit(ctx)
    by = {(r["key"], r["impl"]): r for r in ctx.records}
    for key in _KEYS:
        for impl in ("fusejit", "fusejit kernels"):
            rec = by[(key, impl)]
            assert "error" not in rec, rec
            assert rec["ok"] is True and rec["us"] > 0 and rec["poisoned"] is True, rec
            assert rec["kernels"] >= 1
            assert "input_mismatch" not in rec
        assert by[(key, "fusejit")]["cold_s"] >= by[(key, "fusejit")]["compile_s"] >= 0
    assert ctx.meta["torch_imported"] is False and ctx.meta["jax_imported"] is False

    for fused in (False, True):
        c = _context(tmp_path, "cupy.fuse" if fused else "cupy", _KEYS)
        suite.worker_cupy(c, fused)
        for rec in c.records:
            if fused and rec["name"] in ("softmax", "batch_norm"):
                assert rec["error"] == "not expressible"
            else:
                assert rec.get("ok") is True, rec

    # an input set that differs from prep's is reported; a missing reference leaves the check open
    (tmp_path / "fingerprints.json").write_text(json.dumps({"softmax:tiny": [0.0]}))
    for p in (tmp_path / "ref").glob("sum_all*"):
        p.unlink()
    c = _context(tmp_path, "cupy", ["softmax:tiny", "sum_all:tiny"])
    suite.worker_cupy(c, False)
    assert "input_mismatch" in c.records[0]
    assert c.records[1]["check"] == "no reference" and "ok" not in c.records[1]


def test_a_failing_workload_is_recorded_and_the_rest_run(tmp_path: Path) -> None:
    ctx = _context(tmp_path, "cupy", ["softmax:tiny", "gelu:tiny"])

    def body(w: Any, entry: dict[str, Any], refs: Any) -> list[dict[str, Any]]:
        if w.name == "softmax":
            raise RuntimeError("boom\nsecond line")
        return [{"impl": "cupy", "us": 1.0}]

    suite.run_combos(ctx, ["cupy"], body)
    assert ctx.records[0]["error"] == "RuntimeError: boom"
    assert ctx.records[1]["us"] == 1.0
    assert json.loads(ctx.part.read_text())["records"][1]["name"] == "gelu"
    late = _context(tmp_path, "torch", ["gelu:tiny"])
    late.deadline = time.time() - 1
    suite.run_combos(late, ["torch.compile"], body)
    assert late.records[0]["error"].startswith("skipped")


def test_a_broken_cuda_context_ends_the_process_and_a_restart_goes_on(tmp_path: Path) -> None:
    keys = ["softmax:tiny", "gelu:tiny", "sum_all:tiny"]
    ctx = _context(tmp_path, "cupy", keys)
    calls: list[str] = []

    def body(w: Any, entry: dict[str, Any], refs: Any) -> list[dict[str, Any]]:
        calls.append(w.name)
        if w.name == "softmax":
            return [{"impl": "cupy", "error": "CUDARuntimeError: cudaErrorIllegalAddress: an illegal "
                                              "memory access was encountered"}]
        return [{"impl": "cupy", "us": 1.0}]

    with pytest.raises(SystemExit) as exit_info:
        suite.run_combos(ctx, ["cupy"], body)
    assert exit_info.value.code == suite.RESTART_EXIT and calls == ["softmax"]
    # the next process skips what is done; a process that died mid-workload has it recorded
    saved = json.loads(ctx.part.read_text())
    saved["meta"]["current"] = "gelu:tiny"
    again = _context(tmp_path, "cupy", keys)
    again.records, again.meta = saved["records"], saved["meta"]
    suite.run_combos(again, ["cupy"], body)
    assert calls == ["softmax", "sum_all"]
    assert [(r["key"], r.get("error", "")[:21]) for r in again.records] == [
        ("softmax:tiny", "CUDARuntimeError: cud"), ("gelu:tiny", "the process died duri"),
        ("sum_all:tiny", "")]


# -- the writers, on made-up results -----------------------------------------------------------------

def _fake_results() -> dict[str, Any]:
    keys = [("softmax", "L"), ("sum_rows", "S"), ("gelu", "L")]
    entries = [suite.plan_entry(suite.BY_NAME[n], s) for n, s in keys]
    us = {  # workload -> impl -> microseconds
        "softmax:L": {"fusejit": 100.0, "fusejit kernels": 90.0, "torch.compile": 120.0, "jax.jit": 200.0,
                      "cupy": 500.0},
        "sum_rows:S": {"fusejit": 20.0, "fusejit kernels": 10.0, "torch.compile": 10.0, "jax.jit": 40.0,
                       "cupy": 30.0, "cupy.fuse": 25.0},
        "gelu:L": {"fusejit": 130.0, "fusejit kernels": 128.0, "jax.jit": 390.0, "cupy": 900.0,
                   "cupy.fuse": 135.0},
    }
    parts: dict[str, Any] = {"prep": {"meta": {"gpu": "Fake H200", "copy": {
        "copy_gbps": 4000.0, "memcpy_gbps": 4000.0, "kernel_gbps": 3900.0}}, "records": []}}
    worker_of = {"fusejit": "fusejit", "fusejit kernels": "fusejit", "torch.compile": "torch",
                 "jax.jit": "jax", "cupy": "cupy", "cupy.fuse": "cupy.fuse"}
    for key, row in us.items():
        for impl, t in row.items():
            part = parts.setdefault(worker_of[impl], {"meta": {}, "records": []})
            rec = {"key": key, "impl": impl, "us": t, "rel_err": 1e-7, "ok": True, "compile_s": 1.5}
            if impl == "fusejit":
                rec["kernels"] = 1
            part["records"].append(rec)
    parts["torch"]["records"].append({"key": "gelu:L", "impl": "torch.compile", "error": "RuntimeError: x"})
    parts["cupy.fuse"]["records"].append({"key": "softmax:L", "impl": "cupy.fuse",
                                          "error": "not expressible"})
    parts["cupy"]["records"][0].update(ok=False, rel_err=0.5)  # softmax:L cupy is wrong
    meta = {"date": "2026-12-01", "commit": "abc", "wall_s": 400.0,
            "workers": [{"worker": "prep", "returncode": 0, "seconds": 10.0},
                        {"worker": "torch", "returncode": -9, "seconds": 300.0, "killed": "past its limit"}]}
    return suite.merge(entries, parts, meta)


def test_merge_and_summary() -> None:
    doc = _fake_results()
    assert doc["meta"]["copy_gbps"] == 4000.0 and doc["meta"]["gpu"] == "Fake H200"
    sm = next(w for w in doc["workloads"] if w["key"] == "softmax:L")
    fjr = sm["results"]["fusejit"]
    assert fjr["gbps"] == pytest.approx(sm["bytes"] / 100e-6 / 1e9)
    assert fjr["frac_copy"] == pytest.approx(fjr["gbps"] / 4000.0)
    assert suite.best_peer(sm["results"]) == ("torch.compile", 120.0)  # cupy is wrong, fuse n/a
    s = doc["summary"]
    # faster of torch.compile and jax.jit over fusejit: softmax 120/100, sum_rows 10/20, gelu 390/130
    assert s["compilers_over_fusejit"]["geomean"] == pytest.approx((1.2 * 0.5 * 3.0) ** (1 / 3))
    assert s["compilers_over_fusejit"]["n"] == 3
    assert s["peers_over_fusejit"]["geomean"] == pytest.approx((1.2 * 0.5 * (135 / 130)) ** (1 / 3))
    assert s["compilers_over_fusejit_kernels"]["geomean"] == pytest.approx(
        (120 / 90 * 10 / 10 * 390 / 128) ** (1 / 3))
    assert s["wrong"] == ["softmax:L cupy"]
    assert s["errors"] == ["torch.compile: RuntimeError: x (gelu:L)"]
    assert suite.geomean([]) is None and suite.geomean([4.0, 1.0]) == 2.0
    json.dumps(doc)  # JSON-ready


def test_markdown_table() -> None:
    md = suite.markdown(_fake_results())
    assert "Fake H200" in md and "**4000 GB/s**" in md
    header = next(line for line in md.splitlines() if line.startswith("| workload | size"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[5:11] == ["fusejit", "fusejit kernels", "torch.compile", "jax.jit", "cupy", "cupy.fuse"]
    row = next(line for line in md.splitlines() if line.startswith("| softmax | L"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[5].startswith("100.0 us, ") and cells[5].endswith("%")
    assert cells[9].startswith("WRONG (5.0e-01)")
    assert cells[10] == "n/a"
    assert cells[11] == "torch.compile" and cells[12] == "1.20"
    assert "gelu | L" in md and "| error |" in md
    assert "faster of torch.compile and jax.jit / fusejit: **1.216**" in md
    assert "## Wrong results" in md and "- softmax:L cupy" in md
    assert "past its limit" in md


def test_compact_text_table() -> None:
    text = suite.compact(_fake_results())
    lines = text.splitlines()
    assert "copy rate 4000 GB/s" in lines[0]
    assert lines[1].split() == ["workload", "fusejit", "fj", "kern", "torch", "jax", "cupy", "fuse",
                                "speedup"]
    softmax = next(line for line in lines if line.startswith("softmax:L")).split()
    assert softmax[5].endswith("!") and softmax[6] == "-" and softmax[7] == "1.20"
    gelu = next(line for line in lines if line.startswith("gelu:L")).split()
    assert gelu[3] == "x"
    assert "geomean compilers_over_fusejit: 1.216 over 3" in text


def test_plot_writes_png_or_says_why_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _fake_results()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    assert suite.plot(doc, tmp_path / "a.png").startswith("results.png skipped: matplotlib unavailable")
    monkeypatch.undo()
    nocopy = {**doc, "meta": {**doc["meta"], "copy_gbps": None}}
    assert "no copy rate" in suite.plot(nocopy, tmp_path / "b.png")
    pytest.importorskip("matplotlib")
    msg = suite.plot(doc, tmp_path / "c.png")
    assert msg.startswith("results.png written")
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_rel_error_catches_unwritten_and_wrong_outputs() -> None:
    ref = np.ones((4, 3))
    assert suite.rel_error(np, [np.ones((4, 3), np.float32)], [ref]) == (0.0, 0)
    poisoned = np.ones((4, 3), np.float32)
    poisoned[1, 2] = np.nan
    err, bad = suite.rel_error(np, [poisoned], [ref])
    assert math.isnan(err) and bad == 1
    rec: dict[str, Any] = {}
    suite.check(rec, np, [poisoned], [ref], 1e-4, True)
    assert rec["ok"] is False
    rec = {}
    suite.check(rec, np, [np.ones(12, np.float32)], [ref], 1e-4, True)
    assert rec["ok"] is False and "shape" in rec["check"]
    rec = {}
    suite.check(rec, np, [np.ones((4, 3), np.float16) * 1.001], [ref], suite.TOLERANCE["float16"], False)
    assert rec["ok"] is True and rec["poisoned"] is False and rec["tol"] == 5e-3


# -- bench/unseen.py: workloads drawn at random ---------------------------------------------------

sys.path.insert(0, str(_PATH.parent))
import unseen  # noqa: E402

#: seeds whose drawn programs are checked here (the GPU run uses others: any seed must work)
_UNSEEN = [w for seed in (1, 2, 3) for w in unseen.draw(seed, 24, suite.Workload, suite.Arg)]


def test_unseen_draws_every_family_and_dtype_and_is_deterministic() -> None:
    assert {w.family for w in _UNSEEN} == {name for name, _ in unseen.FAMILIES}
    assert {w.dtype for w in _UNSEEN} == {"float16", "float32", "float64"}
    again = unseen.draw(2, 24, suite.Workload, suite.Arg)
    assert [(w.name, w.sizes, w.tiny) for w in again] == \
        [(w.name, w.sizes, w.tiny) for w in _UNSEEN[24:48]]
    for w in _UNSEEN:
        e = suite.plan_entry(w, "U")
        assert 12e6 <= e["in_bytes"] <= 600e6, (w.name, e["in_bytes"])
    assert unseen.parse("7:30") == (7, 30)
    for bad in ("7", "a:3", "3:0"):
        with pytest.raises(SystemExit):
            unseen.parse(bad)


@pytest.mark.parametrize("w", _UNSEEN, ids=[f"{i // 24 + 1}-{w.name}" for i, w in enumerate(_UNSEEN)])
def test_unseen_programs_match_numpy_and_their_peer_bodies(w: Any, numpy_backend: str) -> None:
    """Every drawn program on fusejit (numpy backend) and its CuPy / jax body written against
    NumPy's names, at the tiny size, against the float64 reference, with the suite's tolerance."""
    xs = suite.make_inputs(np, w, "tiny", 0)
    refs = suite.reference(w, xs)
    outs = suite.as_tuple(w.fj(fj, *[fj.asarray(x) for x in xs]))
    fj.realize(*outs)
    _check_outputs(w, tuple(o.numpy() for o in outs), refs, f"{w.name} fusejit")
    _check_outputs(w, suite.as_tuple(w.cupy(np, *xs)), refs, f"{w.name} cupy")
    jax_like = types.SimpleNamespace(numpy=np)  # (the generic jax bodies call jax.numpy)
    if w.family not in ("row-op", "logsumexp"):  # (those call jax.nn)
        _check_outputs(w, suite.as_tuple(w.jax(jax_like, *xs)), refs, f"{w.name} jax body")


def test_unseen_option_lists_the_draw_and_hands_it_to_the_workers(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--unseen SEED:COUNT`` replaces the registry in this process and, through
    ``FUSEJIT_SUITE_UNSEEN``, in every worker's (each builds its registry at import)."""
    monkeypatch.setattr(suite, "REGISTRY", suite.REGISTRY)
    monkeypatch.setattr(suite, "BY_NAME", suite.BY_NAME)
    monkeypatch.setenv("FUSEJIT_SUITE_UNSEEN", "")  # (so the variable main sets is undone)
    assert suite.main(["--unseen", "5:4", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    drawn = unseen.draw(5, 4, suite.Workload, suite.Arg)
    assert listed == [f"{w.name}:U" for w in drawn]
    assert os.environ["FUSEJIT_SUITE_UNSEEN"] == "5:4"
    assert [w.name for w in suite._registry()] == [w.name for w in drawn]
    monkeypatch.setenv("FUSEJIT_SUITE_UNSEEN", "")
    assert [w.name for w in suite._registry()] == NAMES
