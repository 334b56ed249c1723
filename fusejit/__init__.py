"""fusejit: a lazy NumPy-style array DSL with a fusing JIT to Triton kernels.

Record array code lazily, call ``realize()``, and each fused region of the
program runs as one kernel. The program has a text IR that can be dumped,
edited, parsed and run again. See README.md for a tour.
"""

from __future__ import annotations

from numpy import (bool_, float16, float32, float64, int8, int16, int32, int64, uint8, uint16,
                   uint32, uint64)

from .errors import (AxisError, BackendError, BackendUnavailableError, DeviceError,
                     DeviceMemoryError, DomainError, DTypeError, FusejitError, InputError,
                     InteropError, IRError, IRSyntaxError, IRVerifyError, JitError,
                     NotOnDeviceError, RecordingError, ShapeError)
from .frontend import *  # noqa: F403  (the NumPy-named functions)
from .frontend import ELEMENTWISE_FUNCTIONS, IndexingError, Tensor, asarray, from_dlpack
from .frontend import __dict__ as _frontend_names
from .fuse import Plan, plan
from .ir.program import Kernel, Program
from .ir.textio import dump, load, parse
from .runtime import get_backend, set_backend, using_backend
from .runtime import realize as _realize
from .runtime.jit import Jitted, jit

__version__ = "0.1.0"


def realize(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Compute several tensors together with one plan; returns them (now holding buffers)."""
    for t in tensors:
        if not isinstance(t, Tensor):
            raise FusejitError(f"realize takes fusejit Tensors, not {type(t).__name__}")
    _realize(*tensors)
    return tensors


#: ``x[fj.newaxis]`` inserts an axis, as NumPy's ``None`` (the dtypes above are NumPy's own)
newaxis = None

__all__ = [
    "FusejitError", "ShapeError", "AxisError", "DomainError", "DTypeError", "BackendError",
    "BackendUnavailableError", "DeviceError", "DeviceMemoryError", "InteropError", "NotOnDeviceError",
    "JitError", "RecordingError",
    "InputError", "IRError", "IRSyntaxError", "IRVerifyError", "IndexingError", "Tensor", "Program", "Kernel",
    "asarray", "from_dlpack", "realize", "plan", "Plan", "dump", "parse", "load",
    "get_backend", "set_backend", "using_backend", "jit", "Jitted",
    *[n for n in _frontend_names if not n.startswith("_") and callable(_frontend_names[n])],
]
