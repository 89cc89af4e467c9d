"""The executor: cached, pruned plans that run each op's kernel in order.

A plan is built once per (outputs, placeholder shapes and dtypes): it holds
only the nodes the outputs need, in creation order (always topological), with
every output shape resolved, so bad shapes fail before any kernel runs. Values
live in a flat list of slots; a slot is cleared after its last reader, so peak
memory follows the live set. Each run has its own slots, so threads can run the
same graph at once.
"""
import collections
import threading
import time

import numpy as np

from graphview.errors import DTypeError, PlaceholderError, ShapeError, GraphviewError
from graphview.registry import get as get_op
from graphview.shapes import format_shape
from graphview.variable import Kind

from kernels import elementwise
from kernels.threads import PARALLEL_THRESHOLD

MAX_PLANS = 64


class ExecutionContext:
    """What listeners learn about the run they are watching."""

    def __init__(self, graph, mode, iteration=None, epoch=None):
        self.graph = graph
        self.mode = mode
        self.iteration = iteration
        self.epoch = epoch


def executor_of(graph):
    if graph._executor is None:
        with graph._lock:
            if graph._executor is None:
                graph._executor = Executor(graph)
    return graph._executor


class Step:
    __slots__ = ("node", "definition", "run", "inputs", "out", "free", "shape", "dtype", "view")

    def __init__(self, node, definition, run, inputs, out, shape, dtype, view):
        self.node, self.definition, self.run = node, definition, run
        self.inputs, self.out, self.free = inputs, out, ()
        self.shape, self.dtype, self.view = shape, dtype, view


class Plan:
    def __init__(self, graph, outputs, sources, steps, slots, copy_outputs):
        self.graph = graph
        self.outputs = outputs
        self.sources = sources
        self.steps = steps
        self.slots = slots
        self.copy_outputs = copy_outputs
        self.fast = [(s.run, s.inputs, s.out, s.free) for s in steps]

    def run(self, feeds, listeners, context):
        values = [None] * len(self.slots)
        held = self.graph._values
        for slot, name, kind in self.sources:
            values[slot] = feeds[name] if kind is Kind.PLACEHOLDER else held[name]
        if listeners:
            self._run_listened(values, listeners, context)
        else:
            for run, inputs, out, free in self.fast:
                values[out] = run(*[values[i] for i in inputs])
                for i in free:
                    values[i] = None
        result = {}
        for name in self.outputs:
            array = values[self.slots[name]]
            if name in self.copy_outputs:
                array = copy_array(array)
            result[name] = array
        return result

    def _run_listened(self, values, listeners, context):
        for step in self.steps:
            inputs = [values[i] for i in step.inputs]
            for listener in listeners:
                listener.pre_op(context, step.node, inputs)
            output = step.run(*inputs)
            values[step.out] = output
            for listener in listeners:
                listener.post_op(context, step.node, inputs, [output])
            for i in step.free:
                values[i] = None


def copy_array(array):
    out = np.empty(array.shape, array.dtype)
    elementwise.copy(array, out)
    return out


