"""Graph nodes (frozen records) and the Variable handle users hold."""
import enum
from dataclasses import dataclass

import numpy as np

from graphview.errors import GraphviewError
from graphview.registry import NAMESPACES, GraphHandle
from graphview.shapes import format_shape


class Kind(str, enum.Enum):
    """What a variable is: trainable, constant, fed at run time, or an op's output."""
    VARIABLE = "VARIABLE"
    CONSTANT = "CONSTANT"
    PLACEHOLDER = "PLACEHOLDER"
    ARRAY = "ARRAY"

    def __str__(self):
        return self.value


@dataclass(frozen=True)
class Node:
    """One value in the graph. Never changes once added."""
    name: str
    kind: Kind
    op: str
    inputs: tuple
    attrs: tuple
    shape: tuple
    dtype: np.dtype
    index: int

    @property
    def attributes(self):
        return dict(self.attrs)


class Variable(GraphHandle):
    """A handle on a node of a graph: its name, shape, dtype and kind, plus operators."""

    __slots__ = ("graph", "name")

    # NumPy arrays and scalars on the left of an operator (np.ones(3) + a) return
    # NotImplemented instead of iterating the variable, so Python calls the reflected
    # operator below; np.add(array, a) and other direct ufunc calls raise TypeError.
    __array_ufunc__ = None

    def __init__(self, graph, name):
        self.graph = graph
        self.name = name

    @property
    def node(self):
        return self.graph.node(self.name)

    @property
    def shape(self):
        return self.node.shape

    @property
    def dtype(self):
        return self.node.dtype

    @property
    def kind(self):
        return self.node.kind

    @property
    def op(self):
        return self.node.op

    @property
    def rank(self):
        return len(self.node.shape)

    ndim = rank

    def eval(self, placeholders=None):
        """This variable's value: ``g.output(placeholders, [self])[name]``."""
        return self.graph.output(placeholders or {}, [self])[self.name]

    def __repr__(self):
        node = self.node
        return f"<{node.kind} {self.name!r} shape={format_shape(node.shape)} dtype={node.dtype.name}>"

    def __hash__(self):
        return hash((id(self.graph), self.name))

    def __bool__(self):
        raise GraphviewError(
            f"the truth value of variable {self.name!r} is not known until the graph runs; "
            "use g.math.where or compare the output arrays instead")

    def __len__(self):
        shape = self.shape
        if not shape or shape[0] is None:
            raise GraphviewError(f"variable {self.name!r} of shape {format_shape(shape)} has no static length")
        return shape[0]

    def __iter__(self):
        raise GraphviewError(f"variable {self.name!r} cannot be iterated; index it or use g.shape ops")

    # Arithmetic: each operator is the registered op of the same meaning.
    def __add__(self, other):
        return _math("add")(self, other)

    def __radd__(self, other):
        return _math("add")(other, self)

    def __sub__(self, other):
        return _math("sub")(self, other)

    def __rsub__(self, other):
        return _math("sub")(other, self)

    def __mul__(self, other):
        return _math("mul")(self, other)

    def __rmul__(self, other):
        return _math("mul")(other, self)

    def __truediv__(self, other):
        return _math("div")(self, other)

    def __rtruediv__(self, other):
        return _math("div")(other, self)

    def __pow__(self, other):
        return _math("pow")(self, other)

    def __rpow__(self, other):
        return _math("pow")(other, self)

    def __matmul__(self, other):
        return _math("matmul")(self, other)

    def __rmatmul__(self, other):
        return _math("matmul")(other, self)

    def __neg__(self):
        return _math("neg")(self)

    def __abs__(self):
        return _math("abs")(self)

    def __eq__(self, other):
        return _math("eq")(self, other)

    def __ne__(self, other):
        return _math("ne")(self, other)

    def __lt__(self, other):
        return _math("lt")(self, other)

    def __le__(self, other):
        return _math("le")(self, other)

    def __gt__(self, other):
        return _math("gt")(self, other)

    def __ge__(self, other):
        return _math("ge")(self, other)

    def __getitem__(self, index):
        return _registered("getitem", ("variable",))(self, index)

    @property
    def T(self):
        return _math("transpose")(self)


def _math(name):
    return _registered(name, ("math", "linalg"))


def _registered(name, spaces):
    """The function ops/ registered as ``name`` in the first of ``spaces`` holding it (registry.public):
    Variable's operators find their functions by name, since the ops import this module, not it them
    (``x[key]`` is ops/view's ``getitem``, in the internal namespace "variable", no ``g.`` attribute)."""
    for space in spaces:
        if name in NAMESPACES.get(space, {}):
            return NAMESPACES[space][name]
    raise GraphviewError(f"op {name!r} is not available")
