"""Experiments under ``bench/`` that have a CPU mode: run it, so that what the next GPU
session runs is known to work (their GPU timings are not checked here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("triton")

_BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"fusejit_bench_{name}", _BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_one_read_wide_softmax_is_right_in_the_interpreter(capsys):
    """``bench/exp_wide_softmax.py``: rows of 2100 over 1, 2, 4 and 8 programs, twice each.
    The interpreter runs programs one after another, so every program of a row but the last
    gives its chunk up and the last normalizes those from memory (chunks of 2048 and 1024:
    in tiles of 1024); results within 5e-5 of the float64 softmax, every counter zero after
    each launch, the given-up count as that schedule implies (``interpret_check``)."""
    module = _load("exp_wide_softmax")
    assert module.interpret_check(2, 2100) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "chunks given up" in line]
    assert len(lines) == 8 and all("counters zero: True" in line for line in lines)


def test_wide_row_fuzz_runs_and_counts(capsys, tmp_path, monkeypatch):
    """``bench/fuzz_rows.py`` on the interpreter for a few seconds, cooperative kernels on:
    every program matches the ``numpy`` backend, and the summary line counts them."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    module = _load("fuzz_rows")
    limit = dict(module.heuristics.PERSISTENT_LIMIT)
    switch = module.heuristics.COOPERATIVE_ROWS
    try:
        assert module.main(["--seconds", "4", "--seed", "7"]) == 0
    finally:  # (the fuzz changes both for its programs)
        module.heuristics.PERSISTENT_LIMIT.update(limit)
        module.heuristics.COOPERATIVE_ROWS = switch
        from fusejit import runtime
        runtime.forget_plans()
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("fuzz_rows --backend interpret --seed 7") and "0 failures" in summary
    assert int(summary.split(": ")[1].split()[0]) > 0


def test_wide_row_fuzz_compiles_for_sm90(capsys, tmp_path, monkeypatch):
    """``bench/fuzz_rows.py --compile-only``: wide-row programs at GPU sizes, cooperative
    kernels on, emitted for ``cuda`` and compiled for sm_90 without a GPU (how the ragged
    layer norm that Triton 3.6 could not compile is caught before a GPU run)."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    module = _load("fuzz_rows")
    switch = module.heuristics.COOPERATIVE_ROWS
    try:
        assert module.main(["--compile-only", "--seconds", "3", "--seed", "11"]) == 0
    finally:
        module.heuristics.COOPERATIVE_ROWS = switch
        from fusejit import runtime
        runtime.forget_plans()
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("fuzz_rows --compile-only") and "0 failures" in summary
    assert int(summary.split(": ")[1].split()[0]) > 0


def test_compile_fuzz_compiles_large_plans_for_sm90(capsys, tmp_path, monkeypatch):
    """``bench/compile_fuzz.py --large-plans``: the fuzzer's programs planned as large arrays
    are, every kernel compiled for sm_90 (reversed launches, split argmax) without a GPU;
    the thresholds are back afterwards."""
    from fusejit.fuse import cost
    before = cost.SPLIT_MIN_REDUCE
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    module = _load("compile_fuzz")
    assert module.main(["--seconds", "4", "--seed", "3", "--large-plans"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary.startswith("compile_fuzz --seed 3 --large-plans: ") and " 0 failed" in summary
    assert int(summary.split("programs, ")[1].split()[0]) > 0  # kernels compiled
    assert cost.SPLIT_MIN_REDUCE == before


def test_compile_fuzz_compiles_drawn_products_for_sm90(capsys, tmp_path, monkeypatch):
    """``bench/compile_fuzz.py --products``: matrix products drawn too (GEMM kernels, split-K
    and their combines among them) compile for sm_90 without a GPU."""
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    module = _load("compile_fuzz")
    assert module.main(["--seconds", "6", "--seed", "5", "--large-plans", "--products"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert " 0 failed" in summary and "'gemm': " in summary, summary


def test_wide_row_fuzz_scales_rtol_by_the_exp_epilogues_condition():
    """The H200's wide-row fuzz (seed 84) compared exp(88.6) of a value 2 ulp off at
    float32's rtol: 2.1e-5 off, flagged. exp(z)'s relative error is |z| times z's, so the
    comparison's rtol scales by max(1, max |z|), read back from the outputs."""
    module = _load("fuzz_rows")
    z = np.array([[1.0, -3.0, 88.6], [np.nan, np.inf, 0.5]])
    assert module.exp_condition(np.exp(z)) == pytest.approx(88.6)
    assert module.exp_condition(np.exp(np.array([0.1, -0.2]))) == 1.0
    assert module.exp_condition(np.array([0.0, np.inf])) == 1.0


