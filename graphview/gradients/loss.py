"""Gradient rules of the losses (graphview/ops/loss.py), the fused softmax_cross_entropy_grad's included."""
from graphview.ops.loss import one_hot, softmax_cross_entropy_grad
from graphview.ops.math import div, mul, neg, sub
from graphview.ops.nn import softmax
from graphview.ops.reduce import sum as reduce_sum
from graphview.ops.shape import numel
from graphview.registry import defvjp


def _cross_entropy_grad(h, out, logits, labels, g):
    # out = (p - onehot) * s with p = softmax(logits), s = g / n: linear in g, softmax's Jacobian in logits.
    p = softmax(logits, -1)
    count = numel(labels)
    wrt_logits = mul(mul(p, sub(h, reduce_sum(mul(h, p), -1, keepdims=True))), div(g, count))
    wrt_g = div(reduce_sum(mul(h, sub(p, one_hot(labels, logits)))), count)
    return (wrt_logits, None, wrt_g)


def _mean_squared_error(g, out, predictions, targets):
    scaled = mul(sub(predictions, targets), div(mul(g, 2.0), numel(predictions)))
    return (scaled, neg(scaled))


defvjp("softmax_cross_entropy", lambda g, out, logits, labels: (softmax_cross_entropy_grad(logits, labels, g), None))
defvjp(softmax_cross_entropy_grad, _cross_entropy_grad)
defvjp("mean_squared_error", _mean_squared_error)
