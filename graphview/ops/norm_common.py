"""What the normalization ops (graphview/ops/norm.py) share: attribute declarations, the run's purpose,
and the (outer, n, inner) grouping of an input's axes that the kernels in kernels/norm.py take."""
import math
from dataclasses import dataclass

import numpy as np

from graphview import attributes, dtypes, runstate
from graphview.dims import Dim
from graphview.errors import ShapeError
from graphview.layouts.table import axis_of
from graphview.shapes import format_shape, normalize_axes
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


@dataclass(frozen=True)
class Choice(attributes.Attribute):
    """One of ``options`` (strings)."""
    options: tuple = ()

    def parse(self, value):
        if not isinstance(value, str) or value not in self.options:
            raise attributes.Invalid(f"{value!r} is not one of {', '.join(self.options)}")
        return value


def training():
    """True inside a training step (fit, GradientStep): batch statistics, not running ones."""
    state = runstate.current()
    return state is not None and state[0] == runstate.TRAINING


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
