"""g.loss.ctc against torch.nn.functional.ctc_loss (float32 and float64, each reduction, zero_infinity both
ways, impossible alignments, lengths 0 and 1, repeated labels), its gradient against torch and finite
differences, the run-time checks of labels and lengths, lengths taken from Dims, and graph files."""
import numpy as np
import pytest

import graphview as gv
from graphview import registry

torch = pytest.importorskip("torch")
F = torch.nn.functional
R = np.random.default_rng(2203)

# Repeated labels that need a blank between them ([1, 1, 2] needs 4 frames), an impossible alignment
# (sequence 1: [3, 3, 1] in 3 frames), lengths 0 and 1 and a label sequence of length 0.
LABELS = np.array([[1, 1, 2], [3, 3, 1], [2, 0, 0], [4, 0, 0], [3, 0, 0], [2, 4, 3], [1, 0, 0]])
INPUT_LENGTHS = np.array([7, 3, 0, 1, 0, 7, 4])
LABEL_LENGTHS = np.array([3, 3, 0, 1, 1, 3, 0])
IMPOSSIBLE = [1, 4]


def _log_softmax(x):
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _tolerance(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-11, atol=1e-13)


def _weights(reduction, batch):
    return np.asarray(R.normal(size=batch) if reduction == "none" else 1.7)


def _torch(log_probs, reduction, zero_infinity, weights, labels=LABELS, input_lengths=INPUT_LENGTHS,
           label_lengths=LABEL_LENGTHS, blank=0, through_log_softmax=False):
    x = torch.tensor(log_probs, requires_grad=True)
    lp = x.log_softmax(2) if through_log_softmax else x
    loss = F.ctc_loss(lp, torch.tensor(labels), torch.tensor(input_lengths), torch.tensor(label_lengths), blank=blank,
                      reduction=reduction, zero_infinity=zero_infinity)
    (loss * torch.tensor(weights, dtype=loss.dtype)).sum().backward()
    return loss.detach().numpy(), x.grad.numpy()


