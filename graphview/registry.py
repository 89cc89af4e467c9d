"""The op registry: ``gv.defop`` declares an op once, and everything else finds it here.

An op declaration holds its shape rule, dtype rule, kernel and test samples. Rules that belong to
a layer above the ops are registered per op by that layer after the op exists (ADR 0017):
``defvjp`` (its gradient rule, graphview/gradients/), ``defdims`` (how dims follow it,
graphview/layouts/) and ``defmasked`` (its masked form). The graph, the executor, autodiff, the CLI
and the generic tests all read this table.
"""
import contextvars
import dataclasses
import functools
import inspect
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from graphview import attributes as attribute_types
from graphview.errors import GraphviewError, OpArgumentError
from graphview.masked_form import Masked


_REGISTRY = {}
_CALLABLES = {}
NAMESPACES = {}

# Set while a namespace method (g.math.add, ...) runs, so that ops whose inputs
# are all Python scalars or arrays still know which graph to join.
default_graph = contextvars.ContextVar("graphview_default_graph", default=None)


@dataclass(frozen=True)
class OpDef:
    """Everything graphview knows about one op."""
    name: str
    shape: Callable
    kernel: Optional[Callable]
    dtype: Optional[Callable] = None
    vjp: Optional[Callable] = None
    inplace: tuple = ()
    view: bool = False
    # True or False as declared; None when defop got neither vjp= nor differentiable=
    # (autodiff refuses to pass through such an op, and the op validation test fails).
    differentiable: Optional[bool] = True
    # Why no gradient can pass through the op (a dedicated backward kernel without a rule of its own):
    # autodiff refuses to differentiate through it, where differentiable=False alone stops the gradient.
    no_gradient: Optional[str] = None
    promote: Optional[str] = None
    promote_inputs: Optional[tuple] = None
    accepts: Optional[tuple] = None
    samples: Optional[Callable] = None
    reference: Optional[Callable] = None
    family: str = "custom"
    doc: str = ""
    # Attribute name -> graphview.attributes declaration (type and range), checked by building and loading.
    attributes: dict = field(default_factory=dict)
    # The inputs and attributes the shape rule's signature declares (None when it cannot be read).
    arity: Optional["Arity"] = None
    # Where the defop call was ("file:line"), for the error about a second, different declaration.
    origin: str = field(default="", compare=False)
    namespaces: tuple = ()
    # How dims follow the op (graphview/layouts/), and its masked form (a spec the masking layer reads);
    # None: the family's default.
    dims: Optional[Callable] = None
    masked: object = None
    # Where defvjp/defdims/defmasked set a rule: {"vjp": "file:line", ...}, for the error about a different one.
    rule_origins: dict = field(default_factory=dict, compare=False)

    @property
    def has_gradient(self):
        return self.vjp is not None


class GraphHandle:
    """What names a node of a graph: ``graph`` and ``name``. :class:`graphview.variable.Variable`
    subclasses it, so the registry finds an op's graph without importing the variable module."""
    __slots__ = ()


class Op:
    """The callable ``gv.defop`` returns: ``op(*inputs, name=None, **attrs)`` adds a node."""

    def __init__(self, definition):
        self.definition = definition
        self.__name__ = definition.name
        self.__doc__ = definition.doc

    def __call__(self, *inputs, name=None, **attrs):
        graph = graph_of(inputs, self.definition.name)
        return graph.add_op(self.definition, inputs, attrs, name)

    def __repr__(self):
        return f"<graphview op {self.definition.name}>"


def graph_of(inputs, op_name):
    """The graph the inputs belong to (all the same one), or the namespace's graph."""
    graph = None
    for value in _flatten(inputs):
        if isinstance(value, GraphHandle):
            if graph is not None and value.graph is not graph:
                raise GraphviewError(
                    f"{op_name}: inputs come from two graphs ({graph.name!r} and {value.graph.name!r})")
            graph = value.graph
    if graph is None:
        graph = default_graph.get()
    if graph is None:
        raise GraphviewError(
            f"{op_name}: no input is a graph variable, so the graph is unknown; "
            f"call it through a graph namespace, e.g. g.math.{op_name}(...)")
    return graph


