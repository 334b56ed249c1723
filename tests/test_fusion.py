"""The greedy fusion pass: exact kernel counts, boundary reasons, plans, edited fused text.

Kernel counts are the product promise ("softmax is one kernel"), so they are
asserted exactly. Values are checked on the numpy backend against NumPy.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import fusejit as fj
from fusejit import fuse
from fusejit.fuse import cost
from fusejit.ir.domain import region_domain
from fusejit.ir.graph import lower

RNG = np.random.default_rng(0)
NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def t(*shape: int, dtype: type = np.float32) -> fj.Tensor:
    return fj.asarray(RNG.standard_normal(shape).astype(dtype))


@pytest.fixture(autouse=True)
def _numpy_backend():
    with fj.using_backend("numpy"):
        yield


def _chain20(x: fj.Tensor) -> fj.Tensor:
    y = x
    for i in range(20):
        y = fj.sin(y) if i % 2 else y * 1.5 + 0.25
    return y


def _layer_norm(x, w, b):
    return fj.layer_norm(x, w, b)


X, Y = t(16, 32), t(16, 32)
BIAS, SCALE, W = t(32), t(16, 1), t(32)
X3 = t(4, 5, 6)
YT = t(32, 16)

# (name, outputs) that must run as exactly one kernel
ONE_KERNEL = [
    ("pointwise chain of 20 ops", lambda: [_chain20(X)]),
    ("relu(x + bias) * scale, broadcast operands", lambda: [fj.maximum(X + BIAS, 0) * SCALE]),
    ("x.T + y", lambda: [X.T + YT]),
    ("x[1:, ::2] + x[:-1, 1::2]", lambda: [X[1:, ::2] + X[:-1, 1::2]]),
    ("reshape and expand folded into loads",
     lambda: [X.reshape(32, 16) * fj.broadcast_to(BIAS[:16], (32, 16))]),
    ("softmax", lambda: [fj.softmax(X)]),
    ("log_softmax", lambda: [fj.log_softmax(X)]),
    ("layer_norm", lambda: [_layer_norm(X, W, BIAS)]),
    ("rms_norm", lambda: [fj.rms_norm(X, W)]),
    ("x - x.max(-1, keepdims=True)", lambda: [X - X.max(-1, keepdims=True)]),
    ("sum(x,-1) and max(x,-1) siblings", lambda: [fj.sum(X, -1), fj.max(X, -1)]),
    ("mean and var of one row", lambda: [fj.mean(X, -1), fj.var(X, -1)]),
    ("exp(x).sum(axis=1) on 3-D input", lambda: [fj.exp(X3).sum(axis=1)]),
    ("two unrelated same-shape pointwise outputs", lambda: [fj.exp(X), fj.log(fj.abs(Y))]),
    ("epilogue: sqrt(sum(x*x,-1)) + 1", lambda: [fj.sqrt(fj.sum(X * X, -1)) + 1]),
    ("prologue value also returned", lambda: [X * X, fj.sum(X * X, -1)]),
    ("logsumexp", lambda: [fj.logsumexp(X, -1)]),
    ("std over the last axis", lambda: [fj.std(X, -1)]),
]


@pytest.mark.parametrize("name,build", ONE_KERNEL, ids=[c[0] for c in ONE_KERNEL])
def test_one_kernel(name, build):
    outs = build()
    plan = fj.plan(*outs)
    assert plan.num_launches == 1, plan.explain()
    assert len(plan.kernels) == 1
    assert len(plan.program.body) == 1
    _check_values(outs)


def _check_values(outs):
    """Fused results equal the unfused program's, bit for bit (same NumPy calls on same arrays)."""
    program, buffers, _ = lower([o._node for o in outs])
    from fusejit.runtime.numpy_backend import NumpyBackend
    unfused = NumpyBackend().execute(program, buffers)
    fused = NumpyBackend().execute(fuse.build_plan(program).program, buffers)
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)
    fj.realize(*outs)


def test_reduction_over_leading_axis_broadcast_back_is_two_kernels():
    """Past ``cost.OUTER_BROADCAST_MAX`` (256) reduced elements; 256 of them are one kernel."""
    assert fj.plan((lambda x: x - x.sum(0, keepdims=True))(t(256, 32))).num_launches == 1
    x = t(257, 32)
    plan = fj.plan(x - x.sum(0, keepdims=True))
    assert plan.num_launches == 2
    text = plan.explain()
    assert "broadcast_back_inner_only" in text
    assert "only reductions over trailing axes fuse with their broadcast" in text
    [boundary] = [b for b in plan.boundaries if b[3] != "requested_output"]
    assert boundary[3] == "broadcast_back_inner_only"


