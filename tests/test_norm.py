"""Normalization: batch_norm (training and inference modes, running-statistic state updates), layer_norm,
and variables made with trainable=False (updaters and gradient checks skip them; graph files keep the flag)."""
import json
import os
import re
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import data, runstate
from graphview.serialization import NODE_FIELDS
from graphview.training.step import GradientStep

torch = pytest.importorskip("torch")
F = torch.nn.functional

OLD_FILE = os.path.join(os.path.dirname(__file__), "data", "mlp_written_before_trainable_flag.gvz")


def bn_graph(shape=(6, 3, 2, 2), axis=1, momentum=0.1, eps=1e-5, dtype=np.float64, seed=0):
    r = np.random.default_rng(seed)
    channels = shape[axis]
    g = gv.Graph("bn")
    x = g.placeholder("x", shape, dtype)
    gamma = g.var("gamma", r.uniform(0.5, 1.5, channels).astype(dtype))
    beta = g.var("beta", r.normal(size=channels).astype(dtype))
    mean = g.var("running_mean", (r.normal(size=channels) * 0.3).astype(dtype), trainable=False)
    var = g.var("running_var", r.uniform(0.5, 2.0, channels).astype(dtype), trainable=False)
    y = g.nn.batch_norm(x, gamma, beta, mean, var, axis=axis, momentum=momentum, eps=eps, name="bn")
    weights = g.constant("weights", r.normal(size=shape).astype(dtype))
    g.set_loss(g.math.sum(y * weights))
    return g, y, r.normal(size=shape).astype(dtype)


def torch_bn(g, x, training, axis=1, momentum=0.1, eps=1e-5):
    """PyTorch's batch norm of x with g's parameters and copies of its running statistics (channels moved
    to axis 1), the loss sum(y * weights) backpropagated; returns (y, loss, grads, running mean, running var)."""
    def tensor(value, grad=False):
        return torch.tensor(np.asarray(value, np.float64), requires_grad=grad)

    tx = tensor(np.moveaxis(x, axis, 1), True)
    gamma, beta = tensor(g.value("gamma"), True), tensor(g.value("beta"), True)
    mean, var = tensor(g.value("running_mean")), tensor(g.value("running_var"))
    y = F.batch_norm(tx, mean, var, gamma, beta, training=training, momentum=momentum, eps=eps)
    loss = (y * tensor(np.moveaxis(g.value("weights"), axis, 1))).sum()
    loss.backward()
    loss = loss.detach()
    grads = {"x": np.moveaxis(tx.grad.numpy(), 1, axis), "gamma": gamma.grad.numpy(), "beta": beta.grad.numpy()}
    return np.moveaxis(y.detach().numpy(), 1, axis), float(loss), grads, mean.numpy(), var.numpy()


# --- batch_norm against PyTorch ------------------------------------------------------------------

