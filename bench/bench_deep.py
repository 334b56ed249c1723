"""Benchmark: deep programs through every stage, and compile time against kernel length.

Stages, per chain length (``--sizes``, default 10,000 and 100,000 steps):

* record: building the lazy graph through the public API;
* dump: ``fj.dump`` (lowering to a Program, then printing);
* parse: ``fj.parse`` of that text (Lark, then the verifier);
* plan: ``fj.plan`` with an empty plan cache (lowering and the greedy fusion pass);
* realize numpy: ``realize()`` on the ``numpy`` backend (the plan is cached by now);
* realize interpret: the same chain recorded again and realized on ``interpret``
  (every kernel emitted, written, imported and run by Triton's interpreter).

Two chains: ``pointwise`` (``y * 1.0001 + 0.5``, ``sin`` and ``abs`` in turn: 1.5
instructions a step, split by the ``region_size`` rule into kernels of
``cost.MAX_REGION_INSTRS``) and ``mixed`` (row and column reductions broadcast back,
transposes, flips, reshapes: 3.7 instructions and about 0.33 kernels a step). After
the table, the time per instruction of the largest size over the smallest is printed
for each stage: near 1 means linear; the bench flags a ratio over 3. Ratios of 1.5 to
2.7 at 100,000 steps are CPython's cyclic garbage collector, whose full collections
walk a heap that grows with the program (``--no-gc`` turns it off to show that:
the ratios then fall to about 1 to 1.4).

``--compile-sizes 64,128,256,512,1024`` instead measures how compiling one pointwise
kernel grows with its length (wall and CPU seconds, Triton's own caches bypassed):
``triton.compile`` to an sm_90 cubin (no GPU needed) and a cold interpret run, for an
arithmetic chain and for one where every fourth op is ``sin`` (libdevice on cuda).
That measurement is what ``cost.MAX_REGION_INSTRS`` is chosen from.

    python bench/bench_deep.py [--sizes 10000,100000] [--chains pointwise,mixed]
                               [--interpret-sizes 10000,100000] [--no-gc]
    python bench/bench_deep.py --compile-sizes 64,128,256,512,1024
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import fusejit as fj
from fusejit import fuse
from fusejit.fuse import cost

# the chains CI runs at 20,000 steps (tests/test_deep.py), here at 10,000 and 100,000
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.test_deep import mixed_chain, pointwise_chain  # noqa: E402

STAGES = ("record", "dump", "parse", "plan", "realize numpy", "realize interpret")


CHAINS: dict[str, tuple[Callable[..., Any], np.ndarray]] = {
    "pointwise": (pointwise_chain, np.linspace(-1, 1, 256, dtype=np.float32)),
    "mixed": (mixed_chain, np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)),
}


class _Clock:
    """Seconds since the last ``lap`` (or since it was made)."""

    def __init__(self) -> None:
        self.t = time.perf_counter()

    def lap(self) -> float:
        now = time.perf_counter()
        out, self.t = now - self.t, now
        return out


def run_stages(chain: str, steps: int, interpret: bool) -> dict[str, Any]:
    """Seconds per stage for one chain of ``steps`` steps (and its instruction count)."""
    make, x = CHAINS[chain]
    row: dict[str, Any] = {}
    clock = _Clock()
    y = make(fj, fj.asarray(x, name="x"), steps)
    row["record"] = clock.lap()
    text = fj.dump(y)
    row["dump"] = clock.lap()
    program = fj.parse(text)
    row["parse"] = clock.lap()
    row["instrs"] = len(program.body)
    del program, text
    fuse.clear_cache()
    clock.lap()
    plan = fj.plan(y)
    row["plan"] = clock.lap()
    row["kernels"] = plan.num_launches
    del plan
    with fj.using_backend("numpy"):
        clock.lap()
        y.realize()
        row["realize numpy"] = clock.lap()
    want = y.numpy()
    del y
    if interpret:
        z = make(fj, fj.asarray(x, name="x"), steps)
        with fj.using_backend("interpret"):
            clock.lap()
            z.realize()
            row["realize interpret"] = clock.lap()
        np.testing.assert_allclose(z.numpy(), want, rtol=1e-4, atol=1e-5)
    return row


def stage_table(chains: list[str], sizes: list[int], interpret_sizes: set[int]) -> None:
    """Print the per-stage table and the linearity check."""
    for chain in chains:
        print(f"\n== {chain} chain")
        head = f"{'steps':>8} {'instrs':>8} {'kernels':>8} " + " ".join(f"{s:>18}" for s in STAGES)
        print(head)
        rows = []
        for steps in sizes:
            row = run_stages(chain, steps, steps in interpret_sizes)
            rows.append(row)
            cells = " ".join(f"{row[s]:>17.2f}s" if s in row else f"{'-':>18}" for s in STAGES)
            print(f"{steps:>8} {row['instrs']:>8} {row['kernels']:>8} {cells}", flush=True)
        if len(rows) > 1:
            small, large = rows[0], rows[-1]
            print("time per instruction, largest over smallest (1.0 = linear):")
            for s in STAGES:
                if s in small and s in large and small[s] > 0:
                    ratio = (large[s] / large["instrs"]) / (small[s] / small["instrs"])
                    flag = "" if ratio < 3 else "   <-- more than 3x: not linear?"
                    print(f"  {s:<18} {ratio:5.2f}{flag}")


# -- compile time against kernel length -----------------------------------------------

def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def compile_table(sizes: list[int]) -> None:
    """Compile one kernel of each length; print wall and CPU seconds."""
    os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # measure compiling, not Triton's cache
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from fusejit.codegen import emit_kernel
    from fusejit.runtime import kernel_cache as kc

    limit = cost.MAX_REGION_INSTRS
    cost.MAX_REGION_INSTRS = 1 << 30  # one kernel, whatever its length
    x = np.linspace(0, 1, 1 << 14, dtype=np.float32)
    mixes: dict[str, Callable[[Any, int], Any]] = {
        "arith": lambda y, i: y * 1.0001 + 0.5 if i % 2 == 0 else fj.maximum(y, 0.25)
        if i % 4 == 1 else fj.abs(y),
        "libdevice": lambda y, i: y * 1.0001 + 0.5 if i % 2 == 0 else fj.sin(y)
        if i % 4 == 1 else fj.abs(y),
    }
    print(f"\n== compile time of one pointwise kernel (triton {triton.__version__}, sm_90)")
    print(f"{'mix':>10} {'instrs':>7} {'cubin wall':>11} {'cubin cpu':>10} {'ms/instr':>9} "
          f"{'interp cold':>12}")
    try:
        for mix, step in mixes.items():
            for n in sizes:
                y = fj.asarray(x, name="x")
                steps = 0
                while steps * 3 < n * 2:  # 1.5 instructions a step
                    y = step(y, steps)
                    steps += 1
                (kernel,) = fj.plan(y).regions
                emitted = emit_kernel(kernel, None, "cuda")
                module = kc.import_source(kc.write_source(emitted), interpret=False)
                launch = emitted.launches[0]
                src = ASTSource(getattr(module, launch.fn_name), dict(launch.signature), {},
                                {(i,): [["tt.divisibility", 16]] for i in
                                 range(len(launch.signature))})
                wall, cpu = time.perf_counter(), _cpu()
                triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": launch.num_warps, "enable_fp_fusion": False})
                wall, cpu = time.perf_counter() - wall, _cpu() - cpu
                one_kernel = fj.parse(fj.dump(y, fused=True))
                with fj.using_backend("interpret"):
                    clock = _Clock()
                    one_kernel.run(x)
                    interp = clock.lap()
                print(f"{mix:>10} {len(kernel.body):>7} {wall:>10.2f}s {cpu:>9.2f}s "
                      f"{1000 * cpu / len(kernel.body):>9.1f} {interp:>11.2f}s", flush=True)
    finally:
        cost.MAX_REGION_INSTRS = limit


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="chain lengths in steps")
    parser.add_argument("--chains", default="pointwise,mixed")
    parser.add_argument("--interpret-sizes", default=None,
                        help="lengths also realized on interpret (default: all pointwise "
                             "sizes and mixed sizes up to 10000)")
    parser.add_argument("--compile-sizes", default="",
                        help="measure compile time of one kernel of these lengths instead")
    parser.add_argument("--no-gc", action="store_true",
                        help="turn off Python's cyclic garbage collector (to see its share)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.no_gc:
        gc.disable()
    if args.compile_sizes:
        compile_table([int(s) for s in args.compile_sizes.split(",")])
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    for chain in args.chains.split(","):
        if args.interpret_sizes is None:
            interp = {s for s in sizes if chain == "pointwise" or s <= 10_000}
        else:
            interp = {int(s) for s in args.interpret_sizes.split(",") if s}
        stage_table([chain], sizes, interp)


if __name__ == "__main__":
    main()
