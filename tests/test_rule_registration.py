"""gv.defvjp and the registry's per-op rules registered after the op (ADR 0017)."""
import numpy as np
import pytest
from numba import njit

import graphview as gv
from graphview import registry


@njit(cache=True)
def _triple_kernel(x, out):
    for i in range(x.size):
        out.flat[i] = 3.0 * x.flat[i]


def _triple_vjp(grad, out, x):
    return (grad * 3.0,)


def _other_vjp(grad, out, x):
    return (grad * 2.0,)


@pytest.fixture
def triple():
    name = "test_rules_triple"
    yield gv.defop(name, shape=lambda x: x, kernel=_triple_kernel, family="elementwise")
    registry._REGISTRY.pop(name, None)
    registry._CALLABLES.pop(name, None)


def test_an_op_declared_without_a_rule_is_undeclared_until_defvjp_gives_it_one(triple):
    assert registry.get("test_rules_triple").differentiable is None
    g = gv.Graph()
    x = g.var("x", np.array([1.0, 2.0]))
    g.set_loss(g.math.sum(triple(x)))
    with pytest.raises(gv.GraphviewError, match="test_rules_triple"):
        g.calculate_gradients({}, ["x"])
    assert gv.defvjp("test_rules_triple", _triple_vjp) is triple
    assert registry.get("test_rules_triple").differentiable is True
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], [3.0, 3.0])


def test_the_same_rule_again_replaces_and_a_different_one_names_both_places(triple):
    gv.defvjp(triple, _triple_vjp)
    gv.defvjp(triple, _triple_vjp)
    with pytest.raises(gv.GraphviewError, match=r"defvjp test_rules_triple: the op already has a different vjp "
                                                r"rule, declared at .*test_rule_registration.py:\d+; this one at "
                                                r".*test_rule_registration.py:\d+ differs"):
        gv.defvjp(triple, _other_vjp)
    assert registry.get("test_rules_triple").vjp is _triple_vjp


def test_declaring_the_op_again_keeps_its_registered_rule(triple):
    gv.defvjp(triple, _triple_vjp)
    again = gv.defop("test_rules_triple", shape=lambda x: x, kernel=_triple_kernel, family="elementwise")
    assert registry.get("test_rules_triple").vjp is _triple_vjp
    assert again.definition.differentiable is True


def test_rules_need_a_registered_op_and_a_function(triple):
    with pytest.raises(gv.GraphviewError, match="no op named 'test_rules_missing' is registered"):
        gv.defvjp("test_rules_missing", _triple_vjp)
    with pytest.raises(gv.GraphviewError, match="defvjp test_rules_triple: the rule must be a function"):
        gv.defvjp(triple, "not a function")
    with pytest.raises(gv.GraphviewError, match=r"defmasked test_rules_triple: the masked form must be a gv.Masked\(...\) declaration, not None"):
        registry.defmasked(triple, None)


def test_a_rule_for_an_op_declared_non_differentiable_is_refused():
    name = "test_rules_flat"
    op = gv.defop(name, shape=lambda x: x, kernel=_triple_kernel, differentiable=False)
    try:
        with pytest.raises(gv.GraphviewError, match="defvjp test_rules_flat: the op is declared differentiable=False"):
            gv.defvjp(op, _triple_vjp)
        assert registry.get(name).vjp is None
    finally:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


def test_reduce_to_adds_no_node_when_the_shapes_already_match():
    from graphview.ops.shape import reduce_to
    g = gv.Graph()
    a, b = g.placeholder("a", (2, 3)), g.placeholder("b", (1, 3))
    assert reduce_to(a, a) is a
    assert reduce_to(a, b).node.op == "reduce_to"


def test_an_op_declared_with_no_gradient_refuses_differentiation_instead_of_stopping_it():
    name = "test_rules_backward"
    op = gv.defop(name, shape=lambda x: x, kernel=_triple_kernel, no_gradient="it is a backward kernel")
    try:
        assert registry.get(name).differentiable is False
        g = gv.Graph()
        x = g.var("x", np.array([1.0, 2.0]))
        g.set_loss(g.math.sum(op(x)))
        with pytest.raises(gv.GraphviewError, match=r"cannot differentiate through test_rules_backward \(node "
                                                    r"'test_rules_backward'\): it is a backward kernel"):
            g.calculate_gradients({}, ["x"])
        with pytest.raises(gv.GraphviewError, match="an op with no_gradient has no rule and is not differentiable"):
            gv.defop("test_rules_bad", shape=lambda x: x, kernel=_triple_kernel, no_gradient="why",
                     vjp=_triple_vjp)
    finally:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


def test_a_second_derivative_through_a_backward_kernel_is_refused():
    g = gv.Graph()
    time = gv.Dim("time")
    x = g.placeholder("x", (2, 3, 4), dims=(gv.batch_dim, time, gv.Dim("classes", 4)), lengths={time: "n"})
    w = g.var("w", np.random.default_rng(0).standard_normal((4, 4)))
    labels = g.placeholder("labels", (2, 3), "int64")
    g.set_loss(g.loss.softmax_cross_entropy(x @ w, labels))
    gradient = g.gradient_graph(["w"])
    assert any(node.op == "masked_cross_entropy_grad" for node in gradient.graph.nodes())
    feeds = {"x": np.ones((2, 3, 4)), "labels": np.zeros((2, 3), np.int64), "n": np.array([3, 1])}
    gradient.graph.set_loss(gradient.graph.math.sum(gradient.graph.math.square(gradient.gradients["w"])))
    with pytest.raises(gv.GraphviewError, match="cannot differentiate through masked_cross_entropy_grad"):
        gradient.graph.calculate_gradients(feeds, ["w"])
