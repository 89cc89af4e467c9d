"""fit's data path and guards: batches sliced from arrays, dtype casts at the placeholders, NaN losses."""
import numpy as np
import pytest

import graphview as gv
from graphview import data


def table(n=53, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(3.0, 2.0, (n, 4)), rng.integers(0, 5, n), rng.normal(size=(n, 2, 3)).astype(np.float32))


def double(item):
    return {**item, "z": item["z"] * 2, "x2": item["x"] + 1}


def pipelines():
    """Batch-capable pipelines (transformers before Batch are Shuffle, Normalize, OneHot, Map(batched=True))."""
    return {
        "batch only": lambda: data.Batch(8),
        "shuffle": lambda: data.Shuffle(seed=3) >> data.Batch(8),
        "buffered shuffle, drop_last": lambda: data.Shuffle(seed=3, buffer_size=5) >> data.Batch(8, drop_last=True),
        "normalize learns after a shuffle": lambda: (data.Shuffle(seed=1) >> data.Normalize("x")
                                                     >> data.Normalize("z", per_feature=False) >> data.Batch(6)),
        "everything": lambda: (data.Normalize("x") >> data.Shuffle(seed=2) >> data.OneHot("y", 5)
                               >> data.Map(double, batched=True) >> data.Shuffle(seed=9, buffer_size=7)
                               >> data.Batch(10) >> data.Map(lambda b: {**b, "x": b["x"][:, :2]})),
    }


def assert_same_batches(got, expected):
    got, expected = list(got), list(expected)
    assert len(got) == len(expected) and got
    for a, b in zip(got, expected):
        assert isinstance(a, data.MiniBatch)
        assert list(a.features) == list(b.features) and list(a.targets) == list(b.targets)
        assert a.lengths == b.lengths == {}
        for name in b:
            assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("name", list(pipelines()))
def test_sliced_batches_equal_the_per_sample_batches_in_order_for_every_epoch(name):
    x, y, z = table()
    sliced = data.ArrayDataSet({"x": x, "z": z}, {"y": y}) >> pipelines()[name]()
    per_sample = data.ArrayDataSet({"x": x, "z": z}, {"y": y}) >> pipelines()[name]()
    for epoch in (0, 1, 4):
        assert_same_batches(sliced.iterate(epoch), per_sample.iterate_per_sample(epoch))


def test_a_batch_capable_pipeline_builds_no_samples(monkeypatch):
    x, y, z = table()
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> data.Shuffle(seed=0) >> data.Normalize("x") >> data.Batch(16)

    def no_samples(self, index):
        raise AssertionError("a sample was built")
    monkeypatch.setattr(data.ArrayDataSet, "__getitem__", no_samples)
    assert [batch.size for batch in dataset.iterate(0)] == [16, 16, 16, 5]


@pytest.mark.parametrize("stage", [data.Map(lambda s: s), data.Filter(lambda s: True)], ids=["map", "filter"])
def test_transformers_that_need_samples_keep_the_per_sample_path(monkeypatch, stage):
    x, y, z = table()
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> data.Shuffle(seed=0) >> stage >> data.Batch(16)
    built = []
    original = data.ArrayDataSet.__getitem__
    monkeypatch.setattr(data.ArrayDataSet, "__getitem__", lambda self, i: built.append(i) or original(self, i))
    assert_same_batches(dataset.iterate(0), dataset.iterate_per_sample(0))
    assert len(built) == 2 * len(y)


def test_ragged_columns_and_padding_keep_the_per_sample_path():
    tokens = [np.arange(n) for n in (2, 4, 1, 3)]
    dataset = data.ArrayDataSet({"tokens": tokens}, {"y": np.arange(4)})
    assert dataset.arrays() is None
    (batch,) = dataset >> data.Batch(4, pad="longest")
    np.testing.assert_array_equal(batch.lengths["tokens"], [2, 4, 1, 3])


def model(dtype="float64", label_dtype="int64", scale=1.0):
    rng = np.random.default_rng(0)
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, 4), dtype)
    y = g.placeholder("y", (None,), label_dtype)
    w = g.var("w", (scale * rng.normal(size=(4, 5))).astype(dtype))
    g.set_loss(g.loss.softmax_cross_entropy(g.math.add(x @ w, 0.0, name="logits"), y, name="loss"))
    return g


