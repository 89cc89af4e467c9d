"""gv.onnx after a PyTorch user's review (issue 20): each defect's model against onnxruntime or PyTorch.

Two batch norms and an untrained one (running statistics deduplicated into Identity(bias)) load and give
PyTorch's outputs; scalar and constant-setting initializers load as CONSTANTs (not trained, not checked);
Flatten at every axis; rank-0 values export as rank 0; imported dtypes follow ONNX; Split.
"""
import importlib.util
import io
import pathlib
import warnings

import numpy as np
import pytest

import graphview as gv
from graphview.training.step import GradientStep
from cli_helpers import run_main

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402
from onnx_helpers import model_of, run_both, run_onnx  # noqa: E402

RNG = np.random.default_rng(0)


def make(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto: ``inputs``/``outputs`` are (name, element type, dims); ``inits`` maps name -> array."""
    graph = oh.make_graph(nodes, "review", [oh.make_tensor_value_info(*i) for i in inputs],
                          [oh.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    return model_of(graph, opset)


def trainable(g):
    return sorted(v.name for v in g.variables() if g.is_trainable(v.name))


# --- batch norms (defects 1 and 5) -----------------------------------------------------------------------

def bn_nodes(prefix, source, out):
    names = [f"{prefix}.{p}" for p in ("weight", "bias", "running_mean", "running_var")]
    return oh.make_node("BatchNormalization", [source, *names], [out], name=f"/{prefix}/BatchNormalization",
                        epsilon=1e-5, momentum=0.9)


def test_two_batch_norms_with_pytorch_names_load_and_match_onnxruntime():
    inits = {}
    for prefix in ("1", "4"):
        inits.update({f"{prefix}.weight": RNG.random(3, dtype=np.float32) + 0.5,
                      f"{prefix}.bias": RNG.normal(size=3).astype(np.float32),
                      f"{prefix}.running_mean": RNG.normal(size=3).astype(np.float32),
                      f"{prefix}.running_var": RNG.random(3, dtype=np.float32) + 0.5})
    nodes = [bn_nodes("1", "x", "/1/BatchNormalization_output_0"),
             oh.make_node("Relu", ["/1/BatchNormalization_output_0"], ["/2/Relu_output_0"], name="/2/Relu"),
             bn_nodes("4", "/2/Relu_output_0", "y")]
    proto = make(nodes, [("x", TensorProto.FLOAT, ["b", 3])], [("y", TensorProto.FLOAT, ["b", 3])], inits)
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    (ours,), (theirs,), g, _ = run_both(proto, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert trainable(g) == ["1.bias", "1.weight", "4.bias", "4.weight"]


def pytorch_model(module, x, dynamic=True):
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the TorchScript exporter's deprecation notices
        try:
            torch.onnx.export(module, (torch.as_tensor(x),), buffer, dynamo=False, opset_version=17,
                              input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "b"}} if dynamic else None)
        except (ImportError, ModuleNotFoundError) as missing:
            pytest.skip(f"torch.onnx.export: {missing}")
    with torch.no_grad():
        expected = module(torch.as_tensor(x)).numpy()
    return onnx.load_from_string(buffer.getvalue()), expected


@pytest.mark.parametrize("trained", [False, True])
def test_pytorch_batch_norms_trained_or_not_load_and_match_pytorch(trained):
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8), nn.BatchNorm1d(8),
                        nn.Linear(8, 2))
    if trained:
        net.train()
        net(torch.randn(16, 4))
    net.eval()
    x = RNG.normal(size=(6, 4)).astype(np.float32)
    proto, expected = pytorch_model(net, x)
    if not trained:   # PyTorch's exporter stores equal initializers once: running_mean = Identity(bias)
        assert any(n.op_type == "Identity" and n.output[0] == "1.running_mean" for n in proto.graph.node)
    names = {}
    g = gv.onnx.load(proto, names=names)
    np.testing.assert_allclose(g.output({"x": x}, [names["y"]])[names["y"]], expected, rtol=1e-5, atol=1e-6)
    # every PyTorch parameter its own trainable VARIABLE, also those stored once as Identity(1.bias)
    assert trainable(g) == sorted(f"{i}.{p}" for i in (0, 1, 3, 4, 5) for p in ("bias", "weight"))
    for prefix in ("1", "4"):
        for stat in ("running_mean", "running_var"):
            assert g[names[f"{prefix}.{stat}"]].kind is gv.Kind.VARIABLE
            assert not g.is_trainable(names[f"{prefix}.{stat}"])
        np.testing.assert_array_equal(g.value(names[f"{prefix}.running_mean"]),
                                      net[int(prefix)].running_mean.numpy())
        assert g.is_trainable(names[f"{prefix}.bias"])
    # a training step's state updates change the running statistics, not the bias they were deduplicated from
    g.set_loss(g.math.sum(g.math.square(g[names["y"]])))
    bias = g.value(names["1.bias"])
    GradientStep(g)({"x": x})
    np.testing.assert_array_equal(g.value(names["1.bias"]), bias)
    assert not np.allclose(g.value(names["1.running_mean"]), net[1].running_mean.numpy())


@pytest.mark.parametrize("producer, expected", [("pytorch", ["w", "w_again"]), ("graphview", ["w"])])
def test_an_identity_of_an_initializer_is_its_own_parameter_in_pytorch_exports(producer, expected):
    nodes = [oh.make_node("Identity", ["w"], ["w_again"]), oh.make_node("Add", ["x", "w"], ["s"]),
             oh.make_node("Mul", ["s", "w_again"], ["y"])]
    proto = make(nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])],
                 {"w": RNG.normal(size=3).astype(np.float32)})
    proto.producer_name = producer
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    (ours,), (theirs,), g, names = run_both(proto, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert trainable(g) == expected and names["w_again"] == expected[-1]


def test_a_parameter_pytorch_shares_between_layers_stays_one_variable():
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    net[2].weight = net[0].weight                   # tied: the exporter writes one initializer, used twice
    x = RNG.normal(size=(3, 4)).astype(np.float32)
    proto, expected = pytorch_model(net, x)
    names = {}
    g = gv.onnx.load(proto, names=names)
    np.testing.assert_allclose(g.output({"x": x}, [names["y"]])[names["y"]], expected, rtol=1e-5, atol=1e-6)
    assert trainable(g) == ["0.bias", "0.weight", "2.bias"]


def test_an_op_refusing_its_inputs_is_an_onnx_import_error_naming_the_node():
    proto = make([oh.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [("x", TensorProto.FLOAT, [2, 3])],
                 [("y", TensorProto.FLOAT, [2, 5])], {"w": np.ones((4, 5), np.float32)})
    with pytest.raises(gv.onnx.OnnxImportError, match=r"the ONNX model given: node mm \(MatMul\): .*"):
        gv.onnx.load(proto)


# --- scalar and constant-setting initializers (defect 2) ---------------------------------------------------

def dynamo_like_model():
    """What PyTorch's dynamo exporter writes for clamp(gelu(linear(lstm(x)[:, -1])) / 3.0, -0.5, 0.5): every
    constant an initializer (rank-0 scalars, the LSTM's zero initial state), and a Pad with constant_value."""
    hidden, features = 5, 4
    inits = {"W": RNG.normal(size=(1, 4 * hidden, features)).astype(np.float32) * 0.5,
             "R": RNG.normal(size=(1, 4 * hidden, hidden)).astype(np.float32) * 0.5,
             "B": RNG.normal(size=(1, 8 * hidden)).astype(np.float32) * 0.1,
             "zeros": np.zeros((1, 2, hidden), np.float32),
             "lin.weight": RNG.normal(size=(3, hidden)).astype(np.float32), "lin.bias": np.ones(3, np.float32),
             "last": np.array(-1, np.int64), "sqrt2": np.array(np.sqrt(2), np.float32),
             "one": np.array(1.0, np.float32), "half": np.array(0.5, np.float32),
             "three": np.array(3.0, np.float32), "low": np.array(-0.5, np.float32),
             "pads": np.array([0, 1, 0, 2], np.int64), "seven": np.array(7.0, np.float32)}
    nodes = [oh.make_node("Transpose", ["x"], ["x_tbf"], perm=[1, 0, 2]),
             oh.make_node("LSTM", ["x_tbf", "W", "R", "B", "", "zeros", "zeros"], ["Y"], hidden_size=hidden),
             oh.make_node("Gather", ["Y", "last"], ["Y_last"]),          # (1, batch, hidden)
             oh.make_node("Squeeze", ["Y_last", "zero_axis"], ["h"]),
             oh.make_node("Gemm", ["h", "lin.weight", "lin.bias"], ["linear"], transB=1),
             oh.make_node("Div", ["linear", "sqrt2"], ["scaled"]), oh.make_node("Erf", ["scaled"], ["erf"]),
             oh.make_node("Add", ["erf", "one"], ["erf1"]), oh.make_node("Mul", ["half", "erf1"], ["cdf"]),
             oh.make_node("Mul", ["linear", "cdf"], ["gelu"]), oh.make_node("Div", ["gelu", "three"], ["div"]),
             oh.make_node("Clip", ["div", "low", "half"], ["clipped"]),
             oh.make_node("Pad", ["clipped", "pads", "seven"], ["y"], name="pad")]
    inits["zero_axis"] = np.array([0], np.int64)
    return make(nodes, [("x", TensorProto.FLOAT, [2, 6, features])], [("y", TensorProto.FLOAT, [2, 6])], inits,
                opset=18)


def test_scalar_and_setting_initializers_are_constants_that_fit_does_not_train():
    proto = dynamo_like_model()
    x = RNG.normal(size=(2, 6, 4)).astype(np.float32)
    (ours,), (theirs,), g, names = run_both(proto, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    assert trainable(g) == ["B", "R", "W", "lin.bias", "lin.weight"]
    for name in ("sqrt2", "three", "low", "half", "seven", "zeros"):
        assert g[names[name]].kind is gv.Kind.CONSTANT, name
    labels = g.placeholder("labels", (None,), "int64")
    g.set_loss(g.loss.softmax_cross_entropy(g[names["y"]], labels))
    data = gv.data.ArrayDataSet({"x": RNG.normal(size=(12, 6, 4)).astype(np.float32)},
                                {"labels": RNG.integers(0, 6, 12)})
    weight = g.value("lin.weight")
    g.fit(data >> gv.data.Batch(2), epochs=2, config=gv.TrainingConfig(gv.Adam(1e-2), ["x"], ["labels"]))
    assert not np.allclose(g.value("lin.weight"), weight)
    assert g.value("three") == 3.0 and g.value("half") == 0.5 and not g.value("zeros").any()


def test_an_initializer_also_used_as_an_operand_stays_a_variable_and_a_pad_value_then_says_so():
    inits = {"pads": np.array([0, 1, 0, 1], np.int64), "c": np.array([2.0], np.float32)}
    nodes = [oh.make_node("Add", ["x", "c"], ["s"]), oh.make_node("Pad", ["s", "pads", "c"], ["y"], name="pad")]
    proto = make(nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 5])], inits)
    with pytest.raises(gv.onnx.OnnxImportError, match=r"node pad \(Pad\): constant_value must be a constant, and "
                                                      r"it is the initializer 'c', which is also a tensor operand"):
        gv.onnx.load(proto)
    nodes[1] = oh.make_node("Clip", ["s", "c"], ["y"])    # Clip's bound: both uses must be settings
    proto = make(nodes, [("x", TensorProto.FLOAT, [2, 3])], [("y", TensorProto.FLOAT, [2, 3])], inits)
    x = RNG.normal(size=(2, 3)).astype(np.float32)
    (ours,), (theirs,), g, _ = run_both(proto, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    assert trainable(g) == ["c"]


# --- Flatten (defect 3) --------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 1, 5)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_flatten_at_every_axis_matches_onnxruntime(shape, dynamic):
    x = RNG.random(shape, dtype=np.float32)
    dims = [f"d{i}" for i in range(len(shape))] if dynamic else list(shape)
    for axis in range(-len(shape), len(shape) + 1):
        proto = make([oh.make_node("Flatten", ["x"], ["y"], axis=axis)], [("x", TensorProto.FLOAT, dims)],
                     [("y", TensorProto.FLOAT, [None, None])])
        (ours,), (theirs,), _, _ = run_both(proto, {"x": x})
        assert ours.shape == theirs.shape, axis
        np.testing.assert_array_equal(ours, theirs)


def test_flatten_axis_out_of_range_is_refused():
    proto = make([oh.make_node("Flatten", ["x"], ["y"], axis=4, name="flat")], [("x", TensorProto.FLOAT, [2, 3, 4])],
                 [("y", TensorProto.FLOAT, [None, None])])
    with pytest.raises(gv.onnx.OnnxImportError, match=r"node flat \(Flatten\): axis 4 is out of range for rank 3"):
        gv.onnx.load(proto)


# --- rank-0 values export as rank 0 (defect 6) -----------------------------------------------------------------

def test_a_scalar_loss_and_a_scalar_variable_export_as_rank_0():
    g = gv.Graph("s")
    x = g.placeholder("x", (None, 3))
    scale = g.var("scale", np.array(2.0))
    loss = g.math.sum(x) * 1e-3 * scale
    proto = gv.onnx.to_model(g, [loss])
    onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    assert [list(t.dims) for t in proto.graph.initializer if t.name == "scale"] == [[]]
    assert len(proto.graph.output[0].type.tensor_type.shape.dim) == 0
    feeds = {"x": RNG.normal(size=(2, 3))}
    (got,) = run_onnx(proto, feeds)
    assert got.shape == ()
    np.testing.assert_allclose(got, g.output(feeds, [loss])[loss.name], rtol=1e-12)
    names = {}
    assert gv.onnx.load(proto, names=names).output(feeds, [names[loss.name]])[names[loss.name]].shape == ()


def test_the_layouts_example_loss_passes_strict_shape_inference_and_matches_onnxruntime():
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "layouts.py"
    spec = importlib.util.spec_from_file_location("layouts_example", path)
    layouts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layouts)
    g, feeds = layouts.build()
    loss = g.losses[0]
    proto = gv.onnx.to_model(g, [loss])
    onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    (got,) = run_onnx(proto, feeds)
    assert got.shape == ()
    np.testing.assert_allclose(got, g.output(feeds, [loss])[loss.name], rtol=1e-9)


