"""The graph core: nodes, names, stored values and losses, and the walk, copy and feed check they share.

Nodes are frozen records added in topological order (an op's inputs must exist before it), so
creation order is always a valid execution order. ``GraphCore`` is what the modules under the
``Graph`` facade (building, execution, autodiff, the loader, the checkers) use, by public names, so
the facade can change without breaking them. They make a new graph with :func:`new_graph`, which
instantiates the class ``graphview/graph.py`` registers, so none of them imports the facade
(ADR 0017).
"""
import contextlib
import copy
import itertools
import threading
from types import MappingProxyType

import networkx as nx
import numpy as np

from graphview import dtypes
from graphview.errors import (DTypeError, GraphviewError, NameConflictError, PlaceholderError, ShapeError,
                              UnknownNameError, did_you_mean)
from graphview.layouts import table as dims_table
from graphview.registry import get as get_op
from graphview.shapes import as_array, check_shape, check_size, format_shape
from graphview.variable import Kind, Node, Variable

_graph_class = None   # the class new_graph instantiates: graph.py's Graph once it is imported
_numbers = itertools.count(1)   # every graph takes one, named or not: the default names graph1, graph2, ...


def register_graph_class(graph_class):
    """Make ``graph_class`` (graph.py's ``Graph``) the class :func:`new_graph` instantiates."""
    global _graph_class
    _graph_class = graph_class


def new_graph(name=None, float_dtype="float64"):
    """A new, empty graph of the registered class (a bare GraphCore before graph.py is imported)."""
    return (_graph_class or GraphCore)(name, float_dtype=float_dtype)


