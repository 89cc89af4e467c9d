"""Reductions: sum, mean, max, min, prod, argmax, argmin, logsumexp.

Each takes ``axis`` (None, an int or a tuple) and ``keepdims`` as in NumPy. The
launcher views the input as a C-contiguous (outer, n, inner) array (a copy only
when the reduced axes are not adjacent or the input is strided) and runs one
kernel from ``kernels.reduce``.
"""
import math

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.registry import defop, public
from graphview.shapes import normalize_axes
from graphview.testing import Sample, transposed
from graphview_kernels import reduce as kernels
from graphview_kernels.elementwise import copy as copy_kernel


def reduced_shape(shape, axis=None, keepdims=False, nonempty=False):
    axes = normalize_axes(axis, len(shape))
    if nonempty and any(shape[a] == 0 for a in axes):
        raise ShapeError(f"cannot reduce over an axis of size 0 (axis {axis}, shape {shape}); it has no identity")
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def three_axis_view(x, axes):
    """x as a C-contiguous (outer, n, inner) array whose middle axis holds the reduced elements."""
    rank = x.ndim
    adjacent = not axes or axes == tuple(range(axes[0], axes[-1] + 1))
    if not (adjacent and x.flags.c_contiguous):
        kept = [a for a in range(rank) if a not in axes]
        moved = x.transpose(kept + list(axes))
        x = np.empty(moved.shape, x.dtype)
        copy_kernel(moved, x)
        axes = tuple(range(len(kept), rank))
    shape = x.shape
    if not axes:
        return x.reshape(math.prod(shape), 1, 1)
    outer = math.prod(shape[:axes[0]])
    n = math.prod(shape[axes[0]:axes[-1] + 1])
    inner = math.prod(shape[axes[-1] + 1:])
    return x.reshape(outer, n, inner)


def _accumulator_zero(dtype, mean=False):
    """The accumulator's zero: float64 for floats and for every mean (NumPy's mean of integers
    accumulates in float64, so it cannot overflow), int64 for integer sums and products (as NumPy)."""
    return np.float64(0) if mean or dtypes.is_float(dtype) else np.int64(0)


# reduce3's start (unused by sums; logsumexp's maximum starts there).
NEGATIVE_INFINITY = np.float64(-np.inf)


def sum_kernel(x, out, axis=None, keepdims=False, mean=False):
    axes = normalize_axes(axis, x.ndim)
    x3 = three_axis_view(x, axes)
    n = x3.shape[1]
    zero = _accumulator_zero(x.dtype, mean)
    scale = (1.0 / n if n else np.nan) if mean else zero + 1
    kernels.reduce3(x3, out.reshape(x3.shape[0], x3.shape[2]), kernels.MEAN if mean else kernels.SUM, zero, scale,
                    NEGATIVE_INFINITY)


def _extreme_kernel(mode):
    """max, min or logsumexp through reduce3: maxima start at the lowest value of x's dtype (-inf
    for floats), minima at the highest; logsumexp shifts by its maximum in float64."""
    def launch(x, out, axis=None, keepdims=False):
        x3 = three_axis_view(x, normalize_axes(axis, x.ndim))
        if mode == kernels.LOGSUMEXP:
            start = NEGATIVE_INFINITY
        elif dtypes.is_float(x.dtype):
            start = x.dtype.type(np.inf if mode == kernels.MIN else -np.inf)
        else:
            start = x.dtype.type(np.iinfo(x.dtype).max if mode == kernels.MIN else np.iinfo(x.dtype).min)
        kernels.reduce3(x3, out.reshape(x3.shape[0], x3.shape[2]), mode, np.float64(0), np.float64(1), start)
    return launch


def _rows_kernel(function, *extra):
    def launch(x, out, axis=None, keepdims=False):
        axes = normalize_axes(axis, x.ndim)
        x3 = three_axis_view(x, axes)
        function(x3, out.reshape(x3.shape[0], x3.shape[2]), *extra)
    return launch


