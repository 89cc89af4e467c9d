"""A failed gradient check names the op whose gradient rule is wrong (issue 14, item 11; ADR 0007)."""
import contextlib
import dataclasses

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.localize import kink_verdict

R = np.random.default_rng(14)
BAD = "test_swish_bad"


def _swish_kernel(x, out):
    np.multiply(x, 1.0 / (1.0 + np.exp(-x)), out=out)


@pytest.fixture(scope="module", autouse=True)
def swish_bad():
    """swish(x) = x sigmoid(x), whose rule forgets the factor (1 + x (1 - sigmoid(x)))."""
    global swish
    swish = gv.defop(BAD, shape=lambda x: x, kernel=_swish_kernel,
                     vjp=lambda grad, out, x: (grad * x.graph.nn.sigmoid(x),))
    yield
    registry._REGISTRY.pop(BAD, None)
    registry._CALLABLES.pop(BAD, None)


def _sentence(node):
    return f"the gradient rule of op '{BAD}' (node '{node}') disagrees with finite differences"


def _chain():
    """x @ w -> tanh -> swish_bad -> sin -> * 2 -> exp -> sum: the wrong rule in the middle of correct ones."""
    g = gv.Graph("chain")
    x = g.placeholder("x", (3, 4))
    w = g.var("w", R.normal(size=(4, 5)))
    bad = swish(g.math.tanh(x @ w))
    g.set_loss(g.math.sum(g.math.exp(g.math.sin(bad) * 2.0)))
    return g, bad, {"x": R.normal(size=(3, 4))}


def test_a_wrong_rule_in_the_middle_of_a_chain_is_named_with_its_node():
    g, bad, feeds = _chain()
    report = gv.check_gradients(g, feeds)
    assert not report.passed and report.failures
    for failure in report.failures:
        culprit = failure.culprit
        assert (culprit.op, culprit.node, culprit.position) == (BAD, bad.name, 0)
        assert culprit.input == g.node(bad.name).inputs[0]           # the tanh feeding it
        assert _sentence(bad.name) in str(failure)                  # every output shows the sentence
    assert _sentence(bad.name) in str(report)


def test_the_culprit_is_found_in_fast_mode_with_exit_on_first_failure_and_for_activations():
    g, bad, feeds = _chain()
    fast = gv.check_gradients(g, feeds, fast=True, exit_on_first_failure=True)
    assert fast.failures and all(f.culprit.node == bad.name for f in fast.failures)
    activations = gv.check_gradients(g, feeds, activations=True, max_per_param=3)
    blamed = {f.variable: f.culprit.node for f in activations.failures}
    tanh = g.node(bad.name).inputs[0]
    assert blamed.get(tanh) == bad.name and blamed.get("w") == bad.name
    assert bad.name not in blamed     # the gradient at swish's own output is right


def test_the_broken_op_used_twice_names_the_right_node_for_each_variable():
    g = gv.Graph("twice")
    x = g.placeholder("x", (2, 3))
    first_weight, second_weight = g.var("first", R.normal(size=(3, 3))), g.var("second", R.normal(size=(3, 3)))
    first = swish(x @ first_weight)                     # node test_swish_bad
    second = swish(g.math.tanh(x @ second_weight))      # node test_swish_bad_1
    g.set_loss(g.math.sum(first * 3.0), g.math.sum(g.math.sin(second)))
    report = gv.check_gradients(g, {"x": R.normal(size=(2, 3))})
    assert {f.variable: f.culprit.node for f in report.failures} == {"first": first.name, "second": second.name}
    assert first.name != second.name
    assert _sentence(second.name) in str(report.failures_of("second")[0])


def test_two_uses_on_one_path_name_the_one_nearest_the_loss():
    g = gv.Graph("stacked")
    w = g.var("w", R.normal(size=(4,)))
    inner = swish(g.math.tanh(w))
    outer = swish(g.math.sin(inner) * 2.0)
    g.set_loss(g.math.sum(g.math.exp(outer)))
    report = gv.check_gradients(g, {})
    assert {f.culprit.node for f in report.failures} == {outer.name}
    assert {f.culprit.input for f in report.failures} == {g.node(outer.name).inputs[0]}


def test_a_right_gradient_has_no_culprit_and_a_passing_check_does_not_localise():
    g = gv.Graph("right")
    w = g.var("w", R.normal(size=(3,)))
    g.set_loss(g.math.sum(g.math.exp(g.math.tanh(w) * 2.0)))
    report = gv.check_gradients(g, {})
    assert report.passed and "gradient rule" not in str(report)


def test_a_rule_that_reads_the_variable_directly_is_named():
    g = gv.Graph("direct")
    p = g.var("p", np.array([1.0, 2.0]))
    out = swish(p)
    g.set_loss(g.math.sum(out))
    report = gv.check_gradients(g, {})
    assert [(f.culprit.node, f.culprit.input) for f in report.failures] == [(out.name, "p")] * 2


