"""ONNX import of integer arithmetic: Div truncates toward 0 and Pow stays integer, as onnxruntime computes."""
import numpy as np
import pytest

from graphview.onnx.load import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("op_type", ["Div", "Pow"])
def test_integer_div_and_pow_keep_the_integer_dtype_and_truncate(op_type):
    from onnx import TensorProto, helper
    a = np.array([7, -7, 1, 9], np.int64)
    b = np.array([2, 2, 3, 2], np.int64)
    graph = helper.make_graph([helper.make_node(op_type, ["a", "b"], ["y"])], "int",
                              [helper.make_tensor_value_info(n, TensorProto.INT64, [4]) for n in "ab"],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    names = {}
    g = load(model.SerializeToString(), names=names)
    ours = g.output({"a": a, "b": b}, [names["y"]])[names["y"]]
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"a": a, "b": b})[0]
    assert ours.dtype == np.int64 and np.array_equal(ours, expected)
