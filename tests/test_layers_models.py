"""graphview.layers as models: initial values, seeds, names, sharing, summary, graph files, errors."""
import json
import math
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import data
from graphview import layers as L
from graphview.cli import main
from graphview.training.step import GradientStep

R = np.random.default_rng(23)


def graph_with(model, shape, dtype="float64", name="m"):
    g = gv.Graph(name)
    x = g.placeholder("x", (None,) + shape, dtype)
    return g, x, model(x)


def built(model, shape, dtype="float64"):
    """``model`` called on a new graph's placeholder (None, *shape); its variables' values by name."""
    graph_with(model, shape, dtype)
    return {v.name: model.graph.value(v.name) for v in model.variables}


# --- initial values ------------------------------------------------------------------------------

def uniform_within(value, bound):
    """Drawn from U(-bound, bound): inside it, spread to near its ends, with its standard deviation."""
    assert np.abs(value).max() <= bound
    if value.size >= 500:
        assert np.abs(value).max() > 0.95 * bound
        assert abs(value.std() - bound / math.sqrt(3)) < 0.1 * bound / math.sqrt(3)
    else:
        assert np.abs(value).max() > 0.7 * bound


def test_initial_values_are_pytorch_defaults():
    g = gv.Graph("defaults")
    for layer, shape, fan_in in ((L.Dense(40), (50,), 50), (L.Conv2D(32, 3, groups=2), (8, 9, 9), 4 * 9),
                                 (L.Conv1D(20, 5), (6, 30), 6 * 5), (L.LSTM(30), (4, 7), 30), (L.GRU(30), (4, 7), 30)):
        layer(g.placeholder(type(layer).__name__, (None,) + shape))    # conv: fan_in = channels per group * kernel
        assert len(layer.variables) in (2, 4)
        for variable in layer.variables:                 # weights and biases alike, as torch
            uniform_within(g.value(variable.name), 1 / math.sqrt(fan_in))
    L.Embedding(300, 20)(g.placeholder("ids", (None,), "int64"))
    weight = g.value("embedding/weight")
    assert abs(weight.mean()) < 0.03 and abs(weight.std() - 1) < 0.03
    L.MultiHeadAttention(4)(g.placeholder("seq", (None, 5, 32)))
    for short in ("w_q", "w_k", "w_v"):
        uniform_within(g.value(f"multi_head_attention/{short}"), math.sqrt(6 / (32 + 96)))   # torch's packed fans
    uniform_within(g.value("multi_head_attention/w_o"), 1 / math.sqrt(32))
    np.testing.assert_array_equal(g.value("multi_head_attention/b_o"), np.zeros(32))


def cnn(seed=None, extra=()):
    return gv.Sequential([L.Conv2D(4, 3), L.ReLU(), L.Flatten(), L.Dense(5), L.Dense(3), *extra],
                         name="net", seed=seed)


def test_seeds_make_initial_values_reproducible():
    models = [cnn(seed=7), cnn(seed=7), cnn(seed=8), cnn(), cnn()]     # the last two: no seed anywhere, seed 0
    a, b, c, d, e = (built(model, (2, 6, 6)) for model in models)
    assert list(a) == ["net/conv2d/weight", "net/conv2d/bias", "net/dense/weight", "net/dense/bias",
                       "net/dense_1/weight", "net/dense_1/bias"]
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
        assert not np.array_equal(a[name], c[name]), name
    assert not np.array_equal(a["net/dense/weight"][:5, :3], a["net/dense_1/weight"][:5, :3])   # names differ
    np.testing.assert_array_equal(d["net/dense/bias"], e["net/dense/bias"])


