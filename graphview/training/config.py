"""TrainingConfig: the updater, and how batch fields connect to the graph's placeholders."""
from graphview import dtypes
from graphview.data.sample import MiniBatch
from graphview.errors import GraphviewError, PlaceholderError
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
    VARIABLE). ``prediction`` names an output (logits or class scores) whose
    accuracy against the first label is reported on validation data.
    """

    def __init__(self, updater, feature_mapping, label_mapping=(), trainable=None, prediction=None):
        if not isinstance(updater, Updater):
            raise GraphviewError(f"TrainingConfig: updater must be gv.SGD, gv.Adam, gv.AdamW or gv.RMSProp, "
                                 f"not {type(updater).__name__}")
        self.updater = updater
        self.feature_mapping = _mapping(feature_mapping, "feature_mapping")
        self.label_mapping = _mapping(label_mapping, "label_mapping")
        self.trainable = None if trainable is None else [getattr(v, "name", v) for v in trainable]
        self.prediction = getattr(prediction, "name", prediction)

    def trainable_names(self, graph):
        """The variables fit updates, checked against the graph."""
        if self.trainable is None:
            names = [n.name for n in graph.nodes() if n.kind is Kind.VARIABLE and dtypes.is_float(n.dtype)]
            if not names:
                raise GraphviewError(f"fit: graph {graph.name!r} has no floating-point VARIABLE to train")
            return names
        for name in self.trainable:
            node = graph.node(name)
            if node.kind is not Kind.VARIABLE or not dtypes.is_float(node.dtype):
                raise GraphviewError(f"fit: trainable {name!r} is a {node.kind} of dtype {node.dtype.name}; "
                                     "only floating-point VARIABLEs can be trained")
        return list(self.trainable)

    def feeds(self, graph, batch, labels=True):
        """The placeholder values for one batch."""
        feeds = _map(graph, batch, batch.features, self.feature_mapping, "feature")
        if labels:
            feeds.update(_map(graph, batch, batch.targets, self.label_mapping, "label"))
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


def _map(graph, batch, fields, mapping, role):
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
                raise PlaceholderError(f"fit: no batch {role} field for placeholder {placeholder!r}: the batch's "
                                       f"{role} fields are {', '.join(names) or 'none'}")
    for field, placeholder in pairs:
        feeds[placeholder] = _field(batch, field, role)
    return feeds


def _field(batch, field, role):
    if field.endswith(":lengths"):
        base = field[: -len(":lengths")]
        if base not in batch.lengths:
            raise PlaceholderError(f"fit: batch field {base!r} was not padded, so it has no lengths "
                                   f"(padded: {', '.join(batch.lengths) or 'none'})")
        return batch.lengths[base]
    try:
        return batch[field]
    except KeyError:
        raise PlaceholderError(f"fit: the batch has no {role} field {field!r}; it has {', '.join(batch)}") from None
