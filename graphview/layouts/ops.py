"""The view ops layouts and rearrange are built from: merging and splitting axes.

``merge_axes`` joins adjacent axes into one. It is a view op: its kernel returns
a NumPy view when the strides allow, and a contiguous copy otherwise (as
``reshape`` does). When the layout code knows at build time that the input is
not contiguous (it was permuted), it emits ``merge_axes_copy`` instead, a kernel
op, so that ``g.explain`` says "kernel" where a copy happens. Unlike ``reshape``,
both work when several of the merged sizes are unknown until run time.
``split_axis`` splits one axis in two or more; splitting is always a view.
Their gradient rules are in graphview/gradients/layouts.py.
"""
import math
from dataclasses import dataclass

import numpy as np

from graphview import attributes, dtypes
from graphview.dims import batch_dim
from graphview.errors import ExecutionError, ShapeError
from graphview.layouts import table
from graphview.ops.math import mul
from graphview.registry import defop
from graphview.shapes import normalize_axis
from graphview.testing import Sample, strided, transposed
from graphview_kernels import packing
from graphview_kernels.elementwise import copy as copy_kernel


def _merged_shape(x, start, stop):
    if not 0 <= start < stop <= len(x):
        raise ShapeError(f"cannot merge axes [{start}, {stop}) of an input of rank {len(x)}")
    sizes = x[start:stop]
    merged = None if None in sizes else int(np.prod(sizes, dtype=np.int64))
    return tuple(x[:start]) + (merged,) + tuple(x[stop:])


def _merge_view(x, start, stop):
    shape = _merged_shape(x.shape, start, stop)
    view = x.view()
    try:
        view.shape = shape
    except AttributeError:
        out = np.empty(x.shape, x.dtype)
        copy_kernel(x, out)
        return out.reshape(shape)
    return view


def _merge_copy(x, out, start, stop):
    copy_kernel(x, out.reshape(x.shape))


def _merge_samples():
    r = np.random.default_rng(80)
    x = r.random((2, 3, 4))
    return [Sample((x,), {"start": 1, "stop": 3}, label="trailing"),
            Sample((x.astype(np.float32),), {"start": 0, "stop": 2}, label="leading float32"),
            Sample((x.transpose(2, 0, 1),), {"start": 1, "stop": 3}, label="permuted (copies)"),
            Sample((strided(x),), {"start": 1, "stop": 3}, label="strided"),
            Sample((x.astype(np.int64),), {"start": 0, "stop": 3}, label="all int64"),
            Sample((np.zeros((0, 3, 2)),), {"start": 1, "stop": 3}, label="empty")]


def _merge_reference(x, start, stop):
    return np.reshape(x, x.shape[:start] + (-1,) + x.shape[stop:]) if x.size else \
        np.zeros(_merged_shape(x.shape, start, stop), x.dtype)


merge_axes = defop("merge_axes", shape=_merged_shape, kernel=_merge_view, view=True,
                   accepts=dtypes.ALL, samples=_merge_samples, reference=_merge_reference, family="shape",
                   doc="Axes [start, stop) of x merged into one (a view when the strides allow, else a copy).",
                   attrs={"start": attributes.Int(minimum=0), "stop": attributes.Int(minimum=0)})
merge_axes_copy = defop("merge_axes_copy", shape=_merged_shape, kernel=_merge_copy,
                        accepts=dtypes.ALL, samples=_merge_samples, reference=_merge_reference, family="shape",
                        doc="Axes [start, stop) of x merged into one, copied into a new contiguous buffer.",
                        attrs={"start": attributes.Int(minimum=0), "stop": attributes.Int(minimum=0)})