def _graphview(log_probs, reduction, zero_infinity, weights, labels=LABELS, input_lengths=INPUT_LENGTHS,
               label_lengths=LABEL_LENGTHS, blank=0, through_log_softmax=False):
    g = gv.Graph()
    x = g.var("x", log_probs)
    lp = g.nn.log_softmax(x, 2) if through_log_softmax else x
    out = g.loss.ctc(lp, labels, input_lengths, label_lengths, blank=blank, reduction=reduction,
                     zero_infinity=zero_infinity)
    g.set_loss(g.math.sum(g.math.mul(out, weights.astype(log_probs.dtype))))
    return g.output({}, [out])[out.name], g.calculate_gradients({}, ["x"])["x"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ctc_matches_pytorch_in_value_and_in_the_gradient_of_the_logits(reduction, zero_infinity, dtype):
    logits = R.normal(size=(7, len(LABELS), 5)).astype(dtype)
    weights = _weights(reduction, len(LABELS))
    expected, expected_grad = _torch(logits, reduction, zero_infinity, weights, through_log_softmax=True)
    value, grad = _graphview(logits, reduction, zero_infinity, weights, through_log_softmax=True)
    assert value.dtype == np.dtype(dtype) and grad.dtype == np.dtype(dtype) and value.shape == expected.shape
    np.testing.assert_allclose(value, expected, **_tolerance(dtype))
    np.testing.assert_allclose(grad, expected_grad, **_tolerance(dtype))
    if reduction == "none":
        assert np.isinf(value[IMPOSSIBLE]).all() != zero_infinity and value[2] == 0
    if not zero_infinity:      # an infinite loss has a NaN gradient at its valid frames, as in PyTorch
        assert np.isnan(grad[:3, 1]).all() and (grad[3:, 1] == 0).all()


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_gradient_for_log_probs_is_the_derivative_and_differs_from_pytorchs_by_its_softmax_term(
        reduction, zero_infinity):
    # PyTorch returns d loss / d logits (assuming log_probs = log_softmax(logits)) as the gradient of log_probs:
    # the true derivative plus g * exp(log_probs) at the valid frames of each finite loss. graphview returns
    # the true derivative (finite differences agree); through log_softmax the two give the same gradient.
    log_probs = _log_softmax(R.normal(size=(7, len(LABELS), 5)))
    weights = _weights(reduction, len(LABELS))
    expected, torch_grad = _torch(log_probs, reduction, zero_infinity, weights)
    value, grad = _graphview(log_probs, reduction, zero_infinity, weights)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    per_sequence = np.broadcast_to(weights, (len(LABELS),)).astype(float)
    if reduction == "mean":
        per_sequence = per_sequence / np.maximum(LABEL_LENGTHS, 1) / len(LABELS)
    valid = (np.arange(7)[:, None] < INPUT_LENGTHS[None, :]).astype(float)
    if zero_infinity:
        valid[:, IMPOSSIBLE] = 0.0
    softmax_term = np.exp(log_probs) * (valid * per_sequence)[:, :, None]
    np.testing.assert_allclose(grad, torch_grad - softmax_term, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_the_gradient_passes_finite_difference_checks_directly_and_through_log_softmax(reduction, zero_infinity):
    possible = [0, 2, 3, 5, 6] if not zero_infinity else list(range(len(LABELS)))
    g = gv.Graph()
    logits = g.var("logits", R.normal(size=(7, len(possible), 5)))
    log_probs = g.var("log_probs", _log_softmax(R.normal(size=(7, len(possible), 5))))
    args = (LABELS[possible], INPUT_LENGTHS[possible], LABEL_LENGTHS[possible])
    first = g.loss.ctc(g.nn.log_softmax(logits, 2), *args, reduction=reduction, zero_infinity=zero_infinity)
    second = g.loss.ctc(log_probs, *args, reduction=reduction, zero_infinity=zero_infinity)
    g.set_loss(g.math.add(g.math.sum(g.math.tanh(first)), g.math.sum(second)))
    report = gv.check_gradients(g, {})
    assert report.passed, str(report)


def test_repeated_labels_need_a_blank_between_them_and_single_paths_are_exact():
    log_probs = _log_softmax(R.normal(size=(3, 3, 4)))
    labels = np.array([[1, 1], [1, 1], [2, 3]])
    loss = _graphview(log_probs, "none", False, np.ones(3), labels, np.array([3, 2, 2]), np.array([2, 2, 2]))[0]
    # [1, 1] in 3 frames has one path: 1, blank, 1; in 2 frames none; [2, 3] in 2 frames one: 2, 3.
    np.testing.assert_allclose(loss[0], -(log_probs[0, 0, 1] + log_probs[1, 0, 0] + log_probs[2, 0, 1]), rtol=1e-14)
    assert loss[1] == np.inf
    np.testing.assert_allclose(loss[2], -(log_probs[0, 2, 2] + log_probs[1, 2, 3]), rtol=1e-14)


def test_lengths_zero_and_one():
    log_probs = _log_softmax(R.normal(size=(2, 4, 3)))
    labels = np.array([[2], [2], [2], [2]])
    loss = _graphview(log_probs, "none", False, np.ones(4), labels, np.array([0, 1, 1, 0]), np.array([0, 1, 0, 1]))[0]
    np.testing.assert_allclose(loss, [0.0, -log_probs[0, 1, 2], -log_probs[0, 2, 0], np.inf], rtol=1e-14)


def test_a_blank_other_than_zero_and_int32_labels_match_pytorch():
    log_probs = _log_softmax(R.normal(size=(6, 3, 4)))
    labels = np.array([[0, 0, 2], [1, 2, 0], [2, 1, 1]], np.int32)
    lengths = (np.array([6, 5, 6], np.int32), np.array([3, 2, 3], np.int32))
    weights = _weights("mean", 3)
    expected, torch_grad = _torch(log_probs, "mean", False, weights, labels, *lengths, blank=3,
                                  through_log_softmax=True)
    value, grad = _graphview(log_probs, "mean", False, weights, labels, *lengths, blank=3, through_log_softmax=True)
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    np.testing.assert_allclose(grad, torch_grad, rtol=1e-10, atol=1e-13)


def test_a_large_batch_runs_on_threads_and_still_matches_pytorch():
    frames, batch, classes, width = 260, 16, 20, 40
    logits = R.normal(size=(frames, batch, classes))
    labels = R.integers(1, classes, size=(batch, width))
    input_lengths = R.integers(150, frames + 1, size=batch)
    label_lengths = R.integers(0, width + 1, size=batch)
    weights = _weights("sum", batch)
    args = (labels, input_lengths, label_lengths)
    expected, expected_grad = _torch(logits, "sum", True, weights, *args, through_log_softmax=True)
    value, grad = _graphview(logits, "sum", True, weights, *args, through_log_softmax=True)
    np.testing.assert_allclose(value, expected, rtol=1e-10)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-8, atol=1e-12)


def test_log_space_keeps_losses_whose_probability_underflows_finite():
    # p(labels) about exp(-3000): far below the smallest float64, yet the loss and its gradient are exact.
    logits = R.normal(size=(400, 2, 6)) * 8
    labels, lengths = np.array([[1, 2, 3, 4, 5], [5, 5, 5, 1, 1]]), (np.array([400, 300]), np.array([5, 5]))
    weights = _weights("none", 2)
    expected, expected_grad = _torch(logits, "none", False, weights, labels, *lengths, through_log_softmax=True)
    value, grad = _graphview(logits, "none", False, weights, labels, *lengths, through_log_softmax=True)
    assert (expected > 1000).all()
    np.testing.assert_allclose(value, expected, rtol=1e-11)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-8, atol=1e-12)


