"""The executor: cached, pruned plans that run each op's kernel in order.

A plan is built once per (outputs, placeholder shapes and dtypes): it holds
only the nodes the outputs need, with every output shape resolved, so bad
shapes fail before any kernel runs (sizes that depend on run-time values, such
as a dynamic CreateView, are resolved when the op runs). Values live in a flat
list of slots; a slot is cleared after its last reader, so peak memory follows
the live set. Each run has its own slots, so threads can run the same graph at
once.

In-place ops (ADR 0009). View ops share their input's buffer; an op declared
with ``inplace=`` writes one input's buffer and returns it as a new version.
The schedule (:func:`schedule`) gives every buffer version its readers, runs
every reader of the old version before the write, and makes the op write a
private copy instead when that is impossible (a reader of the old version
depends on the write, the old version is a requested output or is written by
another op) or not allowed: placeholder arrays and the stored values of
variables and constants are never modified (copy on write). ``g.explain``
lists each in-place step and every copy with its reason.
"""
import collections
import math
import threading
import weakref

import numpy as np

from graphview import fusion
from graphview.config import config
from graphview.errors import DTypeError, ExecutionError, PlaceholderError, ShapeError, GraphviewError
from graphview.infer import run_shape
from graphview.registry import get as get_op
from graphview.scheduling import schedule
from graphview.shapes import format_shape
from graphview.variable import Kind

from graphview_kernels import elementwise
from graphview_kernels.launch import flat_broadcast

MAX_PLANS = 64
_EXECUTORS = weakref.WeakKeyDictionary()   # graph -> its Executor, which holds the graph weakly


class ExecutionContext:
    """What listeners learn about the run they are watching."""

    def __init__(self, graph, mode, iteration=None, epoch=None):
        self.graph = graph
        self.mode = mode
        self.iteration = iteration
        self.epoch = epoch


def executor_of(graph):
    """The graph's one executor (its cache of plans), made on first use."""
    executor = _EXECUTORS.get(graph)
    if executor is None:
        with graph.lock:
            executor = _EXECUTORS.get(graph)
            if executor is None:
                executor = _EXECUTORS[graph] = Executor(graph)
    return executor


class Step:
    """One op of a plan. ``run`` takes the input values as they are in the slots; ``kernel_call``
    takes them after the private ``copies`` (input positions) are made, which the listened
    path makes itself so that listeners see exactly the arrays the kernel receives."""
    __slots__ = ("node", "definition", "run", "kernel_call", "copies", "inputs", "out", "free", "shape", "dtype",
                 "view")

    def __init__(self, node, definition, run, kernel_call, copies, inputs, out, shape, dtype, view):
        self.node, self.definition, self.run, self.kernel_call, self.copies = node, definition, run, kernel_call, copies
        self.inputs, self.out, self.free = inputs, out, ()
        self.shape, self.dtype, self.view = shape, dtype, view


