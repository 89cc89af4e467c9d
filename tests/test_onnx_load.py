"""gv.onnx.load: ONNX models built with onnx.helper, run by graphview and by onnxruntime.

Every supported op type has a model whose graphview output equals onnxruntime's (float32 to 1e-5
relative; float64 where onnxruntime has kernels); an MLP, a CNN and an LSTM imported in float64 pass
gradient checks and train; names are kept; unsupported ops and bad files are refused clearly.
"""
import io
import pathlib
import sys
import warnings

import numpy as np
import pytest

import graphview as gv
from graphview.onnx.export import to_model
from graphview.onnx.load import BUILDERS, MORE_BUILDERS, load

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402
from onnx_helpers import assert_outputs_match, run_both, session, with_inferred_outputs  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import cnn_digits  # noqa: E402  (the examples' models)
import sequence_digits  # noqa: E402
import train_digits  # noqa: E402

RNG = np.random.default_rng(0)
F32 = np.float32


def model(nodes, feeds, inits=None, outputs=("y",), opset=17, symbolic=()):
    """An onnx ModelProto: inputs typed by the feed arrays (axes in ``symbolic`` named, not sized)."""
    inputs = [oh.make_tensor_value_info(
        name, oh.np_dtype_to_tensor_dtype(a.dtype), [f"d{i}" if i in symbolic else n for i, n in enumerate(a.shape)])
        for name, a in feeds.items()]
    outs = [oh.make_value_info(name, oh.make_tensor_type_proto(TensorProto.FLOAT, None)) for name in outputs]
    graph = oh.make_graph(nodes, "test", inputs, outs,
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return with_inferred_outputs(graph, opset)


def node(op, inputs, outputs=("y",), **attrs):
    return oh.make_node(op, list(inputs), list(outputs), name=f"{op.lower()}_{'_'.join(outputs)}", **attrs)


def x_(shape=(2, 3, 4), dtype=F32, positive=False):
    a = RNG.standard_normal(shape)
    return (np.abs(a) + 0.5 if positive else a).astype(dtype)


def cases():
    """(id, nodes, feeds, initializers, opset)."""
    x, p = x_(), x_(positive=True)
    b4, p4 = x_((4,)), x_((4,), positive=True)
    out = [(op, [node(op, ["x"])], {"x": x}, {}, 17) for op in
           ("Neg", "Abs", "Exp", "Tanh", "Sigmoid", "Relu", "Softplus", "Sin", "Cos", "Sign", "Identity")]
    out += [(op, [node(op, ["x"])], {"x": p}, {}, 17) for op in ("Log", "Sqrt", "Reciprocal")]
    out += [("LeakyRelu", [node("LeakyRelu", ["x"], alpha=0.2)], {"x": x}, {}, 17),
            ("Elu", [node("Elu", ["x"], alpha=0.5)], {"x": x}, {}, 17),
            ("Selu", [node("Selu", ["x"])], {"x": x}, {}, 17),
            ("Selu-attrs", [node("Selu", ["x"], alpha=1.5, gamma=1.1)], {"x": x}, {}, 17),
            ("Gelu", [node("Gelu", ["x"])], {"x": x}, {}, 20),
            ("Dropout", [node("Dropout", ["x", "r"])], {"x": x}, {"r": np.asarray(0.3, F32)}, 17),
            ("Clip", [node("Clip", ["x", "lo", "hi"])], {"x": x}, {"lo": np.asarray(-0.5, F32),
                                                                     "hi": np.asarray(0.7, F32)}, 13)]
    for op in ("Add", "Sub", "Mul", "Div"):
        out.append((op, [node(op, ["x", "b"])], {"x": x}, {"b": p4}, 17))
    out += [("Pow", [node("Pow", ["x", "b"])], {"x": p}, {"b": b4}, 17),
            ("Max", [node("Max", ["x", "b", "c"])], {"x": x, "c": x_()}, {"b": b4}, 17),
            ("Min", [node("Min", ["x", "b"])], {"x": x}, {"b": b4}, 17),
            ("Sum", [node("Sum", ["x", "b", "c"])], {"x": x, "c": x_()}, {"b": b4}, 17),
            ("Mean", [node("Mean", ["x", "b"])], {"x": x}, {"b": b4}, 17),
            ("Mean-folded", [oh.make_node("Constant", [], ["c"], value_floats=[1.0, 2.0, 3.0, 4.0]),
                             oh.make_node("Constant", [], ["c2"], value_float=3.0),
                             node("Mean", ["c", "c2"], ["m"]), node("Add", ["x", "m"])], {"x": x}, {}, 17)]
    for op in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"):
        out.append((op, [node(op, ["x", "b"], ["c"]), node("Cast", ["c"], to=TensorProto.FLOAT)],
                    {"x": np.round(x), "b": np.round(x_())}, {}, 17))
    out += [("Where", [node("Greater", ["x", "b"], ["c"]), node("Where", ["c", "x", "b"])], {"x": x}, {"b": b4}, 17),
            ("Cast", [node("Cast", ["x"], ["d"], to=TensorProto.DOUBLE), node("Cast", ["d"], to=TensorProto.FLOAT)],
             {"x": x}, {}, 17),
            ("MatMul", [node("MatMul", ["x", "w"])], {"x": x}, {"w": x_((4, 5))}, 17),
            ("Gemm", [node("Gemm", ["a", "w", "c"], transA=1, transB=1, alpha=0.5, beta=2.0)],
             {"a": x_((4, 3))}, {"w": x_((5, 4)), "c": x_((5,))}, 17),
            ("Gemm-plain", [node("Gemm", ["a", "w"])], {"a": x_((3, 4))}, {"w": x_((4, 5))}, 17),
            ("Reshape", [node("Reshape", ["x", "s"])], {"x": x}, {"s": np.array([0, -1], np.int64)}, 17),
            ("Reshape-constant", [oh.make_node("Constant", [], ["s"], value_ints=[3, 8]),
                                  node("Reshape", ["x", "s"], allowzero=1)], {"x": x}, {}, 17),
            ("Flatten", [node("Flatten", ["x"], axis=2)], {"x": x}, {}, 17),
            ("Transpose", [node("Transpose", ["x"], perm=[2, 0, 1])], {"x": x}, {}, 17),
            ("Squeeze-13", [node("Squeeze", ["x", "a"])], {"x": x_((2, 1, 4))}, {"a": np.array([1])}, 13),
            ("Squeeze-11", [node("Squeeze", ["x"], axes=[-2])], {"x": x_((2, 1, 4))}, {}, 11),
            ("Unsqueeze-13", [node("Unsqueeze", ["x", "a"])], {"x": x}, {"a": np.array([0, -1])}, 13),
            ("Unsqueeze-11", [node("Unsqueeze", ["x"], axes=[1])], {"x": x}, {}, 11),
            ("Concat", [node("Concat", ["x", "w"], axis=1)], {"x": x}, {"w": x_((2, 2, 4))}, 17),
            ("Gather", [node("Gather", ["x", "i"], axis=1)], {"x": x}, {"i": np.array([[2, 0], [-1, 1]])}, 17),
            ("Gather-scalar", [node("Gather", ["x", "i"], axis=2)], {"x": x}, {"i": np.array(-1)}, 17),
            ("Slice", [node("Slice", ["x", "s", "e", "a", "t"])], {"x": x},
             {"s": np.array([3, 0]), "e": np.array([-10**12, 3]), "a": np.array([2, 1]), "t": np.array([-2, 2])}, 17),
            ("Slice-9", [node("Slice", ["x"], starts=[1], ends=[100], axes=[2])], {"x": x}, {}, 9),
            ("Softmax", [node("Softmax", ["x"], axis=1)], {"x": x}, {}, 17),
            ("Softmax-11", [node("Softmax", ["x"], axis=1)], {"x": x}, {}, 11),
            ("LogSoftmax", [node("LogSoftmax", ["x"])], {"x": x}, {}, 17),
            ("ReduceSum-13", [node("ReduceSum", ["x", "a"], keepdims=0)], {"x": x}, {"a": np.array([0, -1])}, 13),
            ("ReduceSum-11", [node("ReduceSum", ["x"], axes=[1])], {"x": x}, {}, 11),
            ("ReduceSum-all", [node("ReduceSum", ["x"])], {"x": x}, {}, 17),
            ("ReduceSum-noop", [node("ReduceSum", ["x"], noop_with_empty_axes=1)], {"x": x}, {}, 17),
            ("ReduceMean-17", [node("ReduceMean", ["x"], axes=[1, 2])], {"x": x}, {}, 17),
            ("ReduceMean-18", [node("ReduceMean", ["x", "a"])], {"x": x}, {"a": np.array([1, 2])}, 18),
            ("ReduceMax-18", [node("ReduceMax", ["x", "a"], keepdims=0)], {"x": x}, {"a": np.array([1])}, 18),
            ("ReduceMin-17", [node("ReduceMin", ["x"], axes=[2], keepdims=0)], {"x": x}, {}, 17),
            ("ReduceProd", [node("ReduceProd", ["x"], axes=[0])], {"x": x}, {}, 17),
            ("ReduceLogSumExp-18", [node("ReduceLogSumExp", ["x", "a"])], {"x": x}, {"a": np.array([-1])}, 18),
            ("Expand", [node("Expand", ["x", "s"])], {"x": x_((3, 1))}, {"s": np.array([2, 1, 4])}, 17),
            ("ConstantOfShape", [node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(
                np.array([0.5], F32))), node("Add", ["x", "c"])], {"x": x}, {"s": np.array([3, 4])}, 17),
            ("Shape-folded", [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"]),
                              node("Unsqueeze", ["n", "zero1"], ["n1"]), node("Concat", ["n1", "m1"], ["t"], axis=0),
                              node("Reshape", ["x", "t"])], {"x": x},
             {"zero": np.array(0), "zero1": np.array([0]), "m1": np.array([-1])}, 17)]
    img = x_((2, 4, 7, 6))
    out += [("Conv", [node("Conv", ["x", "w", "b"], pads=[1, 0, 2, 1], strides=[2, 1], dilations=[1, 2], group=2)],
             {"x": img}, {"w": x_((6, 2, 3, 2)), "b": x_((6,))}, 17),
            ("Conv-same", [node("Conv", ["x", "w"], auto_pad="SAME_UPPER", strides=[2, 2])],
             {"x": img}, {"w": x_((3, 4, 2, 3))}, 17),
            ("Conv-1d", [node("Conv", ["x", "w", "b"], pads=[1, 1])], {"x": x_((2, 4, 9))},
             {"w": x_((5, 4, 3)), "b": x_((5,))}, 17),
            ("ConvTranspose", [node("ConvTranspose", ["x", "w", "b"], strides=[2, 2], pads=[1, 0, 0, 1],
                                    output_padding=[1, 0])], {"x": img}, {"w": x_((4, 3, 3, 3)), "b": x_((3,))}, 17),
            ("MaxPool", [node("MaxPool", ["x"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1])],
             {"x": img}, {}, 17),
            ("MaxPool-1d", [node("MaxPool", ["x"], kernel_shape=[2])], {"x": x_((2, 3, 7))}, {}, 17),
            ("AveragePool", [node("AveragePool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
             {"x": img}, {}, 17),
            ("AveragePool-pad", [node("AveragePool", ["x"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                      count_include_pad=1)], {"x": img}, {}, 17),
            ("GlobalAveragePool", [node("GlobalAveragePool", ["x"])], {"x": img}, {}, 17),
            ("GlobalMaxPool", [node("GlobalMaxPool", ["x"])], {"x": img}, {}, 17),
            ("BatchNormalization", [node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)], {"x": img},
             {"s": x_((4,)), "b": x_((4,)), "m": x_((4,)), "v": x_((4,), positive=True)}, 17),
            ("LayerNormalization", [node("LayerNormalization", ["x", "s", "b"])], {"x": x},
             {"s": x_((4,)), "b": x_((4,))}, 17),
            ("LayerNormalization-axis1", [node("LayerNormalization", ["x", "s"], axis=1)], {"x": x},
             {"s": x_((3, 4))}, 17)]
    seq = x_((5, 2, 3))
    out += [("LSTM", [node("LSTM", ["x", "w", "r", "b"], ["y", "h", "c"], hidden_size=4)], {"x": seq},
             {"w": x_((1, 16, 3)), "r": x_((1, 16, 4)), "b": x_((1, 32))}, 17),
            ("LSTM-states", [node("LSTM", ["x", "w", "r", "", "n", "h0", "c0"], ["y", "h"], hidden_size=4)],
             {"x": seq, "h0": x_((1, 2, 4)), "c0": x_((1, 2, 4))},
             {"w": x_((1, 16, 3)), "r": x_((1, 16, 4)), "n": np.array([5, 3], np.int32)}, 17),
            ("GRU", [node("GRU", ["x", "w", "r", "b"], ["y", "h"], hidden_size=4, linear_before_reset=1)],
             {"x": seq}, {"w": x_((1, 12, 3)), "r": x_((1, 12, 4)), "b": x_((1, 24))}, 17)]
    return out


CASES = cases()


def last_outputs(nodes):
    return [name for name in nodes[-1].output if name]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_op_equals_onnxruntime_float32(case):
    _, nodes, feeds, inits, opset = case
    ours, theirs, _, _ = run_both(model(nodes, feeds, inits, last_outputs(nodes), opset), feeds)
    assert_outputs_match(ours, theirs, rtol=1e-5, atol=1e-6)


def test_every_supported_op_type_has_a_case():
    covered = {n.op_type for case in CASES for n in case[1]}
    covered |= {"Range", "OneHot", *MORE_BUILDERS}    # their cases: test_onnx_roundtrip_masks.py, test_onnx_load_more.py
    assert set(BUILDERS) <= covered, sorted(set(BUILDERS) - covered)


F64 = ["Add", "Mul", "Sub", "Div", "Exp", "Tanh", "Relu", "Sigmoid", "MatMul", "Gemm", "Softmax", "LogSoftmax",
       "ReduceSum-13", "ReduceMean-18", "Transpose", "Reshape", "Concat", "Gather", "Slice", "Where",
       "MaxPool", "BatchNormalization", "LayerNormalization"]


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in F64], ids=lambda c: c[0])
def test_ops_equal_onnxruntime_float64(case):
    _, nodes, feeds, inits, opset = case
    f64 = {k: v.astype(np.float64) if v.dtype == F32 else v for k, v in feeds.items()}
    inits = {k: np.asarray(v).astype(np.float64) if np.asarray(v).dtype == F32 else v for k, v in inits.items()}
    ours, theirs, _, _ = run_both(model(nodes, f64, inits, last_outputs(nodes), opset), f64)
    for a, b in zip(ours, theirs):
        assert a.dtype == np.float64
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_symbolic_dims_become_none_and_any_batch_runs():
    nodes = [node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4), node("Squeeze", ["y", "one"], ["s"]),
             node("Transpose", ["s"], ["t"], perm=[1, 0, 2]), node("Reshape", ["t", "shape"], ["r2"]),
             node("Unsqueeze", ["r2", "one"], ["u"]), node("Flatten", ["u"], ["z"], axis=1)]
    proto = model(nodes, {"x": x_((5, 2, 3))}, {"w": x_((1, 16, 3)), "r": x_((1, 16, 4)), "one": np.array([1]),
                                                "shape": np.array([0, -1])}, ["z"], symbolic=(0, 1))
    g = load(proto)
    assert {v.name: v for v in g.variables()}["x"].shape == (None, None, 3)
    runner = session(proto)
    for shape in [(5, 2, 3), (3, 6, 3)]:
        feeds = {"x": x_(shape)}
        ours = g.output(feeds, ["z"])["z"]
        assert ours.shape == (shape[1], shape[0] * 4)
        np.testing.assert_allclose(ours, runner.run(["z"], feeds)[0], rtol=1e-5, atol=1e-6)


