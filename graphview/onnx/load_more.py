"""More ONNX op types ``graphview.onnx.load`` imports: the rest of what graphview's exporter writes.

Not, ArgMax/ArgMin, Size, Pad, Split, Erf, ScatterND and the two losses (SoftmaxCrossEntropyLoss,
NegativeLogLikelihoodLoss); MORE_BUILDERS maps them to builders (as load_ops.BUILDERS does), with the op
types PyTorch's attention exports add, Mod and Trilu (graphview.onnx.load_sizes' ATTENTION_BUILDERS), and Einsum
and Tile (graphview.onnx.load_einsum).

* ``Erf`` has no graphview op: it is computed from gelu, erf(z) = 2 gelu(sqrt(2) z) / (sqrt(2) z) - 1
  (0 at 0), which is exact to the dtype's rounding in absolute terms (near 0 the relative error grows).
* ``ScatterND`` with indices of one coordinate (shape (..., 1): rows of the data) is
  Where(scatter_add(1 at the indices) > 0, scatter_add(updates at the indices), data): the ONNX result
  wherever the indices differ, as ONNX requires for reduction "none" (other reductions are refused).
* ``Size`` is a constant where the shape is known, else ``numel`` cast to int64.
"""
import math

import numpy as np

from graphview.onnx.load_einsum import EINSUM_BUILDERS
from graphview.onnx.load_ops import axis_of, known, view
from graphview.onnx.load_sizes import ATTENTION_BUILDERS
from graphview.ops.shape import numel
from graphview.ops.view import scatter_add

NO_IGNORED_LABEL = -(1 << 62)     # ONNX's losses without ignore_index ignore no label


def not_(cx, node, ins, attrs):
    if known(ins[0]):
        return [np.logical_not(ins[0])]
    return [cx.g.math.eq(ins[0], np.asarray(False), name=cx.name())]


def arg(op):
    def build(cx, node, ins, attrs):
        if attrs.get("select_last_index", 0):
            cx.fail("select_last_index=1 is not supported (graphview gives the first extreme)")
        x = cx.var(ins[0])
        axis = axis_of(cx, int(attrs.get("axis", 0)), len(x.shape))
        return [getattr(cx.g.math, op)(x, axis=axis, keepdims=bool(attrs.get("keepdims", 1)), name=cx.name())]
    return build


def size(cx, node, ins, attrs):
    x = ins[0]
    shape = np.shape(x) if known(x) else x.shape
    if None not in shape:
        return [np.asarray(int(np.prod(shape, dtype=np.int64)), np.int64)]
    return [cx.g.math.cast(numel(x), "int64", name=cx.name())]


PAD_MODES = ("constant", "reflect", "edge")


def pad(cx, node, ins, attrs):
    x = cx.var(ins[0])
    rank = len(x.shape)
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in PAD_MODES:
        cx.fail(f"mode={mode!r} is not supported ({', '.join(PAD_MODES)} are)")
    if cx.opset < 11:
        pads, value = attrs["pads"], attrs.get("value", 0.0)
    else:
        pads = cx.static(ins[1], "pads")
        value = ins[2] if len(ins) > 2 and ins[2] is not None else 0.0
        value = cx.static(value, "constant_value").reshape(-1)[0] if not isinstance(value, float) else value
    pads = [int(p) for p in np.ravel(pads)]
    axes = range(rank)
    if len(ins) > 3 and ins[3] is not None:
        axes = [axis_of(cx, int(a), rank) for a in np.ravel(cx.static(ins[3], "axes"))]
    if len(pads) != 2 * len(axes):
        cx.fail(f"{len(pads)} pads for {len(axes)} axes")
    if min(pads, default=0) < 0:
        cx.fail(f"negative pads {pads} (cropping) are not supported")
    widths = [(0, 0)] * rank
    for i, axis in enumerate(axes):
        widths[axis] = (pads[i], pads[i + len(axes)])
    return [cx.g.shape.pad(x, tuple(widths), mode=mode, value=float(value), name=cx.name())]


