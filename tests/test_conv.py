"""conv1d, conv2d, conv_transpose2d (and conv2d_weight_grad): values and gradients against PyTorch and
finite differences, layouts, padding forms, Dims, errors and graph files."""
import numpy as np
import pytest

import graphview as gv
from graphview.ops import spatial

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.filterwarnings("ignore:Using padding=.same.:UserWarning")

TOLERANCE = {np.float32: dict(rtol=1e-5, atol=1e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}

# (x shape (channels first), weight shape, attributes)
CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), dict(padding=1)),
    ((2, 3, 7, 6), (4, 3, 3, 2), dict(stride=2)),
    ((1, 2, 9, 8), (2, 2, 2, 2), dict(stride=(3, 4), dilation=(2, 1), padding=(0, 1))),
    ((2, 4, 6, 6), (4, 1, 3, 3), dict(groups=4, padding=1)),
    ((2, 4, 5, 7), (6, 2, 3, 2), dict(groups=2, stride=(2, 1), dilation=(1, 2), padding=1)),
    ((1, 2, 6, 5), (3, 2, 2, 4), dict(padding="same")),
    ((1, 2, 6, 5), (3, 2, 4, 3), dict(padding="same", dilation=2)),
    ((2, 2, 5, 5), (3, 2, 5, 5), dict(padding="valid")),
    ((3, 1, 8, 8), (16, 1, 3, 3), dict(padding=1)),
    # Several chunks of the batch (8 + 2 images of 64 positions), each chunk's product in several blocks of
    # rows (OpenBLAS's small-matrix sizes: 54 rows at K = 288, N = 64; 217 at K = 144, N = 32 per group)
    ((10, 32, 8, 8), (64, 32, 3, 3), dict(padding=1)),
    ((10, 32, 8, 8), (64, 16, 3, 3), dict(groups=2, padding=1)),
]

CONV1D = [
    ((2, 3, 9), (4, 3, 3), dict(padding=1)),
    ((2, 3, 9), (4, 3, 2), dict(stride=3, dilation=2)),
    ((2, 4, 8), (4, 1, 3), dict(groups=4)),
    ((1, 2, 7), (2, 2, 4), dict(padding="same")),
]

TRANSPOSE = [
    ((2, 3, 4, 3), (3, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 3, 4), (4, 1, 2, 3), dict(groups=2, dilation=(2, 1), stride=(3, 1))),
    ((2, 2, 5, 4), (2, 3, 3, 2), dict(padding=(1, 0))),
    ((2, 4, 3, 3), (4, 1, 3, 3), dict(groups=4, stride=2)),
]


def _tolerance(dtype, w_shape):
    """TOLERANCE, its float32 absolute part grown with the terms each output sums (rounding in both
    libraries grows with them: at 288 terms of unit scale the two differ by up to 3e-5)."""
    terms = int(np.prod(w_shape[1:]))
    tolerance = dict(TOLERANCE[dtype])
    if dtype == np.float32:
        tolerance["atol"] *= max(1.0, terms / 32)
    return tolerance


def _data(shapes, dtype, seed=0):
    r = np.random.default_rng(seed)
    return [r.normal(size=s).astype(dtype) for s in shapes]


def _run(build, arrays):
    g = gv.Graph()
    variables = [g.var(f"v{i}", a) for i, a in enumerate(arrays)]
    out = build(g, *variables)
    return g, variables, out, g.output({}, [out])[out.name]


def _to_layout(x, layout):
    return np.ascontiguousarray(x.transpose(spatial.layout_of("t", layout, x.ndim - 2).from_channels_first))


def _from_layout(x, layout):
    return x.transpose(spatial.layout_of("t", layout, x.ndim - 2).to_channels_first)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["bchw", "bhwc"])
