"""Shared by the ``cuda`` and ``interpret`` backends: generated source on disk, caches, logging.

Generated source of every kernel is written (atomically) to
``$FUSEJIT_CACHE_DIR/kernels/<name>_<hash>.py`` (default ``~/.cache/fusejit``)
and imported from there, because ``triton.jit`` reads a function's source
through ``inspect``. ``FUSEJIT_LOG=kernels`` prints each kernel's source when
it is generated.

Threads: every cache here is shared by the threads of the process. Triton is
not thread-safe in the ways fusejit uses it: its interpreter patches
``triton.language`` (and keeps the grid position in one global builder) while
an interpreted kernel runs, the interpreter mode is a global knob read when
``triton.jit`` wraps a function, and concurrent ``triton.compile`` calls have
been reported to fail. So every use of Triton (importing generated modules,
interpreted launches, compiling) holds ``TRITON_LOCK``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ..codegen import EmittedKernel, emit_kernel
from ..errors import BackendError
from ..fileio import write_atomic
from ..ir.program import Kernel

#: Held around every use of Triton: importing generated modules, interpreted launches,
#: compiles (re-entrant: a compile imports the module it compiles).
TRITON_LOCK = threading.RLock()


def cache_dir() -> Path:
    """The on-disk cache directory (created on first use)."""
    root = os.environ.get("FUSEJIT_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "fusejit")
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendError(f"cannot use the cache directory {root} (set FUSEJIT_CACHE_DIR to a "
                           f"writable folder): {exc.strerror or exc}") from None
    return path


def triton_version() -> str:
    """The installed Triton's version (part of every cubin cache key)."""
    import triton
    return str(triton.__version__)


def atomic_write(path: Path, data: bytes) -> None:
    """Write a cache file atomically (``fusejit.fileio.write_atomic``): a process killed
    mid-write leaves the old entry or none, never half of one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BackendError(f"cannot write the cache file {path}: {exc.strerror or exc}") from None
    write_atomic(path, data, error=BackendError, what="the cache file ")


def log_enabled(what: str = "kernels") -> bool:
    """Whether ``FUSEJIT_LOG`` (comma-separated switches, or ``all``) turns on ``what``."""
    switches = {s.strip() for s in os.environ.get("FUSEJIT_LOG", "").split(",")}
    return what in switches or "all" in switches


def source_hash(source: str) -> str:
    """A short hash of generated source: names its cache file and keys its cubins."""
    return hashlib.sha256(source.encode()).hexdigest()[:20]


def write_source(emitted: EmittedKernel) -> Path:
    """The generated source as a file in the cache directory (rewritten if corrupt)."""
    h = source_hash(emitted.source)
    path = cache_dir() / "kernels" / f"{emitted.name}_{h}.py"
    data = emitted.source.encode()
    try:
        ok = path.read_bytes() == data
    except OSError:
        ok = False
    if not ok:
        if path.exists():
            warnings.warn(f"fusejit: rebuilding corrupt cached kernel source {path}", stacklevel=2)
        atomic_write(path, data)
    if log_enabled():
        print(f"# ---- fusejit kernel {emitted.name} ({path})\n{emitted.source}",
              file=sys.stderr, flush=True)
    return path


def import_source(path: Path, interpret: bool) -> ModuleType:
    """Import a generated module; with ``interpret`` its functions run in Triton's interpreter.

    The module is compiled from the file's text here rather than by the import system,
    so no ``__pycache__`` bytecode is written or read: the file (checked by
    ``write_source``) is the only cache entry of a kernel's source.
    """
    import triton
    mode = "interp" if interpret else "jit"
    modname = f"fusejit_kernels.{mode}.{path.stem}"
    module = sys.modules.get(modname)
    if module is not None:
        return module
    with TRITON_LOCK:
        module = sys.modules.get(modname)  # another thread may have imported it meanwhile
        if module is not None:
            return module
        try:
            code = compile(path.read_bytes(), str(path), "exec")
        except (OSError, SyntaxError, ValueError) as exc:
            raise BackendError(f"cannot import the generated kernel {path}: {exc}") from None
        module = ModuleType(modname)
        module.__file__ = str(path)
        knobs = triton.knobs.runtime
        previous = knobs.interpret
        knobs.interpret = interpret
        try:
            exec(code, module.__dict__)  # fusejit's own generated source, checked on disk
        finally:
            knobs.interpret = previous
        sys.modules[modname] = module
    return module


def kernel_key(kernel: Kernel) -> str:
    """Structural text of a Kernel block, computed once per object."""
    key = kernel.__dict__.get("_fusejit_key")
    if key is None:
        from ..codegen.triton_emitter import _kernel_text
        key = "\n".join(_kernel_text(kernel))
        kernel.__dict__["_fusejit_key"] = key
    return key


def element_strides(array: Any) -> tuple[int, ...] | None:
    """Strides in elements, or None when a stride is not a whole number of elements."""
    itemsize = np.dtype(array.dtype).itemsize
    out = []
    for s in array.strides:
        if s % itemsize:
            return None
        out.append(s // itemsize)
    return tuple(out)


_emit_cache: dict[Any, EmittedKernel] = {}


def emitted_for(kernel: Kernel, strides: tuple[tuple[int, ...], ...], target: str,
                tiles: Any = None) -> EmittedKernel:
    """Emit (cached in memory by structure, strides, target and ``tiles``: a candidate config
    in place of the heuristic's, see ``emit_kernel``)."""
    key = (kernel_key(kernel), strides, target, tiles)
    em = _emit_cache.get(key)
    if em is None:
        em = emit_kernel(kernel, list(strides), target, tiles)
        _emit_cache[key] = em
    return em
