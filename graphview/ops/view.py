"""CreateView (zero-copy views from INT64 index descriptors), basic indexing and gather.

``create_view(x, *descriptors)`` is a view op: its kernel returns a NumPy view
of x, built in O(rank) from the descriptors, and never copies. Descriptors
given as arrays (or CONSTANT variables) are decoded when the op is built and
stored in the ``descriptors`` attribute; descriptors computed by the graph are
op inputs, decoded and validated when the op runs, before anything reads or
writes memory. ``gather`` is the copying op for integer-array indices. The gradient
rules are in graphview/gradients/view.py.
See ADR 0008.
"""
import functools
import math

import numpy as np

from graphview import attributes, dtypes, indexing
from graphview.errors import ExecutionError, GraphviewError, IndexDescriptorError, ShapeError
from graphview.indexing import Index
from graphview.ops.math import cast
from graphview.ops.shape import concat, reshape
from graphview.registry import defop, default_graph, public
from graphview.shapes import format_shape, normalize_axis
from graphview.testing import Sample, transposed
from graphview.variable import Kind, Variable
from graphview_kernels import indexing as kernels
from graphview_kernels.elementwise import copy as copy_kernel

DYNAMIC = "dynamic"


# --- descriptor attributes ---------------------------------------------------------
# The ``descriptors`` attribute holds one entry per descriptor: the canonical
# int64 values of a descriptor known when the graph is built, or
# ("dynamic", type code) for one that is the next graph input.

@functools.lru_cache(maxsize=4096)
def _static_index(entry, position):
    return indexing.decode(np.array(entry, dtype=np.int64), position)


def indices_of(entries, arrays=None, position_base=0):
    """Decoded descriptors for ``entries``; dynamic ones from ``arrays`` (run time) or unknown (build time)."""
    indices = []
    dynamic = iter(arrays) if arrays is not None else None
    for number, entry in enumerate(entries):
        position = position_base + number
        if entry[0] != DYNAMIC:
            indices.append(_static_index(entry, position))
            continue
        kind = entry[1]
        if dynamic is None:
            indices.append(Index(kind))
            continue
        index = indexing.decode(next(dynamic), position)
        if index.kind != kind:
            raise IndexDescriptorError(
                f"descriptor {position}: field 0 (type) is {index.kind} ({indexing.NAMES[index.kind]}) at run time, "
                f"but the graph was built for a {indexing.NAMES[kind]}; a dynamic descriptor keeps its type")
        indices.append(index)
    return indices


def _check_dynamic_shapes(entries, shapes, position_base=0):
    dynamic = iter(shapes)
    for number, entry in enumerate(entries):
        if entry[0] != DYNAMIC:
            continue
        shape = next(dynamic)
        position = position_base + number
        if len(shape) != 1:
            raise IndexDescriptorError(f"descriptor {position}: has shape {format_shape(shape)}, it must be 1-D")
        if shape[0] is not None and shape[0] not in indexing.LENGTHS[entry[1]]:
            raise IndexDescriptorError(
                f"descriptor {position}: a {indexing.NAMES[entry[1]]} has "
                f"{' or '.join(map(str, indexing.LENGTHS[entry[1]]))} fields, this one has {shape[0]}")


def count_dynamic(entries):
    return sum(entry[0] == DYNAMIC for entry in entries)


def view_shape(x_shape, entries, dynamic_shapes, position_base=0):
    """The shape of the view ``entries`` select from ``x_shape`` (None where it depends on run-time values)."""
    _check_dynamic_shapes(entries, dynamic_shapes, position_base)
    return indexing.resolve(indices_of(entries, position_base=position_base), x_shape,
                            position_base=position_base).shape


@functools.lru_cache(maxsize=4096)
def _static_key(entries, shape, strides):
    return indexing.resolve(indices_of(entries), shape, strides).key


def apply_view(x, entries, arrays=(), position_base=0):
    """The view of the array ``x`` that ``entries`` select (O(rank), shares x's buffer)."""
    if not arrays and position_base == 0:
        return x[_static_key(entries, x.shape, x.strides)]
    return indexing.view(x, indices_of(entries, arrays, position_base), position_base)


