"""Softmax cross-entropy: label validation before any kernel, the fused gradient, and its second derivative."""
import numpy as np
import pytest

import graphview as gv

R = np.random.default_rng(21)


def _model(dtype="float64", labels_dtype="int64"):
    g = gv.Graph()
    logits = g.placeholder("logits", (None, 4), dtype)
    labels = g.placeholder("labels", (None,), labels_dtype)
    g.set_loss(g.math.mul(g.loss.softmax_cross_entropy(logits, labels), 3.0, name="loss"))
    return g


@pytest.mark.parametrize("bad", [4, -1, 17])
@pytest.mark.parametrize("labels_dtype", ["int64", "int32"])
def test_out_of_range_labels_are_refused_by_the_loss_and_its_gradient(bad, labels_dtype):
    g = _model(labels_dtype=labels_dtype)
    feeds = {"logits": R.normal(size=(3, 4)), "labels": np.array([0, bad, 2], labels_dtype)}
    with pytest.raises(gv.ExecutionError, match=f"softmax_cross_entropy: label {bad} is out of range for 4 classes"):
        g.output(feeds, ["loss"])
    gradient = g.gradient_graph(["logits"]).gradients["logits"]
    assert gradient.op == "softmax_cross_entropy_grad"
    with pytest.raises(gv.ExecutionError, match=f"softmax_cross_entropy_grad: label {bad} is out of range"):
        g.calculate_gradients(feeds, ["logits"])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_fused_gradient_matches_numpy(dtype):
    g = _model(dtype)
    logits = R.normal(size=(5, 4)).astype(dtype)
    logits[1] = [1000.0, -1000.0, 0.0, 999.0]           # shifted by the max: no overflow
    labels = np.array([3, 0, 1, 1, 2])
    gradient = g.calculate_gradients({"logits": logits, "labels": labels}, ["logits"])["logits"]
    wide = logits.astype(np.float64)
    probabilities = np.exp(wide - wide.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    expected = 3.0 * (probabilities - np.eye(4)[labels]) / len(labels)
    assert gradient.dtype == np.dtype(dtype)
    np.testing.assert_allclose(gradient, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-7)


def test_second_derivatives_through_the_fused_gradient_pass_a_gradient_check():
    g = gv.Graph()
    w = g.var("w", R.normal(size=(3, 4)))
    x = g.constant("x", R.normal(size=(6, 3)))
    labels = g.constant("labels", R.integers(0, 4, 6))
    g.set_loss(g.loss.softmax_cross_entropy(g.nn.tanh(x @ w), labels))
    first = g.gradient_graph(["w"])
    first.graph.set_loss(first.graph.math.sum(g.math.sin(first.gradients["w"])))
    report = gv.check_gradients(first.graph, {}, wrt=["w"])
    assert report.passed and report.variables["w"].checked == 12, str(report)