def test_a_layer_seed_wins_over_its_sequential_and_float32_agrees():
    seeded = [gv.Sequential([L.Dense(3, seed=5), L.Dense(2)], seed=s) for s in (1, 2, 1)]
    first, second, single = built(seeded[0], (4,)), built(seeded[1], (4,)), built(seeded[2], (4,), "float32")
    np.testing.assert_array_equal(first["sequential/dense/weight"], second["sequential/dense/weight"])
    assert not np.array_equal(first["sequential/dense_1/weight"], second["sequential/dense_1/weight"])
    np.testing.assert_array_equal(single["sequential/dense/weight"], first["sequential/dense/weight"].astype("f4"))


def test_adding_a_layer_does_not_change_the_others_values():
    base, grown = cnn(seed=3), cnn(seed=3, extra=(L.Dense(9), L.Tanh()))
    before, after = (built(model, (2, 6, 6)) for model in (base, grown))
    assert "net/dense_2/weight" in after
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])


def test_initializers_override_the_defaults():
    g = gv.Graph("inits")
    x = g.placeholder("x", (None, 4))
    L.Dense(6, kernel_init=gv.init.orthogonal(), bias_init="zeros")(x)
    weight = g.value("dense/weight")
    np.testing.assert_allclose(weight @ weight.T, np.eye(4), atol=1e-12)
    np.testing.assert_array_equal(g.value("dense/bias"), np.zeros(6))
    L.Dense(2, kernel_init="ones", bias_init=gv.init.constant(0.5))(x)
    np.testing.assert_array_equal(g.value("dense_1/weight"), np.ones((4, 2)))
    np.testing.assert_array_equal(g.value("dense_1/bias"), np.full(2, 0.5))
    L.Conv2D(3, 2, kernel_init="zeros")(g.placeholder("img", (None, 2, 4, 4)))
    np.testing.assert_array_equal(g.value("conv2d/weight"), np.zeros((3, 2, 2, 2)))
    L.Embedding(4, 3, init=gv.init.uniform(-0.01, 0.01))(g.placeholder("ids", (None,), "int64"))
    assert np.abs(g.value("embedding/weight")).max() <= 0.01


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_recurrent_kernel_init_leaves_the_biases_as_pytorch(kind):
    # An orthogonal recurrent kernel is the common override; it has no meaning for the (rows,) biases.
    g = gv.Graph("rnn")
    layer = getattr(L, kind)(5, kernel_init=gv.init.orthogonal())
    layer(g.placeholder("x", (None, 3, 5)))
    rows = layer.gates * 5
    weight_hh = g.value(f"{layer.name}/weight_hh")
    np.testing.assert_allclose(weight_hh.T @ weight_hh, np.eye(5), atol=1e-12)
    assert g.value(f"{layer.name}/bias_ih").shape == (rows,) and layer.bias_ih.shape == (rows,)
    uniform_within(g.value(f"{layer.name}/bias_ih"), 1 / math.sqrt(5))
    other = getattr(L, kind)(5, bias_init="zeros")
    other(g.placeholder("x2", (None, 3, 5)))
    np.testing.assert_array_equal(g.value(f"{other.name}/bias_hh"), np.zeros(rows))


# --- names and shared layers ---------------------------------------------------------------------

def test_names_numbering_and_nested_sequentials():
    block = gv.Sequential([L.Dense(4), L.ReLU()], name="block")
    model = gv.Sequential([L.Conv2D(2, 3), L.Conv2D(2, 1, name="head"), L.Conv2D(2, 1), L.Flatten(), block,
                           L.Dense(3)], name="net")
    g, x, y = graph_with(model, (1, 5, 5))
    assert list(g.layers) == ["net", "net/conv2d", "net/head", "net/conv2d_1", "net/flatten", "net/block",
                              "net/block/dense", "net/block/relu", "net/dense"]
    assert g.layers["net/block/dense"]["parent"] == "net/block" and g.layers["net/block"]["parent"] == "net"
    assert g.layers["net/head"]["variables"] == ["net/head/weight", "net/head/bias"]
    assert [v.name for v in block.variables] == ["net/block/dense/weight", "net/block/dense/bias"]
    assert len(model.variables) == 10 and model.count_params() == 20 + 6 + 6 + 18 * 4 + 4 + 15
    assert model[4] is block and len(model) == 6
    assert g.layers["net"]["calls"] == [{"inputs": ["x"], "output": y.name}]
    again = gv.Sequential([L.Conv2D(2, 3)], name="net")
    with pytest.raises(gv.NameConflictError, match="already has a layer named 'net'"):
        again(x)


