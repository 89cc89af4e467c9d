"""Gradient checks: SameDiff's semantics (relative/absolute errors, masks, subsets), fast mode, reentrancy,
activations, float32 graphs, the validation listener during the analytic pass, and faults they must catch."""
import math

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.gradcheck import Failure, check_op, relative_error

R = np.random.default_rng(3)


def _square_kernel(x, out):
    np.multiply(x, x, out=out)


def _wrong_square_vjp(g, out, x):
    """2x everywhere except element [1, 2], where the rule forgets the 2."""
    mask = np.full(x.shape, 2.0)
    mask[1, 2] = 1.0
    return (g * x * mask,)




def _writes_input(x, out):
    np.multiply(x, x, out=out)
    x[0, 0] = 7.0


_CALLS = [0]


def _drifting_kernel(x, out):
    _CALLS[0] += 1
    np.multiply(x, 1.0 + 1e-3 * _CALLS[0], out=out)


@pytest.fixture(scope="module", autouse=True)
def faulty_ops():
    """Deliberately faulty ops, registered for this module only (the op table never sees them)."""
    global wrong_square, tiny_error_square, sneaky_square, flaky_identity
    names = ["test_wrong_square", "test_tiny_error_square", "test_sneaky_square", "test_drifting",
             "test_flaky_identity"]
    wrong_square = gv.defop(names[0], shape=lambda x: x, kernel=_square_kernel, vjp=_wrong_square_vjp)
    tiny_error_square = gv.defop(names[1], shape=lambda x: x, kernel=_square_kernel,
                                 vjp=lambda g, out, x: (g * x * 2.0 + 1e-9,))
    sneaky_square = gv.defop(names[2], shape=lambda x: x, kernel=_writes_input, vjp=lambda g, out, x: (g * x * 2.0,))
    drifting = gv.defop(names[3], shape=lambda x: x, kernel=_drifting_kernel, differentiable=False)
    flaky_identity = gv.defop(names[4], shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x),
                              vjp=lambda g, out, x: (drifting(g),))
    yield
    for name in names:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


def mlp(dtype=np.float64):
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, 6), dtype)
    y = g.placeholder("y", (None,), "int64")
    w1 = g.var("w1", R.normal(size=(6, 5)).astype(dtype))
    b1 = g.var("b1", R.normal(size=5).astype(dtype))
    w2 = g.var("w2", R.normal(size=(5, 3)).astype(dtype))
    g.set_loss(g.loss.softmax_cross_entropy(g.nn.tanh(x @ w1 + b1) @ w2, y, name="loss"))
    return g, {"x": R.normal(size=(4, 6)).astype(dtype), "y": R.integers(0, 3, 4)}


def with_op(op, shape=(3, 4)):
    g = gv.Graph()
    a = g.var("a", R.uniform(0.5, 1.5, shape))
    b = g.var("b", R.uniform(0.5, 1.5, shape))
    g.set_loss(g.math.sum(op(a, name="suspect") * g.math.sin(b)))
    return g


def test_a_correct_model_passes_and_the_report_lists_every_variable():
    g, feeds = mlp()
    report = gv.check_gradients(g, feeds)
    assert report.passed and bool(report), str(report)
    assert list(report.variables) == ["w1", "b1", "w2"]
    assert report.variables["w1"].checked == 30 and report.variables["w1"].passed == 30
    assert report.variables["w1"].max_rel_error < 1e-5
    text = str(report)
    assert "PASSED" in text and "max rel error" in text and "w2" in text


def test_a_wrong_gradient_rule_fails_on_the_right_variable_and_element():
    report = gv.check_gradients(with_op(wrong_square), {})
    assert not report.passed
    assert {f.variable for f in report.failures} == {"a"}
    [failure] = report.failures
    assert failure.index == (1, 2) and failure.kind == "gradient"
    assert failure.analytic == pytest.approx(failure.numeric / 2, rel=1e-6)
    assert failure.rel_error == pytest.approx(1 / 3, rel=1e-6)
    assert report.variables["a"].failed == 1 and report.variables["b"].failed == 0
    assert "a[1, 2] FAILED: grad=" in str(report) and "FAILED" in str(report).splitlines()[0]


