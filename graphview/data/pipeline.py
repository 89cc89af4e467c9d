"""The two ends of ``>>``: data sets (restartable sources) and transformers (iterator to iterator).

``dataset >> transformer`` is a TransformedDataSet, ``transformer(dataset)`` is
``dataset >> transformer`` and ``t1 >> t2`` a Chained transformer, so each base
class needs the other's type: they are declared together here, below both
graphview/data/dataset.py (the data sets) and graphview/data/transformers.py
(the transformers), which build on them and import neither of each other.
"""
from graphview.data.sample import DataError, MiniBatch
from graphview.data.slicing import sliced_pipeline

# What the sliced path calls instead of ``apply`` for each kind of batch_capable (graphview/data/slicing.py).
BATCH_METHODS = {"reorder": ("order",), "elementwise": ("transform",), "batch": ("row_slices",)}


def _defined_at(kind, method):
    """How far up ``kind``'s MRO the class defining ``method`` is (0: ``kind`` itself)."""
    return next(position for position, owner in enumerate(kind.__mro__) if method in vars(owner))


class DataSet:
    """A restartable source of samples or batches; chain transformers with ``>>``."""

    def iterate(self, epoch=0):
        """A fresh iterator over this data set's items for ``epoch``."""
        raise NotImplementedError

    def __iter__(self):
        return self.iterate(0)

    def __rshift__(self, transformer):
        if not isinstance(transformer, Transformer):
            raise DataError(f"a data set can only be chained (>>) with a transformer, not {type(transformer).__name__}")
        return TransformedDataSet(self, transformer)

    def transform(self, transformer):
        """``self >> transformer``."""
        return self >> transformer

    def size_hint(self):
        """The number of items one pass gives, when known without iterating; else None."""
        return None

    def batch_sizes(self, epoch=0):
        """The rows of each MiniBatch that the pass for ``epoch`` gives, in order (data-parallel ranks compare
        them before an epoch, ADR 0025). Here by running that pass and keeping only the sizes; a data set
        that knows its batches without reading them overrides it, as an array-backed pipeline does."""
        sizes = []
        for item in self.iterate(epoch):
            if not isinstance(item, MiniBatch):
                raise DataError(f"the data set gives {type(item).__name__}s, not MiniBatches: end its pipeline "
                                "with gv.data.Batch")
            sizes.append(item.size)
        return sizes

    def arrays(self):
        """``(features, targets)``, dicts of arrays whose rows are the samples, when the data set is backed
        by such arrays (so batches can be sliced from them, graphview/data/slicing.py, when they hold numbers
        or bools); else None."""
        return None


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

    def batch_sizes(self, epoch=0):
        root, stages = self.pipeline()
        sliced = sliced_pipeline(root.arrays(), stages)
        sizes = sliced.batch_sizes() if sliced is not None else None
        return sizes if sizes is not None else super().batch_sizes(epoch)

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


class Transformer:
    """Base class: override ``apply(iterator, epoch)`` (or ``transform(item)`` for item-wise ones).

    ``batch_capable`` declares what the transformer does to a pipeline whose
    source is backed by arrays, so that batches can be sliced from the arrays
    instead of stacked from samples (graphview/data/slicing.py): ``None``, it
    needs its items one by one; ``"reorder"``, it only reorders them and says
    how with ``order(count, epoch)``; ``"elementwise"``, ``transform`` of a
    MiniBatch equals the batch of ``transform`` of each of its samples;
    ``"batch"``, it groups items into MiniBatches (``Batch`` without padding)
    and says how with ``row_slices(count)``.

    The declaration holds for the class that makes it: a subclass that
    overrides ``apply`` without overriding those methods (``order``,
    ``transform``, ``row_slices``) too runs per sample, so its ``apply`` is
    what runs (:meth:`sliced_capability`).
    """

    batch_capable = None

    def sliced_capability(self):
        """``batch_capable`` when the methods the sliced path calls are defined at least as low in the
        class hierarchy as ``apply`` (which they replace); else None."""
        capability = self.batch_capable
        methods = BATCH_METHODS.get(capability)
        if methods is None or "apply" in vars(self):
            return None
        kind = type(self)
        applied_at = _defined_at(kind, "apply")
        if any(_defined_at(kind, method) > applied_at for method in methods):
            return None
        return capability

    def apply(self, items, epoch):
        """An iterator of transformed items; ``epoch`` lets seeded transformers vary per pass."""
        return (self.transform(item) for item in items)

    def transform(self, item):
        raise NotImplementedError(f"{type(self).__name__} must define apply() or transform()")

    def parts(self):
        """The transformers this one runs in order (itself; a chain, its stages)."""
        return [self]

    def prepare_pass(self, whole):
        """On the sliced path, before a pass: ``whole()`` is the pass so far as one MiniBatch (for
        transformers that learn from their first pass, as Normalize does)."""

    def __rshift__(self, other):
        if not isinstance(other, Transformer):
            raise DataError(f"a transformer can only be chained (>>) with another transformer, not {type(other).__name__}")
        return Chained(self, other)

    def __call__(self, data, epoch=0):
        """On a data set: the transformed data set; on an iterable: the transformed iterator."""
        if isinstance(data, DataSet):
            return data >> self
        return self.apply(iter(data), epoch)

    def __repr__(self):
        return f"{type(self).__name__}()"


class Chained(Transformer):
    """``first >> second``: the second transformer runs on the first one's output."""

    def __init__(self, *stages):
        self.stages = []
        for stage in stages:
            self.stages.extend(stage.stages if isinstance(stage, Chained) else [stage])

    def parts(self):
        return list(self.stages)

    def apply(self, items, epoch):
        for stage in self.stages:
            items = stage.apply(items, epoch)
        return items

    def __repr__(self):
        return " >> ".join(repr(stage) for stage in self.stages)
