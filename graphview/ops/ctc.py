"""Connectionist temporal classification loss (``g.loss.ctc``), PyTorch's ctc_loss semantics.

``ctc`` is one op over the log-space forward recursion of kernels/ctc.py (float64 whatever the input's
dtype); its gradient is the dedicated backward kernel ``ctc_grad`` (alpha and beta again), registered
in graphview/gradients/ctc.py. Labels and lengths are checked by a small kernel before the recursion
reads them. The lengths may be given as the Dims that carry them (ADR 0014, ADR 0022).
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.dims import Dim, DimError
from graphview.errors import ExecutionError, OpArgumentError, ShapeError
from graphview.layouts import table
from graphview.ops.reduction_losses import REDUCTION
from graphview.ops.shape import contiguous
from graphview.registry import defop, graph_of, public
from graphview.shapes import format_shape
from graphview.testing import Sample, strided, transposed
from graphview.variable import Variable
from graphview_kernels import ctc as kernels

ATTRS = {"blank": attributes.Int(minimum=0), "reduction": REDUCTION, "zero_infinity": attributes.Bool()}


# --- shapes, dtypes and the run-time checks ------------------------------------------------------

def _check_shapes(op, log_probs, labels, input_lengths, label_lengths, blank):
    if len(log_probs) != 3:
        raise ShapeError(f"{op}: log_probs must be (T, N, C) (frames, batch, classes), not {format_shape(log_probs)}")
    if len(labels) != 2:
        raise ShapeError(f"{op}: labels must be padded (N, S) (batch, longest label sequence), not "
                         f"{format_shape(labels)}")
    batch = [("log_probs", log_probs[1]), ("labels", labels[0])]
    for name, lengths in (("input_lengths", input_lengths), ("label_lengths", label_lengths)):
        if len(lengths) != 1:
            raise ShapeError(f"{op}: {name} must be (N,), one length per sequence, not {format_shape(lengths)}")
        batch.append((name, lengths[0]))
    known = [(name, size) for name, size in batch if size is not None]
    if any(size != known[0][1] for _, size in known):
        raise ShapeError(f"{op}: the batch sizes differ: " + ", ".join(f"{name} {size}" for name, size in known)
                         + " (log_probs' axis 1, the others' axis 0)")
    if log_probs[2] is not None and blank >= log_probs[2]:
        raise OpArgumentError(f"{op}: blank {blank} is not a class of log_probs {format_shape(log_probs)} "
                              f"(valid: 0..{log_probs[2] - 1})")


def _ctc_shape(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", zero_infinity=False):
    _check_shapes("ctc", log_probs, labels, input_lengths, label_lengths, blank)
    return (log_probs[1],) if reduction == "none" else ()


def _ctc_dtype(log_probs, labels, input_lengths, label_lengths, **attrs):
    for name, dtype in (("labels", labels), ("input_lengths", input_lengths), ("label_lengths", label_lengths)):
        dtypes.check_category("ctc", name, dtype, dtypes.INTS)
    return log_probs


def _batch_dims(in_dims, in_shapes, attrs, out_shape):
    """A "none" loss has one entry per sequence: the batch dim of log_probs (axis 1) or of the others."""
    if not out_shape:
        return ()
    known = [in_dims[0][1]] + [dims[0] for dims in in_dims[1:]]
    return (next((d for d in known if d is not None), None),)


def checked(op, log_probs, labels, input_lengths, label_lengths, blank):
    """labels, input_lengths and label_lengths as C-contiguous int64, after refusing any entry the
    recursion would read out of bounds or that PyTorch's semantics exclude."""
    frames, _, classes = log_probs.shape
    if blank >= classes:
        raise ExecutionError(f"{op}: blank {blank} is not a class of log_probs {format_shape(log_probs.shape)} "
                             f"(valid: 0..{classes - 1})")
    _check_shapes(op, log_probs.shape, labels.shape, input_lengths.shape, label_lengths.shape, blank)
    labels = np.ascontiguousarray(labels, np.int64)
    input_lengths = np.ascontiguousarray(input_lengths, np.int64)
    label_lengths = np.ascontiguousarray(label_lengths, np.int64)
    what, n, s = kernels.first_bad_entry(labels, input_lengths, label_lengths, frames, classes, blank)
    if what == kernels.BAD_INPUT_LENGTH:
        raise ExecutionError(f"{op}: input_lengths[{n}] is {input_lengths[n]}, outside [0, {frames}] (log_probs "
                             f"{format_shape(log_probs.shape)} has {frames} frames)")
    if what == kernels.BAD_LABEL_LENGTH:
        raise ExecutionError(f"{op}: label_lengths[{n}] is {label_lengths[n]}, outside [0, {labels.shape[1]}] "
                             f"(labels {format_shape(labels.shape)} have {labels.shape[1]} columns)")
    if what == kernels.BAD_LABEL:
        reason = (f"is the blank {blank}" if labels[n, s] == blank else
                  f"is out of range for {classes} classes")
        raise ExecutionError(f"{op}: label {labels[n, s]} at labels[{n}, {s}] {reason} (valid: 0..{classes - 1} "
                             f"except the blank {blank}; label_lengths[{n}] is {label_lengths[n]})")
    return labels, input_lengths, label_lengths


