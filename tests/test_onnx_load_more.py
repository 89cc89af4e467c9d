"""gv.onnx.load of the op types graphview's exporter writes beyond load_ops/load_nn (graphview/onnx/load_more.py):
each against onnxruntime on an onnx.helper model, and every op of the export table exported and loaded back,
giving the original graph's outputs (issue 20: "a model exported and loaded back gives the same graph outputs").
"""
import importlib
import math

import numpy as np
import pytest

import graphview as gv
from graphview.onnx.load import load

ex = importlib.import_module("graphview.onnx.export")   # the module: gv.onnx.export is its function
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402
from onnx_helpers import assert_outputs_match, check, helper_model, outputs_of  # noqa: E402
from test_onnx_export import CASES, IMAGE_CASES, build_case  # noqa: E402  (tests/ is on the path)

F32 = np.float32
R = np.random.default_rng(11)


X = R.normal(size=(3, 4, 5)).astype(F32)
XS = {"x": (F32, ["batch", 4, 5])}


def test_not():
    check(helper_model([oh.make_node("Greater", ["x", "zero"], ["b"]), oh.make_node("Not", ["b"], ["y"])], XS, ["y"],
                       [("zero", np.zeros((), F32))]), {"x": X})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis, keepdims", [(0, 1), (-1, 0), (1, 1)])
def test_arg(op, axis, keepdims):
    x = X.copy()
    x[0, :2] = x[0, 2]           # ties: the first index
    check(helper_model([oh.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims)], XS, ["y"]), {"x": x})


def test_size_of_known_and_unknown_shapes():
    nodes = [oh.make_node("Size", ["x"], ["n"]), oh.make_node("Size", ["w"], ["m"]),
             oh.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT), oh.make_node("Mul", ["x", "nf"], ["y"])]
    proto = helper_model(nodes, XS, ["y", "n", "m"], [("w", np.zeros((2, 3), np.int64))])
    for batch in (3, 1):
        check(proto, {"x": X[:batch]})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("opset", [11, 18])
def test_pad(mode, opset):
    inits = [("pads", np.array([0, 1, 2, 0, 2, 1], np.int64))]      # a float initializer would be a weight:
    value = oh.make_node("Constant", [], ["value"], value=numpy_helper.from_array(np.array(0.5, F32)))  # a Constant
    inputs = ["x", "pads", "value" if mode == "constant" else ""]
    if opset >= 18:     # the axes input: pad axes 1 and 2 only
        inits[0] = ("pads", np.array([1, 2, 2, 1], np.int64))
        inits.append(("axes", np.array([1, -1], np.int64)))
        inputs.append("axes")
    check(helper_model([value, oh.make_node("Pad", inputs, ["y"], mode=mode)], XS, ["y"], inits, opset), {"x": X})


def test_negative_pads_are_refused():
    proto = helper_model([oh.make_node("Pad", ["x", "pads"], ["y"], name="crop")], XS, ["y"],
                         [("pads", np.array([0, -1, 0, 0, 0, 0], np.int64))])
    with pytest.raises(gv.GraphFileError, match=r"node crop \(Pad\): negative pads"):
        load(proto)


def test_erf_float32_matches_onnxruntime_and_float64_math_erf():
    z = np.concatenate([R.normal(0, 2, 200), [0.0, 1e-8, -1e-8, 6.0, -7.0, 30.0]])
    check(helper_model([oh.make_node("Erf", ["z"], ["y"])], {"z": (F32, ["n"])}, ["y"]), {"z": z.astype(F32)},
          rtol=1e-5, atol=1e-6)
    g = load(helper_model([oh.make_node("Erf", ["z"], ["y"])], {"z": (np.float64, ["n"])}, ["y"]))
    got = g.output({"z": z}, ["y"])["y"]
    np.testing.assert_allclose(got, [math.erf(v) for v in z], rtol=1e-6, atol=1e-13)


@pytest.mark.parametrize("indices_from", ["constant", "input"])
def test_scatter_nd_rows(indices_from):
    data = R.normal(size=(5, 3)).astype(F32)
    nodes = [oh.make_node("ScatterND", ["data", "idx", "updates"], ["y"])]
    inputs = {"data": (F32, ["n", 3]), "updates": (F32, [2, 3])}
    inits = []
    feeds = {"data": data, "updates": R.normal(size=(2, 3)).astype(F32)}
    index = np.array([[3], [-5]], np.int64)
    if indices_from == "constant":
        inits.append(("idx", index))
    else:
        inputs["idx"] = (np.int64, [2, 1])
        feeds["idx"] = np.array([[3], [0]], np.int64)
    check(helper_model(nodes, inputs, ["y"], inits), feeds)


def test_scatter_nd_of_elements_is_refused_unless_constant():
    inputs = {"data": (F32, [2, 3]), "idx": (np.int64, [2, 2]), "updates": (F32, [2])}
    with pytest.raises(gv.GraphFileError, match=r"node put \(ScatterND\): indices with 2 coordinates"):
        load(helper_model([oh.make_node("ScatterND", ["data", "idx", "updates"], ["y"], name="put")], inputs, ["y"]))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore", [None, 1])
def test_losses(reduction, ignore):
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    nodes = [oh.make_node("SoftmaxCrossEntropyLoss", ["s", "t"], ["loss", "log_prob"], **attrs),
             oh.make_node("LogSoftmax", ["s"], ["lp"], axis=1),
             oh.make_node("NegativeLogLikelihoodLoss", ["lp", "t"], ["nll"], **attrs)]
    inputs = {"s": (F32, ["batch", 4, 3]), "t": (np.int64, ["batch", 3])}
    proto = helper_model(nodes, inputs, ["loss", "log_prob", "nll"])
    labels = R.integers(0, 4, (5, 3))
    labels[0, 0] = 1
    check(proto, {"s": R.normal(size=(5, 4, 3)).astype(F32), "t": labels})


# --- every exported op, loaded back -----------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES) + sorted(IMAGE_CASES))
def test_exported_op_loads_back(case):
    g, out, feeds = build_case(CASES if case in CASES else IMAGE_CASES, case, "float32")
    for opset in (17, 21):
        names = {}
        loaded = load(ex.to_model(g, [out], opset), names=names)
        for batch in (2, 3):        # the export's batch, and another (the batch is symbolic)
            values = dict(feeds, x=np.concatenate([feeds["x"], -feeds["x"][:1]])[:batch],
                          lengths=np.array([0, 2, 3])[:batch])
            try:
                want = outputs_of(g, values, [out])
            except gv.GraphviewError:    # the case's own graph has a fixed batch (a variable of batch 2)
                assert batch == 3
                continue
            got = outputs_of(loaded, values, [names[out]])
            assert_outputs_match(got, want, rtol=1e-5, atol=1e-6, where=f"opset {opset}, batch {batch}: ")
