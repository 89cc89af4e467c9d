"""Masking by lengths: reductions, softmax and losses over dynamic dims ignore padding, against NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphview as gv
from graphview.ops import masked as masked_ops
from graphview.ops.masked import mask_array

REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def sequences(batch=3, time=6, features=4, lengths=(6, 3, 1), seed=0):
    r = np.random.default_rng(seed)
    data = r.normal(size=(batch, time, features))
    lengths = np.asarray(lengths)
    for b, n in enumerate(lengths):
        data[b, n:] = 1e6          # padding that would dominate any result that read it
    return data, lengths


def graph():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 4)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    return g, seq, time, feature


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_over_the_dynamic_dim_ignore_padding(name):
    g, seq, time, feature = graph()
    reduced = getattr(g.math, name)(seq, axis=time)
    assert reduced.op == f"masked_{name}" and gv.dims_of(reduced) == (gv.batch_dim, feature)
    data, lengths = sequences()
    result = g.output({"seq": data, "seq_len": lengths}, [reduced])[reduced.name]
    expected = np.stack([REDUCTIONS[name](data[b, :n], axis=0) for b, n in enumerate(lengths)])
    np.testing.assert_allclose(result, expected, rtol=1e-12)


def test_mean_over_everything_counts_only_valid_entries():
    g, seq, time, feature = graph()
    everything = g.math.mean(seq)
    data, lengths = sequences()
    result = g.output({"seq": data, "seq_len": lengths}, [everything])[everything.name]
    np.testing.assert_allclose(result, np.mean(np.concatenate([data[b, :n] for b, n in enumerate(lengths)])))


def test_a_merge_of_time_then_features_keeps_lengths_and_stays_masked():
    g, seq, time, feature = graph()
    merged = gv.rearrange(seq, "b t f -> b (t f)")
    lengths_name = gv.lengths_of(g, time * feature).name
    assert gv.lengths_of(g, time * feature).name == lengths_name   # built once
    total, probabilities = g.math.max(merged, axis=1), g.nn.softmax(merged, axis=time * feature)
    assert (total.op, probabilities.op) == ("masked_max", "masked_softmax")
    data, lengths = sequences()
    values = g.output({"seq": data, "seq_len": lengths}, [total, probabilities])
    np.testing.assert_allclose(values[total.name], [data[b, :n].max() for b, n in enumerate(lengths)])
    for b, n in enumerate(lengths):
        valid = np.exp(data[b, :n].reshape(-1) - data[b, :n].max())
        np.testing.assert_allclose(values[probabilities.name][b, :n * 4], valid / valid.sum(), rtol=1e-12)
        assert not values[probabilities.name][b, n * 4:].any()


def test_a_merge_with_time_inside_packs_the_padding_to_the_end():
    g, seq, time, feature = graph()
    packed = gv.rearrange(seq, "b t f -> b (f t)")   # tests/test_merge_lengths.py checks the values
    assert packed.op == "pack_axes" and gv.lengths_of(g, feature * time) is not None
    assert g.math.sum(packed, axis=1).op == "masked_sum"


def test_reductions_over_other_axes_are_not_masked():
    g, seq, time, feature = graph()
    assert g.math.sum(seq, axis=feature).op == "sum"
    assert g.nn.softmax(seq, axis=-1).op == "softmax"


def test_logsumexp_time_major_and_keepdims():
    g = gv.Graph()
    time = gv.Dim("time")
    seq = g.placeholder("seq", dims=(time, gv.batch_dim), lengths={time: "len"})
    out = g.math.logsumexp(seq, axis=0, keepdims=True)
    assert out.op == "masked_logsumexp" and out.shape == (1, None)
    data, lengths = sequences(features=1)
    tb = data[..., 0].T.copy()
    result = g.output({"seq": tb, "len": lengths}, [out])[out.name]
    expected = [np.log(np.sum(np.exp(tb[:n, b]))) for b, n in enumerate(lengths)]
    np.testing.assert_allclose(result[0], expected, rtol=1e-12)


def test_softmax_over_time_gives_zero_at_padding():
    g, seq, time, feature = graph()
    soft, log_soft = g.nn.softmax(seq, axis=time), g.nn.log_softmax(seq, axis=time)
    data, lengths = sequences()
    values = g.output({"seq": data, "seq_len": lengths}, [soft, log_soft])
    for b, n in enumerate(lengths):
        valid = np.exp(data[b, :n] - data[b, :n].max(0))
        np.testing.assert_allclose(values[soft.name][b, :n], valid / valid.sum(0), rtol=1e-12)
        np.testing.assert_allclose(values[log_soft.name][b, :n], np.log(valid / valid.sum(0)), rtol=1e-12)
        assert not values[soft.name][b, n:].any() and not values[log_soft.name][b, n:].any()


def test_losses_average_over_valid_frames_only():
    g, seq, time, feature = graph()
    labels = g.placeholder("labels", dims=(gv.batch_dim, time), dtype="int64")
    targets = g.placeholder("targets", dims=(gv.batch_dim, time, feature))
    entropy = g.loss.softmax_cross_entropy(seq, labels)
    squared = g.loss.mean_squared_error(seq, targets)
    assert entropy.op == "masked_softmax_cross_entropy" and squared.op == "masked_mean"
    data, lengths = sequences()
    data = np.where(mask_array(data, lengths, 0, 1), data, 0.0)
    label_values = np.random.default_rng(1).integers(0, 4, (3, 6))
    label_values[1, 3:] = -7                      # padding labels are never read
    target_values = np.random.default_rng(2).normal(size=data.shape)
    values = g.output({"seq": data, "seq_len": lengths, "labels": label_values, "targets": target_values},
                      [entropy, squared])
    frames = [(b, t) for b, n in enumerate(lengths) for t in range(n)]
    picked = [data[b, t] - data[b, t].max() - np.log(np.exp(data[b, t] - data[b, t].max()).sum()) for b, t in frames]
    expected = -np.mean([p[label_values[b, t]] for p, (b, t) in zip(picked, frames)])
    np.testing.assert_allclose(values[entropy.name], expected, rtol=1e-12)
    squares = [(data[b, t] - target_values[b, t]) ** 2 for b, t in frames]
    np.testing.assert_allclose(values[squared.name], np.mean(squares), rtol=1e-12)


def test_opting_out_includes_the_padding():
    g, seq, time, feature = graph()
    with gv.unmasked():
        plain = g.math.mean(seq, axis=time)
    assert plain.op == "mean"
    data, lengths = sequences()
    np.testing.assert_allclose(g.output({"seq": data, "seq_len": lengths}, [plain])[plain.name], data.mean(1))


def test_masks_are_derived_from_lengths_and_cached():
    g, seq, time, feature = graph()
    mask = gv.mask_of(seq, time)
    assert gv.mask_of(seq, time).name == mask.name and mask.shape == (None, None, 1)
    data, lengths = sequences()
    np.testing.assert_array_equal(g.output({"seq": data, "seq_len": lengths}, [mask])[mask.name],
                                  mask_array(data, lengths, 0, 1)[..., :1])


def test_bad_lengths_fail_when_the_graph_runs():
    g, seq, time, feature = graph()
    pooled = g.math.sum(seq, axis=time)
    data, _ = sequences()
    with pytest.raises(gv.ExecutionError, match="length 9 of batch entry 1 is outside \\[0, 6\\]"):
        g.output({"seq": data, "seq_len": np.array([1, 9, 2])}, [pooled])


def _two_dims():
    g = gv.Graph()
    t1, t2, feature = gv.Dim("t1"), gv.Dim("t2"), gv.Dim("feature", 2)
    x = g.placeholder("x", dims=(gv.batch_dim, t1, feature, t2), lengths={t1: "l1", t2: "l2"})
    return g, x, t1, t2, feature


def _nan_padded(l1, l2, seed=0):
    data = np.random.default_rng(seed).normal(size=(len(l1), 4, 2, 5))
    for b, (n1, n2) in enumerate(zip(l1, l2)):
        data[b, n1:] = np.nan
        data[b, :, :, n2:] = np.nan
    return data


def _box_reference(name, data, axes, keepdims):
    """NumPy over the valid box of each batch entry (padding is NaN), with the masked ops' empty results."""
    neutral = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf, "logsumexp": -np.inf}[name]
    values = np.where(np.isnan(data), neutral, data)
    if name == "mean":
        count = np.sum(~np.isnan(data), axis=axes, keepdims=keepdims)
        with np.errstate(invalid="ignore"):
            return np.sum(values, axis=axes, keepdims=keepdims) / count
    if name == "logsumexp":
        top = np.max(values, axis=axes, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            result = np.log(np.sum(np.exp(values - top), axis=axes, keepdims=True)) + top
        return result if keepdims else np.squeeze(result, axis=axes)
    return {"sum": np.sum, "max": np.max, "min": np.min}[name](values, axis=axes, keepdims=keepdims)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), min_size=1, max_size=3),
       st.sampled_from(["sum", "mean", "max", "min", "logsumexp"]),
       st.sampled_from([(1, 3), (3, 1), (1, 2, 3), None, (0, 1, 3)]), st.booleans())
