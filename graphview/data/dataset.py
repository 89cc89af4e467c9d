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

from graphview.data.pipeline import DataSet
from graphview.data.sample import DataError, Sample


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