@pytest.mark.parametrize("axis, shape", [(1, (6, 3, 2, 2)), (-1, (4, 5, 3)), (1, (8, 4))])
def test_batch_norm_outside_training_uses_the_running_statistics_as_torch_eval(axis, shape):
    g, y, x = bn_graph(shape, axis)
    expected, _, grads, mean, var = torch_bn(g, x, training=False, axis=axis)
    np.testing.assert_allclose(g.output({"x": x}, [y])["bn"], expected, rtol=1e-12, atol=1e-12)
    with gv.inference():
        np.testing.assert_allclose(g.output({"x": x}, [y])["bn"], expected, rtol=1e-12, atol=1e-12)
    mine = g.calculate_gradients({"x": x}, ["x", "gamma", "beta"])
    for name in ("x", "gamma", "beta"):
        np.testing.assert_allclose(mine[name], grads[name], rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(g.value("running_mean"), mean)   # nothing is updated outside training


@pytest.mark.parametrize("axis, shape, dtype", [(1, (6, 3, 2, 2), np.float64), (-1, (4, 5, 3), np.float64),
                                                (1, (8, 4), np.float32)])
def test_a_training_step_uses_batch_statistics_and_updates_the_running_ones_in_place(axis, shape, dtype):
    g, y, x = bn_graph(shape, axis, momentum=0.2, dtype=dtype)
    expected, loss, grads, mean, var = torch_bn(g, x.astype(np.float64), training=True, axis=axis, momentum=0.2)
    buffers = g.stored("running_mean"), g.stored("running_var")
    step = GradientStep(g)
    assert step.wrt == ["gamma", "beta"]          # the running statistics are not trained
    value, mine = step({"x": x})
    tolerance = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-5)
    assert value == pytest.approx(loss, rel=1e-10 if dtype == np.float64 else 1e-5)
    for name in ("gamma", "beta"):
        np.testing.assert_allclose(mine[name], grads[name], **tolerance)
    np.testing.assert_allclose(g.value("running_mean"), mean, **tolerance)
    np.testing.assert_allclose(g.value("running_var"), var, **tolerance)   # unbiased, as PyTorch
    assert g.stored("running_mean") is buffers[0] and g.stored("running_var") is buffers[1]
    with runstate.training(0):
        np.testing.assert_allclose(g.output({"x": x}, [y])["bn"], expected, **tolerance)
        np.testing.assert_allclose(g.calculate_gradients({"x": x}, ["x"])["x"], grads["x"], **tolerance)


def test_the_state_update_is_a_declared_in_place_write_the_validation_listener_accepts():
    g, _, x = bn_graph((5, 3, 2))
    listener = gv.NonInplaceValidationListener(raise_errors=False)
    step = GradientStep(g)
    step({"x": x}, listeners=[listener], commit_state=False)
    assert not listener.violations
    assert set(step.new_state) == {"running_mean", "running_var"}
    before = g.value("running_mean")
    np.testing.assert_array_equal(g.value("running_mean"), before)    # not yet committed
    step.commit_state()
    assert not np.array_equal(g.value("running_mean"), before)
    plan = gv.Graph.explain(step.gradient.graph, [node for _, node in step.state])
    assert "copies running_mean first" in plan and "never changes (copy on write)" in plan


def test_training_gradients_match_finite_differences_and_running_statistics_get_none():
    g, _, x = bn_graph((5, 3, 2))
    with runstate.training(3):
        report = gv.check_gradients(g, {"x": x}, wrt=["x", "gamma", "beta", "running_mean", "running_var"])
        assert report.passed, str(report)
        zero = g.calculate_gradients({"x": x}, ["running_mean", "running_var"])
    assert not zero["running_mean"].any() and not zero["running_var"].any()


def test_inference_gradients_match_finite_differences_including_explicit_running_statistics():
    g, _, x = bn_graph((5, 3, 2))
    report = gv.check_gradients(g, {"x": x})
    assert report.passed, str(report)
    assert set(report.variables) == {"gamma", "beta"}       # trainable=False is skipped by default
    explicit = gv.check_gradients(g, {"x": x}, wrt=["x", "running_mean", "running_var"])
    assert explicit.passed, str(explicit)
    assert set(explicit.variables) == {"x", "running_mean", "running_var"}


def test_a_plain_gradient_step_is_deterministic_and_changes_nothing():
    g, y, x = bn_graph()
    before = g.value("running_mean")
    first = g.calculate_gradients({"x": x}, ["gamma"])["gamma"]
    assert np.array_equal(first, g.calculate_gradients({"x": x}, ["gamma"])["gamma"])
    np.testing.assert_array_equal(g.value("running_mean"), before)


def test_training_with_one_value_per_channel_is_refused_like_torch():
    g, _, _ = bn_graph((1, 3))
    with pytest.raises(gv.ShapeError, match=r"batch_norm 'bn': .*more than 1 value per channel .* \(1, 3\)"):
        GradientStep(g)({"x": np.ones((1, 3))})