def test_relative_error_is_zero_when_both_are_zero_and_small_absolute_errors_pass():
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(1.0, 0.0) == 1.0
    assert relative_error(3.0, 1.0) == 0.5
    g = with_op(tiny_error_square)
    g.set_value("a", np.full((3, 4), 1e-6))
    assert gv.check_gradients(g, {}, wrt=["a"]).passed
    strict = gv.check_gradients(g, {}, wrt=["a"], min_abs_error=1e-12)
    assert not strict.passed and len(strict.failures) == 12


def test_nan_and_inf_gradients_are_recorded_failures():
    g = gv.Graph()
    x = g.var("x", np.array([0.0, 1.0, 4.0]))
    g.set_loss(g.math.sum(g.math.sqrt(x)))
    report = gv.check_gradients(g, {})
    [failure] = report.failures
    assert failure.kind == "nonfinite" and failure.index == (0,) and math.isinf(failure.analytic)
    assert math.isnan(report.variables["x"].max_rel_error)
    assert report.variables["x"].passed == 2


def test_wrt_skip_mask_and_placeholders():
    g, feeds = mlp()
    report = gv.check_gradients(g, feeds, wrt=[g["w1"], "x", "b1"], skip=[g["b1"]])
    assert list(report.variables) == ["w1", "x"] and report.variables["x"].checked == 24 and report.passed
    mask = np.zeros((6, 5), bool)
    mask[2, 1] = mask[4, 4] = True
    masked = gv.check_gradients(g, feeds, wrt=g["w1"], mask={g["w1"]: mask})
    assert masked.variables["w1"].checked == 2
    with pytest.raises(gv.GraphviewError, match="mask of 'w1' has shape \\(2,\\).*\\(6, 5\\)"):
        gv.check_gradients(g, feeds, wrt=["w1"], mask={"w1": np.ones(2, bool)})
    with pytest.raises(gv.DTypeError, match="'y'.*int64"):
        gv.check_gradients(g, feeds, wrt=["y"])


def test_max_per_param_subsets_random_with_seed_and_every_n():
    g = with_op(wrong_square, shape=(10, 10))
    first = gv.check_gradients(g, {}, wrt=["a"], max_per_param=30, seed=1)
    again = gv.check_gradients(g, {}, wrt=["a"], max_per_param=30, seed=1)
    other = gv.check_gradients(g, {}, wrt=["a"], max_per_param=30, seed=2)
    assert first.variables["a"].checked == 30
    assert [f.index for f in first.failures] == [f.index for f in again.failures]
    every = gv.check_gradients(g, {}, wrt=["a"], max_per_param=10, subset="every_n")
    assert every.variables["a"].checked == 10
    everything = gv.check_gradients(g, {}, wrt=["a"])
    assert [f.index for f in everything.failures] == [(1, 2)]
    assert len(first.failures) + len(other.failures) <= 2
    with pytest.raises(gv.GraphviewError, match="subset must be one of random, every_n"):
        gv.check_gradients(g, {}, subset="first")


def test_exit_on_first_failure_stops_at_one():
    g = with_op(tiny_error_square)
    report = gv.check_gradients(g, {}, min_abs_error=0.0, max_rel_error=0.0, exit_on_first_failure=True)
    assert len(report.failures) == 1 and sum(v.checked for v in report.variables.values()) == 1


def test_fast_mode_checks_one_projection_per_variable_and_explains_a_failure():
    g, feeds = mlp()
    fast = gv.check_gradients(g, feeds, fast=True)
    assert fast.passed and fast.mode == "fast"
    assert all(v.checked == 1 for v in fast.variables.values())
    report = gv.check_gradients(with_op(wrong_square), {}, fast=True)
    kinds = [(f.variable, f.kind, f.index) for f in report.failures]
    assert kinds == [("a", "fast", None), ("a", "gradient", (1, 2))]
    assert report.variables["a"].checked == 13 and report.variables["b"].checked == 1
    assert "a (projection) FAILED" in str(report)


def test_progress_reports_every_comparison_and_grows_when_fast_mode_reruns():
    calls = []
    g, feeds = mlp()
    report = gv.check_gradients(g, feeds, max_per_param=7, progress=lambda done, total: calls.append((done, total)))
    checked = sum(v.checked for v in report.variables.values())
    assert calls == [(done, checked) for done in range(checked + 1)] and checked == 7 + 5 + 7
    calls.clear()
    gv.check_gradients(with_op(wrong_square), {}, fast=True, progress=lambda *c: calls.append(c))
    assert calls[0] == (0, 2) and calls[-1] == (14, 14)   # a's projection fails: 12 more elements
    assert [done for done, _ in calls] == list(range(15))