def entries_for(graph, descriptors, what):
    """(entries, dynamic variables) for user-given descriptors: arrays, CONSTANTs or INT64 variables."""
    entries, dynamic = [], []
    for position, descriptor in enumerate(descriptors):
        if isinstance(descriptor, Variable):
            node = descriptor.node
            if node.kind is Kind.CONSTANT:
                descriptor = graph.stored(node.name)
            else:
                if node.dtype != dtypes.INT64:
                    raise IndexDescriptorError(f"{what}: descriptor {position} ({node.name!r}) has dtype "
                                               f"{node.dtype.name}, it must be int64")
                if len(node.shape) != 1:
                    raise IndexDescriptorError(f"{what}: descriptor {position} ({node.name!r}) has shape "
                                               f"{format_shape(node.shape)}, it must be 1-D")
                try:
                    kind = indexing.kind_of_length(node.shape[0], position)
                except IndexDescriptorError as error:
                    raise IndexDescriptorError(f"{what}: {error}") from None
                entries.append((DYNAMIC, kind))
                dynamic.append(descriptor)
                continue
        try:
            index = indexing.decode(descriptor, position)
        except IndexDescriptorError as error:
            raise IndexDescriptorError(f"{what}: {error}") from None
        entries.append(tuple(int(v) for v in indexing.encode(index)))
    return tuple(entries), dynamic


# --- create_view -------------------------------------------------------------------------

def _create_view_samples():
    r = np.random.default_rng(11)
    a = r.random((4, 6))
    P, I, A, N = indexing.point, indexing.interval, indexing.all, indexing.new_axis

    def attrs(*ds):
        return {"descriptors": tuple(tuple(int(v) for v in d) for d in ds)}
    return [
        Sample((a,), attrs(P(1), I(0, 6, 2)), label="point interval"),
        Sample((a,), attrs(I(3, 0, -1, True), N(), A()), label="inclusive reversed, new axis"),
        Sample((a.astype(np.float32),), attrs(A(), P(-1)), label="float32 negative point"),
        Sample((transposed(a),), attrs(I(1, -1), I(-1, 0, -2)), label="transposed base"),
        Sample((a[::-1, ::2],), attrs(I(0, 10, 3)), label="negative-stride base"),
        Sample((np.float64(3.5) * np.ones(()),), attrs(N()), label="rank 0"),
        Sample((a.astype(np.int64),), attrs(I(5, 2)), label="int64 empty"),
        Sample((a, P(2)), {"descriptors": ((DYNAMIC, indexing.POINT), tuple(int(v) for v in I(0, 6, 2)))},
               label="dynamic point", constant_inputs=(1,)),
        Sample((a, I(-1, 0, -1, True)), {"descriptors": ((DYNAMIC, indexing.INTERVAL),)},
               label="dynamic interval", constant_inputs=(1,)),
    ]


def _create_view_reference(x, *arrays, descriptors):
    """The same view by NumPy basic indexing, written independently of graphview.indexing."""
    key, axis = [], 0
    dynamic = iter(arrays)
    for entry in descriptors:
        values = [int(v) for v in (next(dynamic) if entry[0] == DYNAMIC else entry)]
        if values[0] == indexing.NEW_AXIS:
            key.append(None)
            continue
        size = x.shape[axis]
        axis += 1
        if values[0] == indexing.POINT:
            key.append(values[3])
        elif values[0] == indexing.ALL:
            key.append(slice(None))
        elif not values[6]:
            key.append(slice(values[3], values[4], values[5]))
        else:
            start, end, stride = values[3:6]
            end = (end + size if end < 0 else end) + (1 if stride > 0 else -1)
            key.append(slice(start, end if end >= 0 else (0 if stride > 0 else None), stride))
    return x[tuple(key) + (Ellipsis,)]


