"""Reverse-mode autodiff: gradients against NumPy and finite differences, and the gradient graph's contract."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import graphview as gv
from graphview import registry
from graphview.autodiff import gradient_graph

R = np.random.default_rng(42)


def numeric_gradient(function, x, eps=1e-6):
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        original = x[index]
        x[index] = original + eps
        plus = function(x)
        x[index] = original - eps
        minus = function(x)
        x[index] = original
        grad[index] = (plus - minus) / (2 * eps)
    return grad


def mlp():
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, 5))
    y = g.placeholder("y", (None,), "int64")
    w1 = g.var("w1", R.normal(size=(5, 4)))
    b1 = g.var("b1", R.normal(size=4))
    w2 = g.var("w2", R.normal(size=(4, 3)))
    b2 = g.var("b2", R.normal(size=3))
    loss = g.loss.softmax_cross_entropy(g.nn.relu(x @ w1 + b1) @ w2 + b2, y, name="loss")
    g.set_loss(loss)
    return g, {"x": R.normal(size=(6, 5)), "y": R.integers(0, 3, 6)}


def mlp_reference(g, feeds):
    x, y = feeds["x"], feeds["y"]
    w1, b1, w2, b2 = (g.value(n) for n in ("w1", "b1", "w2", "b2"))
    pre = x @ w1 + b1
    hidden = np.maximum(pre, 0)
    logits = hidden @ w2 + b2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    dlogits = p.copy()
    dlogits[np.arange(len(y)), y] -= 1
    dlogits /= len(y)
    dhidden = dlogits @ w2.T * (pre > 0)
    return {"w1": x.T @ dhidden, "b1": dhidden.sum(0), "w2": hidden.T @ dlogits, "b2": dlogits.sum(0)}


def test_mlp_gradients_match_numpy():
    g, feeds = mlp()
    grads = g.calculate_gradients(feeds, ["w1", "b1", "w2", "b2"])
    expected = mlp_reference(g, feeds)
    assert set(grads) == set(expected)
    for name in expected:
        np.testing.assert_allclose(grads[name], expected[name], rtol=1e-10, atol=1e-12)
        assert grads[name].shape == g[name].shape and grads[name].dtype == np.float64


def test_forward_graph_is_not_mutated_and_gradient_graph_is_cached():
    g, feeds = mlp()
    before = [node for node in g.nodes()]
    first = gradient_graph(g, ["w1"])
    assert g.nodes() == before
    assert gradient_graph(g, ["w1"]) is first
    assert gradient_graph(g, ["w1", "b1"]) is not first
    assert first.graph is not g and "w1" in first.graph
    assert all(first.graph.node(n.name) == n for n in before if n.name in first.graph)


def test_nodes_added_later_do_not_disturb_the_cached_gradient_graph():
    g, feeds = mlp()
    cached = g.calculate_gradients(feeds, ["w1"])["w1"]
    extra = g.math.sum(g["w1"] * 3.0, name="unrelated")
    assert g.calculate_gradients(feeds, ["w1"])["w1"].tolist() == cached.tolist()
    g.set_loss("loss", extra)
    np.testing.assert_allclose(g.calculate_gradients(feeds, ["w1"])["w1"], cached + 3.0, rtol=1e-12)


def test_gradient_graph_reads_variable_values_live():
    g, feeds = mlp()
    g.calculate_gradients(feeds, ["w2"])
    g.set_value("w2", g.value("w2") * -2.0)
    np.testing.assert_allclose(g.calculate_gradients(feeds, ["w2"])["w2"], mlp_reference(g, feeds)["w2"], rtol=1e-10)


def test_gradients_from_several_consumers_are_summed():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(3, 4)))
    g.set_loss(g.math.sum(x * x + g.math.sin(x) + x + g.math.exp(x) * x))
    value = g.value("x")
    expected = 2 * value + np.cos(value) + 1 + np.exp(value) * (1 + value)
    np.testing.assert_allclose(g.calculate_gradients({}, ["x"])["x"], expected, rtol=1e-12)


def test_several_losses_are_summed_and_non_scalar_losses_sum_their_elements():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(2, 3)))
    g.set_loss(g.math.square(x, name="a"), g.math.sum(x * 5.0, name="b"))
    np.testing.assert_allclose(g.calculate_gradients({}, "x")["x"], 2 * g.value("x") + 5.0, rtol=1e-12)


def test_broadcasting_gradients_are_reduced_to_the_input_shape():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(4, 1, 3)))
    b = g.var("b", R.normal(size=(5, 1)))
    g.set_loss(g.math.sum(x * b))
    grads = g.calculate_gradients({}, ["x", "b"])
    assert grads["x"].shape == (4, 1, 3) and grads["b"].shape == (5, 1)
    np.testing.assert_allclose(grads["x"], np.broadcast_to(g.value("b").sum(), (4, 1, 3)), rtol=1e-12)
    np.testing.assert_allclose(grads["b"], np.full((5, 1), g.value("x").sum()), rtol=1e-12)


def test_non_differentiable_ops_stop_gradients():
    g = gv.Graph()
    x = g.var("x", np.array([[-1.0, 2.0, 0.5], [3.0, -2.0, 1.0]]))
    positive = g.math.cast(g.math.gt(x, 0.0), "float64")
    index = g.math.cast(g.math.argmax(x, axis=1), "float64")
    g.set_loss(g.math.sum(x * positive) + g.math.sum(index * 10.0))
    np.testing.assert_array_equal(g.calculate_gradients({}, "x")["x"], (g.value("x") > 0).astype(float))


def test_integer_variables_cannot_be_differentiated():
    g = gv.Graph()
    n = g.var("n", np.arange(3))
    x = g.var("x", np.ones(3))
    g.set_loss(g.math.sum(x * g.math.cast(n, "float64")))
    with pytest.raises(gv.DTypeError, match="'n'.*int64.*floating-point"):
        g.calculate_gradients({}, ["n"])
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], [0.0, 1.0, 2.0])


def test_unreachable_variables_and_placeholders_get_zeros():
    g = gv.Graph()
    x = g.var("x", np.ones((2, 2)))
    unused = g.var("unused", np.ones((3,), np.float32))
    g.placeholder("p", (None, 2))
    g.math.mul(unused, 2.0)
    g.set_loss(g.math.sum(x * 2.0))
    grads = g.calculate_gradients({"p": np.ones((5, 2))}, ["x", "unused", "p"])
    np.testing.assert_array_equal(grads["unused"], np.zeros(3, np.float32))
    assert grads["unused"].dtype == np.float32
    np.testing.assert_array_equal(grads["p"], np.zeros((5, 2)))
    np.testing.assert_array_equal(grads["x"], np.full((2, 2), 2.0))


def test_float32_gradients_stay_float32():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(3,)).astype(np.float32))
    g.set_loss(g.math.sum(g.math.tanh(x) * 2.0))
    grad = g.calculate_gradients({}, "x")["x"]
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, 2 * (1 - np.tanh(g.value("x")) ** 2), rtol=1e-6)


def test_gradient_with_respect_to_an_intermediate_value():
    g = gv.Graph()
    x = g.var("x", R.normal(size=(3,)))
    h = g.math.sin(x, name="h")
    g.set_loss(g.math.sum(h * h))
    grads = g.calculate_gradients({}, ["h", "x"])
    np.testing.assert_allclose(grads["h"], 2 * np.sin(g.value("x")), rtol=1e-12)
    np.testing.assert_allclose(grads["x"], 2 * np.sin(g.value("x")) * np.cos(g.value("x")), rtol=1e-12)


@pytest.mark.parametrize("build, second", [
    (lambda g, x: x * x * x, lambda v: 6 * v),
    (lambda g, x: g.math.tanh(x), lambda v: -2 * np.tanh(v) * (1 - np.tanh(v) ** 2)),
    (lambda g, x: g.math.exp(x) * g.math.sin(x), lambda v: 2 * np.exp(v) * np.cos(v)),
    (lambda g, x: g.math.log(x * x + 1.0), lambda v: (2 - 2 * v * v) / (v * v + 1) ** 2),
    (lambda g, x: g.nn.gelu(x), lambda v: (2 - v * v) * np.exp(-v * v / 2) / np.sqrt(2 * np.pi)),
    (lambda g, x: g.shape.concat([x * x, g.math.sin(x)]) * 3.0, lambda v: np.full_like(v, 6.0) - np.sin(v) * 3.0),
    (lambda g, x: g.shape.stack([x * x * x, g.math.cos(x)], axis=1), lambda v: 6 * v - np.cos(v)),
])
def test_second_derivatives(build, second):
    g = gv.Graph()
    x = g.var("x", np.array([0.3, -1.2, 2.0]))
    g.set_loss(g.math.sum(build(g, x)))
    first = g.gradient_graph(["x"])
    gg = first.graph
    gg.set_loss(gg.math.sum(first.gradients["x"]))
    np.testing.assert_allclose(gg.calculate_gradients({}, ["x"])["x"], second(g.value("x")), rtol=1e-10)


def test_calculate_gradients_needs_a_loss_and_known_placeholders():
    g = gv.Graph()
    x = g.var("x", np.ones(2))
    with pytest.raises(gv.GraphviewError, match="no loss.*set_loss"):
        g.calculate_gradients({}, ["x"])
    p = g.placeholder("p", (2,))
    g.set_loss(g.math.sum(x * p))
    with pytest.raises(gv.PlaceholderError, match="unknown placeholder 'q'"):
        g.calculate_gradients({"p": np.ones(2), "q": 1.0}, ["x"])
    with pytest.raises(gv.PlaceholderError, match="missing placeholder 'p'"):
        g.calculate_gradients({}, ["x"])
    with pytest.raises(gv.UnknownNameError, match="'nope'"):
        g.calculate_gradients({"p": np.ones(2)}, ["nope"])


def test_placeholders_the_gradients_do_not_need_may_still_be_fed():
    g = gv.Graph()
    x = g.var("x", np.ones(2))
    g.placeholder("other", (3,))
    g.set_loss(g.math.sum(x * x))
    assert g.calculate_gradients({"other": np.zeros(3)}, "x")["x"].tolist() == [2.0, 2.0]


def test_a_rule_giving_the_wrong_shape_is_a_clear_error():
    bad = gv.defop("test_autodiff_bad_shape", shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x),
                   vjp=lambda g, out, x: (g.graph.math.sum(g),))
    try:
        g = gv.Graph()
        x = g.var("x", np.ones((2, 3)))
        g.set_loss(g.math.sum(bad(x, name="bad")))
        with pytest.raises(gv.ShapeError, match="test_autodiff_bad_shape.*'bad'.*shape \\(\\).*'x' of shape \\(2, 3\\)"):
            g.calculate_gradients({}, "x")
    finally:
        registry._REGISTRY.pop("test_autodiff_bad_shape", None)
        registry._CALLABLES.pop("test_autodiff_bad_shape", None)


@pytest.mark.parametrize("b_shape, message", [
    ((3,), r"\(\?, 3\) for input 'b' of shape \(3,\)"),            # ranks differ, one dim unknown
    ((None, 1), r"\(\?, 3\) for input 'b' of shape \(\?, 1\)"),    # a dim static in both and unequal
])
def test_a_rule_that_does_not_unbroadcast_is_a_shape_error_when_built(forgetful_add, b_shape, message):
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    b = g.var("b", np.ones(3)) if None not in b_shape else g.placeholder("b", b_shape)
    g.set_loss(g.math.sum(forgetful_add(x, b, name="myadd")))
    with pytest.raises(gv.ShapeError, match="test_forgetful_add \\(node 'myadd'\\).*" + message):
        g.calculate_gradients({"x": np.ones((2, 3)), "b": np.ones((2, 1))} if None in b_shape
                              else {"x": np.ones((2, 3))}, ["b"])


def test_a_rule_that_does_not_unbroadcast_is_a_shape_error_at_run_time(forgetful_add):
    g = gv.Graph()
    x, b = g.placeholder("x", (None, 3)), g.placeholder("b", (None, 3))
    g.set_loss(g.math.sum(forgetful_add(x, b)))
    feeds = {"x": np.ones((2, 3)), "b": np.ones((2, 3))}
    assert g.calculate_gradients(feeds, ["b"])["b"].shape == (2, 3)    # no broadcasting: the rule is right
    feeds["b"] = np.ones((1, 3))
    with pytest.raises(gv.ShapeError, match=r"gradient of 'b' has shape \(2, 3\) but 'b' has shape \(1, 3\)"):
        g.calculate_gradients(feeds, ["b"])


def test_listeners_see_the_backward_ops():
    g, feeds = mlp()
    seen = []

    class Recorder(gv.Listener):
        def post_op(self, ctx, node, inputs, outputs):
            seen.append((ctx.mode, node.name, node.op))

    g.calculate_gradients(feeds, ["w1"], listeners=[Recorder()])
    assert any(name.startswith("grad/") for _, name, _ in seen)
    assert {mode for mode, _, _ in seen} == {"gradients"}
    assert ("gradients", "relu", "relu") in seen
    assert all(name != "loss" for _, name, _ in seen)      # the loss value itself is not needed


@given(st.sampled_from([((3, 4), (4,)), ((2, 1, 3), (4, 3)), ((1,), (2, 2)), ((), (3,)), ((3, 1), (1, 5))]),
       st.sampled_from(["add", "sub", "mul", "div", "maximum"]))
def test_broadcast_binary_gradients_match_finite_differences(shapes, op):
    r = np.random.default_rng(0)
    a, b = (r.uniform(0.5, 2.0, s) for s in shapes)
    weights = r.uniform(-1, 1, np.broadcast_shapes(*shapes))
    g = gv.Graph()
    x, y = g.var("x", a), g.var("y", b)
    g.set_loss(g.math.sum(getattr(g.math, op)(x, y) * weights))
    grads = g.calculate_gradients({}, ["x", "y"])
    function = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum}[op]
    np.testing.assert_allclose(grads["x"], numeric_gradient(lambda v: np.sum(function(v, b) * weights), a.copy()),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grads["y"], numeric_gradient(lambda v: np.sum(function(a, v) * weights), b.copy()),
                               rtol=1e-6, atol=1e-8)


def test_second_derivatives_through_softmax_views_and_gelu_pass_a_gradient_check():
    g = gv.Graph()
    x = g.var("x", np.array([0.3, -1.2, 2.0, 0.5]))
    y = g.nn.softmax(g.nn.gelu(x))[1:3]
    g.set_loss(g.math.sum(y * y))
    first = g.gradient_graph(["x"])
    weights = first.graph.constant("weights", np.array([1.0, -2.0, 3.0, 0.5]))
    first.graph.set_loss(first.graph.math.sum(first.gradients["x"] * weights))
    report = gv.check_gradients(first.graph, {}, wrt=["x"])
    assert report.passed and report.variables["x"].checked == 4, str(report)


def test_unbroadcasting_is_skipped_only_where_the_shapes_are_provably_equal():
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    y = g.placeholder("y", (None, 3))
    b = g.var("b", np.ones(3))
    g.set_loss(g.math.sum(g.math.sin(x * y + b) @ g.var("w", np.ones((3, 2)))))
    ops = [node.op for node in g.gradient_graph(["x", "y", "b", "w"]).graph.nodes()]
    assert ops.count("reduce_to") == 3        # x and y may broadcast each other; b really is summed
    feeds = {"x": np.linspace(0, 1, 3)[None, :], "y": np.linspace(1, 2, 12).reshape(4, 3)}
    gradients = g.calculate_gradients(feeds, ["x", "y", "b"])
    assert gradients["x"].shape == (1, 3) and gradients["y"].shape == (4, 3) and gradients["b"].shape == (3,)
    report = gv.check_gradients(g, feeds, wrt=["x", "y", "b", "w"])
    assert report.passed, str(report)


def test_a_differentiated_graph_is_freed_once_nothing_holds_it():
    import gc
    import weakref
    g = gv.Graph("freed")
    x = g.var("x", np.array([1.0, 2.0]))
    g.set_loss(g.math.sum(x * x))
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], [2.0, 4.0])
    held = weakref.ref(g)
    del g, x
    gc.collect()
    assert held() is None


def test_a_gradient_graph_keeps_working_when_only_it_is_held():
    def build():
        g = gv.Graph("held")
        x = g.var("x", np.array([1.0, 2.0]))
        g.set_loss(g.math.sum(x * x))
        return g.gradient_graph(["x"])
    gradient = build()
    import gc
    gc.collect()
    np.testing.assert_array_equal(gradient.run({})["x"], [2.0, 4.0])
