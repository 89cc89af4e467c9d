"""Export a graph's inference path to an ONNX model: ``export(graph, path, outputs, opset=17)``.

What goes into the model is what ``outputs`` depend on: placeholders become graph inputs (an unknown
dim becomes a symbolic one, ``batch`` on axis 0, else ``<name>_d<i>``), VARIABLEs and CONSTANTs
initializers under their own names, and each op node one or more ONNX nodes, built by the table in
graphview/onnx/export_ops.py (op name -> builder). The model computes what the graph computes under
``gv.inference()``: dropout is the identity and batch norm uses its running statistics.

Every op that has no ONNX form is found before anything is written and reported in one
:class:`UnsupportedOpsError` naming the ops and their nodes. ``onnx`` is an optional dependency (the
``onnx`` extra): this module imports it only when a model is built.
"""
import os

import numpy as np

from graphview.errors import GraphviewError
from graphview.onnx import export_nn  # noqa: F401  (registers the network ops' builders)
from graphview.onnx.export_ops import BUILDERS, Unsupported
from graphview.variable import Kind

MIN_OPSET, MAX_OPSET = 17, 21   # LayerNormalization needs 17; the builders are checked up to 21


class OnnxExportError(GraphviewError):
    """A graph that cannot be exported as asked (bad outputs or opset, onnx not installed)."""


class UnsupportedOpsError(OnnxExportError):
    """Ops of the graph that have no ONNX form; ``unsupported`` maps each op name to its nodes and why."""

    def __init__(self, message, unsupported):
        super().__init__(message)
        self.unsupported = unsupported


def _onnx():
    try:
        import onnx   # an optional dependency (the onnx extra)
    except ImportError:
        raise OnnxExportError("exporting to ONNX needs the onnx package: pip install 'graphview[onnx]'") from None
    return onnx


def tensor_type(onnx, dtype):
    """The ONNX element type of a NumPy dtype."""
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


class Context:
    """What a builder writes into: ONNX nodes and initializers, fresh tensor names, and the graph it reads.

    ``emit(op_type, inputs, **attributes)`` adds one node and returns its output name (``outputs=n``:
    a list of n names); ``const(array)`` adds an initializer and returns its name; ``dtype_of(name)`` and
    ``shape_of(name)`` are those of a graphview node; ``opset`` is the target opset; ``outputs`` the names the
    model gives."""

    def __init__(self, onnx, graph, opset, outputs=()):
        self.onnx, self.graph, self.opset = onnx, graph, opset
        self.outputs = frozenset(outputs)   # the names the model gives
        self.nodes, self.initializers = [], []
        self.node = None            # the graphview node being built
        self._count = 0
        self._consts = {}

    def fresh(self, hint="t"):
        self._count += 1
        return f"{self.node.name if self.node else 'graph'}::{hint}{self._count}"

    def emit(self, op_type, inputs, outputs=None, name=None, **attributes):
        names = [self.fresh(op_type)] if outputs is None else (
            [self.fresh(op_type) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs))
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), names, name=name or names[0],
                                                     **attributes))
        return names if isinstance(outputs, int) else names[0]

    def const(self, value, dtype=None):
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            name = self.fresh("const")
            if array.dtype.kind == "f":     # a Constant node: an importer must not take it for a weight
                self.constant(array, name)
            else:                           # shapes, axes, indices (onnxruntime's Range wants these)
                self.initializers.append(self.onnx.numpy_helper.from_array(array, name))
            self._consts[key] = name
        return self._consts[key]

    def constant(self, array, name):
        """A ``Constant`` node: not an initializer, so an importer does not take it for a weight to train."""
        tensor = self.onnx.numpy_helper.from_array(np.require(array, requirements="C"), name)
        self.nodes.append(self.onnx.helper.make_node("Constant", [], [name], name=name, value=tensor))

    def ints(self, values):
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1))

    def dtype_of(self, name):
        return self.graph.node(name).dtype

    def shape_of(self, name):
        return self.graph.node(name).shape

    def cast(self, tensor, from_dtype, to_dtype):
        """``tensor`` as ``to_dtype`` (a Cast node only where the dtypes differ)."""
        if np.dtype(from_dtype) == np.dtype(to_dtype):
            return tensor
        return self.emit("Cast", [tensor], to=tensor_type(self.onnx, to_dtype))


def _check_opset(opset):
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) or not MIN_OPSET <= opset <= MAX_OPSET:
        raise OnnxExportError(f"opset must be an int from {MIN_OPSET} to {MAX_OPSET}, not {opset!r}")
    return int(opset)