def test_sequential_add_chains_and_is_fixed_once_called():
    model = gv.Sequential().add(L.Dense(3)).add(L.Tanh())
    assert len(model) == 2
    g, x, y = graph_with(model, (2,))
    np.testing.assert_allclose(g.predict(np.ones((1, 2)), y),
                               np.tanh(np.ones((1, 2)) @ g.value("sequential/dense/weight")
                                       + g.value("sequential/dense/bias")), rtol=1e-14)
    with pytest.raises(gv.GraphviewError, match="has been called already; its layers are fixed"):
        model.add(L.ReLU())
    relu = L.ReLU()
    with pytest.raises(gv.GraphviewError, match="is in it already; to apply a layer twice, call it"):
        gv.Sequential([relu, relu])
    with pytest.raises(gv.GraphviewError, match="is a int, not a graphview layer"):
        gv.Sequential([L.ReLU(), 3])
    with pytest.raises(gv.GraphviewError, match="has no layers: give a list or add some first"):
        gv.Sequential(name="empty")(x)


def test_a_layer_called_twice_shares_its_variables_and_sums_their_gradients():
    a, b = R.normal(size=(3, 4)), R.normal(size=(2, 4))
    ca, cb = R.normal(size=(3, 2)), R.normal(size=(2, 2))
    g = gv.Graph("shared")
    xa, xb = g.placeholder("a", (None, 4)), g.placeholder("b", (None, 4))
    dense = L.Dense(2, activation="tanh", seed=9)
    ya, yb = dense(xa), dense(xb)
    g.set_loss(g.math.sum(ya * g.constant("ca", ca)) + g.math.sum(g.math.square(yb) * g.constant("cb", cb)))
    record = g.layers["dense"]
    assert record["variables"] == ["dense/weight", "dense/bias"] and len(dense.variables) == 2
    assert record["calls"] == [{"inputs": ["a"], "output": ya.name}, {"inputs": ["b"], "output": yb.name}]
    assert [n.name for n in g.nodes() if n.kind is gv.VARIABLE] == ["dense/weight", "dense/bias"]
    hand = gv.Graph("hand")
    w, bias = hand.var("w", g.value("dense/weight")), hand.var("bias", g.value("dense/bias"))
    ha, hb = (hand.math.tanh(hand.placeholder(n, (None, 4)) @ w + bias) for n in "ab")
    hand.set_loss(hand.math.sum(ha * hand.constant("ca", ca)) + hand.math.sum(hand.math.square(hb) *
                                                                               hand.constant("cb", cb)))
    loss, grads = GradientStep(g)({"a": a, "b": b})
    hand_loss, hand_grads = GradientStep(hand)({"a": a, "b": b})
    assert loss == pytest.approx(hand_loss, rel=1e-12)
    np.testing.assert_allclose(grads["dense/weight"], hand_grads["w"], rtol=1e-12)
    np.testing.assert_allclose(grads["dense/bias"], hand_grads["bias"], rtol=1e-12)
    _, only_a = GradientStep(hand, ["w"])({"a": a, "b": b * 0})
    assert np.abs(grads["dense/weight"] - only_a["w"]).max() > 1e-3     # both uses contribute
    assert g.summary(params=True).count("dense (Dense)") == 1


