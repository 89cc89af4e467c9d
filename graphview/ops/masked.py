"""Masked ops: reductions, softmax and losses that ignore padding past each sequence's length.

An input x has a batch axis and a dynamic (time) axis whose valid extent per
batch entry is ``lengths[b]``; entries at t >= lengths[b] are padding and never
read. These ops are used directly (``g.math.masked_sum(x, lengths, axis=...)``)
or, far more often, implicitly: when a graph knows the lengths of a dim (a
placeholder declared with ``lengths=``), ``sum``, ``mean``, ``max``, ``min``,
``logsumexp``, ``softmax``, ``log_softmax``, ``softmax_cross_entropy`` and
``mean_squared_error`` over that dim are built as their masked versions, and
``prod``, ``argmax`` and ``argmin`` on the padding replaced by a neutral value:
each plain op's :class:`Masked` spec, registered at the end of this file, says how
(:mod:`graphview.masking` reads them). Inside ``with gv.unmasked():`` they are not.

Over no valid element, sum gives 0, mean NaN, max -inf, min +inf, logsumexp -inf.
Integer sum, max, min and count are exact and keep an integer dtype, as the unmasked
reductions and NumPy do (sum and count give int64; max and min x's dtype, and over no
valid element the dtype's lowest / highest value); mean, logsumexp, softmax and the
losses compute in floating point, so integer inputs are cast to float64.
"""
import math

import numpy as np

from graphview import attributes, dtypes
from graphview.dims import DimError, batch_dim
from graphview.errors import GraphviewError
from graphview.layouts import table
from graphview.masked_form import Masked
from graphview.ops import loss, nn  # noqa: F401  (the plain ops given masked forms at the end)
from graphview.ops.masked_common import (arranged, canonical, check_axes, check_lengths_dtype, checked_lengths,
                                         mask_array, place)
from graphview.ops.masked_loss import masked_softmax_cross_entropy
from graphview.ops.math import square, sub
from graphview.ops.reduce import reduced_shape
from graphview.registry import defmasked, defop
from graphview.shapes import normalize_axes
from graphview.testing import Sample, transposed
from graphview_kernels import masked as kernels
from graphview_kernels import reduce as reduce_kernels
from graphview_kernels.elementwise import copy as copy_kernel

MODES = {"masked_sum": reduce_kernels.SUM, "masked_mean": reduce_kernels.MEAN, "masked_max": reduce_kernels.MAX,
         "masked_min": reduce_kernels.MIN, "masked_logsumexp": reduce_kernels.LOGSUMEXP,
         "masked_count": reduce_kernels.COUNT}


# --- reductions ---------------------------------------------------------------------------

