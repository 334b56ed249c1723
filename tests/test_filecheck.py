"""Pass tests as IR files: ``fusejit plan --explain FILE | filecheck FILE`` for each ``tests/fusion/*.fir``.

Each file is an input program plus ``# CHECK:`` lines (LLVM FileCheck style,
checked by the ``filecheck`` package) over the fused text and the
explanation that ``fusejit plan --explain`` prints (as ``#`` comments), so
a reader sees exactly what the fuser did to that program and why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CASES = sorted((Path(__file__).parent / "fusion").glob("*.fir"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_fusion_filecheck(path: Path) -> None:
    planned = subprocess.run([sys.executable, "-m", "fusejit", "plan", "--explain", str(path)],
                             capture_output=True, text=True, timeout=120)
    assert planned.returncode == 0, planned.stderr
    checked = subprocess.run([sys.executable, "-m", "filecheck", str(path)], input=planned.stdout,
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, f"{checked.stderr}\n--- fused output ---\n{planned.stdout}"


def test_every_case_has_checks() -> None:
    assert len(CASES) >= 8
    for path in CASES:
        assert "# CHECK" in path.read_text(), path
