"""Import an ONNX model as a graphview Graph (``load``): ONNX nodes become graphview ops.

Graph inputs that are not initializers become placeholders (symbolic or unknown dims: None),
floating-point initializers trainable VARIABLEs (so the imported model can be gradient-checked and
fine-tuned) except scalars and constant settings (graphview.onnx.load_fixed: CONSTANTs) and batch norm's
running statistics (trainable=False; load_nn gives a batch norm its own copy where they are a trainable
initializer, as PyTorch writes an untrained one; in PyTorch's exports an Identity of an initializer is a
parameter of its own, load_ops.identity), integer and bool initializers CONSTANTs; a graphview op's own
refusal while building is an OnnxImportError naming the file and the node; each node is built by the
builder that BUILDERS gives its op type (the tables of load_ops, load_nn, load_dims, load_masks, load_more and
load_sizes joined; a ``Range`` over a run-time size stays symbolic for load_masks' builders and is a tensor
for the others). ONNX names are kept as variable names (``names=`` receives the map, ONNX name -> graphview
name, which differs only where a name was empty or taken).
Integer values known when the graph is built (shape constants, ``Shape`` of static dims and the
integer arithmetic on them) are folded with NumPy. ``onnx`` is an optional dependency (the onnx extra):
this module imports it only inside ``load``.
"""
import os

import numpy as np

from graphview.errors import GraphFileError, GraphviewError
from graphview.graph import Graph
from graphview.onnx.load_dims import DIMS_BUILDERS
from graphview.onnx.load_fixed import fixed_rule
from graphview.onnx.load_masks import MASK_BUILDERS, Positions, materialize
from graphview.onnx.load_more import MORE_BUILDERS
from graphview.onnx.load_nn import NN_BUILDERS
from graphview.onnx.load_sizes import SIZE_BUILDERS
from graphview.onnx.load_ops import BUILDERS as BASIC_BUILDERS, Context, OnnxImportError, view

# The opsets of the default ("ai.onnx") domain this importer knows.
MIN_OPSET, MAX_OPSET = 7, 23

BUILDERS = {**BASIC_BUILDERS, **NN_BUILDERS, **DIMS_BUILDERS, **MASK_BUILDERS, **MORE_BUILDERS,
            **SIZE_BUILDERS}

# ONNX element types that become graphview dtypes.
DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_}


def _onnx():
    try:
        import onnx  # an optional dependency (the onnx extra)
    except ImportError:
        raise OnnxImportError("gv.onnx.load needs the onnx package: pip install 'graphview[onnx]'") from None
    return onnx


def _read(source):
    """(ModelProto, where) for a path, bytes or a ModelProto; GraphFileError for anything unreadable."""
    onnx = _onnx()

    if isinstance(source, onnx.ModelProto):
        return source, "the ONNX model given"
    if isinstance(source, (bytes, bytearray)):
        where, data = "the ONNX bytes given", bytes(source)
    else:
        if not isinstance(source, (str, os.PathLike)):
            raise GraphFileError(f"gv.onnx.load takes a file path, the file's bytes or an onnx.ModelProto, not "
                                 f"{type(source).__name__} {source!r:.60}")
        where = os.fspath(source)
        try:
            with open(where, "rb") as file:
                data = file.read()
        except OSError as problem:
            raise GraphFileError(f"{where}: cannot read the ONNX file: {problem.strerror or problem}") from None
    if not data:
        raise GraphFileError(f"{where}: not an ONNX model: the file is empty")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as problem:  # protobuf's DecodeError, or a RuntimeWarning-turned-error
        raise GraphFileError(f"{where}: not an ONNX model (or truncated): {problem}") from None
    if not model.HasField("graph"):
        raise GraphFileError(f"{where}: not an ONNX model: it has no graph")
    if not isinstance(source, (bytes, bytearray)):
        try:   # tensors stored beside the file (models over 2 GB): onnx reads them relative to its folder
            onnx.external_data_helper.load_external_data_for_model(model, os.path.dirname(os.path.abspath(where)))
        except Exception as problem:  # OSError, or onnx's ValidationError for a missing data file
            raise GraphFileError(f"{where}: cannot read the model's external data: {problem}") from None
    return model, where


def _opset(model, where):
    versions = {entry.domain or "ai.onnx": entry.version for entry in model.opset_import}
    if "ai.onnx" not in versions:
        raise GraphFileError(f"{where}: the model imports no default-domain opset (ai.onnx); "
                             f"it imports {sorted(versions) or 'none'}")
    version = versions["ai.onnx"]
    if not MIN_OPSET <= version <= MAX_OPSET:
        raise GraphFileError(f"{where}: opset {version} is not supported; graphview reads opsets "
                             f"{MIN_OPSET} to {MAX_OPSET}")
    return version


