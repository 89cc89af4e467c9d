"""Data sets: restartable, lazy sources of samples (BigDL's DataSet, seed 004).

A data set is iterated once per epoch; each pass starts afresh. ``dataset >>
transformer`` is again a data set, whose pass runs the transformer over a fresh
pass of its source, so nothing is computed before it is asked for and nothing is
held between epochs (except what a transformer chooses to keep, such as the
statistics of :class:`~graphview.data.Normalize`).

Transformers that depend on the epoch (a seeded shuffle) are given its number:
``dataset.iterate(epoch)``. Plain ``iter(dataset)`` is epoch 0, so iterating a
data set twice gives the same items in the same order.
"""
import numpy as np

from graphview.data.sample import DataError, Sample
from graphview.data.slicing import sliced_pipeline


class DataSet:
    """A restartable source of samples or batches; chain transformers with ``>>``."""

    def iterate(self, epoch=0):
        """A fresh iterator over this data set's items for ``epoch``."""
        raise NotImplementedError

    def __iter__(self):
        return self.iterate(0)

    def __rshift__(self, transformer):
        from graphview.data.transformers import Transformer
        if not isinstance(transformer, Transformer):
            raise DataError(f"a data set can only be chained (>>) with a transformer, not {type(transformer).__name__}")
        return TransformedDataSet(self, transformer)

    def transform(self, transformer):
        """``self >> transformer``."""
        return self >> transformer

    def size_hint(self):
        """The number of items one pass gives, when known without iterating; else None."""
        return None

    def arrays(self):
        """``(features, targets)``, dicts of arrays whose rows are the samples, when the data set is backed
        by such arrays (so batches can be sliced from them, graphview/data/slicing.py, when they hold numbers
        or bools); else None."""
        return None


class ArrayDataSet(DataSet):
    """Samples from dicts of arrays indexed along their first axis.

    ``features`` and ``labels`` map field names to arrays (or to lists of arrays
    of different lengths, for sequences); all must hold the same number of
    examples. Sample ``i`` holds row ``i`` of every field.
    """

    def __init__(self, features, labels=None):
        self.features = _columns(features, "features")
        self.labels = _columns(labels or {}, "labels")
        clash = set(self.features) & set(self.labels)
        if clash:
            raise DataError(f"ArrayDataSet: {sorted(clash)[0]!r} is both a feature and a label")
        counts = {name: len(column) for name, column in {**self.features, **self.labels}.items()}
        if not counts:
            raise DataError("ArrayDataSet: give at least one feature array")
        if len(set(counts.values())) != 1:
            raise DataError(f"ArrayDataSet: fields hold different numbers of examples: {counts}")
        self._count = next(iter(counts.values()))

    def __len__(self):
        return self._count

    def size_hint(self):
        return self._count

    def __getitem__(self, index):
        return Sample({k: v[index] for k, v in self.features.items()},
                      {k: v[index] for k, v in self.labels.items()})

    def iterate(self, epoch=0):
        return (self[i] for i in range(self._count))

    def arrays(self):
        columns = {**self.features, **self.labels}
        if not all(isinstance(column, np.ndarray) for column in columns.values()):
            return None         # lists of ragged examples are batched (and padded) sample by sample
        if type(self).__getitem__ is not ArrayDataSet.__getitem__ or type(self).iterate is not ArrayDataSet.iterate:
            return None         # a subclass that makes its own samples keeps them
        return self.features, self.labels


def _columns(fields, what):
    if not isinstance(fields, dict):
        raise DataError(f"ArrayDataSet: {what} must be a dict of name to array, not {type(fields).__name__}")
    columns = {}
    for name, value in fields.items():
        if isinstance(value, (list, tuple)):
            columns[name] = [np.asarray(item) for item in value]
        else:
            array = np.asarray(value)
            if array.ndim == 0:
                raise DataError(f"ArrayDataSet: {what} field {name!r} is a scalar; it needs an examples axis")
            columns[name] = array
    return columns


class IterableDataSet(DataSet):
    """A data set over a function that returns a fresh iterable of samples each time it is called."""

    def __init__(self, make):
        if not callable(make):
            raise DataError("IterableDataSet: give a function returning a fresh iterable (a generator function)")
        self._make = make

    def iterate(self, epoch=0):
        return iter(self._make())


class TransformedDataSet(DataSet):
    """``source >> transformer``: each pass runs the transformer over a fresh pass of the source."""

    def __init__(self, source, transformer):
        self.source = source
        self.transformer = transformer

    def iterate(self, epoch=0):
        root, stages = self.pipeline()
        sliced = sliced_pipeline(root.arrays(), stages)
        if sliced is not None:
            return sliced.iterate(epoch)
        return iter(self.transformer.apply(self.source.iterate(epoch), epoch))

    def iterate_per_sample(self, epoch=0):
        """The pass as ``iterate`` gives it, computed sample by sample (the reference for the sliced path)."""
        if isinstance(self.source, TransformedDataSet):
            items = self.source.iterate_per_sample(epoch)
        else:
            items = self.source.iterate(epoch)
        return iter(self.transformer.apply(items, epoch))

    def pipeline(self):
        """``(source, stages)``: the data set at the root of this chain and every transformer after it, in order."""
        root, stages = self.source, []
        if isinstance(root, TransformedDataSet):
            root, stages = root.pipeline()
        return root, stages + self.transformer.parts()

    def __repr__(self):
        return f"{self.source!r} >> {self.transformer!r}"
