"""The recurrent ops' guards (ADR 0020): every input's shape is checked against the others before a kernel runs
(review: the backward kernels read past h0 and c0), when built and, for sizes unknown then, when run; a second
derivative through them is refused; non-finite padding reaches no weight gradient."""
import json
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.ops.recurrent_backward import gru_backward, gru_weight_gradients, lstm_backward, lstm_weight_gradients
from test_recurrent import GATES, NAMES, build, inputs


# --- every input's shape against the others (review: the backward kernels read past h0 and c0) -------

BACKWARD = {"lstm": lstm_backward, "gru": gru_backward}
WEIGHTS = {"lstm": lstm_weight_gradients, "gru": gru_weight_gradients}


def backward_inputs(kind, batch=5, steps=3, hidden=8):
    """Consistent inputs of kind's backward ops: (grad, packed, h0[, c0], w_hh, w_ih), and (gates, x, h0,
    packed)."""
    values = inputs(kind, batch=batch, steps=steps, features=2, hidden=hidden)
    packed = registry.get(kind).reference(*values)
    grad = np.random.default_rng(1).normal(size=packed.shape)
    backward = (grad, packed) + values[1:-4] + (values[-3], values[-4])
    gates = registry.get(f"{kind}_backward").reference(*backward)
    return backward, (gates, values[0], values[1], packed)


def _replaced(values, position, value):
    return values[:position] + (value,) + values[position + 1:]


