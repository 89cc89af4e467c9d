"""Which dims each graph value carries, the lengths of dynamic dims, and the build hooks.

Graph nodes are frozen and shared, so dims live in a side table per graph
(variable name -> one Dim or None per axis). ``graphview.building.build_op``
calls two hooks: :func:`before_op` turns Dim-valued axis attributes into axis
numbers (and sends reductions over a dim with lengths to the masked ops), and
:func:`after_op` carries the inputs' dims to the output by a rule per op family.
An op without a rule gives an output whose dims are unknown (None).
"""
import contextlib
import contextvars
import math
import threading
import weakref

import numpy as np

from graphview import attributes
from graphview.dims import Dim, DimError, batch_dim
from graphview.errors import DTypeError, ShapeError
from graphview.shapes import expand_axes, normalize_axes, normalize_axis, squeeze_axes

_TABLES = weakref.WeakKeyDictionary()
_TABLES_LOCK = threading.Lock()
_MASKING = contextvars.ContextVar("graphview_masking", default=True)


class DimTable:
    """The dims side table of one graph."""

    def __init__(self):
        self.dims = {}      # variable name -> tuple of Dim or None, one per axis
        self.lengths = {}   # Dim -> name of its int lengths variable, shape (batch,)
        self.cache = {}     # (purpose, ...) -> variable name: masks, layout and rearrange plans
        self.subsets = {}   # Dim of a batch subset's sequences -> the Dim it was taken from


def table(graph, create=True):
    found = _TABLES.get(graph)
    if found is None and create:
        with _TABLES_LOCK:
            found = _TABLES.setdefault(graph, DimTable())
    return found


# --- reading and writing dims ------------------------------------------------------------

def dims_of(x):
    """The dims of variable ``x``: one gv.Dim (or None where unknown) per axis."""
    found = table(x.graph, create=False)
    dims = found.dims.get(x.name) if found else None
    return dims if dims is not None else (None,) * len(x.shape)


def set_dims(x, dims):
    """Tag the axes of ``x`` with ``dims`` (static sizes must match the shape); returns x."""
    dims = tuple(dims)
    shape = x.shape
    if len(dims) != len(shape):
        raise DimError(f"{x.name!r} has {len(shape)} axes {shape} but {len(dims)} dims were given: {dims}")
    for axis, (dim, size) in enumerate(zip(dims, shape)):
        if dim is None:
            continue
        if not isinstance(dim, Dim):
            raise DimError(f"dims of {x.name!r}: axis {axis} holds {dim!r}, which is not a gv.Dim or None")
        if dim.size is not None and size is not None and dim.size != size:
            raise DimError(f"dims of {x.name!r}: axis {axis} has size {size} but {dim!r} has size {dim.size}")
    if any(d is not None for d in dims):
        table(x.graph).dims[x.name] = dims
    return x


def axis_of(x, dim, what="op"):
    """The position of ``dim`` among the axes of ``x``; a clear error when absent or ambiguous."""
    dims = dims_of(x)
    found = [i for i, d in enumerate(dims) if d is not None and d == dim]
    if not found:
        found = [i for i, d in enumerate(dims) if d is not None and dim in subset_sources(x.graph, d)]
    if not found:
        raise DimError(f"{what}: {dim!r} is not an axis of {x.name!r}, whose dims are {_describe(dims)}")
    if len(found) > 1:
        raise DimError(f"{what}: {dim!r} is axes {found} of {x.name!r}; give the axis number instead")
    return found[0]


def subset_sources(graph, dim):
    """The dims ``dim`` was taken from by batch subsets (``view.sub``, ``view.index``), nearest first."""
    entries = table(graph, create=False)
    sources = []
    while entries is not None and dim in entries.subsets:
        dim = entries.subsets[dim]
        sources.append(dim)
    return sources


