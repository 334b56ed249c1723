"""The error hierarchy: every error fusejit raises derives from FusejitError."""

from __future__ import annotations


class FusejitError(Exception):
    """Base class of every error raised by fusejit."""


class ShapeError(FusejitError, ValueError):
    """Shapes that cannot be broadcast, reshaped or indexed as asked."""


class AxisError(FusejitError, ValueError):
    """An axis out of range or repeated."""


class DomainError(FusejitError, ValueError):
    """A value an operation does not accept (e.g. an integer to a negative integer power)."""


class DTypeError(FusejitError, TypeError):
    """A dtype that fusejit does not support, or an op that rejects a dtype."""


class BackendError(FusejitError, RuntimeError):
    """A backend that is unknown or cannot run here."""


class BackendUnavailableError(BackendError):
    """A known backend that cannot run in this process: a package is missing (CuPy, Triton),
    there is no CUDA GPU, or the GPU is older than Triton supports. The message names what
    is missing and which backends would work."""


class DeviceError(FusejitError, ValueError):
    """Arrays on different CUDA devices in one program (or not on the current device), or
    device memory given to a backend that computes in host memory."""


class InteropError(FusejitError, TypeError):
    """An object whose buffer fusejit cannot take (no DLPack, CUDA array interface or array
    interface, or one its exporter refuses), or a buffer that cannot be handed out as asked
    (``Tensor.cupy()`` without CuPy or a GPU)."""


class NotOnDeviceError(FusejitError, AttributeError):
    """``Tensor.__cuda_array_interface__`` of a tensor in host memory. It is an
    ``AttributeError`` so that ``hasattr(t, "__cuda_array_interface__")`` is False and
    consumers (``cupy.asarray``) fall back to the host protocols."""


class DeviceMemoryError(FusejitError, MemoryError):
    """The GPU ran out of memory: the message names the device and the bytes asked for."""


class InputError(FusejitError, ValueError):
    """Program inputs that do not match the program's signature."""


class JitError(FusejitError, TypeError):
    """``fj.jit`` cannot record or call a function as asked (an argument it cannot take, an
    output that is not a tensor, options that contradict each other)."""


class RecordingError(JitError):
    """A function that ``fj.jit`` records looked at a value: ``.numpy()``, ``bool()``,
    ``float()`` or ``realize()`` of a tensor, or a branch on a dynamic float argument."""


class IRError(FusejitError):
    """An error located in IR text: carries file, line and column."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 source_line: str | None = None, filename: str | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.filename = filename
        super().__init__(self._render())

    def _render(self) -> str:
        if self.line is None:
            return self.message
        where = f"{self.filename or '<ir>'}:{self.line}:{self.column or 1}"
        text = f"{where}: {self.message}"
        if self.source_line is not None:
            shown, column = excerpt(self.source_line, max(self.column or 1, 1))
            caret = " " * (column - 1) + "^"
            text += f"\n  {shown}\n  {caret}"
        return text


#: Characters of a long source line that an error shows, around the column it names.
EXCERPT_WIDTH = 160


def excerpt(line: str, column: int) -> tuple[str, int]:
    """The part of ``line`` an error shows (all of it when short, else ``EXCERPT_WIDTH``
    characters around ``column``, with ``...`` where it is cut) and the column within it."""
    if len(line) <= EXCERPT_WIDTH:
        return line, column
    start = max(0, min(column - 1 - EXCERPT_WIDTH // 2, len(line) - EXCERPT_WIDTH))
    head = "..." if start else ""
    tail = "..." if start + EXCERPT_WIDTH < len(line) else ""
    return head + line[start:start + EXCERPT_WIDTH] + tail, column - start + len(head)


class IRSyntaxError(IRError):
    """IR text that does not parse."""


class IRVerifyError(IRError):
    """IR that parses but breaks a rule of the IR (types, SSA, regions)."""
