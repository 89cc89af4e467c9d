"""Neural-network ops: relu, sigmoid, gelu, softmax, log_softmax, dropout (tanh is in math).

Their gradient rules are in graphview/gradients/nn.py.
"""
from math import erf

import numpy as np

from graphview import attributes, dtypes, registry, runstate
from graphview.dims import DimError, batch_dim, product as dim_product
from graphview.errors import OpArgumentError
from graphview.layouts import ops as layout_ops, table
from graphview.registry import defop, public
from graphview.shapes import normalize_axes
from graphview.testing import Sample, transposed
from graphview.ops.math import elementwise, mul, unary_samples
from graphview.ops.random import default_seed, unit_reference
from graphview.ops.reduce import three_axis_view
from graphview.ops.shape import contiguous, permute, reshape_like
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
        axes = normalize_axes(axis, x.ndim)
        if not axes or axes == tuple(range(axes[0], axes[-1] + 1)):
            x3 = three_axis_view(contiguous(x), axes)
            kernels.softmax_rows(x3, out.reshape(x3.shape), log)
            return
        # Axes apart: three_axis_view copies x with them moved last; the result is copied back in place.
        order = [a for a in range(x.ndim) if a not in axes] + list(axes)
        x3 = three_axis_view(x, axes)
        result = np.empty(x3.shape, x3.dtype)
        kernels.softmax_rows(x3, result, log)
        copy_kernel(result.reshape([x.shape[a] for a in order]), out.transpose(order))
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
                    Sample((transposed(x[0]),), {"axis": 0}, label=f"transposed {name}"),
                    Sample((x,), {"axis": (1, 2)}, label=f"two adjacent axes {name}"),
                    Sample((transposed(x),), {"axis": (0, 2)}, label=f"two axes apart, transposed {name}")]
    samples.append(Sample((np.zeros((0, 3)),), {"axis": -1}, label="empty"))
    samples.append(Sample((np.zeros((2, 0, 3)),), {"axis": (0, 2)}, label="empty, two axes"))
    samples.append(Sample((np.array([[1000.0, 0.0, -1000.0]]),), {"axis": -1}, label="large", gradcheck=False))
    return samples


def _softmax_shape(x, axis=-1):
    normalize_axes(axis, len(x))
    return x


_AXES = {"axis": attributes.Axis(many=True)}
_softmax = defop("softmax", shape=_softmax_shape, kernel=_softmax_kernel(False), promote="float",
                 accepts=dtypes.NUMERIC, samples=_softmax_samples, reference=_softmax_reference, family="nn",
                 attrs=_AXES,
                 doc="exp(x) / sum(exp(x)) along axis (an axis or a tuple of axes), shifted by the max.")
_log_softmax = defop("log_softmax", shape=_softmax_shape, kernel=_softmax_kernel(True), promote="float",
                     accepts=dtypes.NUMERIC, samples=_softmax_samples, reference=_log_softmax_reference, family="nn",
                     attrs=_AXES,
                     doc="x - logsumexp(x) along axis (an axis or a tuple of axes).")


@public("nn")
def softmax(x, axis=-1, *, name=None):
    """exp(x) / sum(exp(x)) along axis: an int, a gv.Dim, or a tuple of them (as jax.nn.softmax); over
    dims with lengths, the padding of each is ignored and gets 0."""
    return _softmax(x, name=name, axis=axis)


@public("nn")
def log_softmax(x, axis=-1, *, name=None):
    """x - logsumexp(x) along axis: an int, a gv.Dim, or a tuple of them; 0 at the padding of dims with
    lengths."""
    return _log_softmax(x, name=name, axis=axis)


def softmax_over_axes(x, axes, name=None):
    """softmax's masked form over several axes (``axes``, sorted) of which some dims have lengths."""
    return _masked_over_axes(_softmax, x, axes, name)


def log_softmax_over_axes(x, axes, name=None):
    """log_softmax's masked form over several axes of which some dims have lengths."""
    return _masked_over_axes(_log_softmax, x, axes, name)