@pytest.mark.parametrize("case", range(len(CONV2D)))
def test_conv2d_matches_torch(case, layout, dtype):
    xs, ws, attrs = CONV2D[case]
    x, w, b = _data((xs, ws, (ws[0],)), dtype, case)
    expected = F.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **attrs).numpy()
    *_, got = _run(lambda g, x, w, b: g.nn.conv2d(x, w, b, layout=layout, **attrs), [_to_layout(x, layout), w, b])
    assert got.dtype == dtype
    np.testing.assert_allclose(_from_layout(got, layout), expected, **_tolerance(dtype, ws))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["bcw", "bwc"])
@pytest.mark.parametrize("case", range(len(CONV1D)))
def test_conv1d_matches_torch(case, layout, dtype):
    xs, ws, attrs = CONV1D[case]
    x, w = _data((xs, ws), dtype, case)
    expected = F.conv1d(torch.tensor(x), torch.tensor(w), **attrs).numpy()
    *_, got = _run(lambda g, x, w: g.nn.conv1d(x, w, layout=layout, **attrs), [_to_layout(x, layout), w])
    np.testing.assert_allclose(_from_layout(got, layout), expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["bchw", "bhwc"])
@pytest.mark.parametrize("case", range(len(TRANSPOSE)))
def test_conv_transpose2d_matches_torch(case, layout, dtype):
    xs, ws, attrs = TRANSPOSE[case]
    x, w = _data((xs, ws), dtype, case)
    b = _data(((ws[1] * attrs.get("groups", 1),),), dtype, 9)[0]
    expected = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **attrs).numpy()
    *_, got = _run(lambda g, x, w, b: g.nn.conv_transpose2d(x, w, b, layout=layout, **attrs),
                   [_to_layout(x, layout), w, b])
    np.testing.assert_allclose(_from_layout(got, layout), expected, **TOLERANCE[dtype])


def _torch_grads(function, arrays, gy):
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    function(*tensors).backward(torch.tensor(gy))
    return [t.grad.numpy() for t in tensors]


def _graph_grads(build, arrays, gy):
    g = gv.Graph()
    variables = [g.var(f"v{i}", a) for i, a in enumerate(arrays)]
    out = build(g, *variables)
    g.set_loss(g.math.sum(out * g.constant("gy", gy)))
    grads = g.calculate_gradients({}, [v.name for v in variables])
    return [grads[v.name] for v in variables]


@pytest.mark.parametrize("case", range(len(CONV2D)))
def test_conv2d_gradients_match_torch(case):
    xs, ws, attrs = CONV2D[case]
    x, w, b = _data((xs, ws, (ws[0],)), np.float64, case)
    out_shape = F.conv2d(torch.tensor(x), torch.tensor(w), **attrs).shape
    gy = _data((tuple(out_shape),), np.float64, 50)[0]
    expected = _torch_grads(lambda x, w, b: F.conv2d(x, w, b, **attrs), [x, w, b], gy)
    got = _graph_grads(lambda g, x, w, b: g.nn.conv2d(x, w, b, **attrs), [x, w, b], gy)
    for e, a in zip(expected, got):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", range(len(TRANSPOSE)))
def test_conv_transpose2d_gradients_match_torch(case):
    xs, ws, attrs = TRANSPOSE[case]
    x, w = _data((xs, ws), np.float64, case)
    out_shape = F.conv_transpose2d(torch.tensor(x), torch.tensor(w), **attrs).shape
    gy = _data((tuple(out_shape),), np.float64, 51)[0]
    expected = _torch_grads(lambda x, w: F.conv_transpose2d(x, w, **attrs), [x, w], gy)
    got = _graph_grads(lambda g, x, w: g.nn.conv_transpose2d(x, w, **attrs), [x, w], gy)
    for e, a in zip(expected, got):
        np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("layout", ["bcw", "bwc"])