def split(cx, node, ins, attrs):
    """Split: sizes from the ``split`` attribute (before opset 13) or input (from 13), else equal parts, one
    per output (opset 18's num_outputs: the last part smaller where the size does not divide); each a view."""
    x = ins[0]
    shape = np.shape(x) if known(x) else x.shape
    axis = axis_of(cx, int(attrs.get("axis", 0)), len(shape))
    size, count = shape[axis], len(node.output)
    if cx.opset < 13:
        sizes = attrs.get("split")
    else:
        sizes = cx.static(ins[1], "split") if len(ins) > 1 and ins[1] is not None else None
    if sizes is None:
        count = int(attrs.get("num_outputs", count))
        if count != len(node.output) or count < 1:
            cx.fail(f"num_outputs={count} for {len(node.output)} outputs")
        if size is None:
            cx.fail(f"an equal split needs the size of axis {axis}, and it is unknown (input shape {shape})")
        part = -(-size // count)
        sizes = [part] * (count - 1) + [size - part * (count - 1)]
    sizes = [int(s) for s in np.ravel(sizes)]
    if len(sizes) != len(node.output) or min(sizes) < 0 or size is not None and sum(sizes) != size:
        cx.fail(f"split sizes {sizes} for {len(node.output)} outputs of axis {axis} of size {size}")
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    keys = [(slice(None),) * axis + (slice(int(a), int(b)),) for a, b in zip(starts[:-1], starts[1:])]
    if known(x):
        return [np.asarray(x)[key] for key in keys]
    return [view(cx, x, key, cx.name(i)) for i, key in enumerate(keys)]


def erf(cx, node, ins, attrs):
    z = cx.var(ins[0])
    if z.dtype.kind != "f":
        cx.fail(f"Erf of {z.dtype} is not supported (float32 or float64)")
    g = cx.g
    root = np.asarray(math.sqrt(2), z.dtype)
    y = g.math.mul(z, root)
    zero = g.math.eq(y, np.asarray(0, z.dtype))
    safe = g.math.where(zero, np.asarray(1, z.dtype), y)           # no 0 / 0 (its gradient neither)
    phi = g.math.div(g.nn.gelu(safe), safe)                         # the normal CDF at y
    value = g.math.sub(g.math.mul(phi, np.asarray(2, z.dtype)), np.asarray(1, z.dtype))
    return [g.math.where(zero, np.asarray(0, z.dtype), value, name=cx.name())]


def scatter_nd(cx, node, ins, attrs):
    reduction = attrs.get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction != "none":
        cx.fail(f"reduction={reduction!r} is not supported (only 'none')")
    data, indices, updates = ins
    if known(data, indices, updates):
        out = np.array(data, copy=True)
        out[tuple(np.moveaxis(np.asarray(indices, np.int64), -1, 0))] = updates
        return [out]
    k = np.shape(indices)[-1] if known(indices) else indices.shape[-1]
    if k != 1:
        cx.fail(f"indices with {k} coordinates (last axis) are not supported: only rows of the data (1)")
    g = cx.g
    data, updates = cx.var(data), cx.var(updates)
    rows = view(cx, cx.var(indices), (Ellipsis, 0))
    if len(rows.shape) != 1:
        rows = g.shape.reshape(rows, (-1,))
        updates = g.shape.reshape(updates, (-1,) + tuple(-1 if d is None else d for d in data.shape[1:]))
    if rows.dtype != np.int64:
        rows = g.math.cast(rows, "int64")
    ones = g.math.add(g.math.mul(updates, np.asarray(0, updates.dtype)), np.asarray(1, updates.dtype))
    written = g.math.gt(scatter_add(ones, rows, data, axis=0), np.asarray(0, updates.dtype))
    return [g.math.where(written, scatter_add(updates, rows, data, axis=0), data, name=cx.name())]


def losses(cx, node, log_probs, labels, weights, attrs):
    if weights is not None:
        cx.fail("class weights are not supported")
    reduction = attrs.get("reduction", b"mean")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    labels = cx.var(labels)
    if labels.dtype != np.int64:
        labels = cx.g.math.cast(labels, "int64")
    return cx.g.loss.nll(log_probs, labels, reduction=reduction,
                         ignore_index=int(attrs.get("ignore_index", NO_IGNORED_LABEL)), name=cx.name())


def softmax_cross_entropy(cx, node, ins, attrs):
    scores = cx.var(ins[0])
    log_probs = cx.g.nn.log_softmax(scores, axis=1, name=cx.name(1) if len(node.output) > 1 else None)
    return [losses(cx, node, log_probs, ins[1], ins[2] if len(ins) > 2 else None, attrs), log_probs]


def negative_log_likelihood(cx, node, ins, attrs):
    return [losses(cx, node, cx.var(ins[0]), ins[1], ins[2] if len(ins) > 2 else None, attrs)]


MORE_BUILDERS = {
    "Not": not_, "ArgMax": arg("argmax"), "ArgMin": arg("argmin"), "Size": size, "Pad": pad, "Erf": erf,
    "ScatterND": scatter_nd, "Split": split, "SoftmaxCrossEntropyLoss": softmax_cross_entropy,
    "NegativeLogLikelihoodLoss": negative_log_likelihood, **ATTENTION_BUILDERS,
    **EINSUM_BUILDERS,
}
