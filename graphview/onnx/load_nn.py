"""The ONNX convolution, pooling, normalization and recurrent ops ``graphview.onnx.load`` imports.

NN_BUILDERS maps each op type to its builder (as graphview.onnx.load_ops.BUILDERS does): images and
sequences stay channels-first ('bchw', 'bcw'); LSTM and GRU weights keep their ONNX initializers
(trainable) and are reordered by gather ops into PyTorch's gate order, so their gradients reach the
ONNX-shaped variables.
"""
import numpy as np

from graphview.onnx.load_ops import axis_of, view
from graphview.ops.shape import broadcast_like
from graphview.variable import Kind


def spatial_pads(cx, node, attrs, x, kernel, strides, dilations):
    """ONNX pads / auto_pad as graphview's (before, after) pairs, one per spatial axis."""
    count = len(kernel)
    auto = attrs.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in attrs.get("pads", [0] * 2 * count)]
        return tuple((pads[i], pads[i + count]) for i in range(count))
    if auto == "VALID":
        return ((0, 0),) * count
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        cx.fail(f"auto_pad={auto!r} is not supported")
    pairs = []
    for i, (size, k, s, d) in enumerate(zip(x.shape[2:], kernel, strides, dilations)):
        if size is None:
            cx.fail(f"auto_pad={auto} needs the spatial sizes, and spatial axis {i} of {x.shape} is unknown")
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        pairs.append((small, large) if auto == "SAME_UPPER" else (large, small))
    return tuple(pairs)


def window(cx, node, attrs, x, kernel):
    count = len(kernel)
    if len(x.shape) not in (3, 4) or len(x.shape) - 2 != count:
        cx.fail(f"only 1-D and 2-D windows on (batch, channels, ...) inputs are supported, not input shape "
                f"{x.shape} with kernel {tuple(kernel)}")
    strides = tuple(int(s) for s in attrs.get("strides", [1] * count))
    dilations = tuple(int(d) for d in attrs.get("dilations", [1] * count))
    return strides, dilations, spatial_pads(cx, node, attrs, x, kernel, strides, dilations)


def conv(cx, node, ins, attrs):
    x, w = cx.var(ins[0]), cx.var(ins[1])
    b = cx.var(ins[2]) if len(ins) > 2 else None
    kernel = tuple(int(k) for k in attrs.get("kernel_shape", w.shape[2:]))
    strides, dilations, pads = window(cx, node, attrs, x, kernel)
    op = cx.g.nn.conv2d if len(x.shape) == 4 else cx.g.nn.conv1d
    return [op(x, w, b, stride=strides, padding=pads, dilation=dilations, groups=int(attrs.get("group", 1)),
               name=cx.name())]


def conv_transpose(cx, node, ins, attrs):
    x, w = cx.var(ins[0]), cx.var(ins[1])
    b = cx.var(ins[2]) if len(ins) > 2 else None
    if len(x.shape) != 4:
        cx.fail(f"only 2-D ConvTranspose is supported, not input shape {x.shape}")
    if "output_shape" in attrs:
        cx.fail("output_shape is not supported (give pads and output_padding)")
    auto = attrs.get("auto_pad", b"NOTSET")
    if (auto.decode() if isinstance(auto, bytes) else auto) not in ("NOTSET", "", "VALID"):
        cx.fail(f"auto_pad={auto!r} is not supported (NOTSET or VALID)")
    strides = tuple(int(s) for s in attrs.get("strides", [1, 1]))
    dilations = tuple(int(d) for d in attrs.get("dilations", [1, 1]))
    pads = [int(p) for p in attrs.get("pads", [0] * 4)]
    return [cx.g.nn.conv_transpose2d(x, w, b, stride=strides, padding=((pads[0], pads[2]), (pads[1], pads[3])),
                                     output_padding=tuple(int(p) for p in attrs.get("output_padding", [0, 0])),
                                     groups=int(attrs.get("group", 1)), dilation=dilations, name=cx.name())]


def pool(kind):
    def build(cx, node, ins, attrs):
        x = cx.var(ins[0])
        kernel = tuple(int(k) for k in attrs["kernel_shape"])
        strides, dilations, pads = window(cx, node, attrs, x, kernel)
        if attrs.get("ceil_mode", 0):
            cx.fail("ceil_mode=1 is not supported")
        if any(d != 1 for d in dilations):
            cx.fail(f"dilations {dilations} are not supported in pooling")
        name = f"{kind}_pool{len(kernel)}d"
        options = {"count_include_pad": bool(attrs.get("count_include_pad", 0))} if kind == "avg" else {}
        return [getattr(cx.g.nn, name)(x, kernel, stride=strides, padding=pads, name=cx.name(), **options)]
    return build


def global_pool(op):
    def build(cx, node, ins, attrs):
        x = cx.var(ins[0])
        return [getattr(cx.g.math, op)(x, axis=tuple(range(2, len(x.shape))), keepdims=True, name=cx.name())]
    return build


def running(cx, value, onnx_name):
    """A batch norm's running statistic: its own VARIABLE with trainable=False (a copy) where the value is a
    trainable VARIABLE (PyTorch's exporter writes an untrained batch norm's zero running_mean as
    ``Identity(bias)``: equal initializers are stored once) or state another batch norm already updates."""
    value = cx.var(value)
    g = cx.g
    if value.kind is Kind.VARIABLE and (g.is_trainable(value.name) or value.name in g.state_updates):
        before = cx.names.get(onnx_name)
        copy = g.var(cx.fresh(onnx_name), g.value(value.name), trainable=False)
        if before == onnx_name:         # the ONNX name keeps naming its own initializer
            cx.names[onnx_name] = before
        return copy
    return value