class Plan:
    """``steps`` run one by one when listeners watch (each op seen, ADR 0024); ``unlistened`` is the
    loop of a run without listeners, where a fused group (graphview/fusion.py) is one entry."""

    def __init__(self, graph, outputs, sources, steps, slots, copy_outputs, unlistened=None):
        self._graph = weakref.ref(graph)   # weak: the executor cache must not keep a graph alive
        self.outputs = outputs
        self.sources = sources
        self.steps = steps
        self.slots = slots
        self.copy_outputs = copy_outputs
        # The loop a run without listeners takes: one tuple per step, nothing looked up per node.
        self.unlistened = unlistened or [(s.run, s.inputs, s.out, s.free) for s in steps]
        self.fused = len(steps) - len(self.unlistened)      # member steps folded into fused kernels
        self._step_writing = {s.out: s for s in steps}
        self._reported = {}                 # output slot -> the requested names a step computes there
        for name in outputs:
            if slots[name] in self._step_writing:
                self._reported.setdefault(slots[name], []).append(name)

    @property
    def graph(self):
        return self._graph()

    def run(self, feeds, listeners, context, ready=None):
        values = [None] * len(self.slots)
        held = self.graph.store
        for slot, name, kind in self.sources:
            values[slot] = feeds[name] if kind is Kind.PLACEHOLDER else held[name]
        if listeners:
            self._run_listened(values, listeners, context, ready)
        elif ready is not None:
            self._run_reporting(values, ready)
        else:
            out = None
            try:
                for run, inputs, out, free in self.unlistened:
                    values[out] = run(*[values[i] for i in inputs])
                    for i in free:
                        values[i] = None
            except Exception as error:
                # ``out`` is still the slot of the step that raised: name its op and node.
                _raise_named(error, self._step_writing[out].node)
        result = {}
        for name in self.outputs:
            array = values[self.slots[name]]
            if name in self.copy_outputs:
                array = copy_array(array)
            result[name] = array
        return result

    def _run_reporting(self, values, ready):
        """The unlistened loop, calling ``ready`` for each requested output once its step has run (outside
        the step's error naming: an error of ``ready`` is the caller's own)."""
        reported = self._reported
        for run, inputs, out, free in self.unlistened:
            try:
                values[out] = run(*[values[i] for i in inputs])
            except Exception as error:
                _raise_named(error, self._step_writing[out].node)
            for i in free:
                values[i] = None
            for name in reported.get(out, ()):
                ready(name, values[out])

    def _run_listened(self, values, listeners, context, ready=None):
        for step in self.steps:
            inputs = [values[i] for i in step.inputs]
            for position in step.copies:
                inputs[position] = copy_array(inputs[position])
            for listener in listeners:
                listener.pre_op(context, step.node, inputs)
            try:
                output = step.kernel_call(*inputs)
            except Exception as error:
                _raise_named(error, step.node)
            values[step.out] = output
            for listener in listeners:
                listener.post_op(context, step.node, inputs, [output])
            for i in step.free:
                values[i] = None
            if ready is not None:
                for name in self._reported.get(step.out, ()):
                    ready(name, output)


def _raise_named(error, node):
    """Raise what :func:`_named` makes of ``error``: the error itself, or a new one from it."""
    named = _named(error, node)
    if named is error:
        raise error
    raise named from error


def _named(error, node):
    """The error to raise for ``error``, raised while the step of ``node`` ran, with the op and node
    in front of its message. A graphview error is renamed in place and returned: it keeps its type,
    its other arguments and attributes, and its traceback. Any other exception (one from a user's
    kernel: ZeroDivisionError, ValueError, ...) becomes an ExecutionError, for the caller to raise
    from the original. A MemoryError is returned unchanged: like KeyboardInterrupt and SystemExit
    (which are not Exceptions and never reach here), it says something about the machine, not the
    graph, and code that catches it (to retry with a smaller batch) must still see it."""
    prefix = f"{node.op} {node.name!r}"
    if isinstance(error, MemoryError):
        return error
    if not isinstance(error, GraphviewError):
        return ExecutionError(f"{prefix}: {type(error).__name__}: {error}")
    if error.args and isinstance(error.args[0], str) and not error.args[0].startswith(prefix):
        error.args = (f"{prefix}: {error.args[0]}",) + error.args[1:]
    return error


def copy_array(array):
    out = np.empty(array.shape, array.dtype)
    elementwise.copy(array, out)
    return out


