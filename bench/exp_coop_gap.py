"""Where does fusejit's cooperative softmax lose to the hand-written one? (issue 9, wide rows)

At 256 rows of 2**18 float32 the hand-written cooperative softmax of
``bench/exp_wide_softmax2.py`` (one exp per element) runs at 84-86% of the copy rate,
fusejit's emitted kernel (the same tiles and protocol, the chunk's exps reused) at 80%.
This launches the emitted source as it is and with one difference at a time from the
hand-written kernel, at 4 and 8 warps: the output as ``e * (scale / sum)`` (one division per
row) instead of ``(e * scale) / sum`` (one per element); no select that makes a chunk's
maximum's exp exactly 1 (it keeps an all-infinite chunk from NaN); a plain ``max`` for the
NaN-propagating one; then all three (timings only: the kernel's answers with the edits are
not checked). Then (2026-12-02, third session) the fast path without its settle, an atomic
whose result each program waits for before it ends, with the counters zeroed by a memset
before each launch instead (``NO_SETTLE``; both timed with the memset).

Run (GPU machine, torch installed: Triton's launcher takes torch views):
``python3 bench/exp_coop_gap.py``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = {
    "as emitted": [],
    "scale folded": [("row's max\n        v6 = v3 / v4",
                      "row's max\n        v6 = part_v4_exp_1 * (v3_scale / v4)")],
    "no equal-max select": [("    part_v4_exp_1 = tl.where(v_in0 == part_v4_max_1, 1, part_v4_exp)",
                             "    part_v4_exp_1 = part_v4_exp")],
    "plain max": [("_max_nan)", "tl.standard._elementwise_max)")],
}
VARIANTS["all three"] = [edit for edits in list(VARIANTS.values())[1:] for edit in edits]


def main() -> int:
    """Time each variant beside a copy (CUDA events)."""
    import cupy as cp
    from exp_reductions import event_time
    from exp_wide_softmax import direct_launch_us

    import fusejit as fj
    import fusejit.codegen.heuristics as heuristics
    from fusejit.codegen import emit_kernel

    def events(fn: Any) -> float:
        return event_time(fn) * 1e6

    rows, cols = 256, 1 << 18
    x = cp.random.standard_normal((rows, cols), dtype=cp.float32) * 4
    y = cp.empty_like(x)
    copy_us = events(lambda: cp.copyto(y, x))
    print(f"{rows}x{cols} float32: copy {copy_us:8.1f} us", flush=True)
    heuristics.COOPERATIVE_ROWS = True
    for warps in (4, 8):
        heuristics.COOP_MAX_WARPS = warps
        with fj.using_backend("interpret"):  # (planned only)
            (kernel,) = fj.plan(fj.softmax(fj.asarray(np.zeros((rows, cols), np.float32)),
                                           axis=-1)).program.kernels
        emitted = emit_kernel(kernel, None, "cuda")
        print(f"{warps} warps:", flush=True)
        time_variants(emitted, x, copy_us, events, direct_launch_us)
    return 0


#: the fast path without its settle (an atomic whose result every program waits for before
#: it ends: is it the row's last?), counters zeroed by a memset before each launch instead
#: (both timed with that memset: the row's counters are never zeroed by the kernel then)
NO_SETTLE = {
    "memset, as emitted": [],
    "memset, no settle": [(re.compile(r"settled = tl\.atomic_add\(counters \+ \d+ \+ pid, 1, "
                                      r'sem="relaxed"\)'), "settled = -1")],
}


def time_variants(emitted: Any, x: Any, copy_us: float, events: Any, direct_launch_us: Any) -> None:
    """Time the emitted source as it is and with each of ``VARIANTS``' edits, then the
    ``NO_SETTLE`` pair."""
    for name, edits in NO_SETTLE.items():
        source = emitted.source
        for pattern, new in edits:
            source, n = pattern.subn(new, source, count=1)
            if not n:
                print(f"{name}: {pattern.pattern!r} not in the source, skipped")
                break
        else:
            variant = dataclasses.replace(emitted, source=source)
            us = direct_launch_us(variant, [x], events, zero_counters=True)
            print(f"{name:18s} {us:8.1f} us  {100 * copy_us / us:5.1f}% of copy", flush=True)
    for name, edits in VARIANTS.items():
        source = emitted.source
        for old, new in edits:
            if old not in source:
                print(f"{name}: {old!r} not in the source, skipped")
                break
            source = source.replace(old, new)
        else:
            variant = dataclasses.replace(emitted, source=source)
            try:
                us = direct_launch_us(variant, [x], events)
                print(f"{name:12s} {us:8.1f} us  {100 * copy_us / us:5.1f}% of copy", flush=True)
            except Exception as exc:  # noqa: BLE001  (report, go on)
                print(f"{name}: failed {type(exc).__name__}: {exc}"[:300], flush=True)


if __name__ == "__main__":
    sys.exit(main())
