"""evaluate: accuracy, per-class precision and recall, and a confusion matrix, for a classifier output."""
import numpy as np

from graphview import runstate
from graphview.data.sharding import shard_batch
from graphview.distributed import comm
from graphview.data.dataset import DataSet
from graphview.data.sample import MiniBatch
from graphview.errors import GraphviewError, PlaceholderError
from graphview.training.config import map_fields, conformed
from graphview.variable import Kind


class Evaluation:
    """Classification results. ``confusion[t, p]`` counts examples of true class t predicted as p."""

    def __init__(self, confusion, loss=None):
        self.confusion = confusion
        self.loss = loss

    @property
    def count(self):
        return int(self.confusion.sum())

    @property
    def accuracy(self):
        return float(np.trace(self.confusion) / self.count) if self.count else float("nan")

    @property
    def support(self):
        """Examples of each true class."""
        return self.confusion.sum(axis=1)

    @property
    def precision(self):
        """Per class: correct predictions of the class / all predictions of it (NaN when never predicted)."""
        predicted = self.confusion.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(predicted > 0, np.diag(self.confusion) / np.maximum(predicted, 1), np.nan)

    @property
    def recall(self):
        """Per class: correct predictions of the class / its examples (NaN when it has none)."""
        support = self.support
        return np.where(support > 0, np.diag(self.confusion) / np.maximum(support, 1), np.nan)

    @property
    def f1(self):
        p, r = self.precision, self.recall
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(p + r > 0, 2 * p * r / (p + r), np.nan)

    def metrics(self):
        """A dict of the scalar results (accuracy, loss when known)."""
        out = {"accuracy": self.accuracy}
        if self.loss is not None:
            out["loss"] = self.loss
        return out

    def __str__(self):
        classes = self.confusion.shape[0]
        lines = [f"examples: {self.count}   accuracy: {self.accuracy:.4f}"
                 + (f"   loss: {self.loss:.5f}" if self.loss is not None else ""), "",
                 "class  precision  recall  f1      support"]
        for c in range(classes):
            lines.append(f"{c:>5}  {_num(self.precision[c]):>9}  {_num(self.recall[c]):>6}  "
                         f"{_num(self.f1[c]):<6}  {int(self.support[c]):>7}")
        width = max(5, len(str(int(self.confusion.max(initial=0)))) + 1)
        lines += ["", "confusion matrix (rows: true class, columns: predicted class)",
                  " " * 6 + "".join(f"{c:>{width}}" for c in range(classes))]
        for t in range(classes):
            lines.append(f"{t:>5} " + "".join(f"{int(v):>{width}}" for v in self.confusion[t]))
        return "\n".join(lines)

    def __repr__(self):
        return f"<Evaluation: {self.count} examples, accuracy {self.accuracy:.4f}>"


def _num(value):
    return "-" if np.isnan(value) else f"{value:.4f}"


def confusion_matrix(labels, predictions, classes):
    matrix = np.zeros((classes, classes), np.int64)
    np.add.at(matrix, (labels.astype(np.int64), predictions.astype(np.int64)), 1)
    return matrix


def predicted_classes(scores):
    """Class predictions from an output: argmax of the last axis, or the values themselves when integer."""
    scores = np.asarray(scores)
    if np.issubdtype(scores.dtype, np.integer):
        return scores
    if scores.ndim == 0:
        raise GraphviewError("evaluate: the output is a scalar, not per-example class scores")
    return scores.argmax(axis=-1)


class ConfusionCounter:
    """Accumulates a confusion matrix over batches, growing it when a larger class appears."""

    def __init__(self, classes=None):
        self.matrix = np.zeros((classes or 0, classes or 0), np.int64)

    def merge(self, world):
        """Sum the ranks' matrices (grown to the largest first), in place, on every rank."""
        size = max(world.allgather_object(self.matrix.shape[0]))
        grown = np.zeros((size, size), np.int64)
        grown[:self.matrix.shape[0], :self.matrix.shape[0]] = self.matrix
        self.matrix = world.allreduce_(grown)

    def add(self, labels, scores):
        labels = np.asarray(labels).reshape(-1)
        if not np.issubdtype(labels.dtype, np.integer):
            raise GraphviewError(f"evaluate: labels must be integer class indices, not {labels.dtype}")
        labels = labels.astype(np.int64, copy=False)       # uint8 labels: max(initial=-1) must fit
        predictions = predicted_classes(scores).reshape(-1).astype(np.int64, copy=False)
        if predictions.shape != labels.shape:
            raise GraphviewError(f"evaluate: {predictions.size} predictions for {labels.size} labels")
        if labels.size and min(labels.min(), predictions.min()) < 0:
            raise GraphviewError("evaluate: a label or prediction is negative")
        needed = max(self.matrix.shape[0], np.asarray(scores).shape[-1] if np.asarray(scores).ndim else 0,
                     int(max(labels.max(initial=-1), predictions.max(initial=-1))) + 1)
        if needed > self.matrix.shape[0]:
            grown = np.zeros((needed, needed), np.int64)
            grown[:self.matrix.shape[0], :self.matrix.shape[0]] = self.matrix
            self.matrix = grown
        self.matrix += confusion_matrix(labels, predictions, self.matrix.shape[0])


def evaluation_feeds(graph, batch, feature_mapping=None):
    """Placeholder values for evaluation: mapped features, else every batch field named like a placeholder."""
    if not isinstance(batch, MiniBatch):
        raise GraphviewError(f"evaluate: the data set gave a {type(batch).__name__}, not a MiniBatch; "
                             "end the pipeline with gv.data.Batch(size)")
    if feature_mapping is not None:
        return map_fields(graph, batch, batch.features, feature_mapping, "feature")
    return {name: conformed(graph, name, array, name, "label" if name in batch.targets else "feature")
            for name, array in batch.items()
            if name in graph and graph.node(name).kind is Kind.PLACEHOLDER}


def evaluate(graph, dataset, output, label, feature_mapping=None, classes=None, distributed=True):
    """Run ``output`` over every batch of ``dataset`` and compare its argmax with the batch's ``label`` field.

    Under an MPI world of several processes every rank must call it: each evaluates its share of every
    batch and the confusion matrices are summed, so every rank returns the whole data set's figures
    (``distributed=False``: all of it on the calling rank)."""
    world = comm.current() if distributed else None
    if not isinstance(dataset, DataSet):
        raise GraphviewError(f"evaluate: expected a gv.data data set, not {type(dataset).__name__}")
    output = getattr(output, "name", output)
    graph.node(output)
    counter = ConfusionCounter(classes)
    for batch in dataset.iterate(0):
        if label not in batch:
            raise PlaceholderError(f"evaluate: the batch has no label field {label!r}; it has {', '.join(batch)}")
        if world is not None:
            batch = shard_batch(batch, world.rank, world.size)
            if not batch.size:
                continue
        with runstate.inference():
            scores = graph.output(evaluation_feeds(graph, batch, feature_mapping), [output])[output]
        counter.add(batch[label], scores)
    if world is not None:
        counter.merge(world)
    if counter.matrix.sum() == 0:
        raise GraphviewError("evaluate: the data set is empty")
    return Evaluation(counter.matrix)