def _flatten(values):
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _flatten(value)
        else:
            yield value


def defop(name, *, shape, kernel, dtype=None, vjp=None, inplace=(), view=False,
          differentiable=None, promote=None, promote_inputs=None, accepts=None,
          samples=None, reference=None, family="custom", namespace=None, doc="", attrs=None,
          dims=None, masked=None, no_gradient=None):
    """Declare an op and return the callable that adds it to a graph.

    ``shape(*input_shapes, **attrs)`` gives the output shape, ``dtype(*input_dtypes,
    **attrs)`` the output dtype (default: the first input's), ``kernel(*arrays, out,
    **attrs)`` writes the result into ``out`` (a view op's ``kernel(*arrays, **attrs)``
    returns a view instead), and ``vjp(grad, out, *inputs, **attrs)`` returns one
    gradient variable or None per input. ``inplace`` lists the input positions the op
    writes. ``samples()`` yields :class:`graphview.testing.Sample` cases checked against
    ``reference(*arrays, **attrs)`` by the generic op tests. ``attrs`` maps attribute names to
    ``gv.attrs`` declarations (``gv.attrs.Axis()``, ``gv.attrs.Seed()``, ...), checked when the op is
    built and when a graph file holding it is loaded. ``vjp``, ``dims`` and ``masked`` may instead be
    registered later with :func:`defvjp`, :func:`defdims` and :func:`defmasked`. ``no_gradient`` says why
    no gradient can pass through the op (a backward kernel without a rule of its own): differentiating
    through it is then an error, where ``differentiable=False`` (a piecewise-constant op) stops gradients.

    Declaring a registered name again replaces the op when the declaration is the same (a re-run
    notebook cell, a module imported under two names) and is an error saying where the first came
    from otherwise.
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise GraphviewError(f"defop: op name {name!r} is not an identifier")
    if not callable(shape):
        raise GraphviewError(f"defop {name}: shape must be a function of the input shapes")
    if kernel is None or not callable(kernel):
        raise GraphviewError(f"defop {name}: kernel must be a Numba function writing into out")
    inplace = tuple(inplace)
    attrs = dict(attrs or {})
    rule = _arity_of_rule(shape)
    attribute_types.check_declarations(name, attrs, rule)
    rule = _declared(rule, attrs)
    for position in inplace:
        if isinstance(position, bool) or not isinstance(position, int) or position < 0 or (
                rule is not None and not rule.variadic and position >= len(rule.inputs)):
            takes = f"; it takes {rule.describe()}" if rule is not None else ""
            raise GraphviewError(f"defop {name}: inplace position {position!r} is not an input position{takes}")
    if masked is not None:
        _check_masked(f"defop {name}", masked)
    if no_gradient is not None:
        if not isinstance(no_gradient, str) or not no_gradient:
            raise GraphviewError(f"defop {name}: no_gradient must say why no gradient passes through the op")
        if vjp is not None or differentiable:
            raise GraphviewError(f"defop {name}: an op with no_gradient has no rule and is not differentiable")
        differentiable = False
    spaces = () if not namespace else (namespace,) if isinstance(namespace, str) else tuple(namespace)
    definition = OpDef(
        name=name, shape=shape, kernel=kernel, dtype=dtype, vjp=vjp, inplace=inplace,
        view=view, differentiable=True if vjp is not None and differentiable is None else differentiable,
        promote=promote, promote_inputs=promote_inputs, accepts=accepts, samples=samples,
        reference=reference, family=family, doc=doc or (kernel.__doc__ or "").strip(), attributes=attrs,
        arity=rule, origin=_caller(), namespaces=spaces, dims=dims, masked=masked, no_gradient=no_gradient)
    if name in _REGISTRY:
        definition = _keep_registered_rules(_REGISTRY[name], definition)
        _check_redeclaration(_REGISTRY[name], definition)
        for space in _REGISTRY[name].namespaces:
            NAMESPACES.get(space, {}).pop(name, None)
    _REGISTRY[name] = definition
    op = Op(definition)
    _CALLABLES[name] = op
    for space in spaces:
        NAMESPACES.setdefault(space, {})[name] = op
    return op


# --- rules registered by the layers above the ops (ADR 0017) -------------------------------------

def defvjp(op, rule):
    """Register ``rule(grad, out, *inputs, **attrs)``, one gradient variable or None per input, as
    the gradient rule of the registered op ``op`` (its name or its callable). Registering the same
    rule again replaces it; a different rule for an op that has one is an error naming both places."""
    if not callable(rule):
        raise GraphviewError(f"defvjp {_op_name(op)}: the rule must be a function (grad, out, *inputs, **attrs)")
    if get(_op_name(op)).differentiable is False:
        raise GraphviewError(f"defvjp {_op_name(op)}: the op is declared differentiable=False, so autodiff would "
                             "never call a rule; declare it without differentiable=False to give it one")
    return _register_rule(op, "vjp", rule)


def defdims(op, rule):
    """Register how dims follow the op ``op`` (graphview/layouts/): ``rule`` as the layouts layer calls it."""
    if not callable(rule):
        raise GraphviewError(f"defdims {_op_name(op)}: the rule must be a function")
    return _register_rule(op, "dims", rule)


def defmasked(op, spec):
    """Register the masked form of the op ``op``: a spec the masking layer reads (graphview/masking.py)."""
    _check_masked(f"defmasked {_op_name(op)}", spec)
    return _register_rule(op, "masked", spec)


def _check_masked(what, spec):
    if not isinstance(spec, Masked):
        raise GraphviewError(f"{what}: the masked form must be a gv.Masked(...) declaration, not {spec!r}")


def _op_name(op):
    return op.definition.name if isinstance(op, Op) else op


def _register_rule(op, part, rule):
    name = _op_name(op)
    definition = get(name)
    here = _caller()
    current = getattr(definition, part)
    if current is not None and _fingerprint(current) != _fingerprint(rule):
        where = definition.rule_origins.get(part) or definition.origin or "an unknown place"
        raise GraphviewError(
            f"def{part} {name}: the op already has a different {part} rule, declared at {where}; this one at "
            f"{here or 'an unknown place'} differs (registering the same rule again replaces it)")
    changes = {part: rule, "rule_origins": {**definition.rule_origins, part: here}}
    if part == "vjp" and definition.differentiable is None:
        changes["differentiable"] = True
    definition = dataclasses.replace(definition, **changes)
    _REGISTRY[name] = definition
    _CALLABLES[name].definition = definition     # the namespaces hold this same callable
    return _CALLABLES[name]


# --- declaring a name twice ----------------------------------------------------------------------

_FUNCTIONS = ("shape", "kernel", "dtype", "vjp", "samples", "reference", "dims", "masked")
_OPTIONS = ("inplace", "view", "differentiable", "no_gradient", "promote", "promote_inputs", "accepts", "family", "doc",
            "attributes", "namespaces")


def _keep_registered_rules(first, second):
    """A module declaring an op imported again (a re-run cell) redeclares it without the rules another
    layer registered for it with defvjp/defdims/defmasked: keep those."""
    kept = {part: getattr(first, part) for part in first.rule_origins if getattr(second, part) is None}
    if not kept:
        return second
    if "vjp" in kept and second.differentiable is None:
        kept["differentiable"] = True
    return dataclasses.replace(second, rule_origins=dict(first.rule_origins), **kept)


def _check_redeclaration(first, second):
    """A second declaration of a name is allowed only when it is the first one again."""
    differ = [part for part in _FUNCTIONS if _fingerprint(getattr(first, part)) != _fingerprint(getattr(second, part))]
    differ += [part for part in _OPTIONS if getattr(first, part) != getattr(second, part)]
    if differ:
        built_in = os.path.abspath(first.origin.rsplit(":", 1)[0]).startswith(_PACKAGE) if first.origin else False
        where = f"g.{first.namespaces[0]}.{first.name}" if first.namespaces else "graphview.registry.op"
        hint = f" ({first.name!r} is one of graphview's built-in ops, {where})" if built_in else ""
        raise GraphviewError(
            f"defop: an op named {first.name!r} is already registered, declared at {first.origin or 'an unknown place'}"
            f", and this declaration at {second.origin or 'an unknown place'} differs in its "
            f"{', '.join(part if part != 'attributes' else 'attrs' for part in differ)}; give the new op another "
            f"name{hint} (declaring the same op again, as a re-run notebook cell does, replaces it)")


def _fingerprint(value, depth=0):
    """What makes a function the same one again: its code (not where it sits in a file), defaults and
    closure, so that a re-run cell's new function objects compare equal to the old ones."""
    if depth > 8:
        return ("deep",)
    value = getattr(value, "py_func", value)        # a Numba dispatcher: its Python function
    if isinstance(value, functools.partial):
        return ("partial", _fingerprint(value.func, depth + 1), _fingerprint(value.args, depth + 1),
                _fingerprint(sorted(value.keywords.items()), depth + 1))
    if isinstance(value, types.MethodType):
        return ("method", _fingerprint(value.__func__, depth + 1), _fingerprint(value.__self__, depth + 1))
    if isinstance(value, types.FunctionType):
        cells = tuple(_fingerprint(_cell(c), depth + 1) for c in value.__closure__ or ())
        return ("function", _code(value.__code__), cells, _fingerprint(value.__defaults__, depth + 1),
                _fingerprint(sorted((value.__kwdefaults__ or {}).items()), depth + 1))
    if isinstance(value, types.CodeType):
        return _code(value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_fingerprint(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple((_fingerprint(k, depth + 1), _fingerprint(v, depth + 1)) for k, v in value.items())
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return value
    if isinstance(value, types.ModuleType):
        return ("module", value.__name__)
    if isinstance(value, type):
        return ("type", value.__module__, value.__qualname__)
    kind = type(value)
    if callable(value) and isinstance(getattr(kind, "__call__", None), types.FunctionType):
        state = getattr(value, "__dict__", None)
        return ("callable", kind.__module__, kind.__qualname__, _code(kind.__call__.__code__),
                _fingerprint(sorted(state.items()) if isinstance(state, dict) else None, depth + 1))
    try:
        hash(value)
        return ("value", kind.__module__, kind.__qualname__, value)
    except TypeError:
        return ("object", kind.__module__, kind.__qualname__, id(value))


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:   # an empty cell
        return None


def _code(code):
    """A code object without its file and line numbers (co_consts may hold nested code objects)."""
    consts = tuple(_code(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return (code.co_code, consts, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_argcount, code.co_kwonlyargcount, code.co_flags)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller():
    """``file:line`` of the defop call: the first frame outside this file, the same rule for every
    declaration (a user's gv.defop inside a function is that line, not the line calling the function).
    graphview's own ops are declared through family helpers (``elementwise(...)`` in
    graphview/ops/math.py): for them, the line in the same file that calls the helper."""
    frame = sys._getframe(1)
    here = frame.f_code.co_filename
    while frame is not None and frame.f_code.co_filename == here:
        frame = frame.f_back
    if frame is None:
        return ""
    while (os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE)
           and frame.f_code.co_name != "<module>" and frame.f_back is not None
           and frame.f_back.f_code.co_filename == frame.f_code.co_filename):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


@dataclass(frozen=True)
class Arity:
    """What an op's shape rule says about its call: input names, attributes, variadic or not."""
    inputs: tuple          # names of the positional inputs (before any *inputs)
    variadic: bool         # the rule takes *inputs
    attributes: tuple      # every attribute name the rule accepts
    required: tuple        # attributes without a default
    any_attribute: bool    # the rule takes **attributes

    def describe(self):
        if self.variadic:
            return f"{len(self.inputs)} or more inputs" + (f" ({', '.join(self.inputs)}, ...)" if self.inputs else "")
        count = len(self.inputs)
        return f"{count} input{'' if count == 1 else 's'}" + (f" ({', '.join(self.inputs)})" if self.inputs else "")


def _arity_of_rule(rule):
    try:
        parameters = list(inspect.signature(rule).parameters.values())
    except (TypeError, ValueError):
        return None
    inputs, attributes, required = [], [], []
    variadic = any_attribute = False
    for p in parameters:
        if p.kind is p.VAR_POSITIONAL:
            variadic = True
        elif p.kind is p.VAR_KEYWORD:
            any_attribute = True
        elif p.kind is p.KEYWORD_ONLY or p.default is not p.empty:
            # Inputs never have defaults: a parameter with one is an attribute.
            attributes.append(p.name)
            if p.default is p.empty:
                required.append(p.name)
        elif p.kind is p.POSITIONAL_ONLY:
            inputs.append(p.name)
        else:  # positional or keyword without a default: an input, or an attribute given by name
            inputs.append(p.name)
            attributes.append(p.name)
    return Arity(tuple(inputs), variadic, tuple(attributes), tuple(required), any_attribute)


def _declared(rule, attrs):
    """A parameter declared in ``attrs`` is an attribute, never an input: ``reshape(x, shape)`` takes
    one input, and ``shape`` (no default) is a required attribute."""
    if rule is None or not attrs:
        return rule
    inputs = tuple(i for i in rule.inputs if i not in attrs)
    required = rule.required + tuple(i for i in rule.inputs if i in attrs and i not in rule.required)
    return Arity(inputs, rule.variadic, rule.attributes, required, rule.any_attribute)


def arity(definition):
    """The inputs and attributes ``definition``'s shape rule takes (None if it cannot be read)."""
    return definition.arity


def check_call(definition, count, attribute_names):
    """Refuse a call with the wrong number of inputs or an unknown attribute, naming the op."""
    rule = arity(definition)
    if rule is None:
        return
    name = definition.name
    for key in attribute_names:
        if key not in rule.attributes and not rule.any_attribute:
            known = ", ".join(a for a in rule.attributes if a not in rule.inputs or a in attribute_names)
            raise OpArgumentError(f"{name} got an unexpected attribute {key!r}"
                                  + (f"; it takes {known}" if known else "; it takes no attributes"))
    named = [i for i in rule.inputs if i in attribute_names]
    if named and (rule.variadic or tuple(rule.inputs[len(rule.inputs) - len(named):]) != tuple(named)):
        raise OpArgumentError(f"{name} got {named[0]!r} as an attribute, but it is an input of {name} "
                              f"(inputs: {', '.join(rule.inputs)})")
    inputs = tuple(i for i in rule.inputs if i not in attribute_names)
    missing = [a for a in rule.required if a not in attribute_names]
    if missing:
        raise OpArgumentError(f"{name} needs the attribute{'s' if len(missing) > 1 else ''} "
                              f"{', '.join(map(repr, missing))}")
    if count < len(inputs) or (count > len(inputs) and not rule.variadic):
        expected = Arity(inputs, rule.variadic, (), (), False).describe()
        raise OpArgumentError(f"{name} takes {expected}, got {count}")


def public(namespace, name=None):
    """Put a Python function in a graph namespace (``g.<namespace>.<name>``)."""
    def register(function):
        for space in (namespace,) if isinstance(namespace, str) else namespace:
            NAMESPACES.setdefault(space, {})[name or function.__name__] = function
        return function
    return register


def get(name):
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GraphviewError(f"no op named {name!r} is registered; an op declared with gv.defop is "
                             "registered when the module declaring it is imported (the graphview command: "
                             "--import MODULE)") from None


def op(name):
    """The callable of a registered op: ``op("add")(x, y)``."""
    get(name)
    return _CALLABLES[name]


def ops():
    """The names of every registered op, sorted."""
    return sorted(_REGISTRY)


def definitions():
    return [_REGISTRY[name] for name in ops()]


class Namespace:
    """``g.math``, ``g.nn``, ...: the namespace's functions, bound to one graph."""

    def __init__(self, graph, space):
        self._graph = graph
        self._space = space

    def __getattr__(self, name):
        functions = NAMESPACES.get(self._space, {})
        if name not in functions:
            raise AttributeError(
                f"g.{self._space} has no op {name!r}; it has {', '.join(sorted(functions))}")
        function = functions[name]

        @functools.wraps(function)
        def bound(*args, **kwargs):
            token = default_graph.set(self._graph)
            try:
                return function(*args, **kwargs)
            finally:
                default_graph.reset(token)
        return bound

    def __dir__(self):
        return sorted(NAMESPACES.get(self._space, {}))
