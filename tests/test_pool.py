"""Pooling (max_pool1d/2d, avg_pool1d/2d, global_avg_pool) against PyTorch, and g.shape.pad against np.pad:
values, gradients (PyTorch's and central differences), errors, dims and graph files."""
import sys
from pathlib import Path

import numpy as np
import pytest

import graphview as gv
from graphview import registry

sys.path.insert(0, str(Path(__file__).parent))
from optable import build, tolerance  # noqa: E402

torch = pytest.importorskip("torch")
F = torch.nn.functional

POOL_OPS = ["max_pool1d", "max_pool1d_grad", "max_pool1d_select", "avg_pool1d", "avg_pool1d_grad",
            "max_pool2d", "max_pool2d_grad", "max_pool2d_select", "avg_pool2d", "avg_pool2d_grad",
            "global_avg_pool", "global_avg_pool_grad", "pad", "pad_grad"]

CASES_2D = [  # kernel_size, stride, padding
    (2, None, 0), (3, 2, 1), ((3, 2), (1, 2), (1, 0)), (2, 3, 1), ((1, 3), 1, (0, 1)), (4, 1, 2)]
CASES_1D = [(2, None, 0), (3, 2, 1), (2, 3, 1), (5, 1, 2), (4, 4, 0)]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _run(build_fn, x, dtype=np.float64):
    g = gv.Graph("pool-test")
    xv = g.placeholder("x", x.shape, x.dtype)
    y = build_fn(g, xv)
    return g.output({"x": x}, [y])[y.name]


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if np.dtype(dtype) == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", POOL_OPS)
def test_samples_match_references(name):
    """The op-table check for these ops alone (values, dtype and build-time shape on every sample)."""
    definition = registry.get(name)
    for sample in definition.samples():
        graph, output, feeds = build(name, sample)
        result = graph.output(feeds, [output])[output.name]
        expected = np.asarray(definition.reference(*sample.inputs, **sample.attrs))
        assert result.shape == expected.shape and result.dtype == expected.dtype == output.dtype, sample.label
        assert all(d is None or d == r for d, r in zip(output.shape, result.shape))
        if result.dtype.kind == "f":
            np.testing.assert_allclose(result, expected, **tolerance(result.dtype), err_msg=sample.label)
        else:
            np.testing.assert_array_equal(result, expected, err_msg=sample.label)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["bchw", "bhwc"])
@pytest.mark.parametrize("case", CASES_2D)
def test_pool2d_matches_torch(case, layout, dtype):
    kernel, stride, padding = case
    x = _rng(1).normal(size=(2, 3, 9, 8)).astype(dtype)
    t = torch.tensor(x)
    given = x if layout == "bchw" else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    back = (lambda a: a) if layout == "bchw" else (lambda a: a.transpose(0, 3, 1, 2))
    pt_stride = stride if stride is not None else kernel
    expected = {
        "max": F.max_pool2d(t, kernel, pt_stride, padding),
        "avg": F.avg_pool2d(t, kernel, pt_stride, padding),
        "avg_no_pad": F.avg_pool2d(t, kernel, pt_stride, padding, count_include_pad=False)}
    got = {
        "max": _run(lambda g, v: g.nn.max_pool2d(v, kernel, stride, padding, layout=layout), given),
        "avg": _run(lambda g, v: g.nn.avg_pool2d(v, kernel, stride, padding, layout=layout), given),
        "avg_no_pad": _run(lambda g, v: g.nn.avg_pool2d(v, kernel, stride, padding, count_include_pad=False,
                                                        layout=layout), given)}
    for key in expected:
        assert got[key].dtype == dtype
        np.testing.assert_allclose(back(got[key]), expected[key].numpy(), **_tol(dtype), err_msg=key)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["bcw", "bwc"])