def test_full_sum_splits_in_one_launch():
    x = fj.zeros((2 ** 24,), np.float32) + 1
    plan = fj.plan(fj.sum(x))
    assert len(plan.regions) == 1
    assert plan.num_launches == 1 and [k.stage for k in plan.kernels] == [""]
    k = plan.regions[0]
    assert k.kind == "split_reduction" and "split" not in k.attrs  # the emitter's choice
    assert "kind=split_reduction" in str(plan)
    assert "one launch: partials, then the last program of each row block" in plan.explain()


def test_column_sums_of_tall_matrix_split_but_rows_do_not():
    tall = fj.zeros((2 ** 20, 64), np.float32) * 2
    assert fj.plan(fj.sum(tall, axis=0)).regions[0].kind == "split_reduction"
    assert fj.plan(fj.sum(tall, axis=1)).regions[0].kind == "inner_reduction"
    # argmax does not split, nor does a reduce-then-broadcast region
    assert fj.plan(fj.argmax(fj.zeros((2 ** 17,), np.float32))).num_launches == 1
    big = fj.zeros((2, 2 ** 17), np.float32) + 1
    assert fj.plan(fj.softmax(big)).num_launches == 1


def test_split_thresholds_are_documented_numbers():
    assert cost.should_split(1, 2 ** 24) and cost.should_split(64, 2 ** 20)
    assert not cost.should_split(4096, 1024) and not cost.should_split(1, 2 ** 15)


def test_materialized_reduction_feeding_other_domain_records_reason():
    x = t(8, 16)
    s = x.sum(1, keepdims=True)             # inner reduction
    y = (x / s).sum(0)                       # needs s complete, reduces over another axis
    plan = fj.plan(y)
    assert plan.num_launches == 2
    reasons = [b for b in plan.boundaries if b[3] != "requested_output"]
    assert reasons and all(b[4] for b in reasons)
    _check_values([y])


def test_cheap_pointwise_is_recomputed_not_materialized():
    x = t(8, 16)
    u = x * 2                                # cheap, free: recomputed in each consumer
    a, b = u.sum(0), u.sum(1)
    plan = fj.plan(a, b)
    assert plan.num_launches == 2
    assert not [b for b in plan.boundaries if b[3] != "requested_output"]
    assert plan.recomputed and "recomputed" in plan.explain()
    _check_values([a, b])


def test_expensive_value_with_several_domains_is_materialized():
    x = t(8, 16)
    u = fj.exp(fj.sin(x) * fj.cos(x))        # expensive: written once, read twice
    a, b = u.sum(0), u.sum(1)
    plan = fj.plan(a, b)
    written = [bd for bd in plan.boundaries if bd[3] != "requested_output"]
    assert len({bd[0] for bd in written}) == 1 and not plan.recomputed
    assert plan.num_launches == 2
    _check_values([a, b])


def test_region_limits_are_respected():
    x = t(4, 4)
    ys = [x * float(i) for i in range(40)]     # 40 outputs, 40 instrs each pointwise
    y = ys[0]
    for z in ys[1:]:
        y = y + z
    deep = x
    for i in range(600):
        deep = deep + float(i % 7)
    plan = fj.plan(deep)
    assert all(len(k.body) <= cost.MAX_REGION_INSTRS for k in plan.regions)
    assert plan.num_launches == 3
    assert any(b[3] == "region_size" for b in plan.boundaries)
    many = [t(4, 4) for _ in range(20)]
    total = many[0]
    for m in many[1:]:
        total = total + m
    plan = fj.plan(total)
    assert all(len(k.params) <= cost.MAX_REGION_INPUTS for k in plan.regions)
    assert any(b[3] == "region_inputs" for b in plan.boundaries)
    _check_values([deep, total, y])


def test_kernel_names_are_descriptive_unique_identifiers():
    import re
    x = t(8, 16)
    plan = fj.plan(fj.softmax(x), fj.softmax(x.T), x.sum(0), x.sum(1) * 3)
    names = [k.name for k in plan.regions]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(NAME, n) for n in names)
    assert names[0].startswith("softmax_f32_8x16")


def test_inner_names_are_the_original_ssa_names_and_params_the_outer_args():
    x = t(8, 16)
    program, _, _ = lower([fj.softmax(x)._node])
    plan = fuse.build_plan(program)
    [k] = plan.regions
    assert [i.name for i in k.body] == [i.name for i in program.body]
    assert [p.name for p in k.params] == list(k.args)
    assert k.results == k.yields


