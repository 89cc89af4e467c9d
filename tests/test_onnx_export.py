"""gv.onnx export (issue 20): exported models run in onnxruntime and give graphview's inference outputs.

The examples' MLP, CNN and LSTM, every op of the export table on small random inputs, symbolic batch
dims, the checker, and the errors (all unsupported ops in one, a bad opset, before anything is written).
"""
import importlib
import pathlib
import sys

import numpy as np
import pytest

import graphview as gv
ex = importlib.import_module("graphview.onnx.export")   # the module: gv.onnx.export is its function

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx_helpers import assert_outputs_match, outputs_of, run_onnx  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import cnn_digits  # noqa: E402
import mlp  # noqa: E402
import sequence_digits  # noqa: E402
import train_digits  # noqa: E402


def check_export(graph, outputs, feeds, rtol=1e-5, atol=1e-6, opset=17):
    model = ex.to_model(graph, outputs, opset)
    onnx.checker.check_model(model, full_check=True)
    got, want = run_onnx(model, feeds), outputs_of(graph, feeds, outputs)
    assert_outputs_match(got, want, rtol, atol, names=outputs)
    return model


# --- the examples ---------------------------------------------------------------------------------

def test_mlp_example_logits_and_loss(tmp_path):
    graph, feeds = mlp.build(batch=8)        # examples/mlp.py: float64, tanh
    logits = graph.node("loss").inputs[0]
    check_export(graph, [logits, "loss"], feeds, rtol=1e-12, atol=1e-12)
    path = ex.export(graph, tmp_path / "mlp.onnx", logits)
    loaded = onnx.load(path)
    assert [i.name for i in loaded.graph.input] == ["x"]
    assert [o.name for o in loaded.graph.output] == [logits]
    assert {i.name for i in loaded.graph.initializer} >= {"hidden/w", "hidden/b", "output/w", "output/b"}
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(
        next(i for i in loaded.graph.initializer if i.name == "hidden/w")), graph.value("hidden/w"))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_digits_mlp_example(dtype):
    graph = train_digits.build_mlp(dtype=dtype)       # examples/train_digits.py: relu, 64 -> 128 -> 10
    x = np.random.default_rng(2).uniform(0, 16, (9, 64)).astype(dtype)
    rtol, atol = (1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-12)
    check_export(graph, ["logits", "loss"], {"x": x, "y": np.arange(9) % 10}, rtol=rtol, atol=atol)


def cnn(dtype, seed=0):
    """examples/cnn_digits.py's model (conv, relu, batch norm with trained-looking running stats, max pool,
    flatten, dropout, dense)."""
    g, logits = cnn_digits.build_cnn(dtype, seed)
    r = np.random.default_rng(seed)
    g.set_value("net/batch_norm/running_mean", r.normal(0, 0.1, 32).astype(dtype))
    g.set_value("net/batch_norm/running_var", r.uniform(0.5, 2.0, 32).astype(dtype))
    return g, logits.name


def test_cnn_float32_matches_and_batch_is_symbolic():
    graph, logits = cnn("float32")
    model = ex.to_model(graph, logits)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    for batch in (5, 2):
        x = np.random.default_rng(batch).normal(size=(batch, 1, 8, 8)).astype(np.float32)
        check_export(graph, [logits], {"x": x}, rtol=1e-5, atol=1e-6)
    ops = {node.op_type for node in model.graph.node}
    assert {"Conv", "BatchNormalization", "MaxPool", "Reshape", "Identity", "MatMul"} <= ops


def test_cnn_float64_cannot_run_conv_in_onnxruntime_but_checks():
    graph, logits = cnn("float64")
    model = ex.to_model(graph, logits)
    onnx.checker.check_model(model, full_check=True)   # onnxruntime's CPU build has no float64 Conv
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE


def recurrent_results(graph):
    """The names of the lstm's outputs, h_n and c_n in ``graph``: the permute of the steps' view and the two
    final-row views of its state columns' view (ops/recurrent.py's _results)."""
    packed = next(node.name for node in graph.nodes() if node.op == "lstm")
    columns = next(node.name for node in graph.nodes() if node.op == "create_view" and node.inputs[0] == packed)
    views = [node for node in graph.nodes() if node.op == "create_view" and node.inputs[0] == columns]
    finals = sorted((node for node in views if node.attributes["descriptors"][0][0] == gv.indexing.POINT),
                    key=lambda node: node.attributes["descriptors"][2][3])
    steps = next(node.name for node in views if node not in finals)
    outputs = next(node.name for node in graph.nodes() if node.op == "permute" and node.inputs[0] == steps)
    return [outputs] + [node.name for node in finals]


