"""CreateView index descriptors: constructors, the decoder and their NumPy semantics.

A descriptor is a 1-D ``np.int64`` array in the layout of SameDiff's ADR 0021
(type code, count of values, a header stride field, the values, inclusive)::

    point(k)                       [0, 1, 1, k, 1]
    interval(start, end, s, incl)  [1, 2, 1, start, end, s, incl]
    all()                          [2, 0, 1, 1]
    new_axis()                     [3, 1, 10, 1]   (libnd4j's [3, 1, 1, 0, 1] is accepted too)

Their meaning is NumPy's basic indexing (ADR 0008): ``point(k)`` is the integer
index k, ``interval`` is ``slice(start, end, s)`` (``inclusive`` also takes
``end`` itself), ``all()`` is ``slice(None)`` and ``new_axis()`` is ``None``.
Resolving descriptors against a shape and strides is O(rank): nothing here
ever looks at the data.
"""
import builtins
from typing import NamedTuple, Optional

import numpy as np

from graphview.errors import IndexDescriptorError

POINT, INTERVAL, ALL, NEW_AXIS = 0, 1, 2, 3
NAMES = {POINT: "point", INTERVAL: "interval", ALL: "all", NEW_AXIS: "new axis"}
_ARTICLES = {POINT: "a point", INTERVAL: "an interval", ALL: "an all", NEW_AXIS: "a new axis"}

_INT64 = np.dtype(np.int64)
_LOW, _HIGH = -(1 << 63), (1 << 63) - 1


# --- constructors ----------------------------------------------------------------

def _int(value, what):
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise IndexDescriptorError(f"{what} must be an int, not {type(value).__name__} {value!r}")
    value = value.__index__()
    if not _LOW <= value <= _HIGH:
        raise IndexDescriptorError(f"{what} {value} does not fit in int64")
    return value


def point(offset):
    """The integer index ``offset`` (negative counts from the end): ``[0, 1, 1, offset, 1]``."""
    return np.array([POINT, 1, 1, _int(offset, "point: offset"), 1], dtype=np.int64)


def interval(start, end, stride=1, inclusive=False):
    """``slice(start, end, stride)``; ``inclusive=True`` also takes ``end``: ``[1, 2, 1, start, end, stride, inclusive]``."""
    stride = _int(stride, "interval: stride")
    if stride == 0:
        raise IndexDescriptorError("interval: stride must not be 0")
    if not isinstance(inclusive, (bool, np.bool_)) and inclusive not in (0, 1):
        raise IndexDescriptorError(f"interval: inclusive must be a bool, not {inclusive!r}")
    return np.array([INTERVAL, 2, 1, _int(start, "interval: start"), _int(end, "interval: end"), stride,
                     int(bool(inclusive))], dtype=np.int64)


def all():  # noqa: A001 - the contract names it gv.all, shadowing the builtin only as a module attribute
    """Every element of the axis, ``slice(None)``: ``[2, 0, 1, 1]``."""
    return np.array([ALL, 0, 1, 1], dtype=np.int64)


def new_axis():
    """A new axis of size 1, NumPy's ``None``: ``[3, 1, 10, 1]``."""
    return np.array([NEW_AXIS, 1, 10, 1], dtype=np.int64)


# --- decoding ---------------------------------------------------------------------

class Index(NamedTuple):
    """One decoded descriptor. Values are None for a dynamic descriptor not yet known."""
    kind: int
    start: Optional[int] = None      # a point's offset, an interval's start
    end: Optional[int] = None
    stride: Optional[int] = None
    inclusive: Optional[bool] = None

    @property
    def known(self):
        return self.kind in (ALL, NEW_AXIS) or self.start is not None

    def describe(self):
        if self.kind == POINT:
            return f"point({self.start if self.known else '?'})"
        if self.kind == INTERVAL:
            if not self.known:
                return "interval(?)"
            return f"interval({self.start}, {self.end}, {self.stride}{', inclusive' if self.inclusive else ''})"
        return "all()" if self.kind == ALL else "new_axis()"


# Expected (length, count, header stride) per type; new axis has two accepted forms.
_LAYOUTS = {POINT: ((5, 1, 1),), INTERVAL: ((7, 2, 1),), ALL: ((4, 0, 1),), NEW_AXIS: ((4, 1, 10), (5, 1, 1))}
LENGTHS = {POINT: (5,), INTERVAL: (7,), ALL: (4,), NEW_AXIS: (4, 5)}


