"""What the masked ops (masked.py, masked_loss.py) share: the batch/time axis and lengths checks of
their shape and dtype rules, the kernels' layout (batch, time, other axes) and the NumPy mask their
references use. Neither of the two imports the other's helpers, so neither imports the other back.
"""
import numpy as np

from graphview import dtypes
from graphview.errors import ExecutionError, ShapeError
from graphview.shapes import format_shape, normalize_axis
from graphview_kernels import masked as kernels
from graphview_kernels.elementwise import copy as copy_kernel


def check_axes(x, lengths, batch_axis, time_axis):
    """The batch and time axes of the shape ``x`` as positions, after checking them against ``lengths``."""
    rank = len(x)
    b, t = normalize_axis(batch_axis, rank), normalize_axis(time_axis, rank)
    if b == t:
        raise ShapeError(f"the batch axis and the time axis are both axis {b}")
    if len(lengths) != 1:
        raise ShapeError(f"lengths must be 1-D (one length per batch entry), not {format_shape(lengths)}")
    if None not in (lengths[0], x[b]) and lengths[0] != x[b]:
        raise ShapeError(f"{lengths[0]} lengths for a batch axis of size {x[b]} (input {format_shape(x)})")
    return b, t


def check_lengths_dtype(lengths):
    if not dtypes.is_integer(lengths):
        raise dtypes.DTypeError(f"lengths have dtype {lengths.name}; they must be int32 or int64")


def checked_lengths(op, lengths, x, b, t):
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    bad = kernels.first_bad_length(lengths, x.shape[t])
    if bad >= 0:
        raise ExecutionError(f"{op}: length {int(lengths[bad])} of batch entry {bad} is outside [0, {x.shape[t]}], "
                             f"the padded size of axis {t} (input shape {format_shape(x.shape)})")
    return lengths


def canonical(x, b, t, last=()):
    """x moved to (b, t, other axes..., ``last`` axes...) and made C-contiguous."""
    other = [a for a in range(x.ndim) if a not in (b, t) and a not in last]
    order = [b, t] + other + list(last)
    return arranged(x, order), order


def arranged(x, order):
    """x with its axes in ``order``, C-contiguous (a copy only when the moved view is not)."""
    moved = x.transpose(order)
    if not moved.flags.c_contiguous:
        copy = np.empty(moved.shape, x.dtype)
        copy_kernel(moved, copy)
        moved = copy
    return moved


def place(result, order, out, kept):
    """Write ``result`` (axes in ``order``) into ``out`` (the axes ``kept``, in their original order)."""
    arranged = result.transpose([order.index(a) for a in kept])
    copy_kernel(arranged, out)


def mask_array(x, lengths, batch_axis, time_axis):
    """NumPy reference: the bool mask of valid entries, broadcast to x's shape."""
    b, t = batch_axis % x.ndim, time_axis % x.ndim
    valid = np.arange(x.shape[t])[None, :] < np.asarray(lengths)[:, None]
    shape = [1] * x.ndim
    shape[b], shape[t] = x.shape[b], x.shape[t]
    return np.broadcast_to((valid if b < t else valid.T).reshape(shape), x.shape)
