"""TrainingConfig: the updater, and how batch fields connect to the graph's placeholders."""
import numpy as np

from graphview import dtypes
from graphview.data.sample import MiniBatch
from graphview.distributed.parallel import DataParallel
from graphview.errors import DTypeError, GraphviewError, PlaceholderError
from graphview.training.updaters import Updater
from graphview.variable import Kind


class TrainingConfig:
    """What ``g.fit`` needs besides the data.

    ``feature_mapping`` and ``label_mapping`` say which placeholder each batch
    field feeds. A list of placeholder names takes, for each name, the batch
    field of the same name, or else the field in the same position (as in
    SameDiff); a dict maps a field name to a placeholder name. A field
    ``"name:lengths"`` is the true lengths of a padded field.
    ``trainable`` lists the variables to update (default: every floating-point
    VARIABLE not made with ``trainable=False``). ``prediction`` names an output (logits or class scores) whose
    accuracy against the first label is reported on validation data.

    A batch field whose dtype differs from its placeholder's is cast to it when
    NumPy calls the cast ``same_kind`` (float32 data for a float64 model, int32
    labels for int64, uint8 pixels for float32); any other mismatch (float
    labels for an int64 placeholder) stops fit at the first batch, before any
    step, saying how to convert the data.
    ``terminate_on_nan`` (default True) stops fit with a ``gv.TrainingError``
    when a step's loss is NaN or infinite, before that step's update.
    ``blas_threads`` limits the threads of the BLAS that the matmul kernels
    call, for the duration of fit (needs threadpoolctl); None (the default)
    leaves the BLAS library's own setting. One thread is much faster for small
    models on small or busy machines (README, "Speed").
    ``data_parallel`` (a ``gv.distributed.DataParallel``) trains on every rank of an MPI world at once,
    each on its share of every batch (ADR 0025).
    """

    def __init__(self, updater, feature_mapping, label_mapping=(), trainable=None, prediction=None,
                 terminate_on_nan=True, blas_threads=None, data_parallel=None):
        if not isinstance(updater, Updater):
            raise GraphviewError(f"TrainingConfig: updater must be gv.SGD, gv.Adam, gv.AdamW or gv.RMSProp, "
                                 f"not {type(updater).__name__}")
        self.updater = updater
        self.feature_mapping = _mapping(feature_mapping, "feature_mapping")
        self.label_mapping = _mapping(label_mapping, "label_mapping")
        self.trainable = None if trainable is None else [getattr(v, "name", v) for v in trainable]
        self.prediction = getattr(prediction, "name", prediction)
        if not isinstance(terminate_on_nan, (bool, np.bool_)):
            raise GraphviewError(f"TrainingConfig: terminate_on_nan must be True or False, not {terminate_on_nan!r}")
        self.terminate_on_nan = bool(terminate_on_nan)
        if blas_threads is not None and (not isinstance(blas_threads, (int, np.integer))
                                         or isinstance(blas_threads, bool) or blas_threads < 1):
            raise GraphviewError(f"TrainingConfig: blas_threads must be None or an int >= 1, not {blas_threads!r}")
        self.blas_threads = blas_threads
        if data_parallel is not None and not isinstance(data_parallel, DataParallel):
            raise GraphviewError(f"TrainingConfig: data_parallel must be a gv.distributed.DataParallel, not "
                                 f"{type(data_parallel).__name__}")
        self.data_parallel = data_parallel

    def trainable_names(self, graph):
        """The variables fit updates, checked against the graph."""
        if self.trainable is None:
            names = [n.name for n in graph.nodes() if graph.is_trainable(n.name) and dtypes.is_float(n.dtype)]
            if not names:
                raise GraphviewError(f"fit: graph {graph.name!r} has no trainable floating-point VARIABLE to train")
            return names
        for name in self.trainable:
            node = graph.node(name)
            if node.kind is not Kind.VARIABLE or not dtypes.is_float(node.dtype):
                raise GraphviewError(f"fit: trainable {name!r} is a {node.kind} of dtype {node.dtype.name}; "
                                     "only floating-point VARIABLEs can be trained")
            if not graph.is_trainable(name):
                raise GraphviewError(f"fit: trainable {name!r} was made with trainable=False (state such as a "
                                     "running statistic, changed only by its state update); leave it out")
        return list(self.trainable)

    def feeds(self, graph, batch, labels=True, data="batch"):
        """The placeholder values for one batch; ``data`` names where it comes from in messages."""
        feeds = map_fields(graph, batch, batch.features, self.feature_mapping, "feature", data)
        if labels:
            feeds.update(map_fields(graph, batch, batch.targets, self.label_mapping, "label", data))
        return feeds

    def __repr__(self):
        return (f"TrainingConfig(updater={self.updater!r}, feature_mapping={self.feature_mapping!r}, "
                f"label_mapping={self.label_mapping!r})")


