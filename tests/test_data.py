"""The data pipeline: ordering, seeding, laziness, padding with lengths, bucketing, transformers."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphview as gv
from graphview import data


def numbered(n=10):
    return data.ArrayDataSet({"x": np.arange(2.0 * n).reshape(n, 2)}, {"y": np.arange(n)})


def labels_of(dataset, epoch=0):
    return [int(v) for batch in dataset.iterate(epoch) for v in np.atleast_1d(batch["y"])]


def test_array_dataset_keeps_order_and_roles():
    samples = list(numbered(4))
    assert [int(s["y"]) for s in samples] == [0, 1, 2, 3]
    assert list(samples[1].features) == ["x"] and list(samples[1].targets) == ["y"]
    np.testing.assert_array_equal(samples[1]["x"], [2.0, 3.0])


def test_batches_keep_order_and_the_last_batch_is_smaller():
    batches = list(numbered(10) >> data.Batch(4))
    assert [b.size for b in batches] == [4, 4, 2]
    assert labels_of(numbered(10) >> data.Batch(4)) == list(range(10))
    assert isinstance(batches[0], gv.data.MiniBatch)
    np.testing.assert_array_equal(batches[0].features["x"], np.arange(8.0).reshape(4, 2))
    np.testing.assert_array_equal(batches[2].targets["y"], [8, 9])
    assert [b.size for b in numbered(10) >> data.Batch(4, drop_last=True)] == [4, 4]


def test_shuffle_is_seeded_per_epoch_and_restartable():
    pipeline = numbered(20) >> data.Shuffle(seed=3) >> data.Batch(5)
    first = labels_of(pipeline, 0)
    assert sorted(first) == list(range(20)) and first != list(range(20))
    assert labels_of(pipeline, 0) == first                   # restartable: same epoch, same order
    assert labels_of(pipeline, 1) != first                   # a new order each epoch
    assert labels_of(numbered(20) >> data.Shuffle(seed=3) >> data.Batch(5), 1) == labels_of(pipeline, 1)
    assert labels_of(numbered(20) >> data.Shuffle(seed=4) >> data.Batch(5), 0) != first
    assert [int(s["y"]) for s in pipeline.source.source] == list(range(20))  # the source is untouched


def test_buffered_shuffle_is_a_seeded_permutation():
    pipeline = numbered(30) >> data.Shuffle(seed=1, buffer_size=4)
    order = [int(s["y"]) for s in pipeline.iterate(0)]
    assert sorted(order) == list(range(30)) and order != list(range(30))
    assert order == [int(s["y"]) for s in pipeline.iterate(0)]


def test_iteration_is_lazy():
    pulled = []

    def source():
        for i in range(1000):
            pulled.append(i)
            yield data.Sample({"x": np.array([i])}, {"y": np.array(i)})

    pipeline = data.IterableDataSet(source) >> data.Map(lambda s: s) >> data.Batch(3)
    first = next(iter(pipeline))
    assert first.size == 3 and len(pulled) == 3


def test_transformers_chain_with_rshift_and_datasets_too():
    chained = data.Filter(lambda s: int(s["y"]) % 2 == 0) >> data.Map(lambda s: {"x": s["x"] * 10, "y": s["y"]})
    assert isinstance(chained, data.Transformer)
    result = list(numbered(6) >> chained >> data.Batch(10))
    (batch,) = result
    np.testing.assert_array_equal(batch["y"], [0, 2, 4])
    np.testing.assert_array_equal(batch["x"][1], [40.0, 50.0])
    assert "y" in batch.targets, "a Map returning a dict keeps the roles of the fields"
    assert labels_of(chained(numbered(6)) >> data.Batch(2)) == [0, 2, 4]


def test_normalize_learns_statistics_once_and_reuses_them():
    rng = np.random.default_rng(0)
    train = data.ArrayDataSet({"x": rng.normal(5.0, 3.0, (200, 4))}, {"y": np.zeros(200, np.int64)})
    test = data.ArrayDataSet({"x": np.full((3, 4), 5.0)}, {"y": np.zeros(3, np.int64)})
    norm = data.Normalize("x")
    (batch,) = list(train >> norm >> data.Batch(200))
    np.testing.assert_allclose(batch["x"].mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(batch["x"].std(axis=0), 1.0, atol=1e-12)
    (held_out,) = list(test >> norm >> data.Batch(3))
    np.testing.assert_allclose(held_out["x"], np.tile((5.0 - norm.mean) / norm.std, (3, 1)))


def test_normalize_given_statistics_and_constant_features():
    samples = data.ArrayDataSet({"x": np.array([[1.0, 7.0], [3.0, 7.0]])})
    (batch,) = list(samples >> data.Normalize("x") >> data.Batch(2))
    np.testing.assert_allclose(batch["x"], [[-1.0, 0.0], [1.0, 0.0]])
    (fixed,) = list(samples >> data.Normalize("x", mean=1.0, std=2.0) >> data.Batch(2))
    np.testing.assert_allclose(fixed["x"], [[0.0, 3.0], [1.0, 3.0]])


def sequences(lengths, features=3, seed=0):
    """Examples of shape (length, features) with a different scale per feature."""
    rng = np.random.default_rng(seed)
    return [rng.normal(np.arange(features) * 10.0, np.arange(1, features + 1), (n, features)) for n in lengths]


def test_normalize_ragged_samples_uses_every_time_step_per_feature():
    rows = sequences([4, 1, 7, 3])
    dataset = data.ArrayDataSet({"x": rows}, {"y": np.arange(4)})
    norm = data.Normalize("x").fit(dataset)
    valid = np.concatenate(rows)
    np.testing.assert_allclose(norm.mean, valid.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(norm.std, valid.std(axis=0), rtol=1e-12)
    normalized = [sample["x"] for sample in dataset >> norm]
    for got, row in zip(normalized, rows):
        np.testing.assert_allclose(got, (row - valid.mean(axis=0)) / valid.std(axis=0), rtol=1e-12)
    np.testing.assert_allclose(np.concatenate(normalized).mean(axis=0), 0.0, atol=1e-12)


def test_normalize_ragged_samples_over_all_values():
    rows = [np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0, 6.0]), np.array([10.0])]
    norm = data.Normalize("x", per_feature=False).fit(data.ArrayDataSet({"x": rows}))
    assert norm.mean.shape == () and norm.mean == pytest.approx(np.concatenate(rows).mean())
    assert norm.std == pytest.approx(np.concatenate(rows).std())


@pytest.mark.parametrize("per_feature", [True, False])
def test_normalize_after_padding_ignores_and_keeps_the_padding(per_feature):
    rows = sequences([2, 6, 1, 3, 5])
    dataset = data.ArrayDataSet({"x": rows}, {"y": np.arange(5)})
    # batches padded to different lengths: the statistics cannot depend on the padded shape
    batches = dataset >> data.Batch(2, pad="longest", fields=["x"], pad_value=-7.0)
    assert [b["x"].shape[1] for b in batches] == [6, 3, 5]
    norm = data.Normalize("x", per_feature=per_feature)
    out = list(batches >> norm)
    valid = np.concatenate(rows)
    axis = 0 if per_feature else None
    mean, std = valid.mean(axis=axis), valid.std(axis=axis)
    np.testing.assert_allclose(norm.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(norm.std, std, rtol=1e-12)
    recovered = []
    for batch in out:
        for example, length in zip(batch["x"], batch.lengths["x"]):
            assert (example[length:] == -7.0).all(), "padding was changed"
            recovered.append(example[:length])
    np.testing.assert_allclose(np.concatenate(recovered), (valid - mean) / std, rtol=1e-12)


def test_normalize_incompatible_data_is_a_clear_error():
    mixed = data.ArrayDataSet({"x": [np.zeros((2, 3)), np.zeros((4, 2))]})
    with pytest.raises(data.DataError, match=r"Normalize\('x'\): examples have different numbers of features "
                                             r"\(last axis\) \[2, 3\].*per_feature=False"):
        data.Normalize("x").fit(mixed)
    with pytest.raises(data.DataError, match=r"Normalize\('x'\): examples have different ranks \[1, 2\]"):
        data.Normalize("x").fit(data.ArrayDataSet({"x": [np.zeros(3), np.zeros((1, 3))]}))
    tokens = ragged([2, 3]) >> data.Batch(2, pad="longest", fields=["tokens"])
    with pytest.raises(data.DataError, match=r"Normalize\('tokens'\): the batch pads this field along its last "
                                             r"axis.*per_feature=False"):
        data.Normalize("tokens").fit(tokens)
    norm = data.Normalize("x").fit(data.ArrayDataSet({"x": sequences([2, 3])}))
    with pytest.raises(data.DataError, match=r"Normalize\('x'\): a sample of shape \(2, 4\) does not fit "
                                             r"statistics of shape \(3,\)"):
        list(data.ArrayDataSet({"x": sequences([2], features=4)}) >> norm)


def test_one_hot():
    (batch,) = list(numbered(3) >> data.OneHot("y", classes=4) >> data.Batch(3))
    np.testing.assert_array_equal(batch["y"], np.eye(4)[:3])
    with pytest.raises(data.DataError, match="label 3 is out of range for 3 classes"):
        list(numbered(4) >> data.OneHot("y", classes=3))


def ragged(lengths):
    return data.ArrayDataSet({"tokens": [np.arange(1, n + 1) for n in lengths]}, {"y": np.arange(len(lengths))})


def test_pad_to_longest_keeps_true_lengths():
    (batch,) = list(ragged([2, 5, 1]) >> data.Batch(3, pad="longest", fields=["tokens"], pad_value=-1))
    np.testing.assert_array_equal(batch["tokens"], [[1, 2, -1, -1, -1], [1, 2, 3, 4, 5], [1, -1, -1, -1, -1]])
    np.testing.assert_array_equal(batch.lengths["tokens"], [2, 5, 1])
    assert batch.lengths["tokens"].dtype == np.int64 and "y" not in batch.lengths


def test_pad_to_fixed_length_and_too_long_is_an_error():
    (batch,) = list(ragged([2, 3]) >> data.Batch(2, pad=6, fields=["tokens"]))
    assert batch["tokens"].shape == (2, 6)
    np.testing.assert_array_equal(batch.lengths["tokens"], [2, 3])
    with pytest.raises(data.DataError, match="length 3, longer than the fixed length 2"):
        list(ragged([2, 3]) >> data.Batch(2, pad=2, fields=["tokens"]))


def test_ragged_without_padding_names_the_field_and_the_fix():
    with pytest.raises(data.DataError, match="field 'tokens' has examples of different shapes.*pad='longest'"):
        list(ragged([2, 3]) >> data.Batch(2))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=1, max_size=12), st.integers(1, 5))
def test_padding_round_trips_every_sequence(lengths, size):
    rows = [np.arange(n) * 10 + i for i, n in enumerate(lengths)]
    dataset = data.ArrayDataSet({"s": rows}, {"y": np.arange(len(rows))})
    recovered = []
    for batch in dataset >> data.Batch(size, pad="longest", fields=["s"]):
        assert batch["s"].shape[1] == batch.lengths["s"].max()
        for row, length in zip(batch["s"], batch.lengths["s"]):
            assert not row[length:].any()
            recovered.append(row[:length])
    assert len(recovered) == len(rows)
    for got, want in zip(recovered, rows):
        np.testing.assert_array_equal(got, want)


def test_bucketing_groups_by_length():
    lengths = [1, 9, 2, 8, 1, 9, 3, 7]
    batches = list(ragged(lengths) >> data.BucketByLength("tokens", boundaries=[5], size=2))
    for batch in batches:
        short = batch.lengths["tokens"] < 5
        assert short.all() or not short.any(), "a batch mixes buckets"
        assert batch["tokens"].shape[1] == batch.lengths["tokens"].max()
    assert sorted(int(y) for b in batches for y in b["y"]) == list(range(len(lengths)))
    total_padding = sum(b["tokens"].size - b.lengths["tokens"].sum() for b in batches)
    (single,) = list(ragged(lengths) >> data.Batch(8, pad="longest", fields=["tokens"]))
    assert total_padding < single["tokens"].size - single.lengths["tokens"].sum()


def test_bucketing_pads_every_ragged_field_with_its_own_lengths():
    dataset = data.ArrayDataSet({"tok": [np.arange(1, n + 1) for n in (1, 5, 2)],
                                 "tag": [np.arange(1, n + 1) * 10 for n in (2, 4, 3)]}, {"y": np.arange(3)})
    short, long = list(dataset >> data.BucketByLength("tok", [3], 2, pad_value=-1))
    np.testing.assert_array_equal(short["tok"], [[1, -1], [1, 2]])
    np.testing.assert_array_equal(short["tag"], [[10, 20, -1], [10, 20, 30]])
    np.testing.assert_array_equal(short.lengths["tok"], [1, 2])
    np.testing.assert_array_equal(short.lengths["tag"], [2, 3])
    np.testing.assert_array_equal(short["y"], [0, 2])
    assert "y" not in short.lengths
    np.testing.assert_array_equal(long["tag"], [[10, 20, 30, 40]])
    np.testing.assert_array_equal(long.lengths["tag"], [4])
    # fields= limits the padding, and always includes the field bucketed by
    only_tag = list(dataset >> data.BucketByLength("tok", [3], 2, fields=["tag"]))
    assert sorted(only_tag[0].lengths) == ["tag", "tok"]
    with pytest.raises(data.DataError, match="field 'y' is a scalar per example, so it has no length"):
        list(dataset >> data.BucketByLength("y", [3], 2))


def test_errors_are_graphview_errors_with_names():
    with pytest.raises(gv.GraphviewError, match="fields hold different numbers of examples"):
        data.ArrayDataSet({"x": np.zeros((3, 2))}, {"y": np.zeros(4)})
    with pytest.raises(data.DataError, match="only be chained .* with a transformer"):
        numbered() >> 3
    with pytest.raises(data.DataError, match="Normalize: the item has no field 'z'"):
        list(numbered() >> data.Normalize("z", mean=0.0, std=1.0))
    with pytest.raises(data.DataError, match="batches cannot be batched again"):
        list(numbered() >> data.Batch(2) >> data.Batch(2))


@pytest.mark.parametrize("make, match", [
    (lambda: data.Shuffle(seed="a"), r"Shuffle: seed 'a' is not a seed: a seed is an int in \[0, 2\*\*64\)"),
    (lambda: data.Shuffle(seed=-1), r"Shuffle: seed -1 is not a seed"),
    (lambda: data.Shuffle(seed=2 ** 64), r"Shuffle: seed 18446744073709551616 is not a seed"),
    (lambda: data.Shuffle(seed=1.0), r"Shuffle: seed 1.0 is not a seed"),
    (lambda: data.Shuffle(buffer_size=0), r"Shuffle: buffer_size 0 is not in \[1, inf\]"),
    (lambda: data.Shuffle(buffer_size=2.5), r"Shuffle: buffer_size 2.5 is not an int"),
    (lambda: data.OneHot("y", 2.5), r"OneHot: classes 2.5 is not an int"),
    (lambda: data.OneHot("y", 0), r"OneHot: classes 0 is not in \[1, inf\]"),
    (lambda: data.OneHot("y", True), r"OneHot: classes True is not an int"),
    (lambda: data.OneHot(3, 2), r"OneHot: field 3 is not a field name \(a str\)"),
    (lambda: data.OneHot("y", 2, dtype="banana"), r"OneHot: dtype 'banana' is not a NumPy numeric dtype"),
    (lambda: data.Batch(2.0), r"Batch: size 2.0 is not an int"),
    (lambda: data.Batch(0), r"Batch: size 0 is not in \[1, inf\]"),
    (lambda: data.Batch(2, drop_last="yes"), r"Batch: drop_last 'yes' is not a bool"),
    (lambda: data.Batch(2, pad="shortest"), r"Batch: pad 'shortest' is not None, 'longest' or a length >= 0"),
    (lambda: data.Batch(2, pad=-1), r"Batch: pad -1 is not None, 'longest' or a length >= 0"),
    (lambda: data.Batch(2, pad="longest", pad_value="x"), r"Batch: pad_value 'x' is not a number"),
    (lambda: data.Batch(2, pad="longest", fields="x"), r"Batch: fields 'x' is not None or a list of field names"),
    (lambda: data.Batch(2, fields=["x"]), r"Batch: fields= names the fields to pad"),
    (lambda: data.Normalize("x", per_feature="no"), r"Normalize: per_feature 'no' is not a bool"),
    (lambda: data.Normalize(None), r"Normalize: field None is not a field name \(a str\)"),
    (lambda: data.Normalize("x", mean=0.0, std=-1.0), r"Normalize: std holds -1.0; a standard deviation is >= 0"),
    (lambda: data.Normalize("x", mean="a", std=1.0), r"Normalize: mean 'a' is not an array of numbers"),
    (lambda: data.Normalize("x", mean=np.nan, std=1.0), r"Normalize: mean holds nan; the statistics must be finite"),
    (lambda: data.Map(lambda s: s, batched="yes"), r"Map: batched 'yes' is not a bool"),
    (lambda: data.Map(3), r"Map: function 3 is not callable"),
    (lambda: data.Filter("x"), r"Filter: predicate 'x' is not callable"),
    (lambda: data.BucketByLength("x", [2, 4], 0), r"BucketByLength: size 0 is not in \[1, inf\]"),
    (lambda: data.BucketByLength("x", [2.5], 2), r"BucketByLength: boundaries \(2.5,\) holds 2.5, which is not an int"),
    (lambda: data.BucketByLength("x", [4, 2], 2), r"BucketByLength: boundaries must be increasing positive lengths"),
    (lambda: data.BucketByLength("x", [2], 2, drop_last=1), r"BucketByLength: drop_last 1 is not a bool"),
])
def test_transformer_arguments_are_checked_when_constructed(make, match):
    with pytest.raises(data.DataError, match=match) as caught:
        make()
    assert isinstance(caught.value, gv.GraphviewError)


def test_valid_transformer_arguments_are_kept_as_plain_values():
    shuffle = data.Shuffle(seed=np.uint64(2 ** 64 - 1), buffer_size=np.int32(3))
    assert shuffle.seed == 2 ** 64 - 1 and type(shuffle.seed) is int and shuffle.buffer_size == 3
    assert labels_of(numbered(5) >> shuffle) == labels_of(numbered(5) >> data.Shuffle(seed=2 ** 64 - 1, buffer_size=3))
    assert data.OneHot("y", np.int64(3)).classes == 3
    assert data.Batch(np.int64(2), drop_last=np.True_).drop_last is True
    assert data.Map(lambda s: s, batched=np.True_).batched is True
