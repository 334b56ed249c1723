"""Registers and spills of the kernels of the benchmark workloads, compiled for sm_90a without a
GPU: a kernel that spills registers to local memory is slow however its tiles are chosen, and
this finds such kernels on a machine with no GPU.

Plans the suite's workloads at every size (``bench/suite.py``), the workloads ``--unseen``
draws from each seed given, and the GEMM benchmark's cases (``bench/bench_matmul.py``, with
``--unseen`` draws too), on the ``numpy`` backend (planned only: the inputs are zeros that are
never touched); emits every distinct kernel for ``cuda``; compiles each launch to PTX with
Triton (pointers 16-byte aligned) and runs ptxas -v for sm_90a on it. Prints one line per
launch that spills more than ``--allow`` bytes a thread (with its registers, shared memory
and the workload), then a count by kernel kind and the largest register counts.

``--as-run``: each program is realized instead, through the ``cuda`` backend's host code on
``tests/fake_cupy.py`` (the kernels do not run), and every launch the backend settles on is
audited: the kernels as a GPU would run them (alignment copies and the strides they give,
TMA loads, persistent loops, the relay), where the default emits each region once with
contiguous operands (the twenty-ninth session found float16 GEMMs with a bias spilling only
so: 4943x15497x2215, 144 bytes a thread, read through pointers).

Run: ``python3 bench/spill_audit.py [--unseen SEED:COUNT ...] [--only REGEX] [--allow 16]
[--as-run]``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def ptxas_report(ptx: str) -> tuple[int, int]:
    """(registers, bytes of spill stores) of every entry in ``ptx`` (ptxas -v, sm_90a): the
    most registers of an entry, the sum of the spills."""
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "kernel.ptx"
        src.write_text(ptx)
        run = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", str(src), "-o",
                              str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True,
                             timeout=600)
    text = run.stdout + run.stderr
    spills = [int(v) for v in re.findall(r"(\d+) bytes spill stores", text)]
    regs = [int(v) for v in re.findall(r"Used (\d+) registers", text)]
    if run.returncode or not spills:
        raise RuntimeError(f"ptxas failed:\n{text[-2000:]}")
    return max(regs, default=0), sum(spills)


def launch_ptx(emitted: Any, launch: Any, divisible: Any = None) -> tuple[str, int]:
    """The PTX of one launch of an emitted kernel for sm_90 (pointers 16-byte aligned, or
    those ``divisible`` marks), and its shared memory in bytes."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fusejit.runtime import kernel_cache as kc
    module = kc.import_source(kc.write_source(emitted), interpret=False)
    divisible = [True] * len(launch.signature) if divisible is None else divisible
    attrs = {(i,): [["tt.divisibility", 16]] for i, d in enumerate(divisible) if d}
    src = ASTSource(getattr(module, launch.fn_name), launch.signature, {}, attrs)
    options: dict[str, Any] = {"num_warps": launch.num_warps}
    if launch.num_stages:
        options["num_stages"] = launch.num_stages
    if launch.max_registers:  # (as fusejit compiles it: runtime/compile.py)
        options["maxnreg"] = launch.max_registers
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    return compiled.asm["ptx"], int(compiled.metadata.shared)


def suite_programs(unseen: list[str], only: str) -> list[tuple[str, Any]]:
    """(label, lazy outputs) of the suite's workloads at every size (then each unseen draw)."""
    import fusejit as fj
    out = []
    for choice in [None, *unseen]:
        if choice:
            os.environ["FUSEJIT_SUITE_UNSEEN"] = choice
        else:
            os.environ.pop("FUSEJIT_SUITE_UNSEEN", None)
        sys.modules.pop("suite", None)  # (its registry is read on import)
        import suite
        for w, size in suite.select(only or None):
            xs = [fj.asarray(np.zeros(a.shape, w.dtype)) for a in w.args(size)]
            tag = f"unseen {choice} " if choice else ""
            out.append((f"{tag}{w.name}:{size} {w.shape_text(size)} {w.dtype}",
                        suite.as_tuple(w.fj(fj, *xs))))
    os.environ.pop("FUSEJIT_SUITE_UNSEEN", None)
    return out


#: the part of CuPy that ``bench_matmul._inputs`` draws with, giving zeros
_ZEROS = SimpleNamespace(float32=np.float32, random=SimpleNamespace(
    default_rng=lambda seed: SimpleNamespace(standard_normal=lambda shape, dtype: np.zeros(shape, dtype))))


