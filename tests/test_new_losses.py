"""g.loss.binary_cross_entropy_with_logits, huber, l1 and nll against torch.nn.functional (float32 and float64,
each reduction), their gradients, labels checked before the kernel, masking over a dim with lengths, and
graph files."""
import numpy as np
import pytest

import graphview as gv

torch = pytest.importorskip("torch")
F = torch.nn.functional
R = np.random.default_rng(166)
REDUCTIONS = ["mean", "sum", "none"]

# (graphview loss, its keyword attrs, torch's, the second input's values)
PAIRS = [
    ("binary_cross_entropy_with_logits", {}, lambda a, b, **k: F.binary_cross_entropy_with_logits(a, b, **k),
     lambda shape: R.random(shape)),
    ("huber", {}, lambda a, b, **k: F.huber_loss(a, b, **k), lambda shape: R.normal(size=shape)),
    ("huber", {"delta": 0.4}, lambda a, b, **k: F.huber_loss(a, b, delta=0.4, **k), lambda shape: R.normal(size=shape)),
    ("l1", {}, lambda a, b, **k: F.l1_loss(a, b, **k), lambda shape: R.normal(size=shape)),
]
PAIR_IDS = [f"{name}-{attrs}" for name, attrs, _, _ in PAIRS]


def _tolerance(dtype):
    return dict(rtol=2e-6, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)


def _torch_pair(fn, a, b, reduction, weights):
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out = fn(ta, tb, reduction=reduction)
    (out * torch.tensor(weights)).sum().backward()
    return out.detach().numpy(), ta.grad.numpy(), tb.grad.numpy()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name, attrs, fn, second", PAIRS, ids=PAIR_IDS)
def test_pair_losses_match_pytorch_in_value_and_both_gradients(name, attrs, fn, second, reduction, dtype):
    a = (R.normal(size=(4, 5)) * 3).astype(dtype)
    a[0, :3] = [60.0, -60.0, 0.0]                     # far out: a naive log(1 + exp(x)) overflows in float32
    b = second((4, 5)).astype(dtype)
    if name != "binary_cross_entropy_with_logits":
        b[1, :2] = a[1, :2] + [attrs.get("delta", 1.0), 0.0]   # |d| == delta and d == 0: the kinks
    weights = np.asarray(R.normal(size=(4, 5)) if reduction == "none" else 1.7, dtype)
    g = gv.Graph()
    va, vb = g.var("a", a), g.var("b", b)
    out = getattr(g.loss, name)(va, vb, reduction=reduction, **attrs)
    g.set_loss(g.math.sum(g.math.mul(out, weights)))
    value = g.output({}, [out])[out.name]
    grads = g.calculate_gradients({}, ["a", "b"])
    expected, grad_a, grad_b = _torch_pair(fn, a, b, reduction, weights)
    assert value.dtype == np.dtype(dtype) and value.shape == expected.shape
    np.testing.assert_allclose(value, expected, **_tolerance(dtype))
    np.testing.assert_allclose(grads["a"], grad_a, **_tolerance(dtype))
    np.testing.assert_allclose(grads["b"], grad_b, **_tolerance(dtype))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name, attrs, fn, second", PAIRS, ids=PAIR_IDS)
def test_pair_losses_and_their_second_derivatives_pass_gradient_checks(name, attrs, fn, second, reduction):
    g = gv.Graph()
    a = g.var("a", np.array([[-2.3, -0.7, 0.4], [0.9, 1.7, -1.3]]))
    b = g.var("b", np.array([[0.2, 0.9, 0.5], [0.1, 0.35, 0.7]]))
    g.set_loss(g.math.sum(g.math.tanh(getattr(g.loss, name)(a, b, reduction=reduction, **attrs))))
    assert gv.check_gradients(g, {}).passed
    first = g.gradient_graph(["a", "b"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["a"])))
    report = gv.check_gradients(first.graph, {}, wrt=["a", "b"])
    assert report.passed, str(report)


def _nll_graph(log_probs, labels, reduction, ignore_index=-100, weights=None):
    g = gv.Graph()
    x = g.var("x", log_probs)
    y = g.constant("labels", labels)
    out = g.loss.nll(x, y, reduction=reduction, ignore_index=ignore_index)
    g.set_loss(g.math.sum(g.math.mul(out, weights)) if weights is not None else out)
    return g, out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5, 4), (3, 4, 6), (2, 3, 4, 2), (4,)], ids=["N,C", "N,C,d", "N,C,d1,d2", "C"])
