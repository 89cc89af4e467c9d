"""Dense, Flatten, Reshape, Dropout, Embedding and the activation layers (ADR 0023)."""
import math
import numbers

import numpy as np

from graphview import init as initializers
from graphview.dims import Dim
from graphview.errors import OpArgumentError, ShapeError
from graphview.layers.base import Layer, flag, float_dtype, positive_int, static_size
from graphview.layouts import table


def _activations():
    """Activation name -> function of a Variable, over the graph's op namespaces."""
    def nn(op):
        return lambda x, **attrs: getattr(x.graph.nn, op)(x, **attrs)
    table_ = {name: nn(name) for name in ("relu", "sigmoid", "gelu", "elu", "selu", "softplus", "silu",
                                          "log_sigmoid", "hard_tanh", "leaky_relu", "softmax", "log_softmax")}
    table_["tanh"] = lambda x, **attrs: x.graph.math.tanh(x, **attrs)
    table_["linear"] = lambda x: x
    return table_


ACTIVATIONS = _activations()


def activation_of(owner, name):
    """The function for activation ``name`` (None is linear), or an OpArgumentError listing the names."""
    if name is None:
        return ACTIVATIONS["linear"]
    if callable(name):
        return name
    if name not in ACTIVATIONS:
        raise OpArgumentError(f"{owner}: unknown activation {name!r}; one of {', '.join(sorted(ACTIVATIONS))}")
    return ACTIVATIONS[name]


def feature_axis(layer, x, axis):
    """``axis`` (an int or a Dim of x) as a non-negative axis of x."""
    rank = len(x.shape)
    if isinstance(axis, Dim):
        return table.axis_of(x, axis, layer.describe())
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -rank <= axis < rank:
        raise OpArgumentError(f"{layer.describe()}: axis {axis!r} is not an axis of {x.name!r} {x.shape} "
                              "(an int or one of its Dims)")
    return int(axis) % rank


