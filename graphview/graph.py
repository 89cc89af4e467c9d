"""The Graph: an append-only, immutable op graph.

Nodes are frozen records added in topological order (an op's inputs must
exist before it), so creation order is always a valid execution order. The
structure is kept in networkx; ``g.nx`` is a read-only view of it.
"""
import contextlib
import threading
from types import MappingProxyType

import networkx as nx
import numpy as np

from graphview import dtypes
from graphview.errors import (DTypeError, GraphviewError, NameConflictError, ShapeError,
                              UnknownNameError, did_you_mean)
from graphview.registry import Namespace
from graphview.shapes import format_shape
from graphview.variable import Kind, Node, Variable

SPACES = ("math", "nn", "linalg", "shape", "loss", "random")


class Graph:
    """An immutable op graph: build it with ops, run it with ``output``."""

    _count = 0

    def __init__(self, name=None):
        Graph._count += 1
        self.name = name or f"graph{Graph._count}"
        self._nodes = {}
        self._order = []
        self._nx = nx.MultiDiGraph()
        self._values = {}
        self._scopes = []
        self._counters = {}
        self._lock = threading.RLock()
        self._losses = ()
        self.listeners = []
        self._executor = None
        for space in SPACES:
            setattr(self, space, Namespace(self, space))

    # --- reading ---------------------------------------------------------------

    @property
    def nx(self):
        """A read-only networkx copy of the graph (edges run from input to consumer).

        Each call builds a fresh frozen graph whose node, edge and graph attribute dicts
        are read-only, so nothing done to it can reach the graph's own structure."""
        with self._lock:
            frozen = self._nx.copy()
        # networkx stores attributes in plain dicts; swap each for a read-only proxy.
        for name, data in frozen._node.items():
            frozen._node[name] = MappingProxyType(data)
        for source, targets in frozen._succ.items():
            for target, keyed in targets.items():
                for key, data in keyed.items():
                    keyed[key] = frozen._pred[target][source][key] = MappingProxyType(data)
        frozen.graph = MappingProxyType(frozen.graph)
        return nx.freeze(frozen)

    def node(self, name):
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNameError(f"graph {self.name!r} has no variable named {name!r}"
                                   f"{did_you_mean(name, self._order)}") from None

    def __contains__(self, name):
        return name in self._nodes

    def __getitem__(self, name):
        self.node(name)
        return Variable(self, name)

    def variables(self):
        """Every variable, in creation order."""
        return [Variable(self, name) for name in self._order]

    def nodes(self):
        return [self._nodes[name] for name in self._order]

    def value(self, name):
        """A copy of the stored value of a VARIABLE or CONSTANT."""
        node = self.node(name)
        if node.kind not in (Kind.VARIABLE, Kind.CONSTANT):
            raise GraphviewError(f"{name!r} is a {node.kind}; only variables and constants hold values")
        return self._values[name].copy()

    def _held(self, name):
        return self._values[name]

    @property
    def losses(self):
        return tuple(Variable(self, name) for name in self._losses)

    # --- adding ----------------------------------------------------------------

    @contextlib.contextmanager
    def name_scope(self, scope):
        """Prefix every name created inside the block with ``scope/``."""
        if not isinstance(scope, str) or not scope or "/" in scope:
            raise GraphviewError(f"name_scope: {scope!r} is not a non-empty name without '/'")
        self._scopes.append(scope)
        try:
            yield
        finally:
            self._scopes.pop()

    def _scoped(self, name):
        return "/".join(self._scopes + [name])

    def _new_name(self, name, default):
        with self._lock:
            if name is not None:
                if not isinstance(name, str) or not name:
                    raise GraphviewError(f"a variable name must be a non-empty string, not {name!r}")
                full = self._scoped(name)
                if full in self._nodes:
                    raise NameConflictError(f"graph {self.name!r} already has a variable named {full!r}")
                return full
            base = self._scoped(default)
            count = self._counters.get(base, 0)
            full = base if count == 0 else f"{base}_{count}"
            while full in self._nodes:
                count += 1
                full = f"{base}_{count}"
            self._counters[base] = count + 1
            return full

    def _add_node(self, name, kind, op, inputs, attrs, shape, dtype):
        with self._lock:
            if name in self._nodes:
                raise NameConflictError(f"graph {self.name!r} already has a variable named {name!r}")
            node = Node(name=name, kind=kind, op=op, inputs=tuple(inputs), attrs=attrs,
                        shape=tuple(shape), dtype=np.dtype(dtype), index=len(self._order))
            self._nodes[name] = node
            self._order.append(name)
            self._nx.add_node(name, kind=str(kind), op=op)
            for position, source in enumerate(node.inputs):
                self._nx.add_edge(source, name, position=position)
        return Variable(self, name)

    def placeholder(self, name, shape=None, dtype="float64", *, dims=None, lengths=None):
        """A value fed at run time; a dim of ``shape`` may be None (any size).

        ``dims`` tags each axis with a gv.Dim; ``lengths`` maps a dynamic dim to the
        name of its int lengths placeholder (see graphview/layouts/table.py)."""
        if dims is not None or lengths is not None:  # dims live in a side table (ADR 0014)
            from graphview.layouts.table import dimmed_placeholder
            return dimmed_placeholder(self, name, shape, dtype, dims, lengths)
        dtype = dtypes.as_dtype(dtype, f"placeholder {name!r}")
        shape = _check_shape(shape, f"placeholder {name!r}", allow_none=True)
        check_size(shape, dtype, f"placeholder {name!r}")
        return self._add_node(self._new_name(name, "placeholder"), Kind.PLACEHOLDER, None, (), (), shape, dtype)

    def var(self, name, value, dtype=None):
        """A trainable variable holding a copy of ``value``."""
        return self._add_valued(name, value, dtype, Kind.VARIABLE)

    def constant(self, name, value, dtype=None):
        """A constant holding a copy of ``value``."""
        return self._add_valued(name, value, dtype, Kind.CONSTANT)

    def _add_valued(self, name, value, dtype, kind):
        array = _as_array(value, dtype, f"{kind.value.lower()} {name!r}")
        full = self._new_name(name, kind.value.lower())
        variable = self._add_node(full, kind, None, (), (), array.shape, array.dtype)
        self._values[full] = array
        return variable

    def set_value(self, name, value):
        """Replace a VARIABLE's value; the shape and dtype must stay the same."""
        node = self.node(name.name if isinstance(name, Variable) else name)
        if node.kind != Kind.VARIABLE:
            raise GraphviewError(f"set_value: {node.name!r} is a {node.kind}; only VARIABLEs can be set")
        array = np.asarray(value)
        if array.shape != node.shape:
            raise ShapeError(f"set_value: {node.name!r} has shape {format_shape(node.shape)}, "
                             f"the new value has shape {format_shape(array.shape)}")
        if array.dtype != node.dtype and not np.can_cast(array.dtype, node.dtype, "safe"):
            raise DTypeError(f"set_value: {node.name!r} has dtype {node.dtype.name}, "
                             f"the new value has dtype {array.dtype.name}, which does not cast safely")
        self._values[node.name] = np.array(array, dtype=node.dtype, order="C", copy=True)

    def add_op(self, definition, inputs, attrs, name=None):
        """Add one node for ``definition`` applied to ``inputs``; used by every op."""
        from graphview.building import build_op
        return build_op(self, definition, inputs, attrs, name)

    def constant_like(self, value, partner_dtype):
        """A Python scalar or array as an auto-named CONSTANT, with weak scalar typing."""
        if isinstance(value, np.ndarray):
            array = _as_array(value, None, "constant")
        else:
            if not isinstance(value, (bool, int, float, np.number, np.bool_)):
                raise GraphviewError(
                    f"{type(value).__name__} {value!r} cannot be an op input; use a graph variable, "
                    "a number or a NumPy array")
            array = np.asarray(value, dtype=dtypes.weak_scalar_dtype(value, partner_dtype))
        full = self._new_name(None, "const")
        variable = self._add_node(full, Kind.CONSTANT, None, (), (), array.shape, array.dtype)
        self._values[full] = array
        return variable

    # --- views and in-place ops (ADRs 0008, 0009) ----------------------------------

    def create_view(self, x, *descriptors, name=None):
        """The view of x selected by INT64 index descriptors (gv.point, gv.interval, gv.all, gv.new_axis)."""
        from graphview.ops.view import create_view
        return self._own(create_view, x)(x, *descriptors, name=name)

    def assign_(self, view, value, name=None):
        """The view's base after ``view[...] = value``, written in place when the plan allows."""
        return self._inplace("assign_", view, value, name)

    def add_(self, view, value, name=None):
        """The view's base after ``view += value``."""
        return self._inplace("add_", view, value, name)

    def sub_(self, view, value, name=None):
        """The view's base after ``view -= value``."""
        return self._inplace("sub_", view, value, name)

    def mul_(self, view, value, name=None):
        """The view's base after ``view *= value``."""
        return self._inplace("mul_", view, value, name)

    def div_(self, view, value, name=None):
        """The view's base after ``view /= value``."""
        return self._inplace("div_", view, value, name)

    def _inplace(self, op, view, value, name):
        from graphview.ops.inplace import apply
        return self._own(apply, view)(op, view, value, name)

    def _own(self, function, x):
        if isinstance(x, Variable) and x.graph is not self:
            raise GraphviewError(f"variable {x.name!r} belongs to graph {x.graph.name!r}, not {self.name!r}")
        return function

    # --- losses ----------------------------------------------------------------

    def set_loss(self, *losses):
        """Declare the loss variables; several are summed."""
        names = []
        for loss in losses:
            if isinstance(loss, (list, tuple)):
                names.extend(self._name_of(item) for item in loss)
            else:
                names.append(self._name_of(loss))
        for name in names:
            if not dtypes.is_float(self.node(name).dtype):
                raise DTypeError(f"set_loss: {name!r} has dtype {self.node(name).dtype.name}; a loss must be floating point")
        if not names:
            raise GraphviewError("set_loss: give at least one loss variable")
        for position, name in enumerate(names):
            if name in names[:position]:
                raise GraphviewError(f"set_loss: {name!r} is given twice; each loss is summed once")
        self._losses = tuple(names)

    def _name_of(self, value):
        if isinstance(value, Variable):
            if value.graph is not self:
                raise GraphviewError(f"variable {value.name!r} belongs to graph {value.graph.name!r}, not {self.name!r}")
            return value.name
        if isinstance(value, str):
            self.node(value)
            return value
        raise GraphviewError(f"expected a variable or a variable name, got {type(value).__name__} {value!r}")

    # --- running ---------------------------------------------------------------

    def output(self, placeholders, outputs, listeners=None):
        """Run the graph and return ``{name: array}`` for the requested outputs."""
        from graphview.execution import executor_of
        names = [self._name_of(o) for o in ([outputs] if isinstance(outputs, (str, Variable)) else outputs)]
        return executor_of(self).run(placeholders, names, listeners)

    # --- gradients (graphview/autodiff.py, ADR 0005) ----------------------------------

    def calculate_gradients(self, placeholders, wrt, listeners=None):
        """``{name: gradient array}`` of the sum of the losses (``set_loss``) for each name in ``wrt``."""
        from graphview.autodiff import calculate_gradients
        return calculate_gradients(self, placeholders, wrt, listeners)

    def gradient_graph(self, wrt):
        """The cached forward + backward graph for ``wrt``: ``.graph`` and ``.gradients[name]`` (a Variable)."""
        from graphview.autodiff import gradient_graph
        return gradient_graph(self, wrt)

    # --- training (graphview/training/, ADR 0013) --------------------------------------

    def fit(self, dataset, epochs, config, listeners=None, validation=None, progress=None, resume_from=None):
        """Train the variables on a data set of batches; returns a History. See graphview.training.fit."""
        from graphview.training.fit import fit
        return fit(self, dataset, epochs, config, listeners, validation, progress, resume_from)

    def evaluate(self, dataset, output, label, feature_mapping=None, classes=None):
        """Accuracy, per-class precision/recall and a confusion matrix of ``output`` against ``label``."""
        from graphview.training.evaluation import evaluate
        return evaluate(self, dataset, output, label, feature_mapping, classes)

    def explain(self, outputs):
        """A readable plan for computing ``outputs``: steps, views and buffer reuse."""
        from graphview.execution import executor_of
        names = [self._name_of(o) for o in ([outputs] if isinstance(outputs, (str, Variable)) else outputs)]
        return executor_of(self).explain(names)

    def summary(self):
        """A table of every variable: name, kind, op, shape, dtype and inputs."""
        rows = [("name", "kind", "op", "shape", "dtype", "inputs")]
        for node in self.nodes():
            rows.append((node.name, str(node.kind), node.op or "-", format_shape(node.shape),
                         node.dtype.name, ", ".join(node.inputs) or "-"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * width for width in widths))
        title = f"graph {self.name!r}: {len(self._order)} variables"
        return "\n".join([title] + lines)

    # --- graph files (graphview/serialization.py, ADR 0010) ----------------------------

    def save(self, path, placeholders=None):
        """Write the graph, and optionally placeholder values by name, to a graph file; see gv.load."""
        from graphview.serialization import save
        save(self, path, placeholders)

    def __repr__(self):
        return f"<graphview.Graph {self.name!r} with {len(self._order)} variables>"