def _reduce_shape(x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
    check_axes(x, lengths, batch_axis, time_axis)
    return reduced_shape(x, axis, keepdims)


def _reduce_dtype(x, lengths, **attrs):
    check_lengths_dtype(lengths)
    return x


def _sum_dtype(x, lengths, **attrs):
    """sum and count: x's dtype if it is floating point (so a float32 gradient stays float32), else
    int64, as the unmasked sum."""
    check_lengths_dtype(lengths)
    return x if dtypes.is_float(x) else dtypes.INT64


# Reductions that stay exact on integers (accumulating in the output's integer dtype), with their dtype
# rules; the others promote integer inputs to float.
INTEGER_DTYPES = {"masked_sum": _sum_dtype, "masked_count": _sum_dtype, "masked_max": _reduce_dtype,
                  "masked_min": _reduce_dtype}


def integer_start(op, dtype):
    """Where an exact integer reduction starts each output: the identity of ``op`` on ``dtype``."""
    if op == "masked_max":
        return np.iinfo(dtype).min
    return np.iinfo(dtype).max if op == "masked_min" else 0


def _reduce_kernel(op):
    def launch(x, lengths, out, axis=None, keepdims=False, batch_axis=0, time_axis=1):
        b, t = batch_axis % x.ndim, time_axis % x.ndim
        lengths = checked_lengths(op, lengths, x, b, t)
        axes = normalize_axes(axis, x.ndim)
        result, kept_order = masked_reduce(x, lengths, op, b, t, axes, out.dtype)
        kept = [a for a in range(x.ndim) if a not in axes]
        place(result.reshape([x.shape[a] for a in kept_order]), kept_order,
              out.reshape([x.shape[a] for a in kept]), kept)
    return launch


def masked_reduce(x, lengths, op, b, t, axes, dtype):
    """The plain reductions' kernel (graphview_kernels.reduce.reduce3) over the entries t < lengths[b] of x.

    x is arranged so that, for each output, its valid elements are a prefix of the rows (rows_of) or of
    each row (cols_of) of a (outer, n, inner) array, taken in the order batch, time, other reduced axes,
    as a sum accumulates them. Returns the result and the axes it keeps, in its order.
    """
    reduced = [a for a in range(x.ndim) if a in axes and a not in (b, t)]
    kept_other = [a for a in range(x.ndim) if a not in axes and a not in (b, t)]
    B, T = x.shape[b], x.shape[t]
    K = math.prod([x.shape[a] for a in kept_other])
    M = math.prod([x.shape[a] for a in reduced])
    none = reduce_kernels.NO_LENGTHS
    fold = False
    if b not in axes and t not in axes:   # each (b, t) reduces its own M elements, or none
        x3 = arranged(x, [b, t] + kept_other + reduced).reshape(B * T * K, M, 1)
        valid = np.arange(T)[None, :] < lengths[:, None]
        rows_of, cols_of, kept_order = np.repeat(valid.reshape(B * T) * M, K), none, [b, t] + kept_other
    elif b not in axes:   # over time: batch entry b's first lengths[b] * M rows
        if M == 1 or K == 1:
            x3 = arranged(x, [b, t] + kept_other + reduced).reshape(B, T * M, K)
            rows_of = lengths * M
        else:
            x3 = arranged(x, [b] + kept_other + [t] + reduced).reshape(B * K, T * M, 1)
            rows_of = np.repeat(lengths * M, K)
        cols_of, kept_order = none, [b] + kept_other
    elif t not in axes:   # over the batch: row (b, m) keeps its first lengths[b] * K entries
        x3 = arranged(x, [b] + reduced + [t] + kept_other).reshape(B, M, T * K)
        rows_of, cols_of, fold, kept_order = none, lengths * K, True, [t] + kept_other
    else:   # over both: batch entry b's first lengths[b] * M rows, every one folded into one output
        x3 = arranged(x, [b, t] + reduced + kept_other).reshape(B, T * M, K)
        rows_of, cols_of, fold, kept_order = lengths * M, none, True, kept_other
    # The scalars' types as the plain reductions pass them, so that both share compiled kernels: integer
    # sums and counts accumulate in int64; maxima and minima start in x's dtype; logsumexp's shift is float64.
    extreme = op in ("masked_max", "masked_min")
    zero = np.int64(0) if not dtypes.is_float(dtype) and not extreme else np.float64(0)
    if not extreme:
        start = np.float64(-np.inf)
    elif dtypes.is_float(x.dtype):
        start = x.dtype.type(-np.inf if op == "masked_max" else np.inf)
    else:
        start = x.dtype.type(integer_start(op, x.dtype))
    result = np.empty((1 if fold else x3.shape[0], x3.shape[2]), dtype)
    reduce_kernels.reduce3(x3, result, MODES[op], zero, zero + 1, start, mask=(rows_of, cols_of, fold))
    return result, kept_order


def _reduce_reference(op):
    def reference(x, lengths, axis=None, keepdims=False, batch_axis=0, time_axis=1):
        mask = mask_array(x, lengths, batch_axis, time_axis)
        if op in INTEGER_DTYPES and not dtypes.is_float(x.dtype):
            if op == "masked_count":
                return np.sum(mask, axis=axis, keepdims=keepdims, dtype=np.int64)
            if op == "masked_sum":
                return np.sum(np.where(mask, x, 0), axis=axis, keepdims=keepdims, dtype=np.int64)
            reduce = np.max if op == "masked_max" else np.min
            padding = x.dtype.type(integer_start(op, x.dtype))
            return reduce(np.where(mask, x, padding), axis=axis, keepdims=keepdims)
        values = x.astype(np.float64)
        count = np.sum(mask, axis=axis, keepdims=keepdims).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):   # exp of padding never kept
            if op in ("masked_sum", "masked_mean"):
                result = np.sum(np.where(mask, values, 0.0), axis=axis, keepdims=keepdims)
                result = result / count if op == "masked_mean" else result
            elif op == "masked_count":
                result = count
            elif op == "masked_max":
                result = np.max(np.where(mask, values, -np.inf), axis=axis, keepdims=keepdims)
            elif op == "masked_min":
                result = np.min(np.where(mask, values, np.inf), axis=axis, keepdims=keepdims)
            else:
                top = np.max(np.where(mask, values, -np.inf), axis=axis, keepdims=True)
                safe = np.where(np.isfinite(top), top, 0.0)
                total = np.sum(np.where(mask, np.exp(values - safe), 0.0), axis=axis, keepdims=True)
                result = np.where(np.isfinite(top), np.log(total) + safe, top)
                if not keepdims:
                    result = result.reshape(np.sum(mask, axis=axis, keepdims=False).shape)
        return np.asarray(result, dtype=x.dtype if dtypes.is_float(x.dtype) else np.float64)
    return reference