def _sum_dtype(x, axis=None, keepdims=False):
    return x if dtypes.is_float(x) else dtypes.INT64


def _mean_dtype(x, axis=None, keepdims=False):
    return dtypes.float_result(x)


def _reduction_samples(dtypes_=(np.float64, np.float32), low=-2.0, high=2.0, empty=True, single_axis=False):
    def samples():
        r = np.random.default_rng(11)
        result = []
        for dtype in dtypes_:
            name = np.dtype(dtype).name
            x = r.uniform(low, high, size=(3, 4, 5)).astype(dtype)
            axes = [None, 0, 1, -1] if single_axis else [None, 0, 1, -1, (0, 2), (1, 2)]
            for axis in axes:
                result.append(Sample((x,), {"axis": axis}, label=f"axis={axis} {name}"))
            result.append(Sample((x,), {"axis": 1, "keepdims": True}, label=f"keepdims {name}"))
            result.append(Sample((transposed(x[0]),), {"axis": 0}, label=f"transposed {name}"))
            result.append(Sample((x[:, ::2, :],), {"axis": -1}, label=f"strided {name}"))
        result.append(Sample((np.float64(1.5) * np.ones(()),), {"axis": None}, label="rank 0"))
        if empty:
            result.append(Sample((np.zeros((0, 3)),), {"axis": 0}, label="empty axis"))
        result.append(Sample((np.zeros((0, 3)),), {"axis": 1}, label="empty outer"))
        return result
    return samples


def _prod_samples():
    samples = _reduction_samples(low=0.5, high=1.5)()
    x = np.random.default_rng(12).uniform(0.5, 1.5, size=(3, 4))
    one_zero = x.copy()
    one_zero[1, 2] = 0.0
    two_zeros = one_zero.copy()
    two_zeros[1, 0] = 0.0
    two_zeros[2, 2] = 0.0
    for axis in (None, 0, 1):
        samples.append(Sample((one_zero,), {"axis": axis}, label=f"one zero axis={axis}"))
        samples.append(Sample((two_zeros,), {"axis": axis}, label=f"two zeros axis={axis}"))
    samples.append(Sample((two_zeros.astype(np.float32),), {"axis": 1, "keepdims": True}, label="two zeros keepdims float32"))
    samples.append(Sample((np.zeros(()),), {"axis": None}, label="rank 0 zero"))
    return samples


# What every reduction takes: axis (None, an int or a tuple of them) and keepdims.
REDUCTION_ATTRIBUTES = {"axis": attributes.Axis(many=True, none=True), "keepdims": attributes.Bool()}
ARG_ATTRIBUTES = {"axis": attributes.Axis(none=True), "keepdims": attributes.Bool()}


def _declare(name, kernel, reference, dtype, doc, accepts=dtypes.NUMERIC, promote=None, nonempty=False,
             samples=None):
    return defop(name, shape=lambda x, axis=None, keepdims=False: reduced_shape(x, axis, keepdims, nonempty),
                 kernel=kernel, dtype=dtype, accepts=accepts, promote=promote,
                 samples=samples or _reduction_samples(empty=not nonempty),
                 reference=reference, family="reduce", doc=doc, attrs=REDUCTION_ATTRIBUTES)


_sum = _declare("sum", sum_kernel, lambda x, axis=None, keepdims=False: np.sum(x, axis=axis, keepdims=keepdims),
                _sum_dtype, "Sum over axis (pairwise; float32 accumulates in float64).",
                accepts=dtypes.ALL)
_mean = _declare("mean", lambda x, out, axis=None, keepdims=False: sum_kernel(x, out, axis, keepdims, mean=True),
                 lambda x, axis=None, keepdims=False: np.mean(x, axis=axis, keepdims=keepdims)
                 if x.size else np.full(reduced_shape(x.shape, axis, keepdims), np.nan, dtypes.float_result(x.dtype)),
                 _mean_dtype, "Arithmetic mean over axis.")
