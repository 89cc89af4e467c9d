"""Updaters against steps computed by hand (PyTorch's formulas), in place, with schedules and state."""
import math

import numpy as np
import pytest

import graphview as gv
from graphview.training import SGD, Adam, AdamW, RMSProp, CosineDecay, ExponentialDecay, StepDecay
from graphview_kernels import updaters as kernels


def graph_with(value, dtype="float64"):
    g = gv.Graph()
    g.var("w", np.array(value, dtype=dtype))
    return g


def steps(updater, value, grads, dtype="float64"):
    g = graph_with(value, dtype)
    buffer = g.stored("w")
    history = []
    for grad in grads:
        updater.step(g, {"w": np.array(grad, dtype=dtype)})
        history.append(g.value("w"))
    assert g.stored("w") is buffer, "the parameter must keep its buffer"
    return history


W = [1.0, -2.0, 0.5]
G1, G2, G3 = [0.5, -1.0, 2.0], [0.1, 0.3, -0.2], [-0.4, 0.2, 0.0]


def test_sgd_plain_step():
    (after,) = steps(SGD(learning_rate=0.1), W, [G1])
    np.testing.assert_allclose(after, np.array(W) - 0.1 * np.array(G1), rtol=0, atol=1e-15)


def test_sgd_momentum_two_steps():
    w, g1, g2 = map(np.array, (W, G1, G2))
    v1 = g1
    w1 = w - 0.1 * v1
    v2 = 0.9 * v1 + g2
    w2 = w1 - 0.1 * v2
    result = steps(SGD(learning_rate=0.1, momentum=0.9), W, [G1, G2])
    np.testing.assert_allclose(result[0], w1, atol=1e-15)
    np.testing.assert_allclose(result[1], w2, atol=1e-15)


def test_sgd_nesterov_and_weight_decay():
    w, g1, g2 = map(np.array, (W, G1, G2))
    d1 = g1 + 0.01 * w
    v1 = d1
    w1 = w - 0.1 * (d1 + 0.9 * v1)
    d2 = g2 + 0.01 * w1
    v2 = 0.9 * v1 + d2
    w2 = w1 - 0.1 * (d2 + 0.9 * v2)
    result = steps(SGD(learning_rate=0.1, momentum=0.9, nesterov=True, weight_decay=0.01), W, [G1, G2])
    np.testing.assert_allclose(result[1], w2, atol=1e-14)


