"""Shape rules shared by op families: broadcasting, axis normalization, and the sizes NumPy can hold.

A shape is a tuple whose entries are ints or None (unknown until run time).
"""
import numpy as np

from graphview import dtypes
from graphview.errors import GraphviewError, ShapeError


def format_shape(shape):
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(*shapes):
    """NumPy broadcasting over shapes that may hold None (unknown) dims."""
    rank = max((len(s) for s in shapes), default=0)
    result = []
    for position in range(rank):
        dims = [s[len(s) - rank + position] for s in shapes if len(s) - rank + position >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            described = " and ".join(format_shape(s) for s in shapes)
            raise ShapeError(f"shapes {described} do not broadcast (axis {position - rank}: {sorted(known)})")
        if known:
            result.append(known.pop())
        elif any(d is None for d in dims):
            result.append(None)
        else:
            result.append(1)
    return tuple(result)


def normalize_axis(axis, rank):
    """One axis as a non-negative int, with a clear error when out of range."""
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise ShapeError(f"axis {axis!r} is not an int")
    axis = axis.__index__()
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def normalize_axes(axis, rank):
    """``axis`` (None, an int or a sequence of ints) as a sorted tuple of distinct axes."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (list, tuple)):
        axes = tuple(sorted(normalize_axis(a, rank) for a in axis))
        if len(set(axes)) != len(axes):
            raise ShapeError(f"axis {tuple(axis)} repeats an axis")
        return axes
    return (normalize_axis(axis, rank),)


def squeeze_axes(shape, axis):
    """The axes ``squeeze(axis=axis)`` removes from ``shape``: all size-1 axes for None."""
    if axis is None:
        if None in shape:
            raise ShapeError(f"squeeze of {format_shape(shape)} needs an explicit axis (some sizes are unknown)")
        return tuple(i for i, d in enumerate(shape) if d == 1)
    axes = normalize_axes(axis, len(shape))
    for a in axes:
        if shape[a] not in (1, None):
            raise ShapeError(f"cannot squeeze axis {a} of size {shape[a]} in {format_shape(shape)}")
    return axes


def expand_axes(rank, axis):
    """The positions of the new axes ``expand_dims(axis=axis)`` inserts into a rank-``rank`` shape."""
    axes = tuple(axis) if isinstance(axis, tuple) else (axis,)
    return normalize_axes(axes, rank + len(axes))


def known_size(shape):
    """The number of elements, or None when a dim is unknown."""
    size = 1
    for d in shape:
        if d is None:
            return None
        size *= d
    return size


# --- sizes NumPy can hold (checked when a node or a stored value is made) ------------------

MAX_RANK = 64           # NumPy's limit on the number of dimensions
MAX_BYTES = 2 ** 63 - 1  # NumPy's limit on size * itemsize (int64 strides and offsets)


def check_size(shape, dtype, what):
    """Refuse a shape NumPy could never allocate: more than 64 axes, or too many bytes.

    Unknown (None) sizes are skipped; like NumPy, size-0 axes do not excuse the others."""
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{what}: a shape of rank {len(shape)} has more than NumPy's {MAX_RANK} dimensions")
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 1
    total = itemsize
    for dim in shape:
        if dim is not None and dim > 0:
            total *= dim
    if total > MAX_BYTES:
        raise ShapeError(f"{what}: shape {format_shape(shape)} of {np.dtype(dtype).name if dtype is not None else 'any dtype'} "
                         f"needs {total} bytes; an array holds at most 2**63 - 1")


def check_shape(shape, what, allow_none):
    """``shape`` (an int or a sequence of ints, None allowed where ``allow_none``) as a tuple of ints."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what}: shape {shape!r} is not a tuple of ints") from None
    for dim in shape:
        if dim is None and allow_none:
            continue
        if isinstance(dim, bool) or not hasattr(dim, "__index__"):
            raise ShapeError(f"{what}: shape {shape!r} holds {dim!r}, which is not an int")
        if dim.__index__() < 0:
            raise ShapeError(f"{what}: shape {shape!r} has a negative size {dim}")
    return tuple(d if d is None else d.__index__() for d in shape)


def as_array(value, dtype, what):
    """A C-ordered copy of ``value`` in ``dtype`` (None: NumPy's choice), refused unless graphview has its dtype."""
    try:
        array = np.array(value, dtype=dtype, copy=True, order="C")
    except (TypeError, ValueError) as error:
        raise GraphviewError(f"{what}: cannot make an array of {type(value).__name__}: {error}") from None
    dtypes.as_dtype(array.dtype, what)
    return array