def test_reductions_over_two_dynamic_dims_match_numpy_on_the_valid_box(lengths, name, axis, keepdims):
    g, x, t1, t2, feature = _two_dims()
    reduced = getattr(g.math, name)(x, axis=axis, keepdims=keepdims, name="reduced")
    assert reduced.name == "reduced"
    l1, l2 = (np.array(column) for column in zip(*lengths))
    data = _nan_padded(l1, l2)
    result = g.output({"x": data, "l1": l1, "l2": l2}, [reduced])["reduced"]
    axes = (0, 1, 2, 3) if axis is None else axis
    np.testing.assert_allclose(result, _box_reference(name, data, axes, keepdims), rtol=1e-12)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "logsumexp"])
def test_gradients_over_two_dynamic_dims_are_zero_at_padding_even_when_it_is_nan(name):
    g, x, t1, t2, feature = _two_dims()
    weights = g.var("w", np.random.default_rng(2).uniform(0.5, 1.5, (2, 2)))
    reduced = getattr(g.math, name)(x, axis=(t1, t2))
    g.set_loss(g.math.sum(reduced @ weights))
    l1, l2 = np.array([4, 2, 1]), np.array([5, 1, 3])
    feeds = {"x": _nan_padded(l1, l2, seed=4), "l1": l1, "l2": l2}
    report = gv.check_gradients(g, feeds, wrt=["x", "w"])
    assert report.passed, str(report)
    gradient = g.calculate_gradients(feeds, ["x"])["x"]
    assert not gradient[np.isnan(feeds["x"])].any() and np.isfinite(gradient).all()