class Executor:
    def __init__(self, graph):
        self._graph = weakref.ref(graph)   # weak: _EXECUTORS holds executors by their graph
        self._plans = collections.OrderedDict()
        self._schedules = collections.OrderedDict()
        self._ancestors = collections.OrderedDict()
        self._groups = collections.OrderedDict()
        self._lock = threading.RLock()

    @property
    def graph(self):
        return self._graph()

    def run(self, placeholders, names, listeners=None, mode="output", ready=None):
        """The values of ``names``. ``ready(name, array)``, when given, is called for each of ``names`` that
        a step computes, as soon as that step has run: its value is final then (ADR 0009 copies a requested
        output before any in-place op writes its buffer), so a caller can start work on it (data-parallel
        training all-reduces gradients while the backward pass goes on). The array may be a view of a
        buffer the caller does not own: read it during the call."""
        plan, feeds = self.plan(placeholders, names)
        listeners = list(self.graph.listeners) + list(listeners or ())
        context = ExecutionContext(self.graph, mode) if listeners else None
        return plan.run(feeds, listeners, context, ready)

    def plan(self, placeholders, names):
        names = tuple(dict.fromkeys(names))
        feeds = self.graph.check_feeds(placeholders, self._needed(names, Kind.PLACEHOLDER), ", ".join(names),
                                       checked_feed)
        key = (names, config.fusion,
               tuple((n, a.shape, a.dtype.str, a.flags.c_contiguous) for n, a in sorted(feeds.items())))
        return self._cached(self._plans, key, lambda: self._build(names, feeds)), feeds

    def schedule(self, names):
        """The run order and buffer decisions for ``names`` (structure only, cached)."""
        names = tuple(dict.fromkeys(names))
        return self._cached(self._schedules, names, lambda: schedule(self.graph, names, self._needed(names)))

    def groups(self, names):
        """The fused groups of the schedule for ``names`` (structure only, cached with it)."""
        names = tuple(dict.fromkeys(names))
        return self._cached(self._groups, names, lambda: fusion.groups(self.schedule(names), names))

    def _needed(self, names, kind=None):
        """The nodes ``names`` depend on (of ``kind`` only, when given), in creation order; cached,
        since a node's inputs never change."""
        if kind is not None:
            return self._cached(self._ancestors, (names, kind),
                                lambda: [node for node in self._needed(names) if node.kind is kind])
        graph = self.graph
        return self._cached(self._ancestors, (names, None),
                            lambda: sorted(map(graph.node, graph.ancestors(names)), key=lambda node: node.index))

    def _cached(self, cache, key, make):
        """``cache[key]``, made by ``make()`` on a miss; each cache keeps its newest MAX_PLANS entries."""
        found = cache.get(key)
        if found is None:
            with self._lock:
                found = cache.get(key)
                if found is None:
                    found = cache[key] = make()
                    while len(cache) > MAX_PLANS:
                        cache.popitem(last=False)
        return found

    def _build(self, names, feeds):
        plan = self.schedule(names)
        slots = {node.name: i for i, node in enumerate(plan.sources + plan.order)}
        shapes, contiguous = {}, {}
        sources, steps = [], []
        for node in plan.sources:
            sources.append((slots[node.name], node.name, node.kind))
            array = feeds[node.name] if node.kind is Kind.PLACEHOLDER else self.graph.stored(node.name)
            shapes[node.name] = array.shape
            contiguous[node.name] = array.flags.c_contiguous
        for node in plan.order:
            definition = get_op(node.op)
            attrs = node.attributes
            in_shapes = [shapes[name] for name in node.inputs]
            shape = run_shape(definition, node, in_shapes, attrs, "plan")
            shapes[node.name] = shape
            in_contiguous = [contiguous[name] for name in node.inputs]
            copies = plan.input_copies.get(node.name, ())
            run, kernel_call = _runner(node, definition, attrs, shape, node.dtype, in_shapes, in_contiguous, copies)
            if definition.inplace:
                written = definition.inplace[0]
                contiguous[node.name] = written in copies or in_contiguous[written]
            else:
                contiguous[node.name] = not definition.view
            steps.append(Step(node, definition, run, kernel_call, copies, tuple(slots[n] for n in node.inputs),
                              slots[node.name], shape, node.dtype, definition.view))
        keep = set(slots[n] for n in names)
        for step, free in zip(steps, _frees([s.inputs for s in steps], keep)):
            step.free = free
        copy_outputs = {name for name in names if plan.external(name)}
        fused = _fused_loop(steps, self.groups(names), shapes, contiguous, slots, keep) if config.fusion else None
        return Plan(self.graph, names, sources, steps, slots, copy_outputs, fused)

    def explain(self, names):
        """A text description of the plan for ``names``: run order, views, in-place writes and copies."""
        plan = self.schedule(names)
        # The count is of the lines below it: each loaded input and each op run; the `fused` and `output`
        # lines that may follow are notes on those steps, not steps.
        lines = [f"plan for {', '.join(names)}: {len(plan.sources)} inputs loaded, then {len(plan.order)} ops "
                 "run in this order"]
        for node in plan.sources:
            lines.append(f"  load     {node.name} ({node.kind}, {format_shape(node.shape)} {node.dtype.name})")
        for node in plan.order:
            definition = get_op(node.op)
            how = "in-place" if definition.inplace else "view" if definition.view else "kernel"
            line = (f"  {how:<8} {node.name} = {node.op}({', '.join(node.inputs)})"
                    f" -> {format_shape(node.shape)} {node.dtype.name}")
            if definition.inplace:
                written = node.inputs[definition.inplace[0]]
                if node.name in plan.copies:
                    line += f"; copies {written} first: {plan.copies[node.name]}"
                else:
                    line += f"; writes {written}'s buffer (no copy)"
            for position, reason in plan.value_copies.get(node.name, ()):
                line += f"; copies input {position} ({node.inputs[position]}) first: {reason}"
            lines.append(line)
        if config.fusion:
            for group in self.groups(names):
                lines.append(f"  fused    {group.root.name} in one generated kernel, {len(group.members)} ops: "
                             f"{group.describe()} (when the inputs are C-contiguous; run unfused when "
                             "listeners watch)")
        for name in names:
            if plan.external(name):
                lines.append(f"  output   {name} is copied: it shares the buffer of {plan.buffer_of(name)!r}, "
                             "which the caller does not own")
        return "\n".join(lines)