MAX_RANK = 64           # NumPy's limit on the number of dimensions
MAX_BYTES = 2 ** 63 - 1  # NumPy's limit on size * itemsize (int64 strides and offsets)


def check_size(shape, dtype, what):
    """Refuse a shape NumPy could never allocate: more than 64 axes, or too many bytes.

    Unknown (None) sizes are skipped; like NumPy, size-0 axes do not excuse the others."""
    if len(shape) > MAX_RANK:
        raise ShapeError(f"{what}: a shape of rank {len(shape)} has more than NumPy's {MAX_RANK} dimensions")
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 1
    total = itemsize
    for dim in shape:
        if dim is not None and dim > 0:
            total *= dim
    if total > MAX_BYTES:
        raise ShapeError(f"{what}: shape {format_shape(shape)} of {np.dtype(dtype).name if dtype is not None else 'any dtype'} "
                         f"needs {total} bytes; an array holds at most 2**63 - 1")


def _check_shape(shape, what, allow_none):
    if isinstance(shape, int):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what}: shape {shape!r} is not a tuple of ints") from None
    for dim in shape:
        if dim is None and allow_none:
            continue
        if isinstance(dim, bool) or not hasattr(dim, "__index__"):
            raise ShapeError(f"{what}: shape {shape!r} holds {dim!r}, which is not an int")
        if dim.__index__() < 0:
            raise ShapeError(f"{what}: shape {shape!r} has a negative size {dim}")
    return tuple(d if d is None else d.__index__() for d in shape)


def _as_array(value, dtype, what):
    try:
        array = np.array(value, dtype=dtype, copy=True, order="C")
    except (TypeError, ValueError) as error:
        raise GraphviewError(f"{what}: cannot make an array of {type(value).__name__}: {error}") from None
    dtypes.as_dtype(array.dtype, what)
    return array
