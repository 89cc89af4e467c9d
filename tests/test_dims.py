"""gv.Dim: identity equality, explicit sameness, memoized non-commutative arithmetic, dims on graphs."""
import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

import graphview as gv


# --- identity --------------------------------------------------------------------------------

def test_dims_are_equal_only_by_identity_never_by_name():
    a, b = gv.Dim("time"), gv.Dim("time")
    assert a == a and a != b
    assert gv.Dim("one", 1) != gv.Dim("one", 1)    # RETURNN's unrelated size-1 dims matching
    assert gv.batch_dim == gv.batch_dim and gv.batch_dim.kind == "batch"


def test_declare_same_as_is_explicit_transitive_and_keeps_hashes_valid():
    a, b, c = gv.Dim("enc", 5), gv.Dim("dec", 5), gv.Dim("other", 5)
    seen = {a: "a"}
    a.declare_same_as(b)
    b.declare_same_as(c)
    assert a == b == c and c == a
    assert seen[c] == "a"            # hashing stays consistent with equality after the declaration


def test_declare_same_as_refuses_different_sizes_and_kinds():
    with pytest.raises(gv.DimError, match="size 3.*size 4"):
        gv.Dim("x", 3).declare_same_as(gv.Dim("y", 4))
    with pytest.raises(gv.DimError, match="batch dim.*feature dim"):
        gv.Dim("x", kind="batch").declare_same_as(gv.Dim("y", kind="feature"))


def test_constructor_validates():
    with pytest.raises(gv.DimError, match="non-empty string"):
        gv.Dim("")
    with pytest.raises(gv.DimError, match="size must be None"):
        gv.Dim("x", -1)
    with pytest.raises(gv.DimError, match="kind must be one of"):
        gv.Dim("x", kind="colour")


# --- arithmetic --------------------------------------------------------------------------------

def test_arithmetic_is_memoized_and_non_commutative():
    a, b = gv.Dim("a", 2), gv.Dim("b", 3)
    assert a * b is a * b and a + b is a + b
    assert a * b != b * a and a + b != b + a
    assert (a * b).size == 6 and (a + b).size == 5 and (b - a).size == 1
    assert 2 * a != a * 2 and (2 * a).size == 4


def test_identities_are_undone():
    a, b = gv.Dim("a"), gv.Dim("b", 3)
    assert (a * b) // b is a
    assert (a + b) - b is a
    assert a * 1 is a and 1 * a is a and a // 1 is a and a + 0 is a
    assert (1 + a) - 1 is a                 # RETURNN: 1 + x - 1 != x
    assert a + 1 + 1 is a + 2
    assert a + a is 2 * a


def test_derived_dims_follow_declared_sameness():
    a, a2, b = gv.Dim("a", 4), gv.Dim("a2", 4), gv.Dim("b", 2)
    merged = a * b
    a.declare_same_as(a2)
    assert a2 * b == merged
    assert (a2 * b) // b == a


def test_arithmetic_errors():
    a, b = gv.Dim("a", 2), gv.Dim("b", 3)
    with pytest.raises(gv.DimError, match="negative size"):
        a - b
    with pytest.raises(gv.ShapeError, match="not a multiple"):
        b // a
    with pytest.raises(gv.DimError, match="neither a gv.Dim nor an int"):
        a + 1.5


@given(st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_merge_then_split_gives_the_factors_back(sizes):
    from graphview.dims import factors, product
    dims = [gv.Dim(f"d{i}", s) for i, s in enumerate(sizes)]
    merged = product(dims)
    assert merged.size == int(np.prod(sizes))
    assert factors(merged, len(dims)) == tuple(dims)
    assert product(dims) is merged


# --- dims on graphs ----------------------------------------------------------------------------

def _sequence_graph():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 4)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    return g, seq, time, feature


def test_placeholder_takes_its_shape_from_dims_and_creates_the_lengths_placeholder():
    g, seq, time, feature = _sequence_graph()
    assert seq.shape == (None, None, 4)
    assert gv.dims_of(seq) == (gv.batch_dim, time, feature)
    lengths = gv.lengths_of(g, time)
    assert lengths.name == "seq_len" and lengths.shape == (None,) and lengths.dtype == np.int64
    assert gv.dims_of(lengths) == (gv.batch_dim,)


def test_placeholder_dims_errors():
    g = gv.Graph()
    time = gv.Dim("time")
    with pytest.raises(gv.DimError, match=r"axis 1 has size 3 but Dim\('f'(#\d+)?, 4\)"):  # #n: other tests made an 'f'
        g.placeholder("x", shape=(None, 3), dims=(gv.batch_dim, gv.Dim("f", 4)))
    with pytest.raises(gv.DimError, match="not among its dims"):
        g.placeholder("y", dims=(gv.batch_dim, gv.Dim("t")), lengths={time: "len"})
    f = gv.Dim("f", 2)
    with pytest.raises(gv.DimError, match="static size"):
        g.placeholder("z", dims=(gv.batch_dim, f), lengths={f: "len2"})
    assert "x" not in g and "y" not in g and "z" not in g    # nothing is added when the dims are wrong


