"""The text IR's public entry points: ``fj.dump``, ``fj.parse``, ``fj.load``.

``dump`` records tensors as a Program and prints it (optionally after
fusion, so that the kernel regions show); ``parse`` and ``load`` read text
back into a verified Program, which runs with ``program.run(...)``: inputs by
position or by name, one array per output (``program.outputs`` names them and
``program.output_types`` gives their types).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import FusejitError, IRSyntaxError
from ..fileio import write_atomic
from .graph import lower
from .parser import normalize_text
from .parser import parse as _parse
from .printer import print_program
from .program import Program


def dump(*tensors: Any, path: str | os.PathLike[str] | None = None, fused: bool = False) -> str:
    """The IR text computing ``tensors`` (before fusion, or with kernel regions if ``fused``).

    With ``path``, the text is also written there atomically (a temporary
    file in the same folder, then a rename), so a reader never sees half a file.
    """
    if not tensors:
        raise FusejitError("dump needs at least one tensor")
    program, _, key = lower(tensor_nodes(tensors, "dump"))
    if fused:
        from ..fuse import plan_for
        program = plan_for(program, key).program
    text = print_program(program)
    if path is not None:
        write_atomic(Path(path), text)
    return text


def tensor_nodes(tensors: tuple[Any, ...], caller: str) -> list[Any]:
    """The graph nodes of fusejit Tensors; a FusejitError naming ``caller`` for anything else."""
    nodes = []
    for t in tensors:
        node = getattr(t, "_node", None)
        if node is None:
            raise FusejitError(f"{caller} takes fusejit Tensors, not {type(t).__name__}")
        nodes.append(node)
    return nodes


def parse(text: str, filename: str | None = None) -> Program:
    """A verified Program from IR text; errors name ``filename:line:column``."""
    return _parse(text, filename)


def load(path: str | os.PathLike[str]) -> Program:
    """A verified Program from an IR file; errors name the file.

    The file is UTF-8 (a leading byte-order mark is ignored; any line ending works); a byte
    that is not UTF-8 is an ``IRSyntaxError`` at its line and column.
    """
    filename = os.fspath(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise FusejitError(f"cannot read {filename}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _undecodable(data, exc, filename) from None
    return _parse(text, filename)


def _undecodable(data: bytes, exc: UnicodeDecodeError, filename: str) -> IRSyntaxError:
    """The error for a file that is not UTF-8, at the first bad byte's line and column."""
    before = normalize_text(data[:exc.start].decode("utf-8"))  # valid up to the bad byte
    line = before.count("\n") + 1
    column = len(before) - before.rfind("\n")
    shown = normalize_text(data.decode("utf-8", errors="replace")).split("\n")[line - 1]
    bad = data[exc.start:exc.end]
    return IRSyntaxError(f"the file is not UTF-8 text: byte{'s' if len(bad) > 1 else ''} "
                         f"{' '.join(f'0x{b:02x}' for b in bad)} ({exc.reason})", line=line,
                         column=column, source_line=shown, filename=filename)