@pytest.mark.parametrize("case", CASES_1D)
def test_pool1d_matches_torch(case, layout, dtype):
    kernel, stride, padding = case
    x = _rng(2).normal(size=(3, 4, 11)).astype(dtype)
    t = torch.tensor(x)
    given = x if layout == "bcw" else np.ascontiguousarray(x.transpose(0, 2, 1))
    back = (lambda a: a) if layout == "bcw" else (lambda a: a.transpose(0, 2, 1))
    pt_stride = stride if stride is not None else kernel
    for include in (True, False):
        got = _run(lambda g, v: g.nn.avg_pool1d(v, kernel, stride, padding, count_include_pad=include, layout=layout),
                   given)
        np.testing.assert_allclose(back(got), F.avg_pool1d(t, kernel, pt_stride, padding, count_include_pad=include),
                                   **_tol(dtype))
    got = _run(lambda g, v: g.nn.max_pool1d(v, kernel, stride, padding, layout=layout), given)
    np.testing.assert_allclose(back(got), F.max_pool1d(t, kernel, pt_stride, padding).numpy(), **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_global_avg_pool_matches_adaptive_avg_pool(dtype):
    x = _rng(3).normal(size=(2, 5, 6, 7)).astype(dtype)
    t = torch.tensor(x)
    expected2 = F.adaptive_avg_pool2d(t, 1).numpy()[:, :, 0, 0]
    np.testing.assert_allclose(_run(lambda g, v: g.nn.global_avg_pool(v), x), expected2, **_tol(dtype))
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(_run(lambda g, v: g.nn.global_avg_pool(v, layout="bhwc"), nhwc), expected2,
                               **_tol(dtype))
    seq = x[:, :, 0]
    expected1 = F.adaptive_avg_pool1d(torch.tensor(seq), 1).numpy()[:, :, 0]
    np.testing.assert_allclose(_run(lambda g, v: g.nn.global_avg_pool(v), seq), expected1, **_tol(dtype))
    np.testing.assert_allclose(_run(lambda g, v: g.nn.global_avg_pool(v, layout="bwc"),
                                    np.ascontiguousarray(seq.transpose(0, 2, 1))), expected1, **_tol(dtype))


def test_strided_and_transposed_inputs():
    base = _rng(4).normal(size=(2, 6, 10, 8))
    x = base[:, ::2, ::-1, 1::2]            # strided, negative stride
    expected = F.max_pool2d(torch.tensor(np.ascontiguousarray(x)), 2, 1, 1).numpy()
    g = gv.Graph()
    v = g.placeholder("x", x.shape)
    y = g.nn.max_pool2d(v, 2, 1, 1)
    np.testing.assert_array_equal(g.output({"x": x}, [y])[y.name], expected)
    # a bchw view of a bhwc tensor, as an ImageView hands it over
    image = g.placeholder("image", (2, 10, 8, 6))
    pooled = g.nn.avg_pool2d(gv.ImageView("bhwc", image).get("bchw"), 3, 2, 1, count_include_pad=False)
    data = np.ascontiguousarray(base.transpose(0, 2, 3, 1))
    np.testing.assert_allclose(g.output({"image": data}, [pooled])[pooled.name],
                               F.avg_pool2d(torch.tensor(base), 3, 2, 1, count_include_pad=False).numpy(), rtol=1e-12)


def _torch_gradients(fn, x, weights):
    t = torch.tensor(x, requires_grad=True)
    (fn(t) * torch.tensor(weights)).sum().backward()
    return t.grad.numpy()


def _graph_gradients(fn, x, weights):
    g = gv.Graph()
    v = g.var("x", x)
    y = fn(g, v)
    g.set_loss(g.math.sum(y * weights))
    return g.calculate_gradients({}, ["x"])["x"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gradients_match_torch(dtype):
    x = _rng(5).normal(size=(2, 3, 8, 7)).astype(dtype)
    cases = [
        (lambda t: F.max_pool2d(t, 3, 2, 1), lambda g, v: g.nn.max_pool2d(v, 3, 2, 1)),
        (lambda t: F.max_pool2d(t, 2, 3, 1), lambda g, v: g.nn.max_pool2d(v, 2, 3, 1)),
        (lambda t: F.avg_pool2d(t, 3, 2, 1), lambda g, v: g.nn.avg_pool2d(v, 3, 2, 1)),
        (lambda t: F.avg_pool2d(t, 3, 1, 1, count_include_pad=False),
         lambda g, v: g.nn.avg_pool2d(v, 3, 1, 1, count_include_pad=False)),
        (lambda t: F.max_pool1d(t[:, :, 0], 3, 1, 1), lambda g, v: g.nn.max_pool1d(v[:, :, 0], 3, 1, 1)),
        (lambda t: F.avg_pool1d(t[:, :, 0], 2, 2, 1, count_include_pad=False),
         lambda g, v: g.nn.avg_pool1d(v[:, :, 0], 2, 2, 1, count_include_pad=False)),
        (lambda t: F.adaptive_avg_pool2d(t, 1)[:, :, 0, 0], lambda g, v: g.nn.global_avg_pool(v))]
    for number, (reference, ours) in enumerate(cases):
        shape = reference(torch.tensor(x)).shape
        weights = _rng(number).normal(size=shape).astype(dtype)
        expected = _torch_gradients(reference, x, weights)
        got = _graph_gradients(ours, x, weights)
        np.testing.assert_allclose(got, expected, **_tol(dtype), err_msg=f"case {number}")


def test_max_pool_ties_route_to_the_first_maximum_as_torch():
    x = np.zeros((1, 1, 4, 5))
    x[0, 0, 1:3, 1:4] = 1.0                # plateaus: every window holds ties
    weights = _rng(6).normal(size=(1, 1, 3, 4))
    expected = _torch_gradients(lambda t: F.max_pool2d(t, 2, 1, 0), x, weights)
    np.testing.assert_array_equal(_graph_gradients(lambda g, v: g.nn.max_pool2d(v, 2, 1, 0), x, weights), expected)
    row = np.array([[[2.0, 2.0, 1.0, 2.0, 2.0]]])
    w1 = np.array([[[1.0, 10.0, 100.0]]])
    expected = _torch_gradients(lambda t: F.max_pool1d(t, 3, 2, 1), row, w1)
    np.testing.assert_array_equal(_graph_gradients(lambda g, v: g.nn.max_pool1d(v, 3, 2, 1), row, w1), expected)


def _check(build_fn, x, seed=0):
    g = gv.Graph()
    v = g.var("x", x)
    y = build_fn(g, v)
    weights = _rng(seed).normal(size=y.shape)
    g.set_loss(g.math.sum(y * weights))
    report = gv.check_gradients(g, {})
    assert report.passed, str(report)


def test_gradients_match_finite_differences():
    x = _rng(7).normal(size=(2, 2, 6, 5))
    _check(lambda g, v: g.nn.max_pool2d(v, 3, 2, 1, layout="bhwc"), x)
    _check(lambda g, v: g.nn.avg_pool2d(v, (2, 3), (1, 2), (1, 1), count_include_pad=False), x)
    _check(lambda g, v: g.nn.global_avg_pool(v, layout="bhwc"), x)
    _check(lambda g, v: g.nn.avg_pool1d(v[:, 0], 3, 2, 1, layout="bwc"), x)
    _check(lambda g, v: g.nn.max_pool1d(v[:, 1], 2, 1, 1), x)
    for mode in ("constant", "reflect", "edge"):
        _check(lambda g, v: g.shape.pad(v, ((0, 1), (1, 0), (2, 3), (1, 4)), mode=mode, value=0.5), x)


def test_second_derivatives_through_the_gradient_ops():
    """The gradient ops are differentiable: d/dx sum(grad_x(sum(pool(x) * pool(x)))) is finite-difference right."""
    x = _rng(8).normal(size=(1, 2, 5, 5))
    for pool in (lambda g, v: g.nn.avg_pool2d(v, 3, 2, 1), lambda g, v: g.nn.max_pool2d(v, 3, 2, 1),
                 lambda g, v: g.shape.pad(v, ((0, 0), (0, 1), (2, 2), (1, 3)), mode="reflect")):
        g = gv.Graph()
        v = g.var("x", x)
        y = pool(g, v)
        g.set_loss(g.math.sum(y * y))
        d = g.gradient_graph(["x"])
        d.graph.set_loss(d.graph.math.sum(d.gradients["x"] * d.gradients["x"]))
        report = gv.check_gradients(d.graph, {}, wrt=["x"])
        assert report.passed, str(report)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_pad_matches_numpy(dtype):
    x = (_rng(9).normal(size=(3, 4, 5)) * 10).astype(dtype)
    widths = [2, (1, 2), ((2, 1),), ((0, 0), (1, 3), (2, 0)), [[1], [0], [3]], np.array([[1, 1], [2, 2], [0, 1]])]
    for width in widths:
        for mode in ("constant", "reflect", "edge"):
            if mode == "reflect" and np.max(np.broadcast_to(np.asarray(width), (3, 2))) >= 3:
                continue
            kwargs = {"constant_values": 7} if mode == "constant" else {}
            got = _run(lambda g, v: g.shape.pad(v, width, mode=mode, **({"value": 7} if kwargs else {})), x)
            expected = np.pad(x, width, mode=mode, **kwargs)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected, err_msg=f"{width} {mode}")
    strided = x[::2, ::-1]
    np.testing.assert_array_equal(_run(lambda g, v: g.shape.pad(v, 1, mode="reflect"), strided),
                                  np.pad(strided, 1, mode="reflect"))


def test_pad_gradients_match_torch():
    x = _rng(10).normal(size=(2, 3, 5, 6))
    widths = ((0, 0), (0, 0), (1, 3), (2, 1))   # torch's pad lists the last axis first
    for mode, torch_mode in (("reflect", "reflect"), ("edge", "replicate"), ("constant", "constant")):
        weights = _rng(11).normal(size=np.pad(x, widths).shape)
        expected = _torch_gradients(lambda t: F.pad(t, (2, 1, 1, 3), mode=torch_mode), x, weights)
        got = _graph_gradients(lambda g, v: g.shape.pad(v, widths, mode=mode), x, weights)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=mode)