def test_frames_past_each_input_length_are_never_read_and_get_a_zero_gradient():
    log_probs = _log_softmax(R.normal(size=(5, 2, 4)))
    padded = log_probs.copy()
    padded[3:, 1] = np.nan                        # sequence 1 has 3 frames: the rest is padding
    lengths = ([5, 3], [2, 1])                     # Python lists are taken as int64 arrays
    labels = np.array([[1, 2], [3, 0]])
    weights = _weights("sum", 2)
    value, grad = _graphview(padded, "sum", False, weights, labels, *lengths)
    expected, _ = _graphview(log_probs, "sum", False, weights, labels, *lengths)
    assert value == expected and np.isfinite(grad).all() and (grad[3:, 1] == 0).all()


# --- errors --------------------------------------------------------------------------------------

def _run(labels=LABELS, input_lengths=INPUT_LENGTHS, label_lengths=LABEL_LENGTHS, blank=0, frames=7, classes=5):
    g = gv.Graph()
    x = g.placeholder("x", (None, None, None))
    out = g.loss.ctc(x, g.placeholder("labels", (None, None), "int64"), g.placeholder("il", (None,), "int64"),
                     g.placeholder("ll", (None,), "int64"), blank=blank)
    feeds = {"x": _log_softmax(R.normal(size=(frames, len(labels), classes))), "labels": np.asarray(labels),
             "il": np.asarray(input_lengths), "ll": np.asarray(label_lengths)}
    return g.output(feeds, [out])[out.name]


@pytest.mark.parametrize("change, message", [
    (dict(labels=[[1, 5], [2, 0]]), r"ctc: label 5 at labels\[0, 1\] is out of range for 5 classes"),
    (dict(labels=[[1, 2], [-1, 0]]), r"ctc: label -1 at labels\[1, 0\] is out of range for 5 classes"),
    (dict(labels=[[1, 2], [0, 0]]), r"ctc: label 0 at labels\[1, 0\] is the blank 0"),
    (dict(input_lengths=[7, 8]), r"ctc: input_lengths\[1\] is 8, outside \[0, 7\]"),
    (dict(input_lengths=[-1, 3]), r"ctc: input_lengths\[0\] is -1, outside \[0, 7\]"),
    (dict(label_lengths=[3, 1]), r"ctc: label_lengths\[0\] is 3, outside \[0, 2\]"),
    (dict(label_lengths=[2, -2]), r"ctc: label_lengths\[1\] is -2, outside \[0, 2\]"),
], ids=["label above", "label negative", "label is blank", "input length above T", "input length negative",
        "label length above S", "label length negative"])
