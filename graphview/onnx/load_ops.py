"""The ONNX op types ``graphview.onnx.load`` imports: BUILDERS maps an op type to its builder.

A builder gets the Context, the ONNX node, its inputs (a graphview Variable, a NumPy array for a value
known while building, None for an omitted optional input) and its attributes (parsed by
onnx.helper.get_attribute_value), and returns the node's outputs in order. Element-wise, shape and
reduction ops are here; convolution, pooling, normalization and recurrent ops in
graphview.onnx.load_nn (NN_BUILDERS; graphview.onnx.load joins the two tables).
"""
import numpy as np

from graphview.errors import GraphFileError
from graphview.indexing import from_numpy_key
from graphview.layouts.ops import merge_axes
from graphview.variable import Kind, Variable


class OnnxImportError(GraphFileError):
    """An ONNX model graphview cannot import: op types without a builder, or a node's attributes or
    inputs outside what its builder supports (each message names the file and the node)."""


class Context:
    """What builders share: the graph, the opset, the ONNX name -> value table and the name map."""

    def __init__(self, g, opset, where):
        self.g, self.opset, self.where = g, opset, where
        self.values, self.names = {}, {}
        self.constants, self.onnx_names = {}, {}   # id(array) -> its CONSTANT, its ONNX name
        self.node, self.index = None, None
        self.graph_outputs = set()
        self.state, self.untie = set(), False     # batch norm's statistics; Identity makes copies (PyTorch)

    def fresh(self, onnx_name):
        """The graphview name for ``onnx_name``: itself unless empty or already taken in the graph."""
        if not onnx_name:
            return None
        name, count = onnx_name, 0
        while name in self.g:
            count += 1
            name = f"{onnx_name}_{count}"
        self.names[onnx_name] = name
        return name

    def bind(self, onnx_name, value, static=None):
        """``onnx_name`` is ``value`` (a Variable), or ``static`` (an array) held by the CONSTANT ``value``."""
        if static is not None:
            self.values[onnx_name] = static
            self.onnx_names[id(static)] = onnx_name
            self.constants[id(static)] = value
        else:
            self.values[onnx_name] = value
            self.names.setdefault(onnx_name, value.name)

    def lookup(self, onnx_name):
        if not onnx_name:
            return None
        if onnx_name not in self.values:
            self.fail(f"its input {onnx_name!r} is produced by no earlier node, initializer or graph input")
        return self.values[onnx_name]

    def begin(self, node, index):
        self.node, self.index = node, index

    def name(self, i=0):
        """The name for the node's output ``i`` (given to the op that makes it)."""
        return self.fresh(self.node.output[i]) if i < len(self.node.output) else None

    def finish(self, node, outputs):
        if len(outputs) < len(node.output):
            used = [name for name in node.output[len(outputs):] if name]
            if used:
                self.fail(f"outputs {used} are not supported (only the first {len(outputs)})")
        for onnx_name, value in zip(node.output, outputs):
            if not onnx_name or value is None:
                continue
            if isinstance(value, Variable):
                self.bind(onnx_name, value)
            elif isinstance(value, Dims):
                self.values[onnx_name] = value
            else:
                value = np.asarray(value)
                self.values[onnx_name] = value
                self.onnx_names[id(value)] = onnx_name

    def var(self, value, dtype=None):
        """``value`` as a Variable: a known array becomes a CONSTANT, named by its ONNX name if it has one."""
        if value is None or isinstance(value, Variable):
            return value
        if isinstance(value, Dims):
            self.fail("a shape with unknown sizes (from Shape) is used as a tensor; only Gather, Concat, "
                      "(Un)Squeeze, Slice, Cast, Reshape, Expand and ConstantOfShape take one")
        if id(value) in self.constants:
            return self.constants[id(value)]
        onnx_name = self.onnx_names.get(id(value))
        constant = self.g.constant(self.fresh(onnx_name) or self.g.new_name(None, "onnx_constant"),
                                   np.asarray(value, dtype=dtype))
        if onnx_name is not None:
            self.constants[id(value)] = constant
        return constant

    def materialize(self, onnx_name):
        self.var(self.lookup(onnx_name))

    def static(self, value, what):
        """``value`` as a NumPy array known while building, or an error naming ``what``."""
        if value is None or isinstance(value, (Variable, Dims)):
            if isinstance(value, Variable) and value.kind is Kind.VARIABLE:
                self.fail(f"{what} must be a constant, and it is the initializer {value.name!r}, which is also "
                          "a tensor operand elsewhere and so loaded as a trainable VARIABLE")
            self.fail(f"{what} must be a constant (an initializer or a Constant node's output), not computed")
        return np.asarray(value)

    def fail(self, message):
        node = self.node
        label = f"node {node.name or '#' + str(self.index)} ({node.op_type})" if node is not None else "the graph"
        raise OnnxImportError(f"{self.where}: {label}: {message}")