def test_constant_pad_gradient_is_a_view():
    g = gv.Graph()
    v = g.var("x", np.ones((3, 4)))
    g.set_loss(g.math.sum(g.shape.pad(v, 2) * 3.0))
    ops = {node.op for node in g.gradient_graph(["x"]).graph.nodes()}
    assert "pad_grad" not in ops and "create_view" in ops
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], np.full((3, 4), 3.0))


def _error(build_fn, error, match, shape=(2, 3, 8, 8)):
    g = gv.Graph()
    v = g.placeholder("x", shape)
    with pytest.raises(error, match=match):
        build_fn(g, v)


def test_errors_when_built():
    _error(lambda g, v: g.nn.max_pool2d(v, 3, 1, 2), gv.ShapeError, r"max_pool2d: .*padding .*more than half")
    _error(lambda g, v: g.nn.avg_pool2d(v, (3, 9)), gv.ShapeError,
           r"avg_pool2d: the kernel spans 9 along w \(kernel size 9\) but the padded input has 8")
    _error(lambda g, v: g.nn.max_pool1d(v, 12, padding=2), gv.ShapeError, r"max_pool1d: the kernel spans 12",
           shape=(2, 3, 7))
    _error(lambda g, v: g.nn.max_pool2d(v, 2, layout="hwcb"), gv.OpArgumentError, r"max_pool2d.*'hwcb'")
    _error(lambda g, v: g.nn.max_pool2d(v, 2), gv.ShapeError, r"max_pool2d: input of shape \(2, 3, 8\)",
           shape=(2, 3, 8))
    _error(lambda g, v: g.nn.avg_pool2d(v, 0), gv.OpArgumentError, r"avg_pool2d: kernel_size 0 holds a value below 1")
    _error(lambda g, v: g.nn.max_pool2d(v, 2, stride=(1, 2, 3)), gv.OpArgumentError, r"max_pool2d: stride")
    _error(lambda g, v: g.nn.global_avg_pool(v, layout="bcw"), gv.ShapeError, r"global_avg_pool: input of shape")
    _error(lambda g, v: g.shape.pad(v, ((1, 1), (2, 2), (3, 3))), gv.ShapeError,
           r"pad: pad_width .* does not broadcast to \(4, 2\)")
    _error(lambda g, v: g.shape.pad(v, -1), gv.OpArgumentError, r"pad: pad_width -1 holds a negative pad")
    _error(lambda g, v: g.shape.pad(v, 1.5), gv.OpArgumentError, r"pad: pad_width 1.5 is not an int")
    _error(lambda g, v: g.shape.pad(v, ((0, 0), (0, 0), (8, 0), (0, 0)), mode="reflect"), gv.ShapeError,
           r"pad: reflect padding \(8, 0\) of axis 2 must be smaller than the axis's size 8")
    _error(lambda g, v: g.shape.pad(v, 1, mode="wrap"), gv.OpArgumentError, r"pad: attribute 'mode': 'wrap'")
    _error(lambda g, v: g.shape.pad(v, 1, mode="edge"), gv.ShapeError, r"pad: mode 'edge' cannot pad axis 0",
           shape=(0, 3))


