"""graphview.layers one layer at a time: outputs against PyTorch with the same weights, gradients, Dims."""
import numpy as np
import pytest

import graphview as gv
from graphview import layers as L
from graphview import runstate
from graphview.training.step import GradientStep

torch = pytest.importorskip("torch")
F = torch.nn.functional
R = np.random.default_rng(17)


def run(layer, *arrays, name="t", **call):
    """``layer`` called on one placeholder per array (batch axis unknown); the graph and the output's value
    in inference mode."""
    g = gv.Graph(name)
    xs = [g.placeholder(f"x{i}", (None,) + a.shape[1:], a.dtype.name) for i, a in enumerate(arrays)]
    y = layer(*xs, **call)
    with gv.inference():
        value = g.output({f"x{i}": a for i, a in enumerate(arrays)}, [y])[y.name]
    return g, value


def t(array):
    return torch.tensor(np.asarray(array))


def copy_into(module, g, layer, names):
    """module's parameter ``attr`` = the layer's variable ``short`` (transposed when asked), for each pair."""
    with torch.no_grad():
        for attr, (short, transpose) in names.items():
            value = g.value(f"{layer.name}/{short}")
            getattr(module, attr).copy_(t(value.T if transpose else value))


def close(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(ours, theirs.detach().numpy() if hasattr(theirs, "detach") else theirs,
                               rtol=rtol, atol=atol)


# --- Dense ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("use_bias, activation", [(True, None), (False, None), (True, "tanh"), (False, "relu")])
def test_dense_is_torch_linear_with_the_weight_transposed(use_bias, activation):
    x = R.normal(size=(5, 7))
    layer = L.Dense(4, activation=activation, use_bias=use_bias, seed=3)
    g, ours = run(layer, x)
    assert [v.name for v in layer.variables] == ["dense/weight"] + (["dense/bias"] if use_bias else [])
    assert layer.weight.shape == (7, 4)
    linear = torch.nn.Linear(7, 4, bias=use_bias).double()
    copy_into(linear, g, layer, {"weight": ("weight", True), **({"bias": ("bias", False)} if use_bias else {})})
    expected = linear(t(x))
    expected = {None: expected, "tanh": torch.tanh(expected), "relu": torch.relu(expected)}[activation]
    close(ours, expected)


def test_dense_on_a_rank_3_input_and_in_float32():
    x = R.normal(size=(2, 3, 6)).astype(np.float32)
    layer = L.Dense(5)
    g, ours = run(layer, x)
    assert ours.dtype == np.float32 and ours.shape == (2, 3, 5) and layer.weight.dtype == np.float32
    linear = torch.nn.Linear(6, 5)
    copy_into(linear, g, layer, {"weight": ("weight", True), "bias": ("bias", False)})
    close(ours, linear(t(x)), rtol=1e-5, atol=1e-6)


# --- convolutions and pools ----------------------------------------------------------------------

CONV2D = [dict(), dict(stride=2, padding=1), dict(padding="same"), dict(groups=2), dict(dilation=2, padding=2),
          dict(stride=(2, 1), padding=(1, 0)), dict(layout="bhwc", stride=2, padding=1), dict(padding="valid"),
          dict(kernel_size=(4, 2), padding="same", dilation=(1, 3))]     # even kernels: torch pads more after


@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths:UserWarning")
@pytest.mark.parametrize("options", CONV2D, ids=[str(o) for o in CONV2D])
def test_conv2d_is_torch_conv2d(options):
    options = dict(options)
    layout, kernel = options.pop("layout", "bchw"), options.pop("kernel_size", (3, 3))
    x = R.normal(size=(2, 4, 7, 6))
    layer = L.Conv2D(6, kernel, layout=layout, **options)
    g, ours = run(layer, x.transpose(0, 2, 3, 1).copy() if layout == "bhwc" else x)
    assert layer.weight.shape == (6, 4 // options.get("groups", 1)) + kernel
    conv = torch.nn.Conv2d(4, 6, kernel, **options).double()
    copy_into(conv, g, layer, {"weight": ("weight", False), "bias": ("bias", False)})
    expected = conv(t(x))
    close(ours, expected.permute(0, 2, 3, 1) if layout == "bhwc" else expected)


CONV1D = [dict(), dict(stride=2, padding=2), dict(padding="same", dilation=2), dict(groups=3, use_bias=False),
          dict(layout="bwc", padding=1, activation="sigmoid")]


@pytest.mark.parametrize("options", CONV1D, ids=[str(o) for o in CONV1D])
def test_conv1d_is_torch_conv1d(options):
    layout, activation = options.pop("layout", "bcw"), options.pop("activation", None)
    use_bias = options.pop("use_bias", True)
    x = R.normal(size=(3, 6, 11))
    layer = L.Conv1D(9, 3, layout=layout, use_bias=use_bias, activation=activation, **options)
    g, ours = run(layer, x.transpose(0, 2, 1).copy() if layout == "bwc" else x)
    conv = torch.nn.Conv1d(6, 9, 3, bias=use_bias, **options).double()
    copy_into(conv, g, layer, {"weight": ("weight", False), **({"bias": ("bias", False)} if use_bias else {})})
    expected = torch.sigmoid(conv(t(x))) if activation else conv(t(x))
    close(ours, expected.permute(0, 2, 1) if layout == "bwc" else expected)


POOLS = [
    (L.MaxPool2D(2), lambda x: F.max_pool2d(x, 2), "bchw"),
    (L.MaxPool2D(3, stride=2, padding=1), lambda x: F.max_pool2d(x, 3, 2, 1), "bchw"),
    (L.AvgPool2D(2), lambda x: F.avg_pool2d(x, 2), "bchw"),
    (L.AvgPool2D(3, stride=2, padding=1), lambda x: F.avg_pool2d(x, 3, 2, 1), "bchw"),
    (L.AvgPool2D(3, stride=2, padding=1, count_include_pad=False),
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), "bchw"),
    (L.MaxPool1D(3, stride=2), lambda x: F.max_pool1d(x, 3, 2), "bcw"),
    (L.AvgPool1D(2, padding=1), lambda x: F.avg_pool1d(x, 2, padding=1), "bcw"),
    (L.GlobalAvgPool(), lambda x: x.mean(dim=(2, 3)), "bchw"),
    (L.GlobalAvgPool(), lambda x: x.mean(dim=2), "bcw"),
    (L.MaxPool2D(2, layout="bhwc"), lambda x: F.max_pool2d(x, 2).permute(0, 2, 3, 1), "bhwc"),
    (L.GlobalAvgPool(layout="bhwc"), lambda x: x.mean(dim=(2, 3)), "bhwc"),
]


@pytest.mark.parametrize("index", range(len(POOLS)))
def test_pools_are_torch_pools(index):
    layer, reference, layout = POOLS[index]
    x = R.normal(size=(2, 3, 9) if layout == "bcw" else (2, 3, 8, 7))
    _, ours = run(layer, x.transpose(0, 2, 3, 1).copy() if layout == "bhwc" else x)
    close(ours, reference(t(x)))


# --- normalization -------------------------------------------------------------------------------

def batch_norm_model(layout="bchw"):
    g = gv.Graph("bn")
    x = g.placeholder("x", (None, 3, 4, 5) if layout == "bchw" else (None, 4, 5, 3))
    layer = L.BatchNorm(layout=layout if layout != "bchw" else None)
    y = layer(x)
    g.set_loss(g.math.sum(y * g.constant("w", R.normal(size=y.shape[1:]))))
    return g, x, y, layer


@pytest.mark.parametrize("layout", ["bchw", "bhwc"])
def test_batch_norm_in_inference_uses_the_running_statistics(layout):
    g, x, y, layer = batch_norm_model(layout)
    bn = torch.nn.BatchNorm2d(3).double().eval()
    with torch.no_grad():
        for attr in ("weight", "bias", "running_mean"):
            getattr(bn, attr).copy_(t(R.normal(size=3)))
        bn.running_var.copy_(t(R.uniform(0.5, 2.0, 3)))
    for attr in ("weight", "bias", "running_mean", "running_var"):
        g.set_value(f"batch_norm/{attr}", getattr(bn, attr).detach().numpy())
    values = R.normal(1.0, 2.0, size=(6, 3, 4, 5))
    feed = values if layout == "bchw" else values.transpose(0, 2, 3, 1)
    expected = bn(t(values)).detach()
    close(g.predict(feed, y), expected if layout == "bchw" else expected.permute(0, 2, 3, 1))


def test_a_batch_norm_training_step_updates_the_running_statistics_as_torch():
    g, x, y, layer = batch_norm_model()
    for short, initial in (("weight", 1), ("bias", 0), ("running_mean", 0), ("running_var", 1)):
        np.testing.assert_array_equal(g.value(f"batch_norm/{short}"), np.full(3, float(initial)))
    assert not g.is_trainable("batch_norm/running_mean") and not g.is_trainable("batch_norm/running_var")
    bn = torch.nn.BatchNorm2d(3, momentum=0.1).double().train()
    batches = [R.normal(2.0, 3.0, size=(5, 3, 4, 5)) for _ in range(2)]
    with runstate.training(0):
        close(g.output({"x": batches[0]}, [y])[y.name], bn(t(batches[0])))     # batch statistics
    bn.running_mean.zero_()
    bn.running_var.fill_(1.0)
    step = GradientStep(g)
    assert "batch_norm/running_mean" not in step.wrt
    for batch in batches:
        step({"x": batch})
        bn(t(batch))
        close(g.value("batch_norm/running_mean"), bn.running_mean)
        close(g.value("batch_norm/running_var"), bn.running_var)   # unbiased, as torch


def test_layer_norm_is_torch_layer_norm():
    x = R.normal(size=(4, 3, 6))
    layer = L.LayerNorm()
    g, ours = run(layer, x)
    ln = torch.nn.LayerNorm(6).double()
    close(ours, ln(t(x)))     # ones and zeros
    for short in ("weight", "bias"):
        g.set_value(f"layer_norm/{short}", R.normal(size=6))
    copy_into(ln, g, layer, {"weight": ("weight", False), "bias": ("bias", False)})
    out = g.layers["layer_norm"]["calls"][0]["output"]
    with gv.inference():
        close(g.output({"x0": x}, [out])[out], ln(t(x)))
    layer2 = L.LayerNorm(axis=(-2, -1), eps=1e-3)
    g2, ours2 = run(layer2, x)
    assert layer2.gamma.shape == (3, 6)
    close(ours2, F.layer_norm(t(x), (3, 6), eps=1e-3))


# --- embedding -----------------------------------------------------------------------------------

def test_embedding_rows_padding_row_and_its_gradient_as_torch():
    ids = np.array([[1, 0, 4], [0, 3, 3]], np.int64)
    g = gv.Graph("emb")
    x = g.placeholder("ids", (None, 3), "int64")
    layer = L.Embedding(5, 4, padding_idx=0, seed=2)
    y = layer(x)
    weights = R.normal(size=(2, 3, 4))
    g.set_loss(g.math.sum(y * g.constant("w", weights)))
    table = g.value("embedding/weight")
    assert table.dtype == np.float64
    np.testing.assert_array_equal(table[0], np.zeros(4))
    assert np.abs(table[1:]).max() > 0.5
    emb = torch.nn.Embedding(5, 4, padding_idx=0).double()
    with torch.no_grad():
        emb.weight.copy_(t(table))
    expected = emb(t(ids))
    close(g.predict(ids, y), expected)
    _, grads = GradientStep(g)({"ids": ids})
    (expected * t(weights)).sum().backward()
    close(grads["embedding/weight"], emb.weight.grad)
    np.testing.assert_array_equal(grads["embedding/weight"][0], np.zeros(4))


# --- recurrent -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, return_sequences, layout", [
    ("LSTM", False, "btf"), ("LSTM", True, "btf"), ("GRU", False, "btf"), ("GRU", True, "btf"), ("LSTM", True, "tbf"),
    ("GRU", False, "tbf")])
