"""Lengths through merges: (t f), (f t) and (t1 t2) have lengths, and splitting gives the dims back."""
import numpy as np
import pytest

import graphview as gv
from graphview.gradcheck import check_op


def _graph():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    x = g.placeholder("x", dims=(gv.batch_dim, feature, time), lengths={time: "len"})
    return g, x, time, feature


def _data(seed=0):
    r = np.random.default_rng(seed)
    data, lengths = r.normal(size=(3, 3, 5)), np.array([5, 2, 0])
    padded = data.copy()
    for b, n in enumerate(lengths):
        padded[b, :, n:] = np.nan
    return data, padded, lengths


@pytest.mark.parametrize("pattern", ["b f t -> b (f t)", "b f t -> b (t f)"])
def test_a_merge_with_time_in_either_place_is_masked(pattern):
    g, x, time, feature = _graph()
    merged = gv.rearrange(x, pattern)
    dim = gv.dims_of(merged)[1]
    assert dim in (feature * time, time * feature) and gv.lengths_of(g, dim) is not None
    total, top, soft = g.math.sum(merged, axis=1), g.math.max(merged, axis=1), g.nn.softmax(merged, axis=dim)
    assert (total.op, top.op, soft.op) == ("masked_sum", "masked_max", "masked_softmax")
    data, padded, lengths = _data()
    values = g.output({"x": padded, "len": lengths}, [total, top, soft, gv.lengths_of(g, dim)])
    np.testing.assert_array_equal(values[gv.lengths_of(g, dim).name], 3 * lengths)
    for b, n in enumerate(lengths):
        valid = data[b, :, :n] if pattern.endswith("(f t)") else data[b, :, :n].T
        np.testing.assert_allclose(values[total.name][b], valid.sum())
        if n:
            expected = np.exp(valid.reshape(-1) - valid.max())
            np.testing.assert_allclose(values[soft.name][b, :3 * n], expected / expected.sum())
            np.testing.assert_allclose(values[top.name][b], valid.max())


def test_f_t_merge_packs_then_splits_back():
    g, x, time, feature = _graph()
    merged = gv.rearrange(x, "b f t -> b (f t)")
    assert merged.op == "pack_axes"
    back = gv.rearrange(merged, "b (f t) -> b f t")
    assert back.op == "unpack_axis" and gv.dims_of(back) == (gv.batch_dim, feature, time)
    assert g.math.mean(back, axis=time).op == "masked_mean"
    data, padded, lengths = _data(1)
    values = g.output({"x": padded, "len": lengths}, [merged, back])
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(values[merged.name][b, :3 * n], data[b, :, :n].reshape(-1))
        assert not values[merged.name][b, 3 * n:].any()
        np.testing.assert_array_equal(values[back.name][b, :, :n], data[b, :, :n])
        assert not values[back.name][b, :, n:].any()


def test_two_dynamic_dims_merge_with_the_product_of_lengths():
    g = gv.Graph()
    t1, t2 = gv.Dim("query"), gv.Dim("key")
    x = g.placeholder("x", dims=(gv.batch_dim, t1, t2), lengths={t1: "len1", t2: "len2"})
    merged = gv.rearrange(x, "b q k -> b (q k)")
    assert merged.op == "pack_axes" and g.math.sum(merged, axis=1).op == "masked_sum"
    back = gv.rearrange(merged, "b (q k) -> b q k")
    assert gv.dims_of(back) == (gv.batch_dim, t1, t2)
    r = np.random.default_rng(2)
    data, l1, l2 = r.normal(size=(3, 4, 5)), np.array([4, 1, 2]), np.array([2, 5, 0])
    padded = data.copy()
    for b in range(3):
        padded[b, l1[b]:] = np.nan
        padded[b, :, l2[b]:] = np.nan
    total, merged_lengths = g.math.sum(merged, axis=1), gv.lengths_of(g, t1 * t2)
    values = g.output({"x": padded, "len1": l1, "len2": l2}, [total, back, merged_lengths])
    for b in range(3):
        np.testing.assert_allclose(values[total.name][b], data[b, :l1[b], :l2[b]].sum())
        np.testing.assert_array_equal(values[back.name][b, :l1[b], :l2[b]], data[b, :l1[b], :l2[b]])
    np.testing.assert_array_equal(values[merged_lengths.name], l1 * l2)


def test_gradients_through_pack_and_unpack():
    g, x, time, feature = _graph()
    merged = gv.rearrange(x, "b f t -> b (f t)")
    loss = g.math.sum(g.math.tanh(gv.rearrange(g.nn.softmax(merged, axis=1), "b (f t) -> b f t")) ** 2)
    data, _, lengths = _data(3)
    g.set_loss(loss)
    grads = g.calculate_gradients({"x": data, "len": lengths}, ["x"])
    for b, n in enumerate(lengths):
        assert not grads["x"][b, :, n:].any()    # padding gets exactly 0
    assert grads["x"][0].any()
    for op in ("pack_axes", "unpack_axis"):
        for sample in gv.registry.get(op).samples():
            assert check_op(op, sample).passed, (op, sample.label)


def test_batch_merged_with_time_is_a_plain_merge():
    g, x, time, feature = _graph()
    merged = gv.rearrange(x, "b f t -> (b t) f")
    assert merged.op in ("merge_axes", "merge_axes_copy") and g.math.sum(merged, axis=0).op == "sum"