def _split_sizes(size, sizes):
    sizes = tuple(sizes)
    if sum(s == -1 for s in sizes) > 1 or any(s < -1 for s in sizes):
        raise ShapeError(f"split sizes {sizes} may hold one -1 and otherwise sizes >= 0")
    known = math.prod(s for s in sizes if s != -1)
    if -1 not in sizes:
        if size is not None and size != known:
            raise ShapeError(f"cannot split an axis of size {size} into {sizes} ({known} elements)")
        return sizes
    if size is None:
        return tuple(None if s == -1 else s for s in sizes)
    if known == 0 or size % known:
        raise ShapeError(f"cannot split an axis of size {size} into {sizes}")
    return tuple(size // known if s == -1 else s for s in sizes)


def _split_shape(x, axis, sizes):
    axis = normalize_axis(axis, len(x))
    return tuple(x[:axis]) + _split_sizes(x[axis], sizes) + tuple(x[axis + 1:])


def _split_view(x, axis, sizes):
    shape = _split_shape(x.shape, axis, sizes)
    view = x.view()
    try:
        view.shape = shape
    except AttributeError:   # not reached for a split, kept as the safe fallback
        return np.reshape(x, shape)
    return view


def _split_samples():
    r = np.random.default_rng(81)
    x = r.random((2, 12))
    return [Sample((x,), {"axis": 1, "sizes": (3, 4)}, label="two"),
            Sample((x.astype(np.float32),), {"axis": -1, "sizes": (2, -1, 2)}, label="three with -1"),
            Sample((transposed(x.T),), {"axis": 0, "sizes": (3, -1)}, label="transposed"),
            Sample((strided(x),), {"axis": 1, "sizes": (6, 2)}, label="strided")]


split_axis = defop("split_axis", shape=_split_shape, kernel=_split_view, view=True,
                   accepts=dtypes.ALL, samples=_split_samples,
                   reference=lambda x, axis, sizes: np.reshape(x, _split_shape(x.shape, axis, sizes)),
                   family="shape", doc="Axis ``axis`` of x split into ``sizes`` (one may be -1); always a view.",
                   attrs={"axis": attributes.Axis(), "sizes": attributes.Shape(minus_one=True)})



# --- packing: merges whose padding is not at the end --------------------------------------------
# Merging (f t) where t has lengths interleaves padding (each f row ends with t's padding), and so does
# merging two dims with lengths; a masked op reads a prefix of an axis. pack_axes moves each batch
# entry's valid box (row-major) to the front of the merged axis, so the merged dim has the lengths
# f * t's (t1's * t2's); unpack_axis puts the entries back, with zeros at the padding, into the
# padded sizes of ``like`` (the tensor before the merge). Rules in graphview/gradients/packing.py.

def _pack_checks(op, x, lengths, batch_axis, first, last, dynamic, factors):
    rank = len(x)
    if not 0 <= batch_axis < rank:
        raise ShapeError(f"{op}: batch_axis {batch_axis} is not an axis of an input of rank {rank}")
    if first <= batch_axis < last:
        raise ShapeError(f"{op}: the batch axis {batch_axis} cannot be among the merged axes [{first}, {last})")
    if len(lengths) != len(dynamic) or len(set(dynamic)) != len(dynamic) or any(
            not 0 <= d < factors for d in dynamic):
        raise ShapeError(f"{op}: dynamic {dynamic} must name, once each, the merged factors (0..{factors - 1}) "
                         f"that the {len(lengths)} lengths input(s) belong to")
    for position, shape in enumerate(lengths):
        if len(shape) != 1 or (shape[0] is not None and x[batch_axis] is not None and shape[0] != x[batch_axis]):
            raise ShapeError(f"{op}: lengths input {position} has shape {shape}, not (batch,) = ({x[batch_axis]},)")


def _pack_shape(x, *lengths, start, stop, batch_axis, dynamic):
    _pack_checks("pack_axes", x, lengths, batch_axis, start, stop, dynamic, stop - start)
    return _merged_shape(x, start, stop)


def _extents(op, batch, sizes, lengths, dynamic):
    extents = np.empty((batch, len(sizes)), np.int64)
    extents[:] = np.asarray(sizes, np.int64)
    for position, (factor, values) in enumerate(zip(dynamic, lengths)):
        values = np.asarray(values)
        if values.shape != (batch,):
            raise ShapeError(f"{op}: lengths input {position} has shape {values.shape}, not (batch,) = ({batch},)")
        if values.size and (values.min() < 0 or values.max() > sizes[factor]):   # a value known at run time
            raise ExecutionError(f"{op}: lengths input {position} holds {values.min()}..{values.max()}, outside "
                                 f"[0, {sizes[factor]}] (the padded size of merged factor {factor})")
        extents[:, factor] = values
    return extents


def _write_four(out, batch_axis, start, stop, compute):
    target = packing.as_four_axes(out, batch_axis, start, stop)
    compute(target)
    if target.size and not np.shares_memory(target, out):
        np.moveaxis(out, batch_axis, 0)[...] = target.reshape(np.moveaxis(out, batch_axis, 0).shape)


def _pack_kernel(x, *arrays, start, stop, batch_axis, dynamic):
    *lengths, out = arrays
    sizes = x.shape[start:stop]
    extents = _extents("pack_axes", x.shape[batch_axis], sizes, lengths, dynamic)
    x4 = packing.as_four_axes(x, batch_axis, start, stop)
    out_batch = batch_axis if batch_axis < start else batch_axis - (stop - start - 1)
    _write_four(out, out_batch, start, start + 1,
                lambda target: packing.pack(x4, extents, np.asarray(sizes, np.int64), target))


def _unpack_shape(y, like, *lengths, axis, like_start, count, batch_axis, dynamic):
    if not 0 <= axis < len(y) or not 0 <= like_start <= len(like) - count or count < 1:
        raise ShapeError(f"unpack_axis: axis {axis} of an input of rank {len(y)} cannot be split into axes "
                         f"[{like_start}, {like_start + count}) of like (rank {len(like)})")
    _pack_checks("unpack_axis", y, lengths, batch_axis, axis, axis + 1, dynamic, count)
    return tuple(y[:axis]) + tuple(like[like_start:like_start + count]) + tuple(y[axis + 1:])


def _unpack_kernel(y, like, *arrays, axis, like_start, count, batch_axis, dynamic):
    *lengths, out = arrays
    sizes = like.shape[like_start:like_start + count]
    extents = _extents("unpack_axis", y.shape[batch_axis], sizes, lengths, dynamic)
    most = int(np.prod(extents, axis=1).max()) if extents.size else 0
    if most > y.shape[axis]:
        raise ExecutionError(f"unpack_axis: a batch entry has {most} valid entries but axis {axis} has size "
                             f"{y.shape[axis]}")
    y4 = packing.as_four_axes(y, batch_axis, axis, axis + 1)
    out_batch = batch_axis if batch_axis < axis else batch_axis + count - 1
    _write_four(out, out_batch, axis, axis + count,
                lambda target: packing.unpack(y4, extents, np.asarray(sizes, np.int64), target))


def _valid_indices(sizes, extents):
    grids = np.meshgrid(*[np.arange(e) for e in extents], indexing="ij")
    return np.ravel_multi_index([g.ravel() for g in grids], sizes) if grids else np.zeros(1, np.int64)


def _pack_reference(x, *lengths, start, stop, batch_axis, dynamic):
    sizes = x.shape[start:stop]
    moved = np.moveaxis(x, batch_axis, 0)
    shift = 1 if batch_axis > start else 0
    merged = moved.reshape(moved.shape[:start + shift] + (-1,) + moved.shape[stop + shift:])
    out = np.zeros_like(merged)
    for b in range(x.shape[batch_axis]):
        extents = list(sizes)
        for factor, values in zip(dynamic, lengths):
            extents[factor] = int(values[b])
        valid = _valid_indices(sizes, extents)
        source = np.take(merged[b], valid, axis=start + shift - 1)
        index = [slice(None)] * (merged.ndim - 1)
        index[start + shift - 1] = slice(0, len(valid))
        out[b][tuple(index)] = source
    return np.moveaxis(out, 0, batch_axis if batch_axis < start else batch_axis - (stop - start - 1))


def _unpack_reference(y, like, *lengths, axis, like_start, count, batch_axis, dynamic):
    sizes = like.shape[like_start:like_start + count]
    shape = _unpack_shape(y.shape, like.shape, *[v.shape for v in lengths], axis=axis, like_start=like_start,
                          count=count, batch_axis=batch_axis, dynamic=dynamic)
    out_batch = batch_axis if batch_axis < axis else batch_axis + count - 1
    out = np.zeros(shape, y.dtype)
    moved_out = np.moveaxis(out, out_batch, 0)
    moved_y = np.moveaxis(y, batch_axis, 0)
    place = axis + (1 if batch_axis > axis else 0) - 1
    flat = moved_out.reshape(moved_out.shape[:place + 1] + (-1,) + moved_out.shape[place + 1 + count:])
    for b in range(y.shape[batch_axis]):
        extents = list(sizes)
        for factor, values in zip(dynamic, lengths):
            extents[factor] = int(values[b])
        valid = _valid_indices(sizes, extents)
        index = [slice(None)] * flat[b].ndim
        index[place] = valid
        source = [slice(None)] * moved_y[b].ndim
        source[place] = slice(0, len(valid))
        flat[b][tuple(index)] = moved_y[b][tuple(source)]
    return np.moveaxis(flat.reshape(moved_out.shape), 0, out_batch)


def _pack_samples():
    r = np.random.default_rng(82)
    bft = r.normal(size=(2, 3, 4))
    t_lengths = np.array([4, 2])
    two = r.normal(size=(3, 4, 5, 2))
    return [Sample((bft, t_lengths), {"start": 1, "stop": 3, "batch_axis": 0, "dynamic": (1,)},
                   label="(f t)", constant_inputs=(1,)),
            Sample((bft.astype(np.float32), np.array([3, 0])), {"start": 1, "stop": 3, "batch_axis": 0,
                   "dynamic": (0,)}, label="(t f) float32, an empty entry", constant_inputs=(1,)),
            Sample((two, np.array([4, 1, 0]), np.array([5, 2, 3])), {"start": 1, "stop": 3, "batch_axis": 0,
                   "dynamic": (0, 1)}, label="(t1 t2)", constant_inputs=(1, 2)),
            Sample((transposed(r.normal(size=(3, 4, 2))), np.array([1, 3])), {"start": 0, "stop": 2,
                   "batch_axis": 2, "dynamic": (1,)}, label="batch last, strided", constant_inputs=(1,))]


def _unpack_samples():
    result = []
    for sample in _pack_samples():
        x, *lengths = sample.inputs
        attrs = sample.attrs
        packed = _pack_reference(x, *lengths, **attrs)
        out_batch = attrs["batch_axis"] if attrs["batch_axis"] < attrs["start"] else \
            attrs["batch_axis"] - (attrs["stop"] - attrs["start"] - 1)
        result.append(Sample((packed, x, *lengths), {"axis": attrs["start"], "like_start": attrs["start"],
                             "count": attrs["stop"] - attrs["start"], "batch_axis": out_batch,
                             "dynamic": attrs["dynamic"]}, label=sample.label,
                             constant_inputs=tuple(range(1, 2 + len(lengths)))))
    return result


_PACK_ATTRS = {"batch_axis": attributes.Int(minimum=0), "dynamic": attributes.Shape()}
pack_axes = defop("pack_axes", shape=_pack_shape, kernel=_pack_kernel, accepts=dtypes.ALL,
                  samples=_pack_samples, reference=_pack_reference, family="shape",
                  doc="Axes [start, stop) of x merged with each batch entry's valid entries first (the merged "
                      "factors listed in dynamic have the lengths inputs, in order) and zeros after.",
                  attrs={"start": attributes.Int(minimum=0), "stop": attributes.Int(minimum=0), **_PACK_ATTRS})
unpack_axis = defop("unpack_axis", shape=_unpack_shape, kernel=_unpack_kernel, accepts=dtypes.ALL,
                    samples=_unpack_samples, reference=_unpack_reference, family="shape",
                    doc="pack_axes undone: axis ``axis`` of y split into axes [like_start, like_start + count) "
                        "of like's sizes, the valid entries put back and zeros at the padding.",
                    attrs={"axis": attributes.Int(minimum=0), "like_start": attributes.Int(minimum=0),
                           "count": attributes.Int(minimum=1), **_PACK_ATTRS})


# --- checking lengths against the axis they belong to, before a merge multiplies them ---------------

@dataclass(frozen=True)
class Text(attributes.Attribute):
    """A string (a name shown in errors)."""

    def parse(self, value):
        if not isinstance(value, str):
            raise attributes.Invalid(f"{value!r} is not a string")
        return value


def _check_lengths_shape(lengths, like, *, axis, batch_axis, source=""):
    if len(lengths) != 1 or not (0 <= axis < len(like) and 0 <= batch_axis < len(like)) or axis == batch_axis:
        raise ShapeError(f"check_lengths: lengths {lengths} must be (batch,), and axis {axis} and batch_axis "
                         f"{batch_axis} two axes of like (rank {len(like)})")
    return lengths


def _check_lengths_kernel(lengths, like, out, *, axis, batch_axis, source=""):
    values, size = np.asarray(lengths), like.shape[axis]
    if values.shape != (like.shape[batch_axis],):
        raise ShapeError(f"check_lengths: lengths {source!r} have shape {values.shape}, but the batch axis of the "
                         f"input has {like.shape[batch_axis]} entries")
    bad = np.flatnonzero((values < 0) | (values > size))
    if bad.size:
        raise ExecutionError(f"lengths {source!r}: length {int(values[bad[0]])} of batch entry {int(bad[0])} is "
                             f"outside [0, {size}], the padded size of axis {axis} of the input (shape {like.shape})")
    out[...] = values


def _check_lengths_samples():
    like = np.zeros((3, 4, 2))
    return [Sample((np.array([4, 0, 2]), like), {"axis": 1, "batch_axis": 0, "source": "n"}, label="int64",
                   constant_inputs=(0, 1)),
            Sample((np.array([1, 2], np.int32), np.zeros((2, 2))), {"axis": 0, "batch_axis": 1}, label="int32",
                   constant_inputs=(0, 1))]


check_lengths = defop("check_lengths", shape=_check_lengths_shape, kernel=_check_lengths_kernel,
                      dtype=lambda lengths, like, **attrs: lengths, accepts=dtypes.ALL, differentiable=False,
                      samples=_check_lengths_samples, family="shape",
                      reference=lambda lengths, like, *, axis, batch_axis, source="": lengths.copy(),
                      doc="The lengths (a copy), after checking each is in [0, the size of like's axis]: an "
                          "ExecutionError naming them (``source``) and the value, before a merge multiplies them.",
                      attrs={"axis": attributes.Int(minimum=0), "batch_axis": attributes.Int(minimum=0),
                             "source": Text()})


# --- merging dims that have lengths (rearrange and the multi-axis softmax build on these) ------------

def lengths_inputs(graph, dims):
    """(lengths variables, their positions among ``dims``) for the dims that have lengths in ``graph``."""
    found = [(table.lengths_of(graph, d), i) for i, d in enumerate(dims) if d is not None and d.size is None]
    found = [(lengths, i) for lengths, i in found if lengths is not None]
    return [lengths for lengths, _ in found], tuple(i for _, i in found)


def needs_packing(x, dims, start, stop):
    """(lengths, dynamic, batch axis) when merging ``dims[start:stop]`` (x's dims) must pack, because a
    dim with lengths is not the outer one and the batch axis is outside the merge; else None."""
    group = dims[start:stop]
    if None in group or batch_dim not in dims:
        return None
    lengths, dynamic = lengths_inputs(x.graph, group)
    batch_axis = list(dims).index(batch_dim)
    if not dynamic or dynamic == (0,) or start <= batch_axis < stop:
        return None
    return lengths, dynamic, batch_axis


def declare_merged_lengths(graph, merged, group):
    """Give ``merged`` (the product of the dims ``group``) the lengths of the packed merge: the product
    of each factor's lengths or size, built once."""
    if table.lengths_of(graph, merged) is not None:
        return
    lengths, dynamic = lengths_inputs(graph, group)
    total = None
    for factor, dim in enumerate(group):
        part = lengths[dynamic.index(factor)] if factor in dynamic else dim.size
        total = part if total is None else mul(total, part)
    table.declare_lengths(merged, total)