def test_plan_api_fields():
    x = t(8, 16)
    plan = fj.plan(fj.softmax(x), fj.sum(x, 0))
    assert isinstance(plan, fj.Plan)
    for launch in plan.kernels:
        assert launch.kernel in plan.program.kernels
        assert launch.kind == launch.kernel.kind
        assert launch.inputs == launch.kernel.args and launch.outputs == launch.kernel.results
        assert launch.domain == region_domain(launch.kernel) or launch.kind == "split_reduction"
    assert str(plan) == str(plan.program)
    assert "kernel @softmax_f32_8x16" in plan.explain()


def test_plan_cache_skips_the_pass_for_same_structure():
    fuse.clear_cache()
    before = fuse.stats["fusion_runs"]
    shape = (7, 9)
    for _ in range(3):
        x = fj.asarray(RNG.standard_normal(shape).astype(np.float32))
        y = fj.softmax(x * 3)
        y.realize()
        fj.plan(fj.softmax(x * 3))
    assert fuse.stats["fusion_runs"] - before == 1
    hits = fuse.stats["cache_hits"]
    prog = fj.parse(fj.dump(fj.softmax(x * 3)))
    prog.run(x.numpy(), 3.0)
    prog.run(x.numpy() + 1, 4.0)
    assert fuse.stats["cache_hits"] >= hits + 1


def test_fusion_log(caplog):
    logger = logging.getLogger("fusejit.fusion")
    old = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="fusejit.fusion"):
            program, _, _ = lower([(t(300, 16) - t(300, 16).sum(0, keepdims=True))._node])
            fuse.build_plan(program)
    finally:
        logger.setLevel(old)
    text = caplog.text
    assert "joined" in text and "broadcast_back_inner_only" in text and "plan for @main" in text


# -- user-edited fused text ----------------------------------------------------------------

SOFTMAX_TWO = """\
# fusejit ir v1
func @main(%x: f32[4,8]) -> f32[4,8] {
  %0 = kernel @rowmax(%x) kind=inner_reduction -> f32[4,1] {
  ^(%x: f32[4,8]):
    %0 = max %x axes=[1] keepdims : f32[4,1]
    yield %0
  }
  %4 = kernel @rest(%x, %0) kind=pointwise -> f32[4,8] {
  ^(%x: f32[4,8], %0: f32[4,1]):
    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = sub %x, %1 : f32[4,8]
    %3 = exp %2 : f32[4,8]
    %s = sum %3 axes=[1] keepdims : f32[4,1]
    %e = expand %s shape=[4,8] : f32[4,8]
    %4 = div %3, %e : f32[4,8]
    yield %4
  }
  return %4
}
"""


