"""plan.explain() states each kernel's tiling and the plan's memory traffic against op by op."""

from __future__ import annotations

import numpy as np

import fusejit as fj
from fusejit.codegen import emit_kernel


def _arrays(n, shape=(256, 64), dtype=np.float32):
    return [fj.asarray(np.ones(shape, dtype)) for _ in range(n)]


def test_traffic_of_the_classic_chain():
    # multiply, add and sigmoid: op by op 3 + 3 + 2 = 8 array transfers, fused 3 reads + 1 write
    x, y, z = _arrays(3)
    t = fj.plan(fj.sigmoid(x * y + z)).traffic()
    one = 256 * 64 * 4
    assert (t.fused_read, t.fused_written, t.unfused) == (3 * one, one, 8 * one)
    assert "one kernel per op would move" in fj.plan(fj.sigmoid(x * y + z)).explain()


def test_traffic_counts_views_at_their_source_and_split_partials_not():
    x, = _arrays(1)
    b = fj.asarray(np.ones(64, np.float32))
    t = fj.plan(x + b).traffic()          # the broadcast bias is read at its own size
    assert t.fused_read == 256 * 64 * 4 + 64 * 4 and t.unfused == t.fused
    s = fj.plan(fj.asarray(np.ones(1 << 20, np.float32)).sum()).traffic()
    assert (s.fused_read, s.fused_written) == (4 << 20, 4)


def test_explain_and_kernel_header_state_the_tiling():
    x, = _arrays(1, (4096, 1024))
    for y, words in ((fj.softmax(x), "in registers"), (x.sum(axis=0), "partials"),
                     (fj.exp(x), "1-D blocks"), (x.T * 2, "2-D tiles")):
        plan = fj.plan(y)
        text = plan.explain()
        assert "tiling: (on cuda)" in text and words in text, text
        source = emit_kernel(plan.program.kernels[0], None, "cuda").source
        assert "# tiling: " in source and words in source