def test_recurrent_layers_are_torch_rnns_with_the_weights_of_layer_0(kind, return_sequences, layout):
    x = R.normal(size=(3, 5, 4))
    layer = getattr(L, kind)(6, return_sequences=return_sequences, layout=layout)
    g, ours = run(layer, x)
    rnn = getattr(torch.nn, kind)(4, 6, batch_first=layout == "btf").double()
    copy_into(rnn, g, layer, {f"{w}_l0": (w, False) for w in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")})
    outputs, state = rnn(t(x))
    h_n = state[0] if kind == "LSTM" else state
    assert ours.shape == (outputs.shape if return_sequences else (x.shape[0 if layout == "btf" else 1], 6))
    close(ours, outputs if return_sequences else h_n[0])


# --- attention -----------------------------------------------------------------------------------

def torch_attention(g, layer, d, heads, kdim=None, vdim=None):
    mha = torch.nn.MultiheadAttention(d, heads, batch_first=True, kdim=kdim, vdim=vdim).double()
    with torch.no_grad():
        if kdim is None:
            w_q, w_k, w_v = mha.in_proj_weight.split(d)
        else:
            w_q, w_k, w_v = mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight
        for target, short in ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v"), (mha.out_proj.weight, "w_o")):
            target.copy_(t(g.value(f"{layer.name}/{short}")))
        biases = np.concatenate([R.normal(size=d) for _ in range(3)])
        mha.in_proj_bias.copy_(t(biases))
        mha.out_proj.bias.copy_(t(R.normal(size=d)))
    for i, part in enumerate("qkv"):
        g.set_value(f"{layer.name}/b_{part}", biases[i * d:(i + 1) * d])
    g.set_value(f"{layer.name}/b_o", mha.out_proj.bias.detach().numpy())
    return mha


def test_self_attention_over_a_time_dim_is_torch_attention_with_a_key_padding_mask():
    time = gv.Dim("time")
    x, lengths = padded_sequences(n=3, steps=5, features=8)
    g = gv.Graph("self")
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, gv.Dim("feature", 8)), lengths={time: "n"})
    layer = L.MultiHeadAttention(2)
    y = layer(seq)
    np.testing.assert_array_equal(g.value("multi_head_attention/b_q"), np.zeros(8))    # torch's zero biases
    mha = torch_attention(g, layer, 8, 2)
    got = g.predict({"seq": x, "n": lengths}, y)
    padding = t(np.arange(5)[None] >= lengths[:, None])                  # True = blocked, as torch
    expected = mha(t(x), t(x), t(x), key_padding_mask=padding)[0].detach().numpy()
    for row, n in enumerate(lengths):
        close(got[row, :n], expected[row, :n])
    assert lengths[0] == 5 and lengths.min() < 5