def _reduce_samples(finite_when_empty=False, zero_lengths=True):
    """Samples on NaN-padded data; axis 0 or 2 leaves some outputs with no valid entry (NaN or inf for
    all but sum), where finite differences are undefined, so those samples skip the gradient check."""
    def samples():
        r = np.random.default_rng(90)
        result = []
        for dtype in (np.float64, np.float32):
            name = np.dtype(dtype).name
            x = r.uniform(-2.0, 2.0, size=(3, 5, 2)).astype(dtype)
            x[0, 4:] = x[1, 2:] = x[2, 1:] = np.nan   # padding must never be read
            lengths = np.array([4, 2, 1])
            for axis in (1, (1, 2), None, 0, 2, (0, 1)):
                result.append(Sample((x, lengths), {"axis": axis}, label=f"axis={axis} {name}", constant_inputs=(1,),
                                     gradcheck=finite_when_empty or axis not in (0, 2)))
            result.append(Sample((x, lengths), {"axis": 1, "keepdims": True}, label=f"keepdims {name}",
                                 constant_inputs=(1,)))
        tbf = r.normal(size=(5, 3, 2))
        result.append(Sample((tbf, np.array([5, 3, 1], np.int32)), {"axis": 0, "batch_axis": 1, "time_axis": 0},
                             label="time-major, int32 lengths", constant_inputs=(1,)))
        result.append(Sample((transposed(r.normal(size=(4, 3))), np.array([4, 2, 3])), {"axis": 1, "batch_axis": 1,
                             "time_axis": 0}, label="transposed", constant_inputs=(1,)))
        if zero_lengths:
            result.append(Sample((r.normal(size=(2, 3)), np.array([0, 3])), {"axis": 1}, label="an empty entry",
                                 constant_inputs=(1,), gradcheck=False))
        for dtype in (np.int64, np.int32):   # exact for sum, max, min and count; padding at the dtype's limits
            x = r.integers(-50, 50, size=(3, 5, 2)).astype(dtype)
            x[0, 4:], x[1, 2:] = np.iinfo(dtype).max, np.iinfo(dtype).min
            if dtype == np.int64:
                x[0, :2] = 2 ** 60 + 1   # exact only in integers
            for axis in (1, None, (0, 1)):
                result.append(Sample((x, np.array([4, 2, 0])), {"axis": axis}, label=f"axis={axis} {np.dtype(dtype).name}",
                                     constant_inputs=(1,)))
        return result
    return samples


# The batch and time axes of a masked op's input x (gv.attrs declarations, ADR 0016).
SEQUENCE_AXES = {"batch_axis": attributes.Axis(), "time_axis": attributes.Axis()}


def _declare_reduction(op, doc, differentiable=None):
    exact = op in INTEGER_DTYPES
    return defop(op, shape=_reduce_shape, dtype=INTEGER_DTYPES.get(op, _reduce_dtype), kernel=_reduce_kernel(op),
                 differentiable=differentiable, promote=None if exact else "float",
                 promote_inputs=(0,), accepts=dtypes.NUMERIC,
                 samples=_reduce_samples(op in ("masked_sum", "masked_count")), reference=_reduce_reference(op), family="masked", doc=doc,
                 attrs={"axis": attributes.Axis(many=True, none=True), "keepdims": attributes.Bool(), **SEQUENCE_AXES})


masked_sum = _declare_reduction("masked_sum", "Sum over axis of the entries before each sequence's length.")
masked_mean = _declare_reduction("masked_mean", "Mean over axis of the entries before each length.")
masked_max = _declare_reduction("masked_max", "Maximum over axis of the entries before each length.")
masked_min = _declare_reduction("masked_min", "Minimum over axis of the entries before each length.")
masked_logsumexp = _declare_reduction("masked_logsumexp",
                                      "log(sum(exp(x))) over axis of the entries before each length.")
masked_count = _declare_reduction("masked_count", "How many entries before each length each output sums.",
                                  differentiable=False)


# --- the mask itself ------------------------------------------------------------------------

def _mask_shape(lengths, like, batch_axis=0, time_axis=1):
    b, t = check_axes(like, lengths, batch_axis, time_axis)
    return tuple(like[i] if i in (b, t) else 1 for i in range(len(like)))