def test_conv1d_gradients_match_torch(layout):
    xs, ws, attrs = CONV1D[1]
    x, w, b = _data((xs, ws, (ws[0],)), np.float64, 3)
    gy = _data((tuple(F.conv1d(torch.tensor(x), torch.tensor(w), **attrs).shape),), np.float64, 52)[0]
    expected = _torch_grads(lambda x, w, b: F.conv1d(x, w, b, **attrs), [x, w, b], gy)
    got = _graph_grads(lambda g, x, w, b: g.nn.conv1d(x, w, b, layout=layout, **attrs),
                       [_to_layout(x, layout), w, b], _to_layout(gy, layout))
    np.testing.assert_allclose(_from_layout(got[0], layout), expected[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got[2], expected[2], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("op, x_shape, w_shape, attrs", [
    ("conv2d", (2, 2, 5, 6), (4, 2, 2, 3), dict(stride=2, padding=(1, 0), dilation=(1, 2), layout="bhwc")),
    ("conv2d", (2, 4, 5, 4), (4, 2, 2, 3), dict(padding="same", groups=2)),
    ("conv_transpose2d", (2, 4, 3, 3), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1, layout="bhwc")),
    ("conv1d", (2, 4, 7), (3, 4, 3), dict(stride=2, padding=1, layout="bwc")),
])
def test_gradients_match_finite_differences(op, x_shape, w_shape, attrs):
    layout = attrs.get("layout", "bchw")
    channels = w_shape[1] * attrs.get("groups", 1) if op == "conv_transpose2d" else w_shape[0]
    x, w, b = _data((x_shape, w_shape, (channels,)), np.float64, 7)
    g = gv.Graph()
    out = getattr(g.nn, op)(g.var("x", _to_layout(x, layout)), g.var("w", w), g.var("b", b), **attrs)
    g.set_loss(g.math.sum(g.math.tanh(out)))
    report = gv.check_gradients(g, {})
    assert report.passed, str(report)


def test_second_derivative_through_conv2d():
    """d/dw of sum(d loss/dx): the input gradient (conv_transpose2d) is differentiated again."""
    x, w = _data(((1, 2, 5, 5), (3, 2, 3, 3)), np.float64, 8)
    g = gv.Graph()
    xv, wv = g.var("x", x), g.var("w", w)
    g.set_loss(g.math.sum(g.math.square(g.nn.conv2d(xv, wv, stride=2, padding=1))))
    d = g.gradient_graph(["x"])
    d.graph.set_loss(d.graph.math.sum(d.gradients["x"]))
    second = d.graph.calculate_gradients({}, ["w"])["w"]
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (gx,) = torch.autograd.grad((F.conv2d(xt, wt, stride=2, padding=1) ** 2).sum(), xt, create_graph=True)
    (expected,) = torch.autograd.grad(gx.sum(), wt)
    np.testing.assert_allclose(second, expected.numpy(), rtol=1e-10, atol=1e-10)


def test_output_dims_are_derived():
    height, width = gv.Dim("height", 8), gv.Dim("width", 9)
    g = gv.Graph()
    x = g.placeholder("x", dims=(gv.batch_dim, gv.Dim("channel", 2), height, width))
    w = g.var("w", np.ones((4, 2, 3, 3)))
    same = g.nn.conv2d(x, w, padding=1)
    dims = gv.dims_of(same)
    assert dims[0] == gv.batch_dim and dims[2] == height and dims[3] == width
    strided = g.nn.conv2d(x, w, stride=2)
    assert strided.shape[2:] == (3, 4)
    assert [d.size for d in gv.dims_of(strided)[2:]] == [3, 4]
    assert gv.dims_of(g.nn.conv2d(x, w, stride=2)) == gv.dims_of(strided)
    time = gv.Dim("time")
    s = g.placeholder("s", dims=(gv.batch_dim, time, gv.Dim("feature", 3)))
    out = g.nn.conv1d(s, g.var("k", np.ones((5, 3, 3))), padding="same", layout="bwc")
    assert gv.dims_of(out)[1] == time and out.shape[1] is None
    up = g.nn.conv_transpose2d(same, g.var("u", np.ones((4, 1, 2, 2))), stride=2)
    assert up.shape[2:] == (16, 18) and [d.size for d in gv.dims_of(up)[2:]] == [16, 18]


@pytest.mark.parametrize("build, error, text", [
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))), groups=2),
     gv.ShapeError, "input channels 3 is not divisible by groups=2"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 4, 5, 5))), g.var("w", np.ones((4, 3, 3, 3)))),
     gv.ShapeError, r"weight \(4, 3, 3, 3\) takes 3 x groups=1 = 3 input channels but x \(1, 4, 5, 5\) has 4"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 2, 5))), g.var("w", np.ones((4, 3, 5, 3))), padding=1),
     gv.ShapeError, "kernel spans 5 along h .* padded input has 4"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))), layout="nchw"),
     gv.OpArgumentError, "conv2d: layout 'nchw' is not one of 'bchw', 'bhwc'"),
    (lambda g: g.nn.conv1d(g.var("x", np.ones((1, 3, 5))), g.var("w", np.ones((4, 3, 3))), layout="bchw"),
     gv.OpArgumentError, "conv1d: layout 'bchw' is not one of 'bcw', 'bwc'"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))), padding="full"),
     gv.OpArgumentError, "conv2d: padding 'full'"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))), padding="same",
                           stride=2), gv.OpArgumentError, "padding='same' needs stride 1"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))),
                           g.var("b", np.ones(3))), gv.ShapeError, r"bias has shape \(3,\)"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3)))),
     gv.ShapeError, "weight has shape"),
    (lambda g: g.nn.conv2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((4, 3, 3, 3))), stride=0),
     gv.OpArgumentError, "stride"),
    (lambda g: g.nn.conv_transpose2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((2, 3, 3, 3)))),
     gv.ShapeError, "takes 2 input channels"),
    (lambda g: g.nn.conv_transpose2d(g.var("x", np.ones((1, 3, 5, 5))), g.var("w", np.ones((3, 3, 3, 3))),
                                     stride=2, output_padding=2), gv.ShapeError, "output_padding"),
])
def test_errors_name_the_op_and_values(build, error, text):
    with pytest.raises(error, match=text):
        build(gv.Graph())