# --- dtypes follow ONNX (defect 7) ---------------------------------------------------------------------------

@pytest.mark.parametrize("op, feeds", [
    ("Pow", {"a": np.array([1.5, 2.0], np.float32), "b": np.array([2, 3])}),
    ("Pow", {"a": np.array([1.5, 2.0], np.float32), "b": np.array([2.0, 0.5])}),
    ("Pow", {"a": np.array([1.5, 2.0]), "b": np.array([2.0, 0.5], np.float32)}),
    ("Relu", {"x": np.array([-1, 2], np.int32)}), ("Neg", {"x": np.array([-1, 2], np.int32)}),
    ("Abs", {"x": np.array([-1, 2], np.int64)}), ("Sign", {"x": np.array([-3, 0, 2], np.int32)}),
])
def test_imported_ops_keep_onnx_dtypes(op, feeds):
    types = {np.dtype(v.dtype): oh.np_dtype_to_tensor_dtype(v.dtype) for v in feeds.values()}
    first = next(iter(feeds.values()))
    proto = make([oh.make_node(op, list(feeds), ["y"])],
                 [(k, types[v.dtype], list(v.shape)) for k, v in feeds.items()],
                 [("y", types[first.dtype], list(first.shape))], opset=17)
    (ours,), (theirs,), g, names = run_both(proto, feeds)
    assert names["y"] == "y" and g["y"].dtype == first.dtype
    assert ours.dtype == theirs.dtype == first.dtype
    np.testing.assert_allclose(ours, theirs, rtol=1e-6)


