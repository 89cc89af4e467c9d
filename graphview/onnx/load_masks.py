"""``Range`` in ``graphview.onnx.load``, and the masks exporters build from it.

Range with constant start, limit and delta is folded with NumPy (``np.arange``). With a limit that is
the size of an axis known only at run time (``Shape`` -> ``Gather`` of a tensor: a load_ops.Dims entry)
it gives a :class:`Positions`: the values start, start + delta, ... below that size, laid out along one
axis of a tensor whose other axes have size 1 (``Unsqueeze`` moves it). Its uses become graphview ops:

* ``positions < lengths`` (positions 0, 1, ... along one axis of a rank-2 tensor, integer lengths of size
  1 along it): graphview's ``sequence_mask`` (how graphview's exporter writes the masks of masked ops,
  and how a padding mask is usually written);
* ``keys <= queries`` (two such positions on the two axes): graphview's ``causal_mask`` (how graphview's
  exporter writes causal attention, PyTorch's ``tril`` of ones);
* any other use (arithmetic, Gather, another comparison...) gets the positions themselves as a tensor,
  computed without knowing the size: the row sums of a causal mask of (size, size), minus 1. That is
  exact for any use, and costs size x size memory and time.

MASK_BUILDERS maps Range, Unsqueeze and the comparisons to builders that fall back to load_dims' and
load_ops' builders for inputs that are not Positions; graphview.onnx.load gives every other builder a
Positions input as the tensor (``materialize``).
"""
import numpy as np

from graphview.onnx.load_dims import DIMS_BUILDERS, filled
from graphview.onnx.load_ops import BUILDERS, Dims, axes_input, axis_of, known, view
from graphview.ops.attention import causal_mask
from graphview.ops.masked import sequence_mask
from graphview.ops.shape import numel
from graphview.variable import Variable


class Positions:
    """Range(start, the size of axis ``axis`` of ``source``, delta) as ``dtype``, along axis ``at`` of a
    tensor of rank ``rank`` (size 1 on its other axes); ``tensor`` caches its materialized value."""

    def __init__(self, source, axis, start, delta, dtype, rank=1, at=0):
        self.source, self.axis, self.start, self.delta, self.dtype = source, axis, start, delta, np.dtype(dtype)
        self.rank, self.at = rank, at
        self.tensor = None

    def placed(self, rank, at):
        return Positions(self.source, self.axis, self.start, self.delta, self.dtype, rank, at)

    def counts_from_zero(self):
        return self.start == 0 and self.delta == 1


def scalar(cx, value, what):
    array = cx.static(value, what)
    if array.size != 1:
        cx.fail(f"{what} must be a scalar, not of shape {array.shape}")
    return array.reshape(())


def range_(cx, node, ins, attrs):
    start, limit, delta = ins
    size_of_axis = isinstance(limit, Dims) and len(limit.entries) == 1 and isinstance(limit.entries[0], tuple)
    if size_of_axis and known(start, delta):
        start, delta = scalar(cx, start, "start"), scalar(cx, delta, "delta")
        if start.dtype.kind not in "iu" or delta.dtype.kind not in "iu":
            cx.fail(f"start and delta must be integers with a limit known only at run time, not {start.dtype}")
        if int(start) < 0 or int(delta) <= 0:
            cx.fail(f"with a limit known only at run time (the size of an axis), start must be >= 0 and delta > "
                    f"0, not start {int(start)} and delta {int(delta)}")
        source, axis = limit.entries[0]
        return [Positions(source, axis, int(start), int(delta), start.dtype)]
    if not known(start, limit, delta):
        cx.fail("the limit must be a constant or the size of an axis (Shape -> Gather), and start and delta "
                "constants; values computed at run time would make the output's size data-dependent")
    start, limit, delta = (scalar(cx, v, what) for v, what in ((start, "start"), (limit, "limit"), (delta, "delta")))
    if delta == 0:
        cx.fail("delta is 0")
    return [np.arange(start, limit, delta).astype(start.dtype)]


def materialize(cx, positions):
    """``positions`` as a Variable of its rank: counting from 0 as the row sums of a causal mask, minus 1."""
    if positions.tensor is None:
        g = cx.g
        square = filled(cx, [(positions.source, positions.axis)] * 2, 0, np.float32)
        counts = g.math.sum(g.math.cast(causal_mask(square), "int64"), axis=1)    # i + 1 in row i
        values = g.math.sub(counts, np.asarray(1, np.int64))
        if not positions.counts_from_zero():
            values = view(cx, values, (slice(positions.start, None, positions.delta),))
        if positions.dtype != np.int64:
            values = g.math.cast(values, positions.dtype.name)
        if positions.rank > 1:
            values = g.shape.reshape(values, tuple(-1 if a == positions.at else 1 for a in range(positions.rank)))
        positions.tensor = values
    return positions.tensor


def unsqueeze(cx, node, ins, attrs):
    positions = ins[0]
    if not isinstance(positions, Positions):
        return DIMS_BUILDERS["Unsqueeze"](cx, node, ins, attrs)
    axes = axes_input(cx, ins, attrs, 13) or []
    rank = positions.rank + len(axes)
    axes = {axis_of(cx, a, rank) for a in axes}
    kept = [a for a in range(rank) if a not in axes]
    return [positions.placed(rank, kept[positions.at])]