def test_unknown_sizes_are_checked_when_run():
    g = gv.Graph()
    v = g.placeholder("x", (None, 3, None, None))
    y = g.nn.max_pool2d(v, 3)
    assert y.shape == (None, 3, None, None)
    with pytest.raises(gv.GraphviewError, match="the kernel spans 3"):
        g.output({"x": np.zeros((1, 3, 2, 5))}, [y])
    r = g.shape.pad(v, ((0, 0), (0, 0), (3, 3), (3, 3)), mode="reflect")
    with pytest.raises(gv.GraphviewError, match="reflect padding"):
        g.output({"x": np.zeros((1, 3, 5, 3))}, [r])


def test_save_and_load(tmp_path):
    g = gv.Graph("pools")
    x = g.placeholder("x", (None, 3, 8, 8))
    outputs = [g.nn.max_pool2d(x, 3, 2, 1), g.nn.avg_pool2d(x, 2, count_include_pad=False, layout="bchw"),
               g.nn.global_avg_pool(x), g.nn.max_pool1d(x[:, :, 0], 2), g.nn.avg_pool1d(x[:, 0], 3, 1, 1, layout="bwc"),
               g.shape.pad(x, ((0, 0), (0, 0), (1, 2), (3, 0)), mode="reflect"), g.shape.pad(x, 1, value=-2.0)]
    g.set_loss(g.math.sum(outputs[0]) + g.math.sum(outputs[5]))
    data = _rng(12).normal(size=(2, 3, 8, 8))
    before = g.output({"x": data}, outputs)
    path = tmp_path / "pools.gvz"
    g.save(str(path))
    loaded = gv.load(str(path))
    after = loaded.output({"x": data}, [o.name for o in outputs])
    for o in outputs:
        np.testing.assert_array_equal(after[o.name], before[o.name])


