"""How the gradients of g.nn.lstm and g.nn.gru reach their backward kernels (ADR 0020, third amendment): the
public results' gradients as the state columns or the outputs' alone, no product for a dh0 nobody needs, and
the first step's product skipped for zero initial states, each against PyTorch."""
import numpy as np
import pytest

import graphview as gv
from graphview import layers as L
from test_recurrent import NAMES, build, inputs, torch_results

pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_product_for_dh0_runs_only_when_h0_needs_its_gradient(kind):
    """A constant h0 that no gradient is asked for gets no dh0 (the backward op's h0_gradient is off); asked for,
    a constant's gradient is still PyTorch's. gv.needs_gradient is True outside gradient rules."""
    values = inputs(kind)
    g = gv.Graph(kind)
    states = 2 if kind == "lstm" else 1
    made = [g.var("x", values[0])] + [g.constant(n, v) for n, v in zip(NAMES[kind][1:1 + states], values[1:1 + states])] \
        + [g.var(n, v) for n, v in zip(NAMES[kind][1 + states:], values[1 + states:])]
    results = getattr(g.nn, kind)(*made)
    g.set_loss(g.math.sum(g.math.square(results[0])))
    outputs, leaves = torch_results(kind, values)
    outputs[0].pow(2).sum().backward()
    for wrt, flag in ((["x", "w_hh"], False), (["x", "w_hh", "h0"], True)):
        got = g.calculate_gradients({}, wrt)
        backward = [node for node in g.gradient_graph(wrt).graph.nodes() if node.op == f"{kind}_backward"]
        assert [node.attributes["h0_gradient"] for node in backward] == [flag]
        for name in wrt:
            leaf = leaves[NAMES[kind].index(name)]
            np.testing.assert_allclose(got[name], leaf.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    assert gv.needs_gradient(made[1])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_zero_initial_states_skip_the_first_product_but_not_an_infinite_weight(kind):
    """h0 = 0 adds nothing at the first step, unless w_hh holds an infinity or a NaN (0 * inf is NaN): then the
    first step's outputs are NaN, as PyTorch's."""
    values = list(inputs(kind))
    states = 2 if kind == "lstm" else 1
    for k in range(1, 1 + states):
        values[k] = np.zeros_like(values[k])
    for poison in (None, np.inf, np.nan):
        if poison is not None:
            values[2 + states] = values[2 + states].copy()
            values[2 + states][1, 2] = poison
        g, results = build(kind, tuple(values))
        got = g.output({}, [results[0]])[results[0].name]
        expected = torch_results(kind, tuple(values))[0][0].detach().numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
        assert np.isnan(got[:, 0]).any() == (poison is not None)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_when_only_the_outputs_have_a_gradient_the_backward_kernel_takes_theirs_alone(kind):
    """A loss of the outputs alone scatters nothing: lstm_backward reads the outputs' gradient (T, B, H),
    here with the steps and the batch known only at run time."""
    values = inputs(kind)
    g = gv.Graph(kind)
    x = g.placeholder("x", (None, None, values[0].shape[2]))
    made = [x] + [g.var(n, v) for n, v in zip(NAMES[kind][1:], values[1:])]
    results = getattr(g.nn, kind)(*made)
    g.set_loss(g.math.sum(g.math.square(results[0])))
    profile = gv.ProfilingListener()
    got = g.calculate_gradients({"x": values[0]}, NAMES[kind][1:], listeners=[profile])
    assert "scatter_view" not in [row["op"] for row in profile.rows()]
    backward = [node for node in g.gradient_graph(NAMES[kind][1:]).graph.nodes() if node.op == f"{kind}_backward"]
    assert len(backward) == 1 and g.gradient_graph(NAMES[kind][1:]).graph[backward[0].inputs[0]].shape == \
        (None, None, values[1].shape[1])
    outputs, leaves = torch_results(kind, values)
    outputs[0].pow(2).sum().backward()
    for name, leaf in zip(NAMES[kind][1:], leaves[1:]):
        np.testing.assert_allclose(got[name], leaf.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_results_gradients_reach_the_backward_kernel_as_the_state_columns_alone(kind):
    """The public results' gradients are scattered into the state columns (T + 1, B, 2H or H), not into zeros
    of the whole packed result (6H or 5H wide), and give the same gradients as PyTorch."""
    values = inputs(kind)
    g, results = build(kind, values)
    g.set_loss(g.math.add(g.math.sum(g.math.square(results[0])), g.math.sum(results[-1])))
    profile = gv.ProfilingListener()
    got = g.calculate_gradients({}, NAMES[kind], listeners=[profile])
    (batch, steps, _), hidden = values[0].shape, values[1].shape[1]
    states = 2 if kind == "lstm" else 1
    scatters = [row for row in profile.rows() if row["op"] == "scatter_view"]
    # one scatter per public result used, each into the state columns (float64)
    assert [row["calls"] for row in scatters] == [2]
    assert scatters[0]["bytes_out"] == 2 * (steps + 1) * batch * states * hidden * 8
    outputs, leaves = torch_results(kind, values)
    (outputs[0].pow(2).sum() + outputs[-1].sum()).backward()
    for name, leaf in zip(NAMES[kind], leaves):
        np.testing.assert_allclose(got[name], leaf.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_a_layers_zero_state_needs_no_gradient_even_after_layers_that_do():
    """The recurrent layers' zero state is built from a view of their input through a boolean mask; no
    gradient passes through a boolean, so a stacked or Dense-fed layer still skips the product for dh0,
    and the model's gradients still pass a gradient check."""
    g = gv.Graph("stack")
    x = g.placeholder("x", (None, 4, 3))
    y = gv.Sequential([L.Dense(5), L.LSTM(3, return_sequences=True), L.GRU(2)], name="net", seed=4)(x)
    g.set_loss(g.math.sum(g.math.square(y)))
    trainable = [n for record in g.layers.values() for n in record["variables"] if g.is_trainable(n)]
    backward = [node for node in g.gradient_graph(trainable).graph.nodes() if node.op in ("lstm_backward", "gru_backward")]
    assert sorted((node.op, node.attributes["h0_gradient"]) for node in backward) == [
        ("gru_backward", False), ("lstm_backward", False)]
    report = gv.check_gradients(g, {"x": np.random.default_rng(3).normal(size=(2, 4, 3))}, max_per_param=8)
    assert report.passed, str(report)


def test_needs_gradient_takes_a_graph_variable():
    with pytest.raises(gv.GraphviewError, match="needs_gradient takes one of the op's inputs, a graph variable, "
                                                "not ndarray"):
        gv.needs_gradient(np.zeros(3))


def test_a_backward_op_names_every_gradient_shape_it_takes():
    values = inputs("gru")
    g = gv.Graph("gru")
    packed = g.var("packed", np.zeros((6, 3, 30)))
    with pytest.raises(gv.ShapeError, match=r"grad has shape \(4, 3, 6\); it must be .*; the gradient of every "
                                            r"section, of the state columns \(steps \+ 1, batch, hidden\) or of "
                                            r"the steps' h \(steps, batch, hidden\) is taken"):
        gv.registry.op("gru_backward")(g.var("grad", np.zeros((4, 3, 6))), packed, g.var("h0", values[1]),
                                       g.var("w_hh", values[3]), g.var("w_ih", values[2]))
