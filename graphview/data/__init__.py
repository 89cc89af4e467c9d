"""The data pipeline (seed 004, BigDL): samples, data sets, transformers chained with ``>>``, batches.

    train = gv.data.ArrayDataSet({"x": X}, {"y": y})
    batches = train >> gv.data.Shuffle(seed=0) >> gv.data.Normalize("x") >> gv.data.Batch(64)
    for batch in batches.iterate(epoch):      # lazy; a fresh pass each epoch
        batch.features["x"], batch.targets["y"]
"""
from graphview.data.batching import Batch, BucketByLength, collate
from graphview.data.dataset import ArrayDataSet, IterableDataSet
from graphview.data.pipeline import Chained, DataSet, TransformedDataSet, Transformer
from graphview.data.sample import DataError, MiniBatch, Sample
from graphview.data.sharding import Shard
from graphview.data.transformers import Filter, Map, Normalize, OneHot, Shuffle

__all__ = ["Sample", "MiniBatch", "DataError", "DataSet", "ArrayDataSet", "IterableDataSet", "TransformedDataSet",
           "Transformer", "Chained", "Shuffle", "Map", "Filter", "Normalize", "OneHot", "Batch", "BucketByLength",
           "collate", "Shard"]
