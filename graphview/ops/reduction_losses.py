"""Losses with PyTorch's ``reduction="mean" | "sum" | "none"``: binary cross-entropy with logits, Huber, L1
and the negative log-likelihood of integer labels (``g.loss.*``).

Each is one op over a kernel in kernels/losses.py that sums in float64; ``"none"`` gives one loss per
element (per label for nll). Over a dim with lengths they are built masked (their ``Masked`` specs
at the end): the mean and the sum cover the valid entries only. Gradient rules:
graphview/gradients/reduction_losses.py.
"""

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ExecutionError, OpArgumentError, ShapeError
from graphview.layouts import table
from graphview.masked_form import Masked
from graphview.ops.masked import masked_mean, masked_sum, sequence_mask
from graphview.ops.math import cast, div, ne, where
from graphview.ops.reduce import sum as reduce_sum
from graphview.registry import defmasked, defop, public
from graphview.shapes import format_shape
from graphview.testing import Sample, transposed
from graphview.ops.shape import contiguous
from graphview_kernels import losses as kernels

REDUCTIONS = {"none": kernels.NONE, "sum": kernels.SUM, "mean": kernels.MEAN}
REDUCTION = attributes.OneOf(("mean", "sum", "none"))   # PyTorch's reduction argument


def _same_shapes(op, first, second, names):
    if len(first) != len(second) or any(a is not None and b is not None and a != b for a, b in zip(first, second)):
        raise ShapeError(f"{op}: {names[0]} {format_shape(first)} and {names[1]} {format_shape(second)} must have "
                         "the same shape")


def _reduced(shape, reduction):
    return tuple(shape) if reduction == "none" else ()


def _elementwise_dims(in_dims, in_shapes, attrs, out_shape):
    """A "none" loss keeps the dims of the first input that has some; a reduced one is a scalar."""
    if not out_shape:
        return ()
    for dims in in_dims:
        if len(dims) == len(out_shape) and any(d is not None for d in dims):
            return tuple(dims)
    return None


def _pair_samples(attrs=None, targets=None):
    def samples():
        r = np.random.default_rng(163)
        result = []
        for dtype in (np.float64, np.float32):
            name = np.dtype(dtype).name
            for reduction in ("mean", "sum", "none"):
                b = targets(r, (4, 3)) if targets else r.normal(size=(4, 3))
                result.append(Sample((r.normal(size=(4, 3)).astype(dtype), b.astype(dtype)),
                                     {**(attrs or {}), "reduction": reduction}, label=f"{reduction} {name}"))
        b = targets(r, (4, 3)) if targets else r.normal(size=(4, 3))
        result += [Sample((transposed(r.normal(size=(4, 3)) * 3), b), {**(attrs or {}), "reduction": "mean"},
                          label="transposed"),
                   Sample((np.asarray(2.5), np.asarray(0.25)), dict(attrs or {}), label="rank 0"),
                   Sample((np.zeros((0, 3)), np.zeros((0, 3))), {**(attrs or {}), "reduction": "sum"}, label="empty sum"),
                   Sample((np.zeros((0, 3)), np.zeros((0, 3))), {**(attrs or {}), "reduction": "none"}, label="empty none"),
                   Sample((np.zeros((0, 3)), np.zeros((0, 3))), {**(attrs or {}), "reduction": "mean"},
                          label="empty mean (nan)", gradcheck=False)]
        return result
    return samples


def _reduce_reference(function):
    def reference(a, b, reduction="mean", **params):
        with np.errstate(over="ignore", invalid="ignore"):
            each = function(np.asarray(a, np.float64), np.asarray(b, np.float64), **params)
            value = each if reduction == "none" else each.sum() if reduction == "sum" else (
                each.mean() if each.size else np.nan)
        return np.asarray(value).astype(np.result_type(a, b))
    return reference


def _pair_kernel(kernel, parameter=None):
    def launch(a, b, out, reduction="mean", **params):
        value = float(params[parameter]) if parameter else 0.0
        # 1-D views: one compiled signature per dtype whatever the rank and reduction (0-d out when reduced).
        kernel(contiguous(a).ravel(), contiguous(b).ravel(), value, out.reshape(-1), REDUCTIONS[reduction])
    return launch


# --- binary cross-entropy with logits, Huber, L1 -------------------------------------------------

def _bce_shape(logits, targets, reduction="mean"):
    _same_shapes("binary_cross_entropy_with_logits", logits, targets, ("logits", "targets"))
    return _reduced(logits, reduction)