def _softmax_np(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_edited_regions_are_used_as_written_and_kinds_corrected():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    prog = fj.parse(SOFTMAX_TWO)
    plan = fuse.plan_for(prog)
    assert [k.name for k in plan.regions] == ["rowmax", "rest"]
    assert plan.regions[1].kind == "inner_reduction"  # the block now reduces: kind follows
    assert plan.source == "user"
    np.testing.assert_allclose(prog.run(x)[0], _softmax_np(x), rtol=1e-6)


def test_edited_merge_split_and_loose_instrs():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    # merge: the two blocks of SOFTMAX_TWO into one block by hand
    merged = fj.parse(SOFTMAX_TWO.replace("""    yield %0
  }
  %4 = kernel @rest(%x, %0) kind=pointwise -> f32[4,8] {
  ^(%x: f32[4,8], %0: f32[4,1]):
""", "").replace("%0 = kernel @rowmax(%x) kind=inner_reduction -> f32[4,1]",
                  "%4 = kernel @merged(%x) kind=inner_reduction -> f32[4,8]"))
    plan = fuse.plan_for(merged)
    assert [k.name for k in plan.regions] == ["merged"] and plan.num_launches == 1
    np.testing.assert_allclose(merged.run(x)[0], _softmax_np(x), rtol=1e-6)
    # split: instructions taken out of the kernel blocks are fused greedily again
    loose = SOFTMAX_TWO.replace("""  %4 = kernel @rest(%x, %0) kind=pointwise -> f32[4,8] {
  ^(%x: f32[4,8], %0: f32[4,1]):
""", "").replace("""    yield %4
  }
  return %4""", "  return %4")
    prog = fj.parse(loose)
    plan = fuse.plan_for(prog)
    assert plan.source == "mixed" and plan.num_launches == 2
    assert plan.regions[0].name == "rowmax"
    np.testing.assert_allclose(prog.run(x)[0], _softmax_np(x), rtol=1e-6)


def test_moving_an_op_between_blocks_runs():
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    moved = SOFTMAX_TWO.replace("""    %0 = max %x axes=[1] keepdims : f32[4,1]
    yield %0
  }""", """    %0 = max %x axes=[1] keepdims : f32[4,1]
    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = sub %x, %1 : f32[4,8]
    yield %0
  }""").replace("""    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = sub %x, %1 : f32[4,8]
    %3 = exp""", """    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = sub %x, %1 : f32[4,8]
    %3 = exp""")
    prog = fj.parse(moved)
    np.testing.assert_allclose(prog.run(x)[0], _softmax_np(x), rtol=1e-6)


ILLEGAL = """\
# fusejit ir v1
func @main(%x: f32[4,8]) -> f32[8,4] {
  %2 = kernel @bad(%x) kind=pointwise -> f32[8,4] {
  ^(%x: f32[4,8]):
    %0 = sum %x axes=[1] keepdims : f32[4,1]
    %1 = expand %0 shape=[4,8] : f32[4,8]
    %2 = permute %1 perm=[1,0] : f32[8,4]
    yield %2
  }
  return %2
}
"""


def test_illegal_region_is_an_ir_verify_error_with_position_and_reason():
    with pytest.raises(fj.IRVerifyError) as info:
        fj.parse(ILLEGAL).run(np.zeros((4, 8), np.float32))
    err = info.value
    assert err.line == 3 and err.column == 3  # the kernel block's line
    assert "permute moves a value computed from a reduction" in str(err)
    assert "@bad" in str(err)


def test_plan_for_rejects_illegal_kernel_built_in_code():
    from fusejit.ir.parser import parse_unverified
    program = parse_unverified(ILLEGAL)[0]   # skips the verifier: plan_for must catch it
    with pytest.raises(fj.IRVerifyError, match=r"@bad cannot be one kernel: %2 = permute moves"):
        fuse.plan_for(program)


def test_region_check_hook():
    assert fuse.region_check(fj.parse(SOFTMAX_TWO).kernels[0]) is None
    from fusejit.ir.parser import parse_unverified
    program = parse_unverified(ILLEGAL)[0]
    assert "moves a value computed from a reduction" in fuse.region_check(program.kernels[0])


CANONICAL = ONE_KERNEL + [
    ("leading-axis broadcast back", lambda: [X - X.sum(0, keepdims=True)]),
    ("full sum split", lambda: [fj.sum(X)]),
    ("several domains", lambda: [fj.sum(X, 0), fj.softmax(X), X.T * 2]),
]


@pytest.mark.parametrize("name,build", CANONICAL, ids=[c[0] for c in CANONICAL])
def test_fused_text_round_trips_and_runs(name, build):
    outs = build()
    plan = fj.plan(*outs)
    text = str(plan)
    again = fj.parse(text)
    assert str(again) == text
    program, buffers, _ = lower([o._node for o in outs])
    got = again.run(*buffers)
    from fusejit.runtime.numpy_backend import NumpyBackend
    for a, b in zip(got, NumpyBackend().execute(program, buffers)):
        np.testing.assert_array_equal(a, b)


def test_fusejit_log_env_switch_logs_to_stderr():
    import os
    import subprocess
    import sys
    from pathlib import Path
    path = Path(__file__).parent / "fusion" / "leading_axis.fir"
    env = dict(os.environ, FUSEJIT_LOG="fusion")
    run = subprocess.run([sys.executable, "-m", "fusejit", "plan", str(path)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0
    assert "fusejit.fusion: %csb not fused into" in run.stderr
    assert "broadcast_back_inner_only" in run.stderr


@pytest.mark.parametrize("value, kernels", [
    ("kernels", True), ("fusion, kernels", True), ("all", True), ("fusion", False), ("", False),
])
def test_fusejit_log_kernels_switch(monkeypatch, value, kernels):
    """FUSEJIT_LOG reads like the fusion switch: comma-separated, spaces allowed, 'all'."""
    from fusejit.runtime import kernel_cache
    monkeypatch.setenv("FUSEJIT_LOG", value)
    assert kernel_cache.log_enabled("kernels") is kernels


def test_planning_is_near_linear():
    import time
    x = t(8, 32)
    h = x
    for i in range(150):                      # ~12 instructions per step, 1800 in all
        h = fj.softmax(h * (1.0 + i % 3)) + h.mean(0, keepdims=True)
    program, _, _ = lower([h._node])
    start = time.perf_counter()
    plan = fuse.build_plan(program)
    elapsed = time.perf_counter() - start
    assert len(program.body) > 1500 and plan.num_launches >= 150
    assert elapsed < 2.0, elapsed            # bench/bench_fusion.py: 10,000 nodes in ~0.5 s
