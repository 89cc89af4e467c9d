"""Gradient rules of the activations (graphview/ops/activations.py).

Built from differentiable ops, so second derivatives work. At the kinks they take PyTorch's
choices: leaky_relu's gradient at 0 is alpha, elu's and selu's come from their negative side,
hard_tanh's is 0 at min_val and max_val. Where x is NaN: leaky_relu's is alpha, elu's and selu's their
positive side's (as PyTorch), hard_tanh's 0 (as graphview's relu; PyTorch passes the gradient).
"""
from graphview.ops.activations import SELU_ALPHA, SELU_SCALE
from graphview.ops.math import add, exp, gt, le, lt, minimum, mul, neg, sub, where
from graphview.ops.nn import sigmoid
from graphview.registry import defvjp


def _leaky_relu(g, out, x, alpha=0.01):
    return (where(gt(x, 0.0), g, mul(g, alpha)),)


def _negative_exp(x):
    """exp(min(x, 0)): the negative side's exp(x), finite everywhere (so no inf meets the where's zero)."""
    return exp(minimum(x, 0.0))


def _elu(g, out, x, alpha=1.0):
    # alpha * exp(x) where x <= 0 (not out + alpha, which cancels to 0 below about -37; PyTorch's
    # choice); NaN takes the positive side's 1, as in PyTorch.
    return (where(le(x, 0.0), mul(g, mul(_negative_exp(x), alpha)), g),)


def _selu(g, out, x):
    return (where(le(x, 0.0), mul(g, mul(_negative_exp(x), SELU_SCALE * SELU_ALPHA)), mul(g, SELU_SCALE)),)


def _silu(g, out, x):
    s = sigmoid(x)
    # s * (1 + x * (1 - s))
    return (mul(g, mul(s, add(mul(x, sub(1.0, s)), 1.0))),)


def _hard_tanh(g, out, x, min_val=-1.0, max_val=1.0):
    return (where(gt(x, min_val), where(lt(x, max_val), g, 0.0), 0.0),)


defvjp("leaky_relu", _leaky_relu)
defvjp("elu", _elu)
defvjp("selu", _selu)
defvjp("softplus", lambda g, out, x: (mul(g, sigmoid(x)),))
defvjp("silu", _silu)
defvjp("log_sigmoid", lambda g, out, x: (mul(g, sigmoid(neg(x))),))
defvjp("hard_tanh", _hard_tanh)
