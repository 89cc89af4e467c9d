"""Shape rules shared by op families: broadcasting and axis normalization.

A shape is a tuple whose entries are ints or None (unknown until run time).
"""
from graphview.errors import ShapeError


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
