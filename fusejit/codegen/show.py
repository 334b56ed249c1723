"""``fusejit triton FILE``: print the Triton source of every kernel of an IR file."""

from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``fusejit triton``."""
    p.add_argument("file", help="an IR text file (.fir)")
    p.add_argument("--target", choices=("cuda", "interpret"), default="cuda",
                   help="lowering of libdevice-only math and block sizes (default: cuda)")


def run(args: argparse.Namespace) -> int:
    """Fuse the program (or keep its own kernel regions) and print each kernel's source."""
    from ..fuse import plan_for
    from ..ir.textio import load
    from .triton_emitter import emit_kernel
    program = load(args.file)
    fused = plan_for(program, None).program
    for i, kernel in enumerate(fused.kernels):
        emitted = emit_kernel(kernel, None, args.target)
        if i:
            print()
        print(emitted.source, end="")
        for launch in emitted.launches:
            stages = f" num_stages={launch.num_stages}" if launch.num_stages else ""
            print(f"# launch {launch.fn_name}: grid={launch.grid} num_warps={launch.num_warps}"
                  f"{stages}")
    return 0