def test_fit_trains_through_the_sliced_path_as_through_the_per_sample_path():
    x, y, _ = table()

    class PerSample(gv.data.DataSet):
        def __init__(self, inner):
            self.inner = inner

        def iterate(self, epoch=0):
            return self.inner.iterate_per_sample(epoch)

    def trained(wrap):
        g = model()
        pipeline = data.ArrayDataSet({"x": x}, {"y": y}) >> data.Shuffle(seed=5) >> data.Normalize("x") >> data.Batch(8)
        history = g.fit(wrap(pipeline), epochs=3, config=gv.TrainingConfig(gv.Adam(0.05), ["x"], ["y"]))
        return g.value("w"), history.iteration_losses
    fast, reference = trained(lambda p: p), trained(PerSample)
    np.testing.assert_array_equal(fast[0], reference[0])
    assert fast[1] == reference[1]


@pytest.mark.parametrize("features, labels", [(np.float32, np.int64), (np.float64, np.int32), (np.float32, np.uint8)])
def test_fit_casts_same_kind_batches_to_the_placeholder_dtypes(features, labels):
    x, y, _ = table()
    exact = model()
    exact.fit(data.ArrayDataSet({"x": x.astype(features).astype(np.float64)}, {"y": y}) >> data.Batch(16), 2,
              gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))
    cast = model()
    cast.fit(data.ArrayDataSet({"x": x.astype(features)}, {"y": y.astype(labels)}) >> data.Batch(16), 2,
             gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))
    np.testing.assert_array_equal(cast.value("w"), exact.value("w"))
    report = cast.evaluate(data.ArrayDataSet({"x": x.astype(features)}, {"y": y.astype(labels)}) >> data.Batch(16),
                           "logits", "y")
    assert report.count == len(y)


def test_fit_casts_float64_data_for_a_float32_model():
    x, y, _ = table()
    g = model("float32")
    history = g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 2,
                    gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))
    assert g.value("w").dtype == np.float32 and np.isfinite(history.epoch_losses).all()


def test_fit_refuses_a_cast_across_kinds_before_the_first_step():
    x, y, _ = table()
    g = model()
    before = g.value("w").copy()
    with pytest.raises(gv.DTypeError, match=r"batch label field 'y' has dtype float64, but placeholder 'y' is "
                                            r"int64.*array.astype\('int64'\)"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": y.astype(np.float64)}) >> data.Batch(16), 1,
              gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))
    np.testing.assert_array_equal(g.value("w"), before)


def test_fit_refuses_integer_labels_out_of_the_placeholder_range():
    x, y, _ = table()
    g = model(label_dtype="int32")
    labels = y.astype(np.int64)
    labels[3] = 2 ** 40
    with pytest.raises(gv.DTypeError, match=r"'y' \(dtype int64\) holds values outside the range of placeholder"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": labels}) >> data.Batch(16), 1,
              gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_fit_stops_with_a_training_error_when_the_loss_is_not_finite(bad):
    x, y, _ = table()
    x[20] = bad                       # batch 2 of each epoch (batch size 16, no shuffle)
    g = model()
    seen = []

    class Counter(gv.Listener):
        def iteration_end(self, ctx, loss=None):
            seen.append(g.value("w").copy())
    with pytest.raises(gv.TrainingError, match=r"loss became (nan|inf) at iteration 2 \(epoch 1, batch 2 of the "
                                               r"epoch\).*terminate_on_nan=False") as caught:
        g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 3,
              gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]), listeners=[Counter()])
    assert isinstance(caught.value, gv.GraphviewError)
    assert (caught.value.iteration, caught.value.epoch) == (2, 0) and not np.isfinite(caught.value.loss)
    assert len(seen) == 1
    np.testing.assert_array_equal(g.value("w"), seen[0])      # the bad step did not update


def test_terminate_on_nan_can_be_turned_off():
    x, y, _ = table()
    x[20] = np.nan
    g = model()
    history = g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1,
                    gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], terminate_on_nan=False))
    assert len(history.iteration_losses) == 4 and np.isnan(history.iteration_losses[1])