class Dims:
    """A Shape output with unknown sizes: each entry an int or (variable, axis), whose size is known only
    at run time; ``scalar`` for one entry taken by a scalar Gather. graphview.onnx.load_dims handles it."""

    def __init__(self, entries, scalar=False):
        self.entries, self.scalar = list(entries), scalar


def view(cx, x, key, name=None):
    """x[key] (ints, slices, Ellipsis) as a create_view."""
    descriptors, _ = from_numpy_key(key, len(x.shape))
    return cx.g.shape.create_view(x, *descriptors, name=name)


def known(*values):
    return all(v is None or not isinstance(v, (Variable, Dims)) for v in values)


def axis_of(cx, axis, rank):
    if not -rank <= axis < max(rank, 1):
        cx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def axes_input(cx, ins, attrs, first_opset):
    """A reduction's or (un)squeeze's axes: the attribute before ``first_opset``, the input from it."""
    if cx.opset < first_opset:
        return None if "axes" not in attrs else [int(a) for a in attrs["axes"]]
    if len(ins) < 2 or ins[1] is None:
        return None
    return [int(a) for a in cx.static(ins[1], "axes").reshape(-1)]


# --- element-wise -----------------------------------------------------------------------------------

def unary(namespace, op):
    def build(cx, node, ins, attrs):
        x, name = cx.var(ins[0]), cx.name()
        direct = x.dtype.kind not in "iub" or op in ("neg", "abs", "sign")    # graphview keeps the dtype
        y = getattr(getattr(cx.g, namespace), op)(x, name=name if direct else None)
        if not direct:              # ONNX keeps the input's type (Relu on integers): cast back
            y = cx.g.math.cast(y, x.dtype.name, name=name)
        return [y]
    return build


NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal, "Less": np.less,
                "Greater": np.greater, "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


def binary(op):
    def build(cx, node, ins, attrs):
        a, b = ins
        if known(a, b) and node.op_type in NUMPY_BINARY:
            return [np.asarray(NUMPY_BINARY[node.op_type](a, b))]
        if known(a, b) and node.op_type == "Div" and a.dtype.kind in "iu":
            return [np.fix(np.true_divide(a, b)).astype(a.dtype)]
        if node.op_type == "Pow" and not isinstance(b, Variable):
            b = np.asarray(b, dtype=a.dtype)
        a = cx.var(a)
        if node.op_type in ("Div", "Pow") and a.dtype.kind in "iu":
            # ONNX keeps integers: Div truncates toward 0, Pow stays integer (graphview's compute in float64;
            # exact while the values stay below 2**53)
            return [cx.g.math.cast(getattr(cx.g.math, op)(a, cx.var(b)), a.dtype.name, name=cx.name())]
        if node.op_type == "Pow" and cx.var(b).dtype != a.dtype:   # ONNX's Pow has the base's type
            return [cx.g.math.cast(cx.g.math.pow(a, cx.var(b)), a.dtype.name, name=cx.name())]
        return [getattr(cx.g.math, op)(a, cx.var(b), name=cx.name())]
    return build


