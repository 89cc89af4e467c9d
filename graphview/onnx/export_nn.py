"""The export table's network ops: convolutions, pooling, normalization, the recurrent ops and the loss.

Registered into graphview/onnx/export_ops.py's BUILDERS (same builder signature). Channels-last layouts
are transposed to ONNX's channels-first and back; lstm and gru become ONNX's LSTM and GRU with the gates
reordered (PyTorch i, f, g, o -> ONNX i, o, f, c; r, z, n -> z, r, h with linear_before_reset), x made
time-major, the lengths ``sequence_lens``; their packed result is rebuilt for the views that read it
(outputs and final states; the gates and the per-step cell states are not in ONNX's outputs).
"""
import numpy as np

from graphview.ops.recurrent import state_columns
from graphview.onnx.export_ops import Unsupported, builds, reduce, sequence_mask, softplus_of

CHANNELS_LAST = {"bwc": [0, 2, 1], "bhwc": [0, 3, 1, 2]}
BACK = {"bwc": [0, 2, 1], "bhwc": [0, 2, 3, 1]}


def _first(ctx, x, layout):
    return ctx.emit("Transpose", [x], perm=CHANNELS_LAST[layout]) if layout in CHANNELS_LAST else x


def _back(ctx, y, layout):
    return ctx.emit("Transpose", [y], perm=BACK[layout]) if layout in BACK else y


def _pads(padding):
    pairs = [tuple(pair) for pair in padding]
    return [pair[0] for pair in pairs] + [pair[1] for pair in pairs]


def _floats(ctx, node, inputs):
    return [ctx.cast(t, ctx.dtype_of(n), node.dtype) for t, n in zip(inputs, node.inputs)]


@builds("conv1d", "conv2d", "conv_transpose2d")
def _conv(ctx, node, inputs, attrs):
    spatial = 1 if node.op == "conv1d" else 2
    layout = attrs.get("layout", "bcw" if spatial == 1 else "bchw")
    inputs = _floats(ctx, node, inputs)
    x = _first(ctx, inputs[0], layout)
    extra = {"output_padding": list(attrs["output_padding"])} if node.op == "conv_transpose2d" else {}
    y = ctx.emit("ConvTranspose" if extra else "Conv", [x] + inputs[1:],
                 strides=list(attrs.get("stride", (1,) * spatial)),
                 pads=_pads(attrs.get("padding", ((0, 0),) * spatial)),
                 dilations=list(attrs.get("dilation", (1,) * spatial)), group=int(attrs.get("groups", 1)), **extra)
    return _back(ctx, y, layout)


@builds("max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d")
def _pool(ctx, node, inputs, attrs):
    spatial = 1 if node.op.endswith("1d") else 2
    layout = attrs.get("layout", "bcw" if spatial == 1 else "bchw")
    x = _first(ctx, inputs[0], layout)
    common = dict(kernel_shape=list(attrs["kernel_size"]), strides=list(attrs["stride"]), pads=_pads(attrs["padding"]))
    if node.op.startswith("max"):
        y = ctx.emit("MaxPool", [x], **common)
    else:
        y = ctx.emit("AveragePool", [x], count_include_pad=int(bool(attrs.get("count_include_pad", True))), **common)
    return _back(ctx, y, layout)


@builds("global_avg_pool")
def _global_avg_pool(ctx, node, inputs, attrs):
    layout = attrs.get("layout", "bchw")
    rank = len(ctx.shape_of(node.inputs[0]))
    axes = list(range(2, rank)) if layout in ("bcw", "bchw") else list(range(1, rank - 1))
    return reduce(ctx, "ReduceMean", inputs[0], axes, rank, False)


@builds("batch_norm")
def _batch_norm(ctx, node, inputs, attrs):
    if len(inputs) < 5:
        raise Unsupported("no running statistics: ONNX's BatchNormalization needs them in inference")
    rank = len(ctx.shape_of(node.inputs[0]))
    axis = attrs.get("axis", 1) % rank
    inputs = _floats(ctx, node, inputs)
    x = inputs[0]
    perm = None
    if axis != 1:
        perm = [0, axis] + [a for a in range(1, rank) if a != axis]
        x = ctx.emit("Transpose", [x], perm=perm)
    y = ctx.emit("BatchNormalization", [x] + inputs[1:5], epsilon=float(attrs.get("eps", 1e-5)))
    return ctx.emit("Transpose", [y], perm=list(np.argsort(perm))) if perm else y