def test_sharing_is_refused_across_graphs_for_batch_norm_and_for_clashing_names():
    dense = L.Dense(2)
    g, x, _ = graph_with(dense, (3,))
    other = gv.Graph("other")
    with pytest.raises(gv.GraphviewError, match="belongs to graph 'm'; it cannot be called on variables of "
                                                "graph 'other'"):
        dense(other.placeholder("x", (None, 3)))
    norm = L.BatchNorm()
    norm(x)
    with pytest.raises(gv.GraphviewError, match="is called a second time; a BatchNorm layer's running statistics"):
        norm(x)
    with pytest.raises(gv.NameConflictError, match="already has a layer named 'dense'"):
        L.Dense(2, name="dense")(x)
    taken = gv.Graph("taken")
    taken.var("dense/weight", np.zeros((3, 2)))
    with pytest.raises(gv.NameConflictError, match="already has a variable named 'dense/weight'"):
        L.Dense(2)(taken.placeholder("x", (None, 3)))


def test_a_layer_whose_first_call_failed_is_left_unbound():
    g = gv.Graph("retry")
    unknown, known = g.placeholder("unknown", (None, None)), g.placeholder("known", (None, 3))
    dense = L.Dense(2)
    with pytest.raises(gv.GraphviewError, match=r"feature axis \(1\) of 'unknown' \(None, None\) has no static size"):
        dense(unknown)
    assert "dense" not in g.layers and dense.graph is None
    y = dense(known)                              # builds now, under the same name
    assert y.shape == (None, 2) and g.layers["dense"]["variables"] == ["dense/weight", "dense/bias"]
    with pytest.raises(gv.GraphviewError, match="has no layers"):
        gv.Sequential(name="empty")(known)
    assert "empty" not in g.layers
    half = L.Dense(2, bias_init=gv.init.orthogonal())     # its weight is made before the bias fails
    for _ in range(2):                                      # the call is undone whole, so it fails alike again
        with pytest.raises(gv.ShapeError, match="orthogonal: shape"):
            half(known)
        assert "dense_1" not in g.layers and "dense_1/weight" not in g and half.graph is None
    attention = L.MultiHeadAttention(1)         # both feature sizes are checked before any variable is made
    with pytest.raises(gv.GraphviewError, match=r"the key feature axis \(2\) of 'memory'"):
        attention(g.placeholder("query", (None, 2, 3)), g.placeholder("memory", (None, 2, None)))
    assert attention.graph is None and "multi_head_attention/w_q" not in [n.name for n in g.nodes()]


# --- the summary table ---------------------------------------------------------------------------

def issue_cnn():
    g = gv.Graph("cnn")
    x = g.placeholder("x", (None, 1, 8, 8))
    y = g.placeholder("y", (None,), dtype="int64")
    model = gv.Sequential([L.Conv2D(16, 3, padding="same"), L.ReLU(),
                           L.Conv2D(32, 3, padding="same"), L.BatchNorm(), L.ReLU(), L.MaxPool2D(2),
                           L.Flatten(), L.Dropout(0.25), L.Dense(10)], name="net", seed=0)
    logits = model(x)
    g.set_loss(g.loss.softmax_cross_entropy(logits, y, name="loss"))
    return g, model, logits


CNN_ROWS = [("net/conv2d (Conv2D)", "(?, 16, 8, 8)", "160"), ("net/relu (ReLU)", "(?, 16, 8, 8)", "0"),
            ("net/conv2d_1 (Conv2D)", "(?, 32, 8, 8)", "4,640"), ("net/batch_norm (BatchNorm)", "(?, 32, 8, 8)", "128"),
            ("net/relu_1 (ReLU)", "(?, 32, 8, 8)", "0"), ("net/max_pool2d (MaxPool2D)", "(?, 32, 4, 4)", "0"),
            ("net/flatten (Flatten)", "(?, 512)", "0"), ("net/dropout (Dropout)", "(?, 512)", "0"),
            ("net/dense (Dense)", "(?, 10)", "5,130")]


