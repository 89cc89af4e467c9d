"""Gradient rules of the reductions (graphview/ops/reduce.py)."""
import math

from graphview.layouts import table
from graphview.ops.math import abs as absolute, cast, div, eq, exp, lt, mul, sub, where
from graphview.ops.reduce import logsumexp, prod, sum as reduce_sum
from graphview.ops.shape import broadcast_like, expand_dims, numel
from graphview.registry import defvjp
from graphview.shapes import normalize_axes


def expand_back(g, x, axis, keepdims):
    """g, of the shape reducing x over axis gives, broadcast back to x's shape (gradients/masked uses it too)."""
    axes = normalize_axes(axis, x.rank)
    if not keepdims and axes and len(axes) < x.rank:    # a scalar broadcasts as it is
        g = expand_dims(g, axes)
    return broadcast_like(g, x)


def _sum(g, out, x, axis=None, keepdims=False):
    return (expand_back(g, x, axis, keepdims),)


def _mean(g, out, x, axis=None, keepdims=False):
    return (div(expand_back(g, x, axis, keepdims), numel(x, axis=axis)),)


def _extreme(g, out, x, axis=None, keepdims=False):
    mask = cast(eq(x, expand_back(out, x, axis, keepdims)), x.dtype)
    ties = expand_back(reduce_sum(mask, axis=axis, keepdims=keepdims), x, axis, keepdims)
    return (div(mul(mask, expand_back(g, x, axis, keepdims)), ties),)


def _prod(g, out, x, axis=None, keepdims=False):
    # d out / d x_i is the product of the other elements. out / x_i gives it only
    # where x_i != 0; at a zero it is the product of the non-zero others when that
    # zero is the only one along the reduced axes, and 0 otherwise.
    zero = eq(x, 0.0)
    nonzero = where(zero, 1.0, x)
    zeros = reduce_sum(cast(zero, x.dtype), axis=axis, keepdims=True)
    others = mul(prod(nonzero, axis=axis, keepdims=True), cast(eq(zeros, 1.0), x.dtype))
    partial = where(zero, expand_back(others, x, axis, True), div(expand_back(out, x, axis, keepdims), nonzero))
    return (mul(expand_back(g, x, axis, keepdims), partial),)


def softmax_weights(shifted, correction, top):
    """exp(shifted - correction): logsumexp's gradient, shifted = x - top with top = out broadcast to
    x's shape and correction = logsumexp(shifted); gradients/masked uses it too.

    exp(x - out) alone is off when the entries are large: out is rounded to the precision of its
    magnitude (at 1e16, to 2). Shifted by out, the entries near the max are exact, and their own
    logsumexp (about 0, computed exactly) removes out's rounding. An infinite out is exact and is
    not corrected: its correction is NaN (inf - inf), which would reach every entry of the row,
    where PyTorch's exp(x - out) gives NaN only at the infinite entries and 0 at the others."""
    return exp(sub(shifted, where(lt(absolute(top), math.inf), correction, 0.0)))


def _logsumexp(g, out, x, axis=None, keepdims=False):
    top = expand_back(out, x, axis, keepdims)
    shifted = sub(x, top)
    with table.unmasked():   # the plain op reduces over padding too; so does its gradient
        weights = softmax_weights(shifted, logsumexp(shifted, axis=axis, keepdims=True), top)
    return (mul(expand_back(g, x, axis, keepdims), weights),)


defvjp("sum", _sum)
defvjp("mean", _mean)
defvjp("max", _extreme)
defvjp("min", _extreme)
defvjp("prod", _prod)
defvjp("logsumexp", _logsumexp)
