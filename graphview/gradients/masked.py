"""Gradient rules of the masked ops (graphview/ops/masked.py, graphview/ops/masked_loss.py): the
padding gets a gradient of exactly 0, so nothing read there (NaN included) reaches a gradient."""
from graphview.gradients.reduce import expand_back, softmax_weights
from graphview.ops.masked import (masked_count, masked_log_softmax, masked_logsumexp, masked_max, masked_mean,
                                  masked_min, masked_softmax, masked_sum, sequence_mask)
from graphview.ops.masked_loss import masked_cross_entropy_grad, masked_softmax_cross_entropy
from graphview.ops.math import cast, div, eq, exp, mul, sub, where
from graphview.registry import defvjp


def _sum(g, out, x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
    return (where(sequence_mask(lengths, x, batch_axis=batch_axis, time_axis=time_axis),
                  expand_back(g, x, axis, keepdims), 0.0), None)


def _mean(g, out, x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
    count = masked_count(x, lengths, axis=axis, keepdims=keepdims, batch_axis=batch_axis, time_axis=time_axis)
    return _sum(div(g, count), out, x, lengths, axis, keepdims, batch_axis, time_axis)


def _extreme(g, out, x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
    hits = cast(eq(x, expand_back(out, x, axis, keepdims)), x.dtype)
    ties = masked_sum(hits, lengths, axis=axis, keepdims=keepdims, batch_axis=batch_axis, time_axis=time_axis)
    spread = _sum(div(g, ties), out, x, lengths, axis, keepdims, batch_axis, time_axis)[0]
    return (mul(hits, spread), None)


def _logsumexp(g, out, x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
    mask = sequence_mask(lengths, x, batch_axis=batch_axis, time_axis=time_axis)
    # softmax over the valid entries, shifted twice so that out's rounding cancels (see gradients/reduce.py).
    top = expand_back(out, x, axis, keepdims)
    shifted = sub(where(mask, x, 0.0), top)
    correction = masked_logsumexp(shifted, lengths, axis=axis, keepdims=True, batch_axis=batch_axis,
                                  time_axis=time_axis)
    weights = softmax_weights(shifted, correction, top)
    return (where(mask, mul(expand_back(g, x, axis, keepdims), weights), 0.0), None)


def _softmax(g, out, x, lengths, batch_axis=0, time_axis=1):
    total = masked_sum(mul(g, out), lengths, axis=time_axis, keepdims=True, batch_axis=batch_axis,
                       time_axis=time_axis)
    return (mul(out, sub(g, total)), None)


def _log_softmax(g, out, x, lengths, batch_axis=0, time_axis=1):
    mask = sequence_mask(lengths, x, batch_axis=batch_axis, time_axis=time_axis)
    total = masked_sum(g, lengths, axis=time_axis, keepdims=True, batch_axis=batch_axis, time_axis=time_axis)
    return (where(mask, sub(g, mul(exp(out), total)), 0.0), None)


def _softmax_cross_entropy(g, out, logits, labels, lengths, batch_axis=0, time_axis=1):
    return (mul(masked_cross_entropy_grad(logits, labels, lengths, batch_axis=batch_axis, time_axis=time_axis), g),
            None, None)


defvjp(masked_sum, _sum)
defvjp(masked_mean, _mean)
defvjp(masked_max, _extreme)
defvjp(masked_min, _extreme)
defvjp(masked_logsumexp, _logsumexp)
defvjp(masked_softmax, _softmax)
defvjp(masked_log_softmax, _log_softmax)
defvjp(masked_softmax_cross_entropy, _softmax_cross_entropy)
