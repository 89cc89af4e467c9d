"""Adding an op to a graph: input conversion, the casts promotion needs, then the node.

What a node is (arity, attributes, promotion target, shape and dtype rules, their errors) is
decided by :mod:`graphview.infer`, which loading calls too; this module converts the inputs to
variables, inserts the ``cast`` nodes ``infer.promotion`` names, so kernels only ever see the
dtypes their op computes in, turns Dim-valued axes into axis numbers, builds an op over a dim with
lengths as its masked form (:mod:`graphview.masking`), adds the node and carries the inputs' dims
to it (:mod:`graphview.layouts.dimrules`).
"""
import numpy as np

from graphview import attributes, dtypes, infer, masking
from graphview.dims import Dim, DimError
from graphview.errors import GraphviewError
from graphview.layouts import dimrules, table
from graphview.ops.math import cast
from graphview.shapes import check_size
from graphview.variable import Kind, Variable


def build_op(graph, definition, inputs, attrs, name):
    op = definition.name
    prefix = f"{op}{f' {name!r}' if name else ''}: "
    # The arity and the declared attributes are checked before any node (a cast, a constant) is added;
    # a value holding a gv.Dim is checked once it is an axis number of input 0 (_resolve_dims).
    attrs = infer.check_arguments(definition, [(_label(v), _shape_of(v)) for v in inputs], attrs, prefix)
    variables = _as_variables(graph, definition, inputs)
    variables = _promote(definition, variables)
    attrs = _resolve_dims(definition, variables, attrs, prefix)
    masked = masking.before(graph, definition, variables, attrs, name)   # ADR 0014
    if masked is not None:
        return masked
    frozen = infer.freeze_attrs(op, attrs)
    described = _inputs(variables)
    shape, dtype = infer.result(definition, described, frozen, name)
    check_size(shape, dtype, f"{op}{infer.describe(name, described, frozen)}")
    full = graph.new_name(name, op)
    result = graph.add_node(full, Kind.ARRAY, op, [v.name for v in variables], frozen, shape, dtype)
    dimrules.carry(graph, definition, variables, result)
    return result


def _axes_of(op, value, x):
    if isinstance(value, Dim):
        return table.axis_of(x, value, op)
    if isinstance(value, (list, tuple)):
        return type(value)(_axes_of(op, v, x) for v in value)
    return value


def _resolve_dims(definition, variables, attrs, prefix):
    """Attributes holding a gv.Dim (``axis=time``) with each Dim replaced by its axis of input 0, then
    checked by their declarations as every other value was (``(t, 0.5)`` is an OpArgumentError naming
    the op, as ``(1, 0.5)`` is)."""
    held = [key for key, value in attrs.items() if attributes.holds_dim(value)]
    if not held:
        return attrs
    if not variables:
        raise DimError(f"{definition.name}: a dim was given but the op has no input to find it in")
    resolved = {key: _axes_of(definition.name, attrs[key], variables[0]) for key in held}
    checked = attributes.check(definition, resolved, [(repr(v.name), v.node.shape) for v in variables], prefix)
    return {**attrs, **checked}


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


def _promoted_positions(definition, count):
    """The input positions whose scalars are weak: the op's ``promote_inputs`` (all when None). An op that
    declares no promotion (a user's op, gather, one_hot, ...) keeps the rule it always had: every scalar
    takes its variables' common dtype."""
    if not definition.promote:
        return frozenset(range(count))
    positions = range(count) if definition.promote_inputs is None else definition.promote_inputs
    return frozenset(p for p in positions if p < count)


def _as_variables(graph, definition, inputs):
    """The inputs as variables of ``graph``. A scalar for a promoted input is weak (takes the dtype the
    promoted variables share); one for any other input (labels, ids, lengths) keeps its own dtype, so
    ``nll(log_probs, 2)`` and ``embedding(3, table)`` get int64 constants (ADR 0004)."""
    op = definition.name
    promoted = _promoted_positions(definition, len(inputs))
    partner = None
    kinds = [v.dtype for p, v in enumerate(inputs) if p in promoted and isinstance(v, Variable)]
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
            if position not in promoted and isinstance(value, (bool, int, float, np.number, np.bool_)):
                value = np.asarray(value, dtypes.own_scalar_dtype(value))
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
    promoted = list(variables)
    for p, target in casts:
        promoted[p] = cast(promoted[p], target)
    return promoted
