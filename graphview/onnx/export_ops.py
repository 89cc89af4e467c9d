"""The export table: graphview op name -> builder of its ONNX nodes (graphview/onnx/export.py runs it).

A builder is ``builder(ctx, node, inputs, attrs) -> tensor name``: ``inputs`` are the ONNX tensor names
of the node's inputs, ``attrs`` its attributes; it adds nodes and constant initializers through ``ctx``
(export.py's Context) and returns the name of the tensor holding the node's value. A node it cannot
express raises :class:`Unsupported` with the reason, which the exporter collects for its one error.
Views become Slice/Squeeze/Unsqueeze/Reshape/Transpose, in-place writes ScatterND into a flat copy of
the base, masked reductions their unmasked form over values masked by a mask built from the lengths,
lstm and gru ONNX's LSTM and GRU with their gates reordered.
"""
import math

import numpy as np

from graphview import indexing
from graphview.ops.activations import SELU_ALPHA, SELU_SCALE

INT64_MAX, INT64_MIN = (1 << 63) - 1, -(1 << 63)


class Unsupported(Exception):
    """A node this table cannot express in ONNX (the message says why)."""


BUILDERS = {}


def builds(*ops):
    def register(function):
        for op in ops:
            BUILDERS[op] = function
        return function
    return register


def _axes(axis, rank):
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return sorted(a % rank for a in axes)


# --- element-wise ---------------------------------------------------------------------------------

UNARY = {"abs": "Abs", "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "tanh": "Tanh", "sin": "Sin",
         "cos": "Cos", "sigmoid": "Sigmoid", "relu": "Relu", "sign": "Sign", "reciprocal": "Reciprocal"}
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "maximum": "Max",
          "minimum": "Min", "matmul": "MatMul"}
COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
           "ne": "Equal"}


def _as_node_dtype(ctx, node, inputs):
    return [ctx.cast(tensor, ctx.dtype_of(name), node.dtype) for tensor, name in zip(inputs, node.inputs)]


@builds(*UNARY)
def _unary(ctx, node, inputs, attrs):
    return ctx.emit(UNARY[node.op], _as_node_dtype(ctx, node, inputs))


@builds(*BINARY)
def _binary(ctx, node, inputs, attrs):
    return ctx.emit(BINARY[node.op], _as_node_dtype(ctx, node, inputs))


@builds(*COMPARE)
def _compare(ctx, node, inputs, attrs):
    common = np.result_type(*(ctx.dtype_of(name) for name in node.inputs))
    a, b = (ctx.cast(tensor, ctx.dtype_of(name), common) for tensor, name in zip(inputs, node.inputs))
    result = ctx.emit(COMPARE[node.op], [a, b])
    return ctx.emit("Not", [result]) if node.op == "ne" else result


