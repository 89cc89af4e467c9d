"""Neural-network ops: relu, sigmoid, gelu, softmax, log_softmax, dropout (tanh is in math).

Their gradient rules are in graphview/gradients/nn.py.
"""
from math import erf

import numpy as np

from graphview import attributes, dtypes, runstate
from graphview.errors import OpArgumentError
from graphview.registry import defop, public
from graphview.shapes import normalize_axis
from graphview.testing import Sample, transposed
from graphview.ops.math import elementwise, unary_samples
from graphview.ops.random import default_seed, unit_reference
from graphview.ops.reduce import three_axis_view
from graphview.ops.shape import contiguous
from graphview_kernels import elementwise as elementwise_kernels
from graphview_kernels.elementwise import copy as copy_kernel
from graphview_kernels import nn as kernels
from graphview_kernels import random as random_kernels


def _erf_reference(x):
    return np.vectorize(erf, otypes=[np.float64])(x)


def _gelu_reference(x):
    return (0.5 * x * (1.0 + _erf_reference(x / np.sqrt(2.0)))).astype(x.dtype)


def _gelu_derivative_reference(x):
    cdf = 0.5 * (1.0 + _erf_reference(x / np.sqrt(2.0)))
    return (cdf + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)).astype(x.dtype)


step = elementwise("step", elementwise_kernels.step, promote="float", namespace=None, differentiable=False,
                   reference=lambda x: (x > 0).astype(x.dtype), samples=unary_samples(),
                   doc="1 where x > 0, else 0 (the derivative of relu).")
gelu_derivative = elementwise("gelu_derivative", elementwise_kernels.gelu_derivative, promote="float",
                              namespace=None, reference=_gelu_derivative_reference, samples=unary_samples(),
                              doc="The derivative of gelu.")
relu = elementwise("relu", elementwise_kernels.relu, promote="float", namespace="nn",
                   reference=lambda x: np.maximum(x, 0).astype(x.dtype), samples=unary_samples(), doc="max(x, 0).")
sigmoid = elementwise("sigmoid", elementwise_kernels.sigmoid, promote="float", namespace="nn",
                      reference=lambda x: (1 / (1 + np.exp(-x.astype(np.float64)))).astype(x.dtype),
                      samples=unary_samples(low=-6, high=6), doc="1 / (1 + exp(-x)), without overflow.")
gelu = elementwise("gelu", elementwise_kernels.gelu, promote="float", namespace="nn", reference=_gelu_reference,
                   samples=unary_samples(), doc="x * Phi(x), the exact (erf) GELU.")


def _softmax_kernel(log):
    def launch(x, out, axis=-1):
        axis = normalize_axis(axis, x.ndim)
        x3 = three_axis_view(contiguous(x), (axis,))
        kernels.softmax_rows(x3, out.reshape(x3.shape), log)
    return launch


def _softmax_reference(x, axis=-1):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


def _log_softmax_reference(x, axis=-1):
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _softmax_samples():
    r = np.random.default_rng(14)
    samples = []
    for dtype in (np.float64, np.float32):
        x = r.normal(size=(3, 4, 5)).astype(dtype)
        name = np.dtype(dtype).name
        samples += [Sample((x,), {"axis": -1}, label=f"last {name}"), Sample((x,), {"axis": 1}, label=f"middle {name}"),
                    Sample((transposed(x[0]),), {"axis": 0}, label=f"transposed {name}")]
    samples.append(Sample((np.zeros((0, 3)),), {"axis": -1}, label="empty"))
    samples.append(Sample((np.array([[1000.0, 0.0, -1000.0]]),), {"axis": -1}, label="large", gradcheck=False))
    return samples


def _softmax_shape(x, axis=-1):
    normalize_axis(axis, len(x))
    return x


_softmax = defop("softmax", shape=_softmax_shape, kernel=_softmax_kernel(False), promote="float",
                 accepts=dtypes.NUMERIC, samples=_softmax_samples, reference=_softmax_reference, family="nn",
                 attrs={"axis": attributes.Axis()},
                 doc="exp(x) / sum(exp(x)) along axis, shifted by the max.")
_log_softmax = defop("log_softmax", shape=_softmax_shape, kernel=_softmax_kernel(True), promote="float",
                     accepts=dtypes.NUMERIC, samples=_softmax_samples, reference=_log_softmax_reference, family="nn",
                     attrs={"axis": attributes.Axis()},
                     doc="x - logsumexp(x) along axis.")


@public("nn")
def softmax(x, axis=-1, *, name=None):
    """exp(x) / sum(exp(x)) along axis."""
    return _softmax(x, name=name, axis=axis)


@public("nn")
def log_softmax(x, axis=-1, *, name=None):
    """x - logsumexp(x) along axis."""
    return _log_softmax(x, name=name, axis=axis)


_STEP_MIX = 0x9E3779B97F4A7C15   # odd 64-bit constant: distinct steps give unrelated seeds


def _dropout_kernel(x, out, rate=0.5, seed=0):
    state = runstate.current()
    if state is not None and state[0] == runstate.INFERENCE:
        copy_kernel(x, out)
        return
    if state is not None:
        seed = (seed + (state[1] + 1) * _STEP_MIX) % 2**64
    random_kernels.dropout(contiguous(x), out, np.uint64(seed), rate)


def _dropout_shape(x, rate=0.5, seed=0):
    return x


def _dropout_reference(x, rate=0.5, seed=0):
    keep = unit_reference(seed, x.size).reshape(x.shape) >= rate
    return np.where(keep, x / (1.0 - rate), 0.0).astype(x.dtype)


def _dropout_samples():
    r = np.random.default_rng(15)
    return [Sample((r.random((4, 5)),), {"rate": 0.5, "seed": 3}, label="float64"),
            Sample((r.random((4, 5)).astype(np.float32),), {"rate": 0.25, "seed": 4}, label="float32"),
            Sample((transposed(r.random((3, 4))),), {"rate": 0.1, "seed": 5}, label="transposed")]


dropout_op = defop("dropout", shape=_dropout_shape, kernel=_dropout_kernel, promote="float", accepts=dtypes.FLOATS,
                   samples=_dropout_samples, reference=_dropout_reference, family="nn",
                   attrs={"rate": attributes.Float(minimum=0.0, below=1.0), "seed": attributes.Seed()},
                   doc="Zero each element with probability rate and scale the rest by 1/(1-rate).")


@public("nn")
def dropout(x, rate=0.5, seed=None, training=True, *, name=None):
    """Inverted dropout. The mask comes from ``seed`` (from the node's name when None): a new one per
    training step under ``fit``, the same one on every plain run (reproducible), none under
    ``gv.inference()`` and in evaluation. ``training=False`` builds no dropout at all; ``None`` is the
    default, ``True``."""
    # The declarations judge rate, seed (and training) before the shortcut reads them: dropout(x, False)
    # or seed=-1 is the same OpArgumentError whether or not a node would be built. training=None is the
    # default, as in Keras.
    if training is None:
        training = True
    declared = dropout_op.definition.attributes
    for key, value, declaration in (("rate", rate, declared["rate"]), ("seed", seed, declared["seed"]),
                                    ("training", training, attributes.Bool())):
        if value is None:
            continue
        try:
            declaration.parse(value)
        except attributes.Invalid as problem:
            raise OpArgumentError(f"dropout: attribute {key!r}: {problem}") from None
    if not training or rate == 0:
        return x
    if seed is None:
        seed = default_seed(x.graph, name or "dropout")
    return dropout_op(x, name=name, rate=rate, seed=seed)
