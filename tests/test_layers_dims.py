"""Layers read layouts from the input's Dims or check the ones given; a layer's bad dtype names the layer."""
import numpy as np
import pytest

import graphview as gv
from graphview import layers as L


def time_major_graph():
    g = gv.Graph("time-major")
    time = gv.Dim("time")
    x = g.placeholder("x", dims=(time, gv.batch_dim, gv.Dim("feature", 3)), lengths={time: "x_len"})
    return g, x


@pytest.mark.parametrize("layer", [L.LSTM, L.GRU])
def test_a_time_major_input_with_dims_is_read_as_time_major(layer):
    g, x = time_major_graph()
    h = layer(4, name="rnn", seed=0)(x)
    data = np.random.default_rng(0).normal(size=(5, 2, 3))
    out = g.output({"x": data, "x_len": np.array([5, 3])}, [h])[h.name]
    assert out.shape == (2, 4)                              # the batch of 2, not the 5 time steps
    alone = g.output({"x": data[:3, 1:2], "x_len": np.array([3])}, [h])[h.name]
    np.testing.assert_allclose(out[1:2], alone, rtol=1e-12, atol=1e-12)


def test_a_layout_that_contradicts_the_dims_is_refused():
    _, x = time_major_graph()
    with pytest.raises(gv.OpArgumentError, match="layout 'btf' but 'x''s Dims put the batch at axis 1"):
        L.LSTM(4, layout="btf")(x)


def test_a_batch_norm_layout_is_checked_and_a_layer_dtype_is_named():
    with pytest.raises(gv.OpArgumentError, match="BatchNorm: layout 'nhwc' is not one of 'bcw', 'bwc', 'bchw'"):
        L.BatchNorm(layout="nhwc")                               # was read as channels first
    assert L.BatchNorm(layout="bhwc").axis == 3 and L.BatchNorm(layout="bf").axis == 1
    g = gv.Graph()
    with pytest.raises(gv.DTypeError, match="layer 'dense' \\(Dense\\): dtype: 'foo' is not a dtype"):
        L.Dense(3, dtype="foo")(g.placeholder("x", (None, 3)))