def _huber_shape(predictions, targets, delta=1.0, reduction="mean"):
    if delta <= 0:
        raise OpArgumentError(f"huber: delta must be positive (PyTorch refuses the others), not {delta}")
    _same_shapes("huber", predictions, targets, ("predictions", "targets"))
    return _reduced(predictions, reduction)


def _l1_shape(predictions, targets, reduction="mean"):
    _same_shapes("l1", predictions, targets, ("predictions", "targets"))
    return _reduced(predictions, reduction)


def _bce_reference(x, t):
    return np.maximum(x, 0.0) - x * t + np.log1p(np.exp(-np.abs(x)))


def _huber_reference(p, t, delta=1.0):
    d = np.abs(p - t)
    return np.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))


_REDUCTION = {"reduction": REDUCTION}

_bce = defop(
    "binary_cross_entropy_with_logits", shape=_bce_shape, kernel=_pair_kernel(kernels.bce_with_logits),
    promote="float", accepts=dtypes.NUMERIC, samples=_pair_samples(targets=lambda r, shape: r.random(shape)),
    reference=_reduce_reference(_bce_reference), family="loss", attrs=_REDUCTION, dims=_elementwise_dims,
    doc="max(x, 0) - x * t + log1p(exp(-|x|)) per element (never overflows), reduced by reduction.")
_huber = defop(
    "huber", shape=_huber_shape, kernel=_pair_kernel(kernels.huber, "delta"), promote="float",
    accepts=dtypes.NUMERIC, samples=_pair_samples({"delta": 0.7}), reference=_reduce_reference(_huber_reference),
    family="loss", attrs={"delta": attributes.Float(minimum=0.0, finite=True), **_REDUCTION}, dims=_elementwise_dims,
    doc="0.5 d^2 where |d| <= delta, else delta (|d| - 0.5 delta), d = predictions - targets, reduced.")
_l1 = defop(
    "l1", shape=_l1_shape, kernel=_pair_kernel(kernels.l1), promote="float", accepts=dtypes.NUMERIC,
    samples=_pair_samples(), reference=_reduce_reference(lambda p, t: np.abs(p - t)), family="loss",
    attrs=_REDUCTION, dims=_elementwise_dims, doc="|predictions - targets|, reduced by reduction.")


@public("loss")
def binary_cross_entropy_with_logits(logits, targets, reduction="mean", *, name=None):
    """PyTorch's binary_cross_entropy_with_logits: targets in [0, 1], logits unbounded (stable for any)."""
    return _bce(logits, targets, name=name, reduction=reduction)


@public("loss")
def huber(predictions, targets, delta=1.0, reduction="mean", *, name=None):
    """PyTorch's huber_loss: quadratic within delta of the target, linear beyond."""
    return _huber(predictions, targets, name=name, delta=delta, reduction=reduction)


@public("loss")
def l1(predictions, targets, reduction="mean", *, name=None):
    """PyTorch's l1_loss: |predictions - targets|."""
    return _l1(predictions, targets, name=name, reduction=reduction)


# --- negative log-likelihood ---------------------------------------------------------------------

def _nll_shape(log_probs, labels, reduction="mean", ignore_index=-100):
    if len(log_probs) == 1:
        expected = ()
    elif len(log_probs) >= 2:
        expected = (log_probs[0],) + tuple(log_probs[2:])
    else:
        raise ShapeError("nll: log_probs must be (C,), (N, C) or (N, C, d...), not a scalar")
    _same_shapes("nll", tuple(labels), expected, ("labels", "log_probs without the class axis 1 (expected)"))
    return _reduced(labels, reduction)


def _nll_dtype(log_probs, labels, **attrs):
    dtypes.check_category("nll", "labels", labels, dtypes.INTS)
    return log_probs


def _as_three_axes(log_probs):
    """(N, C, K) and (N, K) views of log_probs and of the labels' shape (a 1-D log_probs is one row)."""
    if log_probs.ndim == 1:
        return contiguous(log_probs).reshape(1, -1, 1)
    n, c = log_probs.shape[:2]
    return contiguous(log_probs).reshape(n, c, int(np.prod(log_probs.shape[2:], dtype=np.int64)))


def checked_labels(op, labels, classes, ignore_index):
    """The labels as (N, K) int64, after refusing any outside [0, classes) other than ignore_index."""
    flat = np.asarray(contiguous(labels).reshape(-1), np.int64)
    bad = kernels.first_bad_label(flat, classes, ignore_index)
    if bad >= 0:
        position = tuple(int(p) for p in np.unravel_index(bad, labels.shape)) if labels.ndim else ()
        raise ExecutionError(f"{op}: label {int(flat[bad])} at position {position} is out of range for {classes} "
                             f"classes (valid: 0..{classes - 1}, or ignore_index {ignore_index})")
    return flat


