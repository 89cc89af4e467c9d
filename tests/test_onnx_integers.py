"""ONNX import of integer arithmetic (Div truncates toward 0, Pow stays integer, as onnxruntime) and a round
trip that keeps the trainable variables (constants go out as Constant nodes, not initializers)."""
import numpy as np
import pytest

import graphview as gv
from graphview import layers as L
from graphview.onnx.export import to_model
from graphview.onnx.load import load

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_helpers import run_onnx  # noqa: E402


@pytest.mark.parametrize("op_type", ["Div", "Pow"])
def test_integer_div_and_pow_keep_the_integer_dtype_and_truncate(op_type):
    a = np.array([7, -7, 1, 9], np.int64)
    b = np.array([2, 2, 3, 2], np.int64)
    graph = helper.make_graph([helper.make_node(op_type, ["a", "b"], ["y"])], "int",
                              [helper.make_tensor_value_info(n, TensorProto.INT64, [4]) for n in "ab"],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    names = {}
    g = load(model.SerializeToString(), names=names)
    ours = g.output({"a": a, "b": b}, [names["y"]])[names["y"]]
    (expected,) = run_onnx(model, {"a": a, "b": b})
    assert ours.dtype == np.int64 and np.array_equal(ours, expected)


def test_a_round_trip_adds_no_trainable_variable():
    g = gv.Graph("rnn")
    x = g.placeholder("x", (None, 5, 3), "float32")
    out = gv.Sequential([L.LSTM(4), L.Dense(2)], name="net", seed=0)(x)    # the LSTM's zero state is a constant
    loaded = load(to_model(g, [out]).SerializeToString())
    trained = sorted(n.name for n in loaded.nodes() if loaded.is_trainable(n.name))
    assert trained == sorted(n.name for n in g.nodes() if g.is_trainable(n.name))


def test_a_path_that_cannot_be_written_or_read_is_a_graphview_error(tmp_path):
    g = gv.Graph()
    y = g.math.exp(g.placeholder("x", (2,)))
    with pytest.raises(gv.onnx.OnnxExportError, match="cannot write the ONNX file"):
        gv.onnx.export(g, tmp_path / "missing" / "model.onnx", [y])
    with pytest.raises(gv.GraphFileError, match="takes a file path, the file's bytes or an onnx.ModelProto"):
        gv.onnx.load(None)


def test_a_negative_scalar_gather_on_an_axis_of_unknown_size_is_a_view_from_the_end():
    graph = helper.make_graph(
        [helper.make_node("Gather", ["x", "last"], ["y"], axis=1)], "last-step",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "time", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("last", TensorProto.INT64, [], [-1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    names = {}
    g = load(model.SerializeToString(), names=names)
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    np.testing.assert_array_equal(g.output({"x": x}, [names["y"]])[names["y"]], x[:, -1])