def _fused_loop(steps, groups, shapes, contiguous, slots, keep):
    """The unlistened loop with each fused group as one entry at its root's place, or None when no
    group applies to these shapes. Entries are ``(run, input slots, output slot, slots to free)``."""
    replaced, skipped = {}, set()
    for group in groups:
        made = fusion.runner(group, shapes, contiguous)
        if made is not None:
            inputs, run = made
            replaced[group.root.name] = (run, tuple(slots[n] for n in inputs))
            skipped.update(m.name for m in group.members[:-1])
    if not replaced:
        return None
    entries = [replaced.get(step.node.name, (step.run, step.inputs)) + (step.out,)
               for step in steps if step.node.name not in skipped]
    frees = _frees([inputs for _, inputs, _ in entries], keep)
    return [(run, inputs, out, free) for (run, inputs, out), free in zip(entries, frees)]


def _frees(input_slots, keep):
    """For each step (its input slots, in run order), the slots to clear after it: those it reads last,
    unless in ``keep``."""
    last = {}
    for index, inputs in enumerate(input_slots):
        for slot in inputs:
            last[slot] = index
    frees = collections.defaultdict(list)
    for slot, index in last.items():
        if slot not in keep:
            frees[index].append(slot)
    return [tuple(frees.get(index, ())) for index in range(len(input_slots))]


def _runner(node, definition, attrs, shape, dtype, in_shapes, in_contiguous, copies=()):
    """``(run, kernel_call)`` for one step: ``kernel_call`` calls the kernel, ``run`` first replaces the
    inputs at positions ``copies`` (chosen by the schedule, ADR 0009) with private copies."""
    if any(None in s for s in in_shapes):
        kernel_call = _checked_runner(node, definition, attrs, shape, dtype)
    else:
        kernel_call = _static_runner(node, definition, attrs, shape, dtype, in_shapes, in_contiguous)
    if not copies:
        return kernel_call, kernel_call

    def run_with_copies(*inputs):
        inputs = list(inputs)
        for position in copies:
            inputs[position] = copy_array(inputs[position])
        return kernel_call(*inputs)
    return run_with_copies, kernel_call


