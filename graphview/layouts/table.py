"""The dims store of each graph: which dims its values carry, the lengths of dynamic dims, and the
masking switch.

Graph nodes are frozen and shared, so dims live in a side table per graph (variable name -> one
Dim or None per axis). The store sits below the ops (ADR 0017): ops read it (``axis=dim``, the
cached masks), building's hooks fill it (:mod:`graphview.layouts.dimrules` carries dims to an op's
output, :mod:`graphview.masking` builds reductions over a dim with lengths as masked ops), and it
imports no op module: the one op it builds (the lengths of a merged dim) it finds in the registry.
"""
import contextlib
import contextvars
import threading
import weakref

import numpy as np

from graphview import registry
from graphview.dims import Dim, DimError, batch_dim
from graphview.errors import DTypeError
from graphview.variable import Variable

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


def dims_table(graph, create=True):
    """The dims table of ``graph``, created on first use unless ``create`` is False (then None)."""
    found = _TABLES.get(graph)
    if found is None and create:
        with _TABLES_LOCK:
            found = _TABLES.setdefault(graph, DimTable())
    return found


def snapshot(graph):
    """A copy of ``graph``'s dims table (None when it has none), for :func:`restore` after a failed
    atomic block (``GraphCore.atomic``)."""
    found = dims_table(graph, create=False)
    if found is None:
        return None
    return {part: dict(getattr(found, part)) for part in ("dims", "lengths", "cache", "subsets")}


def restore(graph, saved):
    """Put back the dims table :func:`snapshot` copied."""
    found = dims_table(graph, create=saved is not None)
    if found is None:
        return
    for part in ("dims", "lengths", "cache", "subsets"):
        setattr(found, part, dict(saved[part]) if saved is not None else {})


# --- reading and writing dims ------------------------------------------------------------

def dims_of(x):
    """The dims of variable ``x``: one gv.Dim (or None where unknown) per axis."""
    found = dims_table(x.graph, create=False)
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
        dims_table(x.graph).dims[x.name] = dims
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
    entries = dims_table(graph, create=False)
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
        dims_table(x.graph).subsets[subset] = dim
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
    found = dims_table(graph, create=False)
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
    lengths = registry.op("mul")(outer_lengths, size)
    declare_lengths(dim, lengths)
    return lengths


def derive_lengths(graph, dim, source, offset, stride=1):
    """Give ``dim``, made from the dynamic ``source`` by a convolution or pooling (``(source + offset)
    // stride + 1``, or ``source + offset + 1`` for stride 1), the lengths that formula gives for each
    sequence (RETURNN's rule), clipped at 0: ``max(n + offset + stride, 0) // stride``, built in
    ``graph`` from ``source``'s lengths. Nothing when ``source`` has no lengths or ``dim`` has some."""
    found = dims_table(graph, create=False)
    if found is None or dim is source or not isinstance(dim, Dim) or dim.size is not None or dim in found.lengths:
        return None
    lengths = lengths_of(graph, source)
    if lengths is None:
        return None
    valid = registry.op("maximum")(registry.op("add")(lengths, int(offset) + int(stride)), 0)
    if stride != 1:
        # floor division of a non-negative int: float64 division, truncated by the cast (exact below 2**53)
        valid = registry.op("cast")(registry.op("div")(valid, int(stride)), dtype=lengths.dtype.name)
    declare_lengths(dim, valid)
    return valid


def dynamic_axes(x):
    """``[(axis, dim, lengths variable)]`` for each axis of ``x`` whose dim has lengths."""
    found = dims_table(x.graph, create=False)
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
    entries = dims_table(lengths.graph)
    known = entries.lengths.get(dim)
    if known is not None and known != lengths.name:
        raise DimError(f"lengths: {dim!r} already has the lengths {known!r} in graph {lengths.graph.name!r}")
    entries.lengths[dim] = lengths.name
    if dims_of(lengths)[0] is None:
        set_dims(lengths, (batch_dim,))


def dimmed_placeholder(graph, name, shape, dtype, dims, lengths):
    """``g.placeholder(name, dims=..., lengths={dim: "name"})``: a placeholder whose axes carry dims."""
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
    """False inside ``with gv.unmasked():``."""
    return _MASKING.get()


def has_lengths(graph):
    """Whether any dim of ``graph`` has lengths (only then can an op need masking)."""
    found = _TABLES.get(graph)
    return found is not None and bool(found.lengths)


def shape_of(dims):
    return tuple(d.size if isinstance(d, Dim) else None for d in dims)


def static_size(dims):
    sizes = shape_of(dims)
    return None if None in sizes else int(np.prod(sizes, dtype=np.int64))