def _where(position):
    return "descriptor" if position is None else f"descriptor {position}"


def decode(array, position=None):
    """Parse one descriptor into an :class:`Index`, or raise ``IndexDescriptorError`` naming the field."""
    where = _where(position)
    if not isinstance(array, np.ndarray):
        raise IndexDescriptorError(f"{where}: expected an int64 NumPy array (e.g. gv.point(1)), "
                                   f"got {type(array).__name__} {array!r}")
    if array.dtype != _INT64:
        raise IndexDescriptorError(f"{where}: dtype is {array.dtype.name}, it must be int64")
    if array.ndim != 1:
        raise IndexDescriptorError(f"{where}: has shape {array.shape}, it must be 1-D")
    if array.size == 0:
        raise IndexDescriptorError(f"{where}: is empty; field 0 (type) is missing")
    values = [int(v) for v in array]
    kind = values[0]
    if kind not in NAMES:
        raise IndexDescriptorError(f"{where}: field 0 (type) is {kind}; it must be 0 (point), 1 (interval), "
                                   "2 (all) or 3 (new axis)")
    name = _ARTICLES[kind]
    layouts = [layout for layout in _LAYOUTS[kind] if layout[0] == len(values)]
    if not layouts:
        lengths = " or ".join(str(layout[0]) for layout in _LAYOUTS[kind])
        raise IndexDescriptorError(f"{where}: {name} descriptor has {lengths} fields, this one has {len(values)}")
    length, count, header = layouts[0]
    if values[1] != count:
        raise IndexDescriptorError(f"{where}: field 1 (count) of {name} is {values[1]}; it must be {count}")
    if values[2] != header:
        raise IndexDescriptorError(f"{where}: field 2 (header stride) of {name} is {values[2]}; it must be {header}")
    if values[-1] not in (0, 1):
        raise IndexDescriptorError(f"{where}: field {length - 1} (inclusive) is {values[-1]}; it must be 0 or 1")
    if kind == POINT:
        return Index(POINT, start=values[3])
    if kind == INTERVAL:
        if values[5] == 0:
            raise IndexDescriptorError(f"{where}: field 5 (stride) of an interval is 0; it must not be 0")
        return Index(INTERVAL, start=values[3], end=values[4], stride=values[5], inclusive=bool(values[6]))
    if kind == NEW_AXIS and length == 5 and values[3] != 0:
        raise IndexDescriptorError(f"{where}: field 3 of libnd4j's new axis form is {values[3]}; it must be 0")
    return Index(kind)


def kind_of_length(length, position=None):
    """The type a dynamic descriptor of this length is taken to have when the graph is built."""
    guesses = {7: INTERVAL, 5: POINT, 4: ALL}
    if length not in guesses:
        raise IndexDescriptorError(
            f"{_where(position)}: a dynamic descriptor needs a known length of 4 (all), 5 (point) or 7 (interval) "
            f"when the graph is built, not {length if length is not None else 'an unknown length'}")
    return guesses[length]


def encode(index):
    """The canonical descriptor array of a decoded :class:`Index`."""
    if index.kind == POINT:
        return point(index.start)
    if index.kind == INTERVAL:
        return interval(index.start, index.end, index.stride, index.inclusive)
    return all() if index.kind == ALL else new_axis()


# --- resolving against a shape -------------------------------------------------------

class Layout(NamedTuple):
    """The view's shape, strides and offset (in the units of the given strides), and its NumPy key.

    strides, offset and key are None when the shape, the strides or a descriptor is not known yet.
    """
    shape: tuple
    strides: Optional[tuple]
    offset: Optional[int]
    key: tuple