def test_cross_attention_and_a_bool_mask_with_the_opposite_convention():
    q, kv = R.normal(size=(2, 3, 6)), R.normal(size=(2, 4, 5))
    g = gv.Graph("cross")
    query, memory = g.placeholder("q", (None, 3, 6)), g.placeholder("m", (None, 4, 5))
    blocked = np.array([[False, True, False, True]] * 3)
    blocked[2] = [True, False, False, False]
    layer = L.MultiHeadAttention(3)
    plain = layer(query, memory)
    masked = layer(query, memory, memory, mask=g.constant("attend", ~blocked))
    causal = layer(query, memory, causal=True)
    assert layer.w_k.shape == (6, 5) and len(g.layers[layer.name]["calls"]) == 3
    mha = torch_attention(g, layer, 6, 3, kdim=5, vdim=5)
    with gv.inference():
        got = g.output({"q": q, "m": kv}, [plain, masked, causal])
    close(got[plain.name], mha(t(q), t(kv), t(kv))[0])
    close(got[masked.name], mha(t(q), t(kv), t(kv), attn_mask=t(blocked))[0])
    upper = torch.ones(3, 4, dtype=torch.bool).triu(1)
    close(got[causal.name], mha(t(q), t(kv), t(kv), attn_mask=upper)[0])


