"""A failed gradient check names the op whose gradient rule is wrong (issue 14, item 11; ADR 0007)."""
import numpy as np
import pytest

import graphview as gv
from graphview import registry

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