def test_nll_matches_pytorch_with_the_class_axis_1(shape, reduction, dtype):
    log_probs = np.log(R.dirichlet(np.ones(shape[1] if len(shape) > 1 else shape[0]),
                                   size=(shape[0],) + shape[2:] if len(shape) > 1 else ()))
    log_probs = np.moveaxis(log_probs, -1, 1 if len(shape) > 1 else 0).astype(dtype)
    classes = log_probs.shape[1] if len(shape) > 1 else shape[0]
    labels = R.integers(0, classes, (shape[0],) + shape[2:] if len(shape) > 1 else ())
    if labels.size > 2:
        labels.reshape(-1)[1] = -100                                   # PyTorch's default ignore_index
    weights = np.asarray(R.normal(size=labels.shape) if reduction == "none" else 0.6, dtype)
    g, out = _nll_graph(log_probs, labels, reduction, weights=weights)
    value = g.output({}, [out])[out.name]
    gradient = g.calculate_gradients({}, ["x"])["x"]
    t = torch.tensor(np.ascontiguousarray(log_probs), requires_grad=True)
    expected = F.nll_loss(t, torch.tensor(labels), reduction=reduction)
    (expected * torch.tensor(weights)).sum().backward()
    assert value.dtype == np.dtype(dtype) and value.shape == tuple(expected.shape)
    np.testing.assert_allclose(value, expected.detach().numpy(), **_tolerance(dtype))
    np.testing.assert_allclose(gradient, t.grad.numpy(), **_tolerance(dtype))


def test_nll_ignore_index_and_all_ignored_give_pytorchs_values():
    log_probs = np.log(R.dirichlet(np.ones(3), size=4))
    labels = np.array([1, 2, 0, 2])
    g, out = _nll_graph(log_probs, labels, "mean", ignore_index=2)
    expected = F.nll_loss(torch.tensor(log_probs), torch.tensor(labels), ignore_index=2)
    np.testing.assert_allclose(g.output({}, [out])[out.name], expected.numpy(), rtol=1e-14)
    g, out = _nll_graph(log_probs, np.full(4, -100), "mean")
    assert np.isnan(g.output({}, [out])[out.name])


def test_nll_and_its_second_derivative_pass_gradient_checks():
    g = gv.Graph()
    w = g.var("w", R.normal(size=(3, 4)))
    x = g.constant("x", R.normal(size=(5, 3)))
    g.set_loss(g.loss.nll(g.nn.log_softmax(g.math.tanh(x @ w), 1), g.constant("labels", np.array([0, 3, -100, 2, 1]))))
    assert gv.check_gradients(g, {}).passed
    first = g.gradient_graph(["w"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["w"])))
    report = gv.check_gradients(first.graph, {}, wrt=["w"])
    assert report.passed, str(report)


@pytest.mark.parametrize("bad", [4, -1, -101])
def test_out_of_range_labels_are_refused_before_the_kernel_runs(bad):
    g = gv.Graph()
    x = g.var("x", R.normal(size=(3, 4)))
    labels = g.placeholder("labels", (3,), "int64")
    g.set_loss(g.loss.nll(x, labels, name="loss"))
    feeds = {"labels": np.array([0, 2, bad])}
    with pytest.raises(gv.ExecutionError, match=f"nll: label {bad} at position \\(2,\\) is out of range for 4 "
                                                "classes \\(valid: 0..3, or ignore_index -100\\)"):
        g.output(feeds, ["loss"])
    with pytest.raises(gv.ExecutionError, match=f"nll_grad: label {bad}"):
        g.calculate_gradients(feeds, ["x"])


def test_bad_shapes_reductions_and_dtypes_are_refused_when_built():
    g = gv.Graph()
    a, b = g.var("a", np.zeros((3, 4))), g.var("b", np.zeros((4, 3)))
    with pytest.raises(gv.ShapeError, match="l1: predictions \\(3, 4\\) and targets \\(4, 3\\) must have the same"):
        g.loss.l1(a, b)
    with pytest.raises(gv.OpArgumentError, match="reduction.*'average' is not one of 'mean', 'sum', 'none'"):
        g.loss.huber(a, a, reduction="average")
    with pytest.raises(gv.OpArgumentError, match="delta"):
        g.loss.huber(a, a, delta=-1.0)
    with pytest.raises(gv.OpArgumentError, match="huber: delta must be positive"):
        g.loss.huber(a, a, delta=0.0)
    with pytest.raises(gv.ShapeError, match="nll: labels \\(4,\\) and log_probs without the class axis 1"):
        g.loss.nll(a, g.placeholder("labels", (4,), "int64"))
    with pytest.raises(gv.DTypeError, match="nll: input labels has dtype float64"):
        g.loss.nll(a, g.placeholder("float_labels", (3,)))