def reduce_losses(losses, label_lengths, reduction, zero_infinity):
    """PyTorch's reductions: "mean" divides each loss by its label length (at least 1), then takes the
    batch mean; zero_infinity first makes infinite losses 0."""
    if zero_infinity:
        losses = np.where(losses == np.inf, 0.0, losses)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return np.sum(losses)
    with np.errstate(invalid="ignore"):
        return np.mean(losses / np.maximum(label_lengths, 1)) if losses.size else np.nan


def sequence_weights(g, label_lengths, reduction):
    """The incoming gradient of each sequence's loss, in float64."""
    batch = label_lengths.shape[0]
    if reduction == "none":
        return np.ascontiguousarray(g, np.float64).reshape(batch)
    weight = float(np.asarray(g).reshape(()))
    if reduction == "sum":
        return np.full(batch, weight)
    return weight / np.maximum(label_lengths, 1) / max(batch, 1)


def _ctc_kernel(log_probs, labels, input_lengths, label_lengths, out, blank=0, reduction="mean", zero_infinity=False):
    labels, input_lengths, label_lengths = checked("ctc", log_probs, labels, input_lengths, label_lengths, blank)
    losses = np.empty(log_probs.shape[1])
    kernels.ctc(contiguous(log_probs), labels, input_lengths, label_lengths, blank, zero_infinity, np.empty(0),
                losses, np.empty((0, 0, 0), log_probs.dtype), False)
    out[...] = reduce_losses(losses, label_lengths, reduction, zero_infinity)


def _ctc_grad_kernel(log_probs, labels, input_lengths, label_lengths, g, out, blank=0, reduction="mean",
                     zero_infinity=False):
    labels, input_lengths, label_lengths = checked("ctc_grad", log_probs, labels, input_lengths, label_lengths, blank)
    weights = sequence_weights(g, label_lengths, reduction)
    grad = out if out.flags.c_contiguous and out.dtype == log_probs.dtype else np.empty(out.shape, log_probs.dtype)
    kernels.ctc(contiguous(log_probs), labels, input_lengths, label_lengths, blank, zero_infinity, weights,
                np.empty(log_probs.shape[1]), grad, True)
    if grad is not out:
        out[...] = grad


# --- the NumPy reference: the same recursion, vectorized over the states -------------------------

def _reference_sequence(log_probs, labels, frames, blank):
    """(loss, gradient (frames, C)) of one sequence, log_probs (T, C) float64."""
    extended = np.full(2 * len(labels) + 1, blank, np.int64)
    extended[1::2] = labels
    states = len(extended)
    gradient = np.zeros((frames, log_probs.shape[1]))
    if frames == 0:
        return (0.0 if states == 1 else np.inf), gradient
    skip = np.zeros(states, bool)
    skip[2:] = (extended[2:] != blank) & (extended[2:] != extended[:-2])
    y = log_probs[:frames, extended]
    alpha = np.full((frames, states), -np.inf)
    alpha[0, :2] = y[0, :2]
    for t in range(1, frames):
        a = alpha[t - 1].copy()
        a[1:] = np.logaddexp(a[1:], alpha[t - 1, :-1])
        a[2:] = np.where(skip[2:], np.logaddexp(a[2:], alpha[t - 1, :-2]), a[2:])
        alpha[t] = a + y[t]
    beta = np.full((frames, states), -np.inf)
    beta[-1, -2:] = 0.0
    for t in range(frames - 2, -1, -1):
        following = beta[t + 1] + y[t + 1]
        b = following.copy()
        b[:-1] = np.logaddexp(b[:-1], following[1:])
        b[:-2] = np.where(skip[2:], np.logaddexp(b[:-2], following[2:]), b[:-2])
        beta[t] = b
    loss = -np.logaddexp.reduce(alpha[-1, -2:])
    if loss == np.inf:
        return loss, np.full_like(gradient, np.nan)
    np.add.at(gradient.T, extended, -np.exp(alpha + beta + loss).T)
    return loss, gradient