def check_cnn_table(text):
    lines = text.splitlines()
    assert lines[0] == "graph 'cnn': 9 layers"
    assert lines[1].split() == ["layer", "(type)", "output", "shape", "params"]
    rows = [line for line in lines if line.startswith("net/")]
    assert [(row[:26].strip(), row[26:-8].strip(), row[-8:].strip()) for row in rows] == CNN_ROWS
    assert "total params: 10,058 (trainable 9,994, not trainable 64)" in lines
    assert not any(line.startswith("variables outside layers") for line in lines)


def test_summary_params_is_a_keras_table_with_trainable_totals():
    g, model, _ = issue_cnn()
    check_cnn_table(g.summary(params=True))
    assert model.count_params() == 10058 and model.count_params(trainable=True) == 9994
    assert model.count_params(trainable=False) == 64
    assert "net/conv2d/weight" in g.summary() and "VARIABLE (not trained)" in g.summary()


def test_summary_of_shared_layers_and_of_variables_outside_layers():
    g = gv.Graph("mixed")
    dense = L.Dense(2)
    dense(g.placeholder("a", (None, 4)))
    dense(g.placeholder("b", (5, 4)))
    g.var("scale", np.ones(3))
    text = g.summary(params=True)
    assert [line.split() for line in text.splitlines() if line.startswith("dense")] == [
        ["dense", "(Dense)", "multiple", "10"]]
    assert text.startswith("graph 'mixed': 1 layer\n") and "total params: 10 (trainable 10, not trainable 0)" in text
    assert text.splitlines()[-1] == "variables outside layers: 1 (3 values): scale"


def test_the_cli_prints_the_layer_table_of_a_graph_file(tmp_path, capsys):
    g, _, _ = issue_cnn()
    g.save(tmp_path / "cnn.gvz")
    assert main(["summary", str(tmp_path / "cnn.gvz"), "--params"]) == 0
    out = capsys.readouterr().out
    check_cnn_table(out)
    assert out.startswith(g.summary(params=True)) and "losses: loss" in out
    assert main(["summary", str(tmp_path / "cnn.gvz")]) == 0
    assert "total params" not in capsys.readouterr().out


class Scaled(L.Layer):
    """A custom layer with a variable of its own and a Dense made in its build, called in its forward."""

    def build(self, x):
        self.inner = L.Dense(3)
        self.scale = self.add_variable("scale", (3,), x.dtype, "ones")

    def forward(self, x):
        return x.graph.math.mul(self.inner(x), self.scale)


def test_a_custom_layer_counts_its_own_and_its_inner_layers_variables_in_rows_that_add_up():
    model = gv.Sequential([Scaled(), L.Dense(2)], name="net")
    g, x, y = graph_with(model, (4,))
    assert [v.name for v in model.variables] == ["net/scaled/scale", "net/scaled/dense/weight",
                                                 "net/scaled/dense/bias", "net/dense/weight", "net/dense/bias"]
    assert model[0].count_params() == 18 and model.count_params() == 26
    rows = [line.split() for line in g.summary(params=True).splitlines() if line.startswith("net/")]
    assert rows == [["net/scaled", "(Scaled)", "(?,", "3)", "3"], ["net/scaled/dense", "(Dense)", "(?,", "3)", "15"],
                    ["net/dense", "(Dense)", "(?,", "2)", "8"]]
    assert "total params: 26 (trainable 26, not trainable 0)" in g.summary(params=True)


# --- graph files ---------------------------------------------------------------------------------

def digits_like(n=48, seed=5):
    r = np.random.default_rng(seed)
    y = np.arange(n) % 10
    x = r.normal(size=(n, 1, 8, 8)) + y[:, None, None, None] * 0.2
    return x, y


def fit_once(g):
    x, y = digits_like()
    config = gv.TrainingConfig(gv.Adam(0.01), ["x"], ["y"])
    g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), epochs=1, config=config)