def variadic(op, numpy_op):
    def build(cx, node, ins, attrs):
        if known(*ins):
            total = numpy_op.reduce(np.broadcast_arrays(*ins)) if len(ins) > 1 else ins[0]
            return [total / len(ins) if node.op_type == "Mean" else total]
        result = cx.var(ins[0])
        for i, x in enumerate(ins[1:], start=2):
            last = i == len(ins) and node.op_type != "Mean"
            result = getattr(cx.g.math, op)(result, cx.var(x), name=cx.name() if last else None)
        if node.op_type == "Mean":
            result = cx.g.math.div(result, np.asarray(len(ins), dtype=result.dtype), name=cx.name())
        return [result]
    return build


def activation(op, **defaults):
    def build(cx, node, ins, attrs):
        options = {key: float(attrs.get(key, value)) for key, value in defaults.items()}
        return [getattr(cx.g.nn, op)(cx.var(ins[0]), *options.values(), name=cx.name())]
    return build


SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875


def selu(cx, node, ins, attrs):
    alpha, gamma = float(attrs.get("alpha", SELU_ALPHA)), float(attrs.get("gamma", SELU_GAMMA))
    x = cx.var(ins[0])
    if np.isclose(alpha, SELU_ALPHA, rtol=1e-6) and np.isclose(gamma, SELU_GAMMA, rtol=1e-6):
        return [cx.g.nn.selu(x, name=cx.name())]
    return [cx.g.math.mul(cx.g.nn.elu(x, alpha), np.asarray(gamma, x.dtype), name=cx.name())]


def gelu(cx, node, ins, attrs):
    if attrs.get("approximate", b"none") not in (b"none", "none"):
        cx.fail(f"approximate={attrs['approximate']!r} is not supported (graphview's gelu is the exact one)")
    return [cx.g.nn.gelu(cx.var(ins[0]), name=cx.name())]


def clip(cx, node, ins, attrs):
    x = cx.var(ins[0])
    if cx.opset < 11:
        low, high = attrs.get("min"), attrs.get("max")
    else:
        low, high = (ins[1] if len(ins) > 1 else None), (ins[2] if len(ins) > 2 else None)
    bounds = [(bound, op) for bound, op in ((low, "maximum"), (high, "minimum")) if bound is not None]
    if not bounds:
        return identity(cx, node, [x], attrs)
    for i, (bound, op) in enumerate(bounds):
        bound = bound if isinstance(bound, Variable) else np.asarray(bound, dtype=x.dtype)
        x = getattr(cx.g.math, op)(x, cx.var(bound), name=cx.name() if i == len(bounds) - 1 else None)
    return [x]


def where(cx, node, ins, attrs):
    if known(*ins):                      # shape arithmetic (PyTorch's Expand shapes): folded
        return [np.where(*(np.asarray(v) for v in ins))]
    return [cx.g.math.where(cx.var(ins[0]), cx.var(ins[1]), cx.var(ins[2]), name=cx.name())]


def dtype_of(cx, code):
    import onnx  # an optional dependency (the onnx extra)

    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code))
    if dtype.name not in ("float32", "float64", "int64", "int32", "bool"):
        cx.fail(f"casting to {dtype} is not supported (graphview has bool, int32, int64, float32, float64)")
    return dtype


def cast(cx, node, ins, attrs):
    dtype = dtype_of(cx, attrs["to"])
    if known(ins[0]):
        return [np.asarray(ins[0]).astype(dtype)]
    return [cx.g.math.cast(ins[0], dtype.name, name=cx.name())]


