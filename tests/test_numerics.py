"""Numerical accuracy: log-softmax and softmax cross-entropy at large logits (against an exact reference),
and means of integers that would overflow an int64 accumulator."""
import math
from fractions import Fraction

import numpy as np
import pytest

import graphview as gv

SHIFTS = [0.0, 1e4, 1e8, 1e12, 1e16]


def exact_log_softmax(row):
    """(x - max) - log(sum(exp(x - max))) with each difference exact and the sum compensated: the
    formula PyTorch evaluates, to within an ulp of each term."""
    top = max(row)
    shifted = [float(Fraction(value) - Fraction(top)) for value in row]
    log_total = math.log(math.fsum(math.exp(d) for d in shifted))
    return [d - log_total for d in shifted]


def exact_cross_entropy(rows, labels):
    return math.fsum(-exact_log_softmax(row)[label] for row, label in zip(rows, labels)) / len(rows)


def logits(shift):
    return np.array([0.5, 0.0, -1.0]) + shift


def test_log_softmax_of_equal_huge_logits_is_minus_log_3():
    g = gv.Graph()
    x = g.placeholder("x", (3,))
    y = g.nn.log_softmax(x, axis=0)
    np.testing.assert_allclose(g.output({"x": np.full(3, 1e16)}, [y])[y.name], np.full(3, -math.log(3)),
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("shift", SHIFTS)
@pytest.mark.parametrize("axis", [-1, 0])
def test_log_softmax_stays_accurate_at_large_logits(shift, axis):
    rows = np.stack([logits(shift), logits(-shift), np.full(3, shift)])   # (3 rows, 3 classes)
    x = rows if axis == -1 else np.ascontiguousarray(rows.T)             # axis 0: the strided kernel path
    g = gv.Graph()
    y = g.nn.log_softmax(g.placeholder("x", (3, 3)), axis=axis)
    result = y.eval({"x": x})
    expected = np.array([exact_log_softmax(list(row)) for row in rows])
    np.testing.assert_allclose(result if axis == -1 else result.T, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("shift", SHIFTS)
def test_masked_log_softmax_stays_accurate_at_large_logits(shift):
    data = np.stack([logits(shift), np.array([shift, shift, np.nan])])[:, :, None]   # (batch, time, 1)
    g = gv.Graph()
    y = gv.masked_log_softmax(g.placeholder("x", (2, 3, 1)), g.placeholder("n", (2,), "int64"))
    result = y.eval({"x": data, "n": np.array([3, 2])})
    np.testing.assert_allclose(result[0, :, 0], exact_log_softmax(list(logits(shift))), rtol=1e-12, atol=0)
    np.testing.assert_allclose(result[1, :2, 0], exact_log_softmax([shift, shift]), rtol=1e-12, atol=0)
    assert result[1, 2, 0] == 0.0


def test_cross_entropy_of_equal_huge_logits_is_log_2():
    g = gv.Graph()
    loss = g.loss.softmax_cross_entropy(g.placeholder("x", (1, 2)), g.placeholder("y", (1,), "int64"))
    np.testing.assert_allclose(loss.eval({"x": np.array([[1e16, 1e16]]), "y": np.array([0])}), math.log(2),
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("shift", SHIFTS)
def test_cross_entropy_stays_accurate_at_large_logits(shift):
    rows = np.stack([logits(shift), logits(shift)[::-1], np.full(3, shift)])
    labels = np.array([0, 1, 2])
    expected = exact_cross_entropy([list(row) for row in rows], labels)
    g = gv.Graph()
    loss = g.loss.softmax_cross_entropy(g.placeholder("x", (3, 3)), g.placeholder("y", (3,), "int64"))
    np.testing.assert_allclose(loss.eval({"x": rows, "y": labels}), expected, rtol=1e-12, atol=0)

    # The same rows as a padded (batch 2, time 2) sequence with the last position padding.
    padded = np.stack([rows[:2], np.stack([rows[2], np.full(3, np.nan)])])
    g = gv.Graph()
    masked = gv.masked_softmax_cross_entropy(g.placeholder("x", (2, 2, 3)), g.placeholder("y", (2, 2), "int64"),
                                             g.placeholder("n", (2,), "int64"))
    value = masked.eval({"x": padded, "y": np.array([[0, 1], [2, -1]]), "n": np.array([2, 1])})
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("masked", [False, True])
def test_logsumexp_gradient_is_the_softmax_at_large_logits(masked):
    g = gv.Graph()
    x = g.placeholder("x", (1, 3))
    if masked:
        total = gv.masked_logsumexp(x, g.placeholder("n", (1,), "int64"), axis=1)
    else:
        total = g.math.logsumexp(x, axis=1)
    g.set_loss(g.math.sum(total, name="loss"))
    feeds = {"x": np.full((1, 3), 1e16), **({"n": np.array([3])} if masked else {})}
    gradient = g.calculate_gradients(feeds, ["x"])["x"]
    np.testing.assert_allclose(gradient, np.full((1, 3), 1 / 3), rtol=1e-12, atol=0)



INFINITE_ROWS = np.array([[np.inf, 1.0, 2.0], [-np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf],
                          [np.inf, -np.inf, 1.0], [np.inf, np.inf, 1.0], [-np.inf, -np.inf, 3.0],
                          [np.inf, 1.0, np.nan], [1.0, 2.0, 3.0]])


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_logsumexp_and_its_gradient_match_pytorch_at_infinite_entries(axis, keepdims, masked):
    """PyTorch's gradient is exp(x - logsumexp(x)): a row holding +inf gets NaN only at its +inf
    entries and 0 elsewhere; a row of -inf gets NaN; a -inf beside finite entries gets 0."""
    torch = pytest.importorskip("torch")
    data = INFINITE_ROWS if axis == 1 else INFINITE_ROWS.T.copy()
    tensor = torch.tensor(data, requires_grad=True)
    expected = torch.logsumexp(tensor, dim=axis, keepdim=keepdims)
    expected.sum().backward()

    g = gv.Graph()
    x = g.placeholder("x", data.shape)
    feeds = {"x": data}
    if masked:   # every entry valid: the same values through the masked kernel and rule
        feeds["n"] = np.full(data.shape[0], data.shape[1])
        total = gv.masked_logsumexp(x, g.placeholder("n", (data.shape[0],), "int64"), axis=axis, keepdims=keepdims)
    else:
        total = g.math.logsumexp(x, axis=axis, keepdims=keepdims)
    g.set_loss(g.math.sum(total, name="loss"))
    np.testing.assert_array_equal(total.eval(feeds), expected.detach().numpy())
    gradient = g.calculate_gradients(feeds, ["x"])["x"]
    np.testing.assert_allclose(gradient, tensor.grad.numpy(), rtol=1e-12, atol=0)

# --- means of integers: accumulated in float64, as NumPy does ------------------------------------

BIG = 1_700_000_000_000_000_000


def test_mean_of_int64_does_not_overflow():
    g = gv.Graph()
    x = g.placeholder("x", (6,), "int64")
    result = g.math.mean(x).eval({"x": np.full(6, BIG)})
    assert result.dtype == np.float64
    np.testing.assert_allclose(result, np.mean(np.full(6, BIG)), rtol=1e-15)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_every_integer_mean_matches_numpy(axis, keepdims):
    data = np.full((3, 4, 5), BIG, np.int64)
    data[1, 2, 3] = -5
    data[:, ::2] //= 3
    g = gv.Graph()
    x = g.placeholder("x", data.shape, "int64")
    np.testing.assert_allclose(g.math.mean(x, axis=axis, keepdims=keepdims).eval({"x": data}),
                               np.mean(data, axis=axis, keepdims=keepdims), rtol=1e-15)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_large_integer_means_on_threads_match_numpy(axis):
    data = np.full((2, 140_000), BIG, np.int64)   # past PARALLEL_THRESHOLD: the threaded sums
    g = gv.Graph()
    x = g.placeholder("x", data.shape, "int64")
    np.testing.assert_allclose(g.math.mean(x, axis=axis).eval({"x": data}), np.mean(data, axis=axis), rtol=1e-15)


def test_int64_sum_stays_int64_as_in_numpy():
    g = gv.Graph()
    x = g.placeholder("x", (3,), "int64")
    data = np.array([2**62, 2**62 - 1, -(2**62)])
    result = g.math.sum(x).eval({"x": data})
    assert result.dtype == np.int64 and result == np.sum(data)


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_masked_means_of_integers_do_not_overflow(dtype):
    value = BIG if dtype == "int64" else 2_000_000_000
    data = np.full((2, 6, 3), value, dtype)
    lengths = np.array([6, 4])
    g = gv.Graph()
    x = g.placeholder("x", data.shape, dtype)
    n = g.placeholder("n", (2,), "int64")
    for axis in (1, None, (0, 1), 2):
        result = gv.masked_mean(x, n, axis=axis).eval({"x": data, "n": lengths})
        if axis == 2:
            result = result[[0, 0, 1], [5, 3, 3]]   # valid positions (padding means nothing: NaN)
        np.testing.assert_allclose(result, np.full(np.shape(result), float(value)), rtol=1e-15)
