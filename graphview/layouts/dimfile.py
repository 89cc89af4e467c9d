"""The dims side table in graph files: which dims tag which axes, and the lengths of dynamic dims.

``g.save`` writes three optional keys into ``graph.json`` when a graph has dims:

- ``dims``: one record per dim, in an order where operands come before the
  dims derived from them: ``{"batch": true}`` for ``gv.batch_dim``,
  ``{"name", "size", "kind"}`` for a dim made with ``gv.Dim``, or
  ``{"derived": [operation, left, right], "size"}`` for dim arithmetic, an
  operand being an int or ``{"dim": index}``. ``"same_as": index`` records
  ``declare_same_as``.
- ``axis_dims``: ``[variable, [index or null per axis]]``.
- ``dim_lengths``: ``[index, lengths variable]``.
- ``dim_subsets``: ``[subset index, source index]`` for the dims of batch subsets
  (``view.sub``, ``view.index``), so that ``axis=source`` still finds them.

Loading re-creates the dims (new objects: identity is per load, never by name),
redoes the arithmetic through the memoized operations, and re-checks every
size, so a file that loads has a table that could have been built. Masked
nodes are ordinary nodes and were already saved; what this adds is that ops
built after loading see the dims (masking, ``axis=dim``, layout plans).
"""
from graphview import dims as dimmath
from graphview.dims import Dim, batch_dim
from graphview.errors import GraphviewError
from graphview.layouts import table

OPERATIONS = tuple(dimmath.SYMBOLS)


def write(graph):
    """The dims keys for ``graph.json`` as a dict (empty when the graph has no dims)."""
    found = table.dims_table(graph, create=False)
    if found is None or not (found.dims or found.lengths):
        return {}
    order, index = [], {}

    def collect(dim):
        if id(dim) in index:
            return
        if dim.derived_from is not None:
            for operand in dim.derived_from[1:]:
                if isinstance(operand, Dim):
                    collect(operand)
        index[id(dim)] = len(order)
        order.append(dim)
        if dim.canonical() is not dim:
            collect(dim.canonical())

    for dims in found.dims.values():
        for dim in dims:
            if dim is not None:
                collect(dim)
    for dim in found.lengths:
        collect(dim)
    subsets = [(subset, source) for subset, source in found.subsets.items() if id(subset) in index]
    for _, source in subsets:
        collect(source)
    records = [_record(dim, index) for dim in order]
    document = {"dims": records,
                "axis_dims": [[name, [None if d is None else index[id(d)] for d in dims]]
                              for name, dims in found.dims.items()],
                "dim_lengths": [[index[id(dim)], name] for dim, name in found.lengths.items()]}
    if subsets:
        document["dim_subsets"] = [[index[id(subset)], index[id(source)]] for subset, source in subsets]
    return document


def _record(dim, index):
    if dim is batch_dim:
        record = {"batch": True}
    elif dim.derived_from is not None:
        operation, left, right = dim.derived_from
        operands = [{"dim": index[id(v)]} if isinstance(v, Dim) else v for v in (left, right)]
        record = {"derived": [operation] + operands, "size": dim.size}
    else:
        record = {"name": dim.name, "size": dim.size, "kind": dim.kind}
    if dim.canonical() is not dim:
        record["same_as"] = index[id(dim.canonical())]
    return record


