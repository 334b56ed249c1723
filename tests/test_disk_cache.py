"""The disk cache survives crashes: atomic writes, and corrupt entries rebuilt with a warning.

Entry types: generated kernel sources (``kernels/*.py``, checked against the
source being built) and compiled cubins (``cubin/*.entry``: a JSON header with
the cubin's size and SHA-256, then the cubin). Every file fusejit writes
(cache entries, ``fj.dump(path=)``, ``fusejit fmt -i``, ``fusejit run
--output``) goes through ``fusejit.fileio.write_atomic``; a process killed
while writing in a loop leaves files that load.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusejit as fj

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FUSEJIT_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _emitted() -> Any:
    from fusejit.codegen import emit_kernel
    x = fj.asarray(np.ones((4, 32), np.float32))
    (kernel,) = fj.plan(fj.exp(x) * 3 + 1).program.kernels
    return emit_kernel(kernel, None, "cuda")


# -- cubin entries ----------------------------------------------------------------------------

def _corruptions(entry: bytes) -> dict[str, bytes]:
    head, _, cubin = entry.partition(b"\n")
    flipped = bytearray(entry)
    flipped[len(head) + 1 + len(cubin) // 2] ^= 0xFF

    def header(**changes: Any) -> bytes:
        return json.dumps({**json.loads(head), **changes}).encode() + b"\n" + cubin

    return {
        "empty": b"",
        "header cut": entry[: len(head) // 2],
        "header only": head + b"\n",
        "cubin truncated": entry[:-100],
        "cubin extended": entry + b"\0" * 16,
        "a byte flipped": bytes(flipped),
        "garbage": os.urandom(len(entry)),
        "header not json": b"{name: x}\n" + cubin,
        "header of wrong types": header(num_warps="4"),
        "header without a field": header(name=None),
        "another cubin's size": header(size=len(cubin) + 1),
        "another cubin's digest": header(sha256="0" * 64),
    }


def test_entry_format_rejects_every_corruption() -> None:
    pytest.importorskip("triton")
    from fusejit.runtime.compile import Compiled, decode_entry, encode_entry
    good = Compiled("k", b"\x7fELF" + os.urandom(5000), 128, 4, 5, 3)
    data = encode_entry(good)
    assert decode_entry(data) == good
    corruptions = _corruptions(data)
    assert all(bad != data for bad in corruptions.values())
    for what, bad in corruptions.items():
        with pytest.raises(ValueError):
            decode_entry(bad)
            pytest.fail(f"accepted a corrupt entry: {what}")


def test_corrupt_cubin_entries_are_rebuilt_with_a_warning(cache: Path) -> None:
    pytest.importorskip("triton")
    from fusejit.runtime.compile import compile_all
    emitted = _emitted()
    (first,) = compile_all(emitted, 90, True)
    (entry,) = (cache / "cubin").glob("*.entry")
    good = entry.read_bytes()
    for what, bad in _corruptions(good).items():
        entry.write_bytes(bad)
        with pytest.warns(UserWarning, match="rebuilding corrupt cubin cache entry") as seen:
            (again,) = compile_all(emitted, 90, True)
        assert len(seen) == 1 and again == first, what
        assert entry.read_bytes() == good, what   # the entry was rewritten whole
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # the rebuilt entry loads without a warning
        assert compile_all(emitted, 90, True) == [first]


def test_missing_half_of_nothing(cache: Path) -> None:
    """An entry that is absent (a crash before its write) is compiled without a warning."""
    pytest.importorskip("triton")
    from fusejit.runtime.compile import compile_all
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (c,) = compile_all(_emitted(), 90, False)
    assert c.cubin[:4] == b"\x7fELF"


# -- kernel sources -----------------------------------------------------------------------------

def _forget_loaded_kernels() -> None:
    """Drop the kernels this process imported, so the next realize reads the disk cache."""
    from fusejit.runtime import backend_instance
    for name in [m for m in sys.modules if m.startswith("fusejit_kernels.")]:
        del sys.modules[name]
    backend_instance("interpret")._fns.clear()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "other kernel"])
def test_corrupt_kernel_sources_are_rebuilt_with_a_warning(cache: Path, damage: str) -> None:
    pytest.importorskip("triton")
    x = np.linspace(-1, 1, 300).astype(np.float32).reshape(10, 30)

    def run(scale: float) -> np.ndarray:
        with fj.using_backend("interpret"):
            return (fj.asarray(x) * np.float32(scale) + 1).sum(axis=1).numpy()

    _forget_loaded_kernels()
    run(2.0)
    (path,) = (cache / "kernels").glob("*.py")
    source = path.read_text()
    damaged = {"garbage": "def broken(:\n\x00\x01", "truncated": source[: len(source) // 2], "empty": "",
               "other kernel": source.replace("v0 + s_s1", "v0 - s_s1")}[damage]
    assert damaged != source
    path.write_text(damaged)
    _forget_loaded_kernels()  # as a new process would: it must not trust the damaged file
    with pytest.warns(UserWarning, match="rebuilding corrupt cached kernel source"):
        got = run(2.0)
    np.testing.assert_allclose(got, (x * 2 + 1).sum(axis=1), rtol=1e-6)
    assert path.read_text() == source


def test_no_bytecode_is_cached_for_generated_kernels(cache: Path) -> None:
    """Generated modules are compiled from their checked text: no ``__pycache__`` entries,
    which would be a second, unchecked copy of every kernel."""
    pytest.importorskip("triton")
    _forget_loaded_kernels()
    with fj.using_backend("interpret"):
        (fj.asarray(np.ones(17, np.float32)) * 5 - 2).numpy()
    assert list((cache / "kernels").glob("*.py"))
    assert not list(cache.rglob("__pycache__"))


# -- atomic writes -------------------------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys, numpy as np, fusejit as fj
    from pathlib import Path
    from fusejit.runtime import kernel_cache as kc
    from fusejit.runtime.compile import Compiled, encode_entry
    folder = Path(sys.argv[1])
    entries = [encode_entry(Compiled(f"k{i}", b"\\x7fELF" + bytes([i]) * (8 << 20), 0, 4, 5, 3))
               for i in range(2)]                      # 8 MiB each: a write takes a while
    x = fj.asarray(np.ones((64, 64), np.float32), name="x")
    programs = [fj.softmax(x), fj.layer_norm(x, x[0], x[1])]
    n = 0
    while True:
        kc.atomic_write(folder / "k.entry", entries[n % 2])
        fj.dump(programs[n % 2], path=folder / "prog.fir")
        n += 1
        if n == 2:
            print("ready", flush=True)
""")


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.13, 0.31])
def test_process_killed_mid_write_leaves_the_cache_usable(tmp_path: Path, delay: float) -> None:
    pytest.importorskip("triton")
    from fusejit.runtime.compile import decode_entry
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                             env=env, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(delay)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    entry = decode_entry((tmp_path / "k.entry").read_bytes())  # whole, not half of one
    assert entry.name in ("k0", "k1") and len(entry.cubin) == 4 + (8 << 20)
    program = fj.load(tmp_path / "prog.fir")
    assert program.name == "main" and program.outputs
    # at most the temporaries of the writes under way when killed are left over
    assert len([p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]) <= 2