def _masked_over_axes(op, x, axes, name):
    """``op`` over several axes, some of whose dims have lengths (ADR 0021): the axes are moved last,
    merged into one dim (packed when a dim with lengths is not the outer one, so that the merged dim
    has the product of the lengths) whose masked softmax is taken, then split and moved back. Padding
    anywhere in the group is ignored, and gets 0."""
    rank, dims = len(x.shape), list(table.dims_of(x))
    what = f"{op.__name__} over axes {axes} of {x.name!r}"
    kept = [a for a in range(rank) if a not in axes]
    order = tuple(kept) + axes
    moved = permute(x, order) if order != tuple(range(rank)) else x
    dims = [dims[a] for a in order]
    start = len(kept)
    group = dims[start:]
    if None in group:
        raise DimError(f"{what}: axis {order[start + group.index(None)]} has no dim, so the merged axis would "
                       "have no lengths; tag it with gv.set_dims")
    if batch_dim in group or batch_dim not in dims:
        raise DimError(f"{what}: masking by lengths needs the batch axis outside the softmax axes "
                       f"(dims {tuple(dims)})")
    merged_dim = dim_product(group)
    batch_axis = dims.index(batch_dim)
    # each lengths array is checked against its own axis first, so that a bad value is reported as the
    # user gave it (not as the merged dim's product of lengths)
    lengths, dynamic = layout_ops.lengths_inputs(x.graph, group)
    lengths = [layout_ops.check_lengths(n, moved, axis=start + factor, batch_axis=batch_axis, source=n.name)
               for n, factor in zip(lengths, dynamic)]
    packing = layout_ops.needs_packing(moved, dims, start, rank)
    if packing is not None:
        merged = layout_ops.pack_axes(moved, *lengths, start=start, stop=rank, batch_axis=batch_axis,
                                      dynamic=dynamic)
        layout_ops.declare_merged_lengths(x.graph, merged_dim, group)
    else:
        merged = layout_ops.merge_axes_copy(moved, start=start, stop=rank)
    table.set_dims(merged, dims[:start] + [merged_dim])
    total = None
    for factor, dim in enumerate(group):   # the merged dim's lengths, from the checked ones
        part = lengths[dynamic.index(factor)] if factor in dynamic else dim.size
        total = part if total is None else mul(total, part)
    result = registry.op(f"masked_{op.definition.name}")(merged, total, batch_axis=batch_axis, time_axis=start)
    last = order == tuple(range(rank))
    if packing is not None:
        back = layout_ops.unpack_axis(result, moved, *lengths, axis=start, like_start=start, count=len(group),
                                      batch_axis=batch_axis, dynamic=dynamic, name=name if last else None)
    else:
        back = reshape_like(result, moved, name=name if last else None)
    table.set_dims(back, dims)
    if last:
        return back
    inverse = tuple(order.index(a) for a in range(rank))
    return permute(back, inverse, name=name)


_STEP_MIX = 0x9E3779B97F4A7C15   # odd 64-bit constant: distinct steps give unrelated seeds
_STREAM_MIX = 0xD1B54A32D192ED03  # another, for the data-parallel rank (stream 0 adds nothing)


def _mask_seed(seed):
    """The seed of this run's dropout mask, or None where the run is not training (no mask)."""
    state = runstate.current()
    if not runstate.is_training():
        return None
    _, step, stream = state
    step_part = 0 if step is None else (step + 1) * _STEP_MIX   # no step: the mask fixed by the seed
    return (seed + step_part + stream * _STREAM_MIX) % 2**64


def _dropout_kernel(x, out, rate=0.5, seed=0):
    mask_seed = _mask_seed(seed)
    if mask_seed is None:
        copy_kernel(x, out)
        return
    random_kernels.dropout(contiguous(x), out, np.uint64(mask_seed), rate)


def _dropout_shape(x, rate=0.5, seed=0):
    return x


def _dropout_reference(x, rate=0.5, seed=0):
    mask_seed = _mask_seed(seed)
    if mask_seed is None:
        return x.copy()
    keep = unit_reference(mask_seed, x.size).reshape(x.shape) >= rate
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
    """Inverted dropout, in training mode only. The mask comes from ``seed`` (from the node's name when
    None): a new one per training step under ``fit``, the same one on every run inside
    ``gv.training_mode()`` (reproducible); every other run (``g.output``, ``calculate_gradients``,
    gradient checks, evaluation, ``gv.inference()``) is the identity. ``training=False`` builds no
    dropout at all; ``None`` is the default, ``True``."""
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
