"""Element-wise activations in the nn namespace: leaky_relu, elu, selu, softplus, silu, log_sigmoid, hard_tanh.

PyTorch's definitions and values (torch.nn.functional), computed by the kernels in
kernels/activations.py; softplus and log_sigmoid never overflow. Their gradient rules
(graphview/gradients/activations.py) are built from differentiable ops, so second derivatives work,
and take PyTorch's choices at the kinks: leaky_relu's gradient at 0 is alpha, elu's and selu's
are their negative side's (alpha, scale * alpha), hard_tanh's is 0 at min_val and max_val.
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.errors import OpArgumentError
from graphview.registry import defop, public
from graphview.testing import Sample, elementwise_samples
from graphview_kernels import activations as kernels

SELU_ALPHA = kernels.SELU_ALPHA
SELU_SCALE = kernels.SELU_SCALE


def _leaky_relu_shape(x, alpha=0.01):
    return x


def _elu_shape(x, alpha=1.0):
    return x


def _hard_tanh_shape(x, min_val=-1.0, max_val=1.0):
    if min_val > max_val:
        raise OpArgumentError(f"hard_tanh: min_val ({min_val}) is greater than max_val ({max_val})")
    return x


def _unary_shape(x):
    return x


def _samples(low=-4.0, high=4.0, attrs=None, special=()):
    """The element-wise samples (float64 and float32, empty, rank 0, transposed, strided), with attrs,
    and values at the kinks and far out (no gradient check there)."""
    def samples():
        result = [Sample(s.inputs, dict(attrs or {}), label=s.label)
                  for s in elementwise_samples(1, low=low, high=high)]
        for dtype in (np.float64, np.float32):
            values = np.array([0.0, -0.0, -30.0, 30.0, -800.0, 800.0, *special], dtype)
            result.append(Sample((values,), dict(attrs or {}), label=f"kinks and extremes {np.dtype(dtype).name}",
                                 gradcheck=False))
        return result
    return samples


def _reference(function):
    """A NumPy reference computed in float64, returned in x's dtype."""
    def reference(x, **attrs):
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(function(np.asarray(x, np.float64), **attrs)).astype(x.dtype)
    return reference


def _softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _log_sigmoid(x):
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _activation(name, kernel, shape, reference, samples, doc, attrs=None, params=lambda: (), namespace="nn"):
    def launch(x, out, **values):
        kernel(x, out, params(**values))
    launch.__doc__ = doc
    return defop(name, shape=shape, kernel=launch, promote="float", accepts=dtypes.NUMERIC, samples=samples,
                 reference=_reference(reference), family="elementwise", namespace=namespace, doc=doc, attrs=attrs)


_FINITE = attributes.Float(finite=True)

_leaky_relu = _activation(
    "leaky_relu", kernels.leaky_relu, _leaky_relu_shape,
    lambda x, alpha=0.01: np.where(x > 0, x, x * alpha),
    _samples(attrs={"alpha": 0.2}),
    "x where x > 0, else alpha * x (alpha=0.01 by default); the gradient at 0 is alpha (PyTorch).",
    attrs={"alpha": _FINITE}, params=lambda alpha=0.01: (alpha,), namespace=None)
_elu = _activation(
    "elu", kernels.elu, _elu_shape,
    lambda x, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))),
    _samples(attrs={"alpha": 1.5}),
    "x where x > 0, else alpha * (exp(x) - 1) (alpha=1.0 by default).",
    attrs={"alpha": _FINITE}, params=lambda alpha=1.0: (alpha,), namespace=None)
selu = _activation(
    "selu", kernels.selu, _unary_shape,
    lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0.0))),
    _samples(), "scale * elu(x, alpha) with PyTorch's constants scale = 1.0507..., alpha = 1.6732...")
softplus = _activation(
    "softplus", kernels.softplus, _unary_shape, _softplus, _samples(),
    "log(1 + exp(x)), as max(x, 0) + log1p(exp(-|x|)) so that it never overflows.")
silu = _activation(
    "silu", kernels.silu, _unary_shape, lambda x: x / (1.0 + np.exp(-x)), _samples(),
    "x * sigmoid(x) (swish).")
log_sigmoid = _activation(
    "log_sigmoid", kernels.log_sigmoid, _unary_shape, _log_sigmoid, _samples(),
    "log(sigmoid(x)), as min(x, 0) - log1p(exp(-|x|)) so that it never overflows.")
_hard_tanh = _activation(
    "hard_tanh", kernels.hard_tanh, _hard_tanh_shape,
    lambda x, min_val=-1.0, max_val=1.0: np.clip(x, min_val, max_val),
    _samples(attrs={"min_val": -0.5, "max_val": 1.5}, special=(-0.5, 1.5)),
    "x clipped to [min_val, max_val] ([-1, 1] by default); the gradient is 0 at min_val and max_val (PyTorch).",
    attrs={"min_val": _FINITE, "max_val": _FINITE},
    params=lambda min_val=-1.0, max_val=1.0: (min_val, max_val), namespace=None)


# The activations with parameters take them by position too, as torch.nn.functional's do.

@public("nn")
def leaky_relu(x, alpha=0.01, *, name=None):
    """x where x > 0, else alpha * x."""
    return _leaky_relu(x, name=name, alpha=alpha)


@public("nn")
def elu(x, alpha=1.0, *, name=None):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return _elu(x, name=name, alpha=alpha)


@public("nn")
def hard_tanh(x, min_val=-1.0, max_val=1.0, *, name=None):
    """x clipped to [min_val, max_val]."""
    return _hard_tanh(x, name=name, min_val=min_val, max_val=max_val)