def test_a_layered_graph_saved_and_loaded_keeps_its_layers_predicts_and_trains_identically(tmp_path):
    g, model, logits = issue_cnn()
    x, _ = digits_like()
    g.save(tmp_path / "cnn.gvz")
    loaded = gv.load(tmp_path / "cnn.gvz")
    assert loaded.layers == g.layers
    np.testing.assert_array_equal(loaded.predict(x, logits.name), g.predict(x, logits))
    check_cnn_table(loaded.summary(params=True))
    fit_once(g)
    fit_once(loaded)
    for variable in model.variables:              # the running statistics and the dropout masks too
        np.testing.assert_array_equal(loaded.value(variable.name), g.value(variable.name), err_msg=variable.name)
    assert not np.array_equal(g.value("net/batch_norm/running_mean"), np.zeros(32))
    np.testing.assert_array_equal(loaded.predict(x, logits.name), g.predict(x, logits))


def tampered(tmp_path, change):
    g, _, _ = issue_cnn()
    g.save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["graph.json"])
    change(document["layers"], document)
    members["graph.json"] = json.dumps(document)
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return tmp_path / "bad.gvz"


def _set(index, key, value):
    def change(layers, document):
        layers[index][key] = value
    return change


CORRUPTIONS = [
    (lambda layers, document: document.update(layers={"net": {}}), "'layers' must be a list of layer records"),
    (lambda layers, document: layers[1].pop("calls"), "layer 1 is not a record with name, type, parent"),
    (lambda layers, document: layers[1].update(extra=1), "layer 1 is not a record with name, type, parent"),
    (_set(2, "name", "net/conv2d"), "layer 2: name 'net/conv2d' is not a new layer name"),
    (_set(1, "type", 3), "layer 1: name 'net/conv2d' is not a new layer name or type is not a string"),
    (_set(1, "parent", "nowhere"), "parent 'nowhere' is not an earlier layer"),
    (lambda layers, document: layers.reverse(), "parent 'net' is not an earlier layer"),
    (_set(1, "variables", ["net/conv2d/kernel"]), "variables .* are not nodes of the graph"),
    (_set(1, "calls", [{"inputs": ["x"], "output": "nope"}]), "calls .* are not {inputs, output} of graph nodes"),
    (_set(1, "calls", [{"inputs": "x", "output": "net/conv2d/conv2d"}]), "calls .* are not {inputs, output}"),
]


@pytest.mark.parametrize("index", range(len(CORRUPTIONS)))
def test_a_corrupted_layer_record_is_refused_on_load(tmp_path, index):
    change, message = CORRUPTIONS[index]
    with pytest.raises(gv.GraphFileError, match=message):
        gv.load(tampered(tmp_path, change))


# --- argument errors -----------------------------------------------------------------------------

ARGUMENT_ERRORS = [
    (lambda: L.Dense(0), "Dense: units must be an int >= 1, not 0"), (lambda: L.Dense(2.5), "units .*not 2.5"),
    (lambda: L.LSTM(True), "LSTM: units must be an int >= 1, not True"),
    (lambda: L.Conv2D(0, 3), "Conv2D: filters must be an int >= 1"), (lambda: L.Conv1D(4, 0), "Conv1D: kernel_size 0 holds a value below 1"),
    (lambda: L.Conv2D(4, (3, 3, 3)), r"Conv2D: kernel_size \(3, 3, 3\) is not an int or 2 ints"),
    (lambda: L.Conv2D(6, 3, groups=4), "Conv2D: filters 6 is not divisible by groups 4"),
    (lambda: L.Conv2D(4, 3, layout="bcwh"), "Conv2D: layout 'bcwh' is not one of 'bchw', 'bhwc'"),
    (lambda: L.LSTM(3, layout="bft"), "LSTM: layout must be 'btf' or 'tbf'"), (lambda: L.Dropout(1.0), r"in \[0, 1\)"),
    (lambda: L.Dense(2, activation="relu6"), "Dense: unknown activation 'relu6'; one of elu, gelu, "),
    (lambda: L.Activation("swish"), "unknown activation 'swish'"), (lambda: L.LeakyReLU(slope=0.1), "it takes alpha"),
    (lambda: L.Dense(2, kernel_init="glorot"), "initializer 'glorot' is not an Initializer"),
    (lambda: L.Dense(2, name="a/b"), "Dense: name must be a non-empty string without '/'"),
    (lambda: L.Dense(2, seed=-1), "Dense: seed must be None or an int >= 0, not -1"),
    (lambda: L.Reshape((2, -1, -1)), r"Reshape: shape \(2, -1, -1\) may hold one -1"),
    (lambda: L.Reshape(4), "Reshape: shape must be a tuple of ints"),
    (lambda: L.Dense(2, use_bias="no"), "Dense: use_bias must be True or False, not 'no'"),
    (lambda: L.BatchNorm(axis=1, layout="bhwc"), "BatchNorm: give axis or layout, not both"),
    (lambda: L.MultiHeadAttention(0), "MultiHeadAttention: num_heads must be an int >= 1"),
    (lambda: L.MultiHeadAttention(2, causal="yes"), "causal must be True or False, not 'yes'"),
    (lambda: L.GRU(2, return_sequences=1), "GRU: return_sequences must be True or False, not 1"),
    (lambda: L.Conv1D(2, 3, use_bias=None), "Conv1D: use_bias must be True or False, not None"),
]