def _mask_kernel(lengths, like, out, batch_axis=0, time_axis=1):
    b, t = batch_axis % like.ndim, time_axis % like.ndim
    lengths = checked_lengths("sequence_mask", lengths, like, b, t)
    grid = np.empty((like.shape[b], like.shape[t]), np.bool_)
    kernels.sequence_mask(lengths, grid)
    copy_kernel((grid if b < t else grid.T).reshape(out.shape), out)


def _mask_reference(lengths, like, batch_axis=0, time_axis=1):
    full = mask_array(like, lengths, batch_axis, time_axis)
    return np.ascontiguousarray(full[tuple(slice(None) if i in (batch_axis % like.ndim, time_axis % like.ndim)
                                           else slice(0, 1) for i in range(like.ndim))])


def _mask_samples():
    return [Sample((np.array([3, 0, 2]), np.zeros((3, 4, 2))), label="batch-major", constant_inputs=(0, 1)),
            Sample((np.array([1, 4], np.int32), np.zeros((3, 4, 2))), {"batch_axis": 2, "time_axis": 1},
                   label="batch last, int32", constant_inputs=(0, 1))]


_sequence_mask = defop("sequence_mask", shape=_mask_shape, kernel=_mask_kernel,
                       dtype=lambda lengths, like, **attrs: (check_lengths_dtype(lengths), dtypes.BOOL)[1],
                       differentiable=False, accepts=dtypes.ALL, samples=_mask_samples, reference=_mask_reference,
                       family="masked", doc="True where t < lengths[b]: like's shape with 1 on the other axes.",
                       attrs={"batch_axis": attributes.Axis(input="like"), "time_axis": attributes.Axis(input="like")})


def sequence_mask(lengths, like, batch_axis=0, time_axis=1):
    """The cached bool mask of ``like``'s valid entries (shape: like's, with 1 off the batch/time axes)."""
    key = ("mask", lengths.name, like.name, batch_axis % len(like.shape), time_axis % len(like.shape))
    entries = table.dims_table(like.graph)
    if key not in entries.cache:
        entries.cache[key] = _sequence_mask(lengths, like, batch_axis=batch_axis, time_axis=time_axis).name
    return like.graph[entries.cache[key]]


def mask_of(x, dim):
    """The cached bool mask of the valid entries of ``x`` along its dynamic ``dim`` (1 on other axes)."""
    lengths = table.lengths_of(x.graph, dim)
    if lengths is None:
        raise DimError(f"mask_of: {dim!r} has no lengths in graph {x.graph.name!r}")
    return sequence_mask(lengths, x, batch_axis=table.axis_of(x, batch_dim, "mask_of"),
                         time_axis=table.axis_of(x, dim, "mask_of"))


# --- softmax over the dynamic axis -------------------------------------------------------------

def _softmax_shape(x, lengths, batch_axis=0, time_axis=1):
    check_axes(x, lengths, batch_axis, time_axis)
    return x


def _softmax_kernel(log, op):
    def launch(x, lengths, out, batch_axis=0, time_axis=1):
        b, t = batch_axis % x.ndim, time_axis % x.ndim
        lengths = checked_lengths(op, lengths, x, b, t)
        moved, order = canonical(x, b, t)
        x3 = moved.reshape(x.shape[b], x.shape[t], math.prod(moved.shape[2:]))
        if order == list(range(x.ndim)):   # already batch-major: write straight into out
            kernels.masked_softmax(x3, lengths, out.reshape(x3.shape), log)
            return
        result = np.empty(x3.shape, out.dtype)
        kernels.masked_softmax(x3, lengths, result, log)
        place(result.reshape(moved.shape), order, out, list(range(x.ndim)))
    return launch


