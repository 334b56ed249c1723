"""bench/bench_matmul.py on the CPU: the drawn (unseen) GEMM cases are reproducible, and
every case's fusejit program, scaled down, matches the benchmark's float64 reference on the
``numpy`` backend (NumPy standing in for CuPy). torch and jax are never imported here."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import fusejit as fj

_PATH = Path(__file__).resolve().parent.parent / "bench" / "bench_matmul.py"


def _load() -> object:
    name = "fusejit_bench_matmul"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


bm = _load()


def test_draws_are_reproducible_and_varied():
    first = bm.draw_unseen(20261207, 24)
    extra = {name: dict(bm.EXTRA[name]) for name in first}
    again = bm.draw_unseen(20261207, 24)
    assert first == again and all(bm.EXTRA[n] == extra[n] for n in first)
    assert first != bm.draw_unseen(20261208, 24)
    values = list(first.values())
    assert {v[5] for v in values} == {"none", "bias_relu", "bias_gelu", "residual"}
    assert any(e["b_t"] for e in extra.values()) and any(e["batch"] > 1 for e in extra.values())
    assert any(v[0] <= 64 for v in values)  # decode-like products
    for name, (m, n, k, dtype, precision, _) in first.items():
        assert 2e8 <= 2.0 * extra[name]["batch"] * m * n * k <= 1e12
        assert (dtype, precision) in {("float16", "ieee"), ("float32", "ieee"),
                                      ("float32", "tf32")}


@pytest.mark.parametrize("seed", [20261207, 20261208])
def test_scaled_down_cases_match_the_reference(seed, monkeypatch):
    """Each drawn case at sides of at most 9, 11 and 13 (same dtype, epilogue, batch and
    layout): fusejit's program against the float64 reference. Tolerances: float16 inputs
    and outputs 2e-3 relative (a float16 rounding of the output, 4.9e-4, with room for the
    epilogue's float16 steps), float32 1e-5 (TF32 runs in full precision on ``numpy``)."""
    drawn = bm.draw_unseen(seed, 24)
    small = {name: (min(m, 9), min(n, 11), min(k, 13), dtype, precision, epi)
             for name, (m, n, k, dtype, precision, epi) in drawn.items()}
    monkeypatch.setattr(bm, "CASES", small)
    fj.set_backend("numpy")
    for case in small:
        x = bm._inputs(np, case)
        if bm.EXTRA[case]["b_t"]:
            assert "bt" in x and "b" not in x
        got = np.asarray(bm._fusejit_program(fj, case, x).numpy(), dtype=np.float64)
        ref = bm._reference(np, case, x)
        assert got.shape == ref.shape, case
        tol = 2e-3 if small[case][3] == "float16" else 1e-5
        assert bm._error(np, got, ref) < tol, case


@pytest.mark.parametrize("which, shapes, dtype",
                         [("f16", 15, "f16"), ("tf32", 14, "f32"), ("ieee", 13, "f32")])
def test_exp_s7b_dry_run_times_each_kernel_with_the_copies_off_and_on(tmp_path, which, shapes,
                                                                       dtype):
    """``bench/exp_s7b.py --dry [--set tf32]`` (NumPy for CuPy, the interpreter, sides cut to
    40): every shape's plan without copies (the GEMM alone) and with them forced (copy kernels
    first), so a GPU call is not spent on a broken script; the TF32 and full-precision sets
    also say what the default chooses (no copy at these sizes) beside cuBLAS, and time its
    plan."""
    import os
    import subprocess
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    env.pop("FUSEJIT_GEMM_ALIGN", None)
    root = _PATH.parent.parent
    done = subprocess.run([sys.executable, str(root / "bench" / "exp_s7b.py"), "--dry",
                           "--set", which],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    off = [line for line in lines if "align=0 " in line]
    on = [line for line in lines if "align=always" in line]
    assert len(off) == len(on) == shapes
    assert all(f"align_{dtype}" not in line for line in off)
    assert all(f"align_{dtype}" in line and "matmul" in line for line in on)
    chosen = [line for line in lines if "the default makes" in line]
    assert len(chosen) == (shapes if which in ("tf32", "ieee") else 0)
    default = [line for line in lines if "align=1 " in line]
    assert len(default) == len(chosen)
    assert all(f"align_{dtype}" not in line and "matmul" in line for line in default)
    assert all("the default makes 0 copies; cuBLAS bare" in line for line in chosen)


def test_exp_s13_dry_run_times_the_padded_k_major_pass(tmp_path):
    """``bench/exp_s13.py --dry`` (NumPy for CuPy, the interpreter, sides cut to 40, K odd):
    every shape's seven variants run and match the float64 reference; "no transpose" plans
    have no pass, the forced ones a padded-row transpose, "transpose+align" an A copy too."""
    import json
    import os
    import subprocess
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    env.pop("FUSEJIT_GEMM_ALIGN", None)
    root = _PATH.parent.parent
    out = tmp_path / "s13.json"
    done = subprocess.run([sys.executable, str(root / "bench" / "exp_s13.py"), "--dry",
                           "--json", str(out), "--only", "u13,p5,k0"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert len(rows) == 3 * 7 and not any("failed" in r for r in rows), rows
    assert all(r["error"] < 1e-5 for r in rows)
    for r in rows:
        names = [name.split("_")[0] for name, _ in r["kernels"]]
        want = {"no transpose": ["matmul"], "transpose": ["transpose", "matmul"],
                "transpose+align": ["transpose", "align", "matmul"]}.get(r["variant"])
        assert want is None or names == want, r


def test_exp_s15_dry_run_times_every_float32_tile_variant(tmp_path):
    """``bench/exp_s15.py --dry`` (NumPy for CuPy, the interpreter, sides cut to 64): every
    variant of the float32 GEMM sweep, TF32 and full precision, plans from the edited text,
    runs and matches the float64 reference with the edited tiles in its kernel, so a GPU call
    is not spent on a broken script."""
    import json
    import os
    import subprocess
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    root = _PATH.parent.parent
    for precision, shapes, only in (("tf32", 4, ""), ("ieee", 3, ""), ("ieee-small", 1, "^s1 ")):
        out = tmp_path / f"s15-{precision}.json"
        done = subprocess.run([sys.executable, str(root / "bench" / "exp_s15.py"), "--dry",
                               "--precision", precision, "--json", str(out), "--only", only],
                              capture_output=True, text=True, timeout=600, env=env, cwd=root)
        assert done.returncode == 0, done.stderr[-2000:]
        rows = json.loads(out.read_text())
        sys.path.insert(0, str(root / "bench"))
        import exp_s15
        assert len(rows) == shapes * len(exp_s15.VARIANTS[precision])
        assert not any("failed" in r for r in rows), rows
        # TF32 rounds the operands to 10 bits: a relative error of a few 2**-11 (float32: 1e-6)
        assert all(r["error"] < (2e-3 if precision == "tf32" else 1e-5) for r in rows)
        for r in rows:
            change = exp_s15.VARIANTS[precision][r["variant"]]
            for key in ("num_stages", "num_warps", "group_m"):
                assert key not in change or r["attrs"][key] == change[key], r
            # (the dry run's 64 x 64 sides take at most two K chunks)
            assert "split_k" not in change or r["attrs"]["split_k"] == min(change["split_k"], 2)


def test_exp_s8_dry_run_times_every_tile_shape(tmp_path):
    """``bench/exp_s8.py --dry`` (NumPy for CuPy, the interpreter, sides cut to 48): each
    shape's plan with its default tiles and every configuration of the sweep runs, matches the
    float64 reference and lands in the JSON, so a GPU call is not spent on a broken script."""
    import json
    import os
    import subprocess
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    root = _PATH.parent.parent
    out = tmp_path / "s8.json"
    done = subprocess.run([sys.executable, str(root / "bench" / "exp_s8.py"), "--dry", "--only",
                           "d8u15|a11", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert {r["shape"] for r in rows} == {"d8u15", "a11"}
    configs = sum(1 for r in rows if r["shape"] == "a11")
    assert configs >= 14 and len(rows) == 2 * configs  # (default and every configuration)
    assert not [r for r in rows if "failed" in r]
    assert all(r["error"] < 2e-3 for r in rows)
    tiled = [r for r in rows if r["config"] != "default"]
    assert all(r["attrs"]["block_m"] == 16 for r in tiled)
    assert any(r["attrs"].get("programs") == 2 for r in tiled)
    assert any(r["attrs"].get("stream_k") == 1 for r in tiled)  # (the stream-K configurations)


def test_exp_thin_dry_run_times_every_split(tmp_path):
    """``bench/exp_thin.py --dry``: a float16 and a TF32 product of few rows at their default
    tiles and at each (block_n, split_k) of the sweep run, match the float64 reference and
    land in the JSON with the attributes the sweep set."""
    import json
    import os
    import subprocess
    env = {**os.environ, "FUSEJIT_CACHE_DIR": str(tmp_path)}
    root = _PATH.parent.parent
    out = tmp_path / "thin.json"
    done = subprocess.run([sys.executable, str(root / "bench" / "exp_thin.py"), "--dry", "--only",
                           "^(t1|t2)$", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert {r["shape"] for r in rows} == {"t1", "t2"}
    assert len(rows) == 2 * 11 and not [r for r in rows if "failed" in r]
    assert all(r["error"] < 2e-3 for r in rows)
    for r in rows:
        if r["config"] != "default":
            bn, split = (int(v[1:]) for v in r["config"].split())
            assert (r["attrs"]["block_n"], r["attrs"]["split_k"]) == (bn, split)


def test_interleaved_timing_takes_each_case_once_a_pass_and_its_median(monkeypatch):
    """``_interleaved``: every case is timed once in each of ``PASSES`` passes, in the same
    order each pass (so that the clocks' drift spreads over all cases), and reported as the
    median of its passes; a case whose timing raises is None and not timed again."""
    calls: list[str] = []
    drift = iter(range(100))

    def fake_time(cp, fn, budget=1.0):
        calls.append(fn.__name__)
        if fn.__name__ == "broken":
            raise RuntimeError("launch failed")
        return fn() + next(drift) * 0.01  # (the clocks slow down a little per timing)

    def bare():
        return 1.0

    def epilogue():
        return 1.0

    def broken():
        return 1.0

    monkeypatch.setattr(bm, "_time_events", fake_time)
    got = bm._interleaved(None, [(bare, 1.0), (epilogue, 1.0), (broken, 1.0)])
    assert calls == ["bare", "epilogue", "broken"] + ["bare", "epilogue"] * (bm.PASSES - 1)
    assert got[2] is None
    # bare at timings 0, 2, 4 (drift 0.00, 0.02, 0.04), epilogue at 1, 3, 5: medians 1.02, 1.03
    assert got[0] == pytest.approx(1.02) and got[1] == pytest.approx(1.03)


def test_heat_soak_is_skipped_at_zero_seconds():
    bm._heat_soak(None, 0)  # (no device touched: cp is not used)


def test_tiles_of_names_a_gemm_or_the_kernels_of_a_sum_of_products():
    """The benchmark's tile label: a GEMM's tiles, or the kernel kinds of a plan without one
    (a float32 product of few outputs and a long K, recorded as a sum of products)."""
    fj.set_backend("numpy")
    k = 1 << 16
    a = fj.asarray(np.zeros((2, k), np.float32))
    few = fj.plan(a @ fj.asarray(np.zeros((k, 8), np.float32))).program.kernels
    assert bm._tiles_of(few).startswith("no gemm: ") and "reduction" in bm._tiles_of(few)
    many = fj.plan(a @ fj.asarray(np.zeros((k, 256), np.float32))).program.kernels
    assert re.fullmatch(r"\d+x\d+x\d+ w\d+ s\d+( split\d+)?", bm._tiles_of(many))