def identity(cx, node, ins, attrs):
    """The input itself, or a view of it named by the output when that is a graph output. In a PyTorch
    export, an Identity of a float initializer is another parameter that had an equal value (the exporter
    stores equal initializers once): it gets its own VARIABLE, a copy (``trainable=False`` for batch
    norm's running statistics), so fine-tuning does not tie the two."""
    x = ins[0]
    if node.output[0] in cx.graph_outputs and isinstance(x, Variable):
        return [view(cx, x, (Ellipsis,), cx.name())]
    if cx.untie and node.op_type == "Identity" and isinstance(x, Variable) and x.kind is Kind.VARIABLE:
        trainable = cx.g.is_trainable(x.name) and node.output[0] not in cx.state
        return [cx.g.var(cx.name(), cx.g.value(x.name), trainable=trainable)]
    return [x]


def dropout(cx, node, ins, attrs):
    training = ins[2] if len(ins) > 2 else None
    if training is not None and (isinstance(training, Variable) or bool(np.asarray(training))):
        cx.fail("training_mode must be a constant False: only inference (the identity) is imported")
    return identity(cx, node, ins, attrs)


# --- linear algebra ----------------------------------------------------------------------------------

def matmul(cx, node, ins, attrs):
    return [cx.g.math.matmul(cx.var(ins[0]), cx.var(ins[1]), name=cx.name())]


def gemm(cx, node, ins, attrs):
    a, b = cx.var(ins[0]), cx.var(ins[1])
    c = ins[2] if len(ins) > 2 else None
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = cx.g.linalg.transpose(a)
    if attrs.get("transB", 0):
        b = cx.g.linalg.transpose(b)
    last = c is None or beta == 0
    y = cx.g.math.matmul(a, b, name=cx.name() if last and alpha == 1 else None)
    if alpha != 1:
        y = cx.g.math.mul(y, np.asarray(alpha, y.dtype), name=cx.name() if last else None)
    if last:
        return [y]
    c = cx.var(c)
    if beta != 1:
        c = cx.g.math.mul(c, np.asarray(beta, y.dtype))
    return [cx.g.math.add(y, c, name=cx.name())]


# --- shapes -------------------------------------------------------------------------------------------

def reshape_to(cx, x, target, name):
    """x reshaped to ``target``, whose None dims (unknown sizes) become the one -1 graphview's reshape allows;
    with more unknowns, only keeping x's leading dims and merging the rest (merge_axes) is supported."""
    target = list(target)
    if target.count(None) + target.count(-1) <= 1:
        return cx.g.shape.reshape(x, tuple(-1 if d is None else int(d) for d in target), name=name)
    keep = len(target) - 1
    source = tuple(x.shape)
    if tuple(target[:keep]) == source[:keep] and len(source) > keep:
        rest = source[keep:]
        if target[-1] in (-1, None) or None not in rest and target[-1] == int(np.prod(rest, dtype=np.int64)):
            return merge_axes(x, start=keep, stop=len(source), name=name) if len(rest) > 1 else \
                view(cx, x, (Ellipsis,), name)
    cx.fail(f"the target shape {tuple(target)} has more than one unknown dim (input shape {x.shape}); only "
            f"keeping the leading dims and merging the rest is supported")


def reshape(cx, node, ins, attrs):
    x, shape = ins[0], cx.static(ins[1], "the shape").astype(np.int64)
    source = np.shape(x) if known(x) else x.shape
    if not attrs.get("allowzero", 0):
        shape = [source[i] if d == 0 else int(d) for i, d in enumerate(shape)]
    if known(x):
        return [np.reshape(x, tuple(shape))]
    return [reshape_to(cx, x, shape, cx.name())]