create_view_op = defop(
    "create_view",
    shape=lambda x, *dynamic, descriptors: view_shape(x, descriptors, dynamic),
    kernel=lambda x, *dynamic, descriptors: apply_view(x, descriptors, dynamic),
    view=True, accepts=dtypes.ALL, promote_inputs=(0,), samples=_create_view_samples,
    reference=_create_view_reference, family="shape", attrs={"descriptors": attributes.Descriptors(1, DYNAMIC)},
    doc="The view of x selected by INT64 index descriptors (point, interval, all, new axis); never a copy.")


def _scatter_view_kernel(values, like, *rest, descriptors):
    *arrays, out = rest
    region = apply_view(out, descriptors, arrays)
    starts = _box_starts(out, region)
    source = np.broadcast_to(values, region.shape)
    if starts is None:
        if out.flags.c_contiguous:
            kernels.fill(out.reshape(-1), out.dtype.type(0))
        else:                               # reshape would fill a copy (the executor's outputs are C-ordered)
            copy_kernel(np.broadcast_to(np.zeros((), out.dtype), out.shape), out)
        copy_kernel(source, region)
        return
    # A box: zeros around it and the values in it, each element written once. NumPy stages values that are
    # not C-ordered (a transposed gradient); one value broadcast everywhere (a sum's gradient) goes as itself.
    flat = np.ascontiguousarray(source).reshape(-1) if any(source.strides) else np.full(1, source[(0,) * source.ndim])
    kernels.scatter_box(flat, out.reshape(-1), np.array(out.shape, np.int64), np.array(starts, np.int64),
                        np.array(region.shape, np.int64), out.dtype.type(0))


def _box_starts(out, region):
    """The index of the region's first element in ``out`` (C-contiguous) when the region is a box of it
    (every axis kept with step 1, as a slice gives), else None."""
    if region.ndim != out.ndim or region.ndim == 0 or region.size == 0 or not out.flags.c_contiguous:
        return None
    if any(r != o for r, o, n in zip(region.strides, out.strides, region.shape) if n > 1):
        return None
    offset = region.__array_interface__["data"][0] - out.__array_interface__["data"][0]
    starts = []
    for stride, size in zip(out.strides, out.shape):
        start, offset = divmod(offset, stride) if stride else (0, offset)
        starts.append(start)
    if offset or any(b + n > size for b, n, size in zip(starts, region.shape, out.shape)):
        return None
    return starts


def _scatter_view_samples():
    r = np.random.default_rng(14)
    entries = ((0, 1, 1, 1, 1), (1, 2, 1, 0, 6, 2, 0))
    return [Sample((r.random(3), np.zeros((4, 6))), {"descriptors": entries}, label="row", constant_inputs=(1,)),
            Sample((r.random((4, 1, 2)).astype(np.float32), transposed(np.zeros((4, 2), np.float32))),
                   {"descriptors": ((1, 2, 1, -1, 0, -1, 1), (3, 1, 10, 1))}, label="reversed new axis float32",
                   constant_inputs=(1,)),
            Sample((r.random(6), np.zeros((4, 6)), np.array([0, 1, 1, -1, 1])),
                   {"descriptors": ((DYNAMIC, indexing.POINT),)}, label="dynamic point", constant_inputs=(1, 2))]


def _scatter_view_reference(values, like, *arrays, descriptors):
    out = np.zeros(like.shape, values.dtype)
    _create_view_reference(out, *arrays, descriptors=descriptors)[...] = values
    return out


def _scatter_view_shape(values, like, *dynamic, descriptors):
    region = view_shape(like, descriptors, dynamic)
    if len(values) != len(region) or any(a is not None and b is not None and a != b for a, b in zip(values, region)):
        raise ShapeError(f"values of shape {format_shape(values)} do not fill the view of shape {format_shape(region)}")
    return like


scatter_view = defop(
    "scatter_view", shape=_scatter_view_shape, kernel=_scatter_view_kernel,
    promote_inputs=(0,), accepts=dtypes.NUMERIC, samples=_scatter_view_samples, reference=_scatter_view_reference,
    family="shape", attrs={"descriptors": attributes.Descriptors(1, DYNAMIC)}, doc="Zeros of like's shape with values written into the view the descriptors select.")