# --- shape layers and dropout --------------------------------------------------------------------

def test_flatten_and_reshape():
    x = R.normal(size=(2, 3, 4, 5))
    _, flat = run(L.Flatten(), x)
    close(flat, torch.nn.Flatten()(t(x)))
    for shape, numpy_shape in (((5, -1), (2, 5, 12)), ([12, 5], (2, 12, 5)), ((-1,), (2, 60))):
        np.testing.assert_array_equal(run(L.Reshape(shape), x)[1], x.reshape(numpy_shape))


def test_dropout_is_the_identity_in_inference_and_masks_in_training():
    x = R.uniform(1.0, 2.0, size=(200, 50))
    layer = L.Dropout(0.3, seed=1)
    g, identity = run(layer, x)
    np.testing.assert_array_equal(identity, x)
    y = g.layers[layer.name]["calls"][0]["output"]
    np.testing.assert_array_equal(g.predict(x, y), x)
    with runstate.training(0):
        first = g.output({"x0": x}, [y])[y]
    with runstate.training(1):
        second = g.output({"x0": x}, [y])[y]
    kept = first != 0
    np.testing.assert_allclose(first[kept], x[kept] / 0.7, rtol=1e-14)
    assert abs(1 - kept.mean() - 0.3) < 0.02
    assert (kept != (second != 0)).mean() > 0.2          # a new mask per step
    _, rate0 = run(L.Dropout(np.float32(0.0)), x)          # NumPy numbers are numbers
    np.testing.assert_array_equal(rate0, x)