def test_mixed_float_inputs_promote():
    g = gv.Graph()
    out = g.nn.conv2d(g.var("x", np.ones((1, 1, 3, 3), np.float32)), g.var("w", np.ones((1, 1, 2, 2))))
    assert out.dtype == np.float64


def test_save_and_load_round_trip(tmp_path):
    x, w, b, u = _data(((2, 6, 5, 3), (4, 3, 2, 2), (4,), (4, 2, 3, 3)), np.float64, 11)
    g = gv.Graph()
    xv = g.placeholder("x", (None, 6, 5, 3))
    y = g.nn.conv2d(xv, g.var("w", w), g.var("b", b), stride=(2, 1), padding=((0, 1), (1, 0)),
                    layout="bhwc", name="y")
    z = g.nn.conv_transpose2d(y, g.var("u", u), stride=2, output_padding=1, padding=1, layout="bhwc", name="z")
    s = g.nn.conv1d(g.shape.reshape(z, (-1, 60, 2)), g.var("k", np.ones((3, 2, 2))), layout="bwc", name="s")
    path = tmp_path / "conv.gvz"
    g.save(str(path))
    loaded = gv.load(str(path))
    names = ["y", "z", "s"]
    before = g.output({"x": x}, names)
    after = loaded.output({"x": x}, names)
    for name in names:
        np.testing.assert_array_equal(before[name], after[name])


def test_conv_transpose2d_takes_an_output_padding_below_the_dilation_as_pytorch_does():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 4, 3, 3)), rng.standard_normal((4, 2, 3, 3))
    g = gv.Graph()
    y = g.nn.conv_transpose2d(g.var("x", x), g.var("w", w), output_padding=1, dilation=2)
    expected = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), output_padding=1,
                                                    dilation=2).numpy()
    assert y.shape == (1, 2, 8, 8)
    np.testing.assert_allclose(g.output({}, [y])[y.name], expected, rtol=1e-12, atol=1e-12)
