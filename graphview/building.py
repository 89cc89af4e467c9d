"""Adding an op to a graph: input conversion, the casts promotion needs, then the node.

What a node is (arity, attributes, promotion target, shape and dtype rules, their errors) is
decided by :mod:`graphview.infer`, which loading calls too; this module converts the inputs to
variables, inserts the ``cast`` nodes ``infer.promotion`` names, so kernels only ever see the
dtypes their op computes in, runs the dims hook of ``graphview.layouts.table`` and adds the node.
"""
import numpy as np

from graphview import dtypes, infer
from graphview.errors import GraphviewError
from graphview.graph import check_size
from graphview.layouts import table as dim_table
from graphview.variable import Kind, Variable


def build_op(graph, definition, inputs, attrs, name):
    op = definition.name
    # The arity and the declared attributes are checked before any node (a cast, a constant) is added.
    attrs = infer.check_arguments(definition, [(_label(v), _shape_of(v)) for v in inputs], attrs,
                                  f"{op}{f' {name!r}' if name else ''}: ")
    variables = _as_variables(graph, op, inputs)
    variables = _promote(definition, variables)
    # Dim-valued axes become ints; reductions over dims with lengths are masked (ADR 0014).
    attrs, masked = dim_table.before_op(graph, definition, variables, attrs, name)
    if masked is not None:
        return masked
    frozen = infer.freeze_attrs(op, attrs)
    described = _inputs(variables)
    shape, dtype = infer.result(definition, described, frozen, name)
    check_size(shape, dtype, f"{op}{infer.describe(name, described, frozen)}")
    full = graph._new_name(name, op)
    result = graph._add_node(full, Kind.ARRAY, op, [v.name for v in variables], frozen, shape, dtype)
    dim_table.after_op(graph, definition, variables, result)  # carry dims to the output
    return result


def _inputs(variables):
    return [(v.name, v.node.shape, v.node.dtype) for v in variables]


def _label(value):
    return repr(value.name) if isinstance(value, Variable) else f"a {type(value).__name__}"


def _shape_of(value):
    if isinstance(value, Variable):
        return value.node.shape
    try:
        return np.shape(value)
    except ValueError:   # a ragged list: _as_variables refuses it
        return ()


def _as_variables(graph, op, inputs):
    partner = None
    kinds = [v.dtype for v in inputs if isinstance(v, Variable)]
    if kinds:
        partner = dtypes.result_type(*kinds)
    variables = []
    for position, value in enumerate(inputs):
        if isinstance(value, Variable):
            if value.graph is not graph:
                raise GraphviewError(f"{op}: input {position} ({value.name!r}) belongs to graph "
                                     f"{value.graph.name!r}, not {graph.name!r}")
            variables.append(value)
        elif isinstance(value, (list, tuple)):
            raise GraphviewError(f"{op}: input {position} is a {type(value).__name__}; "
                                 "pass a variable, a number or a NumPy array")
        else:
            try:
                variables.append(graph.constant_like(value, partner))
            except GraphviewError as error:
                raise type(error)(f"{op}: input {position}: {error}") from None
    return variables


def _promote(definition, variables):
    """Cast the promoted inputs to the dtype the op computes in (``infer.promotion`` checks and names them)."""
    casts = infer.promotion(definition, _inputs(variables))
    if not casts:
        return variables
    from graphview.ops.math import cast
    promoted = list(variables)
    for p, target in casts:
        promoted[p] = cast(promoted[p], target)
    return promoted