def test_softmax_over_two_dynamic_dims_is_refused():
    g = gv.Graph()
    t1, t2 = gv.Dim("t1"), gv.Dim("t2")
    x = g.placeholder("x", dims=(gv.batch_dim, t1, t2, gv.Dim("classes", 3)), lengths={t1: "l1", t2: "l2"})
    with pytest.raises(gv.DimError, match="two dynamic dims .* only supported for reductions"):
        g.loss.softmax_cross_entropy(x, g.placeholder("labels", (None, None, None), "int64"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4), st.sampled_from([None, 1, (1, 2), 0, 2, (0, 1)]),
       st.booleans())
def test_masked_sum_and_max_match_numpy_on_random_lengths(lengths, axis, keepdims):
    data = np.random.default_rng(len(lengths)).normal(size=(len(lengths), 5, 2))
    g = gv.Graph()
    x, n = g.placeholder("x", shape=(None, 5, 2)), g.placeholder("n", shape=(None,), dtype="int64")
    total = gv.masked_sum(x, n, axis=axis, keepdims=keepdims)
    top = gv.masked_max(x, n, axis=axis, keepdims=keepdims)
    values = g.output({"x": data, "n": np.array(lengths)}, [total, top])
    mask = mask_array(data, np.array(lengths), 0, 1)
    np.testing.assert_allclose(values[total.name], np.sum(np.where(mask, data, 0), axis=axis, keepdims=keepdims),
                               atol=1e-12)
    np.testing.assert_array_equal(values[top.name], np.max(np.where(mask, data, -np.inf), axis=axis,
                                                           keepdims=keepdims))