@pytest.mark.parametrize("script, args, expect", [
    ("exp_s5.py", ["--set", "transpose", "--only", "769"], "769"),
    ("exp_s5.py", ["--set", "round2", "--only", "769"], "769"),
    ("exp_s6.py", ["--set", "runs", "--only", "u15"], "u15"),
    ("exp_s7.py", ["--only", "4x16777216"], "split"),
    ("exp_s7c.py", ["--only", "u12"], "FUSEJIT_OUTER_BROADCAST=1 (1 kernel)"),
])
def test_grid_experiments_run_dry(script, args, expect, tmp_path):
    """The sessions' grid scripts on the interpreter (``--dry``: small shapes, one run each), on
    a subset each: the fifth session's transpose and round-2 grids failed for a session after
    ``tiles_2d_candidates`` changed its arguments, unseen until a GPU call ran them."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(_BENCH / script), "--dry", *args],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=_BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout and "failed" not in done.stdout, done.stdout[-2000:]


def test_compile_time_runs_on_the_cpu(tmp_path):
    """``bench/compile_time.py`` (cold sm_90 compiles, no GPU) on one workload: a row per
    kernel with its compile time, and the JSON it writes."""
    import json
    import subprocess
    import sys
    out = tmp_path / "compile.json"
    done = subprocess.run([sys.executable, str(_BENCH / "compile_time.py"), "--only",
                           "sum_rows_f64", "--json", str(out)], capture_output=True, text=True,
                          timeout=600, cwd=_BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())
    assert row["workload"] == "sum_rows_f64" and row["launches"] == 1
    assert 0 < row["compile_s"] < 60 and "1 kernels; slowest sum_rows_f64" in done.stdout


def test_row_window_experiment_runs_dry(tmp_path):
    """``bench/exp_row_window.py --dry`` (the interpreter, 5 rows): each workload with the
    window off, on for loads and on for stores too gives the same values; the misaligned ones'
    kernels read through the window when it is on, the softmax (which stores rows) only when
    it is on for stores, the aligned ones never."""
    import json
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    out = tmp_path / "rw.json"
    done = subprocess.run([sys.executable, str(_BENCH / "exp_row_window.py"), "--dry", "--json",
                           str(out), "--only", "softmax f16|var|sum f32"], capture_output=True,
                          text=True, timeout=600, env=env, cwd=_BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert len(rows) == 3 * 6 and all(r["same"] for r in rows), rows
    for r in rows:
        reduction = r["workload"].startswith(("sum", "var"))
        on = r["window"] == "stores" or (r["window"] == "loads" and reduction)
        assert r["windowed_source"] == (on and "aligned" not in r["workload"]), r


def test_shortrun_experiment_runs_dry(tmp_path):
    """``bench/exp_s16_shortrun.py --dry`` (the interpreter, (2, 16, 16, 3) and (2, 512, 3)):
    every variant of the short-run reductions (the emitted split kernel, its edits, the
    hand-written run-fastest and flat tiles at several blocks, warps and chunks) gives the
    reference's values and leaves its counters zero; the min's emitted index needs no
    merging (skipped), nor the sum's (merged by the emitter since); the default
    configurations compile for sm_90."""
    import json
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    out = tmp_path / "shortrun.json"
    done = subprocess.run([sys.executable, str(_BENCH / "exp_s16_shortrun.py"), "--dry",
                           "--json", str(out)], capture_output=True, text=True, timeout=600,
                          env=env, cwd=_BENCH.parent)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.strip().splitlines()[-1].endswith(", 0 failed"), done.stdout[-2000:]
    rows = json.loads(out.read_text())["rows"]
    for workload in ("sum nhwc f32", "min axis1 f64"):
        mine = {r["variant"]: r for r in rows if r["workload"] == workload}
        for name in ("fusejit plan", "fusejit realize", "emitted", "emitted w8", "run_fastest",
                     "flat", "flat_fixed"):
            assert mine[name]["ok"], mine[name]
        timed = [r for r in mine.values() if "us" in r]
        assert len(timed) >= 18 and all(r["ok"] for r in timed), timed
        assert all(r["counters_zero"] for r in timed if "counters_zero" in r)
        # (the emitter merges contiguous axes' coordinates since the twentieth session:
        # both kernels are emitted merged)
        assert "skipped" in mine["merged"], mine["merged"]
    assert rows[-1]["variant"] == "flat_fixed no NaN" and rows[-1]["ok"]


def test_s16_ln_experiment_runs_dry(tmp_path):
    """``bench/exp_s16_ln.py --dry``: every sub-block variant of the cooperative layer norm
    (the chunk held as 2, 4 or 8 tensors, the weight and bias a sub-block at a time, the first
    sub-block's loaded after the arrival) is made from the emitted source and compiles for
    sm_90 at the three GPU shapes (quarters in no more registers than emitted); in the
    interpreter at small shapes each is within 1e-4 of the float64 layer norm with its row's
    chunks given up and with every chunk through its own epilogue, counters left zero."""
    import json
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    out = tmp_path / "s16_ln.json"
    done = subprocess.run([sys.executable, str(_BENCH / "exp_s16_ln.py"), "--dry", "--json",
                           str(out)], capture_output=True, text=True, timeout=600, env=env,
                          cwd=_BENCH.parent)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.strip().splitlines()[-1].endswith(", 0 failed"), done.stdout[-2000:]
    rows = json.loads(out.read_text())["rows"]
    variants = [*_load("exp_s16_ln").VARIANTS, "fusejit now"]
    compiled = {(r["shape"], r["variant"]): r for r in rows if not r["shape"].startswith("dry")}
    assert len(compiled) == 3 * len(variants), sorted(compiled)
    assert all(r.get("regs", 0) > 0 for r in compiled.values()), compiled
    target = "256x262144"
    assert compiled[(target, "quarters")]["regs"] <= compiled[(target, "emitted")]["regs"]
    # today's kernel (``coop_sub_blocks``: halves, at most 128 registers) fits four programs
    # of 4 warps an SM at every shape
    assert all(compiled[(shape, "fusejit now")]["regs"] <= 128
               for shape in ("256x262144", "64x65536", "512x131072"))
    dry = [r for r in rows if r["shape"].startswith("dry")]
    assert len(dry) == 3 * len(variants) and all(r["ok"] for r in dry), dry


def test_fuzz_trace_runs_a_seed_program_by_program(tmp_path):
    """``bench/fuzz_trace.py``: each program of a fuzz seed checked in turn on a backend, its
    index and resident memory printed before it runs; a clean range ends "0 failed"."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(_BENCH / "fuzz_trace.py"), "16403", "0", "12",
                           "--backend", "numpy", "--show-from", "11"],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=_BENCH.parent)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stdout.splitlines()
    assert lines[-1] == "done: programs 0-11, 0 failed"
    shown = [line for line in lines if line.startswith("[")]
    assert shown and all("GB resident" in line for line in shown)
    assert any(line.startswith("def program(xp") for line in lines)