def flatten(cx, node, ins, attrs):
    x = ins[0]
    shape = np.shape(x) if known(x) else x.shape
    rank = len(shape)
    axis = int(attrs.get("axis", 1))
    if not -rank <= axis <= rank:
        cx.fail(f"axis {axis} is out of range for rank {rank} (from {-rank} to {rank})")
    axis = axis + rank if axis < 0 else axis
    sides = [shape[:axis], shape[axis:]]
    target = [None if None in side else int(np.prod(side, dtype=np.int64)) for side in sides]
    if known(x):
        return [np.reshape(x, target)]
    if target.count(None) <= 1:
        return [reshape_to(cx, x, target, cx.name())]
    if len(shape) - axis > 1:                    # both sides unknown: merge each with merge_axes
        x = merge_axes(x, start=axis, stop=len(shape))
    return [merge_axes(x, start=0, stop=axis, name=cx.name()) if axis > 1 else view(cx, x, (Ellipsis,), cx.name())]


def transpose(cx, node, ins, attrs):
    x = ins[0]
    rank = np.ndim(x) if known(x) else len(x.shape)
    perm = tuple(int(p) for p in attrs.get("perm", range(rank - 1, -1, -1)))
    if known(x):
        return [np.transpose(x, perm)]
    return [cx.g.linalg.transpose(x, perm, name=cx.name())]


def squeeze(cx, node, ins, attrs):
    x, axes = ins[0], axes_input(cx, ins, attrs, 13)
    shape = np.shape(x) if known(x) else x.shape
    if axes is None:
        if None in shape:
            cx.fail(f"without axes every size-1 dim is squeezed, and the input shape {shape} has unknown dims")
        axes = [i for i, d in enumerate(shape) if d == 1]
    axes = tuple(sorted(axis_of(cx, a, len(shape)) for a in axes))
    if known(x):
        return [np.squeeze(x, axes)]
    return [cx.g.shape.squeeze(x, axis=axes, name=cx.name())]


def unsqueeze(cx, node, ins, attrs):
    x, axes = ins[0], axes_input(cx, ins, attrs, 13)
    rank = (np.ndim(x) if known(x) else len(x.shape)) + len(axes)
    axes = sorted(axis_of(cx, a, rank) for a in axes)
    if known(x):
        return [np.expand_dims(x, tuple(axes))]
    for i, axis in enumerate(axes):
        x = cx.g.shape.expand_dims(x, axis, name=cx.name() if i == len(axes) - 1 else None)
    return [x]


def concat(cx, node, ins, attrs):
    parts = [x for x in ins if x is not None]
    rank = np.ndim(parts[0]) if known(parts[0]) else len(parts[0].shape)
    axis = axis_of(cx, int(attrs["axis"]), rank)
    if known(*parts):
        return [np.concatenate([np.asarray(p) for p in parts], axis=axis)]
    return [cx.g.shape.concat([cx.var(p) for p in parts], axis=axis, name=cx.name())]


def gather(cx, node, ins, attrs):
    x, indices = ins
    shape = np.shape(x) if known(x) else x.shape
    axis = axis_of(cx, int(attrs.get("axis", 0)), len(shape))
    if known(indices):
        indices = np.asarray(indices).astype(np.int64)
        if indices.ndim == 0 and not known(x) and shape[axis] is None:   # x[:, -1]: a view counts from the end
            return [view(cx, x, (slice(None),) * axis + (int(indices),), cx.name())]
        if (indices < 0).any():
            if shape[axis] is None:
                cx.fail(f"negative indices on axis {axis} of unknown size")
            indices = np.where(indices < 0, indices + shape[axis], indices)
        if known(x):
            return [np.take(x, indices, axis=axis)]
        if indices.ndim == 0:
            return [view(cx, x, (slice(None),) * axis + (int(indices),), cx.name())]
    return [cx.g.shape.gather(cx.var(x), cx.var(indices), axis=axis, name=cx.name())]


