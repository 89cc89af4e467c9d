"""Normalization ops: batch_norm (with its running-statistic updates) and layer_norm.

``g.nn.batch_norm`` normalizes each channel (the ``axis`` of x) with the batch's
mean and biased variance in training mode (``runstate.training``: ``fit``,
``GradientStep``, ``gv.training_mode()``) and with the running statistics everywhere else (``g.output``,
``calculate_gradients``, gradient checks, ``g.evaluate``, ``gv.inference()``).
When the running statistics are VARIABLEs made with ``trainable=False``, it also
records one state update per statistic (ADR 0019): a ``batch_norm_moments`` node
(the batch's mean and unbiased variance) and a ``batch_norm_update_`` node, an
in-place op writing the statistic (input 0), ``(1 - momentum) * running +
momentum * batch`` as PyTorch's update. Training steps run these nodes with the
loss and the gradients and write their values into the variables.

Both ops' gradients are dedicated backward kernels (``batch_norm_grad``,
``layer_norm_grad``, in kernels/norm.py), marked non-differentiable: first
derivatives only. Their rules are in graphview/gradients/norm.py.
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.errors import GraphviewError, OpArgumentError, ShapeError
from graphview.ops.norm_common import (Positive, check_masks, default, f64, grouped, length_masks,
                                       masked_pair, refuse_lengths, restore, sample_mask, static_axes, target_of,
                                       training, valid_full, valid_weights)
from graphview.registry import defop, graph_of, public
from graphview.shapes import format_shape, normalize_axes, normalize_axis
from graphview.testing import Sample, strided, transposed
from graphview.variable import Kind, Variable
from graphview_kernels import norm as kernels
from graphview_kernels.elementwise import copy as copy_kernel

BATCH_PARTS = ("x", "gamma", "beta", "running_mean", "running_var")
GRAD_PARTS = BATCH_PARTS + ("affine",)   # affine: gamma's and beta's gradients as rows, in one pass
LAYER_PARTS = ("x", "gamma", "beta")


# --- batch_norm ------------------------------------------------------------------------------

def _channel_count(x, axis):
    return x[normalize_axis(axis, len(x))]


def _check_per_channel(op, x, axis, **vectors):
    channels = _channel_count(x, axis)
    for label, shape in vectors.items():
        if len(shape) != 1 or None not in (shape[0], channels) and shape[0] != channels:
            raise ShapeError(f"{label} has shape {format_shape(shape)}, but {op} needs ({channels},): one value "
                             f"per channel of x {format_shape(x)} along axis {axis}")


def _batch_norm_shape(x, gamma, beta, running_mean, running_var, *masks, axis=1, eps=1e-5):
    _check_per_channel("batch_norm", x, axis, gamma=gamma, beta=beta, running_mean=running_mean,
                       running_var=running_var)
    check_masks("batch_norm", x, masks)
    return x


def _batch_statistics(x3):
    mean, var = np.empty(x3.shape[1]), np.empty(x3.shape[1])
    kernels.channel_moments(x3, mean, var)
    return mean, var


def _statistics(x3, running_mean, running_var, shape, valid=None):
    """The batch's mean and biased variance in a training step, else the running ones (float64), and the
    number of values per channel they are over (the valid ones, with masks)."""
    count = x3.shape[0] * x3.shape[2]
    if not training():
        return f64(running_mean), f64(running_var), count
    if count <= 1:
        raise ShapeError(f"batch norm needs more than 1 value per channel in a training step, got an input of "
                         f"shape {format_shape(shape)}")
    if valid is None:
        return _batch_statistics(x3) + (count,)
    mean, var = np.empty(x3.shape[1]), np.empty(x3.shape[1])
    return mean, var, kernels.masked_channel_moments(x3, valid, mean, var)


def _channels(x, axis):
    return grouped(x, (normalize_axis(axis, x.ndim),))[0]


def _batch_norm_kernel(x, gamma, beta, running_mean, running_var, *arrays, axis=1, eps=1e-5):
    *masks, out = arrays
    x3, valid = _channels(x, axis), valid_weights(x.shape, axis, masks)
    mean, var, _ = _statistics(x3, running_mean, running_var, x.shape, valid)
    scale = f64(gamma) / np.sqrt(var + eps)
    out3 = out.reshape(x3.shape)
    kernels.channel_affine(x3, scale, f64(beta) - mean * scale, out3)
    if valid is not None:
        kernels.zero_padding(out3, valid)


def _batch_norm_reference(x, gamma, beta, running_mean, running_var, *masks, axis=1, eps=1e-5):
    shape = [1] * x.ndim
    shape[axis] = -1
    xs = x.astype(np.float64)
    y = ((xs - running_mean.reshape(shape)) / np.sqrt(running_var.reshape(shape) + eps) * gamma.reshape(shape)
         + beta.reshape(shape))
    return np.where(valid_full(x, masks), y, 0).astype(np.result_type(x, gamma, beta, running_mean, running_var))


def _channel_inputs(r, shape, axis, dtype):
    channels = shape[axis]
    return (r.normal(size=shape).astype(dtype), r.uniform(0.5, 1.5, channels).astype(dtype),
            r.normal(size=channels).astype(dtype), r.normal(size=channels).astype(dtype) * 0.3,
            r.uniform(0.5, 2.0, channels).astype(dtype))


def _batch_norm_samples():
    r = np.random.default_rng(1601)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        samples.append(Sample(_channel_inputs(r, (4, 3, 2, 2), 1, dtype), {"axis": 1}, label=f"bchw {name}"))
        samples.append(Sample(_channel_inputs(r, (5, 3), 1, dtype), {"axis": 1, "eps": 1e-3}, label=f"bc {name}"))
    x, *rest = _channel_inputs(r, (3, 4, 2), 2, np.float64)
    samples.append(Sample((x, *rest), {"axis": -1}, label="channels last"))
    x, *rest = _channel_inputs(r, (3, 4), 1, np.float64)
    samples.append(Sample((transposed(x), *rest), {"axis": 1}, label="transposed"))
    x, *rest = _channel_inputs(r, (3, 4), 1, np.float64)
    samples.append(Sample((strided(x), *rest), {"axis": 1}, label="strided"))
    samples.append(Sample((np.zeros((0, 3)),) + _channel_inputs(r, (2, 3), 1, np.float64)[1:], {"axis": 1},
                          label="empty batch"))
    x, *rest = _channel_inputs(r, (3, 4, 2), 2, np.float64)
    samples.append(Sample((x, *rest, sample_mask((3, 4, 1), [4, 1, 0])), {"axis": -1}, label="masked",
                          constant_inputs=(5,)))
    return samples


_EPS = Positive()
batch_norm_op = defop(
    "batch_norm", shape=_batch_norm_shape, kernel=_batch_norm_kernel, promote="float", accepts=dtypes.FLOATS,
    samples=_batch_norm_samples, reference=_batch_norm_reference, family="nn",
    attrs={"axis": attributes.Axis(), "eps": _EPS},
    doc="Batch normalization over the channels on axis: batch statistics in a training step, running "
        "statistics everywhere else; the gradient is a dedicated backward kernel (batch_norm_grad, first "
        "derivatives only).")


def _batch_norm_grad_shape(x, gamma, running_mean, running_var, grad, *masks, axis=1, eps=1e-5, part="x"):
    _check_per_channel("batch_norm_grad", x, axis, gamma=gamma, running_mean=running_mean, running_var=running_var)
    check_masks("batch_norm_grad", x, masks)
    if len(grad) != len(x) or any(None not in (g, s) and g != s for g, s in zip(grad, x)):
        raise ShapeError(f"grad has shape {format_shape(grad)}, x {format_shape(x)}; they must be the same")
    return x if part == "x" else (2, _channel_count(x, axis)) if part == "affine" else (_channel_count(x, axis),)


def _batch_norm_grad_kernel(x, gamma, running_mean, running_var, grad, *arrays, axis=1, eps=1e-5, part="x"):
    *masks, out = arrays
    batch = training()
    if batch and part in ("running_mean", "running_var"):   # a training step's output does not read them
        out[...] = 0.0
        return
    x3, g3, valid = _channels(x, axis), _channels(grad, axis), valid_weights(x.shape, axis, masks)
    mean, var, count = _statistics(x3, running_mean, running_var, x.shape, valid)
    if valid is not None:   # padding: x at the mean, gradient 0, so no sum reads it
        x3, g3 = masked_pair(x3, g3, valid, mean)
    invstd = 1.0 / np.sqrt(var + eps)
    scale = f64(gamma) * invstd
    if part == "x" and not batch:
        kernels.channel_affine(g3, scale, np.zeros_like(scale), out.reshape(x3.shape))
        return
    sum_g, sum_gxhat = np.empty_like(scale), np.empty_like(scale)
    kernels.channel_grad_sums(x3, g3, mean, invstd, sum_g, sum_gxhat)
    if part == "x":
        out3 = out.reshape(x3.shape)
        kernels.batch_norm_grad_input(x3, g3, mean, invstd, scale, sum_g, sum_gxhat, count, out3)
        if valid is not None:
            kernels.zero_padding(out3, valid)
    elif part == "gamma":
        out[...] = sum_gxhat
    elif part == "affine":
        out[0], out[1] = sum_gxhat, sum_g
    elif part == "beta":
        out[...] = sum_g
    elif part == "running_mean":
        out[...] = -sum_g * scale
    else:
        out[...] = -0.5 * scale * invstd * sum_gxhat


def _batch_norm_grad_reference(x, gamma, running_mean, running_var, grad, *masks, axis=1, eps=1e-5, part="x"):
    grad = np.where(valid_full(x, masks), grad, 0).astype(grad.dtype)
    shape = [1] * x.ndim
    shape[axis] = -1
    others = tuple(a for a in range(x.ndim) if a != axis % x.ndim)
    invstd = 1.0 / np.sqrt(running_var.astype(np.float64) + eps)
    xhat = (x - running_mean.reshape(shape)) * invstd.reshape(shape)
    dtype = np.result_type(x, gamma, running_mean, running_var, grad)
    result = {"x": lambda: grad * (gamma * invstd).reshape(shape),
              "gamma": lambda: np.sum(grad * xhat, axis=others),
              "beta": lambda: np.sum(grad, axis=others),
              "affine": lambda: np.stack([np.sum(grad * xhat, axis=others), np.sum(grad, axis=others)]),
              "running_mean": lambda: -np.sum(grad, axis=others) * gamma * invstd,
              "running_var": lambda: -0.5 * gamma * invstd ** 3 * np.sum(grad * (x - running_mean.reshape(shape)),
                                                                         axis=others)}[part]()
    return np.asarray(result).astype(dtype)


def _batch_norm_grad_samples():
    r = np.random.default_rng(1602)
    samples = []
    for part in GRAD_PARTS:
        x, gamma, _, mean, var = _channel_inputs(r, (4, 3, 2), 1, np.float64)
        samples.append(Sample((x, gamma, mean, var, r.normal(size=x.shape)), {"axis": 1, "part": part}, label=part))
    x, gamma, _, mean, var = _channel_inputs(r, (3, 2, 4), 2, np.float32)
    samples.append(Sample((x, gamma, mean, var, r.normal(size=x.shape).astype(np.float32)), {"axis": -1, "part": "x"},
                          label="float32"))
    x, gamma, _, mean, var = _channel_inputs(r, (4, 3), 1, np.float64)
    samples.append(Sample((transposed(x), gamma, mean, var, strided(r.normal(size=(4, 3)))), {"part": "gamma"},
                          label="strided"))
    for part in ("x", "running_var"):
        x, gamma, _, mean, var = _channel_inputs(r, (3, 4, 2), 2, np.float64)
        samples.append(Sample((x, gamma, mean, var, r.normal(size=x.shape), sample_mask((3, 4, 1), [4, 2, 0])),
                              {"axis": -1, "part": part}, label=f"masked {part}", constant_inputs=(5,)))
    return samples


batch_norm_grad = defop(
    "batch_norm_grad", shape=_batch_norm_grad_shape, kernel=_batch_norm_grad_kernel, promote="float",
    accepts=dtypes.FLOATS, samples=_batch_norm_grad_samples,
    no_gradient="batch_norm's gradient is a dedicated backward kernel: no second derivatives",
    reference=_batch_norm_grad_reference, family="norm",
    attrs={"axis": attributes.Axis(), "eps": _EPS, "part": attributes.OneOf(GRAD_PARTS)},
    doc="batch_norm's dedicated backward kernel: the gradient of one input ('part'; 'affine': gamma's and "
        "beta's as the rows of one (2, channels) result), through the batch "
        "statistics in a training step (PyTorch's backward), the running ones elsewhere; not differentiable.")


def _moments_shape(x, *masks, axis=1):
    check_masks("batch_norm_moments", x, masks)
    return (2, _channel_count(x, axis))


def _moments_kernel(x, *arrays, axis=1):
    *masks, out = arrays
    x3, valid = _channels(x, axis), valid_weights(x.shape, axis, masks)
    if valid is None:
        mean, var = _batch_statistics(x3)
        count = x3.shape[0] * x3.shape[2]
    else:
        mean, var = np.empty(x3.shape[1]), np.empty(x3.shape[1])
        count = kernels.masked_channel_moments(x3, valid, mean, var)
    out[0] = mean
    out[1] = var * (count / (count - 1)) if count > 1 else np.nan


def _moments_reference(x, *masks, axis=1):
    axis = axis % x.ndim
    xs = np.moveaxis(x.astype(np.float64), axis, -1)
    values = xs[np.moveaxis(valid_full(x, masks), axis, -1)].reshape(-1, x.shape[axis])
    count = len(values)
    return np.stack([np.mean(values, axis=0), np.var(values, axis=0) * count / (count - 1)])


def _moments_samples():
    r = np.random.default_rng(1603)
    x = r.normal(size=(4, 3, 5))
    return [Sample((x,), {"axis": 1}, label="float64"), Sample((x.astype(np.float32),), {"axis": -1}, label="float32"),
            Sample((transposed(x[0]),), {"axis": 0}, label="transposed"),
            Sample((x, sample_mask((4, 3, 1), [3, 1, 2, 0])), {"axis": -1}, label="masked", constant_inputs=(1,))]


batch_norm_moments = defop(
    "batch_norm_moments", shape=_moments_shape, kernel=_moments_kernel, dtype=lambda x, *m, axis=1: dtypes.FLOAT64,
    accepts=dtypes.FLOATS, differentiable=False, samples=_moments_samples, reference=_moments_reference,
    family="norm", attrs={"axis": attributes.Axis()},
    doc="Per channel: the batch mean (row 0) and unbiased variance (row 1), float64, for batch_norm's "
        "running-statistic updates.")


def _update_shape(running, moments, momentum=0.1, row=0):
    if len(running) != 1 or len(moments) != 2 or moments[0] not in (2, None) or None not in (
            running[0], moments[1]) and running[0] != moments[1]:
        raise ShapeError(f"running statistic {format_shape(running)} and moments {format_shape(moments)} do not "
                         "match; expected (C,) and (2, C)")
    return running


def _update_kernel(running, moments, momentum=0.1, row=0):
    source = f64(moments[row])
    if running.flags.c_contiguous:
        return kernels.lerp_into(running, source, momentum)
    updated = kernels.lerp_into(np.ascontiguousarray(running), source, momentum)
    copy_kernel(updated, running)
    return running


def _update_reference(running, moments, momentum=0.1, row=0):
    return ((1 - momentum) * running.astype(np.float64) + momentum * moments[row]).astype(running.dtype)


def _update_samples():
    r = np.random.default_rng(1604)
    moments = np.stack([r.normal(size=4), r.uniform(0.5, 2, size=4)])
    return [Sample((r.normal(size=4), moments), {"momentum": 0.1, "row": 0}, label="mean float64"),
            Sample((r.uniform(0.5, 2, 4).astype(np.float32), moments), {"momentum": 0.3, "row": 1},
                   label="var float32"),
            Sample((strided(r.normal(size=4)), moments), {"momentum": 1.0, "row": 0}, label="strided")]


batch_norm_update_ = defop(
    "batch_norm_update_", shape=_update_shape, kernel=_update_kernel, dtype=lambda running, moments, **_: running,
    inplace=(0,), accepts=dtypes.FLOATS, differentiable=False, samples=_update_samples,
    reference=_update_reference, family="norm",
    attrs={"momentum": attributes.Float(minimum=0.0, maximum=1.0), "row": attributes.Int(minimum=0, maximum=1)},
    doc="running = (1 - momentum) * running + momentum * moments[row], in place: the state update of a "
        "batch_norm running statistic, run by training steps (ADR 0019).")


@public("nn")
def batch_norm(x, gamma, beta, running_mean, running_var, axis=1, momentum=0.1, eps=1e-5, *, name=None):
    """Batch normalization of the channels on ``axis`` (an int or a gv.Dim), as PyTorch's F.batch_norm.

    In a training step (``fit``, ``GradientStep``) each channel is normalized with the batch's mean and
    biased variance (inside ``gv.training_mode()`` too, which updates nothing), and running statistics that are VARIABLEs made with ``trainable=False`` are
    updated in place, ``running = (1 - momentum) * running + momentum * batch`` (the unbiased variance
    for ``running_var``), through the state updates this records (ADR 0019). Everywhere else
    (``g.output``, ``calculate_gradients``, gradient checks, ``g.evaluate``, ``gv.inference()``) the
    running statistics are used: a per-channel affine map, deterministic. Running statistics that are
    constants or placeholders are used as given and never updated. ``gamma``/``beta`` None: 1 and 0.
    The gradient is a dedicated backward kernel (first derivatives only)."""
    graph = graph_of((x, gamma, beta, running_mean, running_var), "batch_norm")
    try:
        momentum = batch_norm_update_.definition.attributes["momentum"].parse(momentum)
    except attributes.Invalid as problem:
        raise OpArgumentError(f"batch_norm: attribute 'momentum': {problem}") from None
    stats = {"running_mean": running_mean, "running_var": running_var}
    updated = {}
    for label, stat in stats.items():
        if isinstance(stat, Variable) and stat.graph is graph and stat.kind is Kind.VARIABLE:
            if graph.is_trainable(stat.name):
                raise GraphviewError(f"batch_norm: {label} {stat.name!r} is a trainable VARIABLE; running statistics "
                                     "are state that training steps update, not parameters: create it with "
                                     f"g.var({stat.name!r}, value, trainable=False)")
            if stat.name in graph.state_updates:
                raise GraphviewError(f"batch_norm: {label} {stat.name!r} is already updated by "
                                     f"{graph.state_updates[stat.name]!r}; give each batch_norm its own running "
                                     "statistics")
            updated[label] = stat
    if gamma is None or beta is None:
        channel_axis = static_axes(x, axis)
        gamma = default(graph, gamma, x, channel_axis, 1.0, "gamma")
        beta = default(graph, beta, x, channel_axis, 0.0, "beta")
    masks = length_masks(x, axis)
    out = batch_norm_op(x, gamma, beta, running_mean, running_var, *masks, name=name, axis=axis, eps=eps)
    if updated:
        scope = graph.scope()                  # added again when the names are made
        base = out.name[len(scope) + 1:] if scope and out.name.startswith(scope + "/") else out.name
        moments = batch_norm_moments(x, *masks, name=f"{base}_moments", axis=axis)
        for row, (label, stat) in enumerate(stats.items()):
            if label in updated:
                node = batch_norm_update_(stat, moments, name=f"{base}_update_{label}", momentum=momentum, row=row)
                graph.add_state_update(stat, node)
    return out


# --- layer_norm ------------------------------------------------------------------------------

def _normalized(x, axis):
    axes = normalize_axes(axis, len(x))
    if not axes:
        raise ShapeError(f"axis {axis!r} names no axis; layer norm needs at least one")
    return axes


def _layer_norm_shape(x, gamma, beta, axis=-1, eps=1e-5):
    axes = _normalized(x, axis)
    expected = tuple(x[a] for a in axes)
    for label, shape in (("gamma", gamma), ("beta", beta)):
        if len(shape) != len(expected) or any(None not in (s, e) and s != e for s, e in zip(shape, expected)):
            raise ShapeError(f"{label} has shape {format_shape(shape)}, but layer_norm over axes {axes} of x "
                             f"{format_shape(x)} needs {format_shape(expected)}, the normalized axes' shape")
    return x


def _layer_norm_kernel(x, gamma, beta, out, axis=-1, eps=1e-5):
    x3, perm = grouped(x, normalize_axes(axis, x.ndim))
    target = target_of(out, perm, x3.shape)
    kernels.layer_norm_forward(x3, f64(gamma), f64(beta), eps, target)
    restore(out, target, perm)


def _layer_norm_reference(x, gamma, beta, axis=-1, eps=1e-5):
    axes = normalize_axes(axis, x.ndim)
    shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
    xs = x.astype(np.float64)
    mean = np.mean(xs, axis=axes, keepdims=True)
    var = np.var(xs, axis=axes, keepdims=True)
    y = (xs - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)
    return y.astype(np.result_type(x, gamma, beta))


def _layer_inputs(r, shape, axes, dtype):
    normalized = tuple(shape[a] for a in axes)
    return (r.normal(size=shape).astype(dtype), r.uniform(0.5, 1.5, normalized).astype(dtype),
            r.normal(size=normalized).astype(dtype))


def _layer_norm_samples():
    r = np.random.default_rng(1605)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        samples.append(Sample(_layer_inputs(r, (3, 5), (1,), dtype), {"axis": -1}, label=f"last {name}"))
        samples.append(Sample(_layer_inputs(r, (2, 3, 4), (1, 2), dtype), {"axis": (1, 2)}, label=f"two last {name}"))
    samples.append(Sample(_layer_inputs(r, (2, 4, 3), (1,), np.float64), {"axis": 1, "eps": 1e-3}, label="middle"))
    samples.append(Sample(_layer_inputs(r, (3, 2, 4), (0, 2), np.float64), {"axis": (0, 2)}, label="apart"))
    x, gamma, beta = _layer_inputs(r, (4, 3), (1,), np.float64)
    samples.append(Sample((transposed(x), gamma, beta), {"axis": 1}, label="transposed"))
    x, gamma, beta = _layer_inputs(r, (4, 3), (1,), np.float64)
    samples.append(Sample((strided(x), strided(np.repeat(gamma[None], 2, 0))[0], beta), {"axis": -1},
                          label="strided"))
    samples.append(Sample((np.zeros((0, 3)), np.ones(3), np.zeros(3)), {"axis": -1}, label="empty"))
    samples.append(Sample(_layer_inputs(r, (3, 1), (1,), np.float64), {"axis": -1}, label="one element"))
    return samples


layer_norm_op = defop(
    "layer_norm", shape=_layer_norm_shape, kernel=_layer_norm_kernel, promote="float", accepts=dtypes.FLOATS,
    samples=_layer_norm_samples, reference=_layer_norm_reference, family="nn",
    attrs={"axis": attributes.Axis(many=True), "eps": _EPS},
    doc="(x - mean) / sqrt(var + eps) * gamma + beta over the axes; the gradient is a dedicated backward "
        "kernel (layer_norm_grad, first derivatives only).")


def _layer_norm_grad_shape(x, gamma, grad, axis=-1, eps=1e-5, part="x"):
    _layer_norm_shape(x, gamma, gamma, axis)
    if len(grad) != len(x) or any(None not in (g, s) and g != s for g, s in zip(grad, x)):
        raise ShapeError(f"grad has shape {format_shape(grad)}, x {format_shape(x)}; they must be the same")
    return x if part == "x" else gamma


def _layer_norm_grad_kernel(x, gamma, grad, out, axis=-1, eps=1e-5, part="x"):
    axes = normalize_axes(axis, x.ndim)
    x3, perm = grouped(x, axes)
    g3 = grouped(grad, axes)[0]
    dgamma, dbeta = np.zeros(x3.shape[1]), np.zeros(x3.shape[1])
    if part == "x":
        target = target_of(out, perm, x3.shape)
        kernels.layer_norm_backward(x3, f64(gamma), g3, eps, target, dgamma, dbeta, True, False)
        restore(out, target, perm)
        return
    kernels.layer_norm_backward(x3, f64(gamma), g3, eps, np.empty((0, 0, 0), x3.dtype), dgamma, dbeta, False, True)
    out[...] = (dgamma if part == "gamma" else dbeta).reshape(out.shape)


def _layer_norm_grad_reference(x, gamma, grad, axis=-1, eps=1e-5, part="x"):
    axes = normalize_axes(axis, x.ndim)
    others = tuple(a for a in range(x.ndim) if a not in axes)
    shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
    xs, gs = x.astype(np.float64), grad.astype(np.float64)
    mean = np.mean(xs, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(np.var(xs, axis=axes, keepdims=True) + eps)
    xhat = (xs - mean) * rstd
    dtype = np.result_type(x, gamma, grad)
    if part == "gamma":
        return np.sum(gs * xhat, axis=others).astype(dtype)
    if part == "beta":
        return np.sum(gs, axis=others).astype(dtype)
    dy = gs * gamma.reshape(shape)
    dx = rstd * (dy - np.mean(dy, axis=axes, keepdims=True) - xhat * np.mean(dy * xhat, axis=axes, keepdims=True))
    return dx.astype(dtype)


def _layer_norm_grad_samples():
    r = np.random.default_rng(1606)
    samples = []
    for part in LAYER_PARTS:
        x, gamma, _ = _layer_inputs(r, (3, 2, 4), (0, 2), np.float64)
        samples.append(Sample((x, gamma, r.normal(size=x.shape)), {"axis": (0, 2), "part": part}, label=part))
    x, gamma, _ = _layer_inputs(r, (4, 5), (1,), np.float32)
    samples.append(Sample((transposed(x), gamma, r.normal(size=x.shape).astype(np.float32)), {"axis": -1},
                          label="float32 transposed"))
    return samples


layer_norm_grad = defop(
    "layer_norm_grad", shape=_layer_norm_grad_shape, kernel=_layer_norm_grad_kernel, promote="float",
    accepts=dtypes.FLOATS, samples=_layer_norm_grad_samples,
    no_gradient="layer_norm's gradient is a dedicated backward kernel: no second derivatives",
    reference=_layer_norm_grad_reference, family="norm",
    attrs={"axis": attributes.Axis(many=True), "eps": _EPS, "part": attributes.OneOf(LAYER_PARTS)},
    doc="layer_norm's dedicated backward kernel: the gradient of x, gamma or beta ('part'); not differentiable.")


@public("nn")
def layer_norm(x, gamma, beta, axis=-1, eps=1e-5, *, name=None):
    """Layer normalization over ``axis`` (an int, a tuple of ints, or gv.Dims): each position's values
    along those axes get mean 0 and variance 1 (biased, plus ``eps``), then ``* gamma + beta``; gamma
    and beta have the normalized axes' shape (in axis order; PyTorch's normalized_shape for the last
    axes), or are None (1 and 0). The gradient is a dedicated backward kernel (first derivatives only)."""
    refuse_lengths("layer_norm", x, static_axes(x, axis))
    if gamma is None or beta is None:
        graph = graph_of((x, gamma, beta), "layer_norm")
        axes = static_axes(x, axis)
        gamma = default(graph, gamma, x, axes, 1.0, "gamma")
        beta = default(graph, beta, x, axes, 0.0, "beta")
    return layer_norm_op(x, gamma, beta, name=name, axis=axis, eps=eps)