def test_gradients_that_differ_between_two_runs_are_a_reentrancy_failure():
    g = gv.Graph()
    x = g.var("x", np.ones(3))
    g.set_loss(g.math.sum(flaky_identity(x) * 2.0))
    report = gv.check_gradients(g, {}, eps=1e-6)
    reentrant = [f for f in report.failures if f.kind == "reentrancy"]
    assert reentrant and reentrant[0].variable == "x" and reentrant[0].index == (0,)
    assert reentrant[0].analytic != reentrant[0].numeric
    assert "NOT REENTRANT" in str(report)


def test_activations_are_checked_when_asked():
    g, feeds = mlp()
    report = gv.check_gradients(g, feeds, activations=True, max_per_param=8)
    assert report.passed, str(report)
    assert {"matmul", "add", "tanh", "matmul_1", "loss"} <= set(report.variables)
    bad = with_op(wrong_square)
    activation = gv.check_gradients(bad, {}, wrt=[], activations=True)
    assert activation.passed           # the activation itself has the right gradient ...
    assert not gv.check_gradients(bad, {}, activations=True).passed    # ... its input does not


def test_float32_graphs_are_checked_in_a_float64_copy_and_left_untouched():
    g, feeds = mlp(np.float32)
    before = (g.nodes(), g.value("w1"))
    report = gv.check_gradients(g, feeds)
    assert report.passed and report.converted, str(report)
    assert "float64 copy" in str(report)
    assert g.nodes() == before[0] and g.value("w1").dtype == np.float32
    np.testing.assert_array_equal(g.value("w1"), before[1])
    assert feeds["x"].dtype == np.float32


def test_the_validation_listener_watches_the_analytic_pass():
    g = with_op(sneaky_square)
    report = gv.check_gradients(g, {})
    assert not report.passed and report.violations
    assert report.violations[0].op == "test_sneaky_square" and report.violations[0].input_name == "a"
    assert "in-place violation" in str(report)
    assert not gv.check_gradients(g, {}, validate_inplace=False).violations


def test_graph_without_loss_is_an_error():
    g = gv.Graph()
    g.var("x", np.ones(2))
    with pytest.raises(gv.GraphviewError, match="no loss"):
        gv.check_gradients(g, {})


def test_check_op_and_op_coverage():
    report = check_op("tanh", gv.Sample((R.normal(size=(3, 4)),)))
    assert report.passed and list(report.variables) == ["input0"]
    assert check_op("argmax", gv.Sample((R.normal(size=(3, 4)),))) is None
    rows = {row.op: row for row in gv.op_coverage()}
    assert rows["tanh"].differentiable and rows["tanh"].has_gradient and rows["tanh"].gradient_checked
    assert not rows["argmax"].differentiable and rows["argmax"].gradient_checked is None and rows["argmax"].complete
    assert set(rows) == set(gv.ops())


def test_failure_renders_like_samediff():
    text = str(Failure("w", (0, 1), 1.0, 2.0, 1 / 3, 1.0))
    assert text.startswith("w[0, 1] FAILED: grad=1.0, numericalGrad=2.0, relError=0.333")


# --- defects found in review -------------------------------------------------------

def test_a_gradient_of_the_wrong_shape_at_run_time_is_a_recorded_failure(forgetful_add):
    g = gv.Graph("broadcasting")
    x, b = g.placeholder("x", (None, 3)), g.placeholder("b", (None, 3))
    g.set_loss(g.math.sum(forgetful_add(x, b) * 1.5))
    feeds = {"x": R.normal(size=(2, 3)), "b": R.normal(size=(1, 3))}
    report = gv.check_gradients(g, feeds, wrt=["x", "b"])
    assert not report.passed
    assert [(f.variable, f.kind, f.shapes) for f in report.failures] == [("b", "shape", ((2, 3), (1, 3)))]
    assert report.variables["b"].failed == 1 and report.variables["x"].failed == 0
    assert "b FAILED (wrong shape): the analytic gradient has shape (2, 3), the variable has shape (1, 3)" \
        in str(report)
    assert "largest relative error nan" in str(report)
    fast = gv.check_gradients(g, feeds, wrt=["b"], fast=True, exit_on_first_failure=True)
    assert [f.kind for f in fast.failures] == ["shape"]


