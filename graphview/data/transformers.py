"""Transformers: functions from an iterator of items to another, chained with ``>>``.

As in BigDL (seed 004), a transformer maps ``Iterator[A]`` to ``Iterator[B]``;
``t1 >> t2`` is a transformer, and ``dataset >> t`` a data set. The element-wise
ones (Map, Filter, Normalize, OneHot) accept samples and mini-batches alike.
"""
import numbers

import numpy as np

from graphview import attributes
from graphview.data.pipeline import Transformer
from graphview.data.sample import DataError, MiniBatch, Sample


def argument(who, name, value, rule):
    """``value`` parsed by a graphview.attributes rule (Seed(), Int(minimum=1), Bool()), or a DataError
    naming the transformer ``who``, the argument and the value."""
    try:
        return rule.parse(value)
    except attributes.Invalid as problem:
        raise DataError(f"{who}: {name} {problem}") from None


def field_name(who, value, name="field"):
    if not isinstance(value, str):
        raise DataError(f"{who}: {name} {value!r} is not a field name (a str)")
    return value


def callable_argument(who, name, value):
    if not callable(value):
        raise DataError(f"{who}: {name} {value!r} is not callable")
    return value


class Shuffle(Transformer):
    """A seeded random order per epoch: epoch ``e`` always gives the same order for the same seed.

    With ``buffer_size=None`` the whole pass is gathered and permuted (a full
    shuffle); with a buffer size, items are drawn at random from a sliding
    buffer of that many (constant memory, a partial shuffle).
    """

    batch_capable = "reorder"

    def __init__(self, seed=0, buffer_size=None):
        self.seed = argument("Shuffle", "seed", seed, attributes.Seed())
        self.buffer_size = None if buffer_size is None else argument("Shuffle", "buffer_size", buffer_size,
                                                                     attributes.Int(minimum=1))

    def _rng(self, epoch):
        return np.random.default_rng([self.seed, int(epoch)])

    def apply(self, items, epoch):
        rng = self._rng(epoch)
        if self.buffer_size is None:
            gathered = list(items)
            return (gathered[i] for i in rng.permutation(len(gathered)))
        return self._buffered(items, rng)

    def order(self, count, epoch):
        """The positions, in the order that ``apply`` gives ``count`` items for ``epoch``."""
        rng = self._rng(epoch)
        if self.buffer_size is None:
            return rng.permutation(count)
        return np.fromiter(self._buffered(iter(range(count)), rng), np.int64, count)

    def _buffered(self, items, rng):
        buffer = []
        for item in items:
            if len(buffer) < self.buffer_size:
                buffer.append(item)
                continue
            pick = int(rng.integers(len(buffer)))
            yield buffer[pick]
            buffer[pick] = item
        for i in rng.permutation(len(buffer)):
            yield buffer[i]

    def __repr__(self):
        return f"Shuffle(seed={self.seed!r})"


class Map(Transformer):
    """Apply ``function`` to every item; it returns a Sample/MiniBatch, or a dict (kept roles, new names are features).

    ``batched=True`` declares that ``function`` works on a MiniBatch as on each
    of its samples (element-wise along the batch axis), so a pipeline backed by
    arrays may apply it to whole batches; it is still applied per sample when
    the pipeline is not sliced.
    """

    def __init__(self, function, batched=False):
        self.function = callable_argument("Map", "function", function)
        self.batched = argument("Map", "batched", batched, attributes.Bool())
        self.batch_capable = "elementwise" if self.batched else None

    def transform(self, item):
        result = self.function(item)
        if isinstance(result, dict) and isinstance(item, (Sample, MiniBatch)):
            features = {k: v for k, v in result.items() if k not in item.targets}
            targets = {k: v for k, v in result.items() if k in item.targets}
            if isinstance(item, Sample):
                return Sample(features, targets)
            return MiniBatch(features, targets, {k: v for k, v in item.lengths.items() if k in result})
        if self.batched and isinstance(item, (Sample, MiniBatch)) and not isinstance(result, type(item)):
            # The same words for a sample and a batch: the sliced path and the per-sample one fail alike.
            raise DataError(f"{self!r}: the function returned {type(result).__name__}, not the kind of item it "
                            "was given; a batched function returns a Sample for a Sample and a MiniBatch for a "
                            "MiniBatch, or a dict of fields")
        return result

    def __repr__(self):
        batched = ", batched=True" if self.batched else ""
        return f"Map({getattr(self.function, '__name__', self.function)!r}{batched})"


