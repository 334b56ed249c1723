"""Code generation: a Kernel region -> Triton source text and launch parameters.

This layer never touches a device. ``emit_kernel`` takes one ``Kernel``
block of a fused Program, the element strides of the buffers bound to its
parameters and the target (``cuda`` or ``interpret``: they differ only in how
libdevice-only math is lowered and in block sizes) and returns an
``EmittedKernel``: readable Triton source plus one ``Launch`` per kernel
launch (two for a split reduction).
"""

from __future__ import annotations

from .triton_emitter import EmittedKernel, Launch, describe_tiling, emit_kernel, kernel_sources

__all__ = ["EmittedKernel", "Launch", "describe_tiling", "emit_kernel", "kernel_sources"]