@builds("layer_norm")
def _layer_norm(ctx, node, inputs, attrs):
    rank = len(ctx.shape_of(node.inputs[0]))
    axis = attrs.get("axis", -1)
    axes = sorted(a % rank for a in ((axis,) if isinstance(axis, int) else axis))
    if axes != list(range(axes[0], rank)):
        raise Unsupported(f"axes {tuple(axes)} are not the trailing axes LayerNormalization normalizes")
    inputs = _floats(ctx, node, inputs)
    return ctx.emit("LayerNormalization", inputs, axis=axes[0], epsilon=float(attrs.get("eps", 1e-5)))


@builds("softmax_cross_entropy")
def _softmax_cross_entropy(ctx, node, inputs, attrs):
    logits, labels = inputs
    if len(ctx.shape_of(node.inputs[0])) != 2:
        raise Unsupported("exported for (batch, classes) logits only")
    labels = ctx.cast(labels, ctx.dtype_of(node.inputs[1]), np.int64)
    return ctx.emit("SoftmaxCrossEntropyLoss", [logits, labels], reduction="mean")


# --- recurrent ---------------------------------------------------------------------------------------

# Rows of ONNX's gate blocks taken from PyTorch's: LSTM i, o, f, c from i, f, g, o; GRU z, r, h from r, z, n.
GATES = {"lstm": (0, 3, 1, 2), "gru": (1, 0, 2)}


def _check_views(ctx, node, hidden, final_widths, read=None):
    """Every reader of the packed result (``read``: of its view of the state columns, which the public results
    read it through) must be a view of its h rows, or of the final row's states."""
    for reader in ctx.graph.nodes():
        if (read or node.name) not in reader.inputs:
            continue
        entries = reader.attributes.get("descriptors") if reader.op == "create_view" else None
        if read is None and entries == state_columns(final_widths * hidden):
            if final_widths > 1 and reader.name in ctx.outputs:
                raise Unsupported(f"{reader.name} gives every step's cell state, which ONNX's LSTM does not give")
            _check_views(ctx, node, hidden, final_widths, reader.name)
            continue
        if not entries or any(entry[0] == "dynamic" for entry in entries) or len(entries) < 3:
            raise Unsupported(f"{reader.name} reads the packed result other than as a view of the outputs or "
                              "final states")
        rows, columns = entries[0], entries[2]
        final = rows[0] == 0 and rows[3] == -1
        limit = final_widths * hidden if final else hidden
        if columns[0] == 0:
            inside = 0 <= columns[3] < limit
        else:
            inside = columns[0] == 1 and columns[5] > 0 and columns[3] >= 0 and 0 <= columns[4] + columns[6] <= limit
        if not inside:
            raise Unsupported(f"{reader.name} reads gate values or per-step cell states, which ONNX's "
                              f"{node.op.upper()} does not give")


def _recurrent(ctx, node, inputs, attrs):
    states = 2 if node.op == "lstm" else 1
    x, rest = inputs[0], _floats(ctx, node, inputs[:1 + states + 4])[1:]
    initial, (w_ih, w_hh, b_ih, b_hh) = rest[:states], rest[states:]
    hidden = ctx.shape_of(node.inputs[1 + states + 1])[1]
    _check_views(ctx, node, hidden, states)
    x = ctx.cast(x, ctx.dtype_of(node.inputs[0]), node.dtype)
    if attrs.get("layout", "btf") == "btf":
        x = ctx.emit("Transpose", [x], perm=[1, 0, 2])
    rows = np.concatenate([np.arange(gate * hidden, (gate + 1) * hidden) for gate in GATES[node.op]])
    order = ctx.ints(rows)

    def reordered(tensor):
        return ctx.emit("Gather", [tensor, order], axis=0)
    w = ctx.emit("Unsqueeze", [reordered(w_ih), ctx.ints(0)])
    r = ctx.emit("Unsqueeze", [reordered(w_hh), ctx.ints(0)])
    b = ctx.emit("Unsqueeze", [ctx.emit("Concat", [reordered(b_ih), reordered(b_hh)], axis=0), ctx.ints(0)])
    lengths = ""
    if len(inputs) > 1 + states + 4:
        lengths = ctx.cast(inputs[-1], ctx.dtype_of(node.inputs[-1]), np.int32)
    initial = [ctx.emit("Unsqueeze", [state, ctx.ints(0)]) for state in initial]
    extra = {"linear_before_reset": 1} if node.op == "gru" else {}
    outputs = ctx.emit(node.op.upper(), [x, w, r, b, lengths] + initial, outputs=2 + (node.op == "lstm"),
                       hidden_size=int(hidden), **extra)
    finals = outputs[1:]
    if lengths:     # onnxruntime gives final states of 0 for a length of 0; graphview the initial states
        empty = ctx.emit("Unsqueeze", [ctx.emit("Equal", [lengths, ctx.const(0, np.int32)]), ctx.ints([0, 2])])
        finals = [ctx.emit("Where", [empty, state, final]) for state, final in zip(initial, finals)]
    steps = ctx.emit("Squeeze", [outputs[0], ctx.ints(1)])                    # (T, B, H)
    packed = ctx.emit("Concat", [steps, finals[0]], axis=0)                  # h rows: (T + 1, B, H)
    if node.op == "lstm":    # c: only its final row is read (checked above); the steps' rows are zeros
        zeros = ctx.emit("Mul", [steps, ctx.const(0.0, node.dtype)])
        packed = ctx.emit("Concat", [packed, ctx.emit("Concat", [zeros, finals[1]], axis=0)], axis=2)
    return packed