def test_s17_epilogue_experiment_compiles_every_variant(tmp_path):
    """``bench/exp_s17_epi.py --dry``: every source edit of the float16 GEMM's bias + ReLU
    epilogue (the bias hoisted, one NaN-propagating maximum with and without NumPy's choice on
    ties, TMA stores in halves, warp specialization)
    applies to the persistent kernel fusejit emits, and each compiles for sm_90."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(_BENCH / "exp_s17_epi.py"), "--dry"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=_BENCH.parent)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 11 and all(line.endswith(": compiled") for line in lines), lines


def test_s18_halves_experiment_plans_every_workload_both_ways(tmp_path):
    """``bench/exp_s18_halves.py --dry``: every workload it times on the GPU is planned as a
    cooperative row kernel with the chunk as one tile and as halves (the plan's tiling says
    which), so the GPU run compares the two kernels it means to."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(_BENCH / "exp_s18_halves.py"), "--dry"],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=_BENCH.parent)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stdout.strip().splitlines()
    assert lines[-1].endswith(", 0 failed")
    def misaligned(line: str) -> bool:  # (rows looped on cuda: cooperative_tiles)
        return any(f"x{w} " in line.split("ways")[0] for w in (150001, 131073, 100003))
    assert all("cooperative" not in ln for ln in lines if misaligned(ln))
    halves = [ln for ln in lines if " ways 2: " in ln and not misaligned(ln)]
    assert len(halves) >= 10 and all("as 2 tiles of 4096" in ln for ln in halves), halves
    assert any(ln.startswith("softmax") for ln in halves)
    assert all("as 2 tiles" not in ln for ln in lines if " ways 1: " in ln)