@public("shape")
def create_view(x, *descriptors, name=None):
    """The view of x that the descriptors select (NumPy basic indexing); shares x's buffer, O(1)."""
    graph = _graph_of(x, "create_view")
    entries, dynamic = entries_for(graph, descriptors, "create_view")
    return create_view_op(x, *dynamic, name=name, descriptors=entries)


def _graph_of(x, what):
    if not isinstance(x, Variable):
        raise GraphviewError(f"{what}: the input must be a graph variable, not {type(x).__name__}")
    return x.graph


# --- basic indexing on a Variable ----------------------------------------------------------

@public("variable")   # Variable.__getitem__ finds it here (graphview/variable.py)
def getitem(x, key):
    """``x[key]`` for ints, slices, None, ``...`` and INT64 scalar variables: a create_view."""
    graph = x.graph
    rank = len(x.shape)

    def dynamic_point(item):
        return isinstance(item, Variable)
    descriptors, bad = indexing.from_numpy_key(key, rank, dynamic=dynamic_point)
    if bad is not None:
        raise IndexDescriptorError(
            f"{x.name}[{_describe_key(key)}]: {type(bad).__name__} indices select a copy, not a view; "
            f"use g.shape.gather(x, indices, axis) for integer arrays (np.flatnonzero(mask) for a boolean mask)")
    converted = []
    for descriptor in descriptors:
        if isinstance(descriptor, Variable):
            descriptor = _point_variable(graph, x, descriptor)
        converted.append(descriptor)
    return create_view(x, *converted)


def _point_variable(graph, x, k):
    if k.graph is not graph:
        raise GraphviewError(f"{x.name}[{k.name}]: the index belongs to graph {k.graph.name!r}")
    if k.shape != () or not dtypes.is_integer(k.dtype):
        raise IndexDescriptorError(
            f"{x.name}[{k.name}]: a variable index must be an integer scalar (a dynamic point); {k.name!r} has "
            f"shape {format_shape(k.shape)} and dtype {k.dtype.name}; for integer arrays use g.shape.gather")
    token = default_graph.set(graph)
    try:
        offset = reshape(cast(k, "int64") if k.dtype != dtypes.INT64 else k, (1,))
        return concat([graph.constant_like(np.array([0, 1, 1], np.int64), None), offset,
                       graph.constant_like(np.array([1], np.int64), None)])
    finally:
        default_graph.reset(token)


def _describe_key(key):
    items = key if isinstance(key, tuple) else (key,)
    return ", ".join("..." if i is Ellipsis else repr(i) for i in items)


# --- gather ----------------------------------------------------------------------------------

def _gather_shape(x, indices, axis=0):
    if not x:
        raise ShapeError("cannot gather from a rank-0 input")
    axis = normalize_axis(axis, len(x))
    return x[:axis] + tuple(indices) + x[axis + 1:]


def _gather_dtype(x, indices, axis=0):
    if not dtypes.is_integer(indices):
        raise dtypes.DTypeError(f"indices have dtype {indices.name}; they must be int32 or int64")
    return x


def as_3d(x, axis):
    """x as (outer, size, inner): a view when the layout allows, else a contiguous copy."""
    outer = math.prod(x.shape[:axis])
    inner = math.prod(x.shape[axis + 1:])
    view = x.view()
    try:
        view.shape = (outer, x.shape[axis], inner)
    except AttributeError:
        out = np.empty(x.shape, x.dtype)
        copy_kernel(x, out)
        view = out.reshape(outer, x.shape[axis], inner)
    return view


def _gather_kernel(x, indices, out, axis=0):
    axis = axis % x.ndim
    flat = np.ascontiguousarray(indices, np.int64).reshape(-1)   # int64: one compiled signature
    bad = kernels.first_bad_index(flat, x.shape[axis])
    if bad >= 0:
        raise ExecutionError(f"gather: index {int(flat[bad])} is out of range for axis {axis} of size "
                             f"{x.shape[axis]} (input shape {format_shape(x.shape)})")
    if out.size:
        x3 = as_3d(x, axis)
        kernels.gather(x3, flat, out.reshape(x3.shape[0], flat.size, x3.shape[2]))