builds("lstm", "gru")(_recurrent)


# --- attention's causal mask and the masked softmaxes -----------------------------------------------

@builds("causal_mask")
def _causal_mask(ctx, node, inputs, attrs):
    shape = ctx.emit("Shape", [inputs[0]])
    queries, keys = (ctx.emit("Range", [ctx.const(0, np.int64), ctx.emit("Gather", [shape, ctx.ints(axis)], axis=0),
                                        ctx.const(1, np.int64)]) for axis in (-2, -1))
    return ctx.emit("LessOrEqual", [ctx.emit("Unsqueeze", [keys, ctx.ints(0)]),
                                    ctx.emit("Unsqueeze", [queries, ctx.ints(1)])])


def _masked(ctx, node, inputs, attrs):
    """(x as the node's dtype, the mask broadcastable to it, x's rank)."""
    if not np.issubdtype(node.dtype, np.floating):
        raise Unsupported("exported for float results only")
    rank = len(ctx.shape_of(node.inputs[0]))
    x = ctx.cast(inputs[0], ctx.dtype_of(node.inputs[0]), node.dtype)
    mask = sequence_mask(ctx, inputs[1], ctx.dtype_of(node.inputs[1]), x, rank, attrs.get("batch_axis", 0),
                         attrs.get("time_axis", 1))
    return x, mask, rank


@builds("masked_softmax", "masked_log_softmax")
def _masked_softmax(ctx, node, inputs, attrs):
    x, mask, rank = _masked(ctx, node, inputs, attrs)
    values = ctx.emit("Where", [mask, x, ctx.const(-np.inf, node.dtype)])
    result = ctx.emit("Softmax" if node.op == "masked_softmax" else "LogSoftmax", [values],
                      axis=attrs.get("time_axis", 1) % rank)
    return ctx.emit("Where", [mask, result, ctx.const(0, node.dtype)])     # 0 at the padding, as graphview


@builds("masked_logsumexp")
def _masked_logsumexp(ctx, node, inputs, attrs):
    x, mask, rank = _masked(ctx, node, inputs, attrs)
    values = ctx.emit("Where", [mask, x, ctx.const(-np.inf, node.dtype)])
    return reduce(ctx, "ReduceLogSumExp", values, attrs.get("axis"), rank, attrs.get("keepdims"))   # -inf if none


@builds("masked_count")
def _masked_count(ctx, node, inputs, attrs):
    x, mask, rank = _masked(ctx, node, inputs, attrs)
    ones = ctx.emit("Where", [mask, ctx.const(1, node.dtype), ctx.const(0, node.dtype)])
    return reduce(ctx, "ReduceSum", ctx.emit("Expand", [ones, ctx.emit("Shape", [x])]), attrs.get("axis"), rank,
                  attrs.get("keepdims"))


# --- losses (exported when asked for: usually the logits are the output) -----------------------------

def _reduced(ctx, node, each, reduction):
    if reduction == "none":
        return each
    return ctx.emit("ReduceSum" if reduction == "sum" else "ReduceMean", [each], keepdims=0)


def _difference(ctx, node, inputs):
    predictions, targets = _floats(ctx, node, inputs)
    return ctx.emit("Sub", [predictions, targets])


