"""Adding an op to a graph: input conversion, dtype promotion, shape and dtype rules.

This is the one place where the promotion rules of ``graphview.dtypes`` are
applied: mixed dtypes become explicit ``cast`` nodes before the op is added,
so kernels only ever see the dtypes their op computes in.
"""
import numpy as np

from graphview import attributes, dtypes, registry
from graphview.errors import DTypeError, GraphviewError, ShapeError
from graphview.layouts import table as dim_table
from graphview.shapes import format_shape
from graphview.graph import check_size
from graphview.variable import Kind, Variable


def build_op(graph, definition, inputs, attrs, name):
    op = definition.name
    # The arity and the declared attributes are checked before any node (a cast, a constant) is added.
    attrs = check_arguments(definition, [(_label(v), _shape_of(v)) for v in inputs], attrs,
                            f"{op}{f' {name!r}' if name else ''}: ")
    variables = _as_variables(graph, op, inputs)
    variables = _promote(graph, definition, variables)
    # Dim-valued axes become ints; reductions over dims with lengths are masked (ADR 0014).
    attrs, masked = dim_table.before_op(graph, definition, variables, attrs, name)
    if masked is not None:
        return masked
    frozen = freeze_attrs(op, attrs)
    try:
        shape, dtype = output_of(definition, [v.node.shape for v in variables], [v.node.dtype for v in variables],
                                 frozen)
    except GraphviewError as error:   # keeps what a rule raised, if anything, as the cause
        raise type(error)(f"{op}{_describe(name, variables, frozen)}: {error}") from error.__cause__
    check_size(shape, dtype, f"{op}{_describe(name, variables, frozen)}")
    full = graph._new_name(name, op)
    result = graph._add_node(full, Kind.ARRAY, op, [v.name for v in variables], frozen, shape, dtype)
    dim_table.after_op(graph, definition, variables, result)  # carry dims to the output
    return result


def check_arguments(definition, inputs, attrs, prefix):
    """The number of inputs, the attribute names and the declared attributes' values: what building and
    loading a node both check first. ``inputs``: one (label, shape) per input. Returns the attributes
    as the declarations parse them (NumPy integers become ints, ...); an attribute's error message
    starts with ``prefix``."""
    registry.check_call(definition, len(inputs), tuple(attrs))
    return attributes.check(definition, attrs, inputs, prefix)


def output_of(definition, shapes, kinds, frozen):
    """(shape, dtype) the op's rules give for these input shapes, dtypes and frozen attributes.

    Building and loading both call it. Whatever a shape rule raises (any Exception, not only
    ValueError: a custom rule may divide by zero or miss a key) is a ShapeError, a dtype rule's a
    DTypeError, with the original as its ``__cause__``; graphview's own errors keep their class.
    The message does not name the op."""
    try:
        shape = tuple(definition.shape(*shapes, **dict(frozen)))
    except Exception as error:  # noqa: BLE001  (KeyboardInterrupt and SystemExit are not Exceptions)
        raise _error_kind(error, ShapeError)(_text(error)) from _cause(error)
    try:
        dtype = np.dtype(definition.dtype(*kinds, **dict(frozen)) if definition.dtype else kinds[0])
    except Exception as error:  # noqa: BLE001
        raise _error_kind(error, DTypeError)(_text(error)) from _cause(error)
    dtypes.as_dtype(dtype, "output")
    for dim in shape:
        if dim is not None and (isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)) or dim < 0):
            raise ShapeError(f"the shape rule gave {shape}")
    return tuple(None if d is None else int(d) for d in shape), dtype


def _label(value):
    return repr(value.name) if isinstance(value, Variable) else f"a {type(value).__name__}"


def _shape_of(value):
    if isinstance(value, Variable):
        return value.node.shape
    try:
        return np.shape(value)
    except ValueError:   # a ragged list: _as_variables refuses it
        return ()


def _text(error):
    """A rule's error as message text: the exception's type is named unless it is one a rule raises
    to say "no" (a KeyError's text alone would be just the key)."""
    if isinstance(error, (GraphviewError, ValueError, TypeError, IndexError, OverflowError)):
        return str(error)
    return f"{type(error).__name__}: {error}"


def _cause(error):
    """The cause to chain: the rule's own exception, or for a graphview error, what it was raised from."""
    return error.__cause__ if isinstance(error, GraphviewError) else error


def _error_kind(error, kind):
    """Rules may raise plain ValueError/TypeError/IndexError: report them as the rule's kind.

    A shape rule's failure is a ShapeError and a dtype rule's a DTypeError, whatever
    Python exception it raised; graphview's own errors keep their class."""
    if isinstance(error, GraphviewError):
        return type(error)
    return kind


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


def _promote(graph, definition, variables):
    """Cast the promoted inputs to their common dtype, after checking the op accepts it.

    The category check runs on the common dtype, so ``bool_mask * x`` promotes the
    mask as NumPy does, while ``exp(bool_mask)`` or ``bool + bool`` is an error.
    """
    positions = definition.promote_inputs
    if positions is None:
        positions = range(len(variables))
    positions = [p for p in positions if p < len(variables)]
    if not positions:
        return variables
    if not definition.promote:
        if definition.accepts is not None:
            for p in positions:
                dtypes.check_category(definition.name, f"{p} ({variables[p].name!r})",
                                      variables[p].dtype, definition.accepts)
        return variables
    target = dtypes.result_type(*[variables[p].dtype for p in positions])
    if definition.accepts is not None:
        for p in positions:
            if variables[p].dtype == target:
                dtypes.check_category(definition.name, f"{p} ({variables[p].name!r})", target, definition.accepts)
    if definition.promote == "float":
        target = dtypes.float_result(target)
    from graphview.ops.math import cast
    promoted = list(variables)
    for p in positions:
        if promoted[p].dtype != target:
            promoted[p] = cast(promoted[p], target)
    return promoted


def freeze_attrs(op, attrs):
    """Attributes as a sorted tuple of (name, value) pairs of hashable plain values."""
    return tuple(sorted((key, _freeze(op, key, value)) for key, value in attrs.items()))


def _freeze(op, key, value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(op, key, item) for item in value)
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise GraphviewError(f"{op}: attribute {key}={value!r} must be a number, string, bool, None or a tuple of them")


def _describe(name, variables, attrs):
    parts = [f"{v.name} {format_shape(v.node.shape)} {v.node.dtype.name}" for v in variables]
    described = f" ({', '.join(parts)})" if parts else ""
    settings = f" with {', '.join(f'{k}={v!r}' for k, v in attrs)}" if attrs else ""
    named = f" {name!r}" if name else ""
    return f"{named}{described}{settings}"
