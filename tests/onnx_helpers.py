"""What the ONNX test files share: a model of an onnx.helper graph, onnxruntime's outputs of a model,
graphview's inference outputs of a graph, and both for a model graphview loads.

Importing it skips the importing test module where onnx or onnxruntime is missing, as their own
``pytest.importorskip`` does.
"""
import numpy as np
import pytest

import graphview as gv
from graphview.onnx.load import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402


def model_of(graph, opset=17):
    """The ModelProto of an onnx.helper graph at ``opset``, at an IR version onnxruntime reads."""
    proto = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    proto.ir_version = min(proto.ir_version, 10)
    return proto


def with_inferred_outputs(graph, opset):
    """The model of an onnx.helper graph at ``opset``, its outputs typed by onnx's shape inference."""
    proto = model_of(graph, opset)
    for out in proto.graph.output:
        out.type.tensor_type.ClearField("elem_type")
    inferred = onnx.shape_inference.infer_shapes(proto)
    del proto.graph.output[:]
    proto.graph.output.extend(inferred.graph.output)
    return proto


def helper_model(nodes, inputs, outputs, inits=(), opset=17, name="helper"):
    """A checked model of onnx.helper nodes: ``inputs`` maps a name to (dtype, dims), ``inits`` (name, value)
    pairs are initializers; the outputs' types come from shape inference."""
    infos = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(np.dtype(t)), d) for n, (t, d) in inputs.items()]
    outs = [oh.make_value_info(n, oh.make_tensor_type_proto(TensorProto.FLOAT, None)) for n in outputs]
    graph = oh.make_graph(nodes, name, infos, outs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return with_inferred_outputs(graph, opset)


def session(proto):
    """An onnxruntime session of ``proto`` on the CPU, its warnings silenced."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run_onnx(proto, feeds):
    """onnxruntime's outputs of ``proto``, in its output order, for the feeds its inputs name."""
    runner = session(proto)
    return runner.run(None, {i.name: feeds[i.name] for i in runner.get_inputs()})


def outputs_of(graph, feeds, names):
    """graphview's inference values of ``names`` in ``graph``, as a list, for the feeds the graph has."""
    with gv.inference():
        values = graph.output({name: value for name, value in feeds.items() if name in graph}, names)
    return [values[name] for name in names]


def assert_outputs_match(got, want, rtol, atol=0.0, names=None, where=""):
    """Each array of ``got`` has the shape and dtype of its partner in ``want`` and is close to it;
    ``names`` (one a pair) and ``where`` label a failure."""
    for i, (a, b) in enumerate(zip(got, want)):
        label = where + (names[i] if names else f"output {i}")
        assert a.shape == b.shape and a.dtype == b.dtype, f"{label}: {a.shape} {a.dtype}, want {b.shape} {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=label)


def run_both(proto, feeds, outputs=None):
    """``proto`` loaded by graphview and run by onnxruntime: (graphview's values of ``outputs``, onnxruntime's,
    the loaded graph, the map of ONNX names to graphview's). ``outputs``: ONNX names, by default every output."""
    names = {}
    g = load(proto, names=names)
    outputs = [o.name for o in proto.graph.output] if outputs is None else list(outputs)
    ours = g.output(feeds, [names[o] for o in outputs])
    return [ours[names[o]] for o in outputs], session(proto).run(outputs, feeds), g, names


def check(proto, feeds, rtol=1e-5, atol=1e-6):
    """graphview's outputs of the model ``proto`` loads match onnxruntime's: shapes, dtypes and values."""
    ours, theirs, _, _ = run_both(proto, feeds)
    assert_outputs_match(ours, theirs, rtol, atol)
