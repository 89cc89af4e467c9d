"""Gradient rules of the convolution ops (graphview/ops/conv.py), all made of differentiable ops.

conv2d's input gradient is conv_transpose2d with the same weight and attributes (its output_padding
restores the input size a strided convolution rounded away), and conv_transpose2d's is conv2d: each
is the other's adjoint. Both weight gradients are conv2d_weight_grad, whose own rule is made of the
two again, so every derivative of every order is a graph of these three ops. conv1d goes through the
2-D ops with a size-1 height axis (expand_dims, squeeze).
"""
from graphview.errors import ShapeError
from graphview.ops.conv import conv2d_op, conv2d_weight_grad, conv1d_op, conv_bias_grad, conv_transpose2d_op
from graphview.ops.shape import broadcast_like, expand_dims, reshape, squeeze
from graphview.ops.spatial import layout_of
from graphview.registry import defvjp

LAYOUTS_2D = {"bcw": "bchw", "bwc": "bhwc"}


def _output_padding(op, x, y, kernel, stride, padding, dilation, layout):
    """Per spatial axis, what a transposed convolution of ``y`` must add to give back ``x``'s size."""
    where = layout_of(op, layout, 2)
    extra = []
    for i, axis in enumerate(where.spatial):
        if stride[i] == 1:
            extra.append(0)
            continue
        size, out = x.shape[axis], y.shape[axis]
        if size is None or out is None:
            raise ShapeError(f"{op}: the input gradient of a strided convolution needs the static size of axis "
                             f"{layout[axis]} (x {x.shape}, y {y.shape})")
        extra.append(size - ((out - 1) * stride[i] - sum(padding[i]) + dilation[i] * (kernel[i] - 1) + 1))
    return tuple(extra)


def _bias(g, bias, layout):
    return (conv_bias_grad(g, layout=layout),) if bias else ()


def _bias_grad(g, out, gy, layout="bchw"):
    """conv_bias_grad sums gy over all axes but the channels: its gradient is g broadcast back."""
    where = layout_of("conv_bias_grad", layout, gy.rank - 2)
    shape = tuple(-1 if i == where.channel else 1 for i in range(gy.rank))
    return (broadcast_like(reshape(g, shape), gy),)


def _conv2d(g, out, x, w, *bias, stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1, layout="bchw"):
    kernel = tuple(w.shape[2:])
    common = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout)
    extra = _output_padding("conv2d", x, out, kernel, stride, padding, dilation, layout)
    grad_x = conv_transpose2d_op(g, w, output_padding=extra, **common)
    grad_w = conv2d_weight_grad(x, g, kernel_size=kernel, **common)
    return (grad_x, grad_w) + _bias(g, bias, layout)


def _conv_transpose2d(g, out, x, w, *bias, stride=(1, 1), padding=((0, 0), (0, 0)), output_padding=(0, 0),
                      groups=1, dilation=(1, 1), layout="bchw"):
    common = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout)
    grad_x = conv2d_op(g, w, **common)
    grad_w = conv2d_weight_grad(g, x, kernel_size=tuple(w.shape[2:]), **common)
    return (grad_x, grad_w) + _bias(g, bias, layout)


def _weight_grad(g, out, x, gy, kernel_size=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1),
                 groups=1, layout="bchw"):
    """conv2d_weight_grad(x, gy) is linear in each: sum(G * W(x, gy)) = sum(gy * conv2d(x, G))."""
    common = dict(stride=stride, padding=padding, dilation=dilation, groups=groups, layout=layout)
    extra = _output_padding("conv2d_weight_grad", x, gy, kernel_size, stride, padding, dilation, layout)
    return conv_transpose2d_op(gy, g, output_padding=extra, **common), conv2d_op(x, g, **common)


def _conv1d(g, out, x, w, *bias, stride=(1,), padding=((0, 0),), dilation=(1,), groups=1, layout="bcw"):
    """The 2-D rules on a height-1 axis inserted before the width."""
    at = layout.index("w")
    common = dict(stride=(1,) + tuple(stride), padding=((0, 0),) + tuple(padding), dilation=(1,) + tuple(dilation),
                  groups=groups, layout=LAYOUTS_2D[layout])
    x4, g4, w4 = expand_dims(x, at), expand_dims(g, at), expand_dims(w, 2)
    extra = _output_padding("conv1d", x4, g4, (1, w.shape[2]), common["stride"], common["padding"],
                            common["dilation"], common["layout"])
    grad_x = squeeze(conv_transpose2d_op(g4, w4, output_padding=extra, **common), at)
    grad_w = squeeze(conv2d_weight_grad(x4, g4, kernel_size=(1, w.shape[2]), **common), 2)
    return (grad_x, grad_w) + _bias(g, bias, layout)


defvjp(conv2d_op, _conv2d)
defvjp(conv_transpose2d_op, _conv_transpose2d)
defvjp(conv2d_weight_grad, _weight_grad)
defvjp(conv1d_op, _conv1d)
defvjp(conv_bias_grad, _bias_grad)