def test_spatial_dims_are_derived():
    g = gv.Graph()
    time = gv.Dim("time", 12)
    channels = gv.Dim("channels", 4)
    seq = g.placeholder("seq", dims=(gv.batch_dim, channels, time))
    pooled = g.nn.max_pool1d(seq, 2)
    dims = gv.dims_of(pooled)
    assert dims[0] is gv.batch_dim and dims[1] is channels and dims[2] is not None and dims[2].size == 6
    assert gv.dims_of(g.nn.global_avg_pool(seq)) == (gv.batch_dim, channels)
    padded = gv.dims_of(g.shape.pad(seq, ((0, 0), (0, 0), (1, 1))))
    assert padded[:2] == (gv.batch_dim, channels) and padded[2].size == 14


def test_max_pool_nan_propagates_as_torch():
    x = _rng(13).normal(size=(1, 2, 4, 6))
    x[0, 0, 1, 1] = x[0, 0, 0, 1] = np.nan       # two NaNs in one window: the gradient goes to the last one
    x[0, 1, 3, 5] = np.nan
    weights = _rng(14).normal(size=(1, 2, 2, 3))
    got = _run(lambda g, v: g.nn.max_pool2d(v, 2), x)
    np.testing.assert_array_equal(got, F.max_pool2d(torch.tensor(x), 2).numpy())
    expected = _torch_gradients(lambda t: F.max_pool2d(t, 2), x, weights)
    np.testing.assert_array_equal(_graph_gradients(lambda g, v: g.nn.max_pool2d(v, 2), x, weights), expected)


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_an_empty_spatial_axis_is_refused_even_with_padding(op):
    g = gv.Graph()
    x = g.placeholder("x", (1, 1, None, 4))
    y = getattr(g.nn, op)(x, 2, padding=((1, 1), (0, 0)))       # windows of padding only: row 0 was read
    with pytest.raises(gv.ShapeError, match=f"{op}: spatial axis h of x \\(1, 1, 0, 4\\) is empty"):
        g.output({"x": np.zeros((1, 1, 0, 4))}, [y])


def test_max_pool_gradient_goes_to_the_first_of_tied_maxima_as_torch():
    """Ties (relu's zeros, rounded values) and infinities in 2x2 windows: the gradient goes to the
    window's first maximum in row-major order, as PyTorch's; a window of -inf to its first entry."""
    x = np.maximum(np.round(_rng(15).normal(size=(3, 4, 6, 8))), 0.0)
    x[0, 0, :2, :2] = -np.inf
    x[1, 2, 2:4, 4:6] = [[1.0, np.inf], [np.inf, 1.0]]
    weights = _rng(16).normal(size=(3, 4, 3, 4))
    expected = _torch_gradients(lambda t: F.max_pool2d(t, 2), x, weights)
    got = _graph_gradients(lambda g, v: g.nn.max_pool2d(v, 2), x, weights)
    np.testing.assert_array_equal(got, expected)
    assert np.count_nonzero(got) == weights.size


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("contiguous", [True, False])
def test_2x2_max_pool_on_contiguous_and_strided_input_matches_torch(dtype, contiguous):
    """2x2 windows at stride 2: C-contiguous input takes the kernels typed 'C', a strided one those typed
    for any strides; odd sizes leave a row and a column no window covers (gradient 0 there)."""
    x = _rng(17).normal(size=(2, 3, 5, 7)).astype(dtype)
    data = x if contiguous else np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    assert data.flags.c_contiguous == contiguous
    np.testing.assert_array_equal(_run(lambda g, v: g.nn.max_pool2d(v, 2), data),
                                  F.max_pool2d(torch.tensor(x), 2).numpy())
    weights = _rng(18).normal(size=(2, 3, 2, 3)).astype(dtype)
    expected = _torch_gradients(lambda t: F.max_pool2d(t, 2), x, weights)
    got = _graph_gradients(lambda g, v: g.nn.max_pool2d(v, 2), data, weights)
    np.testing.assert_array_equal(got, expected)
    assert not got[:, :, 4].any() and not got[:, :, :, 6].any()
