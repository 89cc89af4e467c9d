"""Batching: samples to mini-batches, with padding of ragged fields and bucketing by length.

BigDL's SampleToMiniBatch pads ragged samples but forgets how long each one
was; here every padded field's true lengths travel with the batch in
``MiniBatch.lengths``, so a model can mask the padding.
"""
import numpy as np

from graphview.data.sample import DataError, MiniBatch, Sample
from graphview.data.transformers import Transformer


def collate(samples, pad=None, pad_value=0, fields=None):
    """Stack samples into a MiniBatch, padding ragged fields along their first axis.

    ``pad`` is None (every field must have one shape), ``"longest"`` (pad to the
    longest example in the batch) or an int (pad to that fixed length; a longer
    example is an error). ``fields`` names the fields to pad (default with
    ``pad``: every field of rank at least 1); each padded field gets its lengths.
    """
    if not samples:
        raise DataError("Batch: cannot make a batch of no samples")
    first = samples[0]
    if not isinstance(first, Sample):
        raise DataError(f"Batch: expected samples, got {type(first).__name__}; batches cannot be batched again")
    padded = set(_padded_fields(first, pad, fields))
    features, targets, lengths = {}, {}, {}
    for roles, out in ((first.features, features), (first.targets, targets)):
        for name in roles:
            arrays = [_field(sample, name) for sample in samples]
            if name in padded:
                out[name], lengths[name] = _pad(name, arrays, pad, pad_value)
            else:
                out[name] = _stack(name, arrays)
    return MiniBatch(features, targets, lengths)


def _field(sample, name):
    try:
        return sample[name]
    except KeyError:
        raise DataError(f"Batch: a sample lacks the field {name!r} that the batch's first sample has") from None


def _padded_fields(first, pad, fields):
    if pad is None:
        if fields:
            raise DataError("Batch: fields= names the fields to pad, so give pad='longest' or a length too")
        return ()
    if fields is None:
        return [name for name in first if first[name].ndim >= 1]
    missing = [name for name in fields if name not in first]
    if missing:
        raise DataError(f"Batch: cannot pad {missing[0]!r}: the samples have no such field (they have {', '.join(first)})")
    return list(fields)


def _stack(name, arrays):
    shapes = {array.shape for array in arrays}
    if len(shapes) > 1:
        raise DataError(f"Batch: field {name!r} has examples of different shapes {sorted(shapes)[:3]}; "
                        "pad them with Batch(size, pad='longest') or pad=<length>")
    return np.stack(arrays)


def _pad(name, arrays, pad, pad_value):
    for array in arrays:
        if array.ndim == 0:
            raise DataError(f"Batch: field {name!r} is a scalar per example and cannot be padded")
    rest = {array.shape[1:] for array in arrays}
    if len(rest) > 1:
        raise DataError(f"Batch: field {name!r} can only be padded along its first axis, "
                        f"but its other axes differ: {sorted(rest)[:3]}")
    lengths = np.array([len(array) for array in arrays], dtype=np.int64)
    if pad == "longest":
        target = int(lengths.max())
    elif isinstance(pad, (int, np.integer)) and not isinstance(pad, bool) and pad >= 0:
        target = int(pad)
        if lengths.max() > target:
            raise DataError(f"Batch: field {name!r} has an example of length {int(lengths.max())}, "
                            f"longer than the fixed length {target}")
    else:
        raise DataError(f"Batch: pad must be None, 'longest' or a length >= 0, not {pad!r}")
    dtype = np.result_type(*arrays)
    out = np.full((len(arrays), target) + arrays[0].shape[1:], pad_value, dtype=dtype)
    for row, array in enumerate(arrays):
        out[row, :len(array)] = array
    return out, lengths


class Batch(Transformer):
    """Group samples into MiniBatches of ``size`` (the last one smaller unless ``drop_last``).

    ``pad``, ``pad_value`` and ``fields`` control padding of ragged fields as in
    :func:`collate`; the true lengths are kept in ``MiniBatch.lengths``.
    """

    def __init__(self, size, drop_last=False, pad=None, pad_value=0, fields=None):
        if not isinstance(size, (int, np.integer)) or size < 1:
            raise DataError(f"Batch: size must be a positive int, not {size!r}")
        self.size = int(size)
        self.drop_last = drop_last
        self.pad, self.pad_value, self.fields = pad, pad_value, fields

    @property
    def batch_capable(self):
        """Batches without padding can be sliced from arrays (padding needs each example's length)."""
        return "batch" if self.pad is None and not self.fields else None

    def apply(self, items, epoch):
        group = []
        for item in items:
            group.append(item)
            if len(group) == self.size:
                yield collate(group, self.pad, self.pad_value, self.fields)
                group = []
        if group and not self.drop_last:
            yield collate(group, self.pad, self.pad_value, self.fields)

    def __repr__(self):
        padding = f", pad={self.pad!r}" if self.pad is not None else ""
        return f"Batch({self.size}{padding})"


class BucketByLength(Transformer):
    """Batch samples of similar length together, so little padding is needed.

    A sample whose ``field`` has length ``n`` goes to the first bucket whose
    boundary is greater than ``n`` (the last bucket takes the rest). A bucket
    that reaches ``size`` samples is emitted as a batch padded to its longest
    member; at the end of the pass the partly full buckets are emitted, shortest
    bucket first. As with ``Batch(pad="longest")``, every field of rank at least
    1 is padded and its lengths kept (or only ``fields``, which always include
    ``field``).
    """

    def __init__(self, field, boundaries, size, pad_value=0, fields=None, drop_last=False):
        boundaries = [int(b) for b in boundaries]
        if not boundaries or any(b <= a for a, b in zip(boundaries, boundaries[1:])) or boundaries[0] < 1:
            raise DataError(f"BucketByLength: boundaries must be increasing positive lengths, not {boundaries}")
        if size < 1:
            raise DataError(f"BucketByLength: size must be at least 1, not {size}")
        self.field, self.boundaries, self.size = field, boundaries, int(size)
        self.pad_value, self.fields, self.drop_last = pad_value, fields, drop_last

    def bucket_of(self, length):
        for index, boundary in enumerate(self.boundaries):
            if length < boundary:
                return index
        return len(self.boundaries)

    def apply(self, items, epoch):
        buckets = [[] for _ in range(len(self.boundaries) + 1)]
        fields = None if self.fields is None else list(dict.fromkeys([self.field, *self.fields]))
        for item in items:
            try:
                value = item[self.field]
            except KeyError:
                raise DataError(f"BucketByLength: the sample has no field {self.field!r}; "
                                f"it has {', '.join(item) or 'none'}") from None
            if np.ndim(value) == 0:
                raise DataError(f"BucketByLength: field {self.field!r} is a scalar per example, so it has no "
                                "length to bucket by")
            length = len(value)
            bucket = buckets[self.bucket_of(length)]
            bucket.append(item)
            if len(bucket) == self.size:
                yield collate(bucket, "longest", self.pad_value, fields)
                bucket.clear()
        if not self.drop_last:
            for bucket in buckets:
                if bucket:
                    yield collate(bucket, "longest", self.pad_value, fields)

    def __repr__(self):
        return f"BucketByLength({self.field!r}, {self.boundaries}, {self.size})"