def test_blas_threads_limits_the_matmul_blas_during_fit_only():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import scipy.linalg.cython_blas  # noqa: F401  (the BLAS of the matmul kernels)
    x, y, _ = table()
    g = model()
    seen = []

    def scipy_blas_threads():
        return [pool["num_threads"] for pool in threadpoolctl.threadpool_info()
                if pool["user_api"] == "blas" and "scipy_openblas-" in pool["filepath"]]

    class Threads(gv.Listener):
        def iteration_end(self, ctx, loss=None):
            seen.extend(scipy_blas_threads())
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1,
              gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], blas_threads=1), listeners=[Threads()])
        assert set(seen) == {1} and scipy_blas_threads() == [2]
    with pytest.raises(gv.GraphviewError, match="blas_threads must be None or an int >= 1, not 0"):
        gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], blas_threads=0)


def test_a_subclass_that_makes_its_own_samples_keeps_them():
    class Doubled(data.ArrayDataSet):
        def __getitem__(self, index):
            sample = super().__getitem__(index)
            return sample.replace(x=sample["x"] * 2)
    x, y, _ = table()
    (first, *_) = Doubled({"x": x}, {"y": y}) >> data.Shuffle(seed=0) >> data.Batch(8)
    order = np.random.default_rng([0, 0]).permutation(len(y))[:8]
    np.testing.assert_array_equal(first["x"], 2 * x[order])


def vectors_in_an_object_array(n=10):
    column = np.empty(n, object)
    for i in range(n):
        column[i] = np.full(4, float(i))
    return column


def test_object_columns_keep_the_per_sample_path():
    dataset = data.ArrayDataSet({"x": vectors_in_an_object_array()}, {"y": np.arange(10) % 3}) >> data.Batch(4)
    first = list(dataset)[0]["x"]
    assert first.dtype == np.float64 and first.shape == (4, 4)
    np.testing.assert_array_equal(first, np.repeat(np.arange(4.0), 4).reshape(4, 4))
    assert_same_batches(dataset.iterate(0), dataset.iterate_per_sample(0))


def test_ragged_object_columns_without_padding_say_how_to_pad():
    ragged = np.empty(4, object)
    for i, n in enumerate((2, 4, 1, 3)):
        ragged[i] = np.arange(n)
    with pytest.raises(data.DataError, match=r"pad them with Batch\(size, pad='longest'\)"):
        list(data.ArrayDataSet({"tokens": ragged}, {"y": np.arange(4)}) >> data.Batch(4))


class NoisyShuffle(data.Shuffle):
    def apply(self, items, epoch):
        for s in super().apply(items, epoch):
            yield data.Sample({"x": s["x"] + 100}, {"y": s["y"]})


class Plus100(data.OneHot):
    def apply(self, items, epoch):
        return (item.replace(x=item["x"] + 100) for item in items)


class SampleCounter(data.Map):
    def apply(self, items, epoch):
        return (self.transform(item.replace(x=item["x"] + 100)) for item in items)


class LeftAlone(data.Normalize):
    def apply(self, items, epoch):
        return (item.replace(x=item["x"] + 100) for item in items)


class NoBatchingAfterAll(data.Batch):
    def apply(self, items, epoch):
        for batch in super().apply(items, epoch):
            yield batch.replace(x=batch["x"] + 100)


@pytest.mark.parametrize("stage", [NoisyShuffle(seed=0), Plus100("y", 5), SampleCounter(lambda s: s, batched=True),
                                   LeftAlone("x", mean=0.0, std=1.0)],
                         ids=["shuffle", "one hot", "map", "normalize"])
def test_a_subclass_that_overrides_apply_runs_its_apply(stage):
    x, y, _ = table()
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> stage >> data.Batch(8)
    batches = list(dataset)
    assert all((batch["x"] >= 50).all() for batch in batches)
    assert_same_batches(batches, dataset.iterate_per_sample(0))


def test_a_batch_subclass_that_overrides_apply_runs_its_apply():
    x, y, _ = table()
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> data.Shuffle(seed=0) >> NoBatchingAfterAll(8)
    batches = list(dataset)
    assert all((batch["x"] >= 50).all() for batch in batches)
    assert_same_batches(batches, dataset.iterate_per_sample(0))