def batch_norm(cx, node, ins, attrs):
    if attrs.get("training_mode", 0):
        cx.fail("training_mode=1 is not supported (inference: the running statistics are used)")
    x, scale, bias = (cx.var(v) for v in ins[:3])
    mean, var = (running(cx, v, node.input[i]) for i, v in ((3, ins[3]), (4, ins[4])))
    momentum = 1.0 - float(attrs.get("momentum", 0.9))
    return [cx.g.nn.batch_norm(x, scale, bias, mean, var, axis=1, momentum=momentum,
                               eps=float(attrs.get("epsilon", 1e-5)), name=cx.name())]


def layer_norm(cx, node, ins, attrs):
    x, scale = cx.var(ins[0]), cx.var(ins[1])
    bias = cx.var(ins[2]) if len(ins) > 2 else None
    axis = axis_of(cx, int(attrs.get("axis", -1)), len(x.shape))
    axes = tuple(range(axis, len(x.shape)))
    if tuple(scale.shape) != tuple(x.shape[axis:]):
        cx.fail(f"Scale's shape {scale.shape} is not the normalized shape {x.shape[axis:]}")
    return [cx.g.nn.layer_norm(x, scale, bias, axis=axes, eps=float(attrs.get("epsilon", 1e-5)),
                               name=cx.name())]


# ONNX's gate order -> PyTorch's: LSTM i, o, f, c -> i, f, g(c), o; GRU z, r, h -> r, z, n.
GATES = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2)}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


def recurrent(cx, node, ins, attrs):
    kind = node.op_type
    gates = GATES[kind]
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction != "forward":
        cx.fail(f"direction={direction!r} is not supported: only forward {kind}s are imported")
    activations = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    if activations and activations != DEFAULT_ACTIVATIONS[kind]:
        cx.fail(f"activations {activations} are not supported (only {DEFAULT_ACTIVATIONS[kind]})")
    for key in ("clip", "input_forget"):
        if attrs.get(key):
            cx.fail(f"{key}={attrs[key]} is not supported")
    if kind == "GRU" and not attrs.get("linear_before_reset", 0):
        cx.fail("linear_before_reset=0 is not supported: graphview's GRU is PyTorch's (linear_before_reset=1)")
    if kind == "LSTM" and len(ins) > 7 and ins[7] is not None:
        cx.fail("peepholes (input P) are not supported")
    x, w, r = cx.var(ins[0]), cx.var(ins[1]), cx.var(ins[2])
    hidden = int(r.shape[-1])
    order = np.concatenate([np.arange(hidden) + g * hidden for g in gates]).astype(np.int64)
    g = cx.g

    def reorder(v):
        return g.shape.gather(view(cx, v, 0), order, axis=0)

    w_ih, w_hh = reorder(w), reorder(r)
    b = ins[3] if len(ins) > 3 else None
    if b is None:
        b = np.zeros((1, 2 * len(gates) * hidden), dtype=x.dtype)
    b = cx.var(b)
    b_ih = g.shape.gather(view(cx, b, (0, slice(0, len(gates) * hidden))), order, axis=0)
    b_hh = g.shape.gather(view(cx, b, (0, slice(len(gates) * hidden, None))), order, axis=0)
    lengths = ins[4] if len(ins) > 4 else None
    if lengths is not None:
        lengths = g.math.cast(lengths, "int64") if not isinstance(lengths, np.ndarray) else lengths.astype(np.int64)
    batch_first = bool(attrs.get("layout", 0))
    layout = "btf" if batch_first else "tbf"
    first_step = view(cx, x, (slice(None), 0)) if batch_first else view(cx, x, 0)

    def state(i):
        given = ins[i] if len(ins) > i else None
        if given is not None:
            given = cx.var(given)
            return view(cx, given, (slice(None), 0)) if batch_first else view(cx, given, 0)
        batch = x.shape[0 if batch_first else 1]
        if batch is not None:
            return cx.var(np.zeros((batch, hidden), dtype=x.dtype))
        # Zeros of (batch, hidden) for a batch of unknown size: (batch, 1) zeros @ (1, hidden) zeros.
        zeros = broadcast_like(cx.var(np.zeros((1, 1), dtype=x.dtype)), view(cx, first_step, (slice(None), slice(0, 1))))
        return g.math.matmul(zeros, cx.var(np.zeros((1, hidden), dtype=x.dtype)))

    if kind == "LSTM":
        outputs, h_n, c_n = g.nn.lstm(x, state(5), state(6), w_ih, w_hh, b_ih, b_hh, lengths=lengths, layout=layout)
        finals = [h_n, c_n]
    else:
        outputs, h_n = g.nn.gru(x, state(5), w_ih, w_hh, b_ih, b_hh, lengths=lengths, layout=layout)
        finals = [h_n]
    # Y: (T, 1, B, H) or (B, T, 1, H); Y_h, Y_c: (1, B, H) or (B, 1, H).
    result = [g.shape.expand_dims(outputs, 2 if batch_first else 1, name=cx.name(0))]
    for i, final in enumerate(finals, start=1):
        result.append(g.shape.expand_dims(final, 1 if batch_first else 0, name=cx.name(i)))
    return result


NN_BUILDERS = {
    "Conv": conv, "ConvTranspose": conv_transpose, "MaxPool": pool("max"), "AveragePool": pool("avg"),
    "GlobalAveragePool": global_pool("mean"), "GlobalMaxPool": global_pool("max"),
    "BatchNormalization": batch_norm, "LayerNormalization": layer_norm, "LSTM": recurrent, "GRU": recurrent,
}
