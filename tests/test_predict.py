"""g.predict: one output over an array, a dict of arrays or a data set, in batches, in inference mode."""
import numpy as np
import pytest

import graphview as gv
from graphview import data, runstate


def mlp(seed=0):
    """x (n, 4) -> tanh(x @ w1) -> dropout(0.5) -> @ w2 -> (n, 3); returns the graph, logits and a NumPy model."""
    r = np.random.default_rng(seed)
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, 4))
    labels = g.placeholder("y", (None,), "int64")
    w1, w2 = g.var("w1", r.normal(size=(4, 8))), g.var("w2", r.normal(size=(8, 3)))
    logits = g.math.matmul(g.nn.dropout(g.math.tanh(x @ w1), 0.5, seed=3), w2, name="logits")
    g.set_loss(g.loss.softmax_cross_entropy(logits, labels, name="loss"))
    return g, logits, lambda features: np.tanh(features @ g.value("w1")) @ g.value("w2")


def features(n=50, seed=1):
    return np.random.default_rng(seed).normal(size=(n, 4))


def test_predict_is_the_output_without_dropout_and_differs_from_a_training_run():
    g, logits, numpy_model = mlp()
    x = features()
    predicted = g.predict(x, logits)
    assert predicted.shape == (50, 3) and predicted.dtype == np.float64
    np.testing.assert_allclose(predicted, numpy_model(x), rtol=1e-12)
    with gv.inference():
        np.testing.assert_array_equal(predicted, g.output({"x": x}, [logits])["logits"])
    with runstate.training(0):
        trained = g.output({"x": x}, [logits])["logits"]
        inside_a_step = g.predict(x, "logits")          # predict sets inference itself
    assert np.abs(trained - predicted).max() > 0.1       # dropout is on in a training run
    np.testing.assert_array_equal(inside_a_step, predicted)


def test_batch_sizes_agree_exactly():
    # Whole numbers keep every sum exact, so any difference would be a row lost, repeated or misplaced
    # (with general floats a BLAS product of 1 row and of 50 can differ in the last bit, NumPy's too).
    r = np.random.default_rng(6)
    g = gv.Graph("exact")
    x = g.placeholder("x", (None, 4))
    w1 = g.var("w1", r.integers(-3, 4, (4, 8)).astype(float))
    w2 = g.var("w2", r.integers(-3, 4, (8, 3)).astype(float))
    out = g.math.matmul(g.nn.dropout(g.nn.relu(x @ w1), 0.5, seed=3), w2, name="out")
    values = r.integers(-5, 6, (50, 4)).astype(float)
    expected = np.maximum(values @ g.value("w1"), 0) @ g.value("w2")
    for size in (1, 7, 256, 50, 51, np.int64(13)):
        np.testing.assert_array_equal(g.predict(values, out, batch_size=size), expected, err_msg=str(size))
    mlp_graph, logits, numpy_model = mlp()
    for size in (1, 7, 256):
        np.testing.assert_allclose(mlp_graph.predict(features(), logits, batch_size=size), numpy_model(features()),
                                   rtol=1e-12, atol=1e-14)


def test_a_dict_feeds_only_what_the_output_needs_and_casts_like_fit():
    g, logits, numpy_model = mlp()
    x = features(20)
    labels = np.zeros(20, np.int64)
    predicted = g.predict({"x": x.astype(np.float32), "y": labels}, logits, batch_size=6)
    np.testing.assert_allclose(predicted, numpy_model(x.astype(np.float32).astype(np.float64)), rtol=1e-12)


def test_a_data_set_is_run_batch_by_batch_with_or_without_a_feature_mapping():
    g, logits, numpy_model = mlp()
    x = features(23)
    labels = np.arange(23) % 3
    by_name = data.ArrayDataSet({"x": x}, {"y": labels}) >> data.Batch(5)
    np.testing.assert_allclose(g.predict(by_name, logits), numpy_model(x), rtol=1e-12)
    mapped = data.ArrayDataSet({"pixels": x}) >> data.Batch(5)
    with runstate.training(4):
        result = g.predict(mapped, logits, feature_mapping={"pixels": "x"})
    np.testing.assert_allclose(result, numpy_model(x), rtol=1e-12)


def test_batch_norm_uses_its_running_statistics():
    r = np.random.default_rng(2)
    g = gv.Graph("bn")
    x = g.placeholder("x", (None, 3))
    mean = g.var("running_mean", r.normal(size=3), trainable=False)
    var = g.var("running_var", r.uniform(0.5, 2.0, 3), trainable=False)
    gamma, beta = g.var("gamma", r.uniform(0.5, 1.5, 3)), g.var("beta", r.normal(size=3))
    y = g.nn.batch_norm(x, gamma, beta, mean, var, eps=1e-5, name="bn")
    values = r.normal(2.0, 3.0, size=(40, 3))
    expected = (values - g.value("running_mean")) / np.sqrt(g.value("running_var") + 1e-5) * g.value("gamma") \
        + g.value("beta")
    with runstate.training(0):
        batch_statistics = g.output({"x": values}, [y])["bn"]
        predicted = g.predict(values, y, batch_size=16)
    np.testing.assert_allclose(predicted, expected, rtol=1e-12)
    assert np.abs(batch_statistics - expected).max() > 0.1   # a training run normalizes by the batch instead


def sequences(n=9, seed=4):
    r = np.random.default_rng(seed)
    lengths = r.integers(1, 6, n)
    padded = r.normal(size=(n, 5, 2))
    for row, length in enumerate(lengths):
        padded[row, length:] = 1e6             # padding that would dominate any result that read it
    return padded, lengths