class Dense(Layer):
    """``activation(x @ weight + bias)`` over the feature axis (the last, or ``axis``: an int or a Dim),
    PyTorch's nn.Linear with the weight stored (in, units). Other axes, and their Dims and lengths, pass
    through; a feature axis that is not the last is moved last. Initial values as nn.Linear:
    U(-1/sqrt(in), 1/sqrt(in)) for weight and bias, unless ``kernel_init`` / ``bias_init`` say otherwise."""

    def __init__(self, units, activation=None, use_bias=True, kernel_init=None, bias_init=None, axis=-1,
                 dtype=None, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.units = positive_int(self, "units", units)
        self.activation = activation_of(type(self).__name__, activation)
        self.use_bias, self.axis, self.dtype = flag(self, "use_bias", use_bias), axis, dtype
        self.kernel_init = initializers.get(kernel_init or initializers.fan_in_uniform())
        self.bias_init = initializers.get(bias_init or initializers.fan_in_uniform())

    def build(self, x):
        features = static_size(self, x, feature_axis(self, x, self.axis), "feature")
        dtype, fans = float_dtype(self, x, self.dtype), (features, self.units)
        self.weight = self.add_variable("weight", (features, self.units), dtype, self.kernel_init, fans)
        self.bias = self.add_variable("bias", (self.units,), dtype, self.bias_init, fans) if self.use_bias else None

    def forward(self, x):
        g, axis = x.graph, feature_axis(self, x, self.axis)
        last = len(x.shape) - 1
        if axis != last:
            x = g.shape.permute(x, tuple(a for a in range(last + 1) if a != axis) + (axis,))
        y = g.math.matmul(x, self.weight)
        if self.bias is not None:
            y = g.math.add(y, self.bias)
        return self.activation(y)


class Flatten(Layer):
    """(batch, ...) -> (batch, prod(...)), in the input's memory order (PyTorch's nn.Flatten)."""

    def forward(self, x):
        if len(x.shape) < 2 or any(size is None for size in x.shape[1:]):
            raise ShapeError(f"{self.describe()}: {x.name!r} {x.shape} needs a batch axis and static sizes after it")
        return x.graph.shape.reshape(x, (-1, math.prod(x.shape[1:])))


class Reshape(Layer):
    """(batch, ...) -> (batch, *shape); one entry of ``shape`` may be -1 (Keras' Reshape)."""

    def __init__(self, shape, *, name=None):
        super().__init__(name=name)
        if not isinstance(shape, (tuple, list)) or not all(isinstance(s, (int, np.integer)) for s in shape):
            raise OpArgumentError(f"Reshape: shape must be a tuple of ints (without the batch axis), not {shape!r}")
        self.shape = tuple(int(s) for s in shape)

        if self.shape.count(-1) > 1 or any(s < 1 and s != -1 for s in self.shape):
            raise OpArgumentError(f"Reshape: shape {self.shape} may hold one -1 and otherwise sizes >= 1")

    def forward(self, x):
        if len(x.shape) < 2 or any(size is None for size in x.shape[1:]):
            raise ShapeError(f"{self.describe()}: {x.name!r} {x.shape} needs a batch axis and static sizes after it")
        size, known = math.prod(x.shape[1:]), math.prod(s for s in self.shape if s != -1)
        if (size % known if -1 in self.shape else size != known):
            raise ShapeError(f"{self.describe()}: cannot reshape {x.name!r} {x.shape} to (batch, "
                             f"{', '.join(map(str, self.shape))}): {size} values per example")
        shape = tuple(size // known if s == -1 else s for s in self.shape)
        return x.graph.shape.reshape(x, (-1,) + shape)


class Dropout(Layer):
    """Inverted dropout with rate ``rate``: a new mask per training step under ``fit``, the identity under
    ``g.predict``, ``g.evaluate`` and ``gv.inference()``. The mask's seed comes from the layer's seed."""

    def __init__(self, rate, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
            raise OpArgumentError(f"Dropout: rate must be a number in [0, 1), not {rate!r}")
        self.rate = float(rate)

    def forward(self, x):
        calls = len(x.graph.layers[self.name]["calls"])   # each call of a shared Dropout draws its own masks
        seed = int(self.rng(f"mask{calls}").integers(0, 2**31 - 1))
        return x.graph.nn.dropout(x, self.rate, seed=seed)


class Embedding(Layer):
    """Rows of a (num_embeddings, dim) table by integer ids (PyTorch's nn.Embedding: N(0, 1) initial
    values, the ``padding_idx`` row zero and without gradient). The table is in ``dtype`` when given, else
    in the graph's ``float_dtype`` (ids carry no float dtype to follow)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, init=None, dtype=None, *,
                 name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.rows = positive_int(self, "num_embeddings", num_embeddings)
        self.dim = positive_int(self, "embedding_dim", embedding_dim)
        self.padding_idx, self.dtype = padding_idx, dtype
        self.init = initializers.get(init or initializers.normal(0.0, 1.0))

    def build(self, ids):
        dtype = float_dtype(self, ids, self.dtype)
        row = None
        if self.padding_idx is not None:
            if not -self.rows <= self.padding_idx < self.rows:
                raise OpArgumentError(f"{self.describe()}: padding_idx {self.padding_idx} is not a row of "
                                      f"a table of {self.rows} rows")
            row = self.padding_idx % self.rows
        self.table = self.add_variable("weight", (self.rows, self.dim), dtype, self.init, (self.dim, self.rows),
                                       zero_row=row)

    def forward(self, ids):
        return ids.graph.nn.embedding(ids, self.table, padding_idx=self.padding_idx)


class Activation(Layer):
    """An activation by name: one of ``graphview.layers.ACTIVATIONS`` ('relu', 'tanh', 'gelu', ...)."""

    def __init__(self, activation, *, name=None, **attrs):
        super().__init__(name=name)
        self.function = activation_of(type(self).__name__, activation)
        self.attrs = attrs

    def forward(self, x):
        return self.function(x, **self.attrs) if self.attrs else self.function(x)


def _activation_class(class_name, op, namespace="nn", **defaults):
    """A layer class applying ``g.<namespace>.<op>`` with keyword attributes (defaults as the op's)."""
    def __init__(self, *, name=None, **attrs):
        Layer.__init__(self, name=name)
        unknown = set(attrs) - set(defaults)
        if unknown:
            raise OpArgumentError(f"{class_name}: unknown argument {sorted(unknown)[0]!r}; it takes "
                                  f"{', '.join(defaults) or 'only name'}")
        self.attrs = {**defaults, **attrs}

    def forward(self, x):
        return getattr(getattr(x.graph, namespace), op)(x, **self.attrs)
    doc = f"``g.{namespace}.{op}`` as a layer" + (f" (arguments {', '.join(defaults)})." if defaults else ".")
    return type(class_name, (Layer,), {"__init__": __init__, "forward": forward, "__doc__": doc})


ReLU = _activation_class("ReLU", "relu")
Sigmoid = _activation_class("Sigmoid", "sigmoid")
Tanh = _activation_class("Tanh", "tanh", namespace="math")
GELU = _activation_class("GELU", "gelu")
ELU = _activation_class("ELU", "elu", alpha=1.0)
SELU = _activation_class("SELU", "selu")
Softplus = _activation_class("Softplus", "softplus")
SiLU = _activation_class("SiLU", "silu")
LogSigmoid = _activation_class("LogSigmoid", "log_sigmoid")
HardTanh = _activation_class("HardTanh", "hard_tanh", min_val=-1.0, max_val=1.0)
LeakyReLU = _activation_class("LeakyReLU", "leaky_relu", alpha=0.01)
Softmax = _activation_class("Softmax", "softmax", axis=-1)
LogSoftmax = _activation_class("LogSoftmax", "log_softmax", axis=-1)
