"""Gradient rules of the reductions (graphview/ops/reduce.py)."""
from graphview.layouts import table
from graphview.ops.math import cast, div, eq, exp, mul, sub, where
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


def _logsumexp(g, out, x, axis=None, keepdims=False):
    # The gradient is softmax(x). exp(x - out) alone is off when the entries are large: out is
    # rounded to the precision of its magnitude (at 1e16, to 2). Shifted by out, the entries near
    # the max are exact, and their own logsumexp (about 0, computed exactly) removes out's rounding.
    shifted = sub(x, expand_back(out, x, axis, keepdims))
    with table.unmasked():   # the plain op reduces over padding too; so does its gradient
        weights = exp(sub(shifted, logsumexp(shifted, axis=axis, keepdims=True)))
    return (mul(expand_back(g, x, axis, keepdims), weights),)


defvjp("sum", _sum)
defvjp("mean", _mean)
defvjp("max", _extreme)
defvjp("min", _extreme)
defvjp("prod", _prod)
defvjp("logsumexp", _logsumexp)
