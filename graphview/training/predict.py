"""predict: one output of a graph over all of some data, batch by batch, in inference mode.

The data is an array (fed to the one placeholder the output needs), a dict of arrays by placeholder
name (sliced together along axis 0), or a gv.data data set (its batches, fed as ``g.evaluate`` feeds
them). Each batch runs inside :func:`graphview.runstate.inference` (dropout off, batch norm's running
statistics), and the per-batch results are copied into one array along axis 0.
"""
import numbers

import numpy as np

from graphview import runstate
from graphview.data.dataset import DataSet
from graphview.data.sharding import shard_batch, shard_rows
from graphview.distributed import comm
from graphview.errors import DTypeError, GraphviewError, PlaceholderError
from graphview.layouts.table import dynamic_axes
from graphview.shapes import format_shape
from graphview.training.config import conformed
from graphview.training.evaluation import evaluation_feeds
from graphview.variable import Kind


def predict(graph, data, output, batch_size=256, feature_mapping=None, distributed=True):
    """``output`` (a Variable or a node name) over every example of ``data``, as one array.

    ``data`` is an array, a dict ``{placeholder name: array}`` or a gv.data data set of MiniBatches;
    arrays are cut into slices of ``batch_size`` rows (a data set gives its own batches, and its
    fields reach the placeholders as in ``g.evaluate``, ``feature_mapping`` included). Runs in
    inference mode whatever the caller's state. The output must have a batch axis first: a scalar
    such as the loss is refused (use ``g.output`` or ``g.evaluate`` for those).

    Under an MPI world of several processes (``gv.distributed.init()``), every rank must call predict:
    each computes its share of the rows (of each batch, for a data set) and every rank returns the
    whole result, in order (ADR 0025). ``distributed=False`` computes everything on the calling rank."""
    output = graph.name_of(output)
    node = graph.node(output)
    if not node.shape:
        raise GraphviewError(f"predict: output {output!r} is a scalar; predict returns per-example outputs "
                             "concatenated along the batch axis. Run a scalar with g.output(feeds, [name]), "
                             "or measure a classifier with g.evaluate")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise GraphviewError(f"predict: batch_size must be a positive int, not {batch_size!r}")
    needed = needed_placeholders(graph, output)
    if not needed:
        raise PlaceholderError(f"predict: output {output!r} depends on no placeholder, so it has no examples "
                               "to compute; read it with g.output({}, [name])")
    world = comm.current() if distributed else None
    if isinstance(data, DataSet):
        batches, total = dataset_batches(graph, data, needed, feature_mapping, world), None
    else:
        if feature_mapping is not None:
            raise GraphviewError("predict: feature_mapping applies to a data set; for arrays pass a dict "
                                 "{placeholder name: array}")
        arrays = named_arrays(graph, data, needed, output)
        total = len(next(iter(arrays.values())))
        if world is not None:               # this rank's contiguous share; gathered in rank order below
            start, stop = shard_rows(total, world.rank, world.size)
            arrays = {name: array[start:stop] for name, array in arrays.items()}
            total = stop - start
        batches = array_batches(graph, arrays, int(batch_size))
    if world is None:
        rows = Rows(node, total)
        with runstate.inference():
            for feeds, count in batches:
                rows.add(graph.output(feeds, [output])[output], count)
        return rows.result()
    return _gathered(graph, node, output, batches, world, isinstance(data, DataSet))


def _gathered(graph, node, output, batches, world, per_batch):
    """Each rank's results of its shares, gathered on every rank in the original order: rank by rank
    (contiguous shares of an array) or, for a data set, batch by batch and within a batch rank by rank."""
    parts = []
    with runstate.inference():
        for feeds, count in batches:
            parts.append(graph.output(feeds, [output])[output] if count else None)
    gathered = world.allgather_object(parts)
    order = ([gathered[r][b] for b in range(len(parts)) for r in range(world.size)] if per_batch
             else [part for rank_parts in gathered for part in rank_parts])
    rows = Rows(node, None)
    for part in order:
        if part is not None:
            rows.add(part, len(part))
    return rows.result()


def needed_placeholders(graph, output):
    """The placeholders ``output`` depends on, with the lengths placeholders of their dims: a padded
    input means nothing without its lengths, even where ``output`` does not read them."""
    ancestors = graph.ancestors([output])
    needed = {name for name in ancestors if graph.node(name).kind is Kind.PLACEHOLDER}
    for name in sorted(needed):
        for _, _, lengths in dynamic_axes(graph[name]):
            needed |= {n for n in graph.ancestors([lengths.name]) if graph.node(n).kind is Kind.PLACEHOLDER}
    return sorted(needed)