def subset_dims(x, part, label, take):
    """Tag ``part`` (examples of x's batch axis) with x's dims, giving each dim with lengths a new dim
    whose lengths are ``take(lengths)``: a subset of sequences has lengths of its own. ``axis=dim`` on
    the part still finds the new dim (``dims_of`` shows it as ``name[label]``)."""
    dims = list(dims_of(x))
    for axis, dim, lengths in dynamic_axes(x):
        subset = Dim(f"{dim.name}[{label}]", kind=dim.kind)
        table(x.graph).subsets[subset] = dim
        declare_lengths(subset, take(lengths))
        dims[axis] = subset
    set_dims(part, dims)
    return part


def _describe(dims):
    return "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"


def lengths_of(graph, dim):
    """The lengths variable of a dynamic ``dim`` in ``graph``, or None.

    A merge ``outer * inner`` of a dim with lengths (outer) and a static one
    keeps its padding at the end, so it has lengths too: ``outer's * inner.size``,
    built once when first asked for (``gv.rearrange(x, "b t f -> b (t f)")``).
    """
    from graphview.variable import Variable
    found = table(graph, create=False)
    if not found or not found.lengths or not isinstance(dim, Dim):
        return None
    name = found.lengths.get(dim)
    if name is not None:
        return Variable(graph, name)
    return _merged_lengths(graph, dim)


def _merged_lengths(graph, dim):
    derived = dim.canonical().derived_from
    if derived is None or derived[0] != "mul" or not isinstance(derived[1], Dim):
        return None
    _, outer, inner = derived
    size = inner.size if isinstance(inner, Dim) else inner
    outer_lengths = lengths_of(graph, outer) if size is not None else None
    if outer_lengths is None:
        return None
    from graphview.ops.math import mul
    lengths = mul(outer_lengths, size)
    declare_lengths(dim, lengths)
    return lengths


def dynamic_axes(x):
    """``[(axis, dim, lengths variable)]`` for each axis of ``x`` whose dim has lengths."""
    found = table(x.graph, create=False)
    if not found or not found.lengths:
        return []
    result = []
    for axis, dim in enumerate(dims_of(x)):
        lengths = lengths_of(x.graph, dim) if dim is not None and dim.size is None else None
        if lengths is not None:
            result.append((axis, dim, lengths))
    return result


def declare_lengths(dim, lengths):
    """Attach the int variable ``lengths`` (shape (batch,)) to the dynamic ``dim`` in its graph."""
    if not isinstance(dim, Dim):
        raise DimError(f"lengths: key {dim!r} is not a gv.Dim")
    if dim.size is not None:
        raise DimError(f"lengths: {dim!r} has the static size {dim.size}; only dynamic dims have lengths")
    if lengths.dtype.kind != "i" or len(lengths.shape) != 1:
        raise DTypeError(f"lengths of {dim!r}: {lengths.name!r} must be a 1-D int array (one length per batch "
                         f"entry), not {lengths.shape} {lengths.dtype.name}")
    entries = table(lengths.graph)
    known = entries.lengths.get(dim)
    if known is not None and known != lengths.name:
        raise DimError(f"lengths: {dim!r} already has the lengths {known!r} in graph {lengths.graph.name!r}")
    entries.lengths[dim] = lengths.name
    if dims_of(lengths)[0] is None:
        set_dims(lengths, (batch_dim,))