_max = _declare("max", _extreme_kernel(kernels.MAX), lambda x, axis=None, keepdims=False: np.max(x, axis=axis, keepdims=keepdims),
                None, "Maximum over axis; NaN propagates.", nonempty=True)
_min = _declare("min", _extreme_kernel(kernels.MIN), lambda x, axis=None, keepdims=False: np.min(x, axis=axis, keepdims=keepdims),
                None, "Minimum over axis; NaN propagates.", nonempty=True)
def _prod_kernel(x, out, axis=None, keepdims=False):
    _rows_kernel(kernels.prod_rows, _accumulator_zero(x.dtype) + 1)(x, out, axis, keepdims)


_prod = _declare("prod", _prod_kernel,
                 lambda x, axis=None, keepdims=False: np.prod(x, axis=axis, keepdims=keepdims),
                 _sum_dtype, "Product over axis.",
                 samples=_prod_samples)
_logsumexp = _declare("logsumexp", _extreme_kernel(kernels.LOGSUMEXP),
                      lambda x, axis=None, keepdims=False: _numpy_logsumexp(x, axis, keepdims),
                      None, "log(sum(exp(x))) over axis, computed without overflow.",
                      promote="float")


def _numpy_logsumexp(x, axis, keepdims):
    if x.size == 0:
        with np.errstate(divide="ignore"):
            return np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))
    top = np.max(x, axis=axis, keepdims=True)
    result = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return result if keepdims else np.squeeze(result, axis=axis) if axis is not None else result.reshape(())


def _argmax_shape(x, axis=None, keepdims=False):
    if axis is not None and not isinstance(axis, int):
        raise ShapeError(f"axis must be an int or None, not {axis!r}")
    return reduced_shape(x, axis, keepdims, nonempty=True)


def _arg_kernel(sign):
    def launch(x, out, axis=None, keepdims=False):
        if axis is None:
            kernels.argmax_rows(three_axis_view(x, tuple(range(x.ndim))), out.reshape(1, 1), sign)
            return
        _rows_kernel(kernels.argmax_rows, sign)(x, out, axis, keepdims)
    return launch


def _arg_samples():
    return [s for s in _reduction_samples(empty=False, single_axis=True)() if s.label != "rank 0"]


_argmax = defop("argmax", shape=_argmax_shape, kernel=_arg_kernel(1), dtype=lambda x, axis=None, keepdims=False: dtypes.INT64,
                accepts=dtypes.NUMERIC, differentiable=False, samples=_arg_samples,
                reference=lambda x, axis=None, keepdims=False: np.argmax(x, axis=axis, keepdims=keepdims),
                family="reduce", doc="Index of the first maximum along axis (int64).", attrs=ARG_ATTRIBUTES)
_argmin = defop("argmin", shape=_argmax_shape, kernel=_arg_kernel(-1), dtype=lambda x, axis=None, keepdims=False: dtypes.INT64,
                accepts=dtypes.NUMERIC, differentiable=False, samples=_arg_samples,
                reference=lambda x, axis=None, keepdims=False: np.argmin(x, axis=axis, keepdims=keepdims),
                family="reduce", doc="Index of the first minimum along axis (int64).", attrs=ARG_ATTRIBUTES)


def _reduction(op):
    def reduction(x, axis=None, keepdims=False, *, name=None):
        return op(x, name=name, axis=axis, keepdims=keepdims)   # the Bool declaration checks it
    reduction.__name__ = op.__name__
    reduction.__doc__ = op.__doc__
    return public("math", op.__name__)(reduction)


sum = _reduction(_sum)
mean = _reduction(_mean)
max = _reduction(_max)
min = _reduction(_min)
prod = _reduction(_prod)
argmax = _reduction(_argmax)
argmin = _reduction(_argmin)
logsumexp = _reduction(_logsumexp)