def test_a_subclass_that_keeps_the_batch_methods_keeps_the_sliced_path(monkeypatch):
    class Named(data.Shuffle):
        def __repr__(self):
            return "Named()"
    x, y, _ = table()
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> Named(seed=0) >> data.Batch(16)
    monkeypatch.setattr(data.ArrayDataSet, "__getitem__", lambda self, i: pytest.fail("a sample was built"))
    assert [batch.size for batch in dataset.iterate(0)] == [16, 16, 16, 5]


@pytest.mark.parametrize("result", [3, None, (1, 2)], ids=["int", "none", "tuple"])
def test_a_batched_map_returning_a_non_item_is_the_same_error_on_both_paths(result):
    x, y, _ = table(4)
    dataset = data.ArrayDataSet({"x": x}, {"y": y}) >> data.Map(lambda b: result, batched=True) >> data.Batch(2)
    messages = []
    for iterate in (dataset.iterate, dataset.iterate_per_sample):
        with pytest.raises(data.DataError, match=r"Map\('<lambda>', batched=True\): the function returned") as caught:
            list(iterate(0))
        messages.append(str(caught.value))
    assert messages[0] == messages[1]


def test_fit_checks_the_validation_data_before_the_first_step():
    x, y, _ = table()
    g = model()
    before = g.value("w").copy()
    with pytest.raises(gv.DTypeError, match=r"validation.*label field 'y' has dtype float64, but placeholder 'y'"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1, gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]),
              validation=data.ArrayDataSet({"x": x}, {"y": y.astype(np.float64)}) >> data.Batch(16))
    np.testing.assert_array_equal(g.value("w"), before)


def test_checking_the_validation_data_early_reads_a_one_shot_iterable_once():
    x, y, _ = table()
    batches = iter(list(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16)))
    one_shot = data.IterableDataSet(lambda: batches)
    g = model()
    history = g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1,
                    gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]), validation=one_shot)
    reference = model()
    expected = reference.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1,
                             gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]),
                             validation=data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16))
    assert history.validation == expected.validation and history.validation[0]["loss"] > 0


def test_fit_refuses_an_empty_validation_set_before_the_first_step():
    x, y, _ = table()
    g = model()
    before = g.value("w").copy()
    with pytest.raises(gv.GraphviewError, match="the validation data set gave no batches"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1, gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]),
              validation=data.IterableDataSet(lambda: []))
    np.testing.assert_array_equal(g.value("w"), before)


@pytest.mark.parametrize("flag", ["no", 0, 1, None, 1.0])
def test_training_config_flags_must_be_bools(flag):
    with pytest.raises(gv.GraphviewError, match=rf"TrainingConfig: terminate_on_nan must be True or False, "
                                                rf"not {flag!r}"):
        gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], terminate_on_nan=flag)
    assert gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], terminate_on_nan=np.False_).terminate_on_nan is False


def test_a_normalize_shared_with_the_validation_data_still_learns_from_the_training_data():
    x, y, _ = table()
    normalize = data.Normalize("x")
    g = model()
    g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> normalize >> data.Batch(16), 1,
          gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]),
          validation=data.ArrayDataSet({"x": 10 * x[:20]}, {"y": y[:20]}) >> normalize >> data.Batch(16))
    np.testing.assert_allclose(normalize.mean, x.mean(axis=0))


def test_evaluate_maps_renamed_features_and_fit_names_validation_data_in_errors():
    x, y, _ = table()
    g = model()
    report = g.evaluate(data.ArrayDataSet({"a": x}, {"y": y}) >> data.Batch(16), "logits", "y",
                        feature_mapping={"a": "x"})
    assert report.count == len(y)
    with pytest.raises(gv.PlaceholderError, match="the validation batch has no feature field 'x'"):
        g.fit(data.ArrayDataSet({"x": x}, {"y": y}) >> data.Batch(16), 1,
              gv.TrainingConfig(gv.SGD(0.1), {"x": "x"}, ["y"]),
              validation=data.ArrayDataSet({"a": x}, {"y": y}) >> data.Batch(16))