@builds("mean_squared_error")
def _mean_squared_error(ctx, node, inputs, attrs):
    d = _difference(ctx, node, inputs)
    return _reduced(ctx, node, ctx.emit("Mul", [d, d]), "mean")


@builds("l1")
def _l1(ctx, node, inputs, attrs):
    return _reduced(ctx, node, ctx.emit("Abs", [_difference(ctx, node, inputs)]), attrs.get("reduction", "mean"))


@builds("huber")
def _huber(ctx, node, inputs, attrs):
    delta = float(attrs.get("delta", 1.0))
    d = _difference(ctx, node, inputs)
    size = ctx.emit("Abs", [d])
    quadratic = ctx.emit("Mul", [ctx.emit("Mul", [d, d]), ctx.const(0.5, node.dtype)])
    beyond = ctx.emit("Sub", [size, ctx.const(0.5 * delta, node.dtype)])
    linear = ctx.emit("Mul", [ctx.const(delta, node.dtype), beyond])
    each = ctx.emit("Where", [ctx.emit("LessOrEqual", [size, ctx.const(delta, node.dtype)]), quadratic, linear])
    return _reduced(ctx, node, each, attrs.get("reduction", "mean"))


@builds("binary_cross_entropy_with_logits")
def _binary_cross_entropy_with_logits(ctx, node, inputs, attrs):
    x, t = _floats(ctx, node, inputs)
    tail = softplus_of(ctx, node, ctx.emit("Neg", [ctx.emit("Abs", [x])]))
    each = ctx.emit("Add", [ctx.emit("Sub", [ctx.emit("Relu", [x]), ctx.emit("Mul", [x, t])]), tail])
    return _reduced(ctx, node, each, attrs.get("reduction", "mean"))


@builds("nll")
def _nll(ctx, node, inputs, attrs):
    log_probs, labels = inputs
    log_probs = ctx.cast(log_probs, ctx.dtype_of(node.inputs[0]), node.dtype)
    labels = ctx.cast(labels, ctx.dtype_of(node.inputs[1]), np.int64)
    return ctx.emit("NegativeLogLikelihoodLoss", [log_probs, labels], reduction=attrs.get("reduction", "mean"),
                    ignore_index=int(attrs.get("ignore_index", -100)))


@builds("one_hot")
def _one_hot(ctx, node, inputs, attrs):
    labels, like = inputs
    depth = ctx.emit("Gather", [ctx.emit("Shape", [like]), ctx.ints(-1)], axis=0)
    labels = ctx.cast(labels, ctx.dtype_of(node.inputs[0]), np.int64)
    hot = ctx.emit("OneHot", [labels, depth, ctx.ints([0, 1])], axis=-1)    # int64: onnxruntime's kernels
    return ctx.cast(hot, np.int64, node.dtype)


@builds("masked_softmax_cross_entropy")
def _masked_softmax_cross_entropy(ctx, node, inputs, attrs):
    logits, labels, lengths = inputs
    logits = ctx.cast(logits, ctx.dtype_of(node.inputs[0]), node.dtype)
    rank = len(ctx.shape_of(node.inputs[1]))
    depth = ctx.emit("Gather", [ctx.emit("Shape", [logits]), ctx.ints(-1)], axis=0)
    hot = ctx.emit("OneHot", [ctx.cast(labels, ctx.dtype_of(node.inputs[1]), np.int64), depth, ctx.ints([0, 1])],
                   axis=-1)     # a padding label outside the classes gives a row of zeros
    picked = ctx.emit("ReduceSum", [ctx.emit("Mul", [ctx.emit("LogSoftmax", [logits], axis=-1),
                                                     ctx.cast(hot, np.int64, node.dtype)]), ctx.ints(-1)], keepdims=0)
    mask = sequence_mask(ctx, lengths, ctx.dtype_of(node.inputs[2]), labels, rank, attrs.get("batch_axis", 0),
                         attrs.get("time_axis", 1))
    mask = ctx.emit("Expand", [mask, ctx.emit("Shape", [labels])])
    total = ctx.emit("ReduceSum", [ctx.emit("Where", [mask, picked, ctx.const(0, node.dtype)])], keepdims=0)
    count = ctx.emit("ReduceSum", [ctx.cast(mask, np.bool_, node.dtype)], keepdims=0)
    return ctx.emit("Neg", [ctx.emit("Div", [total, count])])