def test_batch_first_recurrent_layout_equals_the_time_first_model():
    """onnxruntime refuses layout=1; graphview's batch-first import equals its time-first result."""
    w, r, x = x_((1, 12, 3)), x_((1, 12, 4)), x_((5, 2, 3))
    outs = ["y", "h"]
    first = model([node("GRU", ["x", "w", "r"], outs, hidden_size=4, linear_before_reset=1, layout=1)],
                  {"x": x.transpose(1, 0, 2)}, {"w": w, "r": r}, outs)
    time = model([node("GRU", ["x", "w", "r"], outs, hidden_size=4, linear_before_reset=1)], {"x": x},
                 {"w": w, "r": r}, outs)
    ours = load(first).output({"x": x.transpose(1, 0, 2)}, outs)
    y, h = session(time).run(outs, {"x": x})
    np.testing.assert_allclose(ours["y"], y.transpose(2, 0, 1, 3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours["h"], h.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)


# --- gradient checks and training of imported models ----------------------------------------------------

F64_ = np.float64


def mlp():
    nodes = [node("Gemm", ["x", "fc1/W", "fc1/b"], ["/fc1/Gemm_output_0"], transB=1), node("Relu", ["/fc1/Gemm_output_0"], ["h"]),
             node("Gemm", ["h", "fc2.W", "fc2.b"], ["logits"], transB=1)]
    inits = {"fc1/W": RNG.normal(0, 0.5, (8, 6)), "fc1/b": RNG.normal(0, 0.1, 8), "fc2.W": RNG.normal(0, 0.5, (3, 8)),
             "fc2.b": np.zeros(3)}
    return model(nodes, {"x": x_((4, 6), F64_)}, inits, ["logits"], symbolic=(0,)), (None, 6)


def cnn():
    nodes = [node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             node("BatchNormalization", ["c", "s", "t", "mean", "var"], ["n"]),
             node("Relu", ["n"], ["r"]), node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Flatten", ["p"], ["f"]), node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1)]
    inits = {"w": RNG.normal(0, 0.3, (3, 2, 3, 3)), "b": RNG.normal(0, 0.1, 3), "s": np.ones(3), "t": np.zeros(3),
             "mean": RNG.normal(0, 0.1, 3), "var": np.ones(3) + RNG.random(3), "fc": RNG.normal(0, 0.3, (2, 27)),
             "fcb": np.zeros(2)}
    return model(nodes, {"x": x_((2, 2, 6, 6), F64_)}, inits, ["logits"], symbolic=(0,)), (None, 2, 6, 6)


def lstm():
    nodes = [node("LSTM", ["x", "W", "R", "B"], ["", "h_n"], hidden_size=4), node("Squeeze", ["h_n", "zero"], ["h"]),
             node("MatMul", ["h", "head"], ["logits"])]
    inits = {"W": RNG.normal(0, 0.4, (1, 16, 3)), "R": RNG.normal(0, 0.4, (1, 16, 4)),
             "B": RNG.normal(0, 0.1, (1, 32)), "zero": np.array([0]), "head": RNG.normal(0, 0.5, (4, 2))}
    return model(nodes, {"x": x_((5, 2, 3), F64_)}, inits, ["logits"], symbolic=(1,)), (5, None, 3)


@pytest.mark.parametrize("build", [mlp, cnn, lstm], ids=["mlp", "cnn", "lstm"])
def test_imported_models_pass_gradient_checks_and_train(build):
    proto, shape = build()
    g = load(proto)
    variables = {v.name: v for v in g.variables()}
    assert variables["x"].shape == shape
    g.set_loss(g.math.sum(variables["logits"], name="loss"))
    feeds = {"x": x_(tuple(3 if d is None else d for d in shape), F64_)}
    report = gv.check_gradients(g, feeds)
    assert report.passed, str(report)
    assert len(report.variables) == len([v for v in variables.values() if v.kind == gv.VARIABLE and g.is_trainable(v.name)])
    trainable = [n for n in ("fc1/W", "w", "W", "R", "B") if n in g]
    assert all(g.is_trainable(n) for n in trainable) and trainable
    if "mean" in g:
        assert not g.is_trainable("mean") and not g.is_trainable("var")
    before = g.output(feeds, ["loss"])["loss"]
    data = gv.data.ArrayDataSet(feeds, {}) >> gv.data.Batch(len(next(iter(feeds.values()))))
    g.fit(data, epochs=5, config=gv.TrainingConfig(updater=gv.SGD(learning_rate=0.01), feature_mapping=["x"]))
    after = g.output(feeds, ["loss"])["loss"]
    assert after < before - 0.1 * abs(before), (before, after)


# --- names ---------------------------------------------------------------------------------------------------

def test_onnx_names_are_kept_and_mapped():
    proto, _ = mlp()
    names = {}
    g = load(proto, names=names)
    variables = {v.name: v for v in g.variables()}
    for name in ("x", "fc1/W", "fc1/b", "fc2.W", "fc2.b", "/fc1/Gemm_output_0", "h", "logits"):
        assert names[name] == name and name in variables
    assert variables["fc1/W"].kind == gv.VARIABLE and variables["x"].kind == gv.PLACEHOLDER
    assert variables["logits"].kind == gv.ARRAY


def test_a_name_graphview_took_gets_a_suffix_and_the_map_says_so():
    # "matmul" is the automatic name of Gemm's own matmul, built before the node output named "matmul".
    nodes = [node("Gemm", ["x", "w", "c"], ["g"], alpha=2.0), node("MatMul", ["g", "w2"], ["matmul"]),
             node("Identity", ["x"], ["same"])]
    proto = model(nodes, {"x": x_((2, 3))}, {"w": x_((3, 3)), "c": x_((3,)), "w2": x_((3, 2))}, ["matmul", "same"])
    names = {}
    g = load(proto, names=names)
    assert names["matmul"] == "matmul_1"
    ours = g.output({"x": np.ones((2, 3), F32)}, [names["matmul"], names["same"]])
    theirs = session(proto).run(["matmul", "same"], {"x": np.ones((2, 3), F32)})
    np.testing.assert_allclose(ours[names["matmul"]], theirs[0], rtol=1e-5)
    np.testing.assert_array_equal(ours["same"], theirs[1])


def test_integer_initializers_are_constants_and_float_ones_trainable():
    proto, _ = lstm()
    g = load(proto)
    kinds = {v.name: v.kind for v in g.variables()}
    assert kinds["zero"] == gv.CONSTANT and kinds["W"] == gv.VARIABLE and g.is_trainable("W")


# --- refusals ------------------------------------------------------------------------------------------------

def test_unsupported_ops_are_listed_in_one_error_before_building():
    nodes = [node("Floor", ["x"], ["e"]), node("Relu", ["e"], ["r"]), node("Floor", ["r"], ["e2"]),
             node("HardSwish", ["e2"], ["y"])]
    proto = model(nodes, {"x": x_()}, {}, ["y"])
    with pytest.raises(gv.GraphFileError, match=r"2 ONNX op type\(s\) graphview cannot import: Floor \(nodes floor_e, "
                                                r"floor_e2\); HardSwish \(nodes hardswish_y\)"):
        load(proto)


@pytest.mark.parametrize("nodes, match", [
    ([node("LSTM", ["x", "w", "r"], ["y"], hidden_size=4, direction="bidirectional")], "bidirectional"),
    ([node("GRU", ["x", "w", "r"], ["y"], hidden_size=4)], "linear_before_reset=0 is not supported"),
    ([node("MaxPool", ["x"], ["y"], kernel_shape=[2], ceil_mode=1)], "ceil_mode=1"),
    ([node("Reshape", ["x", "w"], ["y"])], "the shape must be a constant"),
], ids=["bidirectional", "gru-reset", "ceil-mode", "computed-shape"])
def test_unsupported_attributes_name_the_node(nodes, match):
    op = nodes[0].op_type
    inits = {"LSTM": {"w": x_((2, 16, 3)), "r": x_((2, 16, 4))},
             "GRU": {"w": x_((1, 12, 3)), "r": x_((1, 12, 4))}}.get(op, {})
    feeds = {"x": x_((5, 2, 3))}
    if op == "Reshape":
        feeds["w"] = np.array([2, 15], np.int64)       # a placeholder: the shape is computed
    proto = model(nodes, feeds, inits, ["y"])
    with pytest.raises(gv.GraphFileError, match=f"node {nodes[0].name} \\({op}\\): .*{match}"):
        load(proto)


def test_float16_inputs_are_refused():
    proto = model([node("Relu", ["x"])], {"x": x_().astype(np.float16)}, {}, ["y"])
    with pytest.raises(gv.GraphFileError, match="input 'x' has element type FLOAT16"):
        load(proto)


def test_bad_files_raise_graph_file_errors(tmp_path):
    proto, _ = mlp()
    data = proto.SerializeToString()
    garbage, truncated = tmp_path / "garbage.onnx", tmp_path / "truncated.onnx"
    garbage.write_bytes(b"\x07not an onnx model at all" * 10)
    truncated.write_bytes(data[:len(data) // 2])
    with pytest.raises(gv.GraphFileError, match="garbage.onnx: not an ONNX model"):
        load(garbage)
    with pytest.raises(gv.GraphFileError, match="truncated.onnx: not an ONNX model"):
        load(truncated)
    with pytest.raises(gv.GraphFileError, match="missing.onnx: cannot read the ONNX file"):
        load(tmp_path / "missing.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(gv.GraphFileError, match="empty.onnx: not an ONNX model: the file is empty"):
        load(str(tmp_path / "empty.onnx"))
    proto.opset_import[0].version = 99
    (tmp_path / "future.onnx").write_bytes(proto.SerializeToString())
    with pytest.raises(gv.GraphFileError, match="future.onnx: opset 99 is not supported"):
        load(tmp_path / "future.onnx")
    empty = oh.make_model(oh.make_graph([], "nothing", [], []), opset_imports=[oh.make_opsetid("", 17)])
    with pytest.raises(gv.GraphFileError, match="the ONNX graph is empty"):
        load(empty.SerializeToString())
    bad = model([node("Relu", ["x"])], {"x": x_()}, {}, ["y"])
    bad.graph.node[0].input[0] = "nowhere"
    with pytest.raises(gv.GraphFileError, match="the ONNX checker refuses the model"):
        load(bad)


def test_a_saved_file_loads_as_from_the_model(tmp_path):
    proto, _ = mlp()
    onnx.save(proto, tmp_path / "mlp.onnx")
    feeds = {"x": x_((3, 6), F64_)}
    np.testing.assert_array_equal(load(tmp_path / "mlp.onnx").output(feeds, ["logits"])["logits"],
                                  load(proto).output(feeds, ["logits"])["logits"])


def test_a_pytorch_export_loads_and_equals_pytorch():
    """PyTorch's exporter (Shape/Gather/Concat/Expand for the recurrent states, which are folded)."""
    torch = pytest.importorskip("torch")

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4)
            self.fc, self.lstm = torch.nn.Linear(36, 5), torch.nn.LSTM(5, 6, batch_first=True)
            self.gru, self.norm = torch.nn.GRU(6, 3), torch.nn.LayerNorm(3)

        def forward(self, x):
            h = self.fc(torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2).flatten(1))
            out, _ = self.gru(self.lstm(torch.stack([h, h * 2, h * 3], 1))[0])
            return torch.softmax(self.norm(out), -1).mean(1)

    net, x = Net().eval(), torch.randn(2, 2, 6, 6)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(net, (x,), buffer, dynamo=False, opset_version=17, input_names=["x"],
                              output_names=["probs"], dynamic_axes={"x": {0: "batch"}})
        except (ImportError, ModuleNotFoundError) as missing:  # an exporter needing packages not installed
            pytest.skip(f"torch.onnx.export: {missing}")
    g = load(buffer.getvalue())
    for x in (x, torch.randn(5, 2, 6, 6)):        # its shape arithmetic on the batch size runs in graphview
        ours = g.output({"x": x.numpy()}, ["probs"])["probs"]
        np.testing.assert_allclose(ours, net(x).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_shapes_with_unknown_sizes_feed_constant_of_shape_expand_and_reshape():
    nodes = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "zero"], ["n"]), node("Unsqueeze", ["n", "axes"], ["n1"]),
             node("Slice", ["s", "one", "two"], ["t"]), node("Concat", ["n1", "t", "four"], ["shape"], axis=0),
             node("ConstantOfShape", ["shape"], ["c"], value=numpy_helper.from_array(np.array([0.25], F32))),
             node("Expand", ["b", "shape"], ["e"]), node("Add", ["c", "e"], ["ce"]),
             node("Unsqueeze", ["x", "axes2"], ["x4"]), node("Add", ["ce", "x4"], ["sum"]),
             node("Concat", ["n1", "minus"], ["flat"], axis=0), node("Reshape", ["sum", "flat"], ["y"])]
    inits = {"zero": np.array(0), "axes": np.array([0]), "one": np.array([1]), "two": np.array([2]),
             "four": np.array([4]), "b": x_((4,)), "axes2": np.array([-1]), "minus": np.array([-1])}
    proto = model(nodes, {"x": x_((2, 3))}, inits, ["y"], symbolic=(0, 1))
    g = load(proto)
    runner = session(proto)
    for shape in [(2, 3), (5, 1)]:
        feeds = {"x": x_(shape)}
        np.testing.assert_allclose(g.output(feeds, ["y"])["y"], runner.run(["y"], feeds)[0], rtol=1e-6)
    with pytest.raises(gv.GraphFileError, match=r"node mul_m \(Mul\): a shape with unknown sizes"):
        load(model([node("Shape", ["x"], ["s"]), node("Mul", ["s", "s"], ["m"]), node("Reshape", ["x", "m"])],
                   {"x": x_((2, 3))}, {}, ["y"], symbolic=(0,)))


def test_exported_examples_load_back_with_the_same_outputs():
    """gv.onnx's export then load: the MLP, CNN and sequence (LSTM with lengths) examples."""
    mlp_graph = train_digits.build_mlp(dtype="float32")
    cnn_graph, cnn_logits = cnn_digits.build_cnn("float32")
    seq_graph, seq_logits = sequence_digits.build_model(hidden=5, dtype="float32")
    r = np.random.default_rng(5)
    for graph, output, feeds in [
            (mlp_graph, "logits", {"x": r.random((4, 64), dtype=F32)}),
            (cnn_graph, cnn_logits.name, {"x": r.random((3, 1, 8, 8), dtype=F32)}),
            (seq_graph, seq_logits.name, {"x": r.random((3, 6, 8), dtype=F32), "seq_len": np.array([6, 2, 0])})]:
        loaded = load(to_model(graph, [output]))
        with gv.inference():
            expected = graph.output(feeds, [output])[output]
        np.testing.assert_allclose(loaded.output(feeds, [output])[output], expected, rtol=1e-6, atol=1e-7)
        trained = {v.name for v in graph.variables() if v.kind == gv.VARIABLE and graph.is_trainable(v.name)}
        assert trained <= {v.name for v in loaded.variables() if v.kind == gv.VARIABLE}   # names kept


def test_initializers_stored_as_external_data_are_read(tmp_path):
    proto, _ = mlp()
    stored = onnx.ModelProto()
    stored.CopyFrom(proto)                   # onnx.save moves the tensors out of the proto it is given
    onnx.save(stored, tmp_path / "mlp.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size > 0
    feeds = {"x": x_((3, 6), F64_)}
    np.testing.assert_array_equal(load(tmp_path / "mlp.onnx").output(feeds, ["logits"])["logits"],
                                  load(proto).output(feeds, ["logits"])["logits"])
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(gv.GraphFileError, match="mlp.onnx: cannot read the model's external data"):
        load(tmp_path / "mlp.onnx")


def test_without_onnx_installed_load_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnx", None)            # import onnx now raises ImportError
    with pytest.raises(gv.GraphFileError, match=r"needs the onnx package: pip install 'graphview\[onnx\]'"):
        load(tmp_path / "model.onnx")