def _reference_terms(log_probs, labels, input_lengths, label_lengths, blank):
    x = np.asarray(log_probs, np.float64)
    losses, gradients = np.zeros(x.shape[1]), np.zeros(x.shape)
    for n in range(x.shape[1]):
        frames = int(input_lengths[n])
        losses[n], gradients[:frames, n] = _reference_sequence(
            x[:, n], np.asarray(labels)[n, :int(label_lengths[n])], frames, blank)
    return losses, gradients


def _ctc_reference(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", zero_infinity=False):
    with np.errstate(invalid="ignore", divide="ignore"):
        losses, _ = _reference_terms(log_probs, labels, input_lengths, label_lengths, blank)
    value = reduce_losses(losses, np.asarray(label_lengths), reduction, zero_infinity)
    return np.asarray(value).astype(log_probs.dtype)


def _ctc_grad_reference(log_probs, labels, input_lengths, label_lengths, g, blank=0, reduction="mean",
                        zero_infinity=False):
    with np.errstate(invalid="ignore", divide="ignore"):
        losses, gradients = _reference_terms(log_probs, labels, input_lengths, label_lengths, blank)
        weights = sequence_weights(g, np.asarray(label_lengths, np.int64), reduction)
        if zero_infinity:
            weights = np.where(losses == np.inf, 0.0, weights)
            gradients = np.where((losses == np.inf)[None, :, None], 0.0, gradients)
        return (gradients * weights[None, :, None]).astype(log_probs.dtype)


# --- samples: repeated labels, impossible alignments, lengths 0 and 1, strided inputs ------------

def _log_probs(r, shape, dtype=np.float64):
    x = r.normal(size=shape)
    return (x - np.log(np.exp(x).sum(axis=-1, keepdims=True))).astype(dtype)


def _ctc_samples():
    r = np.random.default_rng(2201)
    labels = np.array([[1, 2, 2], [3, 3, 1], [4, 0, 0], [2, 0, 0]])      # repeats need a blank between them
    input_lengths, label_lengths = np.array([6, 5, 3, 2]), np.array([3, 3, 1, 0])
    result = []
    for dtype in (np.float64, np.float32):
        for reduction in ("mean", "sum", "none"):
            result.append(Sample((_log_probs(r, (6, 4, 5), dtype), labels, input_lengths, label_lengths),
                                 {"reduction": reduction}, label=f"{reduction} {np.dtype(dtype).name}",
                                 constant_inputs=(1, 2, 3)))
    short = np.array([6, 3, 3, 2])                        # [3, 3, 1] needs 4 frames: an infinite loss
    just = np.array([4, 4, 1, 0])                         # exactly the frames each needs
    result += [
        Sample((_log_probs(r, (6, 4, 5)), labels, short, label_lengths), {"reduction": "mean", "zero_infinity": True},
               label="impossible, zero_infinity", constant_inputs=(1, 2, 3)),
        Sample((_log_probs(r, (6, 4, 5)), labels, short, label_lengths), {"reduction": "none"},
               label="impossible (inf)", constant_inputs=(1, 2, 3), gradcheck=False),
        Sample((_log_probs(r, (6, 4, 5)), labels, just, label_lengths), {"reduction": "sum"},
               label="just enough frames", constant_inputs=(1, 2, 3)),
        Sample((_log_probs(r, (3, 4, 5)), labels, np.array([0, 1, 1, 0]), np.array([0, 1, 0, 1])),
               {"reduction": "none", "zero_infinity": True}, label="lengths 0 and 1", constant_inputs=(1, 2, 3)),
        Sample((_log_probs(r, (5, 2, 4)), np.array([[0, 0, 2], [1, 2, 9]], np.int32), np.array([5, 4], np.int32),
                np.array([3, 2], np.int32)), {"blank": 3, "reduction": "mean"}, label="blank 3, int32",
               constant_inputs=(1, 2, 3)),
        Sample((transposed(_log_probs(r, (5, 3, 4))), np.array([[1, 2], [3, 3], [2, 0]]), np.array([5, 5, 2]),
                np.array([2, 2, 1])), {"reduction": "sum"}, label="transposed", constant_inputs=(1, 2, 3)),
        Sample((strided(_log_probs(r, (4, 2, 3))), np.array([[1, 2], [2, 0]]), np.array([4, 3]), np.array([2, 1])),
               {"reduction": "none"}, label="strided", constant_inputs=(1, 2, 3)),
        Sample((np.zeros((0, 2, 3)), np.zeros((2, 1), np.int64), np.array([0, 0]), np.array([0, 0])),
               {"reduction": "mean"}, label="no frames", constant_inputs=(1, 2, 3)),
        Sample((np.zeros((3, 0, 3)), np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)),
               {"reduction": "sum"}, label="no sequences", constant_inputs=(1, 2, 3))]
    return result


