"""Batches sliced from arrays: the fast path of a pipeline whose source is backed by arrays.

Run sample by sample, ``ArrayDataSet >> Shuffle >> Normalize >> Batch(256)``
builds 256 Sample objects per batch and stacks them again, which costs more
than a small model's training step. When the source holds its fields as
arrays of numbers or bools (``DataSet.arrays()``; an object array may hold
examples of any shape, which only stacking them can check) and every
transformer before the ``Batch`` is batch-capable
(``Transformer.sliced_capability()``), a pass is instead one index
order (each reordering transformer permutes it), one fancy-index per field per
batch, and the element-wise transformers applied to whole batches. The batches
are exactly those of the per-sample path, in the same order: a reordering
transformer gives the permutation it would apply to that many items, and an
element-wise one gives on a batch what it gives on each sample, stacked.
Transformers after the ``Batch`` run on the batches as usual.
"""
import numpy as np

from graphview.data.sample import MiniBatch

SLICEABLE_KINDS = "biufc"       # bool, integers, floats, complex: rows of these are the examples themselves


def sliced_pipeline(arrays, stages):
    """A SlicedPipeline for ``source >> stages``, or None when the pipeline must run per sample."""
    if arrays is None:
        return None
    if any(column.dtype.kind not in SLICEABLE_KINDS for columns in arrays for column in columns.values()):
        return None
    capabilities = []
    for position, stage in enumerate(stages):
        capability = stage.sliced_capability()
        if capability == "batch":
            return SlicedPipeline(arrays, list(zip(stages[:position], capabilities)), stage, stages[position + 1:])
        if capability not in ("reorder", "elementwise"):
            return None
        capabilities.append(capability)
    return None


class SlicedPipeline:
    """A pass of ``source >> before >> batch >> after`` computed from the source's arrays."""

    def __init__(self, arrays, before, batch, after):
        """``before``: (transformer, its capability) pairs."""
        self.features, self.targets = arrays
        self.count = len(next(iter({**self.features, **self.targets}.values())))
        self.before, self.batch, self.after = list(before), batch, list(after)

    def iterate(self, epoch):
        order = np.arange(self.count)
        elementwise = []
        for stage, capability in self.before:
            if capability == "reorder":
                order = order[stage.order(self.count, epoch)]
            else:
                stage.prepare_pass(lambda: self._gather(order, elementwise))
                elementwise.append(stage)
        items = self._batches(order, elementwise)
        for stage in self.after:
            items = stage.apply(items, epoch)
        return iter(items)

    def batch_sizes(self):
        """The rows of each batch of a pass, from the ``Batch``'s row slices alone (the stages before it keep
        the count); None when stages after it may change the batches."""
        if self.after:
            return None
        return [len(range(self.count)[rows]) for rows in self.batch.row_slices(self.count)]

    def _gather(self, rows, elementwise):
        batch = MiniBatch({name: np.take(column, rows, axis=0) for name, column in self.features.items()},
                          {name: np.take(column, rows, axis=0) for name, column in self.targets.items()})
        for stage in elementwise:
            batch = stage.transform(batch)
        return batch

    def _batches(self, order, elementwise):
        for rows in self.batch.row_slices(self.count):
            yield self._gather(order[rows], elementwise)