def test_bad_labels_and_lengths_are_refused_before_the_recursion_reads_them(change, message):
    args = dict(labels=[[1, 2], [2, 1]], input_lengths=[7, 3], label_lengths=[2, 1])
    args.update(change)
    args["labels"] = np.asarray(args["labels"])
    with pytest.raises(gv.ExecutionError, match=message):
        _run(**args)


def test_a_blank_outside_the_classes_fed_at_run_time_is_refused():
    with pytest.raises(gv.OpArgumentError, match=r"ctc: blank 5 is not a class of log_probs \(7, 2, 5\)"):
        _run(labels=np.array([[1, 2], [2, 1]]), input_lengths=[7, 3], label_lengths=[2, 1], blank=5)


def test_labels_past_each_label_length_are_padding_and_never_read():
    value = _run(labels=[[1, 99], [-7, 0]], input_lengths=[4, 2], label_lengths=[1, 0])
    assert np.isfinite(value)


def test_shapes_dtypes_and_blank_are_checked_when_the_op_is_built():
    g = gv.Graph()
    x = g.placeholder("x", (7, 2, 5))
    labels, lengths = g.placeholder("labels", (2, 3), "int64"), g.placeholder("lengths", (2,), "int64")
    with pytest.raises(gv.ShapeError, match=r"ctc: log_probs must be \(T, N, C\)"):
        g.loss.ctc(g.placeholder("flat", (7, 5)), labels, lengths, lengths)
    with pytest.raises(gv.ShapeError, match=r"ctc: the batch sizes differ: log_probs 2, labels 3"):
        g.loss.ctc(x, g.placeholder("labels3", (3, 3), "int64"), lengths, lengths)
    with pytest.raises(gv.ShapeError, match=r"ctc: input_lengths must be \(N,\)"):
        g.loss.ctc(x, labels, g.placeholder("lengths2", (2, 1), "int64"), lengths)
    with pytest.raises(gv.OpArgumentError, match=r"ctc: blank 5 is not a class of log_probs \(7, 2, 5\)"):
        g.loss.ctc(x, labels, lengths, lengths, blank=5)
    with pytest.raises(gv.DTypeError, match="ctc: input labels has dtype float64"):
        g.loss.ctc(x, g.placeholder("float_labels", (2, 3)), lengths, lengths)
    with pytest.raises(gv.DTypeError, match="ctc: input 0 .* needs a floating point dtype"):
        g.loss.ctc(g.placeholder("ints", (7, 2, 5), "int64"), labels, lengths, lengths)
    with pytest.raises(gv.GraphviewError, match="reduction"):
        g.loss.ctc(x, labels, lengths, lengths, reduction="max")


def test_ctc_grad_is_a_dedicated_kernel_marked_not_differentiable():
    definition = registry.get("ctc_grad")
    assert definition.differentiable is False and "Not differentiable" in definition.doc
    assert registry.get("ctc").differentiable


# --- lengths from Dims, graph files --------------------------------------------------------------

def _dimmed(lengths_given_as_dims=True):
    g = gv.Graph("ctc")
    time, classes, label_dim = gv.Dim("time"), gv.Dim("classes", 5), gv.Dim("label")
    logits = g.placeholder("logits", dims=(gv.batch_dim, time, classes), lengths={time: "in_len"})
    labels = g.placeholder("labels", dims=(gv.batch_dim, label_dim), dtype="int64", lengths={label_dim: "label_len"})
    log_probs = gv.rearrange(g.nn.log_softmax(logits, classes), "b t c -> t b c")
    if lengths_given_as_dims:
        loss = g.loss.ctc(log_probs, labels, time, label_dim, reduction="none", name="loss")
    else:
        loss = g.loss.ctc(log_probs, labels, g["in_len"], g["label_len"], reduction="none", name="loss")
    feeds = {"logits": R.normal(size=(len(LABELS), 7, 5)), "labels": LABELS, "in_len": INPUT_LENGTHS,
             "label_len": LABEL_LENGTHS}
    return g, loss, feeds, (time, label_dim)