def _ctc_grad_samples():
    r = np.random.default_rng(2202)
    result = []
    for sample in _ctc_samples():
        log_probs = sample.inputs[0]
        shape = (log_probs.shape[1],) if sample.attrs["reduction"] == "none" else ()
        g = np.asarray(r.normal(size=shape), log_probs.dtype)
        result.append(Sample(sample.inputs + (g,), sample.attrs, label=sample.label, constant_inputs=(1, 2, 3)))
    return result


_ctc = defop(
    "ctc", shape=_ctc_shape, dtype=_ctc_dtype, kernel=_ctc_kernel, promote_inputs=(0,), accepts=dtypes.FLOATS,
    samples=_ctc_samples, reference=_ctc_reference, family="loss", attrs=ATTRS, dims=_batch_dims,
    doc="-log p(labels | log_probs) per sequence by the forward recursion in log space (PyTorch's ctc_loss: "
        "log_probs (T, N, C), padded labels (N, S)), reduced; inf where the labels need more frames than the "
        "input has (0 with zero_infinity). The gradient is a dedicated backward kernel (ctc_grad).")


def _ctc_grad_shape(log_probs, labels, input_lengths, label_lengths, g, blank=0, reduction="mean",
                    zero_infinity=False):
    expected = _ctc_shape(log_probs, labels, input_lengths, label_lengths, blank, reduction)
    if len(g) != len(expected) or any(a is not None and b is not None and a != b for a, b in zip(g, expected)):
        raise ShapeError(f"ctc_grad: the incoming gradient {format_shape(g)} does not have ctc's output shape "
                         f"{format_shape(expected)}")
    return log_probs


def _ctc_grad_dtype(log_probs, labels, input_lengths, label_lengths, g, **attrs):
    dtypes.check_category("ctc_grad", "g", g, dtypes.FLOATS)
    return _ctc_dtype(log_probs, labels, input_lengths, label_lengths)


ctc_grad = defop(
    "ctc_grad", shape=_ctc_grad_shape, dtype=_ctc_grad_dtype, kernel=_ctc_grad_kernel, promote_inputs=(0,),
    accepts=dtypes.FLOATS, samples=_ctc_grad_samples, reference=_ctc_grad_reference,
    no_gradient="ctc's gradient is a dedicated backward kernel without a rule of its own: no second derivatives",
    family="loss", attrs=ATTRS, dims=lambda in_dims, in_shapes, attrs, out_shape: in_dims[0],
    doc="ctc's dedicated backward kernel: the forward and backward recursions again, minus the posterior of "
        "each class at each valid frame times g (scaled by the reduction); 0 past the input lengths. Not "
        "differentiable: a second derivative of ctc would need a recursion of its own.")


# --- the public function: lengths as arrays, variables or the Dims that carry them ---------------

def _lengths(graph, value, x, axis, what, owner):
    """value, or the lengths of the dim ``value`` when it is a gv.Dim (checked to be x's axis ``axis``)."""
    if isinstance(value, (list, tuple)):
        return np.asarray(value, np.int64)
    if not isinstance(value, Dim):
        return value
    dim = value
    if isinstance(x, Variable):
        dims = table.dims_of(x)
        try:
            found = table.axis_of(x, value, f"ctc {what}")
        except DimError:
            if dims[axis] is not None:
                raise
            found = axis
        if found != axis:
            raise DimError(f"ctc: {what}={value!r} is axis {found} of {owner} {x.name!r}, not axis {axis}; "
                           "log_probs must be (T, N, C) and labels (N, S) (gv.rearrange puts the axes in that order)")
        dim = dims[axis] if dims[axis] is not None else value
    lengths = table.lengths_of(graph, dim)
    if lengths is None:
        raise DimError(f"ctc: {what}={value!r} has no lengths in graph {graph.name!r}; give the lengths, or "
                       "declare them (g.placeholder(..., dims=..., lengths={dim: 'name'}))")
    return lengths


@public("loss")
def ctc(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean", zero_infinity=False, *,
        name=None):
    """PyTorch's ctc_loss: log_probs (T, N, C) (log-softmax outputs), labels (N, S) padded, input_lengths and
    label_lengths (N,) ints or the gv.Dims of log_probs' time axis and labels' axis 1 that carry them.
    "mean" divides each loss by its label length, then averages over the batch."""
    graph = graph_of((log_probs, labels, input_lengths, label_lengths), "ctc")
    input_lengths = _lengths(graph, input_lengths, log_probs, 0, "input_lengths", "log_probs")
    label_lengths = _lengths(graph, label_lengths, labels, 1, "label_lengths", "labels")
    return _ctc(log_probs, labels, input_lengths, label_lengths, name=name, blank=blank, reduction=reduction,
                zero_infinity=zero_infinity)