def test_gamma_and_beta_may_be_none_and_running_statistics_may_be_constants():
    g = gv.Graph()
    x = g.placeholder("x", (4, 3))
    y = g.nn.batch_norm(x, None, None, np.zeros(3), np.ones(3))
    assert not g.state_updates                       # constants are used as given, never updated
    values = np.random.default_rng(2).normal(size=(4, 3))
    np.testing.assert_allclose(g.output({"x": values}, [y])[y.name], values / np.sqrt(1 + 1e-5), rtol=1e-12)


# --- fit -------------------------------------------------------------------------------------------

def fit_model(r):
    g = gv.Graph("fitted")
    x = g.placeholder("x", (None, 4))
    labels = g.placeholder("y", (None,), "int64")
    w = g.var("w", r.normal(size=(4, 3)) * 0.5)
    mean = g.var("mean", np.zeros(3), trainable=False)
    var = g.var("var", np.ones(3), trainable=False)
    h = g.nn.batch_norm(x @ w, g.var("gamma", np.ones(3)), g.var("beta", np.zeros(3)), mean, var, name="bn")
    g.set_loss(g.loss.softmax_cross_entropy(h, labels))
    return g, h


def test_fit_moves_the_running_statistics_and_g_output_uses_them_afterwards():
    r = np.random.default_rng(5)
    g, h = fit_model(r)
    features = r.normal(loc=2.0, scale=3.0, size=(64, 4))
    labels = r.integers(0, 3, 64)
    dataset = data.ArrayDataSet({"x": features}, {"y": labels}) >> data.Batch(16)
    g.fit(dataset, epochs=2, config=gv.TrainingConfig(gv.SGD(0.05, weight_decay=0.1), ["x"], ["y"]))
    mean, var = g.value("mean"), g.value("var")
    assert np.all(np.abs(mean) > 0.05) and not np.allclose(var, 1.0)
    # 8 steps of momentum 0.1 from (0, 1): the running mean approaches the batch means' trend.
    linear = features @ g.value("w")
    np.testing.assert_allclose(mean, (1 - 0.9 ** 8) * linear.mean(axis=0), rtol=0.5)
    expected = (linear - mean) / np.sqrt(var + 1e-5) * g.value("gamma") + g.value("beta")
    np.testing.assert_allclose(g.output({"x": features}, [h])["bn"], expected, rtol=1e-10)
    evaluation = g.evaluate(data.ArrayDataSet({"x": features}, {"y": labels}) >> data.Batch(64), "bn", "y")
    assert 0.0 <= evaluation.accuracy <= 1.0
    np.testing.assert_array_equal(g.value("mean"), mean)     # evaluation changes no state


def test_fit_does_not_commit_the_state_of_a_step_whose_loss_is_not_finite():
    r = np.random.default_rng(6)
    g, _ = fit_model(r)
    features = r.normal(size=(8, 4))
    features[3, 0] = np.nan
    dataset = data.ArrayDataSet({"x": features}, {"y": np.zeros(8, np.int64)}) >> data.Batch(8)
    with pytest.raises(gv.TrainingError):
        g.fit(dataset, epochs=1, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]))
    np.testing.assert_array_equal(g.value("mean"), np.zeros(3))


def test_updaters_and_training_config_skip_or_refuse_non_trainable_variables():
    g = gv.Graph()
    frozen = g.var("frozen", np.ones(3), trainable=False)
    trained = g.var("trained", np.ones(3))
    g.set_loss(g.math.sum(frozen * trained))
    assert not g.is_trainable("frozen") and g.is_trainable("trained")
    gv.SGD(0.5, weight_decay=0.1).step(g, {"frozen": np.ones(3), "trained": np.ones(3)})
    np.testing.assert_array_equal(g.value("frozen"), np.ones(3))
    assert not np.array_equal(g.value("trained"), np.ones(3))
    assert gv.TrainingConfig(gv.SGD(0.1), []).trainable_names(g) == ["trained"]
    with pytest.raises(gv.GraphviewError, match="'frozen' was made with trainable=False"):
        gv.TrainingConfig(gv.SGD(0.1), [], trainable=["frozen"]).trainable_names(g)
    with pytest.raises(gv.GraphviewError, match="trainable must be True or False, not 'no'"):
        g.var("other", np.ones(2), trainable="no")
    report = gv.check_gradients(g, {})
    assert set(report.variables) == {"trained"}
    assert re.search(r"\nfrozen +VARIABLE \(not trained\) ", g.summary())
    assert re.search(r"\ntrained +VARIABLE ", g.summary())