# --- gradients --------------------------------------------------------------------------------------------

def _gradient_check(build):
    g, seq, time, feature = graph()
    g.set_loss(build(g, seq, time, feature))
    data, lengths = sequences(lengths=(6, 3, 2))
    report = gv.check_gradients(g, {"seq": data, "seq_len": lengths}, wrt=["seq"])
    assert report.passed, str(report)
    grads = g.calculate_gradients({"seq": data, "seq_len": lengths}, ["seq"])["seq"]
    assert not grads[~mask_array(data, lengths, 0, 1)].any(), "padding must get no gradient"


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "logsumexp"])
def test_gradients_of_masked_reductions(name):
    weights = np.random.default_rng(3).normal(size=(3, 4))
    _gradient_check(lambda g, seq, time, feature: g.math.sum(
        getattr(g.math, name)(g.math.sin(seq), axis=time) * weights))


def test_gradients_of_masked_softmax_and_losses():
    weights = np.random.default_rng(4).normal(size=(3, 6, 4))

    def build(g, seq, time, feature):
        scaled = seq * 1.0
        labels = g.constant("labels", np.random.default_rng(5).integers(0, 4, (3, 6)))
        gv.set_dims(labels, (gv.batch_dim, time))
        return (g.math.sum(g.nn.softmax(scaled, axis=time) * weights)
                + g.math.sum(g.nn.log_softmax(scaled, axis=time) * weights)
                + g.loss.softmax_cross_entropy(scaled, labels)
                + g.loss.mean_squared_error(scaled, g.math.tanh(scaled)))
    _gradient_check(build)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.booleans(), st.booleans())
def test_masked_softmax_matches_numpy_on_random_lengths_and_layouts(lengths, time_major, log):
    batch = len(lengths)
    shape = (4, batch, 3) if time_major else (batch, 4, 3)
    data = np.random.default_rng(batch).normal(size=shape)
    g = gv.Graph()
    x, n = g.placeholder("x", shape=shape), g.placeholder("n", shape=(batch,), dtype="int64")
    axes = dict(batch_axis=1, time_axis=0) if time_major else dict(batch_axis=0, time_axis=1)
    op = gv.masked_log_softmax if log else gv.masked_softmax
    result = g.output({"x": data, "n": np.array(lengths)}, [op(x, n, **axes)])
    got = next(iter(result.values()))
    batch_major = data.transpose(1, 0, 2) if time_major else data
    expected = np.zeros_like(batch_major)
    for b, length in enumerate(lengths):
        if length:
            valid = batch_major[b, :length]
            shifted = valid - valid.max(axis=0, keepdims=True)
            logs = shifted - np.log(np.exp(shifted).sum(axis=0, keepdims=True))
            expected[b, :length] = logs if log else np.exp(logs)
    np.testing.assert_allclose(got.transpose(1, 0, 2) if time_major else got, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["prod", "argmax", "argmin"])
def test_prod_argmax_and_argmin_over_the_dynamic_dim_ignore_padding(name):
    g, seq, time, feature = graph()
    reduced = getattr(g.math, name)(seq, axis=time)
    data, lengths = sequences(lengths=(6, 3, 0))
    data = np.where(np.isfinite(data) & (data < 1e5), np.abs(data) % 1.5 + 0.5, np.nan)   # NaN padding
    result = g.output({"seq": data, "seq_len": lengths}, [reduced])[reduced.name]
    empty = {"prod": np.ones(4), "argmax": np.zeros(4), "argmin": np.zeros(4)}[name]
    expected = [getattr(np, name)(data[b, :n], axis=0) if n else empty for b, n in enumerate(lengths)]
    np.testing.assert_allclose(result, np.stack(expected), rtol=1e-12)
    if name == "prod":
        assert gv.reduce(seq, "b t f -> b f", "prod").op == "prod"
        g.set_loss(g.math.sum(reduced))
        report = gv.check_gradients(g, {"seq": data, "seq_len": lengths}, wrt=["seq"])
        assert report.passed, str(report)
        gradient = g.calculate_gradients({"seq": data, "seq_len": lengths}, ["seq"])["seq"]
        assert not gradient[np.isnan(data)].any()