def sequence_model():
    g = gv.Graph("seq")
    time, feature = gv.Dim("time"), gv.Dim("feature", 2)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    w = g.var("w", np.array([[1.0, 2.0, 0.5], [-1.0, 0.0, 3.0]]))
    return g, g.math.matmul(g.math.mean(seq, axis=time), w, name="scores"), seq


def test_a_sequence_model_is_fed_its_lengths_through_the_dict():
    g, scores, _ = sequence_model()
    padded, lengths = sequences()
    result = g.predict({"seq": padded, "seq_len": lengths}, scores, batch_size=4)
    expected = np.stack([padded[row, :length].mean(axis=0) for row, length in enumerate(lengths)]) @ g.value("w")
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    with pytest.raises(gv.PlaceholderError, match=r"needs the placeholders seq, seq_len.*pass a dict"):
        g.predict(padded, scores)
    ragged = data.ArrayDataSet({"seq": [row[:length] for row, length in zip(padded, lengths)]})
    batches = ragged >> data.Batch(4, pad="longest", pad_value=1e6)    # each batch padded to its own longest
    mapping = {"seq": "seq", "seq:lengths": "seq_len"}
    np.testing.assert_allclose(g.predict(batches, scores, feature_mapping=mapping), expected, rtol=1e-12)
    with pytest.raises(gv.PlaceholderError, match=r"needs placeholder\(s\) seq_len, which the batch does not feed"):
        g.predict(batches, scores)


def test_an_array_alone_is_refused_for_a_padded_input_even_where_the_output_reads_no_lengths():
    g, _, seq = sequence_model()
    with pytest.raises(gv.PlaceholderError, match=r"seq, seq_len, so an array alone cannot feed it"):
        g.predict(sequences()[0], seq * 2.0)


def test_empty_data_gives_an_empty_array_when_the_trailing_shape_is_static():
    g, logits, _ = mlp()
    empty = g.predict(np.zeros((0, 4)), logits)
    assert empty.shape == (0, 3) and empty.dtype == np.float64
    assert g.predict({"x": np.zeros((0, 4)), "y": np.zeros(0, np.int64)}, logits).shape == (0, 3)
    h = gv.Graph("open")
    wide = h.placeholder("x", (None, None))
    with pytest.raises(gv.GraphviewError, match=r"no examples, and output .mul. has the shape \(\?, \?\), whose"):
        h.predict(np.zeros((0, 4)), wide * 2.0)


def test_errors_name_what_is_wrong():
    g, logits, _ = mlp()
    x = features(10)
    with pytest.raises(gv.GraphviewError, match=r"'loss' is a scalar; predict returns per-example.*g.evaluate"):
        g.predict({"x": x, "y": np.zeros(10, np.int64)}, "loss")
    for size in (0, -3, 2.5, True, "8"):
        with pytest.raises(gv.GraphviewError, match="batch_size must be a positive int"):
            g.predict(x, logits, batch_size=size)
    with pytest.raises(gv.DTypeError, match=r"predict: the array for placeholder 'x' has dtype complex128.*"
                                            r"astype\('float64'\)"):
        g.predict(x.astype(complex), logits)
    with pytest.raises(gv.GraphviewError, match="not list"):
        g.predict(x.tolist(), logits)
    with pytest.raises(gv.PlaceholderError, match=r"'x' has 10 rows, 'y' has 9"):
        g.predict({"x": x, "y": np.zeros(9, np.int64)}, logits)
    with pytest.raises(gv.PlaceholderError, match=r"key 'w1' of the data dict is not a placeholder"):
        g.predict({"x": x, "w1": x}, logits)
    with pytest.raises(gv.PlaceholderError, match=r"key 'nope' of the data dict is not a placeholder"):
        g.predict({"x": x, "nope": x}, logits)
    with pytest.raises(gv.PlaceholderError, match=r"needs placeholder\(s\) x, which the data dict does not hold"):
        g.predict({"y": np.zeros(10, np.int64)}, logits)
    with pytest.raises(gv.PlaceholderError, match=r"needs placeholder\(s\) x, which the batch does not feed"):
        g.predict(data.ArrayDataSet({"pixels": x}) >> data.Batch(4), logits)
    with pytest.raises(gv.GraphviewError, match="feature_mapping applies to a data set"):
        g.predict(x, logits, feature_mapping={"pixels": "x"})
    with pytest.raises(gv.PlaceholderError, match="depends on no placeholder"):
        g.predict(x, g.var("w3", np.ones((2, 2))) * 2.0)


def test_several_placeholders_need_a_dict():
    g = gv.Graph("two")
    total = g.math.add(g.placeholder("a", (None, 2)), g.placeholder("b", (None, 2)), name="total")
    with pytest.raises(gv.PlaceholderError, match=r"needs the placeholders a, b, so an array alone.*data set"):
        g.predict(np.ones((3, 2)), total)
    both = {"a": np.ones((3, 2)), "b": np.arange(6.0).reshape(3, 2)}
    np.testing.assert_array_equal(g.predict(both, total, batch_size=2), both["b"] + 1)


def test_outputs_without_a_leading_batch_axis_or_with_ragged_batches_are_refused():
    g = gv.Graph("shapes")
    x = g.placeholder("x", (None, None))
    with pytest.raises(gv.GraphviewError, match=r"gave shape \(3,\) for a batch of 4 examples.*batch axis"):
        g.predict(np.ones((4, 3)), g.math.sum(x, axis=0), batch_size=4)
    ragged = data.ArrayDataSet({"x": np.ones((12, 6))}) >> data.Batch(5) >> data.Map(
        lambda b: {**b, "x": b["x"][:, :len(b["x"])]})
    with pytest.raises(gv.GraphviewError, match=r"the batches must agree past the first axis"):
        g.predict(ragged, x * 2.0)