# --- activations ---------------------------------------------------------------------------------

ACTIVATION_CLASSES = [
    (L.ReLU(), F.relu), (L.Sigmoid(), torch.sigmoid), (L.Tanh(), torch.tanh), (L.GELU(), F.gelu),
    (L.ELU(), F.elu), (L.ELU(alpha=0.5), lambda x: F.elu(x, 0.5)), (L.SELU(), F.selu),
    (L.Softplus(), F.softplus), (L.SiLU(), F.silu), (L.LogSigmoid(), F.logsigmoid), (L.HardTanh(), F.hardtanh),
    (L.HardTanh(min_val=-0.5, max_val=2.0), lambda x: F.hardtanh(x, -0.5, 2.0)),
    (L.LeakyReLU(), F.leaky_relu), (L.LeakyReLU(alpha=0.2), lambda x: F.leaky_relu(x, 0.2)),
    (L.Softmax(), lambda x: F.softmax(x, -1)), (L.Softmax(axis=1), lambda x: F.softmax(x, 1)),
    (L.LogSoftmax(), lambda x: F.log_softmax(x, -1)), (L.LogSoftmax(axis=0), lambda x: F.log_softmax(x, 0)),
    (L.Activation("leaky_relu", alpha=0.3), lambda x: F.leaky_relu(x, 0.3)),     # attributes pass to the op
]

TORCH_ACTIVATIONS = {"relu": F.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": F.gelu, "elu": F.elu,
                     "selu": F.selu, "softplus": F.softplus, "silu": F.silu, "log_sigmoid": F.logsigmoid,
                     "hard_tanh": F.hardtanh, "leaky_relu": F.leaky_relu, "softmax": lambda x: F.softmax(x, -1),
                     "log_softmax": lambda x: F.log_softmax(x, -1), "linear": lambda x: x}


@pytest.mark.parametrize("index", range(len(ACTIVATION_CLASSES)))
def test_activation_classes_are_torch_activations(index):
    layer, reference = ACTIVATION_CLASSES[index]
    x = R.normal(0, 3, size=(4, 3, 5))
    _, ours = run(layer, x)
    close(ours, reference(t(x)))


@pytest.mark.parametrize("name", sorted(L.ACTIVATIONS))
def test_activation_by_name_and_as_a_dense_argument(name):
    assert set(TORCH_ACTIVATIONS) == set(L.ACTIVATIONS)
    x = R.normal(0, 3, size=(6, 5))
    _, ours = run(L.Activation(name), x)
    close(ours, TORCH_ACTIVATIONS[name](t(x)))
    layer = L.Dense(3, activation=name)
    g, dense = run(layer, x)
    linear = torch.nn.Linear(5, 3).double()
    copy_into(linear, g, layer, {"weight": ("weight", True), "bias": ("bias", False)})
    close(dense, TORCH_ACTIVATIONS[name](linear(t(x))))


# --- gradients -----------------------------------------------------------------------------------

GRADIENT_MODELS = {
    "dense": (lambda: [L.Dense(4, activation="tanh"), L.Dense(3, use_bias=False)], (5,)),
    "conv2d": (lambda: [L.Conv2D(2, 3, padding="same"), L.BatchNorm(), L.Tanh(), L.AvgPool2D(2),
                        L.Flatten(), L.Dense(2)], (2, 4, 4)),
    "conv1d": (lambda: [L.Conv1D(4, 3, stride=2, groups=2, layout="bwc"), L.LayerNorm(), L.GELU(),
                        L.GlobalAvgPool(layout="bwc")], (7, 2)),
    "lstm": (lambda: [L.LSTM(3, return_sequences=True), L.GRU(2)], (4, 3)),
    "attention": (lambda: [L.MultiHeadAttention(2), L.Reshape((-1,)), L.Dense(2, activation="sigmoid")], (3, 4)),
}