# --- layer_norm ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape, axis, dtype", [((4, 6), -1, np.float64), ((2, 3, 4), (1, 2), np.float64),
                                                ((3, 5), 1, np.float32)])
def test_layer_norm_against_torch_values_and_gradients(shape, axis, dtype):
    r = np.random.default_rng(7)
    axes = (axis,) if isinstance(axis, int) else axis
    normalized = tuple(shape[a] for a in axes)
    g = gv.Graph()
    x = g.placeholder("x", shape, dtype)
    gamma = g.var("gamma", r.uniform(0.5, 1.5, normalized).astype(dtype))
    beta = g.var("beta", r.normal(size=normalized).astype(dtype))
    y = g.nn.layer_norm(x, gamma, beta, axis=axis, eps=1e-5)
    weights = r.normal(size=shape).astype(dtype)
    g.set_loss(g.math.sum(y * g.constant("weights", weights)))
    values = r.normal(size=shape).astype(dtype)
    tx = torch.tensor(values, requires_grad=True)
    tg, tb = torch.tensor(g.value("gamma"), requires_grad=True), torch.tensor(g.value("beta"), requires_grad=True)
    ty = F.layer_norm(tx, normalized, tg, tb, eps=1e-5)
    (ty * torch.tensor(weights)).sum().backward()
    tolerance = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(g.output({"x": values}, [y])[y.name], ty.detach().numpy(), **tolerance)
    mine = g.calculate_gradients({"x": values}, ["x", "gamma", "beta"])
    for name, tensor in (("x", tx), ("gamma", tg), ("beta", tb)):
        np.testing.assert_allclose(mine[name], tensor.grad.numpy(), **tolerance)


@pytest.mark.parametrize("axis", [0, 1, (0, 2), (2, 0)])
def test_layer_norm_over_any_axes_against_finite_differences(axis):
    r = np.random.default_rng(8)
    shape = (3, 4, 2)
    axes = tuple(sorted(a % 3 for a in ((axis,) if isinstance(axis, int) else axis)))
    g = gv.Graph()
    x = g.var("x", r.normal(size=shape))
    gamma = g.var("gamma", r.uniform(0.5, 1.5, tuple(shape[a] for a in axes)))
    beta = g.var("beta", r.normal(size=tuple(shape[a] for a in axes)))
    y = g.nn.layer_norm(x, gamma, beta, axis=axis)
    g.set_loss(g.math.sum(y * g.constant("weights", r.normal(size=shape))))
    broadcast = [shape[a] if a in axes else 1 for a in range(3)]
    normalized = (g.output({}, [y])[y.name] - g.value("beta").reshape(broadcast)) / g.value("gamma").reshape(broadcast)
    np.testing.assert_allclose(np.mean(normalized, axis=axes), 0, atol=1e-12)
    np.testing.assert_allclose(np.var(normalized, axis=axes), 1, rtol=1e-2)   # var / (var + eps)
    report = gv.check_gradients(g, {})
    assert report.passed, str(report)


