"""Losses: softmax cross-entropy with integer labels, and mean squared error. Both are means.

Their gradient rules are in graphview/gradients/loss.py.
"""
import numpy as np

from graphview import dtypes
from graphview.errors import ExecutionError, ShapeError
from graphview.registry import defop, public
from graphview.shapes import format_shape
from graphview.testing import Sample, transposed
from graphview.ops.shape import contiguous
from graphview_kernels import nn as kernels


def check_labels(op, labels, classes):
    """Numba does no bounds checking: labels are validated before any kernel reads with them.

    Returns the labels flattened (C order) as int64, ready for the kernels (int32 labels would compile
    every label kernel once more).
    """
    flat = np.asarray(contiguous(labels).reshape(-1), np.int64)
    bad = kernels.first_bad_label(flat, classes)
    if bad >= 0:
        raise ExecutionError(f"{op}: label {flat[bad]} is out of range for {classes} classes "
                             f"(valid: 0..{classes - 1})")
    return flat


def _cross_entropy_shape(logits, labels):
    if len(logits) < 1 or tuple(labels) != tuple(logits[:-1]) and not _compatible(labels, logits[:-1]):
        raise ShapeError(f"labels must have the logits' shape without the class axis: "
                         f"logits {format_shape(logits)}, labels {format_shape(labels)}")
    return ()


def _compatible(a, b):
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _cross_entropy_dtype(logits, labels):
    dtypes.check_category("softmax_cross_entropy", "labels", labels, dtypes.INTS)
    return logits


def _cross_entropy_kernel(logits, labels, out):
    classes = logits.shape[-1]
    flat = check_labels("softmax_cross_entropy", labels, classes)
    kernels.softmax_cross_entropy(contiguous(logits).reshape(-1, classes), flat, out.reshape(1))


def _cross_entropy_reference(logits, labels):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_probabilities, labels[..., None].astype(np.int64), axis=-1)
    return np.asarray(-picked.mean() if picked.size else np.nan, logits.dtype)


def _cross_entropy_samples():
    r = np.random.default_rng(16)
    samples = []
    for dtype in (np.float64, np.float32):
        samples.append(Sample((r.normal(size=(4, 3)).astype(dtype), r.integers(0, 3, 4)), label=np.dtype(dtype).name,
                              constant_inputs=(1,)))
    samples.append(Sample((r.normal(size=(2, 3, 5)), r.integers(0, 5, (2, 3)).astype(np.int32)), label="rank 3, int32",
                          constant_inputs=(1,)))
    samples.append(Sample((transposed(r.normal(size=(3, 4))), r.integers(0, 4, 3)), label="transposed", constant_inputs=(1,)))
    return samples


_softmax_cross_entropy = defop(
    "softmax_cross_entropy", shape=_cross_entropy_shape, kernel=_cross_entropy_kernel, dtype=_cross_entropy_dtype,
    promote="float", promote_inputs=(0,), samples=_cross_entropy_samples,
    reference=_cross_entropy_reference, family="loss",
    doc="Mean over examples of -log softmax(logits)[label]; labels are integer class indices.")


# --- the gradient of softmax_cross_entropy, fused (an op its rule builds) ----------------------

def _cross_entropy_grad_kernel(logits, labels, g, out):
    classes = logits.shape[-1]
    flat = check_labels("softmax_cross_entropy_grad", labels, classes)
    scale = float(g) / flat.size if flat.size else np.nan
    kernels.softmax_cross_entropy_grad(contiguous(logits).reshape(-1, classes), flat, scale, out.reshape(-1, classes))


def _cross_entropy_grad_shape(logits, labels, g):
    _cross_entropy_shape(logits, labels)
    if tuple(g) != ():
        raise ShapeError(f"the incoming gradient of a mean loss is a scalar, not {format_shape(g)}")
    return logits


def _cross_entropy_grad_reference(logits, labels, g):
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    return ((probabilities - _one_hot_reference(labels, logits)) * (g / max(labels.size, 1))).astype(logits.dtype)


def _cross_entropy_grad_samples():
    return [Sample(sample.inputs + (np.asarray(0.7, sample.inputs[0].dtype),), label=sample.label,
                   constant_inputs=(1,)) for sample in _cross_entropy_samples()]


softmax_cross_entropy_grad = defop(
    "softmax_cross_entropy_grad", shape=_cross_entropy_grad_shape, kernel=_cross_entropy_grad_kernel,
    dtype=lambda logits, labels, g: _cross_entropy_dtype(logits, labels),
    promote="float", promote_inputs=(0, 2), samples=_cross_entropy_grad_samples,
    reference=_cross_entropy_grad_reference, family="loss", namespace=None,
    doc="The gradient of softmax_cross_entropy for the incoming scalar g: (softmax(logits) - one_hot) * g / n.")


def _one_hot_kernel(labels, like, out):
    classes = out.shape[-1]
    kernels.one_hot(check_labels("one_hot", labels, classes), out.reshape(-1, classes))


def _one_hot_shape(labels, like):
    if not _compatible(tuple(labels), tuple(like[:-1])):
        raise ShapeError(f"labels {format_shape(labels)} do not match {format_shape(like)} without its last axis")
    return like


def _one_hot_reference(labels, like):
    out = np.zeros(like.shape, like.dtype)
    np.put_along_axis(out, labels[..., None].astype(np.int64), 1, axis=-1)
    return out


one_hot = defop("one_hot", shape=_one_hot_shape, kernel=_one_hot_kernel, dtype=lambda labels, like: like,
                differentiable=False, family="loss", reference=_one_hot_reference,
                samples=lambda: [Sample((np.array([0, 2, 1]), np.zeros((3, 4))), label="int64", constant_inputs=(0, 1)),
                                 Sample((np.array([[1], [0]], np.int32), np.zeros((2, 1, 2), np.float32)), label="int32",
                                        constant_inputs=(0, 1))],
                doc="1 at each label's class along like's last axis, 0 elsewhere, in like's shape and dtype.")


@public("loss")
def softmax_cross_entropy(logits, labels, *, name=None):
    """Mean over examples of -log softmax(logits)[label], with integer labels."""
    return _softmax_cross_entropy(logits, labels, name=name)


def _mse_shape(predictions, targets):
    if not _compatible(tuple(predictions), tuple(targets)):
        raise ShapeError(f"predictions {format_shape(predictions)} and targets {format_shape(targets)} differ")
    return ()


def _mse_kernel(predictions, targets, out):
    kernels.mean_squared_error(contiguous(predictions), contiguous(targets), out.reshape(1))


def _mse_samples():
    r = np.random.default_rng(17)
    return [Sample((r.normal(size=(4, 3)), r.normal(size=(4, 3))), label="float64"),
            Sample((r.normal(size=(5,)).astype(np.float32), r.normal(size=(5,)).astype(np.float32)), label="float32"),
            Sample((transposed(r.normal(size=(3, 4))), r.normal(size=(3, 4))), label="transposed")]


_mean_squared_error = defop(
    "mean_squared_error", shape=_mse_shape, kernel=_mse_kernel, promote="float",
    accepts=dtypes.NUMERIC, samples=_mse_samples, family="loss",
    reference=lambda p, t: np.asarray(np.mean((p - t) ** 2), p.dtype), doc="Mean of (predictions - targets) ** 2.")


@public("loss")
def mean_squared_error(predictions, targets, *, name=None):
    """Mean of (predictions - targets) ** 2 over every element."""
    return _mean_squared_error(predictions, targets, name=name)