# --- Split (defect 8) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset, attrs, sizes, outputs, dynamic", [
    (11, {"axis": 1, "split": [1, 4, 2]}, None, 3, False),
    (13, {"axis": 1}, [2, 2, 3], 3, True),
    (13, {"axis": -1}, None, 7, True),
    (17, {"axis": 0}, None, 2, False),
    (18, {"axis": 1, "num_outputs": 3}, None, 3, False),      # 7 = 3 + 3 + 1
    (18, {"axis": 2, "num_outputs": 2}, None, 2, True),
])
def test_split_matches_onnxruntime(opset, attrs, sizes, outputs, dynamic):
    x = RNG.random((4, 7, 6), dtype=np.float32)
    if attrs.get("axis") == -1:
        x = RNG.random((4, 6, 7), dtype=np.float32)
    names = [f"y{i}" for i in range(outputs)]
    inputs = ["x"] + (["sizes"] if sizes is not None else [])
    inits = {"sizes": np.array(sizes, np.int64)} if sizes is not None else {}
    dims = ["a", "b", x.shape[2]] if dynamic else list(x.shape)
    proto = make([oh.make_node("Split", inputs, names, **attrs)], [("x", TensorProto.FLOAT, dims)],
                 [(n, TensorProto.FLOAT, [None] * 3) for n in names], inits, opset=opset)
    ours, theirs, g, _ = run_both(proto, {"x": x}, names)
    assert [a.shape for a in ours] == [b.shape for b in theirs]
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def test_split_sizes_that_do_not_add_up_are_refused():
    proto = make([oh.make_node("Split", ["x", "sizes"], ["a", "b"], name="sp")], [("x", TensorProto.FLOAT, [5])],
                 [("a", TensorProto.FLOAT, [None]), ("b", TensorProto.FLOAT, [None])], {"sizes": np.array([2, 2])})
    with pytest.raises(gv.onnx.OnnxImportError, match=r"node sp \(Split\): split sizes \[2, 2\] for 2 outputs"):
        gv.onnx.load(proto)