# --- integers: exact, as the unmasked reductions and NumPy ----------------------------------------

BIG = 1_700_000_000_000_000_001   # past 2**53: float64 cannot hold BIG + 3


@pytest.mark.parametrize("name,expected,dtype", [
    ("sum", [BIG + 3, 2 * BIG + 7], np.int64), ("max", [BIG, BIG], np.int64), ("min", [3, 7], np.int64),
    ("mean", [(BIG + 3) / 2, (2 * BIG + 7) / 3], np.float64),
])
def test_integer_reductions_over_the_dynamic_dim_are_exact_and_keep_their_dtype(name, expected, dtype):
    time, g = gv.Dim("time"), gv.Graph()
    seq = g.placeholder("seq", dims=(gv.batch_dim, time), dtype="int64", lengths={time: "seq_len"})
    masked = getattr(g.math, name)(seq, axis=time)
    with gv.unmasked():
        plain = getattr(g.math, name)(seq, axis=time)
    assert masked.op == f"masked_{name}" and masked.dtype == plain.dtype == dtype
    data = np.array([[BIG, 3, 5], [BIG, BIG, 7]])
    result = g.output({"seq": data, "seq_len": np.array([2, 3])}, [masked])[masked.name]
    assert result.dtype == dtype and result.tolist() == expected


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_masked_ops_match_numpy_and_empty_entries_give_the_identity(dtype):
    g = gv.Graph()
    x = g.placeholder("x", (3, 4, 2), np.dtype(dtype).name)
    lengths = g.placeholder("lengths", (3,), "int64")
    ops = {name: getattr(masked_ops, f"masked_{name}")(x, lengths, axis=1) for name in ("sum", "max", "min", "count")}
    data = np.random.default_rng(5).integers(-1000, 1000, (3, 4, 2)).astype(dtype)
    data[0, 2:] = np.iinfo(dtype).max   # padding that any read would show
    data[1, 3:] = np.iinfo(dtype).min
    result = g.output({"x": data, "lengths": np.array([2, 3, 0])}, list(ops.values()))
    limits = np.iinfo(dtype)
    expected = {"sum": (np.int64, lambda v: v.sum(axis=0, dtype=np.int64), 0),
                "max": (dtype, lambda v: v.max(axis=0), limits.min), "min": (dtype, lambda v: v.min(axis=0), limits.max),
                "count": (np.int64, lambda v: np.full(2, len(v)), 0)}
    for name, variable in ops.items():
        kind, reference, empty = expected[name]
        got = result[variable.name]
        assert variable.dtype == kind and got.dtype == kind, name
        want = [reference(data[0, :2]), reference(data[1, :3]), np.full(2, empty)]
        np.testing.assert_array_equal(got, np.stack(want).astype(kind), err_msg=name)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_integer_reductions_over_two_dynamic_dims_stay_exact(name):
    g = gv.Graph()
    t1, t2 = gv.Dim("t1"), gv.Dim("t2")
    x = g.placeholder("x", dims=(gv.batch_dim, t1, t2), dtype="int64", lengths={t1: "l1", t2: "l2"})
    reduced = getattr(g.math, name)(x, axis=(t1, t2))
    assert reduced.dtype == np.int64
    data = np.full((2, 3, 3), -5, np.int64)
    data[0, :2, :1] = [[BIG], [3]]
    data[1, :1, :3] = [[BIG, BIG, 7]]
    result = g.output({"x": data, "l1": np.array([2, 1]), "l2": np.array([1, 3])}, [reduced])[reduced.name]
    expected = {"sum": [BIG + 3, 2 * BIG + 7], "max": [BIG, BIG], "min": [3, 7]}[name]
    assert result.tolist() == expected