def named(cx, mask):
    """The mask, as a view named by the node's output where that is a graph output."""
    if cx.node.output[0] in cx.graph_outputs:
        return view(cx, mask, (Ellipsis,), cx.name())
    return mask


def length_mask(cx, positions, lengths):
    """``positions < lengths`` as graphview's sequence_mask, or None where it is not that form."""
    if not (isinstance(lengths, Variable) and positions.counts_from_zero() and positions.rank == 2
            and len(lengths.shape) == 2 and lengths.shape[positions.at] == 1 and lengths.dtype.kind in "iu"):
        return None
    time, batch = positions.at, 1 - positions.at
    size = lengths.shape[batch]
    items = [None, None]
    items[time] = (positions.source, positions.axis)
    items[batch] = size if size is not None else (lengths, batch)
    like = filled(cx, items, 0, np.float32)
    lengths = view(cx, lengths, tuple(slice(None) if a == batch else 0 for a in range(2)))
    return named(cx, sequence_mask(lengths, like, batch_axis=batch, time_axis=time))


def causal(cx, keys, queries):
    """``keys <= queries`` (two positions on the two axes of a rank-2 tensor) as graphview's causal_mask."""
    if not (keys.counts_from_zero() and queries.counts_from_zero() and keys.rank == queries.rank == 2
            and keys.at != queries.at):
        return None
    source = keys.source
    if queries.source is source and queries.axis == len(source.shape) - 2 and keys.axis == len(source.shape) - 1:
        like = source
    else:
        like = filled(cx, [(queries.source, queries.axis), (keys.source, keys.axis)], 0, np.float32)
    mask = causal_mask(like)                          # [query i, key j]: j <= i
    if queries.at == 1:
        mask = cx.g.linalg.transpose(mask)
    return named(cx, mask)


# a < b is b > a: the op with its operands swapped.
SWAPPED = {"Less": "Greater", "Greater": "Less", "LessOrEqual": "GreaterOrEqual", "GreaterOrEqual": "LessOrEqual"}


def compare(cx, node, ins, attrs):
    a, b = ins
    if not isinstance(a, Positions) and not isinstance(b, Positions):
        return BUILDERS[node.op_type](cx, node, ins, attrs)
    op = node.op_type
    if not isinstance(a, Positions):
        a, b, op = b, a, SWAPPED[op]
    mask = None
    if op == "Less" and not isinstance(b, Positions):
        mask = length_mask(cx, a, b)
    elif op == "LessOrEqual" and isinstance(b, Positions):
        mask = causal(cx, a, b)
    elif op == "GreaterOrEqual" and isinstance(b, Positions):
        mask = causal(cx, b, a)
    if mask is not None:
        return [mask]
    ins = [materialize(cx, v) if isinstance(v, Positions) else v for v in ins]
    return BUILDERS[node.op_type](cx, node, ins, attrs)


def one_hot(cx, node, ins, attrs):
    """OneHot as ``indices == positions`` along the new axis (negative indices counted from the depth's end,
    indices outside [-depth, depth) give a row of the off value), then Where(hot, on, off)."""
    indices, depth, values = ins
    if isinstance(values, Positions) or isinstance(indices, Positions):
        cx.fail("values and indices must not be a Range of a run-time size")
    values = cx.static(values, "values") if not isinstance(values, Variable) else values
    rank = (np.ndim(indices) if known(indices) else len(indices.shape)) + 1
    axis = axis_of(cx, int(attrs.get("axis", -1)), rank)
    if isinstance(depth, Dims) and len(depth.entries) == 1 and isinstance(depth.entries[0], tuple):
        source, along = depth.entries[0]
        positions = materialize(cx, Positions(source, along, 0, 1, np.int64, rank, axis))
        size = cx.g.math.cast(numel(source, axis=along), "int64")
    else:
        size = int(scalar(cx, depth, "depth"))
        positions = np.arange(size, dtype=np.int64).reshape(tuple(-1 if a == axis else 1 for a in range(rank)))
    if known(indices, values):
        indices = np.asarray(indices).astype(np.int64)
        hot = np.expand_dims(np.where(indices < 0, indices + size, indices), axis) == positions
        return [np.where(hot, values[1], values[0]).astype(values.dtype)]
    g = cx.g
    indices = cx.var(indices)
    if indices.dtype.kind not in "iu":
        indices = g.math.cast(indices, "int64")
    wrapped = g.math.where(g.math.lt(indices, np.asarray(0, indices.dtype)), g.math.add(indices, size), indices)
    hot = g.math.eq(g.shape.expand_dims(wrapped, axis), cx.var(positions))
    if isinstance(values, Variable):
        off, on = view(cx, values, (0,)), view(cx, values, (1,))
    else:
        off, on = np.asarray(values[0]), np.asarray(values[1])
    return [g.math.where(hot, on, off, name=cx.name())]


MASK_BUILDERS = {"Range": range_, "Unsqueeze": unsqueeze, "Less": compare, "LessOrEqual": compare,
                 "Greater": compare, "GreaterOrEqual": compare, "OneHot": one_hot}