# --- the CLI on an ONNX model ---------------------------------------------------------------------------------

@pytest.fixture
def matmul_model(tmp_path):
    proto = make([oh.make_node("MatMul", ["x", "w"], ["y"])], [("x", TensorProto.DOUBLE, ["n", 3])],
                 [("y", TensorProto.DOUBLE, ["n", 2])], {"w": RNG.normal(size=(3, 2))})
    onnx.save(proto, tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", x=RNG.normal(size=(4, 3)))
    return tmp_path


def test_cli_gradcheck_of_an_onnx_model_without_inputs_suggests_inputs(matmul_model):
    status, _, err = run_main("gradcheck", str(matmul_model / "m.onnx"))
    assert status == 2
    assert "an ONNX model stores no input values; give its inputs (x (?, 3) float64)" in err
    assert "--inputs FILE.npz" in err
    status, out, _ = run_main("gradcheck", str(matmul_model / "m.onnx"), "--inputs", str(matmul_model / "in.npz"),
                              "--quiet")
    assert status == 0 and "PASSED" in out


@pytest.mark.parametrize("name, kind", [("w", "VARIABLE"), ("x", "PLACEHOLDER")])
def test_cli_loss_naming_an_initializer_or_input_is_refused(matmul_model, name, kind):
    status, _, err = run_main("gradcheck", str(matmul_model / "m.onnx"), "--inputs", str(matmul_model / "in.npz"),
                              "--loss", name)
    assert status == 2
    assert f"--loss {name}: {name!r} is a {kind} of model" in err and "its outputs are: y" in err