def test_lstm_with_lengths_matches():
    graph, logits = sequence_digits.build_model(hidden=5, dtype="float32")
    r = np.random.default_rng(3)
    outputs = [logits.name] + recurrent_results(graph)
    for batch, steps in ((4, 7), (3, 2)):
        lengths = r.integers(0, steps + 1, batch)
        lengths[0] = steps
        x = r.uniform(0, 1, (batch, steps, 8)).astype(np.float32)
        x[np.arange(steps)[None, :] >= lengths[:, None]] = 1e6    # padding changes nothing
        check_export(graph, outputs, {"x": x, "seq_len": lengths}, rtol=1e-5, atol=1e-6)
    model = ex.to_model(graph, logits.name)
    assert [i.name for i in model.graph.input] == ["x", "seq_len"]
    assert model.graph.input[0].type.tensor_type.shape.dim[1].dim_param == "x_d1"


def small_lstm():
    """A graph with an lstm, its outputs and the name of its packed result."""
    g = gv.Graph()
    x = g.placeholder("x", (None, 3, 2), "float32")
    r = np.random.default_rng(0)
    weights = [g.var(n, r.normal(size=s).astype(np.float32)) for n, s in
               (("wi", (16, 2)), ("wh", (16, 4)), ("bi", (16,)), ("bh", (16,)))]
    h0, c0 = (g.constant(name, np.zeros((2, 4), np.float32)) for name in ("h0", "c0"))
    outputs, _, _ = g.nn.lstm(x, h0, c0, *weights)
    return g, outputs, next(node.name for node in g.nodes() if node.op == "lstm")


def test_lstm_gate_values_are_not_exported():
    g, outputs, packed = small_lstm()
    gates = g.shape.create_view(g[packed], gv.all(), gv.all(), gv.interval(8, 12), name="gates")
    with pytest.raises(ex.UnsupportedOpsError, match=r"lstm: .*gates reads gate values"):
        ex.to_model(g, [outputs.name, gates.name])


@pytest.mark.parametrize("which", ["the results' view", "a view of its own"])
def test_lstm_state_columns_are_not_exported_as_they_are(which):
    """[h | c] of every row: ONNX's LSTM gives no per-step c, so the exporter refuses it rather than give 0s."""
    g, outputs, packed = small_lstm()
    columns = next(node.name for node in g.nodes() if node.op == "create_view" and node.inputs[0] == packed)
    view = g[columns] if which == "the results' view" else g[packed][:, :, :8]
    with pytest.raises(ex.UnsupportedOpsError, match=r"lstm: .*gives every step's cell state"):
        ex.to_model(g, [outputs.name, view.name])


@pytest.mark.parametrize("op", ["lstm", "gru"])
@pytest.mark.parametrize("layout", ["btf", "tbf"])
def test_recurrent_with_initial_states_and_lengths_matches(op, layout):
    """Given initial states and a length of 0 (whose final states are the initial ones), both layouts."""
    g = gv.Graph()
    x = g.placeholder("x", (None, None, 3), "float32")
    lengths = g.placeholder("lengths", (None,), "int64")
    states = [g.placeholder(name, (None, 4), "float32") for name in ("h0", "c0")[:2 if op == "lstm" else 1]]
    r = np.random.default_rng(1)
    gates = 16 if op == "lstm" else 12
    weights = [g.var(n, r.normal(0, 0.5, s).astype(np.float32)) for n, s in
               (("wi", (gates, 3)), ("wh", (gates, 4)), ("bi", (gates,)), ("bh", (gates,)))]
    results = getattr(g.nn, op)(x, *states, *weights, lengths=lengths, layout=layout)
    batch, steps = 3, 5
    values = r.normal(size=(batch, steps, 3) if layout == "btf" else (steps, batch, 3)).astype(np.float32)
    feeds = {"x": values, "lengths": np.array([5, 2, 0]), "h0": r.normal(size=(batch, 4)).astype(np.float32),
             "c0": r.normal(size=(batch, 4)).astype(np.float32)}
    feeds = {name: feeds[name] for name in ["x", "lengths"] + [state.name for state in states]}
    model = check_export(g, [result.name for result in results], feeds)
    assert op.upper() in {node.op_type for node in model.graph.node}


# --- the op table, op by op -------------------------------------------------------------------------