@pytest.mark.parametrize("kind", sorted(GRADIENT_MODELS))
def test_gradients_of_small_models_match_finite_differences(kind):
    build, shape = GRADIENT_MODELS[kind]
    g = gv.Graph(kind)
    y = gv.Sequential(build(), name="net", seed=4)(g.placeholder("x", (None,) + shape))
    g.set_loss(g.math.sum(y * g.constant("w", R.normal(size=(2,) + y.shape[1:]))))
    report = gv.check_gradients(g, {"x": R.normal(size=(2,) + shape)}, max_per_param=12)
    assert report.passed, str(report)
    trainable = {n for record in g.layers.values() for n in record["variables"] if g.is_trainable(n)}
    assert set(report.variables) == trainable and all(row.checked > 0 for row in report.variables.values())


def test_gradients_through_an_embedding():
    g = gv.Graph("emb")
    ids = g.placeholder("ids", (None, 3), "int64")
    y = gv.Sequential([L.Embedding(6, 4, padding_idx=2), L.Dense(2)], seed=1)(ids)
    g.set_loss(g.math.sum(g.math.tanh(y)))
    feeds = {"ids": np.array([[0, 2, 5], [2, 1, 1]])}
    not_padding = np.broadcast_to(np.arange(6)[:, None] != 2, (6, 4))
    assert gv.check_gradients(g, feeds, mask={"sequential/embedding/weight": not_padding}).passed
    # The padding row is read (it holds zeros) but gets no gradient, as in PyTorch: finite differences see it.
    report = gv.check_gradients(g, feeds, wrt=["sequential/embedding/weight"])
    assert {failure.index[0] for failure in report.failures} == {2}


# --- Dims ----------------------------------------------------------------------------------------

def padded_sequences(n=5, steps=6, features=3, seed=2):
    r = np.random.default_rng(seed)
    lengths = r.integers(1, steps + 1, n)
    lengths[0] = steps
    padded = r.normal(size=(n, steps, features))
    padded[np.arange(steps) >= lengths[:, None]] = 1e6      # padding that would dominate any result reading it
    return padded, lengths


def test_dense_over_a_feature_dim_keeps_the_time_dim_and_its_lengths():
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    padded, lengths = padded_sequences()
    for order in ((gv.batch_dim, time, feature), (gv.batch_dim, feature, time)):
        g = gv.Graph("dims")
        seq = g.placeholder("seq", dims=order, lengths={time: "seq_len"})
        dense = L.Dense(4, axis=feature, seed=1)
        y = dense(seq)
        assert y.shape == (None, None, 4)
        mean = g.math.mean(y, axis=time)                 # masked by the lengths that Dense passed on
        feed = padded if order[1] is time else padded.transpose(0, 2, 1)
        got = g.predict({"seq": feed, "seq_len": lengths}, mean)
        w, b = g.value("dense/weight"), g.value("dense/bias")
        expected = np.stack([(padded[i, :n] @ w + b).mean(axis=0) for i, n in enumerate(lengths)])
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_stacked_recurrent_layers_over_a_dynamic_time_dim_equal_the_unpadded_sequences(kind):
    time = gv.Dim("time")
    padded, lengths = padded_sequences()
    g, single = gv.Graph("seq"), gv.Graph("one")
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, gv.Dim("feature", 3)), lengths={time: "seq_len"})
    model, twin = (gv.Sequential([getattr(L, kind)(4, return_sequences=True), L.Dense(4), L.GRU(2)], seed=3)
                   for _ in range(2))
    got = g.predict({"seq": padded, "seq_len": lengths}, model(seq))     # each layer passes the lengths on
    out = twin(single.placeholder("x", (1, None, 3)))
    for a, b in zip(model.variables, twin.variables):
        np.testing.assert_array_equal(single.value(b.name), g.value(a.name))
    for row, length in enumerate(lengths):
        alone = single.predict(padded[row:row + 1, :length], out)
        np.testing.assert_allclose(got[row], alone[0], rtol=1e-12, atol=1e-14)
    assert np.isfinite(got).all() and len(model.variables) == 10