def test_s18_halves_experiment_ways_for_ragged_rows(tmp_path):
    """``bench/exp_s18_halves.py --dry`` with the ways ``gpu_s19e.sh`` times: way 4 masks
    every chunk of a row that chunks divide (the dry run checks the cuda source), way 8
    lays rows of 150,000 from their 128-byte line, way 9 splits them into equal chunks; way
    5, the shipped settings, does neither."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    for ways, cols, mark in (("1,4", "155648", None),
                             ("5,8", "150000", "laid from the 128-byte word"),
                             ("5,9", "150000", "each covering 7896 of the row's columns")):
        done = subprocess.run([sys.executable, str(_BENCH / "exp_s18_halves.py"), "--dry",
                               "--ways", ways, "--cols", cols], capture_output=True,
                              text=True, timeout=600, env=env, cwd=_BENCH.parent)
        assert done.returncode == 0, (ways, done.stdout[-2000:], done.stderr[-2000:])
        lines = done.stdout.strip().splitlines()
        assert lines[-1].endswith(", 0 failed"), ways
        first, second = ways.split(",")
        assert sum(f" ways {second}: " in ln for ln in lines) == 2, lines  # (both workloads)
        if mark:
            assert all(mark in ln for ln in lines if f" ways {second}: " in ln), lines
            assert not any(mark in ln for ln in lines if f" ways {first}: " in ln), lines


def test_few_tile_product_experiments_build_their_cases_and_variants(monkeypatch):
    """The twenty-fifth session's GEMM experiments (``exp_s25_occupancy``, ``exp_s25_check``)
    on the CPU: ``gemm_of`` records a product the frontend would make a sum of products as a
    GEMM (the tiles the experiments edit), and the variants are valid tiles of the kernel."""
    import sys

    import fusejit as fj
    from fusejit.codegen import heuristics
    monkeypatch.syspath_prepend(str(_BENCH))
    gram = _load("exp_s23_gram")
    monkeypatch.setitem(sys.modules, "exp_s23_gram", gram)
    occupancy, check = _load("exp_s25_occupancy"), _load("exp_s25_check")
    from bench_matmul import _retile
    a = np.ones((2, 1 << 17), np.float32)
    b = np.ones((1 << 17, 64), np.float32)
    y, buffers, text = gram.gemm_of(a, b)
    assert "kind=gemm" in text and len(buffers) == 2
    assert "kind=gemm" not in fj.dump(fj.asarray(a) @ fj.asarray(b), fused=True)  # (a sum)
    (kernel,) = fj.parse(text).kernels
    attrs = dict(kernel.attrs)
    for label, tiles in occupancy.variants(attrs, 1 << 17, 1, "float32"):
        if tiles:
            edited = fj.parse(_retile(text, tiles)).kernels[0].attrs
            assert heuristics.gemm_config_problem(dict(edited), 2, 64, 1 << 17, "float32",
                                                  (4, 4)) is None, label
    assert occupancy.whole_split(8192, 528) == 512 and occupancy.whole_split(1563, 264) == 264
    mine = (64, 64, 32, 4, 3, 1)
    assert [v[0] for v in check.large_variants(mine)][:3] == ["default", "w2", "w2 s4"]
    assert all(len(t) in (0, 6) for _, t in check.large_variants(mine))


def test_fma_rounds_experiment_builds_its_cases_and_variants(monkeypatch):
    """The twenty-sixth session's experiment (``exp_s26_fma``) on the CPU: every case records
    one GEMM whose variants are valid tiles of it (K split 1-8 ways, K by 16, 8 warps)."""
    import sys

    import fusejit as fj
    from fusejit.codegen import heuristics
    monkeypatch.syspath_prepend(str(_BENCH))
    monkeypatch.setitem(sys.modules, "exp_s23_gram", _load("exp_s23_gram"))
    monkeypatch.setitem(sys.modules, "exp_s25_check", _load("exp_s25_check"))
    fma = _load("exp_s26_fma")
    from bench_matmul import _retile
    from exp_s23_gram import gemm_of
    assert len(fma.CASES) >= 10
    for name in ("both 2047x513x8191", "144t 768x768x16384", "f64 288t 2048x576x4096"):
        m, n, k, *dtype = fma.CASES[name]
        dt = dtype[0] if dtype else "float32"
        y, buffers, text = gemm_of(np.zeros((m, k), dt), np.zeros((k, n), dt))
        at = next(kk for kk in fj.parse(text).kernels if "block_m" in kk.attrs).attrs
        mine = tuple(at[f] for f in ("block_m", "block_n", "block_k", "num_warps",
                                     "num_stages", "split_k"))
        labels = []
        old = fma.s25_tiles(m, n, k, dt)
        assert old[5] <= mine[5]  # (the split by rounds only adds chunks)
        for label, tiles in fma.variants(mine, old):
            labels.append(label)
            edited = next(kk for kk in fj.parse(_retile(text, tiles)).kernels
                          if "block_m" in kk.attrs).attrs
            size = np.dtype(dt).itemsize
            assert heuristics.gemm_config_problem(dict(edited), m, n, k, dt,
                                                  (size, size)) is None, (name, label)
        assert labels[:5] == ["default", "clamp", "peel", "peel+clamp", "s25"], labels
        assert {"bk16", "w8", "s4"} <= set(labels), labels


def test_retiled_run_executes_the_retiled_plan_freshly_emitted(monkeypatch):
    """``exp_s23_gram.retiled_run``, which every GEMM experiment times through: the plan of
    the fused IR with the tiles replaced runs and gives the product; the emitted-kernel cache
    (kept by IR text) is cleared first, so a kernel emitted before an experiment patched the
    emitter is not reused."""
    import fusejit as fj
    from fusejit.runtime import current, kernel_cache
    monkeypatch.syspath_prepend(str(_BENCH))
    gram = _load("exp_s23_gram")
    a = np.arange(48 * 40, dtype=np.float32).reshape(48, 40) / 100
    b = np.arange(40 * 24, dtype=np.float32).reshape(40, 24) / 100
    with fj.using_backend("interpret"):
        y, buffers, text = gram.gemm_of(a, b)
        kernel_cache._emit_cache["stale"] = None
        run, got = gram.retiled_run(current(), text, (16, 16, 16, 4, 2, 2), buffers)
        assert "stale" not in kernel_cache._emit_cache
        np.testing.assert_allclose(np.asarray(got), a @ b, rtol=1e-5)
        np.testing.assert_allclose(np.asarray(run()[0]), a @ b, rtol=1e-5)


def test_epilogue_slices_experiment_runs_dry(capsys):
    """``bench/exp_s29_epilogue.py --dry``: each variant of a case parses, plans and emits,
    whole or in the slices it asks for."""
    module = _load("exp_s29_epilogue")
    assert module.main(["--dry", "--only", "8192"]) == 0
    out = capsys.readouterr().out
    assert "whole: epilogue whole" in out and "epilogue in 4 slices of 64 columns" in out
