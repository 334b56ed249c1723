"""Packaging: README's two set-up commands, CI running exactly the test one, minimal imports, demo."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import fusejit as fj

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = ROOT / ".ci" / "run"


def _block(marker: str) -> str:
    m = re.search(rf"<!-- {marker} -->\s*```sh\n(.*?)\n```\s*<!-- /{marker} -->", README, re.S)
    assert m, f"README.md has no ```sh block between <!-- {marker} --> markers"
    return m.group(1).strip()


def test_readme_has_exactly_two_single_line_setup_commands() -> None:
    demo, tests = _block("demo-command"), _block("test-command")
    for cmd in (demo, tests):
        assert "\n" not in cmd and cmd.startswith("python3 -m venv .venv && ")
    assert demo.endswith("-m fusejit demo") and "pip install -e ." in demo
    assert tests.endswith("-m pytest -q") and "'.[test,triton]'" in tests
    assert README.count("<!-- demo-command -->") == 1 and README.count("<!-- test-command -->") == 1


def test_ci_runs_exactly_the_readme_test_command() -> None:
    script = CI_RUN.read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in script
    # run the script's own extraction step and compare with the README block
    extract = re.search(r'cmd="\$\(python3 - <<\'PY\'\n(.*?)\nPY\n\)"', script, re.S)
    assert extract, ".ci/run must read the command from README.md"
    out = subprocess.run([sys.executable, "-c", extract.group(1)], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == _block("test-command")
    assert 'bash -euo pipefail -c "$cmd"' in script  # and runs it, failing when it fails
    assert "pytest" not in script.replace("tests/test_packaging.py", "")  # no second test command


def test_ci_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(CI_RUN)], check=True)


def test_import_needs_only_numpy_and_lark() -> None:
    code = ("import sys, fusejit, fusejit.demo; "
            "extra = {'triton', 'cupy', 'torch', 'hypothesis', 'pytest'} & set(sys.modules); "
            "assert not extra, extra; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_pyproject_metadata() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = meta["project"]
    assert project["version"] == fj.__version__
    assert sorted(d.split(">")[0].split("=")[0] for d in project["dependencies"]) == ["lark", "numpy"]
    extras = project["optional-dependencies"]
    assert {"test", "triton", "cuda12", "cuda13"} <= set(extras)
    assert any(d.startswith("hypothesis") for d in extras["test"])
    assert any(d.startswith("pytest") for d in extras["test"])
    assert any(d.startswith("cupy-cuda12x") for d in extras["cuda12"])
    assert any(d.startswith("cupy-cuda13x") for d in extras["cuda13"])
    assert not any("torch" in d for ds in extras.values() for d in ds)
    assert project["scripts"]["fusejit"] == "fusejit.cli:main"
    wheel = meta["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["force-include"]["grammar"] == "fusejit/grammar"


def test_demo_passes_on_numpy_backend() -> None:
    from fusejit import demo
    buf = io.StringIO()
    with fj.using_backend("numpy"):
        status = demo.main(rows=8, cols=64, out=buf)
    text = buf.getvalue()
    assert status == 0, text
    for name in ("softmax", "layer_norm", "rms_norm"):
        assert re.search(rf"{name}\s+float32\[8, 64\]\s+max abs error \S+\s+OK", text), text
    assert "FAIL" not in text and "all checks passed" in text
    if hasattr(fj, "dump"):
        # eps of layer_norm and rms_norm: scalar params %s0 and %s1
        assert "func @main(%x: f32[8,64], %s0: f32, %w: f32[64], %b: f32[64], %s1: f32)" in text


def test_demo_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusejit import demo
    monkeypatch.setattr(demo, "TOLERANCE", -1.0)  # nothing can pass
    buf = io.StringIO()
    with fj.using_backend("numpy"):
        assert demo.main(rows=2, cols=8, out=buf) == 1
    assert "FAIL" in buf.getvalue() and "3 check(s) FAILED" in buf.getvalue()


def _minimal_env() -> dict[str, str]:
    # a bare environment, keeping only where Python finds its packages (when set by hand)
    env = {"FUSEJIT_BACKEND": "numpy", "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def test_demo_runs_as_a_script() -> None:
    out = subprocess.run([sys.executable, "-c", "import fusejit.demo as d; raise SystemExit(d.main(4, 32))"],
                         capture_output=True, text=True, cwd=ROOT, env=_minimal_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all checks passed" in out.stdout