def test_the_dims_carrying_the_lengths_stand_in_for_the_length_arrays():
    g, loss, feeds, (time, label_dim) = _dimmed()
    explicit_graph, explicit, _, _ = _dimmed(lengths_given_as_dims=False)
    value = g.output(feeds, [loss])[loss.name]
    np.testing.assert_array_equal(value, explicit_graph.output(feeds, [explicit])[explicit.name])
    expected = F.ctc_loss(torch.tensor(feeds["logits"]).log_softmax(2).transpose(0, 1), torch.tensor(LABELS),
                          torch.tensor(INPUT_LENGTHS), torch.tensor(LABEL_LENGTHS), reduction="none").numpy()
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    assert gv.dims_of(loss) == (gv.batch_dim,)


def test_a_dim_that_is_not_the_right_axis_or_has_no_lengths_is_refused():
    g = gv.Graph()
    time, classes, label_dim = gv.Dim("time"), gv.Dim("classes", 5), gv.Dim("label", 3)
    logits = g.placeholder("logits", dims=(gv.batch_dim, time, classes), lengths={time: "in_len"})
    labels = g.placeholder("labels", dims=(gv.batch_dim, label_dim), dtype="int64")
    log_probs = gv.rearrange(logits, "b t c -> t b c")
    with pytest.raises(gv.DimError, match=r"ctc: input_lengths=.*time.* is axis 1 of log_probs 'logits', not axis 0"):
        g.loss.ctc(logits, labels, time, g["in_len"])
    with pytest.raises(gv.DimError, match=r"ctc: label_lengths=.*label.* has no lengths in graph"):
        g.loss.ctc(log_probs, labels, time, label_dim)
    with pytest.raises(gv.DimError, match=r"is not an axis of 'labels'"):
        g.loss.ctc(log_probs, labels, time, time)


def test_graph_files_save_and_load_ctc_and_its_gradient(tmp_path):
    g, loss, feeds, _ = _dimmed()
    g.set_loss(g.math.sum(loss))
    path = tmp_path / "ctc.gvz"
    g.save(path)
    loaded = gv.load(path)
    before, after = g.output(feeds, ["loss"])["loss"], loaded.output(feeds, ["loss"])["loss"]
    np.testing.assert_array_equal(before, after)
    assert np.isinf(after[IMPOSSIBLE]).all()
    assert loaded.node("loss").op == "ctc" and loaded.node("loss").attributes["reduction"] == "none"
    feeds["in_len"] = np.where(INPUT_LENGTHS < 4, 4, INPUT_LENGTHS)
    feeds["label_len"] = np.minimum(LABEL_LENGTHS, 1)
    np.testing.assert_array_equal(g.calculate_gradients(feeds, ["logits"])["logits"],
                                  loaded.calculate_gradients(feeds, ["logits"])["logits"])


def test_graph_files_keep_blank_and_zero_infinity(tmp_path):
    g = gv.Graph()
    x = g.placeholder("x", (None, None, 4))
    out = g.loss.ctc(x, g.placeholder("labels", (None, 2), "int64"), g.placeholder("il", (None,), "int64"),
                     g.placeholder("ll", (None,), "int64"), blank=3, reduction="sum", zero_infinity=True, name="ctc")
    g.save(tmp_path / "ctc.gvz")
    loaded = gv.load(tmp_path / "ctc.gvz")
    assert dict(loaded.node("ctc").attributes) == {"blank": 3, "reduction": "sum", "zero_infinity": True}
    feeds = {"x": _log_softmax(R.normal(size=(3, 2, 4))), "labels": np.array([[0, 0], [1, 2]]), "il": np.array([3, 2]),
             "ll": np.array([2, 2])}
    np.testing.assert_array_equal(g.output(feeds, [out])["ctc"], loaded.output(feeds, ["ctc"])["ctc"])
