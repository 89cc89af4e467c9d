"""Masking: a plain op over a dim with lengths is built as its masked form (ADR 0014, ADR 0017).

Building calls :func:`before` for every op while masking is on (not inside ``with gv.unmasked():``)
on a graph where some dim has lengths. What an op's masked form is, the op declares: its
``definition.masked``, a :class:`graphview.masked_form.Masked` declaration registered with
``registry.defmasked`` (the built-in ones at the end of ops/masked.py); this module reads the spec
and never an op's name. The masked op is found by name in the registry when building.

It lives above the ops (it builds ops of several families, and building calls it) rather than in
``graphview/ops``, whose modules only declare ops.
"""
import numpy as np

from graphview import dtypes, infer, registry
from graphview.dims import DimError, batch_dim
from graphview.errors import GraphviewError
from graphview.layouts import table
from graphview.ops.masked import mask_of
from graphview.ops.math import cast, div, mul, where
from graphview.ops.reduce import sum as reduce_sum
from graphview.ops.shape import numel, reshape
from graphview.shapes import format_shape, normalize_axes


def before(graph, definition, variables, attrs, name):
    """The masked version of the op when it reduces over a dim with lengths, else None."""
    spec = definition.masked
    if spec is None or not variables or not table.has_lengths(graph) or not table.masking_enabled():
        return None
    op = definition.name
    x, dynamic = _input_with_lengths(spec, variables)
    if not dynamic:
        return None
    rank = len(x.shape)
    if spec.axes == "attribute":
        axes = normalize_axes(attrs.get("axis"), rank)
        hit = [entry for entry in dynamic if entry[0] in axes]
        if hit and spec.op is None:
            return _where_masked(definition, spec, x, hit, attrs, name)
    elif spec.axes == "attribute or last":
        axes = normalize_axes(attrs.get("axis", -1), rank)
        hit = [entry for entry in dynamic if entry[0] in axes]
        if hit and len(axes) > 1:
            if spec.several is None:
                raise DimError(f"{op} over axes {axes} of {x.name!r}: it has no masked form over several axes")
            return spec.several(x, axes, name)
    elif spec.axes == "all but last":
        hit = [entry for entry in dynamic if entry[0] < rank - 1]
    else:
        hit = dynamic
    if not hit:
        return None
    if len(hit) > 1 and spec.axes != "attribute":
        raise DimError(f"{op} over {x.name!r}: masking over two dynamic dims ({hit[0][1]!r}, {hit[1][1]!r}) is "
                       f"only supported for reductions; build it inside gv.unmasked() and mask it yourself")
    time_axis, dim, lengths = hit[0]
    batch_axis = table.axis_of(x, batch_dim, f"{op} over {dim!r} (masked by its lengths {lengths.name!r})")
    common = dict(name=name, batch_axis=batch_axis, time_axis=time_axis)
    passed = _passed(spec, attrs)
    if len(hit) > 1:
        result = _reduce_over_several(spec, x, hit, passed, common)
    else:
        result = _masked_op(spec.op)(*variables, lengths, **passed, **common)
    _check_same_shape(definition, variables, attrs, spec, result)
    return result


def _passed(spec, attrs):
    """The attributes handed on to the masked op: the spec's ``passes`` (with their defaults), or without
    them every attribute of the plain op that the masked op takes."""
    if spec.passes:
        return {key: attrs.get(key, default) for key, default in spec.passes}
    arity = registry.get(spec.op).arity if isinstance(spec.op, str) else None
    if arity is None or arity.any_attribute:
        return dict(attrs)
    return {key: value for key, value in attrs.items() if key in arity.attributes}


def _check_same_shape(definition, variables, attrs, spec, result):
    """The masked form must give the plain op's shape: a spec that does not (a masked op reducing other
    axes) is an error naming both, not a silently different result."""
    try:
        expected = infer.shape_rule(definition, [v.shape for v in variables], attrs)
    except Exception:  # noqa: BLE001  (the plain rule's own error is building's to report; nothing to compare)
        return
    got = result.shape
    if len(expected) != len(got) or any(e is not None and g is not None and e != g for e, g in zip(expected, got)):
        raise GraphviewError(f"{definition.name}: its masked form {spec.op if isinstance(spec.op, str) else spec.op!r} "
                             f"gives shape {format_shape(got)}, but the op's shape rule gives "
                             f"{format_shape(expected)}; declare the attributes it needs with Masked(passes=...)")


def _input_with_lengths(spec, variables):
    """The first of the inputs the spec looks at that has a dim with lengths, and those dims."""
    x, dynamic = variables[0], []
    for position in spec.inputs:
        if position < len(variables):
            x = variables[position]
            dynamic = table.dynamic_axes(x)
            if dynamic:
                break
    return x, dynamic


def _masked_op(op):
    return registry.op(op) if isinstance(op, str) else op


def _reduce_over_several(spec, x, hit, passed, common):
    """A reduction over several dims with lengths: the first masks through its masked op, the others
    through ``where`` with the reduction's neutral value (whose gradient is exactly 0 at padding, so
    nothing read there, NaN included, reaches a gradient).

    Each batch entry's valid region is a box, so a mean divides the masked sum by the product of the
    lengths times the number of entries over the other reduced axes.
    """
    # A masked op that does not promote to float keeps integers exact: its padding is the op's identity.
    exact = not dtypes.is_float(x.dtype) and registry.get(spec.op).promote != "float"
    if not dtypes.is_float(x.dtype) and not exact:
        x = cast(x, dtypes.FLOAT64)
    neutral = _neutral(spec.where_neutral, x.dtype)
    if exact:
        neutral = int(neutral)   # the masked op's identity on integers (0, or the lowest / highest value)
    for _, dim, _ in hit[1:]:
        x = where(mask_of(x, dim), x, neutral)
    lengths = hit[0][2]
    if spec.sum_op is None:
        return _masked_op(spec.op)(x, lengths, **passed, **common)
    name, common = common["name"], {key: value for key, value in common.items() if key != "name"}
    axis, keepdims = passed["axis"], passed["keepdims"]
    total = _masked_op(spec.sum_op)(x, lengths, axis=axis, keepdims=keepdims, **common)
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


def _where_masked(definition, spec, x, hit, attrs, name):
    """The plain op with the padding of each dim in ``hit`` replaced by the spec's neutral value (prod:
    1; argmax / argmin: the lowest / highest value of x's dtype).

    The ``where`` gives the padding a gradient of exactly 0. Over no valid entry, prod gives 1 and
    argmax / argmin index 0.
    """
    neutral = _neutral(spec.where_neutral, x.dtype)
    for _, dim, _ in hit:
        x = where(mask_of(x, dim), x, neutral)
    with table.unmasked():
        return registry.op(definition.name)(x, name=name, **attrs)


def _neutral(value, dtype):
    """``value``, or the lowest / highest value of ``dtype`` for "lowest" / "highest"."""
    if value not in ("lowest", "highest"):
        return value
    lowest = value == "lowest"
    if dtypes.is_float(dtype):
        return -np.inf if lowest else np.inf
    if dtype == np.bool_:
        return not lowest
    limits = np.iinfo(dtype)
    return int(limits.min if lowest else limits.max)
