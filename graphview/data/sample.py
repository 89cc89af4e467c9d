"""Samples and mini-batches: the two kinds of item that flow through a pipeline.

A :class:`Sample` is one example: a mapping of field names to arrays, where each
field is either a *feature* or a *target* (label). Transformers keep the role of
every field they pass on, so a batch knows which arrays feed the model and
which are what it should predict.
"""
from collections.abc import Mapping

import numpy as np

from graphview.errors import GraphviewError


class DataError(GraphviewError, ValueError):
    """Data that does not fit the pipeline: missing fields, ragged shapes, bad sizes."""


class Fields(Mapping):
    """Feature and target arrays read as one dict; the base of Sample and MiniBatch."""

    __slots__ = ()
    kind = "item"

    def __getitem__(self, name):
        if name in self.features:
            return self.features[name]
        if name in self.targets:
            return self.targets[name]
        raise KeyError(f"{self.kind} has no field {name!r}; it has {', '.join(self) or 'none'}")

    def __iter__(self):
        yield from self.features
        yield from self.targets

    def __len__(self):
        return len(self.features) + len(self.targets)

    def replace(self, **fields):
        """A new item with some fields replaced; a new name becomes a feature."""
        features, targets = dict(self.features), dict(self.targets)
        for name, value in fields.items():
            (targets if name in targets else features)[name] = value
        return self._rebuild(features, targets)

    def _describe(self):
        def describe(fields):
            return ", ".join(f"{k}: {v.shape} {v.dtype}" for k, v in fields.items())
        return f"features={{{describe(self.features)}}}, targets={{{describe(self.targets)}}}"


class Sample(Fields):
    """One example: named feature arrays and named target arrays, read as one dict."""

    __slots__ = ("features", "targets")

    def __init__(self, features, targets=None):
        self.features = {name: np.asarray(value) for name, value in dict(features).items()}
        self.targets = {name: np.asarray(value) for name, value in dict(targets or {}).items()}
        both = set(self.features) & set(self.targets)
        if both:
            raise DataError(f"Sample: field {sorted(both)[0]!r} is both a feature and a target")

    kind = "sample"

    def _rebuild(self, features, targets):
        return Sample(features, targets)

    def __repr__(self):
        return f"Sample({self._describe()})"


class MiniBatch(Fields):
    """A batch of samples: ``features`` and ``targets`` dicts of arrays (batch axis first).

    ``lengths`` holds, for every padded field, the true length of each example
    along the padded axis (an int64 array of shape ``(batch,)``), so padding can
    be masked out later.
    """

    __slots__ = ("features", "targets", "lengths")

    def __init__(self, features, targets=None, lengths=None):
        self.features = dict(features)
        self.targets = dict(targets or {})
        self.lengths = dict(lengths or {})
        sizes = {name: len(array) for name, array in self.items()}
        if len(set(sizes.values())) > 1:
            raise DataError(f"MiniBatch: fields have different batch sizes: {sizes}")

    @property
    def size(self):
        """The number of examples in the batch."""
        for array in self.values():
            return len(array)
        return 0

    kind = "batch"

    def _rebuild(self, features, targets):
        return MiniBatch(features, targets, self.lengths)

    def __repr__(self):
        padded = f", lengths={sorted(self.lengths)}" if self.lengths else ""
        return f"MiniBatch(size={self.size}, {self._describe()}{padded})"