class GraphCore:
    """Nodes in creation order, their names, the stored values of variables and constants, and the losses.

    ``store`` maps each VARIABLE and CONSTANT to its array (a ChainMap over the forward graph's store
    in a gradient graph); ``loss_names`` are the loss nodes; ``lock`` guards every addition;
    ``listeners`` watch every run of the graph. ``non_trainable`` holds the VARIABLEs made with
    ``trainable=False`` (updaters and default gradient checks skip them); ``state_updates`` maps such a
    variable to the in-place node giving its value after a training step, which training steps run and
    write back (batch norm's running statistics, ADR 0019). ``layers`` maps each layer's full name to
    its record (graphview/layers, ADR 0023): ``{"type", "parent", "variables", "calls"}``, with
    ``calls`` a list of ``{"inputs": [names], "output": name}``; plain JSON, saved with the graph.
    ``float_dtype`` (float64 unless given) is the model's float dtype: that of placeholders made without a
    dtype and of layer variables whose inputs carry no float dtype (an embedding's, ADR 0023)."""

    def __init__(self, name=None, float_dtype="float64"):
        number = next(_numbers)
        self.name = name or f"graph{number}"
        self.float_dtype = dtypes.as_dtype(float_dtype, f"graph {self.name!r}: float_dtype")
        if self.float_dtype not in (np.float32, np.float64):
            raise DTypeError(f"graph {self.name!r}: float_dtype must be float32 or float64, not {self.float_dtype.name}")
        self.store = {}
        self.loss_names = ()
        self.lock = threading.RLock()
        self.listeners = []
        self.non_trainable = set()
        self.state_updates = {}
        self.layers = {}
        # Caches the layers above keep per graph (autodiff's gradient graphs): they live and die with it.
        self.derived = {}
        self._nodes = {}
        self._order = []
        self._nx = nx.MultiDiGraph()
        self._scopes = []
        self._counters = {}
        self._rollbacks = []   # the undo actions of each open atomic block, innermost last

    # --- reading ---------------------------------------------------------------

    def node(self, name):
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNameError(f"graph {self.name!r} has no variable named {name!r}"
                                   f"{did_you_mean(name, self._order)}") from None

    def __contains__(self, name):
        return name in self._nodes

    @property
    def nx(self):
        """A read-only networkx copy of the graph (edges run from input to consumer).

        Each call builds a fresh frozen graph whose node, edge and graph attribute dicts
        are read-only, so nothing done to it can reach the graph's own structure."""
        with self.lock:
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
        return self.store[name].copy()

    def stored(self, name):
        """The stored array itself (not a copy): for the executor, the updaters and the loader."""
        return self.store[name]

    @property
    def losses(self):
        return tuple(Variable(self, name) for name in self.loss_names)

    def is_trainable(self, name):
        """True for a VARIABLE made without ``trainable=False`` (what updaters and gradient checks take)."""
        node = self.node(name)
        return node.kind is Kind.VARIABLE and node.name not in self.non_trainable

    def ancestors(self, names):
        """The names of every node that ``names`` depend on, themselves included."""
        seen, stack = set(), list(names)
        while stack:
            name = stack.pop()
            if name not in seen:
                seen.add(name)
                stack.extend(self.node(name).inputs)
        return seen

    # --- naming ----------------------------------------------------------------

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

    @contextlib.contextmanager
    def in_scope(self, full):
        """Names created inside the block go under ``full`` (a scope path such as ``net/dense``), whatever
        scope the block is entered from: a layer called again builds under its own name."""
        parts = full.split("/") if isinstance(full, str) else []
        if not parts or not all(parts):
            raise GraphviewError(f"in_scope: {full!r} is not a scope path of non-empty names")
        saved, self._scopes = self._scopes, parts
        try:
            yield
        finally:
            self._scopes = saved

    def _scoped(self, name):
        return "/".join(self._scopes + [name])

    def scope(self):
        """The current name scope path ("" outside any): names created now go under it."""
        return "/".join(self._scopes)

    def new_name(self, name, default):
        """``name`` in the current scope (refused if taken), or a fresh numbered name from ``default``."""
        with self.lock:
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

    def add_layer(self, name, default, type_name, parent=None):
        """Register a layer under ``name`` (refused if a layer has it) or a fresh numbered name from
        ``default``, both in the current scope; returns its full name."""
        with self.lock:
            if name is not None:
                if not isinstance(name, str) or not name or "/" in name:
                    raise GraphviewError(f"a layer name must be a non-empty string without '/', not {name!r}")
                full = self._scoped(name)
                if full in self.layers:
                    raise NameConflictError(f"graph {self.name!r} already has a layer named {full!r}")
            else:
                base, count = self._scoped(default), 0
                full = base
                while full in self.layers:
                    count += 1
                    full = f"{base}_{count}"
            self.layers[full] = {"type": type_name, "parent": parent, "variables": [], "calls": []}
            return full

    def name_of(self, value):
        """The node name a Variable of this graph or a name of one of its nodes stands for."""
        if isinstance(value, Variable):
            self.check_owned(value)
            return value.name
        if isinstance(value, str):
            self.node(value)
            return value
        raise GraphviewError(f"expected a variable or a variable name, got {type(value).__name__} {value!r}")

    def check_owned(self, value):
        """Refuse a Variable of another graph (anything else passes)."""
        if isinstance(value, Variable) and value.graph is not self:
            raise GraphviewError(f"variable {value.name!r} belongs to graph {value.graph.name!r}, not {self.name!r}")

    # --- atomic blocks ---------------------------------------------------------

    @contextlib.contextmanager
    def atomic(self):
        """A block that adds to the graph all or nothing: if it raises, every node, stored value, name,
        name counter, trainability, state update, loss, layer record and dims entry it added is removed
        and the actions given to :meth:`on_rollback` inside it run, newest first, so the graph is as
        before the block. Blocks nest (an inner block that succeeds is undone with its outer one); the
        graph's lock is held throughout, so other threads' additions never interleave with a block's."""
        with self.lock:
            mark = self._mark()
            self._rollbacks.append([])
            try:
                yield
            except BaseException:
                undo = self._rollbacks.pop()
                for action in reversed(undo):
                    action()
                self._restore(mark)
                raise
            undo = self._rollbacks.pop()
            if self._rollbacks:
                self._rollbacks[-1].extend(undo)

    def on_rollback(self, action):
        """Run ``action()`` if the innermost open :meth:`atomic` block (or one around it) fails: state kept
        outside the graph (a layer's binding) that must be undone with it. Nothing outside a block."""
        with self.lock:
            if self._rollbacks:
                self._rollbacks[-1].append(action)

    def _mark(self):
        return {"nodes": len(self._order), "counters": dict(self._counters), "loss_names": self.loss_names,
                "non_trainable": set(self.non_trainable), "state_updates": dict(self.state_updates),
                "layers": copy.deepcopy(self.layers), "dims": dims_table.snapshot(self)}

    def _restore(self, mark):
        added = self._order[mark["nodes"]:]
        del self._order[mark["nodes"]:]
        for name in added:
            del self._nodes[name]
            self.store.pop(name, None)
        self._nx.remove_nodes_from(added)
        self._counters = mark["counters"]
        self.loss_names = mark["loss_names"]
        for kept, saved in ((self.non_trainable, mark["non_trainable"]), (self.state_updates, mark["state_updates"]),
                            (self.layers, mark["layers"])):
            kept.clear()         # in place: whoever holds g.layers keeps reading the graph's own
            kept.update(saved)
        dims_table.restore(self, mark["dims"])

    # --- adding ----------------------------------------------------------------

    def add_node(self, name, kind, op, inputs, attrs, shape, dtype):
        """Append one node, already checked, under the exact name ``name``."""
        with self.lock:
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

    def placeholder(self, name, shape=None, dtype=None):
        """A value fed at run time; a dim of ``shape`` may be None (any size); ``dtype`` defaults to the
        graph's ``float_dtype``."""
        dtype = self.float_dtype if dtype is None else dtypes.as_dtype(dtype, f"placeholder {name!r}")
        shape = check_shape(shape, f"placeholder {name!r}", allow_none=True)
        check_size(shape, dtype, f"placeholder {name!r}")
        return self.add_node(self.new_name(name, "placeholder"), Kind.PLACEHOLDER, None, (), (), shape, dtype)

    def var(self, name, value, dtype=None, trainable=True):
        """A variable holding a copy of ``value``; ``trainable=False`` makes one that updaters and default
        gradient checks skip (a running statistic), whose value changes only by ``set_value`` and the
        state updates of training steps."""
        if not isinstance(trainable, (bool, np.bool_)):
            raise GraphviewError(f"var {name!r}: trainable must be True or False, not {trainable!r}")
        variable = self._add_valued(name, value, dtype, Kind.VARIABLE)
        if not trainable:
            self.non_trainable.add(variable.name)
        return variable

    def add_state_update(self, variable, update):
        """Record that training steps replace non-trainable VARIABLE ``variable``'s value by node
        ``update``'s: an in-place op writing ``variable`` (its input 0), of its shape and dtype. Training
        steps run it with their gradients and write its value into the variable's stored buffer."""
        name, target = self.name_of(variable), self.node(self.name_of(update))
        node = self.node(name)
        if node.kind is not Kind.VARIABLE or name not in self.non_trainable:
            raise GraphviewError(f"add_state_update: {name!r} is a {'trainable ' if node.kind is Kind.VARIABLE else ''}"
                                 f"{node.kind}; only variables made with g.var(name, value, trainable=False) "
                                 "hold state that training steps update")
        if (target.kind is not Kind.ARRAY or not target.inputs or target.inputs[0] != name
                or get_op(target.op).inplace != (0,)):
            raise GraphviewError(f"add_state_update: {target.name!r} is not an in-place op writing {name!r} "
                                 "(its input 0)")
        if target.shape != node.shape or target.dtype != node.dtype:
            raise GraphviewError(f"add_state_update: {target.name!r} is {format_shape(target.shape)} "
                                 f"{target.dtype.name}, {name!r} is {format_shape(node.shape)} {node.dtype.name}")
        with self.lock:
            if name in self.state_updates:
                raise GraphviewError(f"add_state_update: {name!r} is already updated by "
                                     f"{self.state_updates[name]!r}; a state variable has one update (give each "
                                     "batch_norm its own running statistics)")
            self.state_updates[name] = target.name

    def constant(self, name, value, dtype=None):
        """A constant holding a copy of ``value``."""
        return self._add_valued(name, value, dtype, Kind.CONSTANT)

    def _add_valued(self, name, value, dtype, kind):
        array = as_array(value, dtype, f"{kind.value.lower()} {name!r}")
        full = self.new_name(name, kind.value.lower())
        variable = self.add_node(full, kind, None, (), (), array.shape, array.dtype)
        self.store[full] = array
        return variable

    def constant_like(self, value, partner_dtype):
        """A Python scalar or array as an auto-named CONSTANT, with weak scalar typing."""
        if isinstance(value, np.ndarray):
            array = as_array(value, None, "constant")
        else:
            if not isinstance(value, (bool, int, float, np.number, np.bool_)):
                raise GraphviewError(
                    f"{type(value).__name__} {value!r} cannot be an op input; use a graph variable, "
                    "a number or a NumPy array")
            array = np.asarray(value, dtype=dtypes.weak_scalar_dtype(value, partner_dtype))
        full = self.new_name(None, "const")
        variable = self.add_node(full, Kind.CONSTANT, None, (), (), array.shape, array.dtype)
        self.store[full] = array
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
        self.store[node.name] = np.array(array, dtype=node.dtype, order="C", copy=True)

    def set_loss(self, *losses):
        """Declare the loss variables; several are summed."""
        names = []
        for loss in losses:
            if isinstance(loss, (list, tuple)):
                names.extend(self.name_of(item) for item in loss)
            else:
                names.append(self.name_of(loss))
        for name in names:
            if not dtypes.is_float(self.node(name).dtype):
                raise DTypeError(f"set_loss: {name!r} has dtype {self.node(name).dtype.name}; a loss must be floating point")
        if not names:
            raise GraphviewError("set_loss: give at least one loss variable")
        for position, name in enumerate(names):
            if name in names[:position]:
                raise GraphviewError(f"set_loss: {name!r} is given twice; each loss is summed once")
        self.loss_names = tuple(names)

    # --- copying ---------------------------------------------------------------

    def clone(self, name, keep=None, rewrite=None, store=None, keep_losses=True):
        """A new graph ``name`` holding this graph's nodes in order, only those in ``keep`` when given.

        ``rewrite(node, clone)`` gives the node to add in place of each one (it may add nodes to the
        clone first, e.g. a placeholder the rewritten node reads). The clone reads its values from
        ``store`` when given (shared with, or layered over, this graph's); otherwise it holds its own
        copy of each stored value, in its node's (possibly rewritten) dtype. ``keep_losses`` copies
        the loss names."""
        graph = new_graph(name, self.float_dtype)
        if store is not None:
            graph.store = store
        for node in self.nodes():
            if keep is not None and node.name not in keep:
                continue
            original = node.name
            if rewrite is not None:
                node = rewrite(node, graph)
            graph.add_node(node.name, node.kind, node.op, node.inputs, node.attrs, node.shape, node.dtype)
            if store is None and node.kind in (Kind.VARIABLE, Kind.CONSTANT):
                graph.store[node.name] = np.array(self.store[original], dtype=node.dtype, order="C", copy=True)
        if keep_losses:
            graph.loss_names = self.loss_names
        graph.non_trainable = {name for name in self.non_trainable if name in graph}
        graph.state_updates = {name: node for name, node in self.state_updates.items()
                               if name in graph and node in graph}
        if keep is None:
            graph.layers = copy.deepcopy(self.layers)
        return graph

    # --- feeding ---------------------------------------------------------------

    def check_feeds(self, placeholders, needed=(), purpose="", convert=None):
        """The values of the placeholder nodes in ``needed``, after checking ``placeholders``: a dict
        whose every key is a placeholder of this graph, holding each needed one (needed for
        ``purpose``). ``convert(node, value)``, when given, makes each value the array returned."""
        if not isinstance(placeholders, dict):
            raise PlaceholderError(f"placeholders must be a dict of name to array, not {type(placeholders).__name__}")
        for name in placeholders:
            if name not in self._nodes:
                known = [n.name for n in self.nodes() if n.kind is Kind.PLACEHOLDER]
                raise PlaceholderError(f"unknown placeholder {name!r}{did_you_mean(name, known)}; "
                                       f"the graph's placeholders are: {', '.join(known) or 'none'}")
            if self._nodes[name].kind is not Kind.PLACEHOLDER:
                raise PlaceholderError(f"{name!r} is a {self._nodes[name].kind}, not a placeholder; it cannot be fed")
        feeds = {}
        for node in needed:
            if node.kind is not Kind.PLACEHOLDER:
                continue
            if node.name not in placeholders:
                raise PlaceholderError(
                    f"missing placeholder {node.name!r} ({format_shape(node.shape)} {node.dtype.name}), "
                    f"needed for {purpose}")
            value = placeholders[node.name]
            feeds[node.name] = value if convert is None else convert(node, value)
        return feeds
