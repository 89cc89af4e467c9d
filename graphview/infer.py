"""What a node is, from its op, its inputs' shapes and dtypes and its attributes (ADR 0017).

The one abstract evaluation building and loading share: the arity and attribute checks,
the frozen attributes, the ``accepts`` checks and the promotion target (the casts building
inserts), and the op's shape and dtype rules with their error wrapping. ``infer`` runs them
all, in that order, on a recorded node (loading); building runs the same functions, resolving
Dim-valued axes and taking an op's masked form (graphview/masking.py) between the casts and the
rules. ``run_shape`` is the executor's one use of a shape rule, on a built node's concrete input
shapes; ``shape_rule`` is the one call of it.
"""
from collections import namedtuple

import numpy as np

from graphview import attributes, dtypes, registry
from graphview.errors import DTypeError, ExecutionError, GraphviewError, ShapeError
from graphview.shapes import format_shape

Inferred = namedtuple("Inferred", "attrs shape dtype casts")
Inferred.__doc__ = """A node as its op's rules give it: frozen attributes, shape, dtype and ``casts``, the
(position, dtype) pairs promotion needs (empty when every promoted input already has the target)."""


def infer(definition, inputs, attrs, prefix):
    """The node ``definition`` gives on ``inputs`` (one (name, shape, dtype) per input, as recorded:
    no cast is applied to them) and ``attrs``. Raises what the checks and rules raise; an argument's
    or attribute's message starts with ``prefix``, a rule's names no op."""
    frozen = freeze_attrs(definition.name,
                          check_arguments(definition, [(repr(n), s) for n, s, _ in inputs], dict(attrs), prefix))
    casts = promotion(definition, inputs, recorded=True)
    shape, dtype = output_of(definition, [s for _, s, _ in inputs], [d for _, _, d in inputs], frozen)
    return Inferred(frozen, shape, dtype, casts)


def check_arguments(definition, inputs, attrs, prefix):
    """The number of inputs, the attribute names and the declared attributes' values: what building and
    loading a node both check first. ``inputs``: one (label, shape) per input. Returns the attributes
    as the declarations parse them (NumPy integers become ints, ...); an attribute's error message
    starts with ``prefix``."""
    registry.check_call(definition, len(inputs), tuple(attrs))
    return attributes.check(definition, attrs, inputs, prefix)


def promotion(definition, inputs, recorded=False):
    """The (position, dtype) casts that bring the promoted inputs to the dtype the op computes in,
    after checking the op accepts it. ``inputs``: one (name, shape, dtype) per input.

    The category check runs on the common dtype, so ``bool_mask * x`` promotes the mask as NumPy
    does, while ``exp(bool_mask)`` or ``bool + bool`` is an error. A ``recorded`` node (loading)
    is already cast: each promoted input's own dtype is checked.
    """
    positions = definition.promote_inputs
    if positions is None:
        positions = range(len(inputs))
    positions = [p for p in positions if p < len(inputs)]
    if not positions:
        return ()
    if definition.accepts is not None and (recorded or not definition.promote):
        for p in positions:
            dtypes.check_category(definition.name, f"{p} ({inputs[p][0]!r})", inputs[p][2], definition.accepts)
    if not definition.promote:
        return ()
    target = dtypes.result_type(*[inputs[p][2] for p in positions])
    if definition.accepts is not None and not recorded:
        for p in positions:
            if inputs[p][2] == target:
                dtypes.check_category(definition.name, f"{p} ({inputs[p][0]!r})", target, definition.accepts)
    if definition.promote == "float":
        target = dtypes.float_result(target)
    return tuple((p, target) for p in positions if inputs[p][2] != target)


def result(definition, inputs, frozen, name):
    """(shape, dtype) of building ``definition`` on ``inputs`` (one (name, shape, dtype) per input, cast
    already); an error names the op, the node's ``name`` (if any), the inputs and the attributes."""
    try:
        return output_of(definition, [s for _, s, _ in inputs], [d for _, _, d in inputs], frozen)
    except GraphviewError as error:   # keeps what a rule raised, if anything, as the cause
        raise type(error)(f"{definition.name}{describe(name, inputs, frozen)}: {error}") from error.__cause__


def output_of(definition, shapes, kinds, frozen):
    """(shape, dtype) the op's rules give for these input shapes, dtypes and frozen attributes.

    Building and loading both call it. Whatever a shape rule raises (any Exception, not only
    ValueError: a custom rule may divide by zero or miss a key) is a ShapeError, a dtype rule's a
    DTypeError, with the original as its ``__cause__``; graphview's own errors keep their class.
    The message does not name the op."""
    try:
        shape = shape_rule(definition, shapes, dict(frozen))
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


def shape_rule(definition, shapes, attrs):
    """The op's shape rule applied: the one call of it in graphview (building and loading wrap its
    errors in ``output_of``, the executor in ``run_shape``)."""
    return tuple(definition.shape(*shapes, **attrs))


# What a run-time shape message adds after the input shapes, by when the executor asks.
_WHEN = {"plan": "", "run": ", sizes known only at run time"}


def run_shape(definition, node, shapes, attrs, when, planned=None, allocates=False):
    """The output shape of the built ``node`` for concrete input ``shapes``: the executor's one call of
    a shape rule, when it plans (``when="plan"``, the placeholders' shapes) and when a step re-checks
    at run time the sizes a plan could not know (``when="run"``). A run-time shape must agree with the
    ``planned`` one where that is known, and be fully known when the step ``allocates`` its output.

    A rule's refusal (a graphview error keeps its class; ValueError, TypeError, IndexError become a
    ShapeError) names the op, the node and the input shapes; any other exception of a user's rule is
    an ExecutionError raised from it (a MemoryError passes as it is)."""
    try:
        shape = shape_rule(definition, shapes, attrs)
    except (GraphviewError, ValueError, TypeError, IndexError) as caught:
        error = caught
    except MemoryError:
        raise
    except Exception as error:  # noqa: BLE001  (a user's rule failing some other way)
        raise ExecutionError(f"{node.op} {node.name!r}: {type(error).__name__}: {error}") from error
    else:
        if planned is None:
            return shape
        if len(shape) == len(planned) and all(p is None or p == s for p, s in zip(planned, shape)):
            if not allocates or None not in shape:
                return shape
            error = ShapeError(f"the output shape {format_shape(shape)} is still unknown")
        else:
            error = ShapeError(f"the output would have shape {format_shape(shape)}, but the plan (built from the "
                               f"placeholder shapes) fixed it at {format_shape(planned)}")
    described = ", ".join(f"{n} {format_shape(s)}" for n, s in zip(node.inputs, shapes))
    kind = type(error) if isinstance(error, GraphviewError) else ShapeError
    raise kind(f"{node.op} {node.name!r} ({described}{_WHEN[when]}): {error}") from None


def describe(name, inputs, attrs):
    """`` 'name' (x (2, 3) float64, ...) with axis=0``: a node in an error message."""
    parts = [f"{n} {format_shape(s)} {d.name}" for n, s, d in inputs]
    described = f" ({', '.join(parts)})" if parts else ""
    settings = f" with {', '.join(f'{k}={v!r}' for k, v in attrs)}" if attrs else ""
    named = f" {name!r}" if name else ""
    return f"{named}{described}{settings}"


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