def _gather_samples():
    r = np.random.default_rng(12)
    x = r.random((4, 5))
    return [Sample((x, np.array([3, 0, -1, 3])), {"axis": 0}, label="rows, repeated", constant_inputs=(1,)),
            Sample((x, np.array([[1, 2], [4, 0]], np.int32)), {"axis": 1}, label="2-D int32 indices", constant_inputs=(1,)),
            Sample((transposed(x).astype(np.float32), np.array([2])), {"axis": -1}, label="transposed float32",
                   constant_inputs=(1,)),
            Sample((x.astype(np.int64), np.zeros(0, np.int64)), {"axis": 0}, label="no indices", constant_inputs=(1,))]


_gather = defop("gather", shape=_gather_shape, kernel=_gather_kernel, dtype=_gather_dtype,
                accepts=dtypes.ALL, promote="same", promote_inputs=(0,), samples=_gather_samples,
                reference=lambda x, indices, axis=0: np.take(x, indices, axis=axis), family="shape",
                attrs={"axis": attributes.Axis()}, doc="x[..., indices, ...] along axis: the copying op for integer-array indices.")


@public("shape")
def gather(x, indices, axis=0, *, name=None):
    """x[..., indices, ...] along axis (a copy): the op for integer-array indices."""
    return _gather(x, indices, name=name, axis=axis)


def _scatter_add_shape(values, indices, like, axis=0):
    if not like:
        raise ShapeError("cannot scatter into a rank-0 like")
    expected = _gather_shape(like, indices, axis)
    if len(values) != len(expected) or any(a is not None and b is not None and a != b
                                           for a, b in zip(values, expected)):
        raise ShapeError(f"values have shape {format_shape(values)}; indices of shape {format_shape(indices)} "
                         f"along axis {axis} of {format_shape(like)} need values of shape {format_shape(expected)}")
    return like


def _scatter_add_kernel(values, indices, like, out, axis=0):
    axis = axis % like.ndim
    flat = np.ascontiguousarray(indices, np.int64).reshape(-1)   # int64: one compiled signature
    # The kernel writes out[..., k, ...] unchecked (Numba does no bounds checks), so a
    # bad index must be refused here, before anything is written.
    bad = kernels.first_bad_index(flat, like.shape[axis])
    if bad >= 0:
        raise ExecutionError(f"scatter_add: index {int(flat[bad])} is out of range for axis {axis} of size "
                             f"{like.shape[axis]} (like has shape {format_shape(like.shape)}); "
                             f"indices must lie in [-{like.shape[axis]}, {like.shape[axis]})")
    kernels.fill(out.reshape(-1), out.dtype.type(0))
    if out.size == 0:
        return
    out3 = out.reshape(as_3d(like, axis).shape) if like.size else out
    source = np.ascontiguousarray(values).reshape(out3.shape[0], flat.size, out3.shape[2])
    kernels.scatter_add(source, flat, out3)


def _scatter_add_reference(values, indices, like, axis=0):
    out = np.zeros(like.shape, values.dtype)
    moved = np.moveaxis(out, axis, 0)
    np.add.at(moved, np.asarray(indices).reshape(-1),
              np.moveaxis(values.reshape(like.shape[:axis % like.ndim] + (-1,) + like.shape[axis % like.ndim + 1:]),
                          axis, 0))
    return out


scatter_add = defop(
    "scatter_add", shape=_scatter_add_shape, kernel=_scatter_add_kernel,
    dtype=lambda values, indices, like, axis=0: _gather_dtype(values, indices),
    promote_inputs=(0,), accepts=dtypes.NUMERIC,
    samples=lambda: [Sample((np.arange(8.0).reshape(4, 2), np.array([1, 1, 0, -1]), np.zeros((3, 2))), {"axis": 0},
                            label="repeated", constant_inputs=(1, 2))],
    reference=_scatter_add_reference, family="shape", attrs={"axis": attributes.Axis(input="like")},
    doc="Zeros of like's shape with values added at indices along axis: the gradient of gather.")