@pytest.mark.parametrize("index", range(len(ARGUMENT_ERRORS)))
def test_bad_arguments_are_refused_when_the_layer_is_made(index):
    make, message = ARGUMENT_ERRORS[index]
    with pytest.raises(gv.GraphviewError, match=message):
        make()


def test_bad_inputs_are_refused_when_the_layer_is_called():
    g = gv.Graph("calls")
    features, img = g.placeholder("f", (None, 3)), g.placeholder("img", (None, 3, 5, 5))
    cases = [
        (lambda: L.Dense(2)(g.placeholder("open", (None, None))), gv.GraphviewError,
         r"layer 'dense' \(Dense\): the feature axis \(1\) of 'open' \(None, None\) has no static size"),
        (lambda: L.Conv2D(4, 3, groups=2)(img), gv.OpArgumentError,
         "'img' has 3 channels, not divisible by groups 2"),
        (lambda: L.Dense(2)(np.ones((2, 3))), gv.GraphviewError,
         r"Dense layer: call it on graph variables \(placeholders or op outputs\), not ndarray"),
        (lambda: L.ReLU()(), gv.GraphviewError, "call it on graph variables .*not nothing"),
        (lambda: L.ReLU()(features, 3.0), gv.GraphviewError, "not Variable, float"),
        (lambda: L.Dense(2, dtype="int32")(features), gv.OpArgumentError, "dtype must be float32 or float64"),
        (lambda: L.Dense(2, axis=5)(features), gv.OpArgumentError, r"axis 5 is not an axis of 'f' \(None, 3\)"),
        (lambda: L.Dense(2, axis=gv.Dim("nope", 3))(features), gv.GraphviewError, "Dim\\('nope', 3\\) is not an axis"),
        (lambda: L.MultiHeadAttention(2)(g.placeholder("q", (None, 4, 5))), gv.OpArgumentError,
         "2 heads do not divide embed_dim 5"),
        (lambda: L.Embedding(5, 2, padding_idx=7)(g.placeholder("ids", (None,), "int64")), gv.OpArgumentError,
         "padding_idx 7 is not a row of a table of 5 rows"),
        (lambda: L.Reshape((4, 4))(img), gv.ShapeError, r"cannot reshape 'img' \(None, 3, 5, 5\) to \(batch, 4, 4\)"),
        (lambda: L.Flatten()(g.placeholder("v", (None, None))), gv.ShapeError, "needs a batch axis and static sizes"),
        (lambda: L.Dense(2).count_params(), gv.GraphviewError, "has no variables yet: call it on an input first"),
    ]
    for make, error, message in cases:
        with pytest.raises(error, match=message):
            make()
