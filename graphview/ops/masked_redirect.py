"""Redirection: plain ops over a dim with lengths are built as their masked versions.

Split from :mod:`graphview.ops.masked` (the masked ops themselves); the build hook of
:mod:`graphview.layouts.table` calls :func:`redirect` for every op while masking is on
(not inside ``with gv.unmasked():``).
"""
import numpy as np

from graphview import dtypes
from graphview.dims import DimError, batch_dim
from graphview.layouts import table
from graphview.ops.masked import (INTEGER_DTYPES, integer_start, masked_log_softmax, masked_logsumexp, masked_max,
                                  masked_mean, masked_min, masked_softmax, masked_sum)
from graphview.ops.masked_loss import masked_softmax_cross_entropy
from graphview.ops.math import cast, div, mul, square, sub, where
from graphview.ops.reduce import sum as reduce_sum
from graphview.ops.shape import numel, reshape
from graphview.registry import op as registered
from graphview.shapes import normalize_axes, normalize_axis

REDUCTIONS = {"sum": masked_sum, "mean": masked_mean, "max": masked_max, "min": masked_min,
              "logsumexp": masked_logsumexp}
SOFTMAX = {"softmax": masked_softmax, "log_softmax": masked_log_softmax}
WHERE_MASKED = ("prod", "argmax", "argmin")   # no masked kernel: padding is replaced by a neutral value
MASKABLE = set(REDUCTIONS) | set(SOFTMAX) | set(WHERE_MASKED) | {"softmax_cross_entropy", "mean_squared_error"}


def redirect(op, variables, attrs, name):
    """The masked version of ``op`` when it reduces over a dim with lengths, else None."""
    if op not in MASKABLE or not variables:
        return None
    x = variables[0]
    dynamic = table.dynamic_axes(x)
    if not dynamic and op == "mean_squared_error" and len(variables) > 1:
        x = variables[1]   # predictions without dims against targets with lengths
        dynamic = table.dynamic_axes(x)
    if not dynamic:
        return None
    rank = len(x.shape)
    if op in WHERE_MASKED:
        axes = normalize_axes(attrs.get("axis"), rank)
        hit = [entry for entry in dynamic if entry[0] in axes]
        return _where_masked(op, x, hit, attrs, name) if hit else None
    if op in REDUCTIONS:
        axes = normalize_axes(attrs.get("axis"), rank)
        hit = [entry for entry in dynamic if entry[0] in axes]
    elif op in SOFTMAX:
        hit = [entry for entry in dynamic if entry[0] == normalize_axis(attrs.get("axis", -1), rank)]
    elif op == "softmax_cross_entropy":
        hit = [entry for entry in dynamic if entry[0] < rank - 1]
    else:
        hit = dynamic
    if not hit:
        return None
    if len(hit) > 1 and op not in REDUCTIONS:
        raise DimError(f"{op} over {x.name!r}: masking over two dynamic dims ({hit[0][1]!r}, {hit[1][1]!r}) is "
                       f"only supported for reductions; build it inside gv.unmasked() and mask it yourself")
    time_axis, dim, lengths = hit[0]
    batch_axis = table.axis_of(x, batch_dim, f"{op} over {dim!r} (masked by its lengths {lengths.name!r})")
    common = dict(name=name, batch_axis=batch_axis, time_axis=time_axis)
    if len(hit) > 1:
        return _reduce_over_several(op, x, hit, attrs, common)
    if op in REDUCTIONS:
        return REDUCTIONS[op](x, lengths, axis=attrs.get("axis"), keepdims=bool(attrs.get("keepdims", False)),
                              **common)
    if op in SOFTMAX:
        return SOFTMAX[op](x, lengths, **common)
    if op == "softmax_cross_entropy":
        return masked_softmax_cross_entropy(x, variables[1], lengths, **common)
    return masked_mean(square(sub(variables[0], variables[1])), lengths, axis=None, keepdims=False, **common)


NEUTRAL = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf, "logsumexp": -np.inf}


def _reduce_over_several(op, x, hit, attrs, common):
    """A reduction over several dims with lengths: the first masks through its masked op, the others
    through ``where`` with the reduction's neutral value (whose gradient is exactly 0 at padding, so
    nothing read there, NaN included, reaches a gradient).

    Each batch entry's valid region is a box, so a mean divides the masked sum by the product of the
    lengths times the number of entries over the other reduced axes.
    """
    axis, keepdims = attrs.get("axis"), bool(attrs.get("keepdims", False))
    exact = not dtypes.is_float(x.dtype) and "masked_" + op in INTEGER_DTYPES
    if not dtypes.is_float(x.dtype) and not exact:
        x = cast(x, dtypes.FLOAT64)
    neutral = integer_start("masked_" + op, x.dtype) if exact else NEUTRAL[op]
    for _, dim, _ in hit[1:]:
        x = where(table.mask_of(x, dim), x, neutral)
    lengths = hit[0][2]
    if op != "mean":
        return REDUCTIONS[op](x, lengths, axis=axis, keepdims=keepdims, **common)
    name, common = common["name"], {key: value for key, value in common.items() if key != "name"}
    total = masked_sum(x, lengths, axis=axis, keepdims=keepdims, **common)
    count = cast(lengths, x.dtype)
    for _, _, more in hit[1:]:
        count = mul(count, cast(more, x.dtype))
    rank, batch = len(x.shape), common["batch_axis"]
    axes = normalize_axes(axis, rank)
    others = tuple(a for a in axes if a not in (batch, *(entry[0] for entry in hit)))
    if others:
        count = mul(count, numel(x, axis=others))
    if batch in axes:
        return div(total, reduce_sum(count), name=name)
    kept = list(range(rank)) if keepdims else [a for a in range(rank) if a not in axes]
    return div(total, reshape(count, tuple(-1 if a == batch else 1 for a in kept)), name=name)


def _where_masked(op, x, hit, attrs, name):
    """prod, argmax or argmin with the padding of each dim in ``hit`` replaced by the op's neutral
    value (1, the lowest or the highest value of x's dtype), then the plain op.

    The ``where`` gives the padding a gradient of exactly 0. Over no valid entry, prod gives 1 and
    argmax / argmin index 0.
    """
    if op == "prod":
        neutral = 1
    elif dtypes.is_float(x.dtype):
        neutral = -np.inf if op == "argmax" else np.inf
    elif x.dtype == np.bool_:
        neutral = op == "argmin"
    else:
        limits = np.iinfo(x.dtype)
        neutral = int(limits.min if op == "argmax" else limits.max)
    for _, dim, _ in hit:
        x = where(table.mask_of(x, dim), x, neutral)
    with table.unmasked():
        return registered(op)(x, name=name, **attrs)
