"""Atomic file writes: every file fusejit writes goes through ``write_atomic``.

The data goes to a temporary file in the target's folder, which then replaces
the target with ``os.replace`` (atomic on POSIX and Windows within one file
system). A reader, or a process started after this one was killed mid-write,
sees the old file or the new one, never part of one; a killed writer leaves at
most a stray ``.<name>.*.tmp`` file, which nothing reads.

The new file gets the mode an ordinary ``open(path, "w")`` would give it: the
old file's mode when it replaces one (``fusejit fmt --in-place`` keeps a
script executable), else ``0o666`` less the process umask (``mkstemp`` alone
would give ``0o600``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from .errors import FusejitError


def _umask() -> int:
    # os.umask can only be read by setting it, which races with other threads creating
    # files; Linux shows it in /proc. Elsewhere assume the common 022.
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *,
                 error: type[FusejitError] = FusejitError, what: str = "") -> None:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file and ``os.replace``.

    An OS error (a missing folder, a folder where the file should be, a full disk)
    is raised as ``error`` with the message ``cannot write {what}{path}: reason``;
    the temporary file is removed.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise error(f"cannot write {what}{path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            with contextlib.suppress(OSError, AttributeError):  # no fchmod on Windows
                os.fchmod(f.fileno(), _mode_for(path))
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise error(f"cannot write {what}{path}: {exc.strerror or exc}") from None
        raise