def test_a_loss_that_is_not_finite_blames_no_op():
    g = gv.Graph("nan")
    w = g.var("w", np.array([-1.0, -2.0]))
    g.set_loss(g.math.sum(g.math.log(w)))        # NaN: central differences cannot judge any rule
    report = gv.check_gradients(g, {})
    assert report.failures and all(f.kind == "nonfinite" and f.culprit is None for f in report.failures)


def test_a_rule_that_does_not_unbroadcast_is_named_with_the_shapes(forgetful_add):
    g = gv.Graph("broadcasting")
    x, b = g.placeholder("x", (None, 3)), g.placeholder("b", (None, 3))
    added = forgetful_add(x, b)
    g.set_loss(g.math.sum(g.math.tanh(added) * 1.5))
    report = gv.check_gradients(g, {"x": R.normal(size=(2, 3)), "b": R.normal(size=(1, 3))}, wrt=["x", "b"])
    [failure] = report.failures
    assert failure.kind == "shape" and failure.culprit.node == added.name and failure.culprit.input == "b"
    assert (f"the gradient rule of op 'test_forgetful_add' (node '{added.name}') gives its input 1 ('b', "
            "shape (1, 3)) a gradient of shape (2, 3)") in str(failure)


def test_a_kink_within_eps_is_reported_as_a_kink_not_as_a_wrong_rule():
    g = gv.Graph("kink")
    x = g.placeholder("x", (1,))
    w = g.var("w", np.array([2e-6]))                           # relu's input 2e-6: eps 1e-5 crosses 0
    g.set_loss(g.math.sum(g.nn.relu(x * w)))
    report = gv.check_gradients(g, {"x": np.array([1.0])}, wrt=["w"])
    assert not report.passed and [f.index for f in report.failures] == [(0,)]
    culprit = report.failures[0].culprit
    assert culprit.op == "relu" and culprit.kink is not None
    forward, backward = culprit.kink
    assert abs(forward - backward) > 0.1                       # one side sees the slope, the other does not
    assert "not differentiable" in str(culprit) and "not blamed" in str(culprit)


# --- curvature is not a kink (issue 27, item 1; ADR 0007, amendment of 5th December 2026) ---------------------

