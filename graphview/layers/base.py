"""The layer level (ADR 0023): a layer is a function that adds ops and VARIABLEs to a graph under its name.

A :class:`Layer` is configured when made (``Dense(10)``) and bound to a graph on its first call, which
creates its variables from the input's shape and dtype under the layer's name scope (``net/dense/weight``).
Every call adds ops; a layer called again adds new ops reading the same variables (shared weights, as in
Keras' functional API). Nothing runs here: the ops are the graph's ops, executed, differentiated, saved
and checked like any other. The graph keeps one record per layer (``g.layers``) for ``g.summary(params=True)``
and graph files.

Initial values are seeded: a variable's generator is drawn from the seed of its layer (or of the nearest
enclosing layer that has one, else 0) and the variable's full name, so a model is reproducible run to run,
two layers of one model start differently, and adding a layer does not change the others' values.
"""
import contextlib
import contextvars
import re
import zlib

import numpy as np

from graphview import dtypes
from graphview import init as initializers
from graphview.errors import GraphviewError, OpArgumentError, ShapeError
from graphview.shapes import format_shape
from graphview.variable import Variable

# The layer whose call is building ops right now (its children record it as their parent).
_CALLING = contextvars.ContextVar("graphview_calling_layer", default=None)


def snake(name):
    """``Conv2D`` -> ``conv2d``, ``LeakyReLU`` -> ``leaky_relu``, ``MultiHeadAttention`` ->
    ``multi_head_attention``, ``GRU`` -> ``gru``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def seed_of(seed, what):
    """``seed`` checked: None or an int >= 0."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise OpArgumentError(f"{what}: seed must be None or an int >= 0, not {seed!r}")
    return None if seed is None else int(seed)


class Layer:
    """A configured, reusable piece of a model. Subclasses define ``build(*inputs)`` (create variables
    with :meth:`add_variable`; called once, on the first call) and ``forward(*inputs)`` (add the ops;
    called on every call) and return one Variable from ``forward``."""

    def __init__(self, *, name=None, seed=None):
        if name is not None and (not isinstance(name, str) or not name or "/" in name):
            raise OpArgumentError(f"{type(self).__name__}: name must be a non-empty string without '/', not {name!r}")
        self.requested_name = name
        self.seed = seed_of(seed, type(self).__name__)
        self.graph = None
        self.name = None          # the full name, set on the first call
        self.parent = None        # the enclosing layer on the first call (a Sequential), if any
        self.own_variables = []   # the variables this layer created, in creation order

    # --- calling -----------------------------------------------------------------------------------

    def __call__(self, *inputs, **options):
        if not inputs or not all(isinstance(x, Variable) for x in inputs):
            raise GraphviewError(f"{self.describe()}: call it on graph variables (placeholders or op outputs), "
                                 f"not {', '.join(type(x).__name__ for x in inputs) or 'nothing'}")
        graph = inputs[0].graph
        for x in inputs:
            graph.check_owned(x)
        if self.graph is not None and graph is not self.graph:
            raise GraphviewError(f"{self.describe()} belongs to graph {self.graph.name!r}; it cannot be called on "
                                 f"variables of graph {graph.name!r} (make a new layer for each graph)")
        # A call is atomic: if building or forward fails, here or in a layer it calls, the graph drops all
        # the call added (nodes, variables, names, counters, records) and each layer bound in it is unbound.
        with graph.atomic():
            graph.on_rollback(self._restorer())
            if self.graph is None:
                self._bind(graph)
                with graph.in_scope(self.name), self._calling():
                    self.build(*inputs)
            with graph.in_scope(self.name), self._calling():
                output = self.forward(*inputs, **options)
            graph.layers[self.name]["calls"].append({"inputs": [x.name for x in inputs], "output": output.name})
        return output

    def _bind(self, graph):
        parent = _CALLING.get()
        self.graph, self.parent = graph, parent
        self.name = graph.add_layer(self.requested_name, snake(type(self).__name__), type(self).__name__,
                                    parent.name if parent is not None else None)

    def _restorer(self):
        """An action putting this layer's attributes back as they are now (its binding, its variables)."""
        saved = dict(self.__dict__, own_variables=list(self.own_variables))

        def restore():
            self.__dict__.clear()
            self.__dict__.update(saved)
        return restore

    @contextlib.contextmanager
    def _calling(self):
        token = _CALLING.set(self)
        try:
            yield
        finally:
            _CALLING.reset(token)

    def build(self, *inputs):
        """Create the variables, knowing the first call's inputs. Layers without variables keep this."""

    def forward(self, *inputs):
        raise NotImplementedError

    # --- variables ---------------------------------------------------------------------------------

    def root_seed(self):
        """This layer's seed, else the nearest enclosing layer's, else 0."""
        layer = self
        while layer is not None:
            if layer.seed is not None:
                return layer.seed
            layer = layer.parent
        return 0

    def rng(self, what):
        """A generator for ``what`` (a variable's short name) of this layer: from the root seed and the
        full name, so every variable of a model draws its own stream."""
        return np.random.default_rng([self.root_seed(), zlib.crc32(f"{self.name}/{what}".encode())])

    def add_variable(self, name, shape, dtype, initializer, fans=None, trainable=True, zero_row=None):
        """A VARIABLE ``<layer>/<name>`` holding ``initializer(shape, dtype, rng, fans)`` (with row
        ``zero_row`` set to 0: an embedding's padding row)."""
        init = initializers.get(initializer)
        value = init(tuple(int(s) for s in shape), dtype=dtype, rng=self.rng(name), fans=fans)
        if zero_row is not None:
            value[zero_row] = 0
        variable = self.graph.var(name, value, trainable=trainable)
        self.own_variables.append(variable)
        self.graph.layers[self.name]["variables"].append(variable.name)
        return variable

    # --- reading -----------------------------------------------------------------------------------

    def children(self):
        """The layers this one calls (a container's); none for a plain layer."""
        return []

    @property
    def variables(self):
        """Every VARIABLE of this layer and of the layers it contains (a container's, and those first called
        inside its calls, as a custom layer's inner layers), trainable or not, in creation order."""
        if self.graph is None:
            return []
        names = {v.name for v in self.own_variables}
        for child in self.children():
            names.update(v.name for v in child.variables)
        for name, record in self.graph.layers.items():
            if self._contains(name):
                names.update(record["variables"])
        return [v for v in self.graph.variables() if v.name in names]

    def _contains(self, name):
        """Whether layer ``name`` of the graph was first called inside this layer (at any depth)."""
        parent = self.graph.layers[name]["parent"]
        while parent is not None:
            if parent == self.name:
                return True
            parent = self.graph.layers[parent]["parent"]
        return False

    def count_params(self, trainable=None):
        """The number of values in :attr:`variables` (only trainable ones with ``trainable=True``, only
        the others with ``False``); the layer must have been called."""
        if self.graph is None:
            raise GraphviewError(f"{self.describe()} has no variables yet: call it on an input first")
        return sum(int(np.prod(v.shape)) for v in self.variables
                   if trainable is None or self.graph.is_trainable(v.name) == trainable)

    def describe(self):
        return f"layer {self.name!r} ({type(self).__name__})" if self.name else f"{type(self).__name__} layer"

    def __repr__(self):
        state = f"{self.name!r} in graph {self.graph.name!r}" if self.graph is not None else "not built"
        return f"<{type(self).__name__} {state}>"