def test_pack_refuses_bad_lengths():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3, 4))
    lengths = g.placeholder("lengths", (2,), "int64")
    packed = gv.registry.op("pack_axes")(x, lengths, start=1, stop=3, batch_axis=0, dynamic=(1,))
    with pytest.raises(gv.GraphviewError, match="pack_axes.*outside \\[0, 4\\]"):
        g.output({"x": np.zeros((2, 3, 4)), "lengths": np.array([5, 1])}, [packed])
    with pytest.raises(gv.ShapeError, match="batch axis 1 cannot be among the merged axes"):
        gv.registry.op("pack_axes")(x, lengths, start=1, stop=3, batch_axis=1, dynamic=(1,))
    with pytest.raises(gv.ShapeError, match="dynamic \\(2,\\) must name"):
        gv.registry.op("pack_axes")(x, lengths, start=1, stop=3, batch_axis=0, dynamic=(2,))


def test_a_graph_with_packed_merges_saves_and_loads(tmp_path):
    g, x, time, feature = _graph()
    total = g.math.sum(gv.rearrange(x, "b f t -> b (f t)"), axis=1)
    g.save(tmp_path / "packed.gvz")
    loaded = gv.load(tmp_path / "packed.gvz")
    data, padded, lengths = _data(4)
    feed = {"x": padded, "len": lengths}
    np.testing.assert_allclose(loaded.output(feed, [total.name])[total.name], g.output(feed, [total])[total.name])


def test_a_sequence_view_flattened_to_bf_keeps_the_lengths():
    g, x, time, feature = _graph()
    flat = gv.SequenceView("bcw", x).get("bf")
    assert flat.op == "pack_axes" and g.math.sum(flat, axis=1).op == "masked_sum"
    data, padded, lengths = _data(5)
    total = g.math.sum(flat, axis=1)
    values = g.output({"x": padded, "len": lengths}, [total])[total.name]
    np.testing.assert_allclose(values, [data[b, :, :n].sum() for b, n in enumerate(lengths)])


def test_a_loaded_graph_splits_a_packed_merge_back(tmp_path):
    g, x, time, feature = _graph()
    gv.rearrange(x, "b f t -> b (f t)")
    g.save(tmp_path / "packed.gvz")
    loaded = gv.load(tmp_path / "packed.gvz")
    merged = [loaded[n.name] for n in loaded.nodes() if n.op == "pack_axes"][0]
    back = gv.rearrange(merged, "b (f t) -> b f t")
    assert back.op == "unpack_axis"
    data, padded, lengths = _data(6)
    value = loaded.output({"x": padded, "len": lengths}, [back])[back.name]
    for b, n in enumerate(lengths):
        np.testing.assert_array_equal(value[b, :, :n], data[b, :, :n])


def test_a_hand_tagged_merge_of_dims_with_lengths_is_not_split_blindly():
    g, x, time, feature = _graph()
    y = g.placeholder("y", dims=(gv.batch_dim, feature * time))
    with pytest.raises(gv.PatternError, match="was not built by a merge in graph"):
        gv.rearrange(y, "b (f t) -> b f t")


def test_run_time_lengths_out_of_range_are_execution_errors():
    g = gv.Graph()
    x = g.placeholder("x", (2, 3, 4))
    lengths = g.placeholder("lengths", (2,), "int64")
    packed = gv.registry.op("pack_axes")(x, lengths, start=1, stop=3, batch_axis=0, dynamic=(1,))
    with pytest.raises(gv.ExecutionError, match="pack_axes.*lengths input 0 holds -1..1, outside \\[0, 4\\]"):
        g.output({"x": np.zeros((2, 3, 4)), "lengths": np.array([-1, 1])}, [packed])
    like = g.placeholder("like", (2, 3, 4))
    unpacked = gv.registry.op("unpack_axis")(g.placeholder("y", (2, 12)), like, lengths, axis=1, like_start=1,
                                             count=2, batch_axis=0, dynamic=(1,))
    with pytest.raises(gv.ExecutionError, match="unpack_axis: lengths input 0 holds 1..9"):
        g.output({"y": np.zeros((2, 12)), "like": np.zeros((2, 3, 4)), "lengths": np.array([9, 1])}, [unpacked])


@pytest.mark.parametrize("order", ["time feat", "feat time"])
def test_softmax_over_merged_axes_names_the_users_lengths_and_value(order):
    time, feat = gv.Dim("time"), gv.Dim("feat", 3)
    g = gv.Graph()
    dims = (gv.batch_dim, time, feat) if order == "time feat" else (gv.batch_dim, feat, time)
    x = g.placeholder("x", dims=dims, lengths={time: "seq_len"})
    y = g.nn.log_softmax(x, axis=(time, feat))
    shape = (2, 5, 3) if order == "time feat" else (2, 3, 5)
    with pytest.raises(gv.ExecutionError, match=r"lengths 'seq_len': length 6 of batch entry 0 is outside \[0, 5\]"):
        g.output({"x": np.zeros(shape), "seq_len": np.array([6, 2])}, [y])
    data = np.random.default_rng(0).normal(size=shape)
    out = g.output({"x": data, "seq_len": np.array([5, 2])}, [y])[y.name]
    valid = data[1, :2] if order == "time feat" else data[1, :, :2]
    expected = valid - np.log(np.exp(valid).sum())
    got = out[1, :2] if order == "time feat" else out[1, :, :2]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