def _mapping(mapping, what):
    if isinstance(mapping, str):
        mapping = [mapping]
    if isinstance(mapping, dict):
        return dict(mapping)
    if isinstance(mapping, (list, tuple)):
        return [getattr(item, "name", item) for item in mapping]
    raise GraphviewError(f"TrainingConfig: {what} must be a list of placeholder names or a dict "
                         f"of field name to placeholder name, not {type(mapping).__name__}")


def map_fields(graph, batch, fields, mapping, role, data="batch"):
    if not isinstance(batch, MiniBatch):
        raise GraphviewError(f"fit: the data set gave a {type(batch).__name__}, not a MiniBatch; "
                             "end the pipeline with gv.data.Batch(size)")
    feeds = {}
    if isinstance(mapping, dict):
        pairs = mapping.items()
    else:
        names = list(fields)
        pairs = []
        for position, placeholder in enumerate(mapping):
            if placeholder in fields:
                pairs.append((placeholder, placeholder))
            elif position < len(names):
                pairs.append((names[position], placeholder))
            else:
                raise PlaceholderError(f"fit: no {data} {role} field for placeholder {placeholder!r}: the "
                                       f"{data}'s {role} fields are {', '.join(names) or 'none'}")
    for field, placeholder in pairs:
        feeds[placeholder] = conformed(graph, placeholder, _field(batch, field, role, data), field, role, data)
    return feeds


def conformed(graph, placeholder, array, field, role, data="batch"):
    """``array`` in its placeholder's dtype when the cast is ``same_kind`` (and, between integers, in range)."""
    dtype = getattr(array, "dtype", None)
    if dtype is None or placeholder not in graph:
        return array            # the executor reports unknown names and non-arrays
    expected = graph.node(placeholder).dtype
    if dtype == expected:
        return array
    fix = (f"convert the data before it is batched, e.g. gv.data.ArrayDataSet({{{field!r}: "
           f"array.astype({expected.name!r})}}) or gv.data.Map(lambda item: {{..., {field!r}: "
           f"item[{field!r}].astype({expected.name!r})}}, batched=True)")
    if not np.can_cast(dtype, expected, "same_kind"):
        raise DTypeError(f"fit: {data} {role} field {field!r} has dtype {dtype.name}, but placeholder "
                         f"{placeholder!r} is {expected.name}, and {dtype.name} does not cast to {expected.name} "
                         f"without changing its kind; {fix}")
    if dtype.kind in "biu" and expected.kind in "iu" and not np.can_cast(dtype, expected, "safe") and array.size:
        bounds = np.iinfo(expected)
        if array.min() < bounds.min or array.max() > bounds.max:
            raise DTypeError(f"fit: {data} {role} field {field!r} (dtype {dtype.name}) holds values outside "
                             f"the range of placeholder {placeholder!r} ({expected.name}, {bounds.min} to "
                             f"{bounds.max}); {fix}")
    return array.astype(expected)


def _field(batch, field, role, data="batch"):
    if field.endswith(":lengths"):
        base = field[: -len(":lengths")]
        if base not in batch.lengths:
            raise PlaceholderError(f"fit: {data} field {base!r} was not padded, so it has no lengths "
                                   f"(padded: {', '.join(batch.lengths) or 'none'})")
        return batch.lengths[base]
    try:
        return batch[field]
    except KeyError:
        raise PlaceholderError(f"fit: the {data} has no {role} field {field!r}; it has {', '.join(batch)}") from None
