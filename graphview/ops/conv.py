"""Convolution: conv1d, conv2d, conv_transpose2d and conv2d's weight gradient (PyTorch's semantics).

Inputs are laid out as a dp view name (``layout``: 'bcw'/'bwc', 'bchw'/'bhwc'); weights are PyTorch's
``(out, in/groups, kw)`` / ``(out, in/groups, kh, kw)`` whatever the layout, and conv_transpose2d's
``(in, out/groups, kh, kw)``. A node keeps its padding as one (before, after) pair per spatial axis:
the g.nn functions resolve an int, a tuple, "same" and "valid" (graphview/ops/spatial.py).
The kernels (graphview_kernels/conv.py) work on C-contiguous channels-first arrays: another
layout or a strided input is copied first, and a 1-D convolution is a 2-D one of height 1.
Gradient rules: graphview/gradients/conv.py (conv2d and conv_transpose2d are each other's input
gradient; conv2d_weight_grad is differentiable too, so second derivatives work).
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.ops import spatial
from graphview.ops.spatial import Ints, Pads, layout_of, output_size, padding_pairs, transposed_size
from graphview.registry import defop, public
from graphview.shapes import format_shape
from graphview.testing import Sample, transposed
from graphview_kernels import conv as kernels
from graphview_kernels import norm as norm_kernels

AXES = ("h", "w")


# --- layouts and arrays ---------------------------------------------------------------------------

def channels_first(array, layout, rank):
    """``array`` as a C-contiguous (batch, channels, height, width) array (height 1 for 1-D)."""
    array = array.transpose(layout_of("conv", layout, rank).to_channels_first)
    if rank == 1:
        array = array[:, :, None, :]
    return np.ascontiguousarray(array)


def _weight4(w, rank):
    return np.ascontiguousarray(w if rank == 2 else w[:, :, None, :])


def _target(out, layout, rank):
    """A channels-first 4-D array the kernel writes, and whether it must be copied into ``out`` after."""
    if layout_of("conv", layout, rank).channels_last or not out.flags.c_contiguous:
        shape = tuple(out.shape[i] for i in layout_of("conv", layout, rank).to_channels_first)
        return np.empty(shape[:2] + ((1,) if rank == 1 else ()) + shape[2:], out.dtype), True
    return (out[:, :, None, :] if rank == 1 else out), False


def _write_back(out, result, layout, rank):
    result = result[:, :, 0, :] if rank == 1 else result
    out[...] = result.transpose(layout_of("conv", layout, rank).from_channels_first)


def _params(rank, stride, padding, dilation):
    """stride, padding and dilation as 2-D kernel arguments (a 1-D op has height 1); a node's attributes
    (tuples) are looked up in a table, as every run of the node asks again."""
    key = (rank, stride, padding, dilation)
    try:
        return _PARAMS[key]
    except KeyError:
        result = _PARAMS[key] = _resolve(rank, stride, padding, dilation)
        return result
    except TypeError:       # not hashable (a list given to the launcher directly)
        return _resolve(rank, stride, padding, dilation)


_PARAMS = {}


def _resolve(rank, stride, padding, dilation):
    stride = spatial.tuple_of("conv", "stride", stride, rank)
    pads = padding_pairs("conv", padding, rank)
    dilation = spatial.tuple_of("conv", "dilation", dilation, rank)
    if rank == 1:
        stride, pads, dilation = (1,) + stride, ((0, 0),) + pads, (1,) + dilation
    return stride, pads, dilation


# --- shape rules ------------------------------------------------------------------------------------

def _check_ranks(op, rank, x, w):
    if len(x) != rank + 2:
        raise ShapeError(f"{op}: x has shape {format_shape(x)}; it needs {rank + 2} axes (batch, channels and "
                         f"{rank} spatial)")
    if len(w) != rank + 2:
        raise ShapeError(f"{op}: the weight has shape {format_shape(w)}; it needs {rank + 2} axes")


def _check_bias(op, bias, channels):
    if len(bias) > 1:
        raise ShapeError(f"{op} takes at most one bias, got {len(bias)}")
    if bias and (len(bias[0]) != 1 or (channels is not None and bias[0][0] not in (None, channels))):
        raise ShapeError(f"{op}: the bias has shape {format_shape(bias[0])}; it needs ({channels},), one per "
                         "output channel")


def _divisible(op, what, count, groups):
    if count is not None and count % groups:
        raise ShapeError(f"{op}: {what} {count} is not divisible by groups={groups}")


def _conv_shape_rule(op, rank):
    def shape(x, w, *bias, stride=1, padding=0, dilation=1, groups=1, layout=spatial.LAYOUTS[rank][0]):
        _check_ranks(op, rank, x, w)
        where = layout_of(op, layout, rank)
        stride, pads = spatial.tuple_of(op, "stride", stride, rank), padding_pairs(op, padding, rank)
        dilation = spatial.tuple_of(op, "dilation", dilation, rank)
        channels, outs = x[where.channel], w[0]
        _divisible(op, "input channels", channels, groups)
        _divisible(op, "output channels (weight axis 0)", outs, groups)
        if channels is not None and w[1] is not None and w[1] * groups != channels:
            raise ShapeError(f"{op}: the weight {format_shape(w)} takes {w[1]} x groups={groups} = {w[1] * groups} "
                             f"input channels but x {format_shape(x)} has {channels} (layout {layout!r})")
        _check_bias(op, bias, outs)
        result = list(x)
        result[where.channel] = outs
        for i, axis in enumerate(where.spatial):
            result[axis] = output_size(op, layout[axis], x[axis], w[2 + i], stride[i], pads[i], dilation[i])
        return tuple(result)
    return shape


def _transpose_shape(x, w, *bias, stride=1, padding=0, output_padding=0, groups=1, dilation=1, layout="bchw"):
    op = "conv_transpose2d"
    _check_ranks(op, 2, x, w)
    where = layout_of(op, layout, 2)
    stride, pads = spatial.tuple_of(op, "stride", stride, 2), padding_pairs(op, padding, 2)
    dilation = spatial.tuple_of(op, "dilation", dilation, 2)
    extra = spatial.tuple_of(op, "output_padding", output_padding, 2, minimum=0)
    if any(e >= s and e >= d for e, s, d in zip(extra, stride, dilation)):
        raise ShapeError(f"{op}: output_padding {extra} must be smaller than the stride {stride} or the dilation "
                         f"{dilation} (as in PyTorch)")
    channels = x[where.channel]
    _divisible(op, "input channels", channels, groups)
    if channels is not None and w[0] is not None and w[0] != channels:
        raise ShapeError(f"{op}: the weight {format_shape(w)} takes {w[0]} input channels (axis 0) but x "
                         f"{format_shape(x)} has {channels} (layout {layout!r})")
    outs = None if w[1] is None else w[1] * groups
    _check_bias(op, bias, outs)
    result = list(x)
    result[where.channel] = outs
    for i, axis in enumerate(where.spatial):
        result[axis] = transposed_size(op, layout[axis], x[axis], w[2 + i], stride[i], pads[i], dilation[i], extra[i])
    return tuple(result)


def _weight_grad_shape(x, gy, kernel_size=(1, 1), stride=1, padding=0, dilation=1, groups=1, layout="bchw"):
    op = "conv2d_weight_grad"
    if len(x) != 4 or len(gy) != 4:
        raise ShapeError(f"{op}: x {format_shape(x)} and the output gradient {format_shape(gy)} need 4 axes")
    where = layout_of(op, layout, 2)
    kernel = spatial.tuple_of(op, "kernel_size", kernel_size, 2)
    stride, pads = spatial.tuple_of(op, "stride", stride, 2), padding_pairs(op, padding, 2)
    dilation = spatial.tuple_of(op, "dilation", dilation, 2)
    channels, outs = x[where.channel], gy[where.channel]
    _divisible(op, "input channels", channels, groups)
    _divisible(op, "output channels", outs, groups)
    for i, axis in enumerate(where.spatial):
        expected = output_size(op, layout[axis], x[axis], kernel[i], stride[i], pads[i], dilation[i])
        if None not in (expected, gy[axis]) and expected != gy[axis]:
            raise ShapeError(f"{op}: the output gradient {format_shape(gy)} has {gy[axis]} along {layout[axis]}, "
                             f"the convolution of x {format_shape(x)} has {expected}")
    return (outs, None if channels is None else channels // groups) + kernel


# --- kernels ---------------------------------------------------------------------------------------

def _conv_kernel(rank):
    def launch(x, w, *rest, stride=1, padding=0, dilation=1, groups=1, layout=spatial.LAYOUTS[rank][0]):
        *bias, out = rest
        if out.size == 0:
            return
        (sh, sw), ((ph, _), (pw, _)), (dh, dw) = _params(rank, stride, padding, dilation)
        target, copy = _target(out, layout, rank)
        b = np.ascontiguousarray(bias[0]) if bias else np.empty(0, out.dtype)
        if x.size == 0:
            target[...] = b[None, :, None, None] if bias else 0
        else:
            kernels.conv_forward(channels_first(x, layout, rank), _weight4(w, rank), b, bool(bias),
                                 sh, sw, ph, pw, dh, dw, groups, target)
        if copy:
            _write_back(out, target, layout, rank)
    return launch


def _transpose_kernel(x, w, *rest, stride=1, padding=0, output_padding=0, groups=1, dilation=1, layout="bchw"):
    *bias, out = rest
    if out.size == 0:
        return
    (sh, sw), ((ph, _), (pw, _)), (dh, dw) = _params(2, stride, padding, dilation)
    target, copy = _target(out, layout, 2)
    b = np.ascontiguousarray(bias[0]) if bias else np.empty(0, out.dtype)
    kernels.conv_backward_input(channels_first(x, layout, 2), _weight4(w, 2), b, bool(bias),
                                sh, sw, ph, pw, dh, dw, groups, target)
    if copy:
        _write_back(out, target, layout, 2)


def _weight_grad_kernel(x, gy, out, kernel_size=(1, 1), stride=1, padding=0, dilation=1, groups=1, layout="bchw"):
    if out.size == 0:
        return
    (sh, sw), ((ph, _), (pw, _)), (dh, dw) = _params(2, stride, padding, dilation)
    result = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    kernels.conv_backward_weight(channels_first(x, layout, 2), channels_first(gy, layout, 2),
                                 sh, sw, ph, pw, dh, dw, groups, result)
    if result is not out:
        out[...] = result


# --- NumPy references --------------------------------------------------------------------------------

def reference_conv(x, w, bias=None, stride=(1, 1), pads=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    """conv2d on channels-first arrays, in float64, one kernel tap at a time."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(pads))
    outs, cg, kh, kw = w.shape
    og = outs // groups
    oh = (padded.shape[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (padded.shape[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((x.shape[0], outs, oh, ow))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                top, left = i * dilation[0], j * dilation[1]
                patch = padded[:, g * cg:(g + 1) * cg, top:top + stride[0] * (oh - 1) + 1:stride[0],
                               left:left + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og:(g + 1) * og, :, i, j])
    return out if bias is None else out + np.asarray(bias, np.float64)[None, :, None, None]


def reference_transpose(x, w, bias=None, stride=(1, 1), pads=((0, 0), (0, 0)), dilation=(1, 1), groups=1,
                        output_padding=(0, 0)):
    """conv_transpose2d on channels-first arrays: the adjoint of reference_conv, in float64."""
    ins, cg, kh, kw = w.shape
    og = ins // groups
    n, _, height, width = x.shape
    full = [(size - 1) * s + d * (k - 1) + 1 + e for size, s, d, k, e in
            zip((height, width), stride, dilation, (kh, kw), output_padding)]
    out = np.zeros((n, cg * groups, full[0], full[1]))
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                top, left = i * dilation[0], j * dilation[1]
                out[:, g * cg:(g + 1) * cg, top:top + stride[0] * (height - 1) + 1:stride[0],
                    left:left + stride[1] * (width - 1) + 1:stride[1]] += np.einsum(
                        "nohw,oc->nchw", x[:, g * og:(g + 1) * og].astype(np.float64), w[g * og:(g + 1) * og, :, i, j])
    out = out[:, :, pads[0][0]:full[0] - pads[0][1], pads[1][0]:full[1] - pads[1][1]]
    return out if bias is None else out + np.asarray(bias, np.float64)[None, :, None, None]


def _conv_reference(rank):
    def reference(x, w, *bias, stride=1, padding=0, dilation=1, groups=1, layout=spatial.LAYOUTS[rank][0]):
        stride, pads, dilation = _params(rank, stride, padding, dilation)
        result = reference_conv(channels_first(x, layout, rank), _weight4(w, rank), bias[0] if bias else None,
                                stride, pads, dilation, groups)
        result = result[:, :, 0, :] if rank == 1 else result
        return result.transpose(layout_of("conv", layout, rank).from_channels_first).astype(x.dtype)
    return reference


def _transpose_reference(x, w, *bias, stride=1, padding=0, output_padding=0, groups=1, dilation=1, layout="bchw"):
    stride, pads, dilation = _params(2, stride, padding, dilation)
    extra = spatial.tuple_of("conv_transpose2d", "output_padding", output_padding, 2, minimum=0)
    result = reference_transpose(channels_first(x, layout, 2), w, bias[0] if bias else None, stride, pads, dilation,
                                 groups, extra)
    return result.transpose(layout_of("conv", layout, 2).from_channels_first).astype(x.dtype)


def _weight_grad_reference(x, gy, kernel_size=(1, 1), stride=1, padding=0, dilation=1, groups=1, layout="bchw"):
    """Row by row of the identity: the weight gradient is sum(gy * conv(x, e_k)) for each weight entry e_k."""
    stride, pads, dilation = _params(2, stride, padding, dilation)
    xs, gys = channels_first(x, layout, 2), channels_first(gy, layout, 2)
    outs, cg = gys.shape[1], xs.shape[1] // groups
    shape = (outs, cg) + tuple(kernel_size)
    result = np.zeros(shape)
    for index in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[index] = 1.0
        result[index] = np.sum(reference_conv(xs, unit, None, stride, pads, dilation, groups) * gys)
    return result.astype(x.dtype)


# --- samples -------------------------------------------------------------------------------------

def _conv2d_samples():
    r = np.random.default_rng(16)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name

        def a(*shape):
            return r.normal(size=shape).astype(dtype)
        samples += [
            Sample((a(2, 3, 5, 6), a(4, 3, 3, 3), a(4)), {"padding": ((1, 1), (1, 1))}, label=f"padded, bias {name}"),
            Sample((a(1, 2, 7, 8), a(2, 2, 2, 2)), {"stride": (3, 4), "dilation": (2, 1), "padding": ((0, 0), (1, 0))},
                   label=f"stride > kernel, dilation {name}"),
            Sample((a(2, 4, 5, 5), a(4, 1, 3, 3)), {"groups": 4, "padding": 1}, label=f"depthwise {name}")]
    f = np.float64
    samples += [
        Sample((r.normal(size=(1, 2, 5, 4)), r.normal(size=(3, 2, 2, 4))), {"padding": ((0, 1), (1, 2))},
               label="'same' with even kernels"),
        Sample((r.normal(size=(2, 4, 4, 5)), r.normal(size=(6, 2, 3, 2)), r.normal(size=6)),
               {"groups": 2, "stride": (2, 1), "dilation": (1, 2), "padding": 1}, label="groups 2, bias"),
        Sample((transposed(r.normal(size=(3, 4, 4, 2))), r.normal(size=(3, 2, 2, 3)).astype(f)),
               {"layout": "bhwc", "padding": ((1, 0), (0, 1))}, label="bhwc, transposed input"),
        Sample((np.zeros((0, 2, 4, 4)), r.normal(size=(3, 2, 3, 3)), r.normal(size=3)), label="empty batch")]
    return samples


def _conv1d_samples():
    r = np.random.default_rng(17)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        samples += [Sample((r.normal(size=(2, 3, 7)).astype(dtype), r.normal(size=(4, 3, 3)).astype(dtype),
                            r.normal(size=4).astype(dtype)), {"padding": 1, "stride": 2}, label=f"strided, bias {name}")]
    samples += [
        Sample((r.normal(size=(2, 4, 9)), r.normal(size=(4, 1, 2))), {"groups": 4, "dilation": 3, "stride": 3},
               label="depthwise, stride > kernel, dilation"),
        Sample((r.normal(size=(1, 2, 6)), r.normal(size=(2, 2, 4))), {"padding": ((1, 2),)}, label="'same' even kernel"),
        Sample((transposed(r.normal(size=(3, 5, 2))), r.normal(size=(3, 2, 2))), {"layout": "bwc"},
               label="bwc, transposed input")]
    return samples


def _transpose_samples():
    r = np.random.default_rng(18)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        samples += [Sample((r.normal(size=(2, 3, 4, 3)).astype(dtype), r.normal(size=(3, 2, 3, 3)).astype(dtype),
                            r.normal(size=2).astype(dtype)), {"stride": 2, "padding": 1, "output_padding": 1},
                           label=f"stride 2, output_padding, bias {name}")]
    samples += [
        Sample((r.normal(size=(1, 4, 3, 4)), r.normal(size=(4, 1, 2, 3))), {"groups": 2, "dilation": (2, 1),
                                                                            "stride": (3, 1)},
               label="groups, dilation, stride > kernel"),
        Sample((r.normal(size=(1, 2, 4, 4)), r.normal(size=(2, 3, 2, 2))), {"padding": ((0, 1), (1, 0))},
               label="uneven padding"),
        Sample((transposed(r.normal(size=(2, 3, 3, 2))), r.normal(size=(2, 2, 2, 2))), {"layout": "bhwc", "stride": 2},
               label="bhwc, transposed input")]
    return samples


def _weight_grad_samples():
    r = np.random.default_rng(19)
    return [
        Sample((r.normal(size=(2, 3, 5, 4)), r.normal(size=(2, 4, 5, 4))), {"kernel_size": (3, 3), "padding": 1},
               label="padded"),
        Sample((r.normal(size=(1, 4, 6, 6)).astype(np.float32), r.normal(size=(1, 2, 2, 2)).astype(np.float32)),
               {"kernel_size": (2, 2), "groups": 2, "stride": 3, "dilation": (1, 2)}, label="groups, stride, float32"),
        Sample((transposed(r.normal(size=(2, 4, 4, 2))), r.normal(size=(2, 4, 4, 3))),
               {"kernel_size": (2, 2), "layout": "bhwc", "padding": ((0, 1), (1, 0))}, label="bhwc, uneven padding")]


# --- declarations --------------------------------------------------------------------------------------

def _attrs(rank, transpose=False):
    declared = {"stride": Ints(rank), "padding": Pads(rank), "dilation": Ints(rank),
                "groups": attributes.Int(minimum=1), "layout": spatial.layout_name(rank)}
    if transpose:
        declared["output_padding"] = Ints(rank, minimum=0)
    return declared


def _kernel_sizes(in_shapes, attrs):
    return in_shapes[1][2:]


_GRADIENTS = "Gradients: graphview/gradients/conv.py."
conv1d_op = defop("conv1d", shape=_conv_shape_rule("conv1d", 1), kernel=_conv_kernel(1), promote="same",
                  accepts=dtypes.FLOATS, samples=_conv1d_samples, reference=_conv_reference(1), family="conv",
                  attrs=_attrs(1), dims=spatial.dims_rule(1, _kernel_sizes),
                  doc="1-D convolution (cross-correlation) of x (layout 'bcw' or 'bwc') with w (out, in/groups, kw), "
                      "plus an optional bias; im2col + BLAS. " + _GRADIENTS)
conv2d_op = defop("conv2d", shape=_conv_shape_rule("conv2d", 2), kernel=_conv_kernel(2), promote="same",
                  accepts=dtypes.FLOATS, samples=_conv2d_samples, reference=_conv_reference(2), family="conv",
                  attrs=_attrs(2), dims=spatial.dims_rule(2, _kernel_sizes),
                  doc="2-D convolution (cross-correlation) of x (layout 'bchw' or 'bhwc') with w (out, in/groups, kh, "
                      "kw), plus an optional bias; im2col + BLAS. " + _GRADIENTS)
conv_transpose2d_op = defop(
    "conv_transpose2d", shape=_transpose_shape, kernel=_transpose_kernel, promote="same", accepts=dtypes.FLOATS,
    samples=_transpose_samples, reference=_transpose_reference, family="conv", attrs=_attrs(2, transpose=True),
    dims=spatial.dims_rule(2, _kernel_sizes, transposed=True),
    doc="Transposed 2-D convolution (the adjoint of conv2d, its input gradient) of x with w (in, out/groups, kh, "
        "kw), plus an optional bias; BLAS + col2im. " + _GRADIENTS)
conv2d_weight_grad = defop(
    "conv2d_weight_grad", shape=_weight_grad_shape, kernel=_weight_grad_kernel, promote="same",
    accepts=dtypes.FLOATS, samples=_weight_grad_samples, reference=_weight_grad_reference, family="conv",
    attrs={**_attrs(2), "kernel_size": Ints(2)},
    doc="conv2d's weight gradient: (out, in/groups, kh, kw) from x and the output gradient gy; im2col + BLAS. "
        "Differentiable (its rule is made of conv2d and conv_transpose2d).")


def _bias_grad_shape(gy, layout="bchw"):
    if len(gy) not in (3, 4):
        raise ShapeError(f"conv_bias_grad: the output gradient has shape {format_shape(gy)}; it needs 3 or 4 axes")
    return (gy[layout_of("conv_bias_grad", layout, len(gy) - 2).channel],)


def _bias_grad_kernel(gy, out, layout="bchw"):
    where = layout_of("conv_bias_grad", layout, gy.ndim - 2)
    data = np.ascontiguousarray(gy)
    channels = data.shape[where.channel]
    outer = int(np.prod(data.shape[:where.channel]))
    inner = int(np.prod(data.shape[where.channel + 1:]))
    norm_kernels.channel_sums(data.reshape(outer, channels, inner), out)


def _bias_grad_samples():
    r = np.random.default_rng(20)
    return [Sample((r.normal(size=(3, 4, 2, 5)),), label="bchw"),
            Sample((r.normal(size=(3, 2, 5, 4)).astype(np.float32),), {"layout": "bhwc"}, label="bhwc float32"),
            Sample((transposed(r.normal(size=(2, 3, 4))),), {"layout": "bwc"}, label="bwc transposed"),
            Sample((np.zeros((0, 3, 2)),), {"layout": "bcw"}, label="empty batch")]


def _bias_grad_reference(gy, layout="bchw"):
    where = layout_of("conv_bias_grad", layout, gy.ndim - 2)
    return gy.sum(axis=tuple(i for i in range(gy.ndim) if i != where.channel), dtype=np.float64).astype(gy.dtype)


conv_bias_grad = defop(
    "conv_bias_grad", shape=_bias_grad_shape, kernel=_bias_grad_kernel, accepts=dtypes.FLOATS,
    samples=_bias_grad_samples, reference=_bias_grad_reference, family="conv",
    attrs={"layout": attributes.OneOf(spatial.LAYOUTS[1] + spatial.LAYOUTS[2])},
    doc="A convolution's bias gradient: gy summed over every axis but the channels (one pass, in float64). "
        "Differentiable (its gradient is a broadcast).")


def _convolve(op, rank, x, w, b, stride, padding, dilation, groups, layout, name, extra=None):
    """Resolve the attributes (padding "same" needs the kernel sizes) and build the node."""
    title = op.definition.name
    layout_of(title, layout, rank)
    stride = spatial.tuple_of(title, "stride", stride, rank)
    dilation = spatial.tuple_of(title, "dilation", dilation, rank)
    kernel = tuple(w.shape[2:]) if hasattr(w, "shape") else None
    if padding == "same" and (kernel is None or len(kernel) != rank or None in kernel):
        raise ShapeError(f"{title}: padding='same' needs the weight's kernel sizes, and the weight has shape "
                         f"{getattr(w, 'shape', None)}")
    pads = padding_pairs(title, padding, rank, kernel, dilation, stride)
    inputs = (x, w) if b is None else (x, w, b)
    return op(*inputs, name=name, stride=stride, padding=pads, dilation=dilation, groups=groups, layout=layout,
              **(extra or {}))


@public("nn")
def conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, layout="bcw", *, name=None):
    """1-D convolution as PyTorch's conv1d: x in layout 'bcw' or 'bwc', w (out, in/groups, kw), b (out,) or
    None; padding an int, a tuple, (before, after) pairs, "same" (stride 1) or "valid"."""
    return _convolve(conv1d_op, 1, x, w, b, stride, padding, dilation, groups, layout, name)


@public("nn")
def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1, layout="bchw", *, name=None):
    """2-D convolution as PyTorch's conv2d: x in layout 'bchw' or 'bhwc', w (out, in/groups, kh, kw), b
    (out,) or None; padding an int, a tuple, (before, after) pairs, "same" (stride 1) or "valid"."""
    return _convolve(conv2d_op, 2, x, w, b, stride, padding, dilation, groups, layout, name)


@public("nn")
def conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1, layout="bchw", *,
                     name=None):
    """Transposed 2-D convolution as PyTorch's conv_transpose2d: w (in, out/groups, kh, kw); padding an int,
    a tuple or (before, after) pairs; output_padding (smaller than the stride or the dilation) adds to the output's end."""
    if isinstance(padding, str):
        raise ShapeError(f"conv_transpose2d: padding {padding!r}: give an int, a tuple or (before, after) pairs")
    extra = {"output_padding": spatial.tuple_of("conv_transpose2d", "output_padding", output_padding, 2, 0)}
    return _convolve(conv_transpose2d_op, 2, x, w, b, stride, padding, dilation, groups, layout, name, extra)