R = np.random.default_rng(7)
X = R.normal(size=(2, 3, 4)).astype(np.float32)
POSITIVE = np.abs(X) + 0.5


def graph_op(name, *inputs, **attrs):
    """An op with no public function of its own (made by layouts and masking), called by its registered name."""
    return gv.registry.op(name)(*inputs, **attrs)


def v(g, name, shape, dtype="float32", scale=1.0):
    return g.var(name, (R.normal(size=shape) * scale).astype(dtype))


def stats(g, n):
    """Running mean and variance for batch_norm (state, not parameters)."""
    return (g.var("mean", R.normal(size=n).astype("float32"), trainable=False),
            g.var("var", R.uniform(0.5, 2, n).astype("float32"), trainable=False))


CASES = {
    "abs": lambda g, x: g.math.abs(x), "neg": lambda g, x: -x, "exp": lambda g, x: g.math.exp(x),
    "log": lambda g, x: g.math.log(g.math.abs(x) + 0.5), "sqrt": lambda g, x: g.math.sqrt(g.math.abs(x)),
    "tanh": lambda g, x: g.math.tanh(x), "sigmoid": lambda g, x: g.nn.sigmoid(x), "relu": lambda g, x: g.nn.relu(x),
    "sin": lambda g, x: g.math.sin(x), "cos": lambda g, x: g.math.cos(x), "sign": lambda g, x: g.math.sign(x),
    "reciprocal": lambda g, x: g.math.reciprocal(g.math.abs(x) + 1), "square": lambda g, x: g.math.square(x),
    "softplus": lambda g, x: g.nn.softplus(x * 10), "gelu": lambda g, x: g.nn.gelu(x),
    "leaky_relu": lambda g, x: g.nn.leaky_relu(x, alpha=0.2), "elu": lambda g, x: g.nn.elu(x, alpha=0.7),
    "selu": lambda g, x: g.nn.selu(x), "hard_tanh": lambda g, x: g.nn.hard_tanh(x * 2),
    "silu": lambda g, x: g.nn.silu(x), "log_sigmoid": lambda g, x: g.nn.log_sigmoid(x * 10),
    "add": lambda g, x: x + v(g, "b", (4,)), "sub": lambda g, x: 2.0 - x, "mul": lambda g, x: x * v(g, "b", (3, 1)),
    "div": lambda g, x: x / (g.math.abs(v(g, "b", (4,))) + 1), "pow": lambda g, x: g.math.pow(g.math.abs(x), 1.5),
    "maximum": lambda g, x: g.math.maximum(x, v(g, "b", (4,))), "minimum": lambda g, x: g.math.minimum(x, 0.1),
    "matmul": lambda g, x: x @ v(g, "w", (4, 5)),
    "eq": lambda g, x: g.math.cast(g.math.eq(g.nn.relu(x), 0.0), "float32"),
    "ne": lambda g, x: g.math.cast(g.math.ne(g.nn.relu(x), 0.0), "float32"),
    "lt": lambda g, x: g.math.cast(g.math.lt(x, 0.1), "float32"), "le": lambda g, x: g.math.cast(x <= 0.1, "float32"),
    "gt": lambda g, x: g.math.cast(x > 0.1, "float32"), "ge": lambda g, x: g.math.cast(x >= 0.1, "float32"),
    "where": lambda g, x: g.math.where(x > 0, x, x * 3), "cast": lambda g, x: g.math.cast(x * 3, "int64"),
    "sum": lambda g, x: g.math.sum(x, axis=(0, 2)), "mean": lambda g, x: g.math.mean(x, axis=1, keepdims=True),
    "max": lambda g, x: g.math.max(x, axis=-1), "min": lambda g, x: g.math.min(x),
    "prod": lambda g, x: g.math.prod(x, axis=2), "logsumexp": lambda g, x: g.math.logsumexp(x, axis=1),
    "argmax": lambda g, x: g.math.argmax(x, axis=1), "argmin": lambda g, x: g.math.argmin(x, axis=2, keepdims=True),
    "softmax": lambda g, x: g.nn.softmax(x), "softmax (two axes)": lambda g, x: g.nn.softmax(x, axis=(1, 2)),
    "log_softmax": lambda g, x: g.nn.log_softmax(x, axis=1),
    "log_softmax (two axes)": lambda g, x: g.nn.log_softmax(x, axis=(0, 2)),
    "create_view": lambda g, x: x[1:, None, ::-2, -1], "create_view (inclusive)": lambda g, x: x[..., -1, 1:3],
    "reshape": lambda g, x: g.shape.reshape(x, (-1, 4)), "permute": lambda g, x: g.shape.permute(x, (2, 0, 1)),
    "transpose": lambda g, x: g.linalg.transpose(x), "squeeze": lambda g, x: g.shape.squeeze(x[:, :1], axis=1),
    "expand_dims": lambda g, x: g.shape.expand_dims(x, (0, -1)),
    "broadcast_to": lambda g, x: g.shape.broadcast_to(x[:, :1], (2, 5, 4)),
    "concat": lambda g, x: g.shape.concat([x, x * 2], axis=1), "stack": lambda g, x: g.shape.stack([x, -x], axis=2),
    "gather": lambda g, x: g.shape.gather(x, g.constant("idx", np.array([2, 0, 2])), axis=1),
    "embedding": lambda g, x: g.nn.embedding(g.math.cast(g.math.abs(x) * 2, "int64"), v(g, "table", (6, 3))),
    "pad": lambda g, x: g.shape.pad(x, ((0, 0), (1, 2), (2, 0)), value=0.5),
    "pad (reflect)": lambda g, x: g.shape.pad(x, ((0, 0), (1, 1), (2, 1)), mode="reflect"),
    "dropout": lambda g, x: g.nn.dropout(x, 0.5),
    "merge_axes": lambda g, x: graph_op("merge_axes", x, start=1, stop=3),
    "merge_axes_copy": lambda g, x: graph_op("merge_axes_copy", x, start=0, stop=2),
    "split_axis": lambda g, x: graph_op("split_axis", x, axis=2, sizes=(2, -1)),
    "reshape_like": lambda g, x: graph_op("reshape_like", x[:, 1:] * 1, x[:, :2, None, :]),
    "broadcast_like": lambda g, x: graph_op("broadcast_like", x[:, :1], x),
    "numel": lambda g, x: x * graph_op("numel", x, axis=(0, 2)),
    "step": lambda g, x: graph_op("step", x),
    "check_lengths": lambda g, x: g.math.cast(graph_op("check_lengths", g["lengths"], x, axis=1, batch_axis=0,
                                                       source="lengths"), "float32"),
    "layer_norm": lambda g, x: g.nn.layer_norm(x, v(g, "gamma", (4,)), v(g, "beta", (4,))),
    "layer_norm (two axes)": lambda g, x: g.nn.layer_norm(x, v(g, "gamma", (3, 4)), v(g, "beta", (3, 4)), axis=(1, 2)),
    "batch_norm": lambda g, x: g.nn.batch_norm(x, v(g, "ga", (3,)), v(g, "be", (3,)), *stats(g, 3)),
    "batch_norm (last axis)": lambda g, x: g.nn.batch_norm(x, v(g, "ga", (4,)), v(g, "be", (4,)), *stats(g, 4),
                                                           axis=-1),
    "conv1d": lambda g, x: g.nn.conv1d(x, v(g, "w", (5, 3, 2)), v(g, "b", (5,)), padding=((1, 2),), stride=2),
    "conv1d (bwc, dilated)": lambda g, x: g.nn.conv1d(x, v(g, "w", (2, 4, 2)), layout="bwc", dilation=2),
    "max_pool1d": lambda g, x: g.nn.max_pool1d(x, 2, stride=1, padding=1),
    "avg_pool1d": lambda g, x: g.nn.avg_pool1d(x, 3, stride=1, padding=1),
    "avg_pool1d (no pad count)": lambda g, x: g.nn.avg_pool1d(x, 3, stride=2, padding=1, count_include_pad=False),
    "global_avg_pool": lambda g, x: g.nn.global_avg_pool(x, layout="bcw"),
    "global_avg_pool (bwc)": lambda g, x: g.nn.global_avg_pool(x, layout="bwc"),
    "masked_sum": lambda g, x: gv.masked_sum(x, g["lengths"], axis=1),
    "masked_mean": lambda g, x: gv.masked_mean(x, g["lengths"], axis=(1, 2), keepdims=True),
    "masked_max": lambda g, x: gv.masked_max(x, g["lengths"], axis=1),
    "masked_min": lambda g, x: gv.masked_min(x, g["lengths"], axis=1),
    "masked_softmax": lambda g, x: gv.masked_softmax(x, g["lengths"]),
    "masked_log_softmax": lambda g, x: gv.masked_log_softmax(x, g["lengths"]),
    "masked_logsumexp": lambda g, x: gv.masked_logsumexp(x, g["lengths"], axis=(1, 2)),
    "sequence_mask": lambda g, x: g.math.where(graph_op("sequence_mask", g["lengths"], x), x, -1.0),
    "masked_count": lambda g, x: graph_op("masked_count", x, g["lengths"], axis=1),
    "causal_mask": lambda g, x: g.nn.scaled_dot_product_attention(x, x * 2, x * 3, causal=True),
    "mean_squared_error": lambda g, x: g.loss.mean_squared_error(x, x * x),
    "l1": lambda g, x: g.loss.l1(x, 0.5 - x, reduction="sum"),
    "huber": lambda g, x: g.loss.huber(x, -x, delta=0.8, reduction="none"),
    "binary_cross_entropy_with_logits": lambda g, x: g.loss.binary_cross_entropy_with_logits(
        x * 10, g.nn.sigmoid(x * 3)),
    "nll": lambda g, x: g.loss.nll(g.nn.log_softmax(x, axis=1), g.math.cast(g.math.abs(x[:, 0]) * 1.5, "int64"),
                                   reduction="none"),
    "nll (ignored labels)": lambda g, x: g.loss.nll(g.nn.log_softmax(x, axis=1), g.math.cast(x[:, 0] > 0, "int64"),
                                                    ignore_index=1),
    "masked_softmax_cross_entropy": lambda g, x: gv.masked_softmax_cross_entropy(
        x, g.math.cast(g.math.abs(x[..., 0]) * 1.3, "int64"), g["lengths"]),
    "one_hot": lambda g, x: graph_op("one_hot", g.math.cast(g.math.abs(x[..., 0]) * 1.3, "int64"), x),
    "assign_": lambda g, x: g.assign_(v(g, "s", (3, 4, 5))[1:, 2, ::2], x[0, :2, :3]),
    "add_": lambda g, x: g.add_(v(g, "s", (2, 3, 4))[:, 1], x[:, 0]),
    "sub_": lambda g, x: g.sub_(v(g, "s", (4, 3)), 1.5),
    "mul_": lambda g, x: g.mul_(v(g, "s", (2, 3, 4))[..., 1:3], x[..., :2]),
    "div_": lambda g, x: g.div_(v(g, "s", (2, 3, 4))[0], g.math.abs(x[1]) + 1),
}
IMAGE_CASES = {
    "conv2d": lambda g, x: g.nn.conv2d(x, v(g, "w", (4, 2, 3, 2)), v(g, "b", (4,)), padding=((1, 0), (2, 1)),
                                       stride=(2, 1)),
    "conv2d (bhwc, groups)": lambda g, x: g.nn.conv2d(x, v(g, "w", (4, 2, 2, 2)), layout="bhwc", groups=2),
    "conv_transpose2d": lambda g, x: g.nn.conv_transpose2d(x, v(g, "w", (2, 6, 3, 2)), v(g, "b", (12,)), stride=(2, 3),
                                                           padding=((1, 0), (0, 1)), output_padding=(1, 2), groups=2),
    "conv_transpose2d (bhwc)": lambda g, x: g.nn.conv_transpose2d(x, v(g, "w", (4, 3, 2, 2)), layout="bhwc", stride=2),
    "max_pool2d": lambda g, x: g.nn.max_pool2d(x, (2, 3), stride=(1, 2), padding=(1, 1)),
    "avg_pool2d": lambda g, x: g.nn.avg_pool2d(x, 2, stride=2),
    "avg_pool2d (padded)": lambda g, x: g.nn.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
    "global_avg_pool (bchw)": lambda g, x: g.nn.global_avg_pool(x),
}


