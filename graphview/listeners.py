"""Listeners: code that watches a graph run, op by op, and training, iteration by iteration.

The executor calls ``pre_op(ctx, node, inputs)`` before each op's kernel and
``post_op(ctx, node, inputs, outputs)`` after it; ``node`` has ``.name`` and
``.op`` (the registered op name) and ``inputs``/``outputs`` are lists of arrays.
Training calls the iteration and epoch hooks. Pass listeners per call
(``g.output(..., listeners=[...])``, ``g.calculate_gradients(..., listeners=[...])``)
or attach them with ``g.listeners.append(listener)``.
"""
import collections
import threading
import time

import numpy as np

from graphview.errors import InplaceModificationError
from graphview.registry import get as get_op
from graphview.shapes import format_shape
from graphview_kernels import checksum
from graphview_kernels.launch import Elementwise

CREATE_VIEW = "create_view"


class Listener:
    """Base class: every hook does nothing; override the ones you need."""

    def pre_op(self, ctx, node, inputs):
        """Called before ``node``'s kernel runs on ``inputs``."""

    def post_op(self, ctx, node, inputs, outputs):
        """Called after ``node``'s kernel produced ``outputs``."""

    def epoch_start(self, ctx):
        """Called by training before epoch ``ctx.epoch``."""

    def epoch_end(self, ctx, losses=None):
        """Called by training after epoch ``ctx.epoch``, with its per-iteration losses."""

    def iteration_start(self, ctx):
        """Called by training before iteration ``ctx.iteration`` of epoch ``ctx.epoch``."""

    def iteration_end(self, ctx, loss=None):
        """Called by training after iteration ``ctx.iteration``, with its loss."""


# --- the non-inplace validation listener -------------------------------------------

class Violation:
    """One finding of the validation listener: an input modified, or an output aliasing an input."""

    def __init__(self, kind, op, node, position, input_name, index=None, value=None):
        self.kind = kind
        self.op = op
        self.node = node
        self.position = position
        self.input_name = input_name
        self.index = index
        self.value = value

    def __str__(self):
        where = f"op {self.op} (node {self.node!r}), input {self.position} ({self.input_name!r})"
        if self.kind == "aliased":
            return (f"{where}: the output shares memory with this input, but {self.op} is declared "
                    "neither a view nor in-place")
        return (f"{where} was modified during execution; the first differing element is "
                f"{list(self.index)} (it now holds {self.value!r}); {self.op} does not declare this "
                "input as written (defop inplace=...)")

    __repr__ = __str__


class NonInplaceValidationListener(Listener):
    """Fails when an op changes an input it did not declare as written, or aliases one.

    Before each op a snapshot of every checked input is kept: its bytes when it
    has at most ``checksum.BLOCK`` elements, else block fingerprints by content
    (in logical order from a Numba kernel, so strided views work) and one-byte
    element digests. After the op each snapshot is compared with the input,
    and a change is located at its first differing element (see ADR 0006). An
    array passed at several positions is read once. Exempt: ``create_view``,
    the declared written inputs of in-place ops, ops with no inputs and empty
    arrays.

    Only inputs an op could have written are fingerprinted. An element-wise op's
    kernel (an ``Elementwise`` launcher) hands its inputs to compiled code typed
    read-only, where Numba refuses to compile any store into them, so its
    inputs are checked for aliasing only (ADR 0006). ``fingerprint_all=True``
    fingerprints those too: a check of the launchers themselves, which the
    test suite runs.

    With ``raise_errors=True`` (the default) a finding raises
    :class:`graphview.InplaceModificationError`; with False it is only recorded
    in ``self.violations``.
    """

    def __init__(self, raise_errors=True, fingerprint_all=False):
        self.raise_errors = raise_errors
        self.fingerprint_all = fingerprint_all
        self.violations = []
        self.checked_ops = 0
        self._pending = threading.local()

    def pre_op(self, ctx, node, inputs):
        if node.op == CREATE_VIEW or not inputs:
            self._pending.check = None
            return
        definition = get_op(node.op)
        if not self.fingerprint_all and isinstance(definition.kernel, Elementwise):
            self._pending.check = (definition, None)        # inputs typed read-only: aliasing only
            return
        written = definition.inplace
        kept = {}   # id -> (array, snapshot, positions): an array passed at several positions is read once
        for position, array in enumerate(inputs):
            if isinstance(array, np.ndarray) and array.size and position not in written:
                entry = kept.get(id(array))
                if entry is None:
                    kept[id(array)] = (array, checksum.snapshot(array), [position])
                else:
                    entry[2].append(position)
        self._pending.check = (definition, kept.values())

    def post_op(self, ctx, node, inputs, outputs):
        check = getattr(self._pending, "check", None)
        self._pending.check = None
        if check is None:
            return
        self.checked_ops += 1
        definition, kept = check
        if kept is None:
            kept = [(array, None, (position,)) for position, array in enumerate(inputs)
                    if isinstance(array, np.ndarray) and array.size]
        for array, snapshot, positions in kept:
            flat = -1 if snapshot is None else checksum.first_change_since(array, snapshot)
            if flat >= 0:
                index = tuple(int(i) for i in np.unravel_index(flat, array.shape))
                for position in positions:
                    self._found(Violation("modified", node.op, node.name, position, _input_name(node, position),
                                          index, array[index].item()))
        if definition.view or definition.inplace:
            return
        for output in outputs:
            if not isinstance(output, np.ndarray) or output.size == 0:
                continue
            for array, _, positions in kept:   # without in-place positions, every non-empty array input
                if _shares_memory(output, array):
                    for position in positions:
                        self._found(Violation("aliased", node.op, node.name, position, _input_name(node, position)))

    def _found(self, violation):
        self.violations.append(violation)
        if self.raise_errors:
            raise InplaceModificationError(str(violation))