def _checked_runner(node, definition, attrs, planned, dtype):
    """A step whose input sizes are known only at run time (e.g. after a dynamic CreateView):
    each run re-applies the op's shape rule to the actual input shapes, checks the result
    against the plan before the kernel runs, and never takes the flat fast path."""
    kernel = definition.kernel
    if definition.inplace or definition.view:
        def run_checked_view(*inputs):
            run_shape(definition, node, [a.shape for a in inputs], attrs, "run", planned)
            return kernel(*inputs, **attrs)
        return run_checked_view

    empty = np.empty

    def run_checked(*inputs):
        out = empty(run_shape(definition, node, [a.shape for a in inputs], attrs, "run", planned, True), dtype)
        kernel(*inputs, out, **attrs)
        return out
    return run_checked


def _static_runner(node, definition, attrs, shape, dtype, in_shapes, in_contiguous):
    kernel = definition.kernel
    if definition.inplace or definition.view:
        # An in-place kernel writes its input definition.inplace[0] and returns it; a view
        # kernel returns a view of its input 0.
        return (lambda *inputs: kernel(*inputs, **attrs)) if attrs else kernel
    empty = np.empty
    if None in shape:
        # A size that depends on run-time values: resolve it per run.
        def run_dynamic(*inputs):
            out = empty(run_shape(definition, node, [a.shape for a in inputs], attrs, "run", shape, True), dtype)
            kernel(*inputs, out, **attrs)
            return out
        return run_dynamic
    size = math.prod(shape)
    if (isinstance(kernel, elementwise.Elementwise) and size < kernel.threshold and not attrs
            and all(in_contiguous) and all(flat_broadcast(s, shape) for s in in_shapes)):
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


def checked_feed(node, value):
    """``value`` as the array placeholder ``node`` takes: its shape, its dtype, no silent cast."""
    name, expected = node.name, node.dtype.name
    if isinstance(value, np.ma.MaskedArray):
        raise PlaceholderError(f"placeholder {name!r} was fed a masked array, whose mask graphview cannot honour; "
                               "pass array.filled(fill_value) or np.asarray(array) (which ignores the mask)")
    if isinstance(value, np.ndarray):
        # A subclass (e.g. np.matrix) is read as the plain array it holds.
        array = value if type(value) is np.ndarray else np.asarray(value)
    else:
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as error:
            raise PlaceholderError(f"placeholder {name!r} was fed a {type(value).__name__} that is not a "
                                   f"rectangular array of numbers ({error})") from None
    if array.ndim != len(node.shape) or any(d is not None and d != a for d, a in zip(node.shape, array.shape)):
        raise ShapeError(f"placeholder {name!r} expects shape {format_shape(node.shape)}, "
                         f"got an array of shape {format_shape(array.shape)}")
    if array.dtype != node.dtype:
        if not array.dtype.isnative and array.dtype.newbyteorder("=") == node.dtype:
            raise DTypeError(f"placeholder {name!r} expects dtype {expected} in the machine's byte order, got an "
                             f"array of dtype {expected} with byte order {array.dtype.byteorder!r} "
                             f"({'big' if array.dtype.byteorder == '>' else 'little'}-endian); "
                             f"convert it with array.astype('{expected}')")
        if array.dtype == object:
            raise DTypeError(f"placeholder {name!r} expects dtype {expected}, got a {type(value).__name__} that "
                             "NumPy can only store as Python objects (mixed types, None, or integers too large for "
                             "64 bits)")
        # An array's dtype is a statement of intent: no silent casts. Python
        # numbers and lists have none, so they take the placeholder's if it is safe.
        if isinstance(value, np.ndarray) or not np.can_cast(array.dtype, node.dtype, "same_kind"):
            raise DTypeError(f"placeholder {name!r} expects dtype {expected}, got an array of dtype "
                             f"{array.dtype.name}; cast it first (e.g. array.astype('{expected}'))")
        try:
            array = np.asarray(value, dtype=node.dtype)
        except OverflowError:
            bounds = np.iinfo(node.dtype) if node.dtype.kind in "iu" else np.finfo(node.dtype)
            raise DTypeError(f"placeholder {name!r} expects dtype {expected}, got a {type(value).__name__} holding "
                             f"values outside the range of {expected} ({bounds.min} to {bounds.max})") from None
    return array