def _nll_kernel(log_probs, labels, out, reduction="mean", ignore_index=-100):
    x3 = _as_three_axes(log_probs)
    flat = checked_labels("nll", labels, x3.shape[1], ignore_index)
    target = out.reshape(x3.shape[0], x3.shape[2]) if reduction == "none" else out.reshape(1, 1)
    kernels.nll(x3, flat.reshape(x3.shape[0], x3.shape[2]), ignore_index, target, REDUCTIONS[reduction])


def _nll_reference(log_probs, labels, reduction="mean", ignore_index=-100):
    x = np.asarray(log_probs, np.float64)
    if x.ndim == 1:
        x, labels = x[None], np.asarray(labels)[None]
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0).astype(np.int64)
    each = np.where(valid, -np.take_along_axis(x, safe[:, None], axis=1)[:, 0], 0.0)
    if np.ndim(log_probs) == 1:
        each = each[0]
    value = each if reduction == "none" else each.sum() if reduction == "sum" else (
        each.sum() / valid.sum() if valid.sum() else np.nan)
    return np.asarray(value).astype(log_probs.dtype)


def _nll_samples():
    r = np.random.default_rng(164)
    result = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        for reduction in ("mean", "sum", "none"):
            result.append(Sample((r.normal(size=(4, 5)).astype(dtype), r.integers(0, 5, 4)), {"reduction": reduction},
                                 label=f"(N, C) {reduction} {name}", constant_inputs=(1,)))
    labels = r.integers(0, 3, (2, 4, 2)).astype(np.int32)
    labels[0, 1, 0] = labels[1, 3, 1] = -100
    result += [
        Sample((r.normal(size=(2, 3, 4, 2)), labels), {"reduction": "mean"}, label="(N, C, d1, d2), ignored, int32",
               constant_inputs=(1,)),
        Sample((r.normal(size=(2, 3, 4, 2)), labels), {"reduction": "none"}, label="(N, C, d1, d2) none",
               constant_inputs=(1,)),
        Sample((transposed(r.normal(size=(3, 4))), np.array([0, 2, 3])), {"ignore_index": 2},
               label="transposed, ignore_index 2", constant_inputs=(1,)),
        Sample((r.normal(size=(4,)), np.asarray(3)), {"reduction": "sum"}, label="(C,)", constant_inputs=(1,)),
        Sample((np.zeros((0, 3)), np.zeros((0,), np.int64)), {"reduction": "sum"}, label="no rows",
               constant_inputs=(1,)),
        Sample((r.normal(size=(2, 3)), np.array([-100, -100])), {"reduction": "mean"},
               label="all ignored (nan)", constant_inputs=(1,), gradcheck=False)]
    return result


_NLL_ATTRS = {"reduction": REDUCTION, "ignore_index": attributes.Int()}

_nll = defop(
    "nll", shape=_nll_shape, dtype=_nll_dtype, kernel=_nll_kernel, promote="float", promote_inputs=(0,),
    accepts=dtypes.NUMERIC, samples=_nll_samples, reference=_nll_reference, family="loss", attrs=_NLL_ATTRS,
    dims=lambda in_dims, in_shapes, attrs, out_shape: tuple(in_dims[1]) if out_shape else (),
    doc="-log_probs[n, labels[n, d...], d...] with the class axis 1 (PyTorch's nll_loss), reduced; labels equal "
        "to ignore_index give 0 and leave the mean's count. Labels are checked before the kernel runs; the "
        "gradient is a kernel (nll_grad).")


@public("loss")
def nll(log_probs, labels, reduction="mean", ignore_index=-100, *, name=None):
    """PyTorch's nll_loss: log_probs (N, C) or (N, C, d...) with the classes on axis 1, integer labels
    (N,) or (N, d...); labels equal to ignore_index count for nothing."""
    return _nll(log_probs, labels, name=name, reduction=reduction, ignore_index=ignore_index)


# --- the gradient of nll for log_probs: a scatter of -g (an op its rule builds) -------------------

def _nll_grad_shape(log_probs, labels, g, reduction="mean", ignore_index=-100):
    expected = _nll_shape(log_probs, labels, reduction, ignore_index)
    _same_shapes("nll_grad", tuple(g), expected, ("the incoming gradient", "nll's output"))
    return log_probs


