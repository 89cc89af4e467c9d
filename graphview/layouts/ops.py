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

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.registry import defop
from graphview.shapes import normalize_axis
from graphview.testing import Sample, strided, transposed
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