def _check(model, where):
    import onnx  # an optional dependency (the onnx extra)

    if not model.graph.node and not model.graph.output:
        raise GraphFileError(f"{where}: the ONNX graph is empty (no nodes, no outputs)")
    try:
        onnx.checker.check_model(model)
    except Exception as problem:  # onnx.checker.ValidationError and its C++ errors
        first = str(problem).strip().splitlines()[0] if str(problem).strip() else type(problem).__name__
        raise GraphFileError(f"{where}: the ONNX checker refuses the model: {first}") from None


def _unsupported(graph, where):
    """One OnnxImportError naming every op type without a builder and its nodes (before building)."""
    missing = {}
    for index, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type not in BUILDERS:
            kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            missing.setdefault(kind, []).append(node.name or f"#{index}")
    if missing:
        listed = "; ".join(f"{kind} (nodes {', '.join(names)})" for kind, names in sorted(missing.items()))
        raise OnnxImportError(f"{where}: {len(missing)} ONNX op type(s) graphview cannot import: {listed}")


def _dims(value_info, where):
    import onnx  # an optional dependency (the onnx extra)

    kind = value_info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise OnnxImportError(f"{where}: input {value_info.name!r} is a {kind}, not a tensor")
    tensor = value_info.type.tensor_type
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)) if tensor.elem_type else None
    if dtype is None or dtype.name not in DTYPES:
        raise OnnxImportError(f"{where}: input {value_info.name!r} has element type "
                              f"{onnx.TensorProto.DataType.Name(tensor.elem_type)}; graphview takes "
                              f"{', '.join(DTYPES)}")
    if not tensor.HasField("shape"):
        raise OnnxImportError(f"{where}: input {value_info.name!r} has no shape (its rank must be known)")
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    return shape, dtype


def load(source, *, names=None):
    """The ONNX model at ``source`` (a path, the file's bytes or an onnx.ModelProto) as a Graph.

    ``names``, a dict if given, receives ONNX name -> graphview variable name for every input,
    initializer and node output. Bad files (unreadable, not ONNX, truncated, an unknown opset, an
    empty graph, refused by onnx.checker) raise GraphFileError with where and what; op types without
    a builder are listed in one OnnxImportError (a GraphFileError) before anything is built.
    """
    onnx = _onnx()
    from onnx import numpy_helper  # an optional dependency (the onnx extra)

    model, where = _read(source)
    opset = _opset(model, where)
    _check(model, where)
    graph = model.graph
    _unsupported(graph, where)
    g = Graph(graph.name or "onnx")
    cx = Context(g, opset, where)
    cx.graph_outputs = {value_info.name for value_info in graph.output}
    initializers = {tensor.name for tensor in graph.initializer}
    # Batch norm's running statistics are state (trainable=False), as graphview's own batch norm keeps them.
    state = {name for node in graph.node if node.op_type == "BatchNormalization" for name in node.input[3:5]}
    cx.state, cx.untie = state, model.producer_name == "pytorch"
    fixed = fixed_rule(graph)     # scalars and constant settings: CONSTANTs, not weights (load_fixed)
    for value_info in graph.input:
        if value_info.name in initializers:
            continue
        shape, dtype = _dims(value_info, where)
        cx.bind(value_info.name, g.placeholder(cx.fresh(value_info.name), shape, dtype.name))
    for tensor in graph.initializer:
        value = numpy_helper.to_array(tensor)
        if value.dtype.name not in DTYPES:
            raise OnnxImportError(f"{where}: initializer {tensor.name!r} has dtype {value.dtype}; graphview "
                                  f"takes {', '.join(DTYPES)}")
        if value.dtype.kind == "f" and not fixed(tensor.name, value):
            cx.bind(tensor.name, g.var(cx.fresh(tensor.name), value, trainable=tensor.name not in state))
        else:
            cx.bind(tensor.name, g.constant(cx.fresh(tensor.name), value), static=value)
    for index, node in enumerate(graph.node):
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        cx.begin(node, index)
        inputs = [cx.lookup(name) for name in node.input]
        if node.op_type not in MASK_BUILDERS:    # Range's positions of a run-time size, as a tensor
            inputs = [materialize(cx, v) if isinstance(v, Positions) else v for v in inputs]
        try:
            outputs = BUILDERS[node.op_type](cx, node, inputs, attrs)
        except OnnxImportError:
            raise
        except GraphviewError as problem:   # an op's own check (shapes, dtypes): named by the file and node
            cx.fail(f"{type(problem).__name__}: {problem}")
        cx.finish(node, [None if isinstance(v, Positions) else v for v in outputs])
        cx.values.update((name, v) for name, v in zip(node.output, outputs) if isinstance(v, Positions) and name)
    for value_info in graph.output:
        value = cx.lookup(value_info.name)
        if isinstance(value, Positions):
            cx.bind(value_info.name, view(cx, materialize(cx, value), (Ellipsis,), cx.fresh(value_info.name)))
        cx.materialize(value_info.name)
    if names is not None:
        names.update(cx.names)
    return g
