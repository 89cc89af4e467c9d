"""gv.onnx.load of PyTorch's attention exports (graphview/onnx/load_sizes.py): torch.nn.MultiheadAttention as
self-attention (with and without a key padding mask, a float or bool causal mask) and
torch.nn.TransformerEncoderLayer, exported by torch.onnx.export (opset 17, dynamo=False) with dynamic batch and
sequence axes, give onnxruntime's and PyTorch's outputs at other batch sizes, and their gradients check and train.

PyTorch's TorchScript exporter writes the key's sequence length of MultiheadAttention as a constant (``k.view(
k.shape[0], ...)`` is traced as the export's length): at another length onnxruntime refuses the model, and so does
the loaded graph (an error, not a wrong result). The dynamo exporter keeps it symbolic; it needs onnxscript
(those tests are skipped without it).
"""
import io
import warnings

import numpy as np
import pytest

import graphview as gv
from graphview.onnx.load import load

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

B, T, E = 2, 5, 16        # the export's batch and sequence sizes


class Attention(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.m, self.mode = torch.nn.MultiheadAttention(E, 4, batch_first=True), mode

    def forward(self, x, pad=None):
        if self.mode == "weights":             # need_weights=True: the averaged weights are computed too
            return self.m(x, x, x)[0]
        mask = None
        if self.mode in ("causal", "causal_bool"):
            size = x.shape[1]
            mask = torch.ones(size, size, dtype=torch.bool).triu(1)
            if self.mode == "causal":
                mask = torch.zeros(size, size).masked_fill(mask, float("-inf"))
        return self.m(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)[0]


class Encoder(torch.nn.Module):
    def __init__(self, layers=0, **options):
        super().__init__()
        self.m = torch.nn.TransformerEncoderLayer(E, 4, dim_feedforward=32, batch_first=True, dropout=0.0, **options)
        if layers:                  # a TransformerEncoder of copies of the layer
            self.m = torch.nn.TransformerEncoder(self.m, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.m(x)


def export(net, args, names, dynamo=False):
    """The ONNX bytes torch.onnx.export writes, the batch and sequence axes of every input dynamic."""
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            pytest.importorskip("onnxscript")
            batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
            program = torch.onnx.export(net, args, dynamo=True, opset_version=17, input_names=names,
                                        output_names=["y"],
                                        dynamic_shapes={n: {0: batch, 1: seq} for n in names})
            return program.model_proto.SerializeToString()
        torch.onnx.export(net, args, buffer, dynamo=False, opset_version=17, input_names=names, output_names=["y"],
                          dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    return buffer.getvalue()


def feeds_of(names, batch, seq, rng, dtype=np.float32):
    feeds = {"x": rng.normal(size=(batch, seq, E)).astype(dtype)}
    if "pad" in names:
        pad = np.zeros((batch, seq), bool)
        pad[0, -2:] = True          # the first sequence's last two keys are padding
        feeds["pad"] = pad
    return feeds


def compare(net, data, names, sizes, rtol=1e-5, atol=2e-6):
    g = load(data)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    for batch, seq in sizes:
        feeds = feeds_of(names, batch, seq, rng)
        ours = g.output(feeds, ["y"])["y"]
        theirs = session.run(["y"], feeds)[0]
        with torch.no_grad():
            torch_out = net(*(torch.from_numpy(feeds[n]) for n in names)).numpy()
        assert ours.shape == theirs.shape == (batch, seq, E)
        np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol)
        np.testing.assert_allclose(ours, torch_out, rtol=rtol, atol=atol)
    return g, session


MODES = {"plain": ["x"], "weights": ["x"], "key_padding_mask": ["x", "pad"], "causal": ["x"],
         "causal_bool": ["x"]}


@pytest.mark.parametrize("mode", list(MODES))
def test_multihead_attention_exports_match_onnxruntime_and_pytorch_at_other_batch_sizes(mode):
    torch.manual_seed(0)
    net = Attention("plain" if mode == "key_padding_mask" else mode).eval()
    names = MODES[mode]
    args = tuple(torch.from_numpy(v) for v in feeds_of(names, B, T, np.random.default_rng(0)).values())
    g, session = compare(net, export(net, args, names), names, [(B, T), (3, T), (1, T), (6, T)])
    # The exporter fixed the key's length at T: onnxruntime and the loaded graph both refuse another length.
    feeds = feeds_of(names, 3, T + 2, np.random.default_rng(1))
    with pytest.raises(Exception, match="Reshape"):
        session.run(["y"], feeds)
    with pytest.raises(gv.GraphviewError, match=r"Reshape_\d+_output_0_element_count_check.*do not broadcast"):
        g.output(feeds, ["y"])


ENCODERS = {"post_norm": {}, "pre_norm": {"norm_first": True}, "gelu": {"activation": "gelu"},
            "two_layers": {"layers": 2}}


@pytest.mark.parametrize("which", list(ENCODERS))
def test_transformer_encoder_layer_export_matches_onnxruntime_and_pytorch(which):
    torch.manual_seed(1)
    net = Encoder(**ENCODERS[which]).eval()
    data = export(net, (torch.randn(B, T, E),), ["x"])
    ops = {n.op_type for n in onnx.load_from_string(data).graph.node}
    assert {"Mod", "LayerNormalization", "Softmax"} <= ops
    compare(net, data, ["x"], [(B, T), (4, T), (1, T)], atol=4e-6)


def test_imported_encoder_layer_passes_gradient_checks_and_fine_tunes():
    """Exported in float64: the gradients reach every weight through the run-time reshapes (unpack_axis)."""
    torch.manual_seed(2)
    net = Encoder().double().eval()
    g = load(export(net, (torch.randn(B, 3, E, dtype=torch.float64),), ["x"]))
    target = np.random.default_rng(4).normal(size=(3, 3, E))
    g.set_loss(g.math.sum(g.math.square(g.math.sub(g["y"], g.constant("target", target))), name="loss"))
    feeds = {"x": np.random.default_rng(5).normal(size=(3, 3, E))}      # another batch size than the export's
    report = gv.check_gradients(g, feeds, max_per_param=6)
    assert report.passed, str(report)
    weights = [v.name for v in g.variables() if v.kind == gv.VARIABLE and g.is_trainable(v.name)]
    assert len(report.variables) == len(weights) >= 12    # in/out projections, the two linears, two norms
    before = g.output(feeds, ["loss"])["loss"]
    data = gv.data.ArrayDataSet(feeds, {}) >> gv.data.Batch(3)
    g.fit(data, epochs=5, config=gv.TrainingConfig(updater=gv.SGD(learning_rate=0.01), feature_mapping=["x"]))
    after = g.output(feeds, ["loss"])["loss"]
    assert after < 0.9 * before, (before, after)


def test_gradients_reach_the_input_through_the_causal_mask_and_reshapes():
    torch.manual_seed(3)
    net = Attention("causal").double().eval()
    g = load(export(net, (torch.randn(B, T, E, dtype=torch.float64),), ["x"]))
    g.set_loss(g.math.sum(g.math.square(g["y"]), name="loss"))
    x = np.random.default_rng(6).normal(size=(3, T, E))
    report = gv.check_gradients(g, {"x": x}, wrt=["x"], max_per_param=20)
    assert report.passed, str(report)
    tx = torch.from_numpy(x).requires_grad_()
    (net(tx) ** 2).sum().backward()
    ours = g.calculate_gradients({"x": x}, ["x"])["x"]
    np.testing.assert_allclose(ours, tx.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("which", [*MODES, *ENCODERS])
def test_dynamo_exports_load_and_match_at_other_batch_and_sequence_sizes(which):
    """The dynamo exporter keeps the sequence length symbolic: other lengths run too (where onnxscript is)."""
    torch.manual_seed(4)
    names = MODES.get(which, ["x"])
    if which in ENCODERS:
        net = Encoder(**ENCODERS[which]).eval()
    else:
        net = Attention("plain" if which == "key_padding_mask" else which).eval()
    args = tuple(torch.from_numpy(v) for v in feeds_of(names, B, T, np.random.default_rng(0)).values())
    data = export(net, args, names, dynamo=True)
    compare(net, data, names, [(B, T), (3, 7), (1, 3), (4, 2)], atol=4e-6)


class MaskedEncoder(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.m, self.mode = Encoder().m, mode

    def forward(self, x, pad=None):
        if self.mode == "causal":
            mask = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            return self.m(x, src_mask=mask, is_causal=True)
        return self.m(x, src_key_padding_mask=pad)


class CrossAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.m = torch.nn.MultiheadAttention(E, 4, batch_first=True)

    def forward(self, x, memory):
        return self.m(x, memory, memory, need_weights=False)[0]


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("mode", ["key_padding_mask", "causal"])
def test_encoder_layers_with_masks_match_onnxruntime_and_pytorch(mode, dynamo):
    torch.manual_seed(6)
    net, names = MaskedEncoder(mode).eval(), ["x", "pad"] if mode == "key_padding_mask" else ["x"]
    args = tuple(torch.from_numpy(v) for v in feeds_of(names, B, T, np.random.default_rng(0)).values())
    sizes = [(B, T), (3, T), (1, T)] + ([(3, 7), (2, 2)] if dynamo else [])
    compare(net, export(net, args, names, dynamo), names, sizes, atol=4e-6)


def test_cross_attention_matches_onnxruntime_and_pytorch_at_other_batch_sizes():
    """Queries and keys of different lengths (the TorchScript exporter fixes both at the export's)."""
    torch.manual_seed(7)
    net = CrossAttention().eval()
    x, memory = torch.randn(B, T, E), torch.randn(B, T + 1, E)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (x, memory), buffer, dynamo=False, opset_version=17, input_names=["x", "memory"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch", 1: "seq"}, "memory": {0: "batch"}})
    g = load(buffer.getvalue())
    session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(8)
    for batch in (B, 4, 1):
        feeds = {"x": rng.normal(size=(batch, T, E)).astype(np.float32),
                 "memory": rng.normal(size=(batch, T + 1, E)).astype(np.float32)}
        ours = g.output(feeds, ["y"])["y"]
        np.testing.assert_allclose(ours, session.run(["y"], feeds)[0], rtol=1e-5, atol=2e-6)
        with torch.no_grad():
            np.testing.assert_allclose(ours, net(*(torch.from_numpy(v) for v in feeds.values())).numpy(), rtol=1e-5,
                                       atol=2e-6)