@builds("square")
def _square(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return ctx.emit("Mul", [x, x])


@builds("where")
def _where(ctx, node, inputs, attrs):
    condition = ctx.cast(inputs[0], ctx.dtype_of(node.inputs[0]), np.bool_)
    x, y = (ctx.cast(t, ctx.dtype_of(n), node.dtype) for t, n in zip(inputs[1:], node.inputs[1:]))
    return ctx.emit("Where", [condition, x, y])


@builds("cast")
def _cast(ctx, node, inputs, attrs):
    return ctx.emit("Cast", inputs, to=ctx.onnx.helper.np_dtype_to_tensor_dtype(node.dtype))


# ONNX's float attributes (alpha, gamma) are float32, and onnxruntime's CPU build has no float64 Elu, Selu or
# Softplus: in float64 these are spelled out with float64 constants.

def _negative_part(ctx, node, x, negative):
    return ctx.emit("Where", [ctx.emit("Greater", [x, ctx.const(0, node.dtype)]), x, negative])


def _expm1_times(ctx, node, x, alpha):
    expm1 = ctx.emit("Sub", [ctx.emit("Exp", [x]), ctx.const(1, node.dtype)])
    return ctx.emit("Mul", [ctx.const(alpha, node.dtype), expm1])


def softplus_of(ctx, node, x):
    """softplus(x): ONNX Softplus, in float64 as relu(x) + log(1 + exp(-|x|))."""
    if node.dtype != np.float64:
        return ctx.emit("Softplus", [x])
    tail = ctx.emit("Log", [ctx.emit("Add", [ctx.const(1, node.dtype), ctx.emit("Exp", [ctx.emit("Neg", [
        ctx.emit("Abs", [x])])])])])
    return ctx.emit("Add", [ctx.emit("Relu", [x]), tail])


@builds("leaky_relu")
def _leaky_relu(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    alpha = float(attrs.get("alpha", 0.01))
    if node.dtype != np.float64:
        return ctx.emit("LeakyRelu", [x], alpha=alpha)
    return _negative_part(ctx, node, x, ctx.emit("Mul", [x, ctx.const(alpha, node.dtype)]))


@builds("elu")
def _elu(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    alpha = float(attrs.get("alpha", 1.0))
    if node.dtype != np.float64:
        return ctx.emit("Elu", [x], alpha=alpha)
    return _negative_part(ctx, node, x, _expm1_times(ctx, node, x, alpha))


@builds("selu")
def _selu(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    if node.dtype != np.float64:
        return ctx.emit("Selu", [x], alpha=SELU_ALPHA, gamma=SELU_SCALE)
    elu = _negative_part(ctx, node, x, _expm1_times(ctx, node, x, SELU_ALPHA))
    return ctx.emit("Mul", [elu, ctx.const(SELU_SCALE, node.dtype)])


@builds("softplus")
def _softplus(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return softplus_of(ctx, node, x)


@builds("hard_tanh")
def _hard_tanh(ctx, node, inputs, attrs):
    low, high = (ctx.const(attrs.get(key, default), node.dtype)
                 for key, default in (("min_val", -1.0), ("max_val", 1.0)))
    return ctx.emit("Clip", _as_node_dtype(ctx, node, inputs) + [low, high])


@builds("silu")
def _silu(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return ctx.emit("Mul", [x, ctx.emit("Sigmoid", [x])])


@builds("log_sigmoid")
def _log_sigmoid(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return ctx.emit("Neg", [softplus_of(ctx, node, ctx.emit("Neg", [x]))])


@builds("gelu")
def _gelu(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    if ctx.opset >= 20:
        return ctx.emit("Gelu", [x])
    scaled = ctx.emit("Mul", [x, ctx.const(1 / math.sqrt(2), node.dtype)])
    one_plus = ctx.emit("Add", [ctx.emit("Erf", [scaled]), ctx.const(1.0, node.dtype)])
    return ctx.emit("Mul", [ctx.emit("Mul", [x, ctx.const(0.5, node.dtype)]), one_plus])


@builds("dropout")
def _dropout(ctx, node, inputs, attrs):
    return ctx.emit("Identity", inputs)     # inference: dropout is the identity


# --- reductions and softmax -------------------------------------------------------------------------

REDUCE = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin", "prod": "ReduceProd",
          "logsumexp": "ReduceLogSumExp"}


def reduce(ctx, op_type, x, axis, rank, keepdims):
    """``op_type`` over ``axis`` (None: all axes); axes an input for ReduceSum and from opset 18 for all."""
    axes = None if axis is None else _axes(axis, rank)
    keep = int(bool(keepdims))
    if axes is None:
        return ctx.emit(op_type, [x], keepdims=keep)
    if op_type == "ReduceSum" or ctx.opset >= 18:
        return ctx.emit(op_type, [x, ctx.ints(axes)], keepdims=keep)
    return ctx.emit(op_type, [x], axes=axes, keepdims=keep)


@builds(*REDUCE)
def _reduce(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return reduce(ctx, REDUCE[node.op], x, attrs.get("axis"), len(ctx.shape_of(node.inputs[0])), attrs.get("keepdims"))


@builds("argmax", "argmin")
def _arg(ctx, node, inputs, attrs):
    op_type, rank = "ArgMax" if node.op == "argmax" else "ArgMin", len(ctx.shape_of(node.inputs[0]))
    if attrs.get("axis") is None:
        flat = ctx.emit("Reshape", [inputs[0], ctx.ints([-1])])
        found = ctx.emit(op_type, [flat], axis=0, keepdims=0, select_last_index=0)
        return ctx.emit("Reshape", [found, ctx.ints([1] * rank)]) if attrs.get("keepdims") else found
    return ctx.emit(op_type, inputs, axis=_axes(attrs["axis"], rank)[0], keepdims=int(bool(attrs.get("keepdims"))),
                    select_last_index=0)


@builds("softmax", "log_softmax")
def _softmax(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    rank = len(ctx.shape_of(node.inputs[0]))
    axes = _axes(attrs.get("axis", -1), rank)
    if len(axes) == 1:
        return ctx.emit("Softmax" if node.op == "softmax" else "LogSoftmax", [x], axis=axes[0])
    shifted = ctx.emit("Sub", [x, reduce(ctx, "ReduceMax", x, axes, rank, True)])
    total = reduce(ctx, "ReduceSum", ctx.emit("Exp", [shifted]), axes, rank, True)
    if node.op == "softmax":
        return ctx.emit("Div", [ctx.emit("Exp", [shifted]), total])
    return ctx.emit("Sub", [shifted, ctx.emit("Log", [total])])


# --- masked reductions: the unmasked form over masked values ---------------------------------------

def sequence_mask(ctx, lengths, lengths_dtype, like, rank, batch_axis, time_axis):
    """A bool tensor, True where t < lengths[b]: rank ``rank``, 1 on all axes but batch and time."""
    batch, time = batch_axis % rank, time_axis % rank
    steps = ctx.emit("Gather", [ctx.emit("Shape", [like]), ctx.ints(time)], axis=0)
    positions = ctx.emit("Range", [ctx.const(0, np.int64), steps, ctx.const(1, np.int64)])
    lengths = ctx.cast(lengths, lengths_dtype, np.int64)
    valid = ctx.emit("Less", [ctx.emit("Unsqueeze", [positions, ctx.ints(0)]),
                              ctx.emit("Unsqueeze", [lengths, ctx.ints(1)])])     # (B, T)
    if time < batch:
        valid = ctx.emit("Transpose", [valid], perm=[1, 0])
    others = [axis for axis in range(rank) if axis not in (batch, time)]
    return ctx.emit("Unsqueeze", [valid, ctx.ints(others)]) if others else valid


MASKED = {"masked_sum": ("ReduceSum", 0.0), "masked_mean": ("ReduceSum", 0.0), "masked_max": ("ReduceMax", -np.inf),
          "masked_min": ("ReduceMin", np.inf)}


@builds(*MASKED)
def _masked_reduce(ctx, node, inputs, attrs):
    x_name = node.inputs[0]
    if not np.issubdtype(ctx.dtype_of(x_name), np.floating):
        raise Unsupported("exported for float inputs only")
    rank = len(ctx.shape_of(x_name))
    x = ctx.cast(inputs[0], ctx.dtype_of(x_name), node.dtype)
    mask = sequence_mask(ctx, inputs[1], ctx.dtype_of(node.inputs[1]), x, rank, attrs.get("batch_axis", 0),
                         attrs.get("time_axis", 1))
    op_type, fill = MASKED[node.op]
    kept = ctx.emit("Where", [mask, x, ctx.const(fill, node.dtype)])
    result = reduce(ctx, op_type, kept, attrs.get("axis"), rank, attrs.get("keepdims"))
    if node.op != "masked_mean":
        return result
    ones = ctx.emit("Where", [mask, ctx.const(1.0, node.dtype), ctx.const(0.0, node.dtype)])
    count = reduce(ctx, "ReduceSum", ctx.emit("Expand", [ones, ctx.emit("Shape", [x])]), attrs.get("axis"), rank,
                   attrs.get("keepdims"))
    return ctx.emit("Div", [result, count])


@builds("sequence_mask")
def _sequence_mask(ctx, node, inputs, attrs):
    rank = len(ctx.shape_of(node.inputs[1]))
    return sequence_mask(ctx, inputs[0], ctx.dtype_of(node.inputs[0]), inputs[1], rank, attrs.get("batch_axis", 0),
                         attrs.get("time_axis", 1))


# --- shapes and views ---------------------------------------------------------------------------------

def _interval_end(index):
    if not index.inclusive:
        return index.end
    end = index.end + (1 if index.stride > 0 else -1)
    if index.stride > 0 and end == 0:
        return INT64_MAX
    if index.stride < 0 and end == -1:
        return INT64_MIN
    return end


def view(ctx, x, rank, entries):
    """The view the static descriptor ``entries`` select from the tensor ``x`` of rank ``rank``: one Slice
    for the points and intervals, then Squeeze (points) and Unsqueeze (new axes)."""
    if any(entry[0] == "dynamic" for entry in entries):
        raise Unsupported("a view with descriptors computed at run time")
    starts, ends, axes, steps, points, new_axes = [], [], [], [], [], []
    axis = out = 0
    for position, entry in enumerate(entries):
        index = indexing.decode(np.array(entry, dtype=np.int64), position)
        if index.kind == indexing.NEW_AXIS:
            new_axes.append(out)
            out += 1
            continue
        if index.kind == indexing.POINT:
            starts.append(index.start)
            ends.append(INT64_MAX if index.start == -1 else index.start + 1)
            steps.append(1)
            axes.append(axis)
            points.append(axis)
        elif index.kind == indexing.INTERVAL:
            starts.append(index.start)
            ends.append(_interval_end(index))
            steps.append(index.stride)
            axes.append(axis)
            out += 1
        else:
            out += 1
        axis += 1
    if axis > rank:
        raise Unsupported(f"{axis} descriptors for a rank-{rank} input")
    result = x
    if axes:
        result = ctx.emit("Slice", [x, ctx.ints(starts), ctx.ints(ends), ctx.ints(axes), ctx.ints(steps)])
    if points:
        result = ctx.emit("Squeeze", [result, ctx.ints(points)])
    if new_axes:
        result = ctx.emit("Unsqueeze", [result, ctx.ints(new_axes)])
    return result if result != x else ctx.emit("Identity", [x])


@builds("create_view")
def _create_view(ctx, node, inputs, attrs):
    return view(ctx, inputs[0], len(ctx.shape_of(node.inputs[0])), attrs["descriptors"])


@builds("reshape")
def _reshape(ctx, node, inputs, attrs):
    shape = list(attrs["shape"])
    return ctx.emit("Reshape", [inputs[0], ctx.ints(shape)], allowzero=int(0 in shape))


@builds("permute", "transpose")
def _permute(ctx, node, inputs, attrs):
    perm = attrs.get("perm")
    rank = len(ctx.shape_of(node.inputs[0]))
    perm = list(range(rank))[::-1] if perm is None else [p % rank for p in perm]
    return ctx.emit("Transpose", inputs, perm=perm)


@builds("squeeze")
def _squeeze(ctx, node, inputs, attrs):
    shape = ctx.shape_of(node.inputs[0])
    axis = attrs.get("axis")
    axes = [a for a, dim in enumerate(shape) if dim == 1] if axis is None else _axes(axis, len(shape))
    return ctx.emit("Squeeze", [inputs[0], ctx.ints(axes)]) if axes else ctx.emit("Identity", inputs)


@builds("expand_dims")
def _expand_dims(ctx, node, inputs, attrs):
    return ctx.emit("Unsqueeze", [inputs[0], ctx.ints(_axes(attrs["axis"], len(node.shape)))])


@builds("broadcast_to")
def _broadcast_to(ctx, node, inputs, attrs):
    return ctx.emit("Expand", [inputs[0], ctx.ints(attrs["shape"])])


@builds("concat")
def _concat(ctx, node, inputs, attrs):
    return ctx.emit("Concat", _as_node_dtype(ctx, node, inputs), axis=_axes(attrs.get("axis", 0), len(node.shape))[0])


@builds("stack")
def _stack(ctx, node, inputs, attrs):
    axis = _axes(attrs.get("axis", 0), len(node.shape))[0]
    parts = [ctx.emit("Unsqueeze", [x, ctx.ints(axis)]) for x in _as_node_dtype(ctx, node, inputs)]
    return ctx.emit("Concat", parts, axis=axis)


@builds("gather")
def _gather(ctx, node, inputs, attrs):
    return ctx.emit("Gather", inputs, axis=_axes(attrs.get("axis", 0), len(ctx.shape_of(node.inputs[0])))[0])


@builds("embedding")
def _embedding(ctx, node, inputs, attrs):
    ids, table = inputs
    return ctx.emit("Gather", [table, ids], axis=0)


PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "edge", 0: "constant", 1: "reflect", 2: "edge"}


@builds("pad")
def _pad(ctx, node, inputs, attrs):
    widths = np.asarray(attrs["pad_width"], dtype=np.int64).reshape(-1, 2)
    rank = len(node.shape)
    widths = np.broadcast_to(widths, (rank, 2))
    mode = PAD_MODES[attrs.get("mode", "constant")]
    extra = [ctx.const(attrs.get("value", 0.0) or 0.0, node.dtype)] if mode == "constant" else []
    return ctx.emit("Pad", [inputs[0], ctx.ints(list(widths[:, 0]) + list(widths[:, 1]))] + extra, mode=mode)


# --- in-place writes through views: ScatterND into a flat copy of the base ---------------------------

INPLACE = {"assign_": None, "add_": "Add", "sub_": "Sub", "mul_": "Mul", "div_": "Div"}


@builds(*INPLACE)
def _inplace(ctx, node, inputs, attrs):
    base, value = inputs[:2]
    shape = ctx.emit("Shape", [base])
    positions = ctx.emit("Range", [ctx.const(0, np.int64), ctx.emit("Size", [base]), ctx.const(1, np.int64)])
    index = ctx.emit("Reshape", [positions, shape])
    rank = len(node.shape)
    for entries in attrs["chain"]:
        index = view(ctx, index, rank, entries)
        rank = rank - sum(entry[0] == indexing.POINT for entry in entries) + sum(
            entry[0] == indexing.NEW_AXIS for entry in entries)
    flat = ctx.emit("Reshape", [base, ctx.ints([-1])])
    value = ctx.emit("Expand", [ctx.cast(value, ctx.dtype_of(node.inputs[1]), node.dtype), ctx.emit("Shape", [index])])
    if INPLACE[node.op]:
        value = ctx.emit(INPLACE[node.op], [ctx.emit("Gather", [flat, index], axis=0), value])
    written = ctx.emit("ScatterND", [flat, ctx.emit("Unsqueeze", [index, ctx.ints(-1)]), value])
    return ctx.emit("Reshape", [written, shape])


# --- shapes computed at run time ------------------------------------------------------------------------

def _dims(ctx, x, start, stop):
    return ctx.emit("Slice", [ctx.emit("Shape", [x]), ctx.ints(start), ctx.ints(stop)])


@builds("merge_axes", "merge_axes_copy")
def _merge_axes(ctx, node, inputs, attrs):
    x, start, stop = inputs[0], attrs["start"], attrs["stop"]
    merged = ctx.emit("ReduceProd", [_dims(ctx, x, start, stop)], keepdims=1)
    shape = ctx.emit("Concat", [_dims(ctx, x, 0, start), merged, _dims(ctx, x, stop, INT64_MAX)], axis=0)
    return ctx.emit("Reshape", [x, shape])


@builds("split_axis")
def _split_axis(ctx, node, inputs, attrs):
    x = inputs[0]
    axis = _axes(attrs["axis"], len(ctx.shape_of(node.inputs[0])))[0]
    shape = ctx.emit("Concat", [_dims(ctx, x, 0, axis), ctx.ints(attrs["sizes"]), _dims(ctx, x, axis + 1, INT64_MAX)],
                     axis=0)
    return ctx.emit("Reshape", [x, shape])


@builds("reshape_like", "broadcast_like")
def _like(ctx, node, inputs, attrs):
    x, like = inputs
    return ctx.emit("Reshape" if node.op == "reshape_like" else "Expand", [x, ctx.emit("Shape", [like])])


@builds("numel")
def _numel(ctx, node, inputs, attrs):
    rank = len(ctx.shape_of(node.inputs[0]))
    axis = attrs.get("axis")
    sizes = ctx.emit("Shape", [inputs[0]])
    if axis is not None:
        sizes = ctx.emit("Gather", [sizes, ctx.ints(_axes(axis, rank))], axis=0)
    return ctx.cast(ctx.emit("ReduceProd", [sizes], keepdims=0), np.int64, node.dtype)


@builds("step")
def _step(ctx, node, inputs, attrs):
    (x,) = _as_node_dtype(ctx, node, inputs)
    return ctx.cast(ctx.emit("Greater", [x, ctx.const(0, node.dtype)]), np.bool_, node.dtype)


@builds("check_lengths")
def _check_lengths(ctx, node, inputs, attrs):
    return ctx.emit("Identity", inputs[:1])     # the run-time range check is lost (ONNX has no assertion)