def test_a_name_alone_never_finds_an_axis():
    g, seq, time, feature = _sequence_graph()
    impostor = gv.Dim("time")
    # Both dims are called "time"; the message tells them apart (Dim('time'#2, None) against time).
    told_apart = f"{re.escape(repr(impostor))} is not an axis of 'seq'.*\\(batch, {re.escape(str(time))}, "
    assert repr(impostor).startswith("Dim('time'#") and str(impostor) != str(time)
    with pytest.raises(gv.DimError, match=told_apart):
        g.math.sum(seq, axis=impostor)
    impostor.declare_same_as(time)
    assert g.math.sum(seq, axis=impostor).op == "masked_sum"


def test_ops_accept_a_dim_wherever_they_take_an_axis():
    g, seq, time, feature = _sequence_graph()
    summed = g.math.sum(seq, axis=feature)
    assert summed.op == "sum" and summed.node.attributes["axis"] == 2
    assert gv.dims_of(summed) == (gv.batch_dim, time)
    soft = g.nn.softmax(seq, axis=feature)
    assert soft.node.attributes["axis"] == 2 and gv.dims_of(soft) == gv.dims_of(seq)
    both = g.math.max(seq, axis=(time, feature))
    assert both.node.attributes["axis"] == (1, 2) and gv.dims_of(both) == (gv.batch_dim,)
    squeezed = g.shape.squeeze(g.math.sum(seq, axis=feature, keepdims=True), axis=2)
    assert gv.dims_of(squeezed) == (gv.batch_dim, time)


def test_shape_rules_carry_dims():
    g, seq, time, feature = _sequence_graph()
    doubled = g.math.tanh(seq * 2.0 + 1.0)
    assert gv.dims_of(doubled) == (gv.batch_dim, time, feature)
    swapped = g.shape.permute(seq, 1, 0, 2)
    assert gv.dims_of(swapped) == (time, gv.batch_dim, feature)
    expanded = g.shape.expand_dims(seq, 1)
    assert gv.dims_of(expanded) == (gv.batch_dim, None, time, feature)
    hidden = gv.Dim("hidden", 3)
    w = g.var("w", np.ones((4, 3)))
    gv.set_dims(w, (feature, hidden))
    assert gv.dims_of(seq @ w) == (gv.batch_dim, time, hidden)
    assert gv.dims_of(g.math.cast(seq, "float32")) == (gv.batch_dim, time, feature)
    picked = g.shape.gather(seq, np.array([0, 0]), axis=2)
    assert gv.dims_of(picked) == (gv.batch_dim, time, None)


def test_conflicting_dims_in_broadcasting_become_unknown():
    g = gv.Graph()
    a, b = gv.Dim("a", 3), gv.Dim("b", 3)
    x = g.placeholder("x", dims=(gv.batch_dim, a))
    y = g.placeholder("y", dims=(gv.batch_dim, b))
    assert gv.dims_of(x + y) == (gv.batch_dim, None)


def test_a_dim_is_not_an_axis_number():
    with pytest.raises(gv.DimError, match="is a dim, not an axis number"):
        [1, 2, 3][gv.Dim("x")]


def test_permute_and_transpose_take_dims_and_carry_them():
    g, seq, time, feature = _sequence_graph()
    assert gv.dims_of(g.shape.permute(seq, time, gv.batch_dim, feature)) == (time, gv.batch_dim, feature)
    assert gv.dims_of(g.linalg.transpose(seq, (feature, time, gv.batch_dim))) == (feature, time, gv.batch_dim)
    twice = g.linalg.transpose(g.linalg.transpose(seq))
    assert gv.dims_of(twice) == (gv.batch_dim, time, feature) and g.math.mean(twice, axis=1).op == "masked_mean"
    assert gv.dims_of(gv.rearrange(seq, "b t f -> t b f")) == (time, gv.batch_dim, feature)


def test_expand_dims_refuses_a_dim_because_its_axis_is_a_position_in_the_result():
    g, seq, time, feature = _sequence_graph()
    with pytest.raises(gv.DimError, match="expand_dims: axis gives positions in the result, but Dim\\('feature'"):
        g.shape.expand_dims(seq, axis=feature)


def test_a_reshape_keeps_only_the_dims_it_can_prove():
    g, seq, time, feature = _sequence_graph()
    assert gv.dims_of(g.shape.reshape(seq, (-1, 4))) == (None, feature)        # axis 0 is batch * time
    x = g.placeholder("x", dims=(gv.batch_dim, gv.Dim("h", 4), gv.Dim("w", 6)))
    assert gv.dims_of(g.shape.reshape(x, (-1, 24)))[0] is gv.batch_dim          # 4 * 6 == 24: the batch stays
    assert gv.dims_of(g.shape.reshape(x, (-1, 6))) == (None, gv.dims_of(x)[2])


def test_mean_squared_error_is_masked_by_the_targets_lengths_too():
    g, seq, time, feature = _sequence_graph()
    predictions = g.placeholder("predictions", (None, None, 4))
    loss = g.loss.mean_squared_error(predictions, seq)
    assert loss.op == "masked_mean"
    data = np.random.default_rng(3).normal(size=(2, 3, 4))
    lengths = np.array([3, 1])
    padded = data.copy()
    padded[1, 1:] = np.nan
    value = g.output({"predictions": np.zeros_like(data), "seq": padded, "seq_len": lengths}, [loss])[loss.name]
    np.testing.assert_allclose(value, np.mean(np.concatenate([data[0], data[1, :1]]) ** 2))