def test_layer_norm_takes_dims_and_a_strided_input():
    feature = gv.Dim("feature", 5)
    g = gv.Graph()
    x = g.placeholder("x", (None, 5), dims=[gv.batch_dim, feature])
    y = g.nn.layer_norm(x, None, None, axis=feature)
    values = np.random.default_rng(9).normal(size=(8, 5))[::2]
    expected = (values - values.mean(1, keepdims=True)) / np.sqrt(values.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(g.output({"x": values}, [y])[y.name], expected, rtol=1e-12, atol=1e-12)


# --- errors when built ---------------------------------------------------------------------------

def test_wrong_shapes_axes_eps_and_momentum_are_refused_when_built():
    g = gv.Graph()
    x = g.placeholder("x", (4, 3, 2))
    ok = g.var("ok", np.ones(3))
    wrong = g.var("wrong", np.ones(2))
    mean = g.var("mean", np.zeros(3), trainable=False)
    var = g.var("var", np.ones(3), trainable=False)
    with pytest.raises(gv.ShapeError, match=r"batch_norm \(x \(4, 3, 2\) float64, wrong \(2,\) .*: gamma has shape \(2,\), but batch_norm needs \(3,\)"):
        g.nn.batch_norm(x, wrong, ok, mean, var)
    with pytest.raises(gv.ShapeError, match=r"running_var has shape \(2,\)"):
        g.nn.batch_norm(x, ok, ok, mean, g.var("short", np.ones(2), trainable=False))
    with pytest.raises(gv.ShapeError, match="axis 3 is out of range for input 0"):
        g.nn.batch_norm(x, ok, ok, mean, var, axis=3)
    with pytest.raises(gv.OpArgumentError, match="batch_norm: attribute 'eps': 0.0 is not greater than 0"):
        g.nn.batch_norm(x, ok, ok, mean, var, eps=0)
    with pytest.raises(gv.OpArgumentError, match=r"batch_norm: attribute 'momentum': 1.5 is not in \[0.0, 1.0\]"):
        g.nn.batch_norm(x, ok, ok, mean, var, momentum=1.5)
    with pytest.raises(gv.GraphviewError, match="running_mean 'ok' is a trainable VARIABLE"):
        g.nn.batch_norm(x, ok, ok, ok, var)
    g.nn.batch_norm(x, ok, ok, mean, var)
    with pytest.raises(gv.GraphviewError, match="'mean' is already updated by"):
        g.nn.batch_norm(x, ok, ok, mean, var)
    with pytest.raises(gv.ShapeError, match=r"layer_norm .*: gamma has shape \(3,\), but layer_norm over axes \(1, 2\)"):
        g.nn.layer_norm(x, ok, ok, axis=(1, 2))
    with pytest.raises(gv.ShapeError, match="axis -4 is out of range"):
        g.nn.layer_norm(x, g.var("g2", np.ones(2)), g.var("b2", np.ones(2)), axis=-4)
    with pytest.raises(gv.OpArgumentError, match="layer_norm: attribute 'eps': -1.0 is not greater than 0"):
        g.nn.layer_norm(x, g.var("g3", np.ones(2)), g.var("b3", np.ones(2)), eps=-1.0)


# --- graph files ---------------------------------------------------------------------------------

def test_the_flag_state_updates_and_ops_survive_save_and_load(tmp_path):
    g, y, x = bn_graph((6, 3, 2))
    layer = g.nn.layer_norm(y, g.var("lg", np.ones(2)), g.var("lb", np.zeros(2)), name="ln")
    path = tmp_path / "bn.gvz"
    g.save(path)
    loaded = gv.load(path)
    assert loaded.non_trainable == {"running_mean", "running_var"}
    assert loaded.state_updates == g.state_updates
    assert loaded.summary() == g.summary()
    np.testing.assert_array_equal(loaded.output({"x": x}, ["ln"])["ln"], g.output({"x": x}, [layer])["ln"])
    GradientStep(loaded)({"x": x})
    GradientStep(g)({"x": x})
    np.testing.assert_array_equal(loaded.value("running_var"), g.value("running_var"))
    with zipfile.ZipFile(path) as archive:
        document = json.loads(archive.read("graph.json"))
    # Old readers accept exactly these node fields and ignore unknown top-level keys.
    assert all(set(node) <= NODE_FIELDS for node in document["nodes"])
    assert document["non_trainable"] == ["running_mean", "running_var"]


def test_a_bad_state_update_in_a_file_is_refused(tmp_path):
    g, _, _ = bn_graph((6, 3))
    path = tmp_path / "bn.gvz"
    g.save(path)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["graph.json"])
    document["state_updates"] = [["gamma", "bn_update_running_mean"]]
    members["graph.json"] = json.dumps(document).encode()
    broken = tmp_path / "broken.gvz"
    with zipfile.ZipFile(broken, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(gv.GraphFileError, match="add_state_update: 'gamma' is a trainable VARIABLE"):
        gv.load(broken)


def test_a_graph_file_written_before_the_flag_loads_with_every_variable_trainable():
    graph, placeholders = gv.serialization.read(OLD_FILE)
    assert not graph.non_trainable and not graph.state_updates
    assert [n.name for n in graph.nodes() if graph.is_trainable(n.name)] == ["w", "b"]
    report = gv.check_gradients(graph, placeholders)
    assert report.passed and set(report.variables) == {"w", "b"}


# --- dims with lengths: batch statistics over the valid frames only -------------------------------

def _bn_seq_graph(momentum=1.0, seed=0):
    r = np.random.default_rng(seed)
    time, feat = gv.Dim("time"), gv.Dim("feat", 2)
    g = gv.Graph("bn-lengths")
    x = g.placeholder("x", dims=(gv.batch_dim, time, feat), lengths={time: "n"})
    gamma = g.var("gamma", r.uniform(0.5, 1.5, 2))
    beta = g.var("beta", r.normal(size=2))
    mean = g.var("running_mean", np.zeros(2), trainable=False)
    var = g.var("running_var", np.ones(2), trainable=False)
    y = g.nn.batch_norm(x, gamma, beta, mean, var, axis=-1, momentum=momentum, name="bn")
    weights = g.constant("weights", r.normal(size=(2, 4, 2)))
    g.set_loss(g.math.sum(g.math.sum(y * weights, axis=time)))   # masked by n: padding gets no gradient
    return g, y, time


def _valid_rows(x, n):
    return np.concatenate([x[b, :n[b]] for b in range(len(n))])


def test_batch_norm_over_a_dim_with_lengths_takes_statistics_over_the_valid_frames():
    g, y, _ = _bn_seq_graph()
    X = np.random.default_rng(5).normal(size=(2, 4, 2))
    X[1, 1:] = 100.0
    n = np.array([4, 1])
    valid = _valid_rows(X, n)
    GradientStep(g)({"x": X, "n": n})
    np.testing.assert_allclose(g.value("running_mean"), valid.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(g.value("running_var"), valid.var(axis=0, ddof=1), rtol=1e-12)


def test_masked_batch_norm_values_and_gradients_match_torch_on_the_valid_frames():
    g, y, _ = _bn_seq_graph(momentum=0.1)
    X = np.random.default_rng(6).normal(size=(2, 4, 2))
    X[1, 2:] = np.nan                      # padding may hold anything
    n = np.array([4, 2])
    valid = _valid_rows(X, n)
    tx = torch.tensor(valid, requires_grad=True)
    gamma = torch.tensor(g.value("gamma"), requires_grad=True)
    beta = torch.tensor(g.value("beta"), requires_grad=True)
    ty = F.batch_norm(tx, torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64), gamma, beta,
                      training=True)
    weights = _valid_rows(g.value("weights"), n)
    (ty * torch.tensor(weights)).sum().backward()
    with runstate.training(0):
        out = g.output({"x": X, "n": n}, [y])["bn"]
        grads = g.calculate_gradients({"x": X, "n": n}, ["x", "gamma", "beta"])
    np.testing.assert_allclose(_valid_rows(out, n), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert (out[1, 2:] == 0).all()                     # the output is 0 at the padding
    np.testing.assert_allclose(_valid_rows(grads["x"], n), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert (grads["x"][1, 2:] == 0).all()
    np.testing.assert_allclose(grads["gamma"], gamma.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(grads["beta"], beta.grad.numpy(), rtol=1e-10)


def test_masked_batch_norm_passes_gradient_checks_saves_and_unmasked_opts_out(tmp_path):
    g, y, time = _bn_seq_graph()
    X = np.random.default_rng(7).normal(size=(2, 4, 2))
    n = np.array([4, 2])
    assert len(y.node.inputs) == 6                     # x, gamma, beta, the statistics, the mask of time
    with runstate.training(3):
        report = gv.check_gradients(g, {"x": X, "n": n}, wrt=["x", "gamma", "beta"])
        assert report.passed, str(report)
    report = gv.check_gradients(g, {"x": X, "n": n}, wrt=["x", "gamma", "beta", "running_mean", "running_var"])
    assert report.passed, str(report)
    g.save(tmp_path / "bn")
    loaded = gv.load(tmp_path / "bn")
    np.testing.assert_allclose(loaded.output({"x": X, "n": n}, ["bn"])["bn"], g.output({"x": X, "n": n}, [y])["bn"])
    GradientStep(loaded)({"x": X, "n": n})
    np.testing.assert_allclose(loaded.value("running_mean"), _valid_rows(X, n).mean(axis=0), rtol=1e-12)
    with gv.unmasked():
        plain = g.nn.batch_norm(g["x"], None, None, g.constant("m0", np.zeros(2)),
                                g.constant("v1", np.ones(2)), axis=-1)
    assert len(plain.node.inputs) == 5


def test_layer_norm_over_a_dim_with_lengths_is_refused():
    g, y, time = _bn_seq_graph()
    with pytest.raises(gv.DimError, match=r"layer_norm over axes \(1, 2\) of 'x': .*time.* has lengths.*unmasked"):
        g.nn.layer_norm(g["x"], None, None, axis=(time, -1))
    assert g.nn.layer_norm(g["x"], None, None, axis=-1).shape == (None, None, 2)   # over the features: fine


def test_a_second_derivative_through_layer_norm_is_refused_not_silently_wrong():
    """The review's gradient penalty: d/dw of |d loss/dx|^2 through layer_norm must not lose terms."""
    rng = np.random.default_rng(0)
    h = gv.Graph()
    x, w = h.var("x", rng.standard_normal((3, 4))), h.var("w", rng.standard_normal((4, 4)))
    h.set_loss(h.math.sum(h.math.square(h.nn.layer_norm(x @ w, None, None)) * h.constant("c", np.arange(4.0))))
    d = h.gradient_graph(["x"])
    d.graph.set_loss(d.graph.math.sum(d.graph.math.square(d.gradients["x"])))
    with pytest.raises(gv.GraphviewError, match="cannot differentiate through layer_norm_grad"):
        d.graph.calculate_gradients({}, ["w"])


def test_batch_norms_whose_names_end_alike_each_get_their_state_updates():
    # ONNX exports name outputs "/<module>/BatchNormalization_output_0": the helpers' names must not collide.
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    for i in range(2):
        stats = [g.var(f"/m{i}/{s}", np.full(3, v), trainable=False) for s, v in (("mean", 0.0), ("var", 1.0))]
        x = g.nn.batch_norm(x, g.var(f"/m{i}/g", np.ones(3)), g.var(f"/m{i}/b", np.zeros(3)), *stats,
                            name=f"/m{i}/BatchNormalization_output_0")
    assert sorted(g.state_updates) == ["/m0/mean", "/m0/var", "/m1/mean", "/m1/var"]
    assert g.state_updates["/m1/var"] == "/m1/BatchNormalization_output_0_update_running_var"