def adam_reference(w, grads, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    out = []
    for t, g in enumerate(grads, start=1):
        g = np.array(g)
        if decoupled:
            w = w * (1 - lr * wd)
        else:
            g = g + wd * w
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(w)
    return out


def test_adam_three_steps():
    result = steps(Adam(learning_rate=0.01), W, [G1, G2, G3])
    for got, want in zip(result, adam_reference(np.array(W), [G1, G2, G3], 0.01)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_adam_first_step_moves_each_weight_by_the_learning_rate():
    (after,) = steps(Adam(learning_rate=0.01), W, [G1])
    np.testing.assert_allclose(np.abs(after - np.array(W)), 0.01, rtol=1e-6)


def test_adam_l2_and_adamw_decoupled_differ_as_specified():
    l2 = steps(Adam(learning_rate=0.01, weight_decay=0.1), W, [G1, G2])
    decoupled = steps(AdamW(learning_rate=0.01, weight_decay=0.1), W, [G1, G2])
    for got, want in zip(l2, adam_reference(np.array(W), [G1, G2], 0.01, wd=0.1)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    for got, want in zip(decoupled, adam_reference(np.array(W), [G1, G2], 0.01, wd=0.1, decoupled=True)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert not np.allclose(l2[-1], decoupled[-1])


def test_rmsprop_with_momentum():
    w = np.array(W)
    s = np.zeros(3)
    b = np.zeros(3)
    want = []
    for g in (G1, G2):
        g = np.array(g)
        s = 0.9 * s + 0.1 * g * g
        b = 0.5 * b + g / (np.sqrt(s) + 1e-8)
        w = w - 0.01 * b
        want.append(w)
    result = steps(RMSProp(learning_rate=0.01, alpha=0.9, momentum=0.5), W, [G1, G2])
    for got, expected in zip(result, want):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("updater", [SGD(0.1, momentum=0.9), Adam(0.01), AdamW(0.01), RMSProp(0.01)],
                         ids=["sgd", "adam", "adamw", "rmsprop"])
def test_float32_updates_in_place_close_to_float64(updater):
    import copy
    single = steps(copy.deepcopy(updater), W, [G1, G2], dtype="float32")
    double = steps(copy.deepcopy(updater), W, [G1, G2], dtype="float64")
    assert single[-1].dtype == np.float32
    np.testing.assert_allclose(single[-1], double[-1], rtol=1e-6)


def test_update_writes_into_the_stored_buffer_a_matrix_too():
    g = gv.Graph()
    g.var("w", np.arange(6.0).reshape(2, 3))
    stored = g.stored("w")
    view = stored.reshape(-1)
    SGD(0.5).step(g, {"w": np.ones((2, 3))})
    assert np.shares_memory(view, g.stored("w"))
    np.testing.assert_array_equal(g.value("w"), np.arange(6.0).reshape(2, 3) - 0.5)


def test_kernels_write_only_what_they_declare():
    rng = np.random.default_rng(0)
    arguments = {
        "sgd": lambda a: (a[0], a[1], a[2], 0.1, 0.9, True, 0.01),
        "adam": lambda a: (a[0], a[1], a[2], a[3], 0.1, 0.9, 0.999, 1e-8, 1.0, 0.01, False),
        "rmsprop": lambda a: (a[0], a[1], a[2], a[3], 0.1, 0.9, 1e-8, 0.5, 0.01),
    }
    for name, make in arguments.items():
        arrays = [rng.random(5) + 0.1 for _ in range(4)]
        before = [a.copy() for a in arrays]
        getattr(kernels, name)(*make(arrays))
        for position, (array, old) in enumerate(zip(arrays, before)):
            if position < len(make(arrays)) and isinstance(make(arrays)[position], np.ndarray):
                changed = not np.array_equal(array, old)
                assert changed == (position in kernels.WRITES[name]), (name, position)


def test_schedules():
    assert StepDecay(1.0, step_size=2, gamma=0.5).rate(5) == 0.25
    assert ExponentialDecay(1.0, decay_rate=0.5, decay_steps=2).rate(2) == 0.5
    cosine = CosineDecay(1.0, total=10, minimum=0.1)
    assert cosine.rate(0) == 1.0 and math.isclose(cosine.rate(5), 0.55) and cosine.rate(20) == pytest.approx(0.1)
    epoch_based = StepDecay(1.0, step_size=1, gamma=0.1, unit="epoch")
    assert epoch_based(iteration=100, epoch=2) == pytest.approx(0.01)


def test_schedule_drives_the_step_size():
    result = steps(SGD(learning_rate=StepDecay(1.0, step_size=1, gamma=0.5)), [0.0], [[1.0], [1.0], [1.0]])
    np.testing.assert_allclose([r[0] for r in result], [-1.0, -1.5, -1.75])


def test_state_round_trip_gives_identical_steps():
    first = Adam(0.01)
    g = graph_with(W)
    first.step(g, {"w": np.array(G1)})
    second = Adam(0.01)
    second.load_state_dict(first.state_dict())
    h = graph_with(g.value("w"))
    first.step(g, {"w": np.array(G2)})
    second.step(h, {"w": np.array(G2)})
    np.testing.assert_array_equal(g.value("w"), h.value("w"))


def test_errors_name_the_variable():
    g = graph_with(W)
    g.constant("c", np.ones(3))
    with pytest.raises(gv.ShapeError, match="gradient of 'w' has shape"):
        SGD(0.1).step(g, {"w": np.ones(4)})
    with pytest.raises(gv.GraphviewError, match="'c' is a CONSTANT"):
        SGD(0.1).step(g, {"c": np.ones(3)})
    with pytest.raises(gv.GraphviewError, match="learning_rate must be"):
        SGD(learning_rate="fast")
    with pytest.raises(gv.GraphviewError, match="nesterov=True needs a momentum"):
        SGD(0.1, nesterov=True)
    with pytest.raises(gv.GraphviewError, match="saved state 'velocity' belongs to another updater"):
        Adam(0.1).load_state_dict(SGD(0.1, momentum=0.5).state_dict() | {"state/velocity/w": np.zeros(3)})
