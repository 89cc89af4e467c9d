"""Run modes: every plain run is inference (dropout off, batch norm's running statistics); training mode
is fit's steps, GradientStep and gv.training_mode() (ADR 0019's amendment)."""
import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.training.step import GradientStep

R = np.random.default_rng(27)
L = gv.layers


def dropout_graph(rate=0.5, seed=3):
    g = gv.Graph("dropout")
    x = g.placeholder("x", (None, 50))
    w = g.var("w", R.normal(size=(50, 4)))
    h = g.nn.dropout(g.math.tanh(x), rate, seed=seed, name="h")
    g.set_loss(g.math.mean(g.math.square(h @ w), name="loss"))
    return g, h


def batch_norm_graph():
    g = gv.Graph("bn")
    x = g.placeholder("x", (None, 3))
    mean = g.var("mean", np.array([0.5, -1.0, 2.0]), trainable=False)
    var = g.var("var", np.array([2.0, 0.5, 3.0]), trainable=False)
    gamma, beta = g.var("gamma", np.array([1.0, 2.0, 0.5])), g.var("beta", np.array([0.1, 0.0, -0.3]))
    h = g.nn.batch_norm(x, gamma, beta, mean, var, name="h")
    g.set_loss(g.math.mean(g.math.square(h), name="loss"))
    return g


def normalized(g, x, mean, var):
    return (x - mean) / np.sqrt(var + 1e-5) * g.value("gamma") + g.value("beta")


def test_g_output_with_a_dropout_layer_returns_the_input_unchanged():
    g = gv.Graph("layer")
    x = g.placeholder("x", (None, 40))
    y = L.Dropout(0.5)(x)
    values = R.uniform(1.0, 2.0, size=(30, 40))
    np.testing.assert_array_equal(g.output({"x": values}, [y])[y.name], values)


def test_calculate_gradients_outside_fit_is_inference():
    g, _ = dropout_graph()
    x = R.normal(size=(8, 50))
    gradient = g.calculate_gradients({"x": x}, ["w"])["w"]
    h = np.tanh(x)                                      # no mask: dropout is the identity
    np.testing.assert_allclose(gradient, 2 * h.T @ (h @ g.value("w")) / (8 * 4), rtol=1e-12)


def test_training_mode_applies_dropout_with_a_fixed_mask_and_nests_with_inference():
    g, h = dropout_graph(rate=0.3)
    x = R.uniform(1.0, 2.0, size=(200, 50))
    with gv.training_mode():
        first = g.output({"x": x}, [h])["h"]
        again = g.output({"x": x}, [h])["h"]
        with gv.inference():
            inside = g.output({"x": x}, [h])["h"]
    kept = first != 0
    np.testing.assert_allclose(first[kept], np.tanh(x)[kept] / 0.7, rtol=1e-14)
    assert abs(1 - kept.mean() - 0.3) < 0.02
    np.testing.assert_array_equal(first, again)            # no step: the mask fixed by the seed
    np.testing.assert_allclose(inside, np.tanh(x), rtol=1e-14)
    with gv.training_mode(step=1):
        stepped = g.output({"x": x}, [h])["h"]
    assert ((stepped != 0) != kept).mean() > 0.2            # a step draws that step's mask
    np.testing.assert_allclose(g.output({"x": x}, [h])["h"], np.tanh(x), rtol=1e-14)   # and outside, none again


def test_dropout_in_training_mode_matches_its_reference_and_passes_the_gradient_check():
    definition = registry.get("dropout")
    dropped = 0
    for sample in definition.samples():
        g = gv.Graph("sample")
        x = g.placeholder("x", sample.inputs[0].shape, sample.inputs[0].dtype)
        y = g.nn.dropout(x, sample.attrs["rate"], seed=sample.attrs["seed"])
        with gv.training_mode():
            result = g.output({"x": sample.inputs[0]}, [y])[y.name]
            expected = definition.reference(*sample.inputs, **sample.attrs)
        dropped += (expected == 0).sum()
        np.testing.assert_allclose(result, expected, rtol=1e-6)
    assert dropped > 0                  # the reference masks in training mode, as the kernel does
    g, _ = dropout_graph()
    feeds = {"x": R.normal(size=(6, 50))}
    with gv.training_mode():      # the mask fixed by the seed: finite differences see one function
        assert gv.check_gradients(g, feeds).passed


def test_batch_norm_uses_batch_statistics_only_in_training_mode_and_g_output_never_updates_them():
    g = batch_norm_graph()
    x = R.normal(1.0, 2.0, size=(16, 3))
    before = g.value("mean").copy(), g.value("var").copy()
    plain = g.output({"x": x}, ["h"])["h"]
    np.testing.assert_allclose(plain, normalized(g, x, *before), rtol=1e-12)
    with gv.training_mode():
        trained = g.output({"x": x}, ["h"])["h"]
        g.calculate_gradients({"x": x}, ["gamma"])
    np.testing.assert_allclose(trained, normalized(g, x, x.mean(0), x.var(0)), rtol=1e-10)
    np.testing.assert_array_equal(g.value("mean"), before[0])      # only a step writes running statistics
    np.testing.assert_array_equal(g.value("var"), before[1])
    with gv.training_mode():          # batch statistics: the gradients through them, checked deterministically
        assert gv.check_gradients(g, {"x": x}, wrt=["gamma", "beta", "x"]).passed
    np.testing.assert_array_equal(g.value("mean"), before[0])
    GradientStep(g)({"x": x}, step=0)
    assert not np.allclose(g.value("mean"), before[0])


def test_fit_steps_apply_the_dropout_mask():
    g, h = dropout_graph(rate=0.5)
    x = R.normal(size=(32, 50))
    seen = []

    class Watch(gv.Listener):
        def post_op(self, ctx, node, inputs, outputs):
            if node.name == "h":
                seen.append(np.array(outputs[0]))

    inference_loss = g.output({"x": x}, ["loss"])["loss"]
    config = gv.TrainingConfig(gv.SGD(1e-12), ["x"], [])
    history = g.fit(gv.data.ArrayDataSet({"x": x}, {}) >> gv.data.Batch(32), epochs=1, config=config,
                    listeners=[Watch()], progress=False)
    assert seen, "the listener saw no dropout output"
    assert (seen[0] == 0).mean() > 0.3                  # the mask was applied in the step
    assert history.epoch_losses[0] != pytest.approx(float(inference_loss), rel=1e-6)