def float_dtype(layer, x, dtype):
    """The dtype of a layer's variables: ``dtype`` when given, else x's if it is float32/64, else (ids, ints,
    bools: no float dtype to follow) the graph's ``float_dtype``, so that a float32 model stays float32."""
    if dtype is not None:
        dtype = dtypes.as_dtype(dtype, f"{layer.describe()}: dtype")
        if dtype not in (np.float32, np.float64):
            raise OpArgumentError(f"{layer.describe()}: dtype must be float32 or float64, not {dtype.name}")
        return dtype
    return x.dtype if x.dtype in (np.float32, np.float64) else x.graph.float_dtype


def static_size(layer, x, axis, what):
    """x's size along ``axis``, which a layer needs to shape its weights: an axis x lacks or an unknown size
    is refused."""
    if not -len(x.shape) <= axis < len(x.shape):
        raise ShapeError(f"{layer.describe()}: {x.name!r} {format_shape(x.shape)} has no axis {axis} to read the "
                         f"{what} size from; the layer needs an input of rank {axis + 1 if axis >= 0 else -axis} "
                         "or more")
    size = x.shape[axis]
    if size is None:
        raise GraphviewError(f"{layer.describe()}: the {what} axis ({axis}) of {x.name!r} {x.shape} has no "
                             "static size; give the placeholder a size there so the weights can be shaped")
    return size


def flag(layer, what, value):
    """``value`` checked to be True or False (``use_bias="no"`` would otherwise read as True)."""
    if not isinstance(value, (bool, np.bool_)):
        raise OpArgumentError(f"{type(layer).__name__}: {what} must be True or False, not {value!r}")
    return bool(value)


def positive_int(layer, what, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise OpArgumentError(f"{type(layer).__name__}: {what} must be an int >= 1, not {value!r}")
    return int(value)
