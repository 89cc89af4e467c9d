"""Gradient rules of the losses with a reduction (graphview/ops/reduction_losses.py).

Those of the element-pair losses are built from differentiable ops (second derivatives work); nll's
is the scatter kernel nll_grad, whose own rule (linear in g) is nll again.
"""
from graphview.ops.math import div, maximum, minimum, mul, neg, sign, sub
from graphview.ops.nn import sigmoid
from graphview.ops.reduction_losses import nll, nll_grad
from graphview.ops.shape import numel
from graphview.registry import defvjp


def _scale(g, x, reduction):
    """The incoming gradient per element: g itself ("none", "sum", broadcasting) or g / n ("mean")."""
    return div(g, numel(x)) if reduction == "mean" else g


def _bce(g, out, logits, targets, reduction="mean"):
    scale = _scale(g, logits, reduction)
    return (mul(scale, sub(sigmoid(logits), targets)), neg(mul(scale, logits)))


def _huber(g, out, predictions, targets, delta=1.0, reduction="mean"):
    # The clipped difference (PyTorch: exactly +-delta where |d| == delta, from either side).
    clipped = minimum(maximum(sub(predictions, targets), -delta), delta)
    wrt = mul(_scale(g, predictions, reduction), clipped)
    return (wrt, neg(wrt))


def _l1(g, out, predictions, targets, reduction="mean"):
    wrt = mul(_scale(g, predictions, reduction), sign(sub(predictions, targets)))
    return (wrt, neg(wrt))


def _nll(g, out, log_probs, labels, reduction="mean", ignore_index=-100):
    return (nll_grad(log_probs, labels, g, reduction=reduction, ignore_index=ignore_index), None)


def _nll_grad(h, out, log_probs, labels, g, reduction="mean", ignore_index=-100):
    # out is linear in g: out = -w g at the labels, so d<h, out>/dg = nll(h) with the same reduction.
    return (None, None, nll(h, labels, reduction=reduction, ignore_index=ignore_index))


defvjp("binary_cross_entropy_with_logits", _bce)
defvjp("huber", _huber)
defvjp("l1", _l1)
defvjp("nll", _nll)
defvjp(nll_grad, _nll_grad)
