"""Softmax cross-entropy over padded sequences: the mean over valid positions only.

Beside :mod:`graphview.ops.masked` (which imports this module for gv.masked_softmax_cross_entropy);
both take their helpers from :mod:`graphview.ops.masked_common`. Labels at padding are never read,
so they may hold anything.
"""
import math

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ExecutionError, ShapeError
from graphview.ops.masked_common import canonical, check_axes, check_lengths_dtype, checked_lengths, mask_array, place
from graphview.registry import defop
from graphview.shapes import format_shape
from graphview.testing import Sample
from graphview_kernels import masked as kernels
from graphview_kernels.elementwise import copy as copy_kernel


# --- softmax cross-entropy over padded sequences ------------------------------------------------

def _entropy_shape(logits, labels, lengths, batch_axis=0, time_axis=1):
    if len(logits) < 3:
        raise ShapeError(f"logits {format_shape(logits)} need a batch, a time and a class axis")
    b, t = check_axes(logits[:-1], lengths, batch_axis, time_axis)
    if len(labels) != len(logits) - 1 or any(x is not None and y is not None and x != y
                                             for x, y in zip(labels, logits[:-1])):
        raise ShapeError(f"labels {format_shape(labels)} must have the logits' shape {format_shape(logits)} "
                         "without the class axis")
    return ()


def _entropy_dtype(logits, labels, lengths, **attrs):
    dtypes.check_category("masked_softmax_cross_entropy", "labels", labels, dtypes.INTS)
    check_lengths_dtype(lengths)
    return logits


def _entropy_run(op, logits, labels, lengths, batch_axis, time_axis, want_grad):
    rank = logits.ndim
    b, t = batch_axis % (rank - 1), time_axis % (rank - 1)
    lengths = checked_lengths(op, lengths, labels, b, t)
    moved, order = canonical(logits, b, t, (rank - 1,))
    moved_labels, _ = canonical(labels, b, t)
    classes = logits.shape[-1]
    shape4 = (logits.shape[b], logits.shape[t], math.prod(moved.shape[2:-1]), classes)
    logits4, labels3 = moved.reshape(shape4), moved_labels.reshape(shape4[:3]).astype(np.int64)
    bad = kernels.first_bad_label(classes, labels3, lengths)
    if bad >= 0:
        raise ExecutionError(f"{op}: label {int(labels3.reshape(-1)[bad])} is out of range for {classes} classes "
                             f"(valid: 0..{classes - 1}); labels at padding are not checked")
    loss = np.zeros(1, np.float64)
    grad = np.empty(logits4.shape if want_grad else (0, 0, 0, 0), np.float64)
    kernels.masked_cross_entropy(logits4, labels3, lengths, loss, grad, want_grad)
    return loss, grad.reshape(moved.shape) if want_grad else None, order


def _entropy_kernel(logits, labels, lengths, out, batch_axis=0, time_axis=1):
    loss, _, _ = _entropy_run("masked_softmax_cross_entropy", logits, labels, lengths, batch_axis, time_axis, False)
    copy_kernel(loss.reshape(()).astype(out.dtype), out)


def _entropy_grad_kernel(logits, labels, lengths, out, batch_axis=0, time_axis=1):
    _, grad, order = _entropy_run("masked_cross_entropy_grad", logits, labels, lengths, batch_axis, time_axis, True)
    place(grad, order, out, list(range(logits.ndim)))


def _entropy_reference(logits, labels, lengths, batch_axis=0, time_axis=1, grad=False):
    mask = mask_array(labels, lengths, batch_axis, time_axis)
    values = logits.astype(np.float64)
    shifted = values - values.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    safe = np.where(mask, labels, 0).astype(np.int64)
    picked = np.take_along_axis(log_probabilities, safe[..., None], axis=-1)[..., 0]
    count = mask.sum()
    if grad:
        one_hot = np.zeros_like(values)
        np.put_along_axis(one_hot, safe[..., None], 1.0, axis=-1)
        return np.where(mask[..., None], (np.exp(log_probabilities) - one_hot) / count, 0.0).astype(logits.dtype)
    return np.asarray(-np.sum(np.where(mask, picked, 0.0)) / count if count else np.nan, logits.dtype)


def _entropy_samples():
    r = np.random.default_rng(92)
    labels = r.integers(0, 4, (3, 5))
    labels[0, 3:] = labels[1, 1:] = -1          # padding labels are never read
    return [Sample((r.normal(size=(3, 5, 4)), labels, np.array([3, 1, 5])), label="batch-major",
                   constant_inputs=(1, 2)),
            Sample((r.normal(size=(3, 5, 4)).astype(np.float32), labels, np.array([3, 1, 5])), label="float32",
                   constant_inputs=(1, 2)),
            Sample((r.normal(size=(5, 3, 2, 4)), r.integers(0, 4, (5, 3, 2)).astype(np.int32), np.array([5, 2, 4])),
                   {"batch_axis": 1, "time_axis": 0}, label="time-major, extra axis", constant_inputs=(1, 2))]


# The batch and time axes index the logits without their class axis (the labels' axes).
LOGIT_AXES = {"batch_axis": attributes.Axis(extra=-1), "time_axis": attributes.Axis(extra=-1)}

masked_softmax_cross_entropy = defop(
    "masked_softmax_cross_entropy", shape=_entropy_shape, dtype=_entropy_dtype, kernel=_entropy_kernel,
    promote="float", promote_inputs=(0,), samples=_entropy_samples, reference=_entropy_reference,
    family="masked", doc="Mean over valid (t < lengths[b]) positions of -log softmax(logits)[label].",
    attrs=LOGIT_AXES)
masked_cross_entropy_grad = defop(
    "masked_cross_entropy_grad", shape=lambda logits, labels, lengths, **attrs: (
        _entropy_shape(logits, labels, lengths, **attrs), logits)[1],
    dtype=_entropy_dtype, kernel=_entropy_grad_kernel, promote="float", promote_inputs=(0,),
    no_gradient="masked_softmax_cross_entropy's gradient is a kernel without a rule of its own: no second derivatives",
    samples=_entropy_samples, reference=lambda *arrays, **attrs: _entropy_reference(*arrays, **attrs, grad=True),
    family="masked", doc="The gradient of masked_softmax_cross_entropy with respect to the logits.",
    attrs=LOGIT_AXES)
