"""Launch order: a pointwise kernel that re-reads a large buffer the launch before it
streamed through runs its programs last block first (``fuse.rules.rule_reverse_reread``,
the kernel attribute ``order=reversed``), so that it starts with what L2 still holds.

The order changes no value: every program writes its own block. Checked here: when the rule
reverses a kernel and when not (sizes, kinds, the setting), the generated ``pid`` line and
``plan.explain()``, the attribute in the text (round trip, invalid values at their line),
and reversed kernels of every pointwise form (1-D blocks with a ragged last block, 2-D tiles,
the pitched word copy) against NumPy on ``interpret`` (exact: the same operations in another
program order).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

import fusejit as fj
from fusejit.codegen import emit_kernel, heuristics
from fusejit.errors import FusejitError, IRVerifyError
from fusejit.fuse import cost, plan_for
from fusejit.fuse.rules import rule_reverse_reread
from fusejit.ir.printer import print_program
from fusejit.runtime import forget_plans

rng = np.random.default_rng(2212)

# (every test plans under thresholds or settings of its own: conftest's fresh_plans)
pytestmark = pytest.mark.usefixtures("fresh_plans")


def _batch_norm(xp, x):
    return (x - x.mean(axis=0)) / xp.sqrt(x.var(axis=0) + np.float32(1e-5))


def _plan(fn, shape, dtype=np.float32):
    """The plan of ``fn`` over a zero array of ``shape`` (planned, never run)."""
    with fj.using_backend("numpy"):
        return fj.plan(fn(fj, fj.asarray(np.zeros(shape, dtype))))


def test_batch_norm_normalizes_last_block_first():
    """32 MB of float32: the statistics read x front to back, so the normalize starts at the
    end; its pid counts down from the last of 8192 blocks of 1024."""
    plan = _plan(_batch_norm, (4096, 2048))
    stats, normalize = plan.program.kernels
    assert stats.kind == "split_reduction" and "order" not in stats.attrs
    assert normalize.kind == "pointwise" and normalize.attrs["order"] == "reversed"
    text = plan.explain()
    assert "launch order:" in text
    assert re.search(rf"@{normalize.name} runs its programs last block first \(reverse_reread\): "
                     rf"reads %in0 \(33.6 MB\), which @{stats.name} read front to back", text)
    assert "programs run last block first (order=reversed)" in text
    assert "kind=pointwise order=reversed ->" in print_program(plan.program)
    source = emit_kernel(normalize, None, "cuda").source
    assert "    pid = 8191 - tl.program_id(0)  # last block first (order=reversed)" in source


@pytest.mark.parametrize("fn, shape, reversed_", [
    (lambda xp, x: x / x.sum(), (1 << 22,), True),  # a full sum, then the share: 16 MB
    (lambda xp, x: x / x.sum(), (1 << 22) - 1, False),  # under REVERSE_REREAD_MIN_BYTES
    (lambda xp, x: x - x.mean(axis=1, keepdims=True), (4096, 2048), None),  # one kernel
    # an outer reduction's programs each read a column block over every row: no order to use
    (lambda xp, x: x - x.max(axis=0), (512, 1 << 14), False),
])
def test_which_plans_reverse(fn, shape, reversed_):
    plan = _plan(fn, shape if isinstance(shape, tuple) else (shape,))
    kernels = plan.program.kernels
    if reversed_ is None:
        assert len(kernels) == 1 and "order" not in kernels[0].attrs
        return
    assert len(kernels) == 2, plan.explain()
    assert (kernels[1].attrs.get("order") == "reversed") == reversed_, plan.explain()
    assert "order" not in kernels[0].attrs
    assert ("launch order:" in plan.explain()) == reversed_


def test_a_written_result_read_next_reverses_and_kernels_alternate():
    """The rule on kernels as the plan holds them: a pointwise kernel reading what the one
    before wrote reverses; after a reversed kernel the next keeps the order."""
    plan = _plan(_batch_norm, (4096, 2048))
    stats, normalize = plan.program.kernels
    normalize = replace(normalize, attrs={"kind": "pointwise"})  # (as fused, not yet ordered)
    assert rule_reverse_reread(normalize, stats) is not None
    assert rule_reverse_reread(normalize, None) is None
    assert rule_reverse_reread(stats, None) is None  # (a reduction keeps its order)
    # a pointwise kernel reading the normalize's result, which the normalize wrote
    (param,) = [p for p in normalize.params if p.name == "in0"]
    reader = replace(normalize, args=(normalize.results[0], "3", "10"))
    assert rule_reverse_reread(reader, normalize) is not None
    assert "which @" in rule_reverse_reread(reader, normalize) and \
        "wrote front to back" in rule_reverse_reread(reader, normalize)
    reversed_ = replace(normalize, attrs={"kind": "pointwise", "order": "reversed"})
    assert rule_reverse_reread(reader, reversed_) is None
    assert param.type.nbytes >= cost.REVERSE_REREAD_MIN_BYTES


def test_the_setting_turns_the_rule_off(monkeypatch):
    monkeypatch.setenv("FUSEJIT_REVERSE_REREADS", "0")
    plan = _plan(_batch_norm, (4096, 2048))
    assert all("order" not in k.attrs for k in plan.program.kernels)
    assert "launch order:" not in plan.explain()
    monkeypatch.setenv("FUSEJIT_REVERSE_REREADS", "sometimes")
    forget_plans()
    with pytest.raises(FusejitError, match=r"FUSEJIT_REVERSE_REREADS='sometimes' is not one of "
                                           r"0, 1"):
        _plan(_batch_norm, (4096, 2048))


def test_a_second_split_reduction_runs_its_chunks_last_first():
    """Mean absolute deviation of a vector: the mean, then a split sum of ``abs(x - mean)``
    that reads x again, its chunks last first (the partials still combine in chunk order)."""
    plan = _plan(lambda xp, x: xp.abs(x - x.mean()).mean(), (1 << 23,))
    first, second = plan.program.kernels
    assert (first.kind, second.kind) == ("split_reduction", "split_reduction")
    assert "order" not in first.attrs and second.attrs["order"] == "reversed"
    source = emit_kernel(second, None, "cuda").source
    assert "    chunk = 511 - tl.program_id(1)  # chunk of 16384 reduced elements, of 512: " \
        "the last first (order=reversed)" in source
    assert "chunks run last first (order=reversed)" in plan.explain()


@pytest.mark.parametrize("fn, shape", [
    (lambda xp, x: xp.abs(x - x.mean()).mean(), (5000,)),  # a reversed split reduction
    (lambda xp, x: xp.abs(x - x.mean(axis=0)).max(axis=0), (3000, 5)),  # (over row blocks)
    (_batch_norm, (3000, 77)),  # 1-D blocks, the last one ragged
    (lambda xp, x: x / x.sum(), (5000,)),
    (lambda xp, x: x.T - x.mean(), (67, 129)),  # a transposed read: 2-D tiles
    (lambda xp, x: (x - x.min()) / (x.max() - x.min()), (3, 41, 29)),
])
def test_reversed_kernels_compute_what_numpy_does(monkeypatch, fn, shape):
    """With the size bound at 0 every re-reading pointwise kernel reverses (and small
    reductions split as large ones do); on the interpreter its result is NumPy's (float32
    statistics within 1e-5 relative)."""
    monkeypatch.setattr(cost, "REVERSE_REREAD_MIN_BYTES", 0)
    monkeypatch.setattr(cost, "SPLIT_MIN_REDUCE", 1024)
    monkeypatch.setattr(cost, "OUTER_SPLIT_MIN_ELEMENTS", 1024)
    monkeypatch.setattr(heuristics, "coop_row_capacity", lambda itemsize, target="cuda": 256)
    x = rng.standard_normal(shape).astype(np.float32)
    with fj.using_backend("interpret"):
        t = fn(fj, fj.asarray(x))
        plan = fj.plan(t)
        assert any(k.attrs.get("order") == "reversed" for k in plan.program.kernels), \
            plan.explain()
        got = np.asarray(t.realize().numpy())
    want = fn(np, x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


_WRITTEN = """# fusejit ir v1
func @main(%x: f32[37,91]) -> f32[37,91] {{
  %0 = kernel @scale(%x) kind=pointwise {attrs} -> f32[37,91] {{
  ^(%x: f32[37,91]):
    %0 = neg %x : f32[37,91]
    yield %0
  }}
  %1 = add %0, %x : f32[37,91]
  return %1
}}
"""


@pytest.mark.parametrize("attrs, form", [
    ("order=reversed", "1-D blocks"),
    ("order=forward", "1-D blocks"),
    ("order=reversed row_pitch=96", "2-D tiles"),
])
def test_order_as_a_user_writes_it(attrs, form):
    """A kernel block written with ``order=`` keeps it (the rule never touches user blocks),
    runs in that order, and survives the text."""
    program = fj.parse(_WRITTEN.format(attrs=attrs))
    assert fj.parse(print_program(program)) == program
    (kernel,) = [k for k in plan_for(program).program.kernels if k.name == "scale"]
    source = emit_kernel(kernel, None, "interpret").source
    assert form in source
    assert ("last block first (order=reversed)" in source) == ("reversed" in attrs)
    x = rng.standard_normal((37, 91)).astype(np.float32)
    with fj.using_backend("interpret"):
        (out,) = program.run(x=x)
    np.testing.assert_array_equal(np.asarray(out), -x + x)


def test_a_reversed_word_copy_is_exact():
    """The pitched copy in 8-byte words, its programs reversed: the source's tail is still
    copied by the block numbered 0 (now the last program)."""
    text = """# fusejit ir v1