def read(document, graph, fail):
    """Fill ``graph``'s dims table from ``document``; ``fail(message)`` raises for anything invalid."""
    records = document.get("dims", [])
    axis_dims = document.get("axis_dims", [])
    lengths = document.get("dim_lengths", [])
    for key, value in (("dims", records), ("axis_dims", axis_dims), ("dim_lengths", lengths)):
        if not isinstance(value, list):
            fail(f"{key!r} must be a list, got {value!r:.80}")
    dims = []
    for position, record in enumerate(records):
        dims.append(_dim(record, dims, f"dims[{position}]", fail))
    for position, record in enumerate(records):
        if "same_as" in record:
            other = _reference(record["same_as"], len(dims), f"dims[{position}].same_as", fail)
            mine, theirs = dims[position], dims[other]
            if mine is batch_dim:   # never change the global batch dim: link the other way round
                mine, theirs = theirs, mine
            _guarded(lambda: mine.declare_same_as(theirs), f"dims[{position}].same_as", fail)
    for position, entry in enumerate(axis_dims):
        where = f"axis_dims[{position}]"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], list)):
            fail(f"{where} must be [variable name, [dim index or null per axis]], got {entry!r:.80}")
        name, indices = entry
        if name not in graph:
            fail(f"{where}: {name!r} is not a node of the graph")
        tagged = [None if i is None else dims[_reference(i, len(dims), where, fail)] for i in indices]
        _guarded(lambda: table.set_dims(graph[name], tagged), where, fail)
    for position, entry in enumerate(lengths):
        where = f"dim_lengths[{position}]"
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str)):
            fail(f"{where} must be [dim index, lengths variable name], got {entry!r:.80}")
        dim = dims[_reference(entry[0], len(dims), where, fail)]
        if entry[1] not in graph:
            fail(f"{where}: {entry[1]!r} is not a node of the graph")
        _guarded(lambda: table.declare_lengths(dim, graph[entry[1]]), where, fail)
    subsets = document.get("dim_subsets", [])
    if not isinstance(subsets, list):
        fail(f"'dim_subsets' must be a list, got {subsets!r:.80}")
    for position, entry in enumerate(subsets):
        where = f"dim_subsets[{position}]"
        if not (isinstance(entry, list) and len(entry) == 2):
            fail(f"{where} must be [subset dim index, source dim index], got {entry!r:.80}")
        subset, source = (dims[_reference(i, len(dims), where, fail)] for i in entry)
        if subset is source or subset in table.subset_sources(graph, source) or subset is batch_dim:
            fail(f"{where}: {subset!r} cannot be a subset of {source!r}")
        table.dims_table(graph).subsets[subset] = source


def _dim(record, made, where, fail):
    if not isinstance(record, dict):
        fail(f"{where} is a {type(record).__name__}, not an object")
    fields = set(record) - {"same_as"}
    if record.get("batch") is True and fields == {"batch"}:
        dim = batch_dim
    elif fields == {"derived", "size"}:
        dim = _derived(record, made, where, fail)
    elif fields == {"name", "size", "kind"}:
        dim = _guarded(lambda: Dim(record["name"], record["size"], record["kind"]), where, fail)
    else:
        fail(f"{where} has fields {sorted(record)}; expected batch, name/size/kind or derived/size "
             "(and optionally same_as)")
    return dim


def _derived(record, made, where, fail):
    derived = record["derived"]
    if not (isinstance(derived, list) and len(derived) == 3 and derived[0] in OPERATIONS):
        fail(f"{where}: derived must be [operation, left, right] with an operation among "
             f"{', '.join(OPERATIONS)}, got {derived!r:.80}")
    operands = []
    for operand in derived[1:]:
        if isinstance(operand, dict) and set(operand) == {"dim"}:
            operands.append(made[_reference(operand["dim"], len(made), where, fail, earlier=True)])
        elif isinstance(operand, int) and not isinstance(operand, bool):
            operands.append(operand)
        else:
            fail(f"{where}: operand {operand!r:.40} is neither an int nor {{\"dim\": index}}")
    operation = getattr(dimmath, derived[0])
    dim = _guarded(lambda: operation(*operands), where, fail)
    if not isinstance(dim, Dim) or dim.size != record["size"]:
        fail(f"{where}: {derived[0]} of {operands} gives {dim!r}, not a dim of size {record['size']!r}")
    return dim


def _reference(value, count, where, fail, earlier=False):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < count:
        bound = "an earlier dim" if earlier else f"a dim index in [0, {count})"
        fail(f"{where}: {value!r:.40} is not {bound}")
    return value


def _guarded(build, where, fail):
    try:
        return build()
    except (GraphviewError, TypeError, ValueError) as error:
        fail(f"{where}: {error}")
