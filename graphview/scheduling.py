"""Scheduling for the executor (ADR 0009): buffer versions, reader ordering and copies.

:func:`schedule` orders the ARRAY nodes a plan needs so that every reader of a
buffer version runs before that version is overwritten in place, and decides
which in-place writes must write a private copy instead (with the reason that
``g.explain`` shows). It looks only at the graph's structure, never at values
or shapes; :mod:`graphview.execution` caches its result per set of outputs.
"""
import collections
import heapq

from graphview.errors import GraphviewError
from graphview.registry import get as get_op
from graphview.variable import Kind


class Schedule:
    """The run order of the ARRAY nodes and the copies that keep in-place writes invisible."""

    def __init__(self, sources, order, copies, value_copies, version, buffer, external):
        self.sources, self.order = sources, order
        self.copies = copies                  # in-place node -> why it writes a private copy
        self.value_copies = value_copies      # in-place node -> [(input position, why)]
        self._version, self._buffer, self._external = version, buffer, external
        self.input_copies = {}
        for name in copies:
            self.input_copies[name] = (get_op(next(n for n in order if n.name == name).op).inplace[0],)
        for name, items in value_copies.items():
            self.input_copies[name] = self.input_copies.get(name, ()) + tuple(p for p, _ in items)

    def buffer_of(self, name):
        return self._buffer[self._version[name]]

    def external(self, name):
        """True when ``name``'s value lives in a buffer the run does not own (a feed or a stored value)."""
        return self.buffer_of(name) in self._external


def schedule(graph, names, needed):
    """Order ``needed`` so that every reader of a buffer version runs before that version is overwritten.

    Versions: a source or a kernel's output starts one; a view op's output is
    the same version as its input 0; an in-place op's output is a new version
    of the buffer it writes. An in-place op W writing version V needs every
    other reader of V (any node with an input of version V) to run first; if
    one of them depends on W, V is a requested output, or V lives in a buffer
    the run does not own, W writes a private copy instead.
    """
    sources = [n for n in needed if n.kind is not Kind.ARRAY]
    arrays = [n for n in needed if n.kind is Kind.ARRAY]
    position = {n.name: i for i, n in enumerate(needed)}
    consumers = collections.defaultdict(set)
    for node in arrays:
        for name in node.inputs:
            consumers[name].add(node.name)
    version = {}
    for node in needed:
        definition = get_op(node.op) if node.kind is Kind.ARRAY else None
        shares = definition is not None and definition.view and not definition.inplace and node.inputs
        version[node.name] = version[node.inputs[0]] if shares else node.name
    readers = collections.defaultdict(set)
    for node in arrays:
        for name in node.inputs:
            readers[version[name]].add(node.name)
    requested = {version[name] for name in names}
    buffer = {n.name: n.name for n in sources}
    external = {n.name for n in sources}
    must_precede = collections.defaultdict(set)     # W -> nodes that run before W
    later = collections.defaultdict(set)            # X -> W for each X in must_precede[W]
    writer_of = {}
    copies, value_copies = {}, {}

    def reaches(start, target):
        stack, seen = [start], {start}
        while stack:
            name = stack.pop()
            if name == target:
                return True
            for following in consumers[name] | later[name]:
                if following not in seen:
                    seen.add(following)
                    stack.append(following)
        return False

    for node in arrays:
        definition = get_op(node.op)
        if not definition.inplace:
            if version[node.name] == node.name:
                buffer[node.name] = node.name
            continue
        written = node.inputs[definition.inplace[0]]
        old = version[written]
        reason = None
        if buffer[old] in external:
            source = graph.node(buffer[old])
            reason = (f"{written} is the caller's array for placeholder {source.name!r}, which is never modified"
                      if source.kind is Kind.PLACEHOLDER else
                      f"{written} shares the stored value of {source.kind} {source.name!r}, which running a graph "
                      "never changes (copy on write)")
        elif old in requested:
            reason = f"the old value of {written} is a requested output"
        elif old in writer_of:
            reason = f"{writer_of[old]} already writes the old value of {written} in place"
        else:
            blocked = sorted((x for x in readers[old] if x != node.name and reaches(node.name, x)),
                             key=position.get)
            if blocked:
                reason = f"{blocked[0]} reads the old value of {written} but also depends on this write"
        if reason is None:
            for reader in readers[old] - {node.name}:
                must_precede[node.name].add(reader)
                later[reader].add(node.name)
            writer_of[old] = node.name
            buffer[node.name] = buffer[old]
            aliased = [(p, f"it shares the buffer {node.name} writes") for p, name in enumerate(node.inputs)
                       if p not in definition.inplace and buffer[version[name]] == buffer[old]]
            if aliased:
                value_copies[node.name] = aliased
        else:
            copies[node.name] = reason
            buffer[node.name] = node.name
    order = _topological(arrays, position, must_precede)
    return Schedule(sources, order, copies, value_copies, version, buffer, external)


def _topological(arrays, position, must_precede):
    """Creation order, except that each node waits for its inputs and its must_precede set."""
    names = {n.name for n in arrays}
    by_name = {n.name: n for n in arrays}
    waiting = {}
    unblocks = collections.defaultdict(list)
    for node in arrays:
        before = {name for name in node.inputs if name in names} | must_precede.get(node.name, set())
        waiting[node.name] = len(before)
        for name in before:
            unblocks[name].append(node.name)
    ready = [position[n.name] for n in arrays if waiting[n.name] == 0]
    heapq.heapify(ready)
    name_at = {position[n.name]: n.name for n in arrays}
    order = []
    while ready:
        name = name_at[heapq.heappop(ready)]
        order.append(by_name[name])
        for following in unblocks[name]:
            waiting[following] -= 1
            if waiting[following] == 0:
                heapq.heappush(ready, position[following])
    if len(order) != len(arrays):
        raise GraphviewError("internal error: the in-place ordering constraints form a cycle")
    return order