def _interval_range(index, size, position):
    """(first element, length) of an interval on an axis of ``size``, exactly as NumPy's slicing."""
    start, end, stride = index.start, index.end, index.stride
    if start < 0:
        start += size
    if end < 0:
        end += size
    if index.inclusive:
        end += 1 if stride > 0 else -1
    if stride > 0:
        start = min(max(start, 0), size)
        end = min(max(end, 0), size)
        length = max(0, -(-(end - start) // stride))
    else:
        start = min(max(start, -1), size - 1)
        end = min(max(end, -1), size - 1)
        length = max(0, -(-(start - end) // -stride))
    if length == 0:
        start = 0
    return start, length


def _exact_slice(start, length, stride):
    """A slice that selects exactly ``length`` elements from ``start`` (no negative-index wrap)."""
    if length == 0:
        return slice(0, 0, 1)
    stop = start + length * stride
    return slice(start, stop if stop >= 0 else None, stride)


def resolve(indices, shape, strides=None, position_base=0):
    """Apply decoded descriptors to an array's ``shape`` (and ``strides``): O(rank), never touches data.

    ``shape`` may hold None (unknown until run time); then the affected sizes are
    None, and the checks that need them wait for run time. Unknown dynamic
    descriptors (values None) give None sizes. Returns a :class:`Layout`; its
    ``key`` (ints, exact slices, None) is the same view by NumPy basic indexing.
    """
    consumed = sum(index.kind != NEW_AXIS for index in indices)
    if consumed > len(shape):
        raise IndexDescriptorError(
            f"{len(indices)} descriptors index {consumed} axes, but the input has only {len(shape)} "
            f"(shape {tuple(shape)})")
    known = strides is not None and None not in shape and builtins.all(i.known for i in indices)
    out_shape, out_strides, key = [], [], []
    offset = 0
    axis = 0
    for number, index in enumerate(indices):
        position = position_base + number
        if index.kind == NEW_AXIS:
            out_shape.append(1)
            out_strides.append(0)
            key.append(None)
            continue
        size = shape[axis]
        stride = strides[axis] if strides is not None else None
        axis += 1
        if index.kind == ALL:
            out_shape.append(size)
            out_strides.append(stride)
            key.append(slice(None))
        elif index.kind == POINT:
            if not index.known:
                continue
            k = index.start
            if size is not None:
                if not -size <= k < size:
                    raise IndexDescriptorError(
                        f"descriptor {position}: field 3 (offset) point({k}) is out of range for axis {axis - 1} "
                        f"of size {size}")
                k %= size
            elif k < 0:
                continue
            if known:
                offset += k * stride
            key.append(k)
        else:
            if not index.known or size is None:
                out_shape.append(None)
                out_strides.append(None)
                continue
            first, length = _interval_range(index, size, position)
            out_shape.append(length)
            out_strides.append(None if stride is None else stride * index.stride)
            if known:
                offset += first * stride
            key.append(_exact_slice(first, length, index.stride))
    for rest in range(axis, len(shape)):
        out_shape.append(shape[rest])
        out_strides.append(strides[rest] if strides is not None else None)
    if not known:
        return Layout(tuple(out_shape), None, None, None)
    return Layout(tuple(out_shape), tuple(out_strides), offset, tuple(key) + (Ellipsis,))


def view(array, indices, position_base=0):
    """The view of ``array`` that ``indices`` select: shares its buffer, costs O(rank)."""
    layout = resolve(indices, array.shape, array.strides, position_base)
    return array[layout.key]


def from_numpy_key(key, rank, dynamic=lambda item: False):
    """(descriptors, None) for a NumPy basic index of ints, slices, None and one Ellipsis.

    Items for which ``dynamic(item)`` holds are passed through in place (they index
    one axis). The first item that is not basic indexing is returned as (None, item).
    """
    items = key if isinstance(key, tuple) else (key,)
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexDescriptorError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    descriptors = []
    for item in items:
        if item is Ellipsis:
            descriptors.extend(all() for _ in range(max(0, rank - consumed)))
        elif item is None:
            descriptors.append(new_axis())
        elif dynamic(item):
            descriptors.append(item)
        elif isinstance(item, slice):
            descriptors.append(_slice_descriptor(item))
        elif isinstance(item, (bool, np.bool_)) or not hasattr(item, "__index__") or \
                (isinstance(item, np.ndarray) and item.ndim > 0):
            return None, item
        else:
            descriptors.append(point(item))
    return descriptors, None


def _clamp(value, what):
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise IndexDescriptorError(f"slice {what} must be an int or None, not {type(value).__name__} {value!r}")
    return min(max(value.__index__(), _LOW), _HIGH)


def _slice_descriptor(item):
    stride = 1 if item.step is None else _clamp(item.step, "step")
    if stride == 0:
        raise IndexDescriptorError("slice step cannot be zero")
    if item.start is None:
        start = 0 if stride > 0 else -1
    else:
        start = _clamp(item.start, "start")
    if item.stop is None:
        # "To the end" as an inclusive end: -1 (the last element) going up, 0 going down.
        return interval(start, -1 if stride > 0 else 0, stride, inclusive=True)
    return interval(start, _clamp(item.stop, "stop"), stride)
