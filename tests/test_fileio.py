"""Atomic writes (``fusejit.fileio.write_atomic``): what every file fusejit writes goes through.

A killed writer leaves the old file or the new one (``test_disk_cache.py`` kills
one mid-write); here: file modes, errors, and the writers that use it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

import fusejit as fj
from fusejit.fileio import write_atomic


def test_write_atomic_modes(tmp_path: Path) -> None:
    """A new file gets 0o666 less the umask (not mkstemp's 0o600); a replaced one keeps its mode."""
    new = tmp_path / "new.fir"
    write_atomic(new, "text")
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask
    script = tmp_path / "prog.fir"
    script.write_text("old")
    script.chmod(0o755)
    write_atomic(script, b"new")
    assert script.read_bytes() == b"new" and stat.S_IMODE(script.stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.fir", "prog.fir"]  # no temporaries


def test_cli_output_is_written_atomically(tmp_path: Path) -> None:
    from fusejit.cli import main
    prog = tmp_path / "p.fir"
    fj.dump(fj.asarray(np.ones(3, np.float32), name="x") * 2, path=prog)
    np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
    out = tmp_path / "out.npz"
    out.write_bytes(b"old")
    assert main(["run", str(prog), "--input", f"x={tmp_path / 'x.npy'}", "--input", "s0=2",
                 "--output", str(out), "--backend", "numpy"]) == 0
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved[saved.files[0]], [0, 2, 4])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.npz", "p.fir", "x.npy"]


def test_write_atomic_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(fj.FusejitError, match="cannot write the output " + str(tmp_path / "no" / "f")):
        write_atomic(tmp_path / "no" / "f", "x", what="the output ")
    with pytest.raises(fj.BackendError, match=f"cannot write {tmp_path}: "):
        write_atomic(tmp_path, b"x", error=fj.BackendError)  # a folder stands where the file goes
    assert list(tmp_path.iterdir()) == []  # no temporary left behind
