"""Element-wise activation kernels with parameters: leaky_relu, elu, selu, softplus, silu, log_sigmoid, hard_tanh.

Built as kernels.elementwise builds its unary kernels (a flat loop over contiguous operands run in
chunks on threads above a size threshold, and a 4-axis strided loop for views, launched by
``launch.four_axis_blocks``), with one difference: the scalar function also takes a small float64
array of the op's parameters (alpha, min_val, max_val), read once per call rather than compiled in.

The scalar functions live in this file on purpose (as in kernels/elementwise.py): Numba's cache
tracks only the file of the function it compiles, so a callee in another file could leave a stale
kernel in the cache.
"""
import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from .launch import four_axis_blocks
from .threads import PARALLEL_THRESHOLD, STREAMING_THRESHOLD, WORKERS, chunks, pool

JIT = dict(cache=True, nogil=True, error_model="numpy")

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Parametric:
    """A callable ``kernel(x, out, params)``: x and out of one shape, params a float64 array."""

    def __init__(self, name, contiguous, strided, threshold):
        self.name = name
        self.contiguous = contiguous
        self.strided = strided
        self.threshold = threshold

    def __call__(self, x, out, params):
        params = np.asarray(params, np.float64).reshape(-1)
        if not (out.flags.c_contiguous and x.flags.c_contiguous and x.shape == out.shape):
            for block in four_axis_blocks((x, out)):
                self.strided(block[0], params, block[1])
            return out
        size = out.size
        if size < self.threshold or WORKERS == 1:
            self.contiguous(x, params, out, 0, size)
        else:
            futures = [pool().submit(self.contiguous, x, params, out, lo, hi) for lo, hi in chunks(size)]
            for future in futures:
                future.result()
        return out

    def __repr__(self):
        return f"<activation kernel {self.name}>"


def parametric(scalar, threshold=PARALLEL_THRESHOLD):
    @njit(**JIT)
    def contiguous(a, params, out, lo, hi):
        xs = a.reshape(a.size)[lo:hi]
        zs = out.reshape(out.size)[lo:hi]
        for i in range(hi - lo):
            zs[i] = scalar(xs[i], params)

    @njit(**JIT)
    def strided(a, params, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                for k in range(out.shape[2]):
                    for m in range(out.shape[3]):
                        out[i, j, k, m] = scalar(a[i, j, k, m], params)

    return Parametric(scalar.__name__, contiguous, strided, threshold)


@register_jitable
def leaky_relu_scalar(x, params):
    # x > 0 else alpha * x; NaN propagates (alpha * NaN).
    return x if x > 0 else x * params[0]


@register_jitable
def elu_scalar(x, params):
    # expm1 keeps the precision of small negative x, as PyTorch does.
    return x if x > 0 else params[0] * math.expm1(x)


@register_jitable
def selu_scalar(x, params):
    return SELU_SCALE * x if x > 0 else SELU_SCALE * SELU_ALPHA * math.expm1(x)


@register_jitable
def softplus_scalar(x, params):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exp never overflows.
    if x != x:
        return x
    if x > 0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@register_jitable
def sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@register_jitable
def silu_scalar(x, params):
    if x != x:
        return x
    return x * sigmoid(x)


@register_jitable
def log_sigmoid_scalar(x, params):
    # log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|).
    if x != x:
        return x
    if x < 0:
        return x - math.log1p(math.exp(x))
    return -math.log1p(math.exp(-x))


@register_jitable
def hard_tanh_scalar(x, params):
    # NaN propagates, as in PyTorch's clamp.
    if x < params[0]:
        return params[0]
    if x > params[1]:
        return params[1]
    return x


leaky_relu = parametric(leaky_relu_scalar, STREAMING_THRESHOLD)
elu = parametric(elu_scalar)
selu = parametric(selu_scalar)
softplus = parametric(softplus_scalar)
silu = parametric(silu_scalar)
log_sigmoid = parametric(log_sigmoid_scalar)
hard_tanh = parametric(hard_tanh_scalar, STREAMING_THRESHOLD)