def _nll_grad_kernel(log_probs, labels, g, out, reduction="mean", ignore_index=-100):
    x3 = _as_three_axes(out)
    n, k = x3.shape[0], x3.shape[2]
    flat = checked_labels("nll_grad", labels, x3.shape[1], ignore_index)
    weights = contiguous(g).reshape(n, k) if reduction == "none" else np.asarray(g).reshape(1, 1)
    kernels.nll_grad(flat.reshape(n, k), weights, ignore_index, x3, REDUCTIONS[reduction])


def _nll_grad_reference(log_probs, labels, g, reduction="mean", ignore_index=-100):
    x = np.zeros(log_probs.shape if log_probs.ndim > 1 else (1,) + log_probs.shape, np.float64)
    lab = np.asarray(labels).reshape((x.shape[0],) + x.shape[2:])
    valid = lab != ignore_index
    if reduction == "none":
        weights = np.asarray(g, np.float64).reshape(lab.shape)
    else:
        weights = np.full(lab.shape, float(g))
    if reduction == "mean":
        weights = weights / valid.sum() if valid.sum() else weights * np.nan
    safe = np.where(valid, lab, 0).astype(np.int64)
    np.put_along_axis(x, safe[:, None], np.where(valid, -weights, 0.0)[:, None], axis=1)
    return x.reshape(log_probs.shape).astype(log_probs.dtype)


def _nll_grad_samples():
    r = np.random.default_rng(165)
    result = []
    for sample in _nll_samples():
        log_probs, labels = sample.inputs
        shape = _nll_shape(log_probs.shape, np.shape(labels), **sample.attrs)
        g = np.asarray(r.normal(size=shape), log_probs.dtype)
        result.append(Sample((log_probs, labels, g), sample.attrs, label=sample.label, constant_inputs=(1,),
                             gradcheck=sample.gradcheck))
    return result


nll_grad = defop(
    "nll_grad", shape=_nll_grad_shape, dtype=lambda log_probs, labels, g, **attrs: _nll_dtype(log_probs, labels),
    kernel=_nll_grad_kernel, promote="float", promote_inputs=(0, 2), accepts=dtypes.NUMERIC,
    samples=_nll_grad_samples, reference=_nll_grad_reference, family="loss", attrs=_NLL_ATTRS,
    doc="The gradient of nll for its log_probs: -g at each label (divided by the count of labels that are not "
        "ignore_index for the mean), 0 elsewhere.")


# --- over a dim with lengths: the mean and the sum of the valid entries --------------------------

def _masked_pair(op, parameter=None):
    def build(a, b, lengths, *, name=None, batch_axis=0, time_axis=1, reduction="mean", **params):
        with table.unmasked():
            each = op(a, b, reduction="none", name=name if reduction == "none" else None, **params)
        if reduction == "none":
            return each
        reduce = masked_mean if reduction == "mean" else masked_sum
        return reduce(each, lengths, name=name, axis=None, keepdims=False, batch_axis=batch_axis, time_axis=time_axis)
    build.__name__ = f"masked_{op.definition.name}"
    build.__doc__ = f"{op.definition.name} over the valid entries only (padding is left out of the mean and sum)."
    return build


def masked_nll(log_probs, labels, lengths, *, name=None, batch_axis=0, time_axis=1, reduction="mean",
               ignore_index=-100):
    """nll over the valid positions only: labels at padding are never read (they become ignore_index, so
    they give 0 and leave the mean's count)."""
    valid = sequence_mask(lengths, labels, batch_axis=batch_axis, time_axis=time_axis)
    with table.unmasked():
        safe = where(valid, labels, ignore_index)
        each = _nll(log_probs, safe, reduction="none", ignore_index=ignore_index,
                    name=name if reduction == "none" else None)
        if reduction == "none":
            return each
        total = reduce_sum(each, name=name if reduction == "sum" else None)
        if reduction == "sum":
            return total
        return div(total, reduce_sum(cast(ne(safe, ignore_index), each.dtype)), name=name)


PAIR_PASSES = (("reduction", "mean"),)
defmasked("binary_cross_entropy_with_logits", Masked(_masked_pair(_bce), axes="all", inputs=(0, 1), passes=PAIR_PASSES))
defmasked("huber", Masked(_masked_pair(_huber), axes="all", inputs=(0, 1), passes=PAIR_PASSES + (("delta", 1.0),)))
defmasked("l1", Masked(_masked_pair(_l1), axes="all", inputs=(0, 1), passes=PAIR_PASSES))
defmasked("nll", Masked(masked_nll, axes="all", inputs=(1,), passes=(("reduction", "mean"), ("ignore_index", -100))))