def matmul_programs(unseen: list[str], only: str) -> list[tuple[str, Any]]:
    """(label, lazy output) of the GEMM benchmark's cases (then each unseen draw)."""
    import bench_matmul as bm

    import fusejit as fj
    out = []
    for choice in [None, *unseen]:
        cases = list(bm.CASES)
        if choice:
            seed, count = (int(p) for p in choice.split(":"))
            drawn = bm.draw_unseen(seed, count)
            # (every draw names its cases u0, u1, ...: each seed's are built before the next
            # seed's replace them in bm.CASES)
            bm.CASES.update(drawn)
            cases = list(drawn)
        for case in cases:
            if only and not re.search(only, case):
                continue
            x = bm._inputs(_ZEROS, case)  # (zeros, never touched: planning reads no values)
            out.append((f"matmul {choice + ' ' if choice else ''}{case}",
                        (bm._fusejit_program(fj, case, x),)))
    return out


def _install_fake_cupy() -> None:
    """``tests/fake_cupy.FakeCupy`` in place of CuPy: the ``cuda`` backend plans, emits and
    compiles on this machine; its launches run nothing."""
    sys.path.insert(0, str(HERE.parent))
    from tests.fake_cupy import FakeCupy
    sys.modules["cupy"] = FakeCupy(raw_launch=True)


def _launches_as_run(outs: Any) -> list[tuple[Any, Any, Any, Any]]:
    """(kernel, emitted, launch, its pointers' 16-byte alignment) of every launch the ``cuda``
    backend runs to realize ``outs`` (inputs on the fake device), in order: the emissions it
    settled on, after its own second tries (a kernel emitted again in epilogue slices where
    it spilled, relayed, without TMA)."""
    import fusejit as fj
    from fusejit.runtime import cuda_backend
    used: list[tuple[Any, Any, Any, Any]] = []
    real_kernel_info = cuda_backend.CudaBackend.kernel_info

    def record(self: Any, kernel: Any, emitted: Any, spec: Any, dev: Any) -> Any:
        for launch in emitted.launches:
            used.append((kernel, emitted, launch, self._divisible(launch, spec)))
        return real_kernel_info(self, kernel, emitted, spec, dev)
    cuda_backend.CudaBackend.kernel_info = record  # type: ignore[method-assign]
    try:
        fj.realize(*[fj.asarray(o) if not isinstance(o, fj.Tensor) else o for o in outs])
    finally:
        cuda_backend.CudaBackend.kernel_info = real_kernel_info  # type: ignore[method-assign]
    return used


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--unseen", action="append", default=[], metavar="SEED:COUNT",
                   help="also the suite's and the GEMM benchmark's draws from SEED")
    p.add_argument("--only", default="", help="a regular expression the workload's name matches")
    p.add_argument("--allow", type=int, default=16, help="spill bytes a thread let pass")
    p.add_argument("--no-matmul", action="store_true")
    p.add_argument("--as-run", action="store_true",
                   help="audit the launches the cuda backend compiles (on a fake CuPy)")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.as_run:
        _install_fake_cupy()
    import fusejit as fj
    from fusejit.codegen import emit_kernel
    start = time.monotonic()
    seen: dict[str, tuple[int, int, int]] = {}
    kinds: Counter[str] = Counter()
    spilled = failed = 0
    programs = suite_programs(args.unseen, args.only)
    if not args.no_matmul:
        programs += matmul_programs(args.unseen, args.only)
    with fj.using_backend("cuda" if args.as_run else "numpy"):
        for label, outs in programs:
            if args.as_run:
                launches = _launches_as_run(outs)
            else:
                launches = [(kernel, emitted, launch, None)
                            for kernel in fj.plan(*outs).program.kernels
                            for emitted in [emit_kernel(kernel, None, "cuda")]
                            for launch in emitted.launches]
            for kernel, emitted, launch, divisible in launches:
                key = emitted.source + launch.fn_name + str(launch.num_warps) + str(divisible)
                if key in seen:
                    continue
                try:
                    ptx, shared = launch_ptx(emitted, launch, divisible)
                    regs, spill = ptxas_report(ptx)
                except Exception as e:  # noqa: BLE001 (reported, the audit goes on)
                    failed += 1
                    print(f"FAILED {label}: {launch.fn_name}: {type(e).__name__}: "
                          f"{str(e)[:300]}", flush=True)
                    seen[key] = (0, 0, 0)
                    continue
                seen[key] = (regs, spill, shared)
                kinds[kernel.kind] += 1
                if spill > args.allow:
                    spilled += 1
                    print(f"SPILLS {spill} B/thread, {regs} registers, {shared} B shared, "
                          f"{launch.num_warps} warps: {launch.fn_name} ({kernel.kind}) of "
                          f"{label}", flush=True)
    most = sorted(seen.values(), reverse=True)[:5]
    print(f"spill audit: {len(programs)} programs, {len(seen)} launches compiled "
          f"({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) in "
          f"{time.monotonic() - start:.0f} s; {spilled} spill more than {args.allow} bytes a "
          f"thread, {failed} failed; most registers {[r for r, _, _ in most]}")
    return 1 if spilled or failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