BAD_INPUTS = {   # (kind, backward op or weight gradients, position, replacement, message)
    "lstm_backward h0 of batch 1": ("lstm", "backward", 2, np.zeros((1, 8)),
                                    r"h0 has shape \(1, 8\); it must be \(batch, hidden\) = \(5, 8\) "
                                    r"\(batch 5 from packed, hidden 8 from packed\)"),
    "lstm_backward c0 of hidden 7": ("lstm", "backward", 3, np.zeros((5, 7)),
                                     r"c0 has shape \(5, 7\); it must be \(batch, hidden\) = \(5, 8\)"),
    "lstm_backward w_hh": ("lstm", "backward", 4, np.zeros((32, 4)),
                           r"w_hh has shape \(32, 4\); it must be \(4\*hidden, hidden\) = \(32, 8\)"),
    "lstm_backward w_ih": ("lstm", "backward", 5, np.zeros((24, 2)),
                           r"w_ih has shape \(24, 2\); it must be \(4\*hidden, features\) = \(32, 2\) \(hidden 8 "
                           r"from packed"),
    "lstm_backward lengths": ("lstm", "backward", 6, np.array([1, 2, 3, 0]),
                              r"lengths has shape \(4,\); it must be \(batch,\) = \(5,\) \(batch 5 from packed\)"),
    "lstm_backward grad": ("lstm", "backward", 0, np.zeros((4, 4, 48)),
                           r"grad has shape \(4, 4, 48\); it must be \(steps \+ 1, batch, 6\*hidden\) = \(4, 5, 48\)"),
    "lstm_backward gru's packed": ("lstm", "backward", 1, np.zeros((4, 5, 40)),
                                   r"packed has shape \(4, 5, 40\); it must be \(steps \+ 1, batch, 6\*hidden\)"),
    "gru_backward h0 of batch 1": ("gru", "backward", 2, np.zeros((1, 8)),
                                   r"h0 has shape \(1, 8\); it must be \(batch, hidden\) = \(5, 8\)"),
    "gru_backward w_hh": ("gru", "backward", 3, np.zeros((32, 8)),
                          r"w_hh has shape \(32, 8\); it must be \(3\*hidden, hidden\) = \(24, 8\)"),
    "lstm_weight_gradients h0 of batch 1": ("lstm", "weights", 2, np.zeros((1, 8)),
                                            r"h0 has shape \(1, 8\); it must be \(batch, hidden\) = \(5, 8\)"),
    "lstm_weight_gradients x of 2 steps": ("lstm", "weights", 1, np.zeros((5, 2, 2)),
                                           r"x has shape \(5, 2, 2\); it must be \(batch, steps, features\) = "
                                           r"\(5, 3, \?\) \(batch 5 from packed, steps 3 from packed\)"),
    "gru_weight_gradients gates of 3H": ("gru", "weights", 0, np.zeros((4, 5, 24)),
                                         r"gates has shape \(4, 5, 24\); it must be \(steps \+ 1, batch, "
                                         r"4\*hidden \+ features\) = \(4, 5, 34\)"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_backward_ops_check_every_input_against_the_others_when_built(case):
    kind, which, position, value, message = BAD_INPUTS[case]
    backward, weights = backward_inputs(kind)
    op, given = (BACKWARD[kind], backward) if which == "backward" else (WEIGHTS[kind], weights)
    if position == len(given):
        given = given + (value,)
    else:
        given = _replaced(given, position, value)
    g = gv.Graph("bad")
    name = op.definition.name
    with pytest.raises(gv.ShapeError, match=rf"^{name} \(.*\): {message}"):
        op(g.var("first", given[0]), *given[1:])


def test_the_review_cases_fail_when_built():
    g = gv.Graph("review")
    r = np.random.default_rng(0)
    with pytest.raises(gv.ShapeError, match=r"lstm_weight_gradients .*h0 has shape \(1, 8\)"):
        lstm_weight_gradients(g.var("gates", r.normal(size=(3, 4000, 35))), r.normal(size=(4000, 2, 3)),
                              np.zeros((1, 8)), r.normal(size=(3, 4000, 48)))
    with pytest.raises(gv.ShapeError, match=r"gru_backward .*h0 has shape \(1, 8\)"):
        gru_backward(g.var("grad", r.normal(size=(3, 5, 40))), r.normal(size=(3, 5, 40)), np.zeros((1, 8)),
                     r.normal(size=(24, 8)), r.normal(size=(24, 2)))


def _backward_graph(kind, which, hidden=8):
    """kind's backward op (or weight gradients) on placeholders whose batch is unknown when built."""
    g = gv.Graph("unknown batch")
    sections = 6 if kind == "lstm" else 5
    h0 = g.placeholder("h0", (None, hidden))
    packed = g.placeholder("packed", (4, None, sections * hidden))
    if which == "backward":
        states = (h0, g.placeholder("c0", (None, hidden))) if kind == "lstm" else (h0,)
        w_hh = g.var("w_hh", np.zeros((GATES[kind] * hidden, hidden)))
        w_ih = g.var("w_ih", np.zeros((GATES[kind] * hidden, 2)))
        result = BACKWARD[kind](g.placeholder("grad", (4, None, sections * hidden)), packed, *states, w_hh, w_ih)
    else:
        result = WEIGHTS[kind](g.placeholder("gates", (4, None, 4 * hidden + 2)), g.placeholder("x", (None, None, 2)),
                               h0, packed)
    return g, result


def _feeds(kind, which, **replacements):
    backward, weights = backward_inputs(kind)
    names = (["grad", "packed", "h0", "c0"] if kind == "lstm" else ["grad", "packed", "h0"]) if which == "backward" \
        else ["gates", "x", "h0", "packed"]
    feeds = dict(zip(names, backward if which == "backward" else weights))
    feeds.update(replacements)
    return feeds


@pytest.mark.parametrize("which", ["backward", "weights"])
@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_sizes_unknown_when_built_are_checked_before_the_kernel_runs(kind, which, tmp_path):
    g, result = _backward_graph(kind, which)
    g.save(tmp_path / "backward.gv")
    loaded = gv.load(tmp_path / "backward.gv")
    for graph in (g, loaded):
        good = graph.output(_feeds(kind, which), [result.name])[result.name]
        assert np.isfinite(good).all()
        with pytest.raises(gv.ShapeError, match=rf"{result.name} .*h0 \(1, 8\).*: h0 has shape \(1, 8\); it must "
                                                r"be \(batch, hidden\) = \(5, 8\)"):
            graph.output(_feeds(kind, which, h0=np.zeros((1, 8))), [result.name])
    if kind == "lstm" and which == "backward":
        with pytest.raises(gv.ShapeError, match=r"c0 has shape \(1, 8\)"):
            loaded.output(_feeds(kind, which, c0=np.zeros((1, 8))), [result.name])


def test_a_graph_file_whose_shapes_disagree_is_refused_when_loaded(tmp_path):
    g, result = _backward_graph("lstm", "backward")
    g.save(tmp_path / "good.gv")
    with zipfile.ZipFile(tmp_path / "good.gv") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    graph = json.loads(members["graph.json"])
    for node in graph["nodes"]:
        node["shape"] = {"h0": [1, 8], "packed": [4, 5, 48]}.get(node["name"], node["shape"])
    members["graph.json"] = json.dumps(graph).encode()
    with zipfile.ZipFile(tmp_path / "bad.gv", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(gv.GraphFileError, match=r"lstm_backward.*h0 has shape \(1, 8\); it must be \(batch, "
                                                r"hidden\) = \(5, 8\)"):
        gv.load(tmp_path / "bad.gv")


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_forward_checks_states_and_lengths_against_each_other_when_x_batch_is_unknown(kind):
    values = inputs(kind)
    g = gv.Graph("forward")
    x = g.placeholder("x", (None, None, 4))
    with pytest.raises(gv.ShapeError, match=rf"^{kind} .*lengths has shape \(2,\); it must be \(batch,\) = "
                                            r"\(3,\) \(batch 3 from h0\)"):
        getattr(g.nn, kind)(x, *values[1:], lengths=np.array([1, 2]))
    if kind == "lstm":
        with pytest.raises(gv.ShapeError, match=r"c0 has shape \(2, 6\); it must be \(batch, hidden\) = "
                                                r"\(3, 6\) \(batch 3 from h0, hidden 6 from w_hh\)"):
            g.nn.lstm(x, values[1], values[2][:2], *values[3:])
    h0 = g.placeholder("h0", (None, 6))
    results = getattr(g.nn, kind)(x, h0, *values[2:])
    with pytest.raises(gv.ShapeError, match=rf"{kind} .*h0 has shape \(1, 6\); it must be \(batch, hidden\) = "
                                            r"\(3, 6\) \(batch 3 from x"):
        g.output({"x": values[0], "h0": values[1][:1]}, [results[0]])


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_gradients_when_w_ih_or_the_features_are_unknown_when_built(kind):
    values = inputs(kind)
    names = NAMES[kind]
    g, results = build(kind, values)
    g.set_loss(g.math.sum(g.math.square(results[0])))
    expected = g.calculate_gradients({}, names)
    # w_ih fed: its shape unknown when built (review: a raw TypeError from the gradient rule)
    g = gv.Graph("w_ih fed")
    made = [g.placeholder(n, (None, None)) if n == "w_ih" else g.var(n, v) for n, v in zip(names, values)]
    g.set_loss(g.math.sum(g.math.square(getattr(g.nn, kind)(*made)[0])))
    got = g.calculate_gradients({"w_ih": values[names.index("w_ih")]}, [n for n in names if n != "w_ih"])
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12, atol=1e-14, err_msg=name)
    # x fed with every size unknown: the weight gradients' columns are cut from the end
    g = gv.Graph("x fed")
    made = [g.placeholder(n, (None, None, None)) if n == "x" else g.var(n, v) for n, v in zip(names, values)]
    g.set_loss(g.math.sum(g.math.square(getattr(g.nn, kind)(*made)[0])))
    got = g.calculate_gradients({"x": values[0]}, names[1:])
    for name in got:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-12, atol=1e-14, err_msg=name)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_a_second_derivative_through_the_recurrent_ops_is_refused_not_silently_zero(kind):
    g, results = build(kind, inputs(kind))
    g.set_loss(g.math.sum(g.math.square(results[0])))
    gradient = g.gradient_graph([NAMES[kind][0]])
    gradient.graph.set_loss(gradient.graph.math.sum(gradient.graph.math.square(gradient.gradients[NAMES[kind][0]])))
    with pytest.raises(gv.GraphviewError, match=f"cannot differentiate through {kind}_backward"):
        gradient.graph.calculate_gradients({}, [NAMES[kind][-4]])


@pytest.mark.parametrize("op", ["lstm", "gru"])
@pytest.mark.parametrize("padding", [np.nan, np.inf, -1e300])
def test_non_finite_padding_reaches_no_weight_gradient(op, padding):
    g = gv.Graph("padding")
    x = g.placeholder("x", (None, None, 2))
    r = np.random.default_rng(0)
    gates = 4 if op == "lstm" else 3
    w_ih, w_hh = g.var("w_ih", r.normal(size=(gates, 2))), g.var("w_hh", r.normal(size=(gates, 1)))
    b = g.var("b", np.zeros(gates))
    zero = np.zeros((2, 1))
    lengths = np.array([1, 3])
    if op == "lstm":
        _, h_n, _ = g.nn.lstm(x, zero, zero, w_ih, w_hh, b, b, lengths=lengths)
    else:
        _, h_n = g.nn.gru(x, zero, w_ih, w_hh, b, b, lengths=lengths)
    g.set_loss(g.math.sum(h_n))
    data = r.normal(size=(2, 3, 2))
    padded = data.copy()
    padded[0, 1:] = padding
    names = ["w_ih", "w_hh", "b"]
    clean = g.calculate_gradients({"x": data}, names)
    dirty = g.calculate_gradients({"x": padded}, names)
    for name in names:
        np.testing.assert_array_equal(dirty[name], clean[name])