class Executor:
    def __init__(self, graph):
        self.graph = graph
        self._plans = collections.OrderedDict()
        self._lock = threading.Lock()

    def run(self, placeholders, names, listeners=None, mode="output"):
        plan, feeds = self.plan(placeholders, names)
        listeners = list(self.graph.listeners) + list(listeners or ())
        context = ExecutionContext(self.graph, mode) if listeners else None
        return plan.run(feeds, listeners, context)

    def plan(self, placeholders, names):
        names = tuple(dict.fromkeys(names))
        needed = self._needed(names)
        feeds = self._feeds(placeholders, needed, names)
        key = (names, tuple((n, a.shape, a.dtype.str, a.flags.c_contiguous) for n, a in sorted(feeds.items())))
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                plan = self._plans.get(key) or self._build(names, needed, feeds)
                self._plans[key] = plan
                while len(self._plans) > MAX_PLANS:
                    self._plans.popitem(last=False)
        return plan, feeds

    def _needed(self, names):
        graph = self.graph
        seen = set()
        stack = list(names)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            stack.extend(graph.node(name).inputs)
        return sorted((graph.node(name) for name in seen), key=lambda node: node.index)

    def _feeds(self, placeholders, needed, names):
        graph = self.graph
        if not isinstance(placeholders, dict):
            raise PlaceholderError(f"placeholders must be a dict of name to array, not {type(placeholders).__name__}")
        for name in placeholders:
            if name not in graph:
                known = ", ".join(n.name for n in graph.nodes() if n.kind is Kind.PLACEHOLDER) or "none"
                raise PlaceholderError(f"unknown placeholder {name!r}; the graph's placeholders are: {known}")
            if graph.node(name).kind is not Kind.PLACEHOLDER:
                raise PlaceholderError(f"{name!r} is a {graph.node(name).kind}, not a placeholder; it cannot be fed")
        feeds = {}
        for node in needed:
            if node.kind is not Kind.PLACEHOLDER:
                continue
            if node.name not in placeholders:
                raise PlaceholderError(
                    f"missing placeholder {node.name!r} ({format_shape(node.shape)} {node.dtype.name}), "
                    f"needed for {', '.join(names)}")
            feeds[node.name] = _checked_feed(node, placeholders[node.name])
        return feeds

    def _build(self, names, needed, feeds):
        slots = {node.name: i for i, node in enumerate(needed)}
        shapes, contiguous, held = {}, {}, {}
        sources, steps = [], []
        for node in needed:
            if node.kind is Kind.ARRAY:
                continue
            sources.append((slots[node.name], node.name, node.kind))
            array = feeds[node.name] if node.kind is Kind.PLACEHOLDER else self.graph._held(node.name)
            shapes[node.name] = array.shape
            contiguous[node.name] = array.flags.c_contiguous
            held[node.name] = True
        for node in needed:
            if node.kind is not Kind.ARRAY:
                continue
            definition = get_op(node.op)
            attrs = node.attributes
            in_shapes = [shapes[name] for name in node.inputs]
            try:
                shape = tuple(definition.shape(*in_shapes, **attrs))
            except (GraphviewError, ValueError, TypeError) as error:
                described = ", ".join(f"{n} {format_shape(s)}" for n, s in zip(node.inputs, in_shapes))
                raise ShapeError(f"{node.op} {node.name!r} ({described}): {error}") from None
            shapes[node.name] = shape
            in_contiguous = [contiguous[name] for name in node.inputs]
            run = _runner(definition, attrs, shape, node.dtype, in_shapes, in_contiguous)
            contiguous[node.name] = not definition.view
            held[node.name] = definition.view and bool(node.inputs) and held[node.inputs[0]]
            steps.append(Step(node, definition, run, tuple(slots[n] for n in node.inputs),
                              slots[node.name], shape, node.dtype, definition.view))
        _assign_frees(steps, set(slots[n] for n in names))
        copy_outputs = {name for name in names if held.get(name)}
        return Plan(self.graph, names, sources, steps, slots, copy_outputs)

    def explain(self, names):
        """A text description of the plan for ``names`` with the declared shapes."""
        needed = self._needed(tuple(names))
        lines = [f"plan for {', '.join(names)}: {sum(n.kind is Kind.ARRAY for n in needed)} steps"]
        for node in needed:
            if node.kind is not Kind.ARRAY:
                lines.append(f"  load   {node.name} ({node.kind}, {format_shape(node.shape)} {node.dtype.name})")
                continue
            definition = get_op(node.op)
            how = "view (no copy)" if definition.view else "kernel"
            lines.append(f"  {how:<6} {node.name} = {node.op}({', '.join(node.inputs)})"
                         f" -> {format_shape(node.shape)} {node.dtype.name}")
        return "\n".join(lines)


def _assign_frees(steps, keep):
    last = {}
    for index, step in enumerate(steps):
        for slot in step.inputs:
            last[slot] = index
    frees = collections.defaultdict(list)
    for slot, index in last.items():
        if slot not in keep:
            frees[index].append(slot)
    for index, step in enumerate(steps):
        step.free = tuple(frees.get(index, ()))


def _runner(definition, attrs, shape, dtype, in_shapes, in_contiguous):
    kernel = definition.kernel
    if definition.view:
        if attrs:
            return lambda *inputs: kernel(*inputs, **attrs)
        return kernel
    size = int(np.prod(shape, dtype=np.int64))
    empty = np.empty
    if (isinstance(kernel, elementwise.Elementwise) and size < PARALLEL_THRESHOLD and not attrs
            and all(in_contiguous) and all(s == shape for s in in_shapes)):
        contiguous = kernel.contiguous

        def run_contiguous(*inputs):
            out = empty(shape, dtype)
            contiguous(*inputs, out, 0, size)
            return out
        return run_contiguous
    if attrs:
        def run_with_attrs(*inputs):
            out = empty(shape, dtype)
            kernel(*inputs, out, **attrs)
            return out
        return run_with_attrs

    def run_kernel(*inputs):
        out = empty(shape, dtype)
        kernel(*inputs, out)
        return out
    return run_kernel


def _checked_feed(node, value):
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.ndim != len(node.shape) or any(d is not None and d != a for d, a in zip(node.shape, array.shape)):
        raise ShapeError(f"placeholder {node.name!r} expects shape {format_shape(node.shape)}, "
                         f"got an array of shape {format_shape(array.shape)}")
    if array.dtype != node.dtype:
        # An array's dtype is a statement of intent: no silent casts. Python
        # numbers and lists have none, so they take the placeholder's if it is safe.
        if isinstance(value, np.ndarray) or not np.can_cast(array.dtype, node.dtype, "same_kind"):
            raise DTypeError(f"placeholder {node.name!r} expects dtype {node.dtype.name}, got an array of dtype "
                             f"{array.dtype.name}; cast it first (e.g. array.astype('{node.dtype.name}'))")
        array = np.asarray(value, dtype=node.dtype)
    return array
