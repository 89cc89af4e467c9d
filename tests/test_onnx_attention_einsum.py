"""gv.onnx.load of Einsum and Tile (graphview/onnx/load_einsum.py), each against onnxruntime on an onnx.helper
model (their gradients against finite differences), and a hand-written attention with torch.einsum and repeat
exported by PyTorch; the equations and repeats outside what is supported are refused by node.
"""
import io
import warnings

import numpy as np
import pytest

import graphview as gv
from graphview.onnx.load import load

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper as oh  # noqa: E402
from test_onnx_attention_ops import I64, check, helper_model, node  # noqa: E402  (tests/ is on the path)

F32 = np.float32
R = np.random.default_rng(23)

EQUATIONS = [
    ("btc,bsc->bts", (2, 3, 4), (2, 5, 4)),       # attention scores: one matmul
    ("bts,bsc->btc", (2, 3, 5), (2, 5, 4)),       # attention output
    ("bhtd,bhsd->bhts", (2, 2, 3, 4), (2, 2, 5, 4)),
    ("ij,jk", (3, 4), (4, 2)),                    # implicit output: ik
    ("ij,kj->ki", (3, 4), (2, 4)),                # the output permuted
    ("i,j->ij", (3,), (4,)),                      # outer product
    ("bij,bij->b", (2, 3, 4), (2, 3, 4)),         # two contracted letters: broadcast, multiply, sum
    ("abc,cd->dab", (2, 3, 4), (4, 5)),           # two free letters on the left
    ("ij,jk->k", (3, 4), (4, 2)),                 # a free letter summed before the product
]


@pytest.mark.parametrize("equation, a, b", EQUATIONS, ids=[e[0] for e in EQUATIONS])
def test_einsum_of_two_operands_matches_onnxruntime(equation, a, b):
    dims = {"a": (F32, ["n"] + list(a[1:])), "b": (F32, list(b))}
    proto = helper_model([node("Einsum", ["a", "b"], ["y"], equation=equation)], dims, ["y"])
    free = equation[0] not in equation.split("->")[0].split(",")[1]     # a's first letter is not b's
    for first in (a[0], a[0] + 1) if free else (a[0],):
        feeds = {"a": R.normal(size=(first,) + a[1:]).astype(F32), "b": R.normal(size=b).astype(F32)}
        check(proto, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("equation", ["ij->ji", "ij->i", "ijk->kj", "ij"])
def test_einsum_of_one_operand_matches_onnxruntime(equation):
    shape = (2, 3, 4)[:len(equation.split("->")[0])]
    proto = helper_model([node("Einsum", ["a"], ["y"], equation=equation)], {"a": (F32, ["n", *shape[1:]])}, ["y"])
    check(proto, {"a": R.normal(size=shape).astype(F32)})


@pytest.mark.parametrize("equation", ["btc,bsc->bts", "bij,bij->b"])
def test_einsum_gradients_pass_the_check(equation):
    a, b = (2, 3, 4), (2, 5, 4) if equation.startswith("btc") else (2, 3, 4)
    proto = helper_model([node("Einsum", ["a", "w"], ["y"], equation=equation)], {"a": ("float64", list(a))}, ["y"],
                         [("w", R.normal(size=b))])
    g = load(proto)
    g.set_loss(g.math.sum(g.math.square(g["y"]), name="loss"))
    report = gv.check_gradients(g, {"a": R.normal(size=a)}, wrt=["a", "w"])
    assert report.passed, str(report)


@pytest.mark.parametrize("equation, match", [
    ("b...c,bsc->bs", r"an ellipsis \(\.\.\.\) is not supported"),
    ("ii,ij->j", r"a letter twice in one term \(a diagonal"),
    ("ij,jk,kl->il", r"does not describe 2 operand"),
])
def test_einsum_equations_outside_the_supported_ones_are_refused(equation, match):
    graph = oh.make_graph([node("Einsum", ["a", "b"], ["y"], equation=equation)], "e",
                          [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [3, 3]) for n in "ab"],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])])
    proto = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    proto.ir_version = min(proto.ir_version, 10)
    with pytest.raises(gv.GraphFileError, match=r"node #0 \(Einsum\): equation .*" + match):
        load(proto)


@pytest.mark.parametrize("repeats", [[1, 1, 1], [2, 1, 3], [1, 3, 1], [3, 2, 2]])
def test_tile_with_constant_repeats_matches_onnxruntime_at_any_size(repeats):
    proto = helper_model([node("Tile", ["x", "r"], ["y"])], {"x": (F32, ["b", "t", 2])}, ["y"],
                         [("r", np.array(repeats, I64))])
    for shape in [(2, 3, 2), (1, 5, 2)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})


def test_tile_by_a_run_time_size_broadcasts_an_axis_of_size_one_and_refuses_others():
    """x.mean(1, keepdim=True).repeat(1, x.shape[1], 2) as PyTorch's exporters write it."""
    nodes = [node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1), node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "one"], ["t"]), node("Concat", ["ones", "t", "two"], ["r"], axis=0),
             node("Tile", ["m", "r"], ["y"])]
    inits = [("one", np.array([1], I64)), ("ones", np.array([1], I64)), ("two", np.array([2], I64))]
    proto = helper_model(nodes, {"x": (F32, ["b", "t", 3])}, ["y"], inits)
    for shape in [(2, 4, 3), (3, 1, 3)]:
        check(proto, {"x": R.normal(size=shape).astype(F32)})
    wide = [node("Shape", ["x"], ["s"]), node("Gather", ["s", "one"], ["t"]),
            node("Concat", ["ones", "t", "ones"], ["r"], axis=0), node("Tile", ["x", "r"], ["y"])]
    with pytest.raises(gv.GraphFileError, match=r"\(Tile\): repeats known only at run time are supported on axes "
                                                 r"of size 1 only"):
        load(helper_model(wide, {"x": (F32, ["b", "t", 3])}, ["y"], inits))


def test_tile_gradients_add_up_over_the_copies():
    proto = helper_model([node("Tile", ["x", "r"], ["y"])], {"x": ("float64", ["b", 3])}, ["y"],
                         [("r", np.array([2, 3], I64))])
    g = load(proto)
    g.set_loss(g.math.sum(g.math.square(g["y"]), name="loss"))
    x = R.normal(size=(2, 3))
    report = gv.check_gradients(g, {"x": x}, wrt=["x"])
    assert report.passed, str(report)
    np.testing.assert_allclose(g.calculate_gradients({"x": x}, ["x"])["x"], 2 * 6 * x, rtol=1e-12)


def test_a_hand_written_einsum_attention_exported_by_pytorch_matches_onnxruntime_and_pytorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(5)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8, 8) / 3)

        def forward(self, x):
            scores = torch.einsum("btc,bsc->bts", x, x @ self.w).softmax(-1)
            return torch.einsum("bts,bsc->btc", scores, x) + x.mean(1, keepdim=True).repeat(1, x.shape[1], 1)

    net, buffer = Net().eval(), io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.randn(2, 5, 8),), buffer, dynamo=False, opset_version=17, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "b", 1: "t"}})
    data = buffer.getvalue()
    assert {"Einsum", "Tile"} <= {n.op_type for n in onnx.load_from_string(data).graph.node}
    g = load(data)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for shape in [(2, 5, 8), (3, 7, 8), (1, 2, 8)]:
        x = R.normal(size=shape).astype(F32)
        ours = g.output({"x": x}, ["y"])["y"]
        np.testing.assert_allclose(ours, session.run(["y"], {"x": x})[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ours, net(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
