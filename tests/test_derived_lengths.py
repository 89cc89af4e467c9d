"""Dims derived by convolution and pooling keep lengths (RETURNN's rule): ``(n + pads - span) // stride + 1``,
clipped at 0, built in the graph and registered in the dims table, so masked ops after them ignore padding."""
import numpy as np
import pytest

import graphview as gv
from graphview.layouts import table


def _graph(name):
    time, feat = gv.Dim("time"), gv.Dim("feat", 3)
    g = gv.Graph(name)
    x = g.placeholder("x", dims=(gv.batch_dim, time, feat), lengths={time: "n"})
    return g, x, time


def _expected(n, kernel, stride=1, pads=0, dilation=1):
    return np.maximum((n + pads - dilation * (kernel - 1) - 1) // stride + 1, 0)


def test_strided_conv_derives_lengths_and_masks_the_mean():
    g, x, time = _graph("strided-conv")
    w = g.var("w", np.random.default_rng(0).normal(size=(2, 3, 3)))
    y = g.nn.conv1d(x, w, layout="bwc", stride=2)
    out_dim = gv.dims_of(y)[1]
    assert out_dim is not time and table.lengths_of(g, out_dim) is not None
    m = g.math.mean(y, axis=out_dim)
    assert m.node.op == "masked_mean"
    X = np.random.default_rng(1).normal(size=(2, 9, 3))
    n = np.array([9, 5])
    out = g.output({"x": X, "n": n}, [m, y, table.lengths_of(g, out_dim)])
    lengths = out[table.lengths_of(g, out_dim).name]
    assert lengths.tolist() == [4, 2]        # (5 - 3) // 2 + 1 = 2 valid frames in row 1
    assert np.allclose(out[m.name][1], out[y.name][1, :2].mean(axis=0))
    assert np.allclose(out[m.name][0], out[y.name][0].mean(axis=0))


@pytest.mark.parametrize("stride,padding,dilation", [(1, "valid", 1), (2, 1, 1), (3, ((2, 0),), 2), (1, ((1, 0),), 1)])
def test_conv_lengths_formula_and_clip_at_zero(stride, padding, dilation):
    g, x, _ = _graph("formula")
    y = g.nn.conv1d(x, g.var("w", np.ones((2, 3, 3))), layout="bwc", stride=stride, padding=padding,
                    dilation=dilation)
    lengths = table.lengths_of(g, gv.dims_of(y)[1])
    assert lengths is not None and lengths.dtype == np.int64
    n = np.arange(0, 12)
    value = g.output({"x": np.zeros((12, 11, 3)), "n": n}, [lengths])[lengths.name]
    pads = {"valid": 0}.get(padding, None)
    if pads is None:
        pads = sum(padding[0]) if isinstance(padding, tuple) else 2 * padding
    assert value.tolist() == _expected(n, 3, stride, pads, dilation).tolist()
    assert value.min() >= 0


def test_same_conv_keeps_dim_and_lengths():
    g, x, time = _graph("same")
    y = g.nn.conv1d(x, g.var("w", np.ones((2, 3, 3))), layout="bwc", padding="same")
    assert gv.dims_of(y)[1] is time
    assert table.lengths_of(g, time).name == "n"
    assert g.math.mean(y, axis=time).node.op == "masked_mean"


def test_channels_first_conv_and_pooling_derive_lengths():
    g, x, time = _graph("pool")
    bcw = gv.rearrange(x, "b t f -> b f t")
    y = g.nn.conv1d(bcw, g.var("w", np.ones((2, 3, 2))), stride=2)
    assert table.lengths_of(g, gv.dims_of(y)[2]) is not None
    p = g.nn.max_pool1d(x, 2, layout="bwc")
    a = g.nn.avg_pool1d(x, 3, stride=2, padding=1, layout="bwc")
    n = np.array([7, 3, 0])
    lp, la = table.lengths_of(g, gv.dims_of(p)[1]), table.lengths_of(g, gv.dims_of(a)[1])
    out = g.output({"x": np.zeros((3, 7, 3)), "n": n}, [lp, la])
    assert out[lp.name].tolist() == _expected(n, 2, 2).tolist()
    assert out[la.name].tolist() == _expected(n, 3, 2, 2).tolist()
    m = g.math.sum(p, axis=gv.dims_of(p)[1])
    assert m.node.op == "masked_sum"


def test_conv2d_derives_lengths_on_a_dynamic_axis():
    time = gv.Dim("time")
    g = gv.Graph("conv2d")
    x = g.placeholder("x", dims=(gv.batch_dim, gv.Dim("c", 1), time, gv.Dim("f", 4)), lengths={time: "n"})
    y = g.nn.conv2d(x, g.var("w", np.ones((2, 1, 3, 3))), stride=(2, 1))
    lengths = table.lengths_of(g, gv.dims_of(y)[2])
    n = np.array([8, 4])
    assert g.output({"x": np.zeros((2, 1, 8, 4)), "n": n}, [lengths])[lengths.name].tolist() == [3, 1]


def test_ctc_after_a_strided_conv_takes_the_derived_dim():
    g, x, _ = _graph("ctc")
    y = g.nn.conv1d(x, g.var("w", np.random.default_rng(2).normal(size=(4, 3, 3))), layout="bwc", stride=2)
    out_dim = gv.dims_of(y)[1]
    log_probs = g.nn.log_softmax(gv.rearrange(y, "b t c -> t b c"), axis=-1)
    label_dim = gv.Dim("labels")
    labels = g.placeholder("labels", dims=(gv.batch_dim, label_dim), dtype="int64", lengths={label_dim: "s"})
    loss = g.loss.ctc(log_probs, labels, out_dim, label_dim, reduction="none")
    X = np.random.default_rng(3).normal(size=(2, 9, 3))
    value = g.output({"x": X, "n": np.array([9, 5]), "labels": np.array([[1, 2], [3, 0]]),
                      "s": np.array([2, 1])}, [loss, y])
    torch = pytest.importorskip("torch")
    lp = torch.log_softmax(torch.tensor(value[y.name]).transpose(0, 1), dim=-1)
    expected = torch.nn.functional.ctc_loss(lp, torch.tensor([[1, 2], [3, 0]]), torch.tensor([4, 2]),
                                            torch.tensor([2, 1]), reduction="none")
    assert np.allclose(value[loss.name], expected.numpy())


def test_derived_lengths_survive_save_and_load(tmp_path):
    g, x, _ = _graph("saved")
    y = g.nn.conv1d(x, g.var("w", np.ones((2, 3, 3))), layout="bwc", stride=2)
    g.save(tmp_path / "g")
    loaded = gv.load(tmp_path / "g")
    dim = gv.dims_of(loaded[y.name])[1]
    m = loaded.math.mean(loaded[y.name], axis=dim)
    assert m.node.op == "masked_mean"