func @main(%x: f16[37,91]) -> f16[37,91] {
  %0 = kernel @pad(%x) kind=pointwise order=reversed row_pitch=96 -> f16[37,91] {
  ^(%x: f16[37,91]):
    %0 = permute %x perm=[0,1] : f16[37,91]
    yield %0
  }
  return %0
}
"""
    program = fj.parse(text)
    (kernel,) = plan_for(program).program.kernels
    source = emit_kernel(kernel, None, "interpret").source
    assert "8-byte words" in source and "- tl.program_id(0)  # last block first" in source
    x = rng.standard_normal((37, 91)).astype(np.float16)
    with fj.using_backend("interpret"):
        (out,) = program.run(x=x)
    np.testing.assert_array_equal(np.asarray(out), x)


@pytest.mark.parametrize("attrs, message", [
    ("order=sideways", "order=sideways is not one of forward, reversed"),
    ("order=3", "order=3 is not one of forward, reversed"),
])
def test_an_invalid_order_is_an_error_at_the_kernel(attrs, message):
    with pytest.raises(IRVerifyError, match=re.escape(message)) as info:
        fj.parse(_WRITTEN.format(attrs=attrs))
    assert info.value.line == 3


def test_order_on_a_reduction_is_an_error():
    text = ("func @main(%x: f32[8,16]) -> f32[8] {\n"
            "  %s = kernel @k(%x) kind=inner_reduction order=reversed -> f32[8] {\n"
            "  ^(%x: f32[8,16]):\n"
            "    %s = sum %x axes=[1] : f32[8]\n"
            "    yield %s\n"
            "  }\n"
            "  return %s\n"
            "}\n")
    with pytest.raises(IRVerifyError, match=r"order=reversed is for pointwise kernels and split "
                                            r"reductions \(this one is inner_reduction\)") as info:
        fj.parse(text)
    assert info.value.line == 2