def slice_(cx, node, ins, attrs):
    x = ins[0]
    shape = np.shape(x) if known(x) else x.shape
    if cx.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes"), None
    else:
        starts, ends = cx.static(ins[1], "starts"), cx.static(ins[2], "ends")
        axes = cx.static(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else None
        steps = cx.static(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else None
    starts, ends = [int(s) for s in np.ravel(starts)], [int(e) for e in np.ravel(ends)]
    axes = range(len(starts)) if axes is None else [axis_of(cx, int(a), len(shape)) for a in np.ravel(axes)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.ravel(steps)]
    index = [slice(None)] * len(shape)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            cx.fail("a step of 0")
        limit = 2 ** 62
        index[axis] = slice(max(min(start, limit), -limit), max(min(end, limit), -limit), step)
    if known(x):
        return [np.asarray(x)[tuple(index)]]
    return [view(cx, x, tuple(index), cx.name())]


# --- reductions and softmax -----------------------------------------------------------------------------

def reduction(op, first_opset):
    def build(cx, node, ins, attrs):
        x = cx.var(ins[0])
        axes = axes_input(cx, ins, attrs, first_opset)
        keepdims = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return identity(cx, node, [x], attrs)
            axes = range(len(x.shape))
        axes = tuple(sorted(axis_of(cx, a, len(x.shape)) for a in axes))
        return [getattr(cx.g.math, op)(x, axis=axes, keepdims=keepdims, name=cx.name())]
    return build


def softmax(op):
    def build(cx, node, ins, attrs):
        x = cx.var(ins[0])
        rank = len(x.shape)
        axis = axis_of(cx, int(attrs.get("axis", -1 if cx.opset >= 13 else 1)), rank)
        if cx.opset >= 13 or axis == rank - 1:
            return [getattr(cx.g.nn, op)(x, axis=axis, name=cx.name())]
        sides = [x.shape[:axis], x.shape[axis:]]        # before opset 13: over the flattened trailing axes
        flat = reshape_to(cx, x, [None if None in s else int(np.prod(s, dtype=np.int64)) for s in sides], None)
        return [reshape_to(cx, getattr(cx.g.nn, op)(flat, axis=-1), x.shape, cx.name())]
    return build


BUILDERS = {
    "Neg": unary("math", "neg"), "Abs": unary("math", "abs"), "Exp": unary("math", "exp"),
    "Log": unary("math", "log"), "Sqrt": unary("math", "sqrt"), "Tanh": unary("math", "tanh"),
    "Reciprocal": unary("math", "reciprocal"), "Sin": unary("math", "sin"), "Cos": unary("math", "cos"),
    "Sign": unary("math", "sign"), "Sigmoid": unary("nn", "sigmoid"), "Relu": unary("nn", "relu"),
    "Softplus": unary("nn", "softplus"),
    "Add": binary("add"), "Sub": binary("sub"), "Mul": binary("mul"), "Div": binary("div"), "Pow": binary("pow"),
    "Equal": binary("eq"), "Less": binary("lt"), "Greater": binary("gt"), "LessOrEqual": binary("le"),
    "GreaterOrEqual": binary("ge"),
    "Max": variadic("maximum", np.maximum), "Min": variadic("minimum", np.minimum),
    "Sum": variadic("add", np.add), "Mean": variadic("add", np.add),
    "LeakyRelu": activation("leaky_relu", alpha=0.01), "Elu": activation("elu", alpha=1.0), "Selu": selu,
    "Gelu": gelu, "Clip": clip, "Where": where, "Cast": cast, "Identity": identity, "Dropout": dropout,
    "MatMul": matmul, "Gemm": gemm,
    "Reshape": reshape, "Flatten": flatten, "Transpose": transpose, "Squeeze": squeeze, "Unsqueeze": unsqueeze,
    "Concat": concat, "Gather": gather, "Slice": slice_,
    "ReduceSum": reduction("sum", 13), "ReduceMean": reduction("mean", 18), "ReduceMax": reduction("max", 18),
    "ReduceMin": reduction("min", 18), "ReduceProd": reduction("prod", 18),
    "ReduceLogSumExp": reduction("logsumexp", 18),
    "Softmax": softmax("softmax"), "LogSoftmax": softmax("log_softmax"),
}