def _check_outputs(graph, outputs):
    if isinstance(outputs, str) or hasattr(outputs, "name"):
        outputs = [outputs]
    names = [getattr(output, "name", output) for output in outputs]
    if not names:
        raise OnnxExportError("export needs at least one output (the names of the nodes the model returns)")
    for name in names:
        if not isinstance(name, str):
            raise OnnxExportError(f"an output must be a variable or its name, not {name!r}")
        node = graph.node(name)    # an UnknownNameError with suggestions
        if node.kind is not Kind.ARRAY:
            raise OnnxExportError(f"output {name!r} is a {node.kind}, not an op's result: an ONNX output must be "
                                  "computed by the model (its inputs and initializers are there already)")
    if len(set(names)) != len(names):
        raise OnnxExportError(f"outputs name a node more than once: {names}")
    return names


def _value_info(onnx, name, dtype, shape, symbolic):
    dims = [(("batch" if axis == 0 else f"{name}_d{axis}") if symbolic else None) if dim is None else dim
            for axis, dim in enumerate(shape)]
    return onnx.helper.make_tensor_value_info(name, tensor_type(onnx, dtype), dims)


def to_model(graph, outputs, opset=17):
    """The ONNX ModelProto of the part of ``graph`` that ``outputs`` depend on (see the module doc)."""
    opset = _check_opset(opset)
    outputs = _check_outputs(graph, outputs)
    onnx = _onnx()
    needed = graph.ancestors(outputs)
    ordered = [node for node in graph.nodes() if node.name in needed]
    context = Context(onnx, graph, opset, outputs)
    tensors, inputs, unsupported = {}, [], {}
    for node in ordered:
        if node.kind is Kind.PLACEHOLDER:
            inputs.append(_value_info(onnx, node.name, node.dtype, node.shape, True))
            tensors[node.name] = node.name
        elif node.kind is Kind.VARIABLE:
            value = np.asarray(graph.stored(node.name))
            context.initializers.append(onnx.numpy_helper.from_array(np.require(value, requirements="C"), node.name))
            tensors[node.name] = node.name
        elif node.kind is Kind.CONSTANT:         # a Constant node: loaded back as a constant, not a weight
            context.constant(graph.stored(node.name), node.name)
            tensors[node.name] = node.name
    for node in ordered:
        if node.kind is not Kind.ARRAY:
            continue
        builder = BUILDERS.get(node.op)
        context.node = node
        try:
            if builder is None:
                raise Unsupported("no ONNX form")
            tensors[node.name] = builder(context, node, [tensors.get(name, name) for name in node.inputs],
                                         node.attributes)
        except Unsupported as why:
            unsupported.setdefault(node.op, []).append(f"{node.name} ({why})")
            tensors[node.name] = node.name
    if unsupported:
        listed = "; ".join(f"{op}: {', '.join(nodes)}" for op, nodes in sorted(unsupported.items()))
        raise UnsupportedOpsError(f"cannot export graph {graph.name!r} to ONNX: {sum(map(len, unsupported.values()))} "
                                  f"node(s) of {len(unsupported)} op(s) have no ONNX form: {listed}", unsupported)
    context.node = None
    output_infos = []
    for name in outputs:
        if tensors[name] != name:
            context.emit("Identity", [tensors[name]], outputs=[name])
        node = graph.node(name)
        output_infos.append(_value_info(onnx, name, node.dtype, node.shape, False))
    model_graph = onnx.helper.make_graph(context.nodes, graph.name, inputs, output_infos, context.initializers)
    model = onnx.helper.make_model(model_graph, opset_imports=[onnx.helper.make_opsetid("", opset)],
                                   producer_name="graphview")
    model.ir_version = min(model.ir_version, 10)    # IR 10 carries opsets up to 21; older runtimes read it
    return model


def export(graph, path, outputs, opset=17):
    """Write the ONNX model of what ``outputs`` (names or variables) depend on to ``path``; returns the
    path. Unsupported ops raise :class:`UnsupportedOpsError` (all of them, with their nodes) and a bad
    ``opset`` (17 to 21) :class:`OnnxExportError`, both before anything is written."""
    model = to_model(graph, outputs, opset)
    onnx = _onnx()
    try:
        path = os.fspath(path)
        onnx.save_model(model, path)
    except TypeError:
        raise OnnxExportError(f"export: path must be a file path, not {type(path).__name__} {path!r}") from None
    except OSError as problem:   # a missing folder, permissions, a full disk: the user's path
        raise OnnxExportError(f"{path}: cannot write the ONNX file: {problem.strerror or problem}") from None
    return path
