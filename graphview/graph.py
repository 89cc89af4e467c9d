"""The Graph: an append-only, immutable op graph, and the facade users call.

The nodes, names, values and losses live in :class:`graphview.core.GraphCore`, which the modules
under this one use; ``Graph`` adds what users call: running, gradients, training, files, views and
in-place ops, and the op namespaces (ADR 0017).
"""
from graphview import autodiff, core, serialization
from graphview.building import build_op
from graphview.execution import executor_of
from graphview.layouts.table import dimmed_placeholder
from graphview.model_summary import layer_table
from graphview.ops.inplace import apply as apply_inplace
from graphview.ops.view import create_view
from graphview.registry import Namespace
from graphview.shapes import format_shape
from graphview.training.evaluation import evaluate
from graphview.training.fit import fit
from graphview.training.predict import predict
from graphview.variable import Variable

SPACES = ("math", "nn", "linalg", "shape", "loss", "random")


class Graph(core.GraphCore):
    """An immutable op graph: build it with ops, run it with ``output``. ``float_dtype`` ("float64" or
    "float32") is the model's float dtype: placeholders made without a dtype and layers whose input carries
    none (an embedding's ids) take it."""

    def __init__(self, name=None, float_dtype="float64"):
        super().__init__(name, float_dtype)
        for space in SPACES:
            setattr(self, space, Namespace(self, space))

    def placeholder(self, name, shape=None, dtype=None, *, dims=None, lengths=None):
        """A value fed at run time; a dim of ``shape`` may be None (any size); ``dtype`` defaults to the
        graph's ``float_dtype`` (float64 unless the graph was made with another).

        ``dims`` tags each axis with a gv.Dim; ``lengths`` maps a dynamic dim to the
        name of its int lengths placeholder (see graphview/layouts/table.py)."""
        if dims is not None or lengths is not None:  # dims live in a side table (ADR 0014)
            return dimmed_placeholder(self, name, shape, dtype, dims, lengths)
        return super().placeholder(name, shape, dtype)

    def add_op(self, definition, inputs, attrs, name=None):
        """Add one node for ``definition`` applied to ``inputs``; used by every op."""
        return build_op(self, definition, inputs, attrs, name)

    # --- views and in-place ops (ADRs 0008, 0009) ----------------------------------

    def create_view(self, x, *descriptors, name=None):
        """The view of x selected by INT64 index descriptors (gv.point, gv.interval, gv.all, gv.new_axis)."""
        self.check_owned(x)
        return create_view(x, *descriptors, name=name)

    def assign_(self, view, value, name=None):
        """The view's base after ``view[...] = value``, written in place when the plan allows."""
        return self._inplace("assign_", view, value, name)

    def add_(self, view, value, name=None):
        """The view's base after ``view += value``."""
        return self._inplace("add_", view, value, name)

    def sub_(self, view, value, name=None):
        """The view's base after ``view -= value``."""
        return self._inplace("sub_", view, value, name)

    def mul_(self, view, value, name=None):
        """The view's base after ``view *= value``."""
        return self._inplace("mul_", view, value, name)

    def div_(self, view, value, name=None):
        """The view's base after ``view /= value``."""
        return self._inplace("div_", view, value, name)

    def _inplace(self, op, view, value, name):
        self.check_owned(view)
        return apply_inplace(op, view, value, name)

    # --- running ---------------------------------------------------------------

    def output(self, placeholders, outputs, listeners=None):
        """Run the graph and return ``{name: array}`` for the requested outputs."""
        return executor_of(self).run(placeholders, self._output_names(outputs), listeners)

    def explain(self, outputs):
        """A readable plan for computing ``outputs``: steps, views and buffer reuse."""
        return executor_of(self).explain(self._output_names(outputs))

    def _output_names(self, outputs):
        return [self.name_of(o) for o in ([outputs] if isinstance(outputs, (str, Variable)) else outputs)]

    # --- gradients (graphview/autodiff.py, ADR 0005) ----------------------------------

    def calculate_gradients(self, placeholders, wrt, listeners=None):
        """``{name: gradient array}`` of the sum of the losses (``set_loss``) for each name in ``wrt``."""
        return autodiff.calculate_gradients(self, placeholders, wrt, listeners)

    def gradient_graph(self, wrt):
        """The cached forward + backward graph for ``wrt``: ``.graph`` and ``.gradients[name]`` (a Variable)."""
        return autodiff.gradient_graph(self, wrt)

    # --- training (graphview/training/, ADR 0013) --------------------------------------

    def fit(self, dataset, epochs, config, listeners=None, validation=None, progress=None, resume_from=None):
        """Train the variables on a data set of batches; returns a History. See graphview.training.fit."""
        return fit(self, dataset, epochs, config, listeners, validation, progress, resume_from)

    def evaluate(self, dataset, output, label, feature_mapping=None, classes=None, distributed=True):
        """Accuracy, per-class precision/recall and a confusion matrix of ``output`` against ``label``."""
        return evaluate(self, dataset, output, label, feature_mapping, classes, distributed)

    def predict(self, data, output, batch_size=256, feature_mapping=None, distributed=True):
        """``output`` over all of ``data`` (an array, a dict of arrays by placeholder name, or a data set) in
        batches and in inference mode, as one array; see graphview.training.predict."""
        return predict(self, data, output, batch_size, feature_mapping, distributed)

    def summary(self, params=False):
        """A table of every variable: name, kind, op, shape, dtype and inputs; a VARIABLE made with
        ``trainable=False`` is marked "(not trained)", and each state update is listed below the table.
        ``params=True``: the layers instead (graphview.layers), each with its output shape and parameter
        count, and the totals, trainable and not (Keras' model.summary())."""
        if params:
            return layer_table(self)
        rows = [("name", "kind", "op", "shape", "dtype", "inputs")]
        for node in self.nodes():
            kind = f"{node.kind} (not trained)" if node.name in self.non_trainable else str(node.kind)
            rows.append((node.name, kind, node.op or "-", format_shape(node.shape),
                         node.dtype.name, ", ".join(node.inputs) or "-"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
        lines.insert(1, "  ".join("-" * width for width in widths))
        title = f"graph {self.name!r}: {len(self.nodes())} variables"
        updates = [f"state update in training steps: {name} <- {node}" for name, node in self.state_updates.items()]
        return "\n".join([title] + lines + updates)

    # --- graph files (graphview/serialization.py, ADR 0010) ----------------------------

    def save(self, path, placeholders=None):
        """Write the graph, and optionally placeholder values by name, to a graph file; see gv.load."""
        serialization.save(self, path, placeholders)

    def __repr__(self):
        return f"<graphview.Graph {self.name!r} with {len(self.nodes())} variables>"


core.register_graph_class(Graph)