def _owns_distinct_memory(array, owner):
    """True when ``array`` certainly shares no memory with ``owner``, an array owning its memory.

    NumPy makes a view's ``base`` the array its memory came from, so an array whose base is None
    and that owns its data has its own allocation, and so does a view of any owner but ``owner``.
    Anything else (memory from a buffer, a view of such memory) is left to NumPy's test."""
    base = array.base
    if base is None:
        return array.flags.owndata and array is not owner
    return base is not owner and type(base) is np.ndarray and base.base is None and base.flags.owndata


def _shares_memory(output, array):
    if output.flags.owndata and _owns_distinct_memory(array, output):
        return False        # the usual case, a fresh output, decided without NumPy's slower test
    return np.may_share_memory(output, array) and np.shares_memory(output, array)


def _input_name(node, position):
    names = getattr(node, "inputs", ())
    return names[position] if position < len(names) else f"input{position}"


# --- profiling ----------------------------------------------------------------------

class ProfilingListener(Listener):
    """Time and bytes per op: ``table()`` renders them, sorted by ``sort`` ("time", "calls", "bytes", "op")."""

    def __init__(self):
        self.reset()

    def reset(self):
        self._stats = collections.defaultdict(lambda: [0, 0.0, 0, 0])
        self._start = threading.local()

    def pre_op(self, ctx, node, inputs):
        self._start.time = time.perf_counter()

    def post_op(self, ctx, node, inputs, outputs):
        elapsed = time.perf_counter() - self._start.time
        stats = self._stats[node.op]
        stats[0] += 1
        stats[1] += elapsed
        stats[2] += sum(a.nbytes for a in inputs if isinstance(a, np.ndarray))
        stats[3] += sum(a.nbytes for a in outputs if isinstance(a, np.ndarray))

    def rows(self, sort="time"):
        """One dict per op: op, calls, seconds, mean_us, bytes_in, bytes_out, share (of all time)."""
        total = sum(s[1] for s in self._stats.values()) or 1.0
        rows = [dict(op=op, calls=s[0], seconds=s[1], mean_us=1e6 * s[1] / s[0], bytes_in=s[2], bytes_out=s[3],
                     share=s[1] / total) for op, s in self._stats.items()]
        keys = {"time": lambda r: -r["seconds"], "calls": lambda r: -r["calls"],
                "bytes": lambda r: -(r["bytes_in"] + r["bytes_out"]), "op": lambda r: r["op"]}
        if sort not in keys:
            raise ValueError(f"sort must be one of {', '.join(keys)}, not {sort!r}")
        return sorted(rows, key=keys[sort])

    def table(self, sort="time"):
        header = ("op", "calls", "total ms", "mean us", "share", "MB in", "MB out")
        lines = [(r["op"], str(r["calls"]), f"{1e3 * r['seconds']:.3f}", f"{r['mean_us']:.1f}",
                  f"{100 * r['share']:.1f}%", f"{r['bytes_in'] / 1e6:.3f}", f"{r['bytes_out'] / 1e6:.3f}")
                 for r in self.rows(sort)]
        return _render([header] + lines)

    __str__ = table


# --- debugging ------------------------------------------------------------------------

class DebugListener(Listener):
    """One line per op: its node, op name, input and output shapes and dtypes.

    Lines are kept in ``self.lines``; with ``file`` (e.g. ``sys.stdout``) they are printed as well.
    """

    def __init__(self, file=None):
        self.file = file
        self.lines = []

    def post_op(self, ctx, node, inputs, outputs):
        line = f"{node.name} = {node.op}({_shapes(inputs)}) -> {_shapes(outputs)}"
        self.lines.append(line)
        if self.file is not None:
            print(line, file=self.file)


def _shapes(arrays):
    return ", ".join(f"{format_shape(a.shape)} {a.dtype.name}" if isinstance(a, np.ndarray) else repr(a)
                     for a in arrays)


def _render(rows):
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


__all__ = ["Listener", "NonInplaceValidationListener", "ProfilingListener", "DebugListener", "Violation"]