def named_arrays(graph, data, needed, output):
    """``{placeholder: array}`` for each needed placeholder, from an array or a dict of arrays."""
    if isinstance(data, dict):
        for key in data:
            if not isinstance(key, str) or key not in graph or graph.node(key).kind is not Kind.PLACEHOLDER:
                raise PlaceholderError(f"predict: key {key!r} of the data dict is not a placeholder of graph "
                                       f"{graph.name!r}; the keys name placeholders")
        arrays = {name: rows_of(graph, name, value) for name, value in data.items()}
        first = next(iter(arrays), None)
        for name, array in arrays.items():
            if len(array) != len(arrays[first]):
                raise PlaceholderError(f"predict: the data dict's arrays differ in length along axis 0: {first!r} "
                                       f"has {len(arrays[first])} rows, {name!r} has {len(array)}")
        missing = [name for name in needed if name not in arrays]
        if missing:
            raise PlaceholderError(f"predict: output {output!r} needs placeholder(s) {', '.join(missing)}, "
                                   "which the data dict does not hold")
        return {name: arrays[name] for name in needed}
    if isinstance(data, np.ndarray):
        if len(needed) != 1:
            raise PlaceholderError(f"predict: output {output!r} needs the placeholders "
                                   f"{', '.join(needed) or 'none'}, so an array alone cannot feed it; "
                                   "pass a dict {placeholder name: array} or a data set")
        return {needed[0]: rows_of(graph, needed[0], data)}
    raise GraphviewError(f"predict: data must be a NumPy array, a dict of arrays by placeholder name or a "
                         f"gv.data data set, not {type(data).__name__}")


def rows_of(graph, name, value):
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    if array.ndim == 0:
        raise PlaceholderError(f"predict: the data for {name!r} is a scalar; predict needs rows along axis 0")
    expected = graph.node(name).dtype
    if not np.can_cast(array.dtype, expected, "same_kind"):   # conformed's message speaks of fit's batches
        raise DTypeError(f"predict: the array for placeholder {name!r} has dtype {array.dtype.name}, which does "
                         f"not cast to {expected.name} without changing its kind; pass array.astype("
                         f"{expected.name!r})")
    return array


def array_batches(graph, arrays, batch_size):
    """``(feeds, rows)`` for each slice of ``batch_size`` rows (views, cast where a placeholder needs it)."""
    total = len(next(iter(arrays.values())))
    for start in range(0, total, batch_size):
        feeds = {name: conformed(graph, name, array[start:start + batch_size], name, "feature", "array")
                 for name, array in arrays.items()}
        yield feeds, min(batch_size, total - start)


def dataset_batches(graph, dataset, needed, feature_mapping, world=None):
    """``(feeds, rows)`` for each batch of ``dataset`` (this rank's share of it in a ``world``), fed as
    g.evaluate feeds them."""
    for batch in dataset.iterate(0):
        if world is not None:
            batch = shard_batch(batch, world.rank, world.size)
        feeds = evaluation_feeds(graph, batch, feature_mapping)
        missing = [name for name in needed if name not in feeds]
        if missing:
            raise PlaceholderError(f"predict: the output needs placeholder(s) {', '.join(missing)}, which the "
                                   f"batch does not feed (its fields: {', '.join(batch) or 'none'}; padded "
                                   f"fields' lengths are fed through feature_mapping as 'field:lengths')")
        yield {name: feeds[name] for name in needed}, batch.size


class Rows:
    """The per-batch results of ``node``, copied into one array allocated on the first batch (of
    ``total`` rows when known, else grown by doubling and cut to size at the end)."""

    def __init__(self, node, total):
        self.node, self.total = node, total
        self.buffer, self.count = None, 0

    def add(self, result, rows):
        result = np.asarray(result)
        name = self.node.name
        if result.ndim == 0 or len(result) != rows:
            raise GraphviewError(f"predict: output {name!r} gave shape {format_shape(result.shape)} for a batch "
                                 f"of {rows} examples; its first axis must be the batch axis")
        if self.buffer is None:
            size = self.total if self.total is not None else max(rows, 1)
            self.buffer = np.empty((size,) + result.shape[1:], result.dtype)
        elif result.shape[1:] != self.buffer.shape[1:] or result.dtype != self.buffer.dtype:
            raise GraphviewError(f"predict: output {name!r} gave {format_shape(result.shape)} {result.dtype} for "
                                 f"a batch after {self.count} rows of {format_shape(self.buffer.shape[1:])} "
                                 f"{self.buffer.dtype} per example; the batches must agree past the first axis "
                                 "(pad sequences to one fixed length, e.g. gv.data.Batch(size, pad=length))")
        if self.count + rows > len(self.buffer):
            grown = np.empty((max(2 * len(self.buffer), self.count + rows),) + self.buffer.shape[1:],
                             self.buffer.dtype)
            grown[:self.count] = self.buffer[:self.count]
            self.buffer = grown
        self.buffer[self.count:self.count + rows] = result
        self.count += rows

    def result(self):
        if self.buffer is None:
            trailing = self.node.shape[1:]
            if any(size is None for size in trailing):
                raise GraphviewError(f"predict: the data has no examples, and output {self.node.name!r} has the "
                                     f"shape {format_shape(self.node.shape)}, whose sizes past the first axis are "
                                     "not all known, so the shape of an empty result is unknown")
            return np.empty((0,) + tuple(trailing), self.node.dtype)
        return self.buffer if self.count == len(self.buffer) else self.buffer[:self.count].copy()