class Filter(Transformer):
    """Keep only the items for which ``predicate(item)`` is true."""

    def __init__(self, predicate):
        self.predicate = callable_argument("Filter", "predicate", predicate)

    def apply(self, items, epoch):
        return (item for item in items if self.predicate(item))

    def __repr__(self):
        return f"Filter({getattr(self.predicate, '__name__', self.predicate)!r})"


def _field(item, name, who):
    try:
        return item[name]
    except KeyError:
        raise DataError(f"{who}: the item has no field {name!r}; it has {', '.join(item) or 'none'}") from None


class Normalize(Transformer):
    """``(x - mean) / std`` on one field, per feature (the last axis) or over all values.

    With ``per_feature`` the statistics have one entry per feature, the last axis
    of an example, taken over every other axis, so sequences of any length
    (``(time, features)`` examples) share one set; without it they are one mean
    and one std over all values. Padding never counts: in a batch, the field's
    ``lengths`` say which time steps are real, and padded entries are left as
    they are (still the pad value) when transforming.

    With no ``mean``/``std`` given, they are computed from the first pass this
    transformer sees (which it gathers once) and then kept, so the same instance
    applied to test data uses the training statistics. Call :meth:`fit` to set
    them from a chosen data set first. A standard deviation of 0 counts as 1.
    """

    batch_capable = "elementwise"

    def __init__(self, field, mean=None, std=None, per_feature=True):
        self.field = field_name("Normalize", field)
        self.per_feature = argument("Normalize", "per_feature", per_feature, attributes.Bool())
        if (mean is None) != (std is None):
            raise DataError("Normalize: give both mean and std, or neither (to compute them from the data)")
        self.mean = None if mean is None else _statistic("mean", mean)
        self.std = None if std is None else _safe_std(_statistic("std", std))

    @property
    def fitted(self):
        return self.mean is not None

    def fit(self, items):
        """Compute the mean and std from samples, batches or a data set (padding excluded); returns self."""
        examples = [example for item in items for example in self._valid_examples(item)]
        if not examples or not any(example.size for example in examples):
            raise DataError(f"Normalize({self.field!r}): no data to compute the statistics from")
        if self.per_feature:
            values = self._feature_rows(examples)
            self.mean, self.std = values.mean(axis=0), _safe_std(values.std(axis=0))
        else:
            values = np.concatenate([example.ravel() for example in examples])
            self.mean, self.std = values.mean(), _safe_std(values.std())
        return self

    def _valid_examples(self, item):
        """The field's examples in ``item`` as float64 arrays, each cut to its true length in a padded batch."""
        array = np.asarray(_field(item, self.field, "Normalize"), dtype=np.float64)
        if not isinstance(item, MiniBatch):
            return [array]
        lengths = item.lengths.get(self.field)
        if lengths is None:
            return list(array)
        if self.per_feature and array.ndim == 2:
            raise DataError(f"Normalize({self.field!r}): the batch pads this field along its last axis "
                            f"(shape {array.shape}, lengths {list(lengths)[:4]}), so it has no feature axis; "
                            "give per_feature=False for one mean and std over all values")
        return [example[:length] for example, length in zip(array, lengths)]

    def _feature_rows(self, examples):
        """The examples as one (values, features) array, checking that they agree on rank and features."""
        ranks = {example.ndim for example in examples}
        if len(ranks) > 1:
            raise DataError(f"Normalize({self.field!r}): examples have different ranks {sorted(ranks)}; "
                            "per-feature statistics need every example to be (..., features) of one rank")
        if ranks == {0}:
            return np.array([float(example) for example in examples])
        features = {example.shape[-1] for example in examples}
        if len(features) > 1:
            raise DataError(f"Normalize({self.field!r}): examples have different numbers of features (last axis) "
                            f"{sorted(features)[:4]}; per-feature statistics need one size, or give "
                            "per_feature=False for one mean and std over all values")
        (size,) = features
        return np.concatenate([example.reshape(-1, size) for example in examples])

    def apply(self, items, epoch):
        if not self.fitted:
            gathered = list(items)
            self.fit(gathered)
            items = iter(gathered)
        return (self.transform(item) for item in items)

    def prepare_pass(self, whole):
        if not self.fitted:
            self.fit([whole()])

    def transform(self, item):
        array = _field(item, self.field, "Normalize")
        dtype = array.dtype if np.issubdtype(array.dtype, np.floating) else np.float64
        try:
            normalized = (array - self.mean) / self.std
        except ValueError:
            normalized = None
        if normalized is None or normalized.shape != array.shape:
            raise DataError(f"Normalize({self.field!r}): a {item.kind} of shape {array.shape} does not fit "
                            f"statistics of shape {self.mean.shape} (one per feature, the last axis)")
        lengths = item.lengths.get(self.field) if isinstance(item, MiniBatch) else None
        if lengths is not None:
            valid = np.arange(array.shape[1]) < np.asarray(lengths)[:, None]
            normalized = np.where(valid.reshape(valid.shape + (1,) * (array.ndim - 2)), normalized, array)
        return item.replace(**{self.field: normalized.astype(dtype, copy=False)})

    def __repr__(self):
        return f"Normalize({self.field!r})"