def dimmed_placeholder(graph, name, shape, dtype, dims, lengths):
    """``g.placeholder(name, dims=..., lengths={dim: "name"})``: a placeholder whose axes carry dims."""
    from graphview.variable import Variable
    if dims is None:
        raise DimError(f"placeholder {name!r}: lengths= needs dims= to say which axes they belong to")
    dims = tuple(dims)
    from_dims = tuple(d.size if isinstance(d, Dim) else None for d in dims)
    if shape is None:
        shape = from_dims
    elif len(tuple(shape)) != len(dims):
        raise DimError(f"placeholder {name!r}: shape {tuple(shape)} and dims {dims} have different ranks")
    for axis, (dim, size) in enumerate(zip(dims, tuple(shape))):
        if dim is not None and not isinstance(dim, Dim):
            raise DimError(f"placeholder {name!r}: axis {axis} holds {dim!r}, which is not a gv.Dim or None")
        if dim is not None and dim.size is not None and size is not None and dim.size != size:
            raise DimError(f"placeholder {name!r}: axis {axis} has size {size} but {dim!r} has size {dim.size}")
    for dim in lengths or {}:
        if dim not in [d for d in dims if d is not None]:
            raise DimError(f"placeholder {name!r}: lengths given for {dim!r}, which is not among its dims {dims}")
        if isinstance(dim, Dim) and dim.size is not None:
            raise DimError(f"placeholder {name!r}: {dim!r} has the static size {dim.size}; only dynamic dims "
                           "have lengths")
        if batch_dim not in dims:
            raise DimError(f"placeholder {name!r}: lengths need a gv.batch_dim axis (one length per batch entry)")
    x = graph.placeholder(name, shape, dtype)
    set_dims(x, dims)
    for dim, source in (lengths or {}).items():
        if isinstance(source, Variable):
            variable = source
        elif source in graph:
            variable = graph[source]
        else:
            variable = graph.placeholder(source, (x.shape[dims.index(batch_dim)],), "int64")
        declare_lengths(dim, variable)
    return x


def mask_of(x, dim):
    """The cached bool mask of the valid entries of ``x`` along its dynamic ``dim`` (1 on other axes)."""
    from graphview.ops.masked import sequence_mask
    lengths = lengths_of(x.graph, dim)
    if lengths is None:
        raise DimError(f"mask_of: {dim!r} has no lengths in graph {x.graph.name!r}")
    return sequence_mask(lengths, x, batch_axis=axis_of(x, batch_dim, "mask_of"), time_axis=axis_of(x, dim, "mask_of"))


# --- masking switch ----------------------------------------------------------------------

@contextlib.contextmanager
def unmasked():
    """Inside this block, reductions, softmax and losses over dynamic dims include the padding."""
    token = _MASKING.set(False)
    try:
        yield
    finally:
        _MASKING.reset(token)


def masking_enabled():
    return _MASKING.get()


# --- build hooks -------------------------------------------------------------------------

def _holds_dim(value):
    return isinstance(value, Dim) or (isinstance(value, (list, tuple)) and any(_holds_dim(v) for v in value))


def _resolve(op, value, x):
    if isinstance(value, Dim):
        return axis_of(x, value, op)
    if isinstance(value, (list, tuple)):
        return type(value)(_resolve(op, v, x) for v in value)
    return value


def before_op(graph, definition, variables, attrs, name):
    """Dim-valued attributes become axis numbers of input 0; maybe redirect to a masked op."""
    if any(_holds_dim(v) for v in attrs.values()):
        if not variables:
            raise DimError(f"{definition.name}: a dim was given but the op has no input to find it in")
        attrs = {key: _resolve(definition.name, value, variables[0]) for key, value in attrs.items()}
        # The resolved values go through the declarations as every other value did (building skipped
        # them): (t, 0.5) is an OpArgumentError naming the op, as (1, 0.5) is.
        attrs = attributes.check(definition, attrs, [(repr(v.name), v.node.shape) for v in variables],
                                 f"{definition.name}{f' {name!r}' if name else ''}: ")
    found = _TABLES.get(graph)
    if found is None or not found.lengths or not _MASKING.get():
        return attrs, None
    from graphview.ops.masked_redirect import redirect
    return attrs, redirect(definition.name, variables, attrs, name)


def after_op(graph, definition, variables, result):
    """Carry the inputs' dims to ``result`` by the rule of the op's family."""
    found = _TABLES.get(graph)
    if found is None or not any(v.name in found.dims for v in variables):
        return
    in_dims = [dims_of(v) for v in variables]
    in_shapes = [v.shape for v in variables]
    try:
        dims = _rule(definition, in_dims, in_shapes, result.node.attributes, result.shape)
    except (DimError, ShapeError, ValueError, IndexError, TypeError):
        dims = None
    if dims is None or len(dims) != len(result.shape):
        return
    dims = tuple(d if d is None or d.size is None or s is None or d.size == s else None
                 for d, s in zip(dims, result.shape))
    if any(d is not None for d in dims):
        found.dims[result.name] = dims


