"""The nn activations (graphview/ops/activations.py) against torch.nn.functional: values in float32 and
float64, gradients (PyTorch's choices at the kinks), finite differences, errors and graph files."""
import numpy as np
import pytest

import graphview as gv

torch = pytest.importorskip("torch")
F = torch.nn.functional

# (graphview op, keyword attrs, the torch function with the same attrs)
CASES = [
    ("leaky_relu", {}, lambda t: F.leaky_relu(t)),
    ("leaky_relu", {"alpha": 0.3}, lambda t: F.leaky_relu(t, 0.3)),
    ("elu", {}, lambda t: F.elu(t)),
    ("elu", {"alpha": 0.5}, lambda t: F.elu(t, 0.5)),
    ("selu", {}, lambda t: F.selu(t)),
    ("softplus", {}, lambda t: F.softplus(t)),
    ("silu", {}, lambda t: F.silu(t)),
    ("log_sigmoid", {}, lambda t: F.logsigmoid(t)),
    ("hard_tanh", {}, lambda t: F.hardtanh(t)),
    ("hard_tanh", {"min_val": -0.5, "max_val": 2.0}, lambda t: F.hardtanh(t, -0.5, 2.0)),
]
IDS = [f"{name}-{attrs}" for name, attrs, _ in CASES]

# The kinks (0, -0.0, hard_tanh's bounds), and far out where a naive softplus or log_sigmoid overflows.
POINTS = np.array([-800.0, -60.0, -20.0, -3.0, -1.0, -0.5, -1e-8, -0.0, 0.0, 1e-8, 0.5, 1.0, 2.0, 3.0, 20.0, 60.0,
                   800.0])


def _values_and_gradient(name, attrs, x):
    g = gv.Graph()
    v = g.var("x", x)
    y = getattr(g.nn, name)(v, **attrs)
    g.set_loss(g.math.sum(g.math.mul(y, np.linspace(0.5, 1.5, x.size).reshape(x.shape).astype(x.dtype))))
    return g.output({}, [y])[y.name], g.calculate_gradients({}, ["x"])["x"]


def _torch(fn, x):
    t = torch.tensor(x, requires_grad=True)
    y = fn(t)
    (y * torch.tensor(np.linspace(0.5, 1.5, x.size).reshape(x.shape).astype(x.dtype))).sum().backward()
    return y.detach().numpy(), t.grad.numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name, attrs, fn", CASES, ids=IDS)
def test_values_and_gradients_match_pytorch_including_kinks_and_extremes(name, attrs, fn, dtype):
    x = POINTS.astype(dtype)
    values, gradient = _values_and_gradient(name, attrs, x)
    expected_values, expected_gradient = _torch(fn, x)
    assert values.dtype == np.dtype(dtype) and gradient.dtype == np.dtype(dtype)
    tolerance = dict(rtol=1e-6, atol=1e-7) if dtype == "float32" else dict(rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(values, expected_values, **tolerance)
    np.testing.assert_allclose(gradient, expected_gradient, **tolerance)
    assert np.isfinite(values).all() and np.isfinite(gradient).all()


@pytest.mark.parametrize("name, attrs, fn", CASES, ids=IDS)
def test_random_strided_values_match_pytorch(name, attrs, fn):
    x = np.random.default_rng(3).normal(scale=3.0, size=(6, 8))[::2, ::-1].T
    g = gv.Graph()
    y = getattr(g.nn, name)(g.var("x", x), **attrs)
    np.testing.assert_allclose(g.output({}, [y])[y.name], fn(torch.tensor(np.ascontiguousarray(x))).numpy(),
                               rtol=1e-13, atol=1e-15)


def test_subgradients_at_the_kinks_are_pytorchs():
    x = np.array([0.0, -0.0, -1.0, 1.0, np.nan])
    _, leaky = _values_and_gradient("leaky_relu", {"alpha": 0.25}, x)
    _, hard = _values_and_gradient("hard_tanh", {}, x)
    _, elu = _values_and_gradient("elu", {"alpha": 2.0}, x)
    weights = np.linspace(0.5, 1.5, 5)
    np.testing.assert_array_equal(leaky[:4], 0.25 * weights[:4] * [1, 1, 1, 4])   # alpha at 0, 1 above
    np.testing.assert_array_equal(hard[:4], [weights[0], weights[1], 0.0, 0.0])    # 0 at min_val and max_val
    np.testing.assert_allclose(elu[:2], 2.0 * weights[:2])                         # alpha * exp(0) at 0
    # At NaN: leaky_relu alpha, elu its positive side's 1 (PyTorch); hard_tanh 0, as graphview's relu.
    assert leaky[4] == 0.25 * weights[4] and elu[4] == weights[4] and hard[4] == 0.0


@pytest.mark.parametrize("name, attrs, fn", CASES, ids=IDS)
def test_gradients_and_second_derivatives_match_finite_differences(name, attrs, fn):
    x = np.array([[-2.3, -0.7, 0.4], [0.9, 1.7, -1.3]])
    g = gv.Graph()
    v = g.var("x", x)
    g.set_loss(g.math.sum(getattr(g.nn, name)(v, **attrs)))
    assert gv.check_gradients(g, {}).passed
    # Second derivatives: the rule is made of differentiable ops, so the gradient has a gradient.
    first = g.gradient_graph(["x"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["x"])))
    report = gv.check_gradients(first.graph, {}, wrt=["x"])
    assert report.passed, str(report)


