"""What the normalization ops (graphview/ops/norm.py) share: attribute declarations, the run's purpose,
and the (outer, n, inner) grouping of an input's axes that the kernels in kernels/norm.py take."""
import math
from dataclasses import dataclass

import numpy as np

from graphview import attributes, dtypes, runstate
from graphview.dims import Dim, DimError
from graphview.errors import ShapeError
from graphview.layouts import table
from graphview.layouts.table import axis_of
from graphview.ops.masked import mask_of
from graphview.ops.math import cast
from graphview.shapes import format_shape, normalize_axes, normalize_axis
from graphview_kernels.elementwise import copy as copy_kernel


@dataclass(frozen=True)
class Positive(attributes.Float):
    """A finite float greater than 0 (an epsilon)."""
    finite: bool = True

    def parse(self, value):
        value = super().parse(value)
        if not value > 0:
            raise attributes.Invalid(f"{value} is not greater than 0")
        return value


def training():
    """True in training mode (fit's steps, GradientStep, gv.training_mode()): batch statistics, not
    running ones."""
    return runstate.is_training()


# --- array helpers ---------------------------------------------------------------------------

def f64(array):
    """A C-contiguous flat float64 copy (or the array itself when it is one)."""
    return np.ascontiguousarray(array, dtype=np.float64).reshape(-1)


def grouped(x, axes):
    """``(x3, perm)``: x as a C-contiguous (outer, n, inner) array whose middle axis holds ``axes``
    (sorted), and the permutation applied first when the axes are not adjacent (else None)."""
    perm = None
    if axes and axes != tuple(range(axes[0], axes[-1] + 1)):
        perm = [a for a in range(x.ndim) if a not in axes] + list(axes)
        x = x.transpose(perm)
        axes = tuple(range(x.ndim - len(axes), x.ndim))
    if not x.flags.c_contiguous:
        copied = np.empty(x.shape, x.dtype)
        copy_kernel(x, copied)
        x = copied
    shape = x.shape
    return x.reshape(math.prod(shape[:axes[0]]), math.prod(shape[axes[0]:axes[-1] + 1]),
                     math.prod(shape[axes[-1] + 1:])), perm


def target_of(out, perm, shape3):
    """Where a kernel writes a grouped result: a view of ``out``, or a buffer :func:`restore` copies."""
    if perm is None:
        return out.reshape(shape3)
    return np.empty(out.transpose(perm).shape, out.dtype).reshape(shape3)


def restore(out, target, perm):
    if perm is not None:
        moved = out.transpose(perm)
        copy_kernel(target.reshape(moved.shape), moved)


def default(graph, value, x, axes, fill, what):
    """``value``, or a constant of ``fill`` with the normalized axes' shape when it is None."""
    if value is not None:
        return value
    shape = tuple(x.shape[a] for a in axes)
    if None in shape:
        raise ShapeError(f"{what} is None but the normalized axes of {x.name!r} {format_shape(x.shape)} have an "
                         "unknown size; give it")
    return graph.constant_like(np.full(shape, fill, x.dtype if dtypes.is_float(x.dtype) else np.float64), x.dtype)


def static_axes(x, axis):
    """The sorted axes of x that ``axis`` names (ints, or gv.Dims found among x's axes)."""
    listed = axis if isinstance(axis, (tuple, list)) else (axis,)
    found = tuple(axis_of(x, item, "normalization") if isinstance(item, Dim) else item for item in listed)
    return normalize_axes(found, len(x.shape))


# --- dims with lengths -----------------------------------------------------------------------

def length_masks(x, axis):
    """For batch_norm: one 0/1 mask (x's float dtype, the shape of gv.mask_of) per dim with lengths
    among the axes of x other than the channel ``axis``; [] inside ``gv.unmasked()``."""
    dynamic = table.dynamic_axes(x) if table.masking_enabled() else []
    if not dynamic:
        return []
    kept = static_axes(x, axis)
    dtype = x.dtype.name if dtypes.is_float(x.dtype) else "float64"
    return [cast(mask_of(x, dim), dtype=dtype) for found, dim, _ in dynamic if found not in kept]


def refuse_lengths(op, x, axes):
    """A DimError when ``axes`` of x (normalized over) hold a dim with lengths, masking being on."""
    hit = [dim for axis, dim, _ in table.dynamic_axes(x) if axis in axes] if table.masking_enabled() else []
    if hit:
        raise DimError(f"{op} over axes {axes} of {x.name!r}: {hit[0]!r} has lengths, and {op} has no masked form, "
                       f"so its statistics would include the padding; normalize over other axes, or build it "
                       f"inside gv.unmasked() to include the padding")


def check_masks(op, x, masks):
    """Each mask must broadcast to x (same rank; 1 or x's size on each axis)."""
    for position, mask in enumerate(masks):
        if len(mask) != len(x) or any(m not in (1, None) and s is not None and m != s for m, s in zip(mask, x)):
            raise ShapeError(f"{op}: mask {position} has shape {format_shape(mask)}, which does not broadcast to "
                             f"x {format_shape(x)}")


def valid_weights(shape, axis, masks):
    """The masks as one C-contiguous float64 (outer, inner) array of 0/1 around the channel ``axis`` (the
    grouping of :func:`grouped`), or None without masks."""
    if not masks:
        return None
    axis = normalize_axis(axis, len(shape))
    rest = tuple(shape[:axis]) + tuple(shape[axis + 1:])
    valid = np.ones(rest, bool)
    for mask in masks:
        mask = np.asarray(mask)
        if mask.shape[axis] == 0:
            continue
        valid &= np.broadcast_to(mask.take(0, axis=axis) != 0, rest)
    return np.ascontiguousarray(valid.reshape(math.prod(shape[:axis]), math.prod(shape[axis + 1:])),
                                dtype=np.float64)


def masked_pair(x3, g3, valid, mean):
    """x3 with its mean at the padding (so xhat is 0 there) and g3 with 0 there: sums over them are
    over the valid entries only, whatever the padding holds."""
    keep = valid[:, None, :] != 0
    return (np.where(keep, x3, mean[None, :, None].astype(x3.dtype)),
            np.where(keep, g3, np.zeros((), g3.dtype)))


def valid_full(x, masks):
    """The masks broadcast to x's shape and joined (the NumPy references' form)."""
    valid = np.ones(x.shape, bool)
    for mask in masks:
        valid &= np.broadcast_to(mask != 0, x.shape)
    return valid


def sample_mask(shape, lengths, dtype=np.float64):
    """A (batch, time, 1...) 0/1 mask of the given lengths, axis 1 the time axis (for samples)."""
    return (np.arange(shape[1])[None, :] < np.asarray(lengths)[:, None]).astype(dtype).reshape(shape)
