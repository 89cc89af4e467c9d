"""Fusion at plan time (ADR 0024): fused groups compute exactly what their ops compute one by one,
keep in-place semantics and listeners' view of every op, and their kernels are cached on disk."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import graphview as gv
from graphview import fused_kernels, fusion
from graphview.execution import executor_of
from optable import all_samples, build, case_id

FUSABLE = [case for case in all_samples() if case[0] in {"add", "sub", "mul", "div", "pow", "maximum", "minimum",
                                                       "neg", "abs", "square", "sign", "reciprocal", "exp", "log",
                                                       "sqrt", "sin", "cos", "tanh", "relu", "sigmoid", "gelu",
                                                       "step", "gelu_derivative", "eq", "ne", "lt", "le", "gt",
                                                       "ge", "where", "cast"}]


@pytest.fixture
def unfused():
    gv.config.fusion = False
    yield
    gv.config.fusion = True


def run_both(graph, feeds, outputs):
    """The outputs with fusion on and off, and the fused plan."""
    fused = graph.output(feeds, outputs)
    plan, _ = executor_of(graph).plan(feeds, [o.name for o in outputs])
    gv.config.fusion = False
    try:
        plain = graph.output(feeds, outputs)
    finally:
        gv.config.fusion = True
    return fused, plain, plan


def test_the_fusable_ops_are_the_ones_listed():
    names = {case[0] for case in FUSABLE}
    assert len(names) == 31
    g = gv.Graph()
    x = g.placeholder("x", (3,))
    assert fusion.scalar_of(g.nn.relu(x).node) == "relu_scalar"
    assert fusion.scalar_of(g.math.cast(x, "float32").node) == "to_float32_scalar"
    assert fusion.scalar_of(g.nn.leaky_relu(x).node) is None        # an attribute: not fused
    assert fusion.scalar_of(g.math.sum(x).node) is None


@pytest.mark.parametrize("case", FUSABLE, ids=case_id)
def test_each_fusable_op_fused_with_its_consumer_equals_its_unfused_result(case):
    name, _, sample = case
    g, y, feeds = build(name, sample)
    # A consumer that changes no value, so the pair fuses: where(y, y, y) for bool, y * 1 otherwise.
    z = g.math.where(y, y, y) if y.dtype == np.bool_ else g.math.mul(y, 1)
    fused, plain, plan = run_both(g, feeds, [z])
    np.testing.assert_array_equal(fused[z.name], plain[z.name])
    assert fused[z.name].dtype == plain[z.name].dtype
    flat = all(a.flags.c_contiguous and (a.shape == y.shape or a.size == 1) for a in feeds.values())
    if None not in y.shape and y.node.kind is gv.ARRAY and fusion.scalar_of(y.node):
        assert plan.fused == (1 if flat else 0), g.explain([z])     # broadcast or strided inputs: unfused


def test_relu_of_a_times_b_plus_c_is_one_kernel_and_exact():
    g = gv.Graph("fma-free")
    a, b, c = (g.placeholder(n, (4, 250)) for n in "abc")
    y = g.nn.relu(a * b + c)
    r = np.random.default_rng(0)
    feeds = {n: r.normal(size=(4, 250)) for n in "abc"}
    fused, plain, plan = run_both(g, feeds, [y])
    assert np.array_equal(fused[y.name], np.maximum(feeds["a"] * feeds["b"] + feeds["c"], 0))   # no FMA
    assert np.array_equal(fused[y.name], plain[y.name]) and plan.fused == 2 and len(plan.unlistened) == 1
    line = [l for l in g.explain([y]).splitlines() if l.split()[0] == "fused"]
    assert len(line) == 1 and all(op in line[0] for op in ("mul", "add", "relu")), g.explain([y])


def test_groups_fuse_over_whole_arrays_and_single_elements_and_run_unfused_over_broadcast_or_strided_inputs():
    g = gv.Graph()
    x = g.placeholder("x", (6, 5), "float32")
    row = g.placeholder("row", (5,), "float32")
    y = g.math.exp(g.math.tanh(x) * row - 0.5)          # row broadcasts: the strided loop was 2-5x slower
    z = g.math.exp(g.math.tanh(x) * 2.0 - 0.5)           # a single element: fused
    base = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
    for feeds in ({"x": base.T, "row": base[:, 0]}, {"x": np.ascontiguousarray(base.T), "row": base[:, 0]}):
        fused, plain, plan = run_both(g, feeds, [y])
        assert np.array_equal(fused[y.name], plain[y.name]) and plan.fused == 0
        fused, plain, plan = run_both(g, feeds, [z])
        assert np.array_equal(fused[z.name], plain[z.name]) and fused[z.name].dtype == np.float32
        assert plan.fused == (3 if feeds["x"].flags.c_contiguous else 0)


def test_intermediates_others_need_are_not_fused_and_requested_ones_are_kept():
    g = gv.Graph()
    x = g.placeholder("x", (8,))
    t = g.math.exp(x)
    y, z = g.nn.relu(t - 1), g.math.sum(t)         # t also feeds a reduction: it must be stored
    fused, plain, plan = run_both(g, {"x": np.linspace(-2, 2, 8)}, [y, z])
    assert plan.fused == 1                         # sub and relu fuse; exp stays
    for name in (y.name, z.name):
        assert np.array_equal(fused[name], plain[name])
    fused, _, plan = run_both(g, {"x": np.linspace(-2, 2, 8)}, [y, t])
    assert plan.fused == 1 and np.array_equal(fused[t.name], np.exp(np.linspace(-2, 2, 8)))


def test_a_member_is_not_moved_past_an_in_place_write_of_its_input():
    g = gv.Graph()
    a = g.placeholder("a", (2,))
    base = g.math.add(a, 0.0)
    doubled = base * 2.0                           # reads base's old value
    written = g.add_(g.create_view(base, gv.all()), 1.0)   # then base is written in place
    result = doubled + written
    fused, plain, plan = run_both(g, {"a": np.array([1.0, 2.0])}, [result])
    assert np.array_equal(fused[result.name], [4.0, 7.0]) and np.array_equal(plain[result.name], [4.0, 7.0])
    assert "writes base's buffer" in g.explain([result]) or "in-place" in g.explain([result])


def test_gradient_graphs_fuse_and_agree():
    g = gv.Graph()
    x = g.placeholder("x", (16, 8))
    w = g.var("w", np.random.default_rng(2).normal(size=(8, 4)))
    g.set_loss(g.math.sum(g.math.square(g.math.tanh(x @ w) * 0.5 + 1.0)))
    feeds = {"x": np.random.default_rng(3).normal(size=(16, 8))}
    fused = g.calculate_gradients(feeds, ["w"])["w"]
    gv.config.fusion = False
    try:
        plain = g.calculate_gradients(feeds, ["w"])["w"]
    finally:
        gv.config.fusion = True
    assert np.array_equal(fused, plain)
    gradient = g.gradient_graph(["w"])
    plan, _ = executor_of(gradient.graph).plan(feeds, [gradient.gradients["w"].name])
    assert plan.fused >= 1


class Recorder(gv.Listener):
    def __init__(self):
        self.ops = []

    def pre_op(self, context, node, inputs):
        self.ops.append(node.op)


def test_listeners_see_every_member_op():
    g = gv.Graph()
    a = g.placeholder("a", (5,))
    y = g.nn.relu(g.math.exp(a) * 2.0 + 1.0)
    recorder = Recorder()
    g.output({"a": np.zeros(5)}, [y], listeners=[recorder])
    assert recorder.ops == ["exp", "mul", "add", "relu"]


def test_the_validation_listener_catches_a_mutating_op_inside_a_would_be_fused_chain():
    def mutate(x, out):
        out[...] = x
        x[0] = 99.0                                # the bug the listener exists for

    bad = gv.defop("fusion_test_mutates", shape=lambda x: x, kernel=mutate, reference=lambda x: x)
    g = gv.Graph()
    a = g.placeholder("a", (4,))
    y = g.nn.relu(bad(a * 2.0) + 1.0)
    assert g.output({"a": np.ones(4)}, [y])[y.name].shape == (4,)
    with pytest.raises(gv.InplaceModificationError, match="fusion_test_mutates"):
        g.output({"a": np.ones(4)}, [y], listeners=[gv.NonInplaceValidationListener()])


def test_unfused_when_switched_off(unfused):
    g = gv.Graph()
    a = g.placeholder("a", (3,))
    y = g.nn.relu(a * 2.0)
    plan, _ = executor_of(g).plan({"a": np.ones(3)}, [y.name])
    assert plan.fused == 0 and "fused" not in g.explain([y])


def test_the_environment_variable_turns_fusion_off():
    code = "import graphview as gv; print(gv.config.fusion)"
    for value, expected in (("0", "False"), ("off", "False"), ("1", "True")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=dict(os.environ, GRAPHVIEW_FUSION=value), check=True)
        assert done.stdout.strip() == expected


def test_config_refuses_bad_settings():
    with pytest.raises(gv.GraphviewError, match="fusion must be True or False"):
        gv.config.fusion = "yes"
    with pytest.raises(gv.GraphviewError, match="no setting 'fuse'"):
        gv.config.fuse = True
    with pytest.raises(gv.GraphviewError, match="max_cached_kernels must be an int >= 1"):
        gv.config.max_cached_kernels = 0


SECOND_PROCESS = """
import numpy as np, graphview as gv
from graphview import fused_kernels
g = gv.Graph()
a = g.placeholder("a", (7,))
y = g.math.sqrt(g.math.abs(a * 3.0 - 1.5) + 0.25)
out = g.output({"a": np.linspace(0, 1, 7)}, [y])[y.name]
assert np.array_equal(out, np.sqrt(np.abs(np.linspace(0, 1, 7) * 3.0 - 1.5) + 0.25))
stats = [kernel.stats for kernel in fused_kernels.loaded().values()]
print(sum(sum(s.cache_hits.values()) for s in stats), sum(sum(s.cache_misses.values()) for s in stats))
"""


def test_a_second_process_loads_the_kernel_from_the_disk_cache(tmp_path):
    env = dict(os.environ, GRAPHVIEW_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", SECOND_PROCESS], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["0", "1"]          # compiled once ...
    second = subprocess.run([sys.executable, "-c", SECOND_PROCESS], capture_output=True, text=True, env=env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["1", "0"]         # ... and loaded from the cache by the next process
    assert len(list((tmp_path / "fused").glob("gv_fused_*.py"))) == 1


def test_an_unwritable_cache_folder_warns_once_and_compiles_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(gv.config, "cache_dir", str(blocker))
    g = gv.Graph()
    a = g.placeholder("a", (3,))
    ys = [g.math.exp(a * float(k) + 1.0) for k in (2, 3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for y in ys:
            assert np.array_equal(g.output({"a": np.ones(3)}, [y])[y.name], plain_exp(y, g))
    messages = [str(w.message) for w in caught if "cannot write generated kernels" in str(w.message)]
    assert len(messages) == 1 and str(blocker) in messages[0]


def plain_exp(y, g):
    gv.config.fusion = False
    try:
        return g.output({"a": np.ones(3)}, [y])[y.name]
    finally:
        gv.config.fusion = True


def test_the_cache_keeps_at_most_the_configured_number_of_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(gv.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(gv.config, "max_cached_kernels", 2)
    g = gv.Graph()
    a = g.placeholder("a", (3,))
    chains = [g.math.neg(a * 2.0), g.math.exp(a * 2.0), g.math.sin(a * 2.0), g.math.cos(a * 2.0)]
    for y in chains:
        g.output({"a": np.ones(3)}, [y])
    assert len(list((tmp_path / "fused").glob(f"{fused_kernels.PREFIX}*.py"))) == 2


def test_large_outputs_are_fused_in_pieces_small_enough_for_llvm_to_vectorize():
    g = gv.Graph()
    x = g.placeholder("x", (None,))
    steps = [lambda v: v + 1.0, lambda v: v * 0.5, g.math.sin, lambda v: v - 0.25, g.math.tanh]
    y = x
    for i in range(20):
        y = steps[i % 5](y)
    found = fusion.groups(executor_of(g).schedule([y.name]), [y.name])
    assert sum(len(group.members) for group in found) == 20 and len(found) >= 2
    for group in found:
        cost = sum(fusion.HEAVY_COST if fusion.scalar_of(m) in fusion.HEAVY else 1 for m in group.members)
        assert cost <= fusion.COST_BUDGET
    small = gv.Graph()
    z = small.placeholder("z", (16,))
    for i in range(20):
        z = (small.math.tanh, small.math.neg)[i % 2](z)
    assert len(fusion.groups(executor_of(small).schedule([z.name]), [z.name])) == 1


def test_explain_lists_no_group_that_a_bias_row_keeps_from_fusing():
    g = gv.Graph()
    h, b = g.placeholder("h", (None, 3)), g.placeholder("b", (3,))
    y = g.math.tanh(h + b)
    assert "fused" not in g.explain([y])
    z = g.math.tanh(h * 2.0)
    assert any(line.split()[0] == "fused" for line in g.explain([z]).splitlines())


# --- a trailing whole-array reduction -----------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 128, 1000, 2 ** 18 + 7], ids=["one", "one block", "blocks", "threaded"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_a_whole_sum_or_mean_after_a_group_sums_its_values_unstored_and_bit_for_bit(reduction, dtype, size):
    g = gv.Graph()
    a, b = g.placeholder("a", (size,), dtype), g.placeholder("b", (size,), dtype)
    loss = getattr(g.math, reduction)(g.nn.relu(a * b + 0.5))
    rng = np.random.default_rng(size)
    feeds = {"a": rng.normal(size=size).astype(dtype), "b": rng.normal(size=size).astype(dtype)}
    fused, plain, plan = run_both(g, feeds, [loss])
    assert plan.fused == 3                          # mul, add and relu folded into the sum's kernel
    assert fused[loss.name].dtype == np.dtype(dtype) and fused[loss.name].shape == ()
    assert fused[loss.name].tobytes() == plain[loss.name].tobytes()
    reference = getattr(np, reduction)(np.maximum(feeds["a"].astype(np.float64) * feeds["b"] + 0.5, 0))
    np.testing.assert_allclose(fused[loss.name], reference, rtol=1e-5 if dtype == "float32" else 1e-12)
    assert f"fused    {loss.name} in one generated kernel, 4 ops: mul " in g.explain([loss])


def test_a_single_op_before_a_sum_fuses_with_it_and_keepdims_keeps_the_shape():
    g = gv.Graph()
    x = g.placeholder("x", (4, 5))
    total = g.math.sum(g.math.square(x), axis=(0, 1), keepdims=True)
    fused, plain, plan = run_both(g, {"x": np.arange(20.0).reshape(4, 5)}, [total])
    assert plan.fused == 1 and fused[total.name].shape == (1, 1)
    assert np.array_equal(fused[total.name], plain[total.name]) and fused[total.name][0, 0] == 2470.0


def test_partial_reductions_requested_values_and_integer_values_do_not_fuse_a_reduction():
    g = gv.Graph()
    x = g.placeholder("x", (3, 4))
    rows = g.math.sum(g.math.exp(x) * 2.0, axis=1)                  # not the whole array
    kept = g.math.exp(x) + 1.0
    whole = g.math.sum(kept)                                        # kept is also requested
    counted = g.math.sum(g.math.cast(x * 3.0, "int64") + 1)         # integer values
    feeds = {"x": np.linspace(-1, 1, 12).reshape(3, 4)}
    fused, plain, plan = run_both(g, feeds, [rows, kept, whole, counted])
    groups = executor_of(g).groups([rows.name, kept.name, whole.name, counted.name])
    assert groups and all(group.reduction is None for group in groups)
    for name in (rows.name, kept.name, whole.name, counted.name):
        assert np.array_equal(fused[name], plain[name])


def test_a_reduction_is_not_fused_past_an_in_place_write_of_an_input_of_the_group():
    g = gv.Graph()
    a = g.placeholder("a", (3,))
    base = g.math.add(a, 0.0)
    values = base * 2.0                                             # reads base before the write
    written = g.add_(g.create_view(base, gv.all()), 10.0)
    total = g.math.sum(values)
    result = total + g.math.sum(written)
    fused, plain, _ = run_both(g, {"a": np.array([1.0, 2.0, 3.0])}, [result])
    assert fused[result.name] == plain[result.name] == 12.0 + 36.0


def test_a_group_reading_a_value_whose_size_is_known_only_at_run_time_runs_unfused_and_right():
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    rows = g.create_view(x, g.placeholder("rows", (7,), "int64"))    # (None, 6) until it runs
    weights = g.constant("w", np.linspace(0.5, 2.0, 24).reshape(4, 6))
    total = g.math.sum(rows * weights)                                # (4, 6) by broadcasting
    shifted = g.math.exp(rows * weights) + 1.0
    base = np.arange(24.0).reshape(4, 6)
    feeds = {"x": base, "rows": gv.interval(0, 4)}
    fused, plain, plan = run_both(g, feeds, [total, shifted])
    assert plan.fused == 0
    assert fused[total.name] == plain[total.name] == np.sum(base * np.linspace(0.5, 2.0, 24).reshape(4, 6))
    assert np.array_equal(fused[shifted.name], plain[shifted.name])
