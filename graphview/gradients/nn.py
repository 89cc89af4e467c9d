"""Gradient rules of the neural-network ops (graphview/ops/nn.py)."""
from graphview.ops.math import exp, mul, square, sub
from graphview.ops.nn import dropout_op, gelu, gelu_derivative, relu, sigmoid, step
from graphview.ops.reduce import sum as reduce_sum
from graphview.registry import defvjp

_INV_SQRT_2PI = 0.3989422804014327


def _gelu_second_derivative(x):
    """(2 - x^2) * phi(x), phi the standard normal density: the derivative of gelu_derivative."""
    return mul(sub(2.0, square(x)), mul(exp(mul(square(x), -0.5)), _INV_SQRT_2PI))


defvjp(gelu_derivative, lambda g, out, x: (mul(g, _gelu_second_derivative(x)),))
defvjp(relu, lambda g, out, x: (mul(g, step(x)),))
defvjp(sigmoid, lambda g, out, x: (mul(g, mul(out, sub(1.0, out))),))
defvjp(gelu, lambda g, out, x: (mul(g, gelu_derivative(x)),))
defvjp("softmax", lambda g, out, x, axis=-1: (mul(out, sub(g, reduce_sum(mul(g, out), axis, keepdims=True))),))
defvjp("log_softmax", lambda g, out, x, axis=-1: (sub(g, mul(exp(out), reduce_sum(g, axis, keepdims=True))),))
defvjp(dropout_op, lambda g, out, x, rate=0.5, seed=0: (dropout_op(g, rate=rate, seed=seed),))