def _sequences():
    g = gv.Graph()
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    targets = g.placeholder("targets", dims=(gv.batch_dim, time, feature))
    lengths = np.array([4, 1, 3])
    data = R.normal(size=(3, 4, 3))
    goal = R.random((3, 4, 3))
    for b, n in enumerate(lengths):
        data[b, n:] = 1e6                  # padding that would dominate any result reading it
    return g, seq, targets, {"seq": data, "seq_len": lengths, "targets": goal}, lengths


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("name", ["binary_cross_entropy_with_logits", "huber", "l1"])
def test_pair_losses_over_a_dim_with_lengths_cover_the_valid_frames_only(name, reduction):
    g, seq, targets, feeds, lengths = _sequences()
    loss = getattr(g.loss, name)(seq, targets, reduction=reduction)
    assert loss.op == f"masked_{reduction}"
    valid = np.concatenate([np.arange(n) + 4 * b for b, n in enumerate(lengths)])
    a, b = feeds["seq"].reshape(12, 3)[valid], feeds["targets"].reshape(12, 3)[valid]
    expected = getattr(F, {"huber": "huber_loss", "l1": "l1_loss"}.get(name, name))(
        torch.tensor(a), torch.tensor(b), reduction=reduction).numpy()
    np.testing.assert_allclose(g.output(feeds, [loss])[loss.name], expected, rtol=1e-12)
    g.set_loss(loss)
    gradient = g.calculate_gradients(feeds, ["seq"])["seq"]
    assert (gradient[1, 1:] == 0).all() and (gradient[0] != 0).any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_over_a_dim_with_lengths_never_reads_labels_at_padding(reduction):
    g = gv.Graph()
    time, classes = gv.Dim("time"), gv.Dim("classes", 4)
    log_probs = g.placeholder("log_probs", dims=(gv.batch_dim, classes, time), lengths={time: "seq_len"})
    labels = g.placeholder("labels", dims=(gv.batch_dim, time), dtype="int64")
    loss = g.loss.nll(log_probs, labels, reduction=reduction)
    lengths = np.array([3, 1])
    values = np.moveaxis(np.log(R.dirichlet(np.ones(4), size=(2, 3))), -1, 1)
    label_values = np.array([[0, 3, 1], [2, -7, 99]])          # padding labels are out of range: never read
    result = g.output({"log_probs": values, "labels": label_values, "seq_len": lengths}, [loss])[loss.name]
    frames = [(0, 0), (0, 1), (0, 2), (1, 0)]
    picked = [-values[b, label_values[b, t], t] for b, t in frames]
    expected = {"mean": np.mean(picked), "sum": np.sum(picked)}.get(reduction)
    if reduction == "none":
        np.testing.assert_allclose(result, [picked[:3], [picked[3], 0.0, 0.0]], rtol=1e-14)
    else:
        np.testing.assert_allclose(result, expected, rtol=1e-14)


def test_graph_files_save_and_load_every_loss(tmp_path):
    g = gv.Graph("losses")
    a, b = g.placeholder("a", (None, 3)), g.placeholder("b", (None, 3))
    labels = g.placeholder("labels", (None,), "int64")
    names = [g.loss.binary_cross_entropy_with_logits(a, b, reduction="sum", name="bce").name,
             g.loss.huber(a, b, delta=0.3, reduction="none", name="huber").name,
             g.loss.l1(a, b, name="l1").name,
             g.loss.nll(g.nn.log_softmax(a, 1), labels, ignore_index=1, name="nll").name]
    path = tmp_path / "losses.gvz"
    g.save(path)
    loaded = gv.load(path)
    feeds = {"a": R.normal(size=(4, 3)), "b": R.random((4, 3)), "labels": np.array([0, 1, 2, 2])}
    before, after = g.output(feeds, names), loaded.output(feeds, names)
    for key in names:
        np.testing.assert_array_equal(before[key], after[key])
    assert loaded.node("huber").attributes["delta"] == 0.3 and loaded.node("nll").attributes["ignore_index"] == 1