def _broadcast_dims(in_dims, in_shapes, rank):
    """Right-aligned, as NumPy broadcasts: an axis keeps the dim its inputs agree on, else None."""
    result = []
    for position in range(rank):
        everyone, sized = [], []
        for dims, shape in zip(in_dims, in_shapes):
            i = len(shape) - rank + position
            if i >= 0:
                everyone.append(dims[i])
                if shape[i] != 1:
                    sized.append(dims[i])
        known = [d for d in (sized or everyone) if d is not None]
        result.append(known[0] if known and all(d == known[0] for d in known) else None)
    return tuple(result)


def _same_rest(old, new):
    """True when two static shape tails hold the same number of elements, so an unknown axis before
    them is the same axis in both (``(None, 3, 4)`` to ``(-1, 12)`` keeps the batch)."""
    return None not in old and None not in new and math.prod(old) == math.prod(new)


def _reshape_dims(dims, old, new):
    """Dims of the unchanged leading and trailing axes of a reshape."""
    result = [None] * len(new)
    lead = 0
    while lead < min(len(old), len(new)) and old[lead] == new[lead] and (
            old[lead] is not None or _same_rest(old[lead + 1:], new[lead + 1:])):
        result[lead] = dims[lead]
        lead += 1
    tail = 1
    while tail <= min(len(old), len(new)) - lead and old[-tail] == new[-tail] and old[-tail] is not None:
        result[-tail] = dims[-tail]
        tail += 1
    return tuple(result)


def _rule(definition, in_dims, in_shapes, attrs, out_shape):
    op, family = definition.name, definition.family
    first = in_dims[0] if in_dims else ()
    if family == "elementwise" or op in ("masked_softmax", "masked_log_softmax"):
        return _broadcast_dims(in_dims[:1] if op.startswith("masked") else in_dims, in_shapes, len(out_shape))
    if family == "reduce" or op.startswith("masked_") and "keepdims" in attrs:
        axes = normalize_axes(attrs.get("axis"), len(first))
        if attrs.get("keepdims"):
            return tuple(None if i in axes else d for i, d in enumerate(first))
        return tuple(d for i, d in enumerate(first) if i not in axes)
    if family == "nn" and len(out_shape) == len(first):
        return first
    if op in ("permute", "transpose"):
        perm = attrs.get("perm")
        order = tuple(reversed(range(len(first)))) if perm is None else tuple(p % len(first) for p in perm)
        return tuple(first[p] for p in order)
    if op == "squeeze":
        axes = squeeze_axes(in_shapes[0], attrs.get("axis"))
        return tuple(d for i, d in enumerate(first) if i not in axes)
    if op == "expand_dims":
        axes = expand_axes(len(first), attrs["axis"])
        rest = iter(first)
        return tuple(None if i in axes else next(rest) for i in range(len(out_shape)))
    if op in ("reshape", "reshape_like"):
        return _reshape_dims(first, in_shapes[0], out_shape)
    if op in ("broadcast_to", "broadcast_like"):
        return (None,) * (len(out_shape) - len(first)) + tuple(first)
    if op == "concat":
        axis = normalize_axis(attrs.get("axis", 0), len(first))
        return tuple(None if i == axis else d for i, d in enumerate(first))
    if op == "gather":
        axis = normalize_axis(attrs.get("axis", 0), len(first))
        return tuple(first[:axis]) + (None,) * len(in_shapes[1]) + tuple(first[axis + 1:])
    if op == "matmul" and len(first) >= 2 and len(in_dims[1]) >= 2 and len(out_shape) == len(first):
        return tuple(first[:-1]) + (in_dims[1][-1],)
    return None


def shape_of(dims):
    return tuple(d.size if isinstance(d, Dim) else None for d in dims)


def static_size(dims):
    sizes = shape_of(dims)
    return None if None in sizes else int(np.prod(sizes, dtype=np.int64))