def _safe_std(std):
    return np.where(std > 0, std, 1.0)


def _statistic(name, value):
    """A given mean or std as a float64 array of finite numbers (a std also >= 0)."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise DataError(f"Normalize: {name} {value!r} is not an array of numbers")
    array = array.astype(np.float64)
    bad = array[~np.isfinite(array) | ((array < 0) if name == "std" else False)]
    if bad.size:
        rule = "the statistics must be finite" if not np.isfinite(bad[0]) else "a standard deviation is >= 0"
        raise DataError(f"Normalize: {name} holds {bad[0]}; {rule}")
    return array


class OneHot(Transformer):
    """Replace an integer class field by its one-hot encoding over ``classes`` classes."""

    batch_capable = "elementwise"

    def __init__(self, field, classes, dtype="float64"):
        self.field = field_name("OneHot", field)
        self.classes = argument("OneHot", "classes", classes, attributes.Int(minimum=1))
        self.dtype = numeric_dtype("OneHot", dtype)

    def transform(self, item):
        labels = np.asarray(_field(item, self.field, "OneHot"))
        if not np.issubdtype(labels.dtype, np.integer):
            raise DataError(f"OneHot({self.field!r}): labels must be integers, not {labels.dtype}")
        if labels.size and (labels.min() < 0 or labels.max() >= self.classes):
            bad = labels[(labels < 0) | (labels >= self.classes)].ravel()[0]
            raise DataError(f"OneHot({self.field!r}): label {bad} is out of range for {self.classes} classes")
        encoded = np.zeros(labels.shape + (self.classes,), self.dtype)
        np.put_along_axis(encoded, labels[..., None].astype(np.int64), 1, axis=-1)
        return item.replace(**{self.field: encoded})

    def __repr__(self):
        return f"OneHot({self.field!r}, {self.classes})"


def numeric_dtype(who, value):
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise DataError(f"{who}: dtype {value!r} is not a NumPy numeric dtype (such as 'float32' or 'int64')")
    return dtype


def number(who, name, value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Number, np.number)):
        raise DataError(f"{who}: {name} {value!r} is not a number")
    return value
