"""``fusejit fuzz --matmul-precision tf32``: random programs with TF32 products (fusejit/fuzz.py).

The mode draws matrix products (float32 inputs more often), records every float32 one at the
chosen precision and compares what is computed from it at ``testing.matmul_tolerance``. The
CPU backends compute every float32 product in full precision (the numpy evaluator, and
Triton's interpreter, whose ``tl.dot`` ignores ``input_precision``), so the tolerance is
checked here against an emulated TF32 product: the numpy backend's ``matmul`` with its inputs
truncated to TF32's 10 mantissa bits, as tensor cores may do. Random programs pass with it
at the TF32 tolerance, fail with it at float32's, and fail with a product off by 10%.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")

import fusejit as fj  # noqa: E402
from fusejit import cli, fuzz  # noqa: E402
from fusejit.runtime import numpy_backend  # noqa: E402
from fusejit.testing import (  # noqa: E402
    MATMUL_UNIT_ROUNDOFF,
    Recipe,
    Ref,
    Step,
    check_program,
    matmul_tolerance,
    output_mismatches,
    output_tolerances,
    reduced_precision_products,
    run_fusejit,
    run_numpy,
    sensitive_step,
    tolerance,
    using_matmul_precision,
)

from .test_fuzz import _load  # noqa: E402  (a regression file, imported)

ROOT = Path(__file__).resolve().parents[1]
VARIABLE = "FUSEJIT_MATMUL_PRECISION"
U_TF32 = MATMUL_UNIT_ROUNDOFF[("float32", "tf32")][0]
rng = np.random.default_rng(1441)


def _tf32(x: np.ndarray) -> np.ndarray:
    """``x`` (float32) with its mantissa truncated to TF32's 10 bits (NaN and inf kept)."""
    x = np.ascontiguousarray(x, np.float32)
    return (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def _emulate_tf32(monkeypatch: pytest.MonkeyPatch, error: float = 0.0) -> None:
    """The numpy backend's TF32 products computed from TF32-truncated inputs (times
    ``1 + error``: a wrong product)."""
    real = numpy_backend.evaluate_instr

    def evaluate(instr: Any, args: list[np.ndarray]) -> np.ndarray:
        if instr.op == "matmul" and instr.attrs.get("precision") == "tf32":
            out = real(instr, [_tf32(a) for a in args])
            return (out * np.float32(1 + error)).astype(out.dtype) if error else out
        return real(instr, args)
    monkeypatch.setattr(numpy_backend, "evaluate_instr", evaluate)


def _config(backend: str, count: int, **kwargs: Any) -> fuzz.FuzzConfig:
    return fuzz.FuzzConfig(backend=backend, seconds=None, count=count, seed=0, out=None, shrink=False,
                           matmul_precision="tf32", **kwargs)


def _product_recipe(m: int = 48, k: int = 64, n: int = 40) -> Recipe:
    """``a @ b`` of float32 values in [-4, 4], its sum over rows, and ``a + a`` beside them."""
    a = rng.uniform(-4, 4, (m, k)).astype(np.float32)
    b = rng.uniform(-4, 4, (k, n)).astype(np.float32)
    steps = (Step("operator", "@", (Ref(0), Ref(1))),
             Step("function", "sum", (Ref(2),), (("axis", 0),)),
             Step("function", "add", (Ref(0), Ref(0))))
    return Recipe((a, b), steps, outputs=(2, 3, 4))


# -- the tolerance ------------------------------------------------------------------------------

def test_the_tolerance_is_ten_unit_roundoffs_of_the_precision() -> None:
    assert matmul_tolerance("tf32") == (10 * U_TF32, 10 * U_TF32) == (10 * 2.0 ** -10,) * 2
    assert 9e-3 < matmul_tolerance("tf32")[0] < tolerance(np.float16)[0] * 1.01  # float16's class
    assert matmul_tolerance("tf32x3") == tolerance(np.float32)  # 10 * 2**-20 is below 1e-5
    assert matmul_tolerance("ieee") == tolerance(np.float32)
    with pytest.raises(ValueError, match="choose from ieee, tf32, tf32x3"):
        matmul_tolerance("bf16")


def test_outputs_computed_from_a_tf32_product_get_its_tolerance() -> None:
    """The product and its sum get TF32's tolerance (atol scaled by the largest magnitude they
    are computed from, as every product's); ``a + a`` beside them keeps float32's, and so
    does everything at ``ieee`` (the default), and a product with a 1-D operand (a float32 sum
    of products: ``precision`` does not apply)."""
    recipe = _product_recipe()
    product, total, plain = output_tolerances(recipe, matmul_precision="tf32")
    values = run_numpy(recipe)
    scale = max(float(np.abs(v).max()) for v in (recipe.inputs[0], recipe.inputs[1], values[0]))
    assert product == pytest.approx((10 * U_TF32, 10 * U_TF32 * scale))
    assert total[0] == 10 * U_TF32 and total[1] >= product[1]
    assert plain == tolerance(np.float32)
    ieee = output_tolerances(recipe)
    assert ieee == output_tolerances(recipe, matmul_precision="ieee")
    assert ieee[0] == pytest.approx((1e-5, 1e-5 * scale)) and ieee[2] == plain
    assert output_tolerances(recipe, matmul_precision="tf32x3") == ieee
    vector = Recipe((recipe.inputs[0], recipe.inputs[1][:, 0].copy()),
                    (Step("function", "matmul", (Ref(0), Ref(1))),), outputs=(2,))
    assert output_tolerances(vector, matmul_precision="tf32")[0][0] == 1e-5
    assert reduced_precision_products(recipe, "tf32") == [2]
    assert reduced_precision_products(vector, "tf32") == [] == reduced_precision_products(recipe, "ieee")


def test_an_emulated_tf32_product_passes_at_the_tf32_tolerance_not_at_float32s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _emulate_tf32(monkeypatch)
    recipe = _product_recipe()
    expected = run_numpy(recipe)
    actual = run_fusejit(recipe, "numpy", matmul_precision="tf32")
    error = np.abs(actual[0].astype(np.float64) - expected[0])
    assert error.max() > 1e-3  # the emulation is TF32-sized: float32's tolerance fails it...
    assert [i for i, _ in output_mismatches(recipe, actual, expected, output_tolerances(recipe))] == [2, 3]
    tf32 = output_tolerances(recipe, matmul_precision="tf32")
    assert output_mismatches(recipe, actual, expected, tf32) == []  # ...TF32's passes it
    check_program(recipe, "numpy", matmul_precision="tf32")
    # at ieee (check_program's default) the product multiplies in full precision, whatever
    # FUSEJIT_MATMUL_PRECISION says outside
    monkeypatch.setenv(VARIABLE, "tf32")
    np.testing.assert_array_equal(run_fusejit(recipe, "numpy", matmul_precision="ieee")[0], expected[0])
    check_program(recipe, "numpy")
    assert os.environ[VARIABLE] == "tf32"


def test_a_tf32_product_off_by_ten_percent_is_a_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    _emulate_tf32(monkeypatch, error=0.1)
    recipe = _product_recipe()
    outcome = fuzz.classify(recipe, "numpy", matmul_precision="tf32")
    assert outcome is not None and outcome.kind == "mismatch", outcome
    assert "output 0 (v2)" in outcome.message and "values differ (float32)" in outcome.message
    only_sum = Recipe(recipe.inputs, recipe.steps, outputs=(3,))
    outcome = fuzz.classify(only_sum, "numpy", matmul_precision="tf32")
    assert outcome is not None and outcome.kind == "mismatch"
    assert fuzz.classify(Recipe(recipe.inputs, recipe.steps, outputs=(4,)), "numpy",
                         matmul_precision="tf32") is None  # a + a is right


def test_a_floor_or_comparison_of_a_tf32_product_is_judged_by_tf32_nudges() -> None:
    """``floor(a @ b)`` and ``(a @ b) > 3`` with the product 0.05% above 3, far from 3 for
    float32 (about 4000 ulps) but within TF32's error: rounding-sensitive at ``tf32`` alone;
    the product itself is not, and neither is a product with a 1-D operand (float32 sums)."""
    a = np.full((2, 4), 0.75, np.float32)
    b = np.full((4, 3), 1.0005, np.float32)  # each element of a @ b: 3.0015
    steps = (Step("function", "matmul", (Ref(0), Ref(1))), Step("function", "floor", (Ref(2),)),
             Step("operator", ">", (Ref(2), 3.0)))
    recipe = Recipe((a, b), steps, outputs=(3, 4))
    for output in (3, 4):
        assert sensitive_step(recipe, [output]) is None
        assert sensitive_step(recipe, [output], matmul_precision="tf32x3") is None  # 2**-19: far
        assert sensitive_step(recipe, [output], matmul_precision="tf32") == output - 2
    assert sensitive_step(recipe, [2], matmul_precision="tf32") is None
    vector = Recipe((a, b[:, 0].copy()), (steps[0], Step("function", "floor", (Ref(2),))), outputs=(3,))
    assert sensitive_step(vector, matmul_precision="tf32") is None


# -- random programs ----------------------------------------------------------------------------

def test_tf32_sample_on_numpy_draws_float32_products_and_passes() -> None:
    config = _config("numpy", 120)
    report = fuzz.fuzz(config)
    assert report.programs >= 108 and report.ok, fuzz.summary(report)
    assert report.reduced_products >= 6, fuzz.summary(report)
    assert "with a float32 product at tf32" in fuzz.summary(report)
    # the drawn products are recorded, planned and emitted as TF32 GEMMs
    checked = 0
    for i in range(40):
        recipe = fuzz.draw_program(config, i)
        if recipe is None or not reduced_precision_products(recipe, "tf32"):
            continue  # (no float32 product that an output is computed from)
        with fj.using_backend("numpy"), using_matmul_precision("tf32"):
            outs = [t if isinstance(t, fj.Tensor) else fj.asarray(t) for t in recipe(fj)]
        assert " precision=tf32 " in fj.dump(*outs)
        assert "input_precision=tf32" in fj.plan(*outs).explain()
        checked += 1
    assert checked >= 2


def test_tf32_sample_on_interpret() -> None:
    pytest.importorskip("triton")
    # (30 programs: seed 0's first 25 hold one float32 product since one large input in eight
    # draws patterned values)
    report = fuzz.fuzz(_config("interpret", 30))
    assert report.programs >= 26 and report.ok, fuzz.summary(report)
    assert report.reduced_products >= 2, fuzz.summary(report)


def test_random_programs_pass_with_an_emulated_tf32_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tolerance is honest for real TF32 rounding: random programs whose float32 products
    are computed from truncated inputs pass (1,500 programs each of seeds 100-103 had no
    mismatch, none excused; their crashes and errors, GEMM planning bugs, are fixed, with
    tests in test_regressions.py)."""
    _emulate_tf32(monkeypatch)
    report = fuzz.fuzz(_config("numpy", 100))
    assert report.ok and report.reduced_products >= 5, fuzz.summary(report)


# -- regression files and the command line ------------------------------------------------------

def test_a_regression_file_checks_at_the_precision_it_failed_at() -> None:
    recipe = _product_recipe(2, 3, 2)
    outcome = fuzz.Outcome("mismatch", "AssertionError", "output 0 (v2)\nvalues differ (float32)")
    text = fuzz.regression_source(recipe, outcome, "cuda", test_name="test_x", matmul_precision="tf32")
    assert "check_program(RECIPE, backend='cuda', matmul_precision='tf32')" in text
    assert "precision=tf32" in text.split('"""')[1]  # said in the docstring too
    assert max(len(line) for line in text.splitlines()) <= fuzz.WIDTH
    plain = fuzz.regression_source(recipe, outcome, "cuda", test_name="test_x")
    assert "matmul_precision" not in plain and "check_program(RECIPE, backend='cuda')" in plain
    jit = fuzz.regression_source(recipe, outcome, "cuda", test_name="test_x", jit=True,
                                 matmul_precision="tf32x3")
    assert "check_program(RECIPE, backend='cuda', jit=True, matmul_precision='tf32x3')" in jit


def test_a_tf32_failure_is_found_shrunk_and_written_at_tf32(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A TF32 product off by 10% is found, shrunk and written as a test that runs the program
    at tf32: it fails while the product is wrong and passes on honest (emulated) TF32."""
    before = os.environ.get(VARIABLE)
    _emulate_tf32(monkeypatch, error=0.1)
    out = tmp_path / "failures"
    status = cli.main(["fuzz", "--backend", "numpy", "--seconds", "60", "--seed", "0", "--max-failures", "1",
                       "--shrink-seconds", "4", "--matmul-precision", "tf32", "--out", str(out)])
    stdout, _ = capsys.readouterr()
    assert status == 1 and "mismatch 1, error 0, crash 0" in stdout, stdout
    assert "fusejit fuzz --backend numpy --seed 0 --matmul-precision tf32:" in stdout
    (path,) = out.iterdir()
    text = path.read_text()
    assert "check_program(RECIPE, backend='numpy', matmul_precision='tf32')" in text, text
    assert "--matmul-precision tf32`" in text
    module = _load(path)
    assert reduced_precision_products(module.RECIPE, "tf32")
    test = getattr(module, path.stem)
    with pytest.raises(AssertionError):
        test()  # fails while the product is wrong
    monkeypatch.undo()
    _emulate_tf32(monkeypatch)
    test()  # passes with TF32's own rounding
    monkeypatch.undo()
    test()  # and in full precision
    assert os.environ.get(VARIABLE) == before


def test_the_command_line_flag(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    assert parser.parse_args(["fuzz"]).matmul_precision == "ieee"
    assert parser.parse_args(["fuzz", "--matmul-precision", "tf32x3"]).matmul_precision == "tf32x3"
    with pytest.raises(SystemExit):
        parser.parse_args(["fuzz", "--matmul-precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err
    config = fuzz.FuzzConfig(backend="interpret", seed=3, matmul_precision="tf32")
    assert fuzz.command(config) == "fusejit fuzz --backend interpret --seed 3 --matmul-precision tf32"
    assert fuzz.command(fuzz.FuzzConfig(seed=3)) == "fusejit fuzz --backend numpy --seed 3"
    with pytest.raises(ValueError, match="'fp16' is not one of ieee, tf32, tf32x3"):
        fuzz.fuzz(fuzz.FuzzConfig(count=1, matmul_precision="fp16"))


def test_python_dash_m_fuzz_at_tf32(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fusejit", "fuzz", "--backend", "numpy", "--count", "20",
                           "--matmul-precision", "tf32", "--out", str(tmp_path)], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--matmul-precision tf32: 20 programs" in done.stdout


def test_the_precision_variable_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    with using_matmul_precision("tf32"):
        assert os.environ[VARIABLE] == "tf32"
    assert VARIABLE not in os.environ
    monkeypatch.setenv(VARIABLE, "tf32x3")
    with pytest.raises(RuntimeError), using_matmul_precision("tf32"):
        raise RuntimeError
    assert os.environ[VARIABLE] == "tf32x3"
    with using_matmul_precision(None):
        assert os.environ[VARIABLE] == "tf32x3"
    with pytest.raises(ValueError):
        using_matmul_precision("fast").__enter__()