# onnxruntime's CPU build has no float64 kernel for these (the models pass the checker).
NO_FLOAT64_KERNEL = ("conv", "avg_pool", "gelu")


def build_case(cases, case, dtype):
    """The graph of ``case`` on a placeholder x (and lengths), its output and feeds, variables in ``dtype``."""
    g = gv.Graph("case")
    shape = (None, 3, 4) if cases is CASES else (None, 5, 6, 4) if "bhwc" in case else (None, 2, 5, 6)
    x = g.placeholder("x", shape, dtype)
    g.placeholder("lengths", (None,), "int64")
    with pytest.MonkeyPatch.context() as patch:
        if dtype == "float64":
            patch.setattr(sys.modules[__name__], "v", lambda g, name, shape: g.var(name, R.normal(size=shape)))
            patch.setattr(sys.modules[__name__], "stats", lambda g, n: (
                g.var("mean", R.normal(size=n), trainable=False), g.var("var", R.uniform(0.5, 2, n), trainable=False)))
        out = cases[case](g, x)
    feeds = {"x": X if cases is CASES else R.normal(size=(2,) + shape[1:]), "lengths": np.array([0, 2])}
    feeds["x"] = feeds["x"].astype(dtype)
    return g, out.name, feeds


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_matches_onnxruntime(case):
    g, out, feeds = build_case(CASES, case, "float32")
    for opset in (17, 21):      # the first and last opsets export takes (axes inputs from 18, Gelu from 20)
        check_export(g, [out], feeds, rtol=1e-5, atol=1e-6, opset=opset)
    assert case.split(" ")[0] in {node.op for node in g.nodes()}


