"""Which program of a fuzz seed fails, or takes the host's memory (sixteenth session).

``fusejit fuzz --backend cuda --products --seed 16403`` was killed by the OOM killer on two
cold H100 machines (130 GB of host memory, ``bench/results/h100-s16-call18/fuzz.txt``); the
fuzzer prints nothing per program, so this runs the seed's programs one at a time, printing
each index and the process's resident memory before it runs, and a watchdog thread stops the
process with every thread's Python stack (``faulthandler``) once the memory passes a bound.
On the second cold machine the memory went from 0.46 GB to over 8 GB within 0.2 s at
program 36 (on that machine's Hypothesis: ``v5 = v2.var(axis=None)`` beside
``positive(v0) ** 0``); on the same machine warm, with fresh fusejit and Triton cache
directories, the same programs ran in 8 s at 0.46 GB.

    python3 bench/fuzz_trace.py SEED FIRST LAST [--backend cuda] [--limit-gb 8] [--show-from N]
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _rss() -> int:
    """This process's resident bytes (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("seed", type=int)
    parser.add_argument("first", type=int)
    parser.add_argument("last", type=int)
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--products", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--limit-gb", type=float, default=8.0)
    parser.add_argument("--show-from", type=int, default=1 << 30,
                        help="print the source of each program from this index on")
    args = parser.parse_args(argv)
    from fusejit.fuzz import FuzzConfig, classify, draw_program

    current: dict[str, int | None] = {"index": None}

    def watch() -> None:
        while True:
            rss = _rss()
            if rss > args.limit_gb * 1e9:
                print(f"WATCHDOG: {rss / 1e9:.1f} GB resident at program {current['index']}",
                      flush=True)
                faulthandler.dump_traceback(all_threads=True)
                os._exit(3)
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    config = FuzzConfig(backend=args.backend, seed=args.seed, products=args.products)
    start = time.time()
    failures = 0
    for index in range(args.first, args.last):
        recipe = draw_program(config, index)
        if recipe is None:
            continue
        current["index"] = index
        print(f"[{time.time() - start:6.1f} s] program {index}, {_rss() / 1e9:.2f} GB resident",
              flush=True)
        if index >= args.show_from:
            print(recipe.source(), flush=True)
        outcome = classify(recipe, args.backend)
        if outcome is not None:
            failures += 1
            print(f"FAILED program {index}: {outcome}\n{recipe.source()}", flush=True)
    print(f"done: programs {args.first}-{args.last - 1}, {failures} failed", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