@pytest.fixture
def square_wrong():
    """README's broken op: square whose rule forgets the 2."""
    op = gv.defop("test_square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                  vjp=lambda grad, out, x: (grad * x,))
    yield op
    registry._REGISTRY.pop("test_square_wrong", None)
    registry._CALLABLES.pop("test_square_wrong", None)


@contextlib.contextmanager
def rule_of(op, rule):
    """Built-in op ``op`` with gradient rule ``rule(original_rule, grad, out, *inputs)`` for the block."""
    definition = registry.get(op)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(registry._REGISTRY, op, dataclasses.replace(
            definition, vjp=lambda grad, out, *inputs, **attrs: rule(definition.vjp, grad, out, *inputs, **attrs)))
        yield


def _blamed(report):
    assert not report.passed
    return {(f.culprit.op, f.culprit.kink is not None) for f in report.failures}


def test_the_readme_broken_op_after_a_dense_layer_is_blamed_not_called_a_kink(square_wrong):
    g = gv.Graph("broken3")
    x = g.placeholder("x", (None, 3))
    w = g.var("w", np.random.default_rng(0).normal(size=(3, 3)))
    g.set_loss(g.math.mean(square_wrong(g.math.tanh(x @ w)), name="loss"))
    report = gv.check_gradients(g, {"x": np.random.default_rng(1).normal(size=(4, 3))})
    assert _blamed(report) == {("test_square_wrong", False)}
    assert "the gradient rule of op 'test_square_wrong'" in str(report) and "not differentiable" not in str(report)


@pytest.mark.parametrize("seed", range(3))
def test_a_sign_flipped_sin_rule_inside_two_dense_layers_is_blamed(seed):
    rng = np.random.default_rng(seed)
    g = gv.Graph("sin")
    x = g.placeholder("x", (None, 3))
    w1, w2 = g.var("w1", rng.normal(size=(3, 3))), g.var("w2", rng.normal(size=(3, 2)))
    g.set_loss(g.math.mean(g.math.tanh(g.math.sin(g.math.tanh(x @ w1)) @ w2)))
    with rule_of("sin", lambda rule, grad, out, x: (-rule(grad, out, x)[0],)):
        assert _blamed(gv.check_gradients(g, {"x": rng.normal(size=(4, 3))})) == {("sin", False)}


@pytest.mark.parametrize("seed", range(3))
def test_a_wrong_reciprocal_rule_after_a_dense_layer_is_blamed(seed):
    rng = np.random.default_rng(seed)
    g = gv.Graph("reciprocal")
    x = g.placeholder("x", (None, 3))
    w = g.var("w", rng.normal(size=(3, 3)))
    g.set_loss(g.math.mean(g.math.reciprocal(1.5 + g.math.tanh(x @ w))))
    with rule_of("reciprocal", lambda rule, grad, out, x: (rule(grad, out, x)[0] * 1.1 + 0.01,)):
        assert _blamed(gv.check_gradients(g, {"x": rng.normal(size=(4, 3))})) == {("reciprocal", False)}


@pytest.mark.parametrize("seed", range(4))
def test_a_wrong_rule_in_a_relu_model_is_blamed_for_every_seed(seed):
    rng = np.random.default_rng(seed)
    g = gv.Graph("relu")
    x = g.placeholder("x", (None, 4))
    w1, w2 = g.var("w1", rng.normal(size=(4, 8))), g.var("w2", rng.normal(size=(8, 2)))
    second = g.nn.relu(x @ w1) @ w2
    g.set_loss(g.math.mean(g.math.square(second)))
    with rule_of("matmul", lambda rule, grad, out, a, b: tuple(d * 1.1 + 0.01 for d in rule(grad, out, a, b))):
        report = gv.check_gradients(g, {"x": rng.normal(size=(16, 4))})
    assert _blamed(report) == {("matmul", False)}


@pytest.mark.parametrize("c_shape", [(), (3,)])
def test_a_wrong_rule_of_a_reduction_to_a_scalar_is_blamed_not_the_mean_after_it(c_shape):
    rng = np.random.default_rng(3)
    g = gv.Graph("prod")
    x, c = g.placeholder("x", (4,)), g.placeholder("c", c_shape)
    w = g.var("w", rng.normal(size=(4,)))
    g.set_loss(g.math.mean(c * g.math.prod(1.5 + g.math.tanh(x * w))))
    with rule_of("prod", lambda rule, grad, out, x, **attrs: (rule(grad, out, x, **attrs)[0] * 1.1 + 0.01,)):
        report = gv.check_gradients(g, {"x": rng.normal(size=(4,)), "c": rng.uniform(0.5, 1.5, c_shape)})
    assert _blamed(report) == {("prod", False)}


def _kink_model(op, weights, value):
    g = gv.Graph("kinks")
    w = g.var("w", value)
    g.set_loss(g.math.sum(op(g, g.math.tanh(w) * 2.0) * weights))
    return g


KINKS = {   # (op on tanh(w) * 2, w): one element lies on a kink or within eps (1e-5) of it
    "relu at 0": (lambda g, v: g.nn.relu(v), np.array([0.0, 0.7, -0.4])),
    "relu within eps of 0": (lambda g, v: g.nn.relu(v), np.array([2e-6, 0.7, -0.4])),
    "abs within eps of 0": (lambda g, v: g.math.abs(v), np.array([-3e-6, 0.7, -0.4])),
    "max-pool tie": (lambda g, v: g.nn.max_pool2d(g.shape.reshape(v, (1, 1, 2, 2)), 2),
                     np.arctanh(np.array([0.3, 0.3, -0.2, 0.1]) / 2.0)),
}


@pytest.mark.parametrize("kink", sorted(KINKS))
def test_a_real_kink_still_gets_the_kink_verdict(kink):
    op, w = KINKS[kink]
    report = gv.check_gradients(_kink_model(op, 1.3 if kink == "max-pool tie" else np.array([0.5, 1.0, 1.5]), w), {})
    assert not report.passed
    for failure in report.failures:
        assert failure.culprit.kink is not None, str(failure)
        forward, backward = failure.culprit.kink
        assert abs(forward - backward) > 1e-3
        assert "not differentiable" in str(failure.culprit) and "not blamed" in str(failure.culprit)


def test_a_rule_far_from_both_sides_of_a_kink_is_blamed():
    """Near abs's kink the one-sided slopes differ, but a rule three times the slope lies outside them."""
    op, w = KINKS["abs within eps of 0"]
    with rule_of("abs", lambda rule, grad, out, x: (rule(grad, out, x)[0] * 3.0,)):
        report = gv.check_gradients(_kink_model(op, np.array([0.5, 1.0, 1.5]), w), {})
    assert _blamed(report) == {("abs", False)}


@pytest.mark.parametrize("t", [i / 40 for i in range(39)], ids=lambda t: f"kink at {t:.3f} eps")
def test_the_kink_test_sees_a_slope_jump_anywhere_within_eps_and_curvature_nowhere(t):
    """``kink_verdict`` on f(s) = |s - t h| + s^2 / 2 + 5 s^3 (a kink at t h), and on a smooth f."""
    h = 1e-5

    def disagree(analytic, numeric):
        return abs(analytic - numeric) > max(1e-5 * (abs(analytic) + abs(numeric)), 1e-8)

    def verdict(f, analytic):
        return kink_verdict(lambda offsets: [f(s) for s in offsets], (f(0.0), f(h), f(-h)), h, analytic, disagree)

    def kinked(s):
        return abs(s - t * h) + 0.5 * s * s + 5 * s ** 3 + 1.0

    assert verdict(kinked, -1.0) is not None                    # the slope left of the kink: a kink verdict
    assert verdict(kinked, 0.0 if t == 0 else -1.0) is not None  # on it, a value between the sides as well
    assert verdict(kinked, 2.5) is None                         # far outside both sides: the rule is blamed
    assert verdict(lambda s: np.exp(3 * s) + 400 * s * s, 3.3) is None   # curvature (F - B = 800 h) is no kink