def _softmax_reference(log):
    def reference(x, lengths, batch_axis=0, time_axis=1):
        mask = mask_array(x, lengths, batch_axis, time_axis)
        t = time_axis % x.ndim
        values = np.where(mask, x.astype(np.float64), -np.inf)
        top = np.max(values, axis=t, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        total = np.sum(np.where(mask, np.exp(values - top), 0.0), axis=t, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            result = values - top - np.log(total) if log else np.exp(values - top) / total
        return np.where(mask, result, 0.0).astype(x.dtype)
    return reference


def _softmax_samples():
    r = np.random.default_rng(91)
    x = r.normal(size=(3, 5, 2))
    x[0, 4:] = x[1, 2:] = np.nan
    return [Sample((x, np.array([4, 2, 5])), label="batch-major", constant_inputs=(1,)),
            Sample((x.astype(np.float32), np.array([4, 2, 5])), label="float32", constant_inputs=(1,)),
            Sample((r.normal(size=(4, 3)), np.array([4, 1, 2], np.int32)), {"batch_axis": 1, "time_axis": 0},
                   label="time-major, int32 lengths", constant_inputs=(1,)),
            Sample((transposed(r.normal(size=(2, 3))), np.array([0, 2])), label="transposed, empty entry",
                   constant_inputs=(1,))]


def _declare_softmax(op, log, doc):
    return defop(op, shape=_softmax_shape, dtype=_reduce_dtype, kernel=_softmax_kernel(log, op),
                 promote="float", promote_inputs=(0,), accepts=dtypes.NUMERIC, samples=_softmax_samples,
                 reference=_softmax_reference(log), family="masked", doc=doc, attrs=SEQUENCE_AXES)


masked_softmax = _declare_softmax("masked_softmax", False,
                                  "Softmax along the time axis over t < lengths[b]; 0 at padding.")
masked_log_softmax = _declare_softmax("masked_log_softmax", True,
                                      "Log-softmax along the time axis over t < lengths[b]; 0 at padding.")


# --- public functions -----------------------------------------------------------------------------
# Exported as gv.masked_sum, gv.masked_softmax, ... rather than in the g.math / g.nn / g.loss
# namespaces: the README's op table lists every namespace function, and README.md is the lead's.

def _public_reduction(op):
    def reduction(x, lengths, axis=None, keepdims=False, *, batch_axis=0, time_axis=1, name=None):
        return op(x, lengths, name=name, axis=axis, keepdims=keepdims, batch_axis=batch_axis,
                  time_axis=time_axis)
    reduction.__name__ = op.__name__
    reduction.__doc__ = op.__doc__
    return reduction


PUBLIC = {op.__name__: _public_reduction(op)
          for op in (masked_sum, masked_mean, masked_max, masked_min, masked_logsumexp)}


def _public_softmax(op):
    def softmax(x, lengths, *, batch_axis=0, time_axis=1, name=None):
        return op(x, lengths, name=name, batch_axis=batch_axis, time_axis=time_axis)
    softmax.__name__ = op.__name__
    softmax.__doc__ = op.__doc__
    return softmax


PUBLIC["masked_softmax"] = _public_softmax(masked_softmax)
PUBLIC["masked_log_softmax"] = _public_softmax(masked_log_softmax)


def _public_entropy(logits, labels, lengths, *, batch_axis=0, time_axis=1, name=None):
    """Mean over valid positions of -log softmax(logits)[label]; padding labels are never read."""
    return masked_softmax_cross_entropy(logits, labels, lengths, name=name, batch_axis=batch_axis,
                                        time_axis=time_axis)


PUBLIC["masked_softmax_cross_entropy"] = _public_entropy


# --- which plain ops are built masked, and how (graphview/masking.py reads the specs) --------------

def masked_mean_squared_error(predictions, targets, lengths, *, name=None, batch_axis=0, time_axis=1):
    """mean_squared_error over the valid entries only: the masked mean of the squared differences."""
    return masked_mean(square(sub(predictions, targets)), lengths, axis=None, keepdims=False, name=name,
                       batch_axis=batch_axis, time_axis=time_axis)


REDUCTION_PASSES = (("axis", None), ("keepdims", False))

defmasked("sum", Masked("masked_sum", where_neutral=0.0, passes=REDUCTION_PASSES))
defmasked("mean", Masked("masked_mean", where_neutral=0.0, passes=REDUCTION_PASSES, sum_op="masked_sum"))
defmasked("max", Masked("masked_max", where_neutral="lowest", passes=REDUCTION_PASSES))
defmasked("min", Masked("masked_min", where_neutral="highest", passes=REDUCTION_PASSES))
defmasked("logsumexp", Masked("masked_logsumexp", where_neutral=-np.inf, passes=REDUCTION_PASSES))
defmasked("softmax", Masked("masked_softmax", axes="attribute or last", several=nn.softmax_over_axes))
defmasked("log_softmax", Masked("masked_log_softmax", axes="attribute or last", several=nn.log_softmax_over_axes))
defmasked("softmax_cross_entropy", Masked("masked_softmax_cross_entropy", axes="all but last"))
# Predictions without dims may be compared with targets that have lengths.
defmasked("mean_squared_error", Masked(masked_mean_squared_error, axes="all", inputs=(0, 1)))
# No masked kernel: the padding becomes the op's neutral value, whose gradient through where is 0.
defmasked("prod", Masked(None, where_neutral=1))
defmasked("argmax", Masked(None, where_neutral="lowest"))
defmasked("argmin", Masked(None, where_neutral="highest"))
