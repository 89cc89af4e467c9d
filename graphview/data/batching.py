"""Batching: samples to mini-batches, with padding of ragged fields and bucketing by length.

BigDL's SampleToMiniBatch pads ragged samples but forgets how long each one
was; here every padded field's true lengths travel with the batch in
``MiniBatch.lengths``, so a model can mask the padding.
"""
import numpy as np

from graphview import attributes
from graphview.data.pipeline import Transformer
from graphview.data.sample import DataError, MiniBatch, Sample
from graphview.data.transformers import argument, field_name, number


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
    pad = padding("Batch", pad)
    if pad == "longest":
        target = int(lengths.max())
    else:
        target = pad
        if lengths.max() > target:
            raise DataError(f"Batch: field {name!r} has an example of length {int(lengths.max())}, "
                            f"longer than the fixed length {target}")
    dtype = np.result_type(*arrays)
    out = np.full((len(arrays), target) + arrays[0].shape[1:], pad_value, dtype=dtype)
    for row, array in enumerate(arrays):
        out[row, :len(array)] = array
    return out, lengths


def padding(who, pad):
    """``pad`` checked: None, ``"longest"`` or a length (an int >= 0)."""
    if pad is None or (isinstance(pad, str) and pad == "longest"):
        return pad
    if attributes.is_integer(pad) and int(pad) >= 0:
        return int(pad)
    raise DataError(f"{who}: pad {pad!r} is not None, 'longest' or a length >= 0")


def field_names(who, fields):
    """``fields``: None or a list of field names."""
    if fields is None:
        return None
    if isinstance(fields, (str, bytes)) or not isinstance(fields, (list, tuple)):
        raise DataError(f"{who}: fields {fields!r} is not None or a list of field names")
    return [field_name(who, name, "fields entry") for name in fields]


class Batch(Transformer):
    """Group samples into MiniBatches of ``size`` (the last one smaller unless ``drop_last``).

    ``pad``, ``pad_value`` and ``fields`` control padding of ragged fields as in
    :func:`collate`; the true lengths are kept in ``MiniBatch.lengths``.
    """

    def __init__(self, size, drop_last=False, pad=None, pad_value=0, fields=None):
        self.size = argument("Batch", "size", size, attributes.Int(minimum=1))
        self.drop_last = argument("Batch", "drop_last", drop_last, attributes.Bool())
        self.pad = padding("Batch", pad)
        self.pad_value = number("Batch", "pad_value", pad_value)
        self.fields = field_names("Batch", fields)
        if self.pad is None and self.fields:
            raise DataError("Batch: fields= names the fields to pad, so give pad='longest' or a length too")

    @property
    def batch_capable(self):
        """Batches without padding can be sliced from arrays (padding needs each example's length)."""
        return "batch" if self.pad is None and not self.fields else None

    def row_slices(self, count):
        """The rows of each batch ``apply`` makes from ``count`` items, as slices."""
        stop = count - count % self.size if self.drop_last else count
        return [slice(start, min(start + self.size, stop)) for start in range(0, stop, self.size)]

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
        boundaries = list(attributes.integers(boundaries, "BucketByLength", "boundaries", DataError))
        if not boundaries or any(b <= a for a, b in zip(boundaries, boundaries[1:])) or boundaries[0] < 1:
            raise DataError(f"BucketByLength: boundaries must be increasing positive lengths, not {boundaries}")
        self.field = field_name("BucketByLength", field)
        self.boundaries = boundaries
        self.size = argument("BucketByLength", "size", size, attributes.Int(minimum=1))
        self.pad_value = number("BucketByLength", "pad_value", pad_value)
        self.fields = field_names("BucketByLength", fields)
        self.drop_last = argument("BucketByLength", "drop_last", drop_last, attributes.Bool())

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
