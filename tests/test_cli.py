"""The ``fusejit`` command line, and the wheel: built, installed in a fresh venv, parsing there."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import lark
import numpy as np
import pytest

import fusejit as fj
from fusejit import cli

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """\
# fusejit ir v1
func @main(%x: f32[2,3], %w: f32[3]) -> f32[2,3], f32[2] {
  %0 = reshape %w shape=[1,3] : f32[1,3]
  %1 = expand %0 shape=[2,3] : f32[2,3]
  %2 = mul %x, %1 : f32[2,3]
  %3 = sum %2 axes=[1] : f32[2]
  return %2, %3
}
"""


@pytest.fixture
def prog(tmp_path: Path) -> Path:
    path = tmp_path / "p.fir"
    path.write_text(PROGRAM)
    return path


@pytest.fixture(autouse=True)
def _numpy_backend(numpy_backend: str) -> None:
    return None


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_check_ok(prog: Path, capsys) -> None:
    assert run_cli(capsys, "check", prog) == (0, "ok\n", "")


def test_check_reports_errors_without_traceback(prog: Path, capsys) -> None:
    prog.write_text(PROGRAM.replace("mul %x", "mull %x"))
    code, out, err = run_cli(capsys, "check", prog)
    assert code == 1 and out == ""
    assert err.startswith(f"error: {prog}:5:8: unknown op 'mull'; did you mean 'mul'?\n")
    assert "Traceback" not in err


def test_check_missing_file(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(capsys, "check", tmp_path / "nope.fir")
    assert code == 1 and err.startswith("error: cannot read") and "nope.fir" in err


def test_fmt_prints_canonical_text(prog: Path, capsys) -> None:
    prog.write_text(PROGRAM.replace("  %2 = mul %x, %1 : f32[2,3]", "%2=mul %x,%1:f32[2,3] # hi"))
    code, out, _ = run_cli(capsys, "fmt", prog)
    assert code == 0 and out == PROGRAM
    assert run_cli(capsys, "fmt", "--in-place", prog)[0] == 0
    assert prog.read_text() == PROGRAM


def test_run_saves_outputs_by_name(prog: Path, tmp_path: Path, capsys) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.array([1, 2, 3], np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    out = tmp_path / "out.npz"
    code, _, err = run_cli(capsys, "run", prog, "--input", f"x={tmp_path / 'x.npy'}",
                           "--input", f"w={tmp_path / 'w.npy'}", "--output", out)
    assert code == 0, err
    saved = np.load(out)
    assert sorted(saved.files) == ["2", "3"]
    np.testing.assert_array_equal(saved["2"], x * w)
    np.testing.assert_array_equal(saved["3"], (x * w).sum(axis=1))


@pytest.mark.parametrize("inputs, message", [
    (["x"], "missing input w"),
    (["x", "w", "v"], "no input named 'v'"),
    (["x", "x"], "given twice"),
])
def test_run_input_errors(prog: Path, tmp_path: Path, capsys, inputs, message) -> None:
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros(3, np.float32))
    files = {"x": "a.npy", "w": "b.npy", "v": "b.npy"}
    args = [a for name in inputs for a in ("--input", f"{name}={tmp_path / files[name]}")]
    code, _, err = run_cli(capsys, "run", prog, *args)
    assert code == 1 and err.startswith("error: ") and message in err


def test_run_shape_mismatch_and_bad_file(prog: Path, tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "a.npy", np.zeros((3, 2), np.float32))
    np.save(tmp_path / "b.npy", np.zeros(3, np.float32))
    code, _, err = run_cli(capsys, "run", prog, "--input", f"x={tmp_path / 'a.npy'}",
                           "--input", f"w={tmp_path / 'b.npy'}")
    assert code == 1 and "expected shape (2, 3)" in err
    code, _, err = run_cli(capsys, "run", prog, "--input", f"x={tmp_path / 'missing.npy'}")
    assert code == 1 and "cannot read input array" in err
    code, _, err = run_cli(capsys, "run", prog, "--input", "x")
    assert code == 1 and "NAME=PATH.npy" in err


@pytest.mark.parametrize("content, message", [
    (b"", "No data left in file"),
    (b"not an array", "it is not a .npy file of plain numbers"),
])
def test_run_unreadable_npy(prog: Path, tmp_path: Path, capsys, content: bytes, message: str) -> None:
    (tmp_path / "bad.npy").write_bytes(content)
    code, _, err = run_cli(capsys, "run", prog, "--input", f"x={tmp_path / 'bad.npy'}")
    assert code == 1 and err.startswith("error: cannot read input array") and message in err


def test_subcommand_table_is_extensible(capsys) -> None:
    calls = []
    cli.register("hello", "say hello", lambda p: p.add_argument("who"),
                 lambda args: calls.append(args.who) or 0)
    try:
        assert cli.main(["hello", "you"]) == 0 and calls == ["you"]
    finally:
        del cli.COMMANDS["hello"]
    for name in ("check", "fmt", "run", "demo"):
        assert name in cli.COMMANDS


def test_closed_output_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    h = fj.asarray(np.ones(4, np.float32), name="x")
    for _ in range(3000):  # about 150 kB of text: more than a pipe holds
        h = h + 1
    big = tmp_path / "big.fir"
    fj.dump(h, path=big)
    reader = subprocess.Popen([sys.executable, "-m", "fusejit", "fmt", str(big)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.close()  # like `fusejit fmt big.fir | head -0`
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=120) == 141 and "Error" not in err, err


def test_python_dash_m(prog: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fusejit", "check", str(prog)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "ok\n"


def test_dump_and_cli_agree(tmp_path: Path, capsys) -> None:
    x = fj.asarray(np.ones((2, 2), np.float32))
    path = tmp_path / "d.fir"
    text = fj.dump(x.T * 2, path=path)
    code, out, _ = run_cli(capsys, "fmt", path)
    assert code == 0 and out == text


def test_wheel_installs_and_parses(tmp_path: Path) -> None:
    """Build the wheel, install it (no deps) in a fresh venv, parse a program from there."""
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "-q",
                            "-w", str(wheels)], capture_output=True, text=True, timeout=600)
    if build.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{build.stdout}\n{build.stderr}")
    (wheel,) = wheels.glob("fusejit-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / ("Scripts" if os.name == "nt" else "bin") / "python"
    # numpy and lark come from this test's environment through a .pth path line: a plain
    # path (not a site dir), so the .pth of the editable fusejit there is not processed
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    deps = {str(Path(m.__file__).resolve().parent.parent) for m in (np, lark)}
    Path(purelib, "fusejit_test_deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                              "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.fail(f"pip install failed:\n{install.stdout}\n{install.stderr}")
    (tmp_path / "p.fir").write_text(PROGRAM)
    script = (
        "import fusejit, fusejit.ir.parser as p, numpy as np\n"
        "import sys\n"
        "assert fusejit.__file__.startswith(sys.prefix), fusejit.__file__\n"
        "assert str(p.grammar_path()).startswith(sys.prefix), p.grammar_path()\n"
        "prog = fusejit.load('p.fir')\n"
        "x, s = prog.run(np.ones((2, 3), np.float32), np.ones(3, np.float32))\n"
        "assert s.tolist() == [3.0, 3.0]\n"
        "print('parsed', len(prog.body))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FUSEJIT_BACKEND")}
    env["FUSEJIT_BACKEND"] = "numpy"
    done = subprocess.run([str(python), "-I", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "parsed 4\n"
