"""The main loop of fusejit's GEMM kernels in SASS, for sm_90, on any machine (no GPU).

Each case's plan is emitted and compiled as the ``cuda`` backend would (Triton as a compiler
only), the cubin disassembled with the ``cuobjdump`` that Triton ships, and the longest
backward branch's body (the K loop) summarized: its instructions, how many are FMAs (FFMA,
DFMA, DMMA, HMMA, HGMMA), the width of its ``LDGSTS`` (``cp.async``) loads, and the registers
a thread takes, hence the 4-warp programs an SM holds.

Why (twenty-ninth session): full-precision float32 products whose rows are both misaligned
run 1.36x the time a tile of their aligned twins takes (H100). Unmasked K steps and clamped
edge loads (the twenty-eighth session's variants) cut that loop from 1,513 to 1,262
instructions, near the aligned loop's 1,183; their timing, level with the default, was void
(the experiment ran the default's cached kernels: ``exp_s26_fma.py``), and Nsight Compute
(thirtieth session) has these kernels' time follow instructions over issue rate. Padded
operands compiled to the misaligned loads still: the mask along N (513 columns) keeps B's
loads at 4 bytes.

Run: ``python bench/sass_gemm_loop.py [--only REGEX]``; a case is ``M N K [pitch_a pitch_b]
[dtype]`` (pitches past K and N read views of wider rows).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

#: label: (M, N, K, row pitch of A, row pitch of B, dtype)
CASES = {
    "aligned 2048x576x8192": (2048, 576, 8192, 8192, 576, "float32"),
    "edge M 2047x576x8192": (2047, 576, 8192, 8192, 576, "float32"),
    "A misaligned 2048x576x8191": (2048, 576, 8191, 8191, 576, "float32"),
    "B misaligned 2048x577x8192": (2048, 577, 8192, 8192, 577, "float32"),
    "both 2047x513x8191": (2047, 513, 8191, 8191, 513, "float32"),
    "both, A padded": (2047, 513, 8191, 8192, 513, "float32"),
    "both, B padded": (2047, 513, 8191, 8191, 516, "float32"),
    "both, A and B padded": (2047, 513, 8191, 8192, 516, "float32"),
    "float64 2048x576x4096": (2048, 576, 4096, 4096, 576, "float64"),
    "float64 both 2047x513x4095": (2047, 513, 4095, 4095, 513, "float64"),
}

#: an H100's (and H200's) registers an SM, and the allocation unit of a warp's
SM_REGISTERS = 65536
WARP_REGISTER_UNIT = 256
FMA_OPS = ("FFMA", "DFMA", "DMMA", "HMMA", "HGMMA")


def instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of every instruction in ``cuobjdump -sass`` text."""
    out = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*?);", line)
        if m:
            out.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return out


def main_loop(sass: str) -> list[tuple[int, str, str]]:
    """The body of the backward branch that holds the most FMA instructions (the K loop)."""
    ins = instructions(sass)
    best: list[tuple[int, str, str]] = []
    for addr, op, args in ins:
        m = re.search(r"0x([0-9a-f]+)", args) if op.startswith("BRA") else None
        if m and int(m.group(1), 16) < addr:
            body = [x for x in ins if int(m.group(1), 16) <= x[0] <= addr]
            if _fmas(body) > _fmas(best):
                best = body
    return best


def _fmas(body: list[tuple[int, str, str]]) -> int:
    return sum(op.split(".")[0] in FMA_OPS for _, op, _ in body)


def summarize(label: str, m: int, n: int, k: int, pitch_a: int, pitch_b: int,
              dtype: str, maxnreg: int = 0) -> str:
    """One line: the GEMM kernel's tiles, registers, programs an SM and its K loop's mix."""
    import fusejit as fj
    from fusejit.codegen import emit_kernel
    from fusejit.runtime.compile import compile_all, cubin_resource_usage, cuobjdump_path
    a = fj.asarray(np.empty((m, pitch_a), dtype))[:, :k]
    b = fj.asarray(np.empty((k, pitch_b), dtype))[:, :n]
    kernels = [kk for kk in fj.plan(a @ b).program.kernels if kk.kind == "gemm"]
    if not kernels:
        return f"{label}: no GEMM kernel in the plan"
    gemm = kernels[0]
    emitted = emit_kernel(gemm, None, "cuda")
    if maxnreg:
        emitted = dataclasses.replace(emitted, launches=tuple(
            dataclasses.replace(launch, max_registers=maxnreg) for launch in emitted.launches))
    compiled = compile_all(emitted, 90, True)[0]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(compiled.cubin)
        sass = subprocess.run([cuobjdump_path(), "-sass", str(path)],
                              capture_output=True, text=True, check=True).stdout
    usage = cubin_resource_usage(compiled.cubin)
    regs, stack = usage["REG"], usage.get("STACK", 0)
    warp_regs = -(-regs * 32 // WARP_REGISTER_UNIT) * WARP_REGISTER_UNIT
    warps = compiled.num_warps
    by_registers = SM_REGISTERS // warp_regs // warps
    loop = main_loop(sass)
    mix = collections.Counter(op.split(".")[0] for _, op, _ in loop)
    loads = collections.Counter(op for _, op, _ in loop
                                if op.split(".")[0] in ("LDGSTS", "UTMALDG", "LDG"))
    attrs = gemm.attrs
    tiles = (f"{attrs.get('block_m')}x{attrs.get('block_n')}x{attrs.get('block_k')}, "
             f"{warps} warps, split {attrs.get('split_k', 1)}")
    fmas = _fmas(loop)
    others = ", ".join(f"{op} {c}" for op, c in mix.most_common(8) if op not in FMA_OPS)
    return (f"{label}: {tiles}; {regs} registers ({by_registers} programs an SM by registers)"
            + (f", maxnreg {maxnreg}" if maxnreg else "") + f", stack {stack} B; "
            f"K loop {len(loop)} instructions, {fmas} FMA ({len(loop) / max(fmas, 1):.2f} a "
            f"FMA); loads {dict(loads)}; {others}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="regular expression over the case labels")
    ap.add_argument("--maxnreg", type=int, default=0,
                    help="a cap on registers a thread given to ptxas (0: none, as emitted)")
    args = ap.parse_args()
    os.environ.setdefault("FUSEJIT_CACHE_DIR", tempfile.mkdtemp(prefix="fj-sass-"))
    import fusejit as fj
    fj.set_backend("numpy")  # (planning only: nothing runs)
    for label, case in CASES.items():
        if re.search(args.only, label):
            print(summarize(label, *case, maxnreg=args.maxnreg), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