@pytest.mark.parametrize("option, value, message", [
    ("eps", 0.0, "eps must be a finite number greater than 0, not 0.0"),
    ("eps", -1e-5, "eps must be a finite number greater than 0"),
    ("eps", math.nan, "eps must be a finite number greater than 0, not nan"),
    ("eps", math.inf, "eps must be a finite number greater than 0, not inf"),
    ("max_rel_error", math.nan, "max_rel_error must be a finite number >= 0, not nan"),
    ("max_rel_error", math.inf, "max_rel_error must be a finite number >= 0, not inf"),
    ("max_rel_error", -0.1, "max_rel_error must be a finite number >= 0"),
    ("min_abs_error", math.nan, "min_abs_error must be a finite number >= 0, not nan"),
    ("min_abs_error", math.inf, "min_abs_error must be a finite number >= 0, not inf"),
    ("min_abs_error", "0", "min_abs_error must be a finite number >= 0, not '0'"),
    ("max_per_param", 0, "max_per_param must be an integer >= 1 or None, not 0"),
    ("max_per_param", -1, "max_per_param must be an integer >= 1 or None, not -1"),
    ("max_per_param", 2.5, "max_per_param must be an integer >= 1 or None, not 2.5"),
    ("seed", -1, "seed must be an integer >= 0, not -1"),
    ("seed", 1.5, "seed must be an integer >= 0, not 1.5"),
    ("subset", None, "subset must be one of random, every_n, not None"),
])
def test_option_values_that_would_crash_or_pass_anything_are_refused(option, value, message):
    g = with_op(wrong_square)
    settings = {option: value}
    if option == "max_per_param":
        settings["subset"] = "every_n"      # max_per_param=0 with every_n divided by zero
    with pytest.raises(gv.GraphviewError, match="check_gradients: " + message.replace("(", "\\(")):
        gv.check_gradients(g, {}, **settings)
    # The wrong rule is caught at the loosest finite settings.
    assert not gv.check_gradients(g, {}, max_rel_error=0.1, min_abs_error=0.0).passed


@pytest.mark.parametrize("size, limit", [(4, 3), (10, 6), (10, 10), (7, 1), (100, 30), (5, 9)])
def test_every_n_checks_exactly_min_of_the_limit_and_the_size_evenly_spread(size, limit):
    from graphview.gradcheck import _elements
    settings = {"mask": {}, "max_per_param": limit, "subset": "every_n", "seed": 0}
    chosen = _elements("a", (size,), settings)
    assert chosen.size == min(limit, size) == np.unique(chosen).size
    assert chosen[0] == 0 and (limit == 1 or chosen[-1] == size - 1)
    gaps = np.diff(chosen)
    assert gaps.size == 0 or gaps.max() - gaps.min() <= 1
    g = gv.Graph()
    a = g.var("a", R.normal(size=size))
    g.set_loss(g.math.sum(a * a))
    report = gv.check_gradients(g, {}, wrt=["a"], max_per_param=limit, subset="every_n")
    assert report.variables["a"].checked == min(limit, size)


def test_a_graph_with_nothing_to_check_is_an_error_not_a_pass():
    g = gv.Graph("x")
    x = g.placeholder("x", (3,))
    g.set_loss(g.math.sum(g.math.mul(x, x, name="square")))
    feeds = {"x": np.array([1.0, 2.0, 3.0])}
    with pytest.raises(gv.GraphviewError, match="check_gradients: nothing to check in graph 'x': no trainable "
                                                "floating-point variables; name placeholders or values with wrt="):
        gv.check_gradients(g, feeds)
    with pytest.raises(gv.GraphviewError, match="nothing to check in graph 'x': wrt is empty"):
        gv.check_gradients(g, feeds, wrt=[])
    with pytest.raises(gv.GraphviewError, match="nothing to check in graph 'x': skip= removes every variable .*x"):
        gv.check_gradients(g, feeds, wrt=["x"], skip=["x"])
    assert gv.check_gradients(g, feeds, wrt=["x"]).variables["x"].checked == 3
    # wrt=[] with activations=True checks only the intermediate values.
    assert list(gv.check_gradients(g, feeds, wrt=[], activations=True).variables) == ["square", "sum"]