def test_bad_attributes_are_refused_when_built():
    g = gv.Graph()
    x = g.var("x", np.ones(3))
    with pytest.raises(gv.OpArgumentError, match="hard_tanh: min_val \\(1.0\\) is greater than max_val \\(0.0\\)"):
        g.nn.hard_tanh(x, 1.0, 0.0)
    with pytest.raises(gv.OpArgumentError, match="leaky_relu.*alpha"):
        g.nn.leaky_relu(x, "a lot")
    with pytest.raises(gv.OpArgumentError, match="elu.*alpha"):
        g.nn.elu(x, float("inf"))


def test_integers_are_promoted_to_float():
    g = gv.Graph()
    y = g.nn.softplus(g.placeholder("i", (3,), "int32"))
    out = g.output({"i": np.array([-1, 0, 2], np.int32)}, [y])[y.name]
    np.testing.assert_allclose(out, F.softplus(torch.tensor([-1.0, 0.0, 2.0], dtype=torch.float64)).numpy())


def test_graph_files_save_and_load_every_activation(tmp_path):
    g = gv.Graph("activations")
    x = g.placeholder("x", (None, 3))
    outputs = [getattr(g.nn, name)(x, name=f"{name}{i}", **attrs) for i, (name, attrs, _) in enumerate(CASES)]
    path = tmp_path / "activations.gvz"
    g.save(path)
    loaded = gv.load(path)
    feeds = {"x": np.random.default_rng(5).normal(size=(4, 3))}
    names = [o.name for o in outputs]
    before, after = g.output(feeds, names), loaded.output(feeds, names)
    for key in names:
        np.testing.assert_array_equal(before[key], after[key])
    assert loaded.node("hard_tanh9").attributes["min_val"] == -0.5


@pytest.mark.parametrize("name, fn", [("softplus", F.softplus), ("hard_tanh", F.hardtanh)])
def test_large_arrays_computed_in_chunks_on_threads_match_pytorch(name, fn):
    # Above the kernels' thread thresholds (2**18 elements for softplus, 2**21 for hard_tanh).
    x = np.random.default_rng(8).normal(scale=4.0, size=(2**21 + 37,)).astype(np.float32)
    g = gv.Graph()
    y = getattr(g.nn, name)(g.var("x", x))
    np.testing.assert_allclose(g.output({}, [y])[y.name], fn(torch.tensor(x)).numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("op", ["elu", "selu"])
def test_elu_and_selu_gradients_far_below_zero_do_not_cancel_to_zero(op):
    torch = pytest.importorskip("torch")
    x = np.array([-30.0, -40.0, -700.0])
    g = gv.Graph()
    v = g.var("x", x)
    g.set_loss(g.math.sum(getattr(g.nn, op)(v)))
    got = g.calculate_gradients({}, ["x"])["x"]
    t = torch.tensor(x, requires_grad=True)
    getattr(torch.nn.functional, op)(t).sum().backward()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-12, atol=0)
    assert got[1] > 0