@pytest.mark.parametrize("case", sorted(IMAGE_CASES))
def test_image_op_matches_onnxruntime(case):
    g, out, feeds = build_case(IMAGE_CASES, case, "float32")
    for opset in (17, 21):
        check_export(g, [out], feeds, rtol=1e-5, atol=1e-6, opset=opset)


@pytest.mark.parametrize("case", sorted(CASES) + sorted(IMAGE_CASES))
def test_float64_op_matches_onnxruntime(case):
    g, out, feeds = build_case(CASES if case in CASES else IMAGE_CASES, case, "float64")
    if case.startswith(NO_FLOAT64_KERNEL):
        model = ex.to_model(g, out)
        onnx.checker.check_model(model, full_check=True)
        assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    else:
        check_export(g, [out], feeds, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("opset", [17, 18, 20, 21])
def test_opsets(opset):
    g = gv.Graph()
    x = g.placeholder("x", (None, 3, 4), "float32")
    out = g.nn.gelu(g.math.mean(x, axis=1) + g.math.max(x, axis=(1,)))
    model = check_export(g, [out.name], {"x": X}, opset=opset)
    assert model.opset_import[0].version == opset
    assert ("Gelu" in {node.op_type for node in model.graph.node}) == (opset >= 20)


@pytest.mark.parametrize("opset", [16, 22, "17", 17.0, True])
def test_bad_opset_is_refused(opset, tmp_path):
    graph, _ = mlp.build()
    with pytest.raises(ex.OnnxExportError, match="opset must be an int from 17 to 21"):
        ex.export(graph, tmp_path / "m.onnx", "loss", opset=opset)
    assert not (tmp_path / "m.onnx").exists()


def test_unsupported_ops_are_listed_in_one_error(tmp_path):
    g = gv.Graph("odd")
    x = g.placeholder("x", (None, 4), "float32")
    a = g.random.normal((2, 4), name="noise")
    b = g.random.uniform((2, 4), name="u")
    c = g.random.uniform((2, 4), name="u2")
    with pytest.raises(ex.UnsupportedOpsError) as caught:
        ex.export(g, tmp_path / "odd.onnx", [a, b.name, c, x + 1])
    message = str(caught.value)
    assert "3 node(s) of 2 op(s)" in message
    assert "normal: noise (no ONNX form); uniform: u (no ONNX form), u2 (no ONNX form)" in message
    assert set(caught.value.unsupported) == {"uniform", "normal"}
    assert isinstance(caught.value, gv.GraphviewError)
    assert not (tmp_path / "odd.onnx").exists()


def test_bad_outputs_are_refused():
    graph, _ = mlp.build()
    with pytest.raises(gv.UnknownNameError, match="logitz"):
        ex.to_model(graph, "logitz")
    with pytest.raises(ex.OnnxExportError, match="at least one output"):
        ex.to_model(graph, [])
    with pytest.raises(ex.OnnxExportError, match="more than once"):
        ex.to_model(graph, ["loss", "loss"])
    with pytest.raises(ex.OnnxExportError, match="'hidden/w' is a VARIABLE, not an op's result"):
        ex.to_model(graph, ["loss", "hidden/w"])


def test_without_onnx_installed_export_says_how_to_get_it(monkeypatch, tmp_path):
    graph, _ = mlp.build()
    monkeypatch.setitem(sys.modules, "onnx", None)      # what `import onnx` meets when it is not installed
    with pytest.raises(ex.OnnxExportError, match=r"pip install 'graphview\[onnx\]'"):
        ex.export(graph, tmp_path / "m.onnx", "loss")
