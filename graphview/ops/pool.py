"""Pooling: max_pool1d/2d, avg_pool1d/2d, global_avg_pool, with PyTorch's semantics, and their gradient ops.

``layout`` is a dp view name ('bcw'/'bwc', 'bchw'/'bhwc'); ``stride`` defaults to ``kernel_size``;
``padding`` (an int, one per spatial axis or (before, after) pairs) may be at most half the kernel
(PyTorch's rule: every window then holds an input element), and the kernel may not be larger than
the padded input (graphview/ops/spatial.py gives the sizes, its errors and the spatial dims).
Max pooling pads with -inf and takes a window's first maximum (its last NaN), as PyTorch's CPU
kernels; avg pooling pads with zeros and divides by the kernel's size (``count_include_pad``) or by
the number of input elements in the window. Both compute in kernels/pool.py on channels-first views
(a 1-D op is a 2-D one with a height of 1).

The gradient ops (rules in graphview/gradients/pool.py) are dedicated kernels that are themselves
differentiable: ``max_pool2d_grad(x, grad)`` adds grad at each window's argmax (found again in x,
no index array kept), and its gradient is ``max_pool2d_select(x, values)``, the values at those
argmaxes, whose gradient is max_pool2d_grad again; ``avg_pool2d_grad(x, grad)`` spreads grad over
the windows (x gives only the shape), and its gradient is avg_pool2d. Likewise for 1-D and for
``global_avg_pool`` (``global_avg_pool_grad``).
"""

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.ops import spatial
from graphview.ops.spatial import Ints, Pads, layout_of, output_size, padding_pairs, tuple_of
from graphview.registry import defop, graph_of, public
from graphview.shapes import format_shape
from graphview.testing import Sample, strided, transposed
from graphview_kernels import pool as kernels
from graphview_kernels.launch import AnyLayout, Signatures, writable

GLOBAL_LAYOUTS = spatial.LAYOUTS[1] + spatial.LAYOUTS[2]


def _layout(op, x, layout, rank):
    where = layout_of(op, layout, rank)
    if len(x) != rank + 2:
        raise ShapeError(f"{op}: input of shape {format_shape(x)} is not a rank-{rank + 2} {layout!r} tensor")
    return where


def _pooled_shape(op, rank, x, kernel_size, stride, padding, layout):
    where = _layout(op, x, layout, rank)
    for k, pair in zip(kernel_size, padding):
        if max(pair) > k // 2:
            raise ShapeError(f"{op}: padding {padding} is more than half the kernel size {kernel_size} "
                             "(each pad must be at most kernel_size // 2, as in PyTorch)")
    out = list(x)
    for i, axis in enumerate(where.spatial):
        if x[axis] == 0:     # padding alone would make windows of nothing but padding (the kernels read row 0)
            raise ShapeError(f"{op}: spatial axis {layout[axis]} of x {format_shape(x)} is empty; pooling needs "
                             "at least one element along it, as in PyTorch")
        out[axis] = output_size(op, layout[axis], x[axis], kernel_size[i], stride[i], padding[i])
    return tuple(out)


def _max_shape_rule(op, rank):
    def shape(x, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
        return _pooled_shape(op, rank, x, kernel_size, stride, padding, layout)
    return shape


def _avg_shape_rule(op, rank):
    def shape(x, *, kernel_size, stride, padding, count_include_pad=True, layout=spatial.LAYOUTS[rank][0]):
        return _pooled_shape(op, rank, x, kernel_size, stride, padding, layout)
    return shape


def _grad_shape_rule(op, rank, avg):
    """(x, grad) -> x's shape, grad having the pool's output shape."""
    def check(x, grad, kernel_size, stride, padding, layout):
        pooled = _pooled_shape(op, rank, x, kernel_size, stride, padding, layout)
        if len(grad) != len(pooled) or any(a is not None and b is not None and a != b for a, b in zip(grad, pooled)):
            raise ShapeError(f"{op}: the gradient's shape {format_shape(grad)} is not the pool's output shape "
                             f"{format_shape(pooled)}")
        return x

    if avg:
        def shape(x, grad, *, kernel_size, stride, padding, count_include_pad=True, layout=spatial.LAYOUTS[rank][0]):
            return check(x, grad, kernel_size, stride, padding, layout)
    else:
        def shape(x, grad, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
            return check(x, grad, kernel_size, stride, padding, layout)
    return shape


def _select_shape_rule(op, rank):
    def shape(x, values, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
        if tuple(values) != tuple(x) and len(values) == len(x) and None not in values and None not in x:
            raise ShapeError(f"{op}: values of shape {format_shape(values)} differ from x's {format_shape(x)}")
        return _pooled_shape(op, rank, x, kernel_size, stride, padding, layout)
    return shape


# --- kernels: channels-first 4-D views ---------------------------------------------------------------

# Called with channels-first views of any strides (a channels-last input permuted is not C-contiguous):
# one compiled signature per dtype, whatever the layouts (kernels/launch.py).
MAX_POOL = AnyLayout(kernels.max_pool, writes=(1,))
AVG_POOL = AnyLayout(kernels.avg_pool, writes=(1,))
MAX_POOL_GRAD = AnyLayout(kernels.max_pool_grad, writes=(2,))
MAX_POOL_SELECT = AnyLayout(kernels.max_pool_select, writes=(2,))
AVG_POOL_GRAD = AnyLayout(kernels.avg_pool_grad, writes=(1,))
# 2x2 windows at stride 2, no padding, C-contiguous channels-first arrays (a CNN's pooling): kernels typed
# 'C', which vectorize (forward 2x, gradient 1.1-1.3x faster than 'A'); one more signature per dtype each.
MAX_POOL_2X2 = Signatures(kernels.max_pool_2x2, 4, "C")
MAX_POOL_GRAD_2X2 = Signatures(kernels.max_pool_grad_2x2, 4, "C")
PAIRS = ((2, 2), (2, 2), ((0, 0), (0, 0)))


def _contiguous_pairs(arrays, kernel_size, stride, padding, layout):
    """Whether the C-typed 2x2 kernels take these arrays: 2-D channels-first, 2x2 windows at stride 2,
    no padding, every array C-contiguous and of one dtype."""
    return (layout == "bchw" and (tuple(kernel_size), tuple(stride), tuple(padding)) == PAIRS
            and all(a.flags.c_contiguous and a.dtype == arrays[0].dtype for a in arrays))


def _bchw(array, layout, rank):
    view = array.transpose(layout_of("pool", layout, rank).to_channels_first)
    return view[:, :, None, :] if rank == 1 else view


def _window(kernel_size, stride, padding):
    """(kh, kw, sh, sw, ph, pw) of the 2-D kernels; a 1-D op has a height of 1."""
    if len(kernel_size) == 1:
        return 1, kernel_size[0], 1, stride[0], 0, padding[0][0]
    return kernel_size[0], kernel_size[1], stride[0], stride[1], padding[0][0], padding[1][0]


def _max_kernel(rank):
    def launch(x, out, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
        if not out.size:
            return
        if _contiguous_pairs((x, out), kernel_size, stride, padding, layout):
            writable(out)
            MAX_POOL_2X2((x.dtype, out.dtype))(x, out)
        else:
            MAX_POOL(_bchw(x, layout, rank), _bchw(out, layout, rank), *_window(kernel_size, stride, padding))
    return launch


def _avg_kernel(rank):
    def launch(x, out, *, kernel_size, stride, padding, count_include_pad=True, layout=spatial.LAYOUTS[rank][0]):
        if out.size:
            AVG_POOL(_bchw(x, layout, rank), _bchw(out, layout, rank), *_window(kernel_size, stride, padding),
                     count_include_pad)
    return launch


def _max_grad_kernel(rank):
    def launch(x, grad, out, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
        if not out.size:
            return
        if _contiguous_pairs((x, grad, out), kernel_size, stride, padding, layout):
            writable(out)
            MAX_POOL_GRAD_2X2((x.dtype, grad.dtype, out.dtype))(x, grad, out)
        else:
            MAX_POOL_GRAD(_bchw(x, layout, rank), _bchw(grad, layout, rank), _bchw(out, layout, rank),
                          *_window(kernel_size, stride, padding))
    return launch


def _select_kernel(rank):
    def launch(x, values, out, *, kernel_size, stride, padding, layout=spatial.LAYOUTS[rank][0]):
        if out.size:
            MAX_POOL_SELECT(_bchw(x, layout, rank), _bchw(values, layout, rank), _bchw(out, layout, rank),
                            *_window(kernel_size, stride, padding))
    return launch


def _avg_grad_kernel(rank):
    def launch(x, grad, out, *, kernel_size, stride, padding, count_include_pad=True, layout=spatial.LAYOUTS[rank][0]):
        if out.size:
            AVG_POOL_GRAD(_bchw(grad, layout, rank), _bchw(out, layout, rank),
                          *_window(kernel_size, stride, padding), count_include_pad)
    return launch


# --- NumPy references ----------------------------------------------------------------------------

def _windows(x, kernel_size, stride, padding, layout, fill):
    """x as float64 (b, c, oh, ow, kh, kw) windows of the padded channels-first input (1-D: oh = 1)."""
    rank = len(kernel_size)
    data = _bchw(np.asarray(x, dtype=np.float64), layout, rank)
    kh, kw, sh, sw, _, _ = _window(kernel_size, stride, padding)
    pads = ((0, 0), (0, 0)) + (((0, 0),) if rank == 1 else ()) + tuple(padding)
    padded = np.pad(data, pads, constant_values=fill)
    return sliding_window_view(padded, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw]


def _back(result, like, layout):
    """A (b, c, oh, ow) result in x's layout (the height of 1 dropped for 1-D)."""
    rank = len(layout) - 2
    result = result[:, :, 0] if rank == 1 else result
    return result.transpose(layout_of("pool", layout, rank).from_channels_first).astype(like.dtype)


def _max_reference(x, kernel_size, stride, padding, layout):
    windows = _windows(x, kernel_size, stride, padding, layout, -np.inf)
    return _back(windows.max(axis=(-2, -1)), x, layout)


def _avg_reference(x, kernel_size, stride, padding, count_include_pad, layout):
    sums = _windows(x, kernel_size, stride, padding, layout, 0.0).sum(axis=(-2, -1))
    if count_include_pad:
        counts = np.prod(kernel_size)
    else:
        counts = _windows(np.ones(x.shape), kernel_size, stride, padding, layout, 0.0).sum(axis=(-2, -1))
    return _back(sums / counts, x, layout)


def _argmax_positions(x, kernel_size, stride, padding, layout):
    """For each (b, c, i, j) of the output, the (h, w) of its window's first maximum in the channels-first x."""
    data = _bchw(np.asarray(x, dtype=np.float64), layout, len(kernel_size))
    kh, kw, sh, sw, ph, pw = _window(kernel_size, stride, padding)
    windows = _windows(x, kernel_size, stride, padding, layout, -np.inf)
    flat = windows.reshape(windows.shape[:4] + (kh * kw,)).argmax(axis=-1)
    i, j = np.indices(windows.shape[2:4])
    return data, i * sh - ph + flat // kw, j * sw - pw + flat % kw


def _max_grad_reference(x, grad, kernel_size, stride, padding, layout):
    data, rows, cols = _argmax_positions(x, kernel_size, stride, padding, layout)
    g = _bchw(np.asarray(grad, dtype=np.float64), layout, len(kernel_size))
    out = np.zeros(data.shape)
    for b in range(data.shape[0]):
        for c in range(data.shape[1]):
            np.add.at(out[b, c], (rows[b, c], cols[b, c]), g[b, c])
    return _back(out, x, layout)


def _select_reference(x, values, kernel_size, stride, padding, layout):
    data, rows, cols = _argmax_positions(x, kernel_size, stride, padding, layout)
    v = _bchw(np.asarray(values, dtype=np.float64), layout, len(kernel_size))
    batch, channels = np.indices(rows.shape[:2])
    return _back(v[batch[:, :, None, None], channels[:, :, None, None], rows, cols], values, layout)


def _avg_grad_reference(x, grad, kernel_size, stride, padding, count_include_pad, layout):
    rank = len(kernel_size)
    g = _bchw(np.asarray(grad, dtype=np.float64), layout, rank)
    shape = _bchw(np.empty(x.shape), layout, rank).shape
    kh, kw, sh, sw, ph, pw = _window(kernel_size, stride, padding)
    out = np.zeros((shape[0], shape[1], shape[2] + kh + ph * 2, shape[3] + kw + pw * 2))
    ones = np.pad(np.ones(shape[2:]), ((ph, kh + ph), (pw, kw + pw)))
    for i in range(g.shape[2]):
        for j in range(g.shape[3]):
            h0, w0 = i * sh, j * sw
            count = kh * kw if count_include_pad else ones[h0:h0 + kh, w0:w0 + kw].sum()
            out[:, :, h0:h0 + kh, w0:w0 + kw] += g[:, :, i:i + 1, j:j + 1] / count
    return _back(out[:, :, ph:ph + shape[2], pw:pw + shape[3]], grad, layout)


# --- samples ---------------------------------------------------------------------------------------

def _cases(rank):
    """(x, attrs, label): float64 and float32, both layouts, stride > kernel, overlapping windows,
    padding, transposed and strided inputs; normal values, so no window holds a tie."""
    r = np.random.default_rng(18 + rank)
    first, last = spatial.LAYOUTS[rank]
    cases = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        if rank == 2:
            x = r.normal(size=(2, 3, 7, 6)).astype(dtype)
            cases += [(x, dict(kernel_size=(2, 2), stride=(2, 2), padding=((0, 0), (0, 0)), layout=first), f"2x2 {name}"),
                      (x, dict(kernel_size=(3, 2), stride=(1, 2), padding=((1, 1), (0, 0)), layout=first),
                       f"overlapping, padded {name}"),
                      (x, dict(kernel_size=(2, 3), stride=(4, 3), padding=((1, 1), (1, 1)), layout=first),
                       f"stride > kernel {name}"),
                      (transposed(x), dict(kernel_size=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)), layout=last),
                       f"{last} transposed {name}"),
                      (strided(x), dict(kernel_size=(2, 2), stride=(1, 1), padding=((1, 1), (0, 0)), layout=first),
                       f"strided {name}")]
        else:
            x = r.normal(size=(2, 3, 9)).astype(dtype)
            cases += [(x, dict(kernel_size=(2,), stride=(2,), padding=((0, 0),), layout=first), f"k2 {name}"),
                      (x, dict(kernel_size=(3,), stride=(1,), padding=((1, 1),), layout=first), f"overlapping {name}"),
                      (x, dict(kernel_size=(2,), stride=(3,), padding=((1, 1),), layout=first), f"stride > kernel {name}"),
                      (transposed(x), dict(kernel_size=(4,), stride=(2,), padding=((2, 2),), layout=last),
                       f"{last} transposed {name}"),
                      (strided(x), dict(kernel_size=(3,), stride=(2,), padding=((0, 0),), layout=first), f"strided {name}")]
    return cases


def _forward_samples(rank, avg):
    def samples():
        result = []
        for number, (x, attrs, label) in enumerate(_cases(rank)):
            if avg:
                attrs = dict(attrs, count_include_pad=number % 2 == 0)
                label += ", count_include_pad" if number % 2 == 0 else ""
            result.append(Sample((x,), attrs, label=label))
        shape = (0, 2, 4) + ((4,) if rank == 2 else ())
        result.append(Sample((np.zeros(shape),), dict(_cases(rank)[0][1], **({"count_include_pad": True} if avg else {})),
                             label="empty batch"))
        return result
    return samples


def _grad_samples(rank, avg, select=False):
    forward = _forward_samples(rank, avg)
    reference = _avg_reference if avg else _max_reference

    def samples():
        r = np.random.default_rng(20 + rank)
        result = []
        for sample in forward():
            x = sample.inputs[0]
            like = x if select else reference(x, **sample.attrs)
            result.append(Sample((x, r.normal(size=like.shape).astype(x.dtype)), sample.attrs, label=sample.label,
                                 constant_inputs=(0,)))
        return result
    return samples


# --- declarations ----------------------------------------------------------------------------------

def _attrs(rank, avg):
    declared = {"kernel_size": Ints(rank), "stride": Ints(rank), "padding": Pads(rank), "layout": spatial.layout_name(rank)}
    return dict(declared, count_include_pad=attributes.Bool()) if avg else declared


def _kernel_sizes(in_shapes, attrs):
    return attrs["kernel_size"]


def _same_dims(in_dims, in_shapes, attrs, out_shape):
    return in_dims[0]


def _declare(rank):
    """The ops of ``rank`` spatial axes: (max_pool, max_pool_grad, max_pool_select, avg_pool, avg_pool_grad)."""
    names = f"max_pool{rank}d", f"avg_pool{rank}d"
    dims = spatial.dims_rule(rank, _kernel_sizes, keep_channels=True)
    layouts = " or ".join(map(repr, spatial.LAYOUTS[rank]))
    common = dict(promote="same", accepts=dtypes.FLOATS, family="pool")
    max_pool = defop(names[0], shape=_max_shape_rule(names[0], rank), kernel=_max_kernel(rank),
                     samples=_forward_samples(rank, False), reference=_max_reference, attrs=_attrs(rank, False),
                     dims=dims, doc=f"Max pooling of x ({layouts}) as PyTorch's {names[0]}; its gradient is "
                     f"{names[0]}_grad, a dedicated kernel (differentiable).", **common)
    max_grad = defop(f"{names[0]}_grad", shape=_grad_shape_rule(f"{names[0]}_grad", rank, False),
                     kernel=_max_grad_kernel(rank), samples=_grad_samples(rank, False),
                     reference=_max_grad_reference, attrs=_attrs(rank, False), dims=_same_dims,
                     doc=f"{names[0]}'s gradient: grad added at each window's first maximum in x; its gradient "
                     f"is {names[0]}_select.", **common)
    select = defop(f"{names[0]}_select", shape=_select_shape_rule(f"{names[0]}_select", rank),
                   kernel=_select_kernel(rank), samples=_grad_samples(rank, False, select=True),
                   reference=_select_reference, attrs=_attrs(rank, False), dims=dims,
                   doc=f"values (x's shape) at the first maximum of each {names[0]} window of x; its gradient "
                   f"is {names[0]}_grad.", **common)
    avg_pool = defop(names[1], shape=_avg_shape_rule(names[1], rank), kernel=_avg_kernel(rank),
                     samples=_forward_samples(rank, True), reference=_avg_reference, attrs=_attrs(rank, True),
                     dims=dims, doc=f"Average pooling of x ({layouts}) as PyTorch's {names[1]} (count_include_pad); "
                     f"its gradient is {names[1]}_grad, a dedicated kernel (differentiable).", **common)
    avg_grad = defop(f"{names[1]}_grad", shape=_grad_shape_rule(f"{names[1]}_grad", rank, True),
                     kernel=_avg_grad_kernel(rank), samples=_grad_samples(rank, True),
                     reference=_avg_grad_reference, attrs=_attrs(rank, True), dims=_same_dims,
                     doc=f"{names[1]}'s gradient: grad spread over each window (x gives only the shape); its "
                     f"gradient is {names[1]}.", **common)
    return max_pool, max_grad, select, avg_pool, avg_grad


max_pool1d_op, max_pool1d_grad, max_pool1d_select, avg_pool1d_op, avg_pool1d_grad = _declare(1)
max_pool2d_op, max_pool2d_grad, max_pool2d_select, avg_pool2d_op, avg_pool2d_grad = _declare(2)


def _pool_attrs(op, rank, kernel_size, stride, padding):
    kernel_size = tuple_of(op, "kernel_size", kernel_size, rank)
    stride = kernel_size if stride is None else tuple_of(op, "stride", stride, rank)
    return dict(kernel_size=kernel_size, stride=stride, padding=padding_pairs(op, padding, rank, kernel_size, None, stride))


@public("nn")
def max_pool1d(x, kernel_size, stride=None, padding=0, layout="bcw", *, name=None):
    """Max pooling as PyTorch's max_pool1d: x in layout 'bcw' or 'bwc'; stride defaults to kernel_size;
    padding (at most half the kernel) is -inf."""
    graph_of((x,), "max_pool1d")
    return max_pool1d_op(x, name=name, layout=layout, **_pool_attrs("max_pool1d", 1, kernel_size, stride, padding))


@public("nn")
def max_pool2d(x, kernel_size, stride=None, padding=0, layout="bchw", *, name=None):
    """Max pooling as PyTorch's max_pool2d: x in layout 'bchw' or 'bhwc'; stride defaults to kernel_size;
    padding (at most half the kernel) is -inf."""
    graph_of((x,), "max_pool2d")
    return max_pool2d_op(x, name=name, layout=layout, **_pool_attrs("max_pool2d", 2, kernel_size, stride, padding))


@public("nn")
def avg_pool1d(x, kernel_size, stride=None, padding=0, count_include_pad=True, layout="bcw", *, name=None):
    """Average pooling as PyTorch's avg_pool1d: x in layout 'bcw' or 'bwc'; the zero padding counts in the
    divisor when count_include_pad."""
    graph_of((x,), "avg_pool1d")
    return avg_pool1d_op(x, name=name, layout=layout, count_include_pad=count_include_pad,
                         **_pool_attrs("avg_pool1d", 1, kernel_size, stride, padding))


@public("nn")
def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True, layout="bchw", *, name=None):
    """Average pooling as PyTorch's avg_pool2d: x in layout 'bchw' or 'bhwc'; the zero padding counts in the
    divisor when count_include_pad."""
    graph_of((x,), "avg_pool2d")
    return avg_pool2d_op(x, name=name, layout=layout, count_include_pad=count_include_pad,
                         **_pool_attrs("avg_pool2d", 2, kernel_size, stride, padding))


# --- global average pooling ----------------------------------------------------------------------------

def _global_window(x, layout):
    rank = len(layout) - 2
    x4 = _bchw(x, layout, rank)
    return x4, (x4.shape[2], x4.shape[3], 1, 1, 0, 0)


def _global_shape(x, *, layout="bchw"):
    where = _layout("global_avg_pool", x, layout, len(layout) - 2)
    return x[where.batch], x[where.channel]


def _global_kernel(x, out, *, layout="bchw"):
    if out.size:
        x4, window = _global_window(x, layout)
        AVG_POOL(x4, out[:, :, None, None], *window, True)


def _global_grad_shape(x, grad, *, layout="bchw"):
    pooled = _global_shape(x, layout=layout)
    if len(grad) != 2 or any(a is not None and b is not None and a != b for a, b in zip(grad, pooled)):
        raise ShapeError(f"global_avg_pool_grad: the gradient's shape {format_shape(grad)} is not "
                         f"{format_shape(pooled)}")
    return x


def _global_grad_kernel(x, grad, out, *, layout="bchw"):
    if out.size:
        out4, window = _global_window(out, layout)
        AVG_POOL_GRAD(grad[:, :, None, None], out4, *window, True)


def _global_reference(x, layout="bchw"):
    where = layout_of("global_avg_pool", layout, len(layout) - 2)
    return x.astype(np.float64).mean(axis=where.spatial).astype(x.dtype)


def _global_grad_reference(x, grad, layout="bchw"):
    where = layout_of("global_avg_pool", layout, len(layout) - 2)
    count = np.prod([x.shape[a] for a in where.spatial])
    shape = [1] * x.ndim
    shape[where.batch], shape[where.channel] = grad.shape
    return np.broadcast_to(grad.reshape(shape) / count, x.shape).astype(grad.dtype)


def _global_samples():
    r = np.random.default_rng(22)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        x = r.normal(size=(2, 3, 4, 5)).astype(dtype)
        samples += [Sample((x,), {"layout": "bchw"}, label=f"bchw {name}"),
                    Sample((transposed(x),), {"layout": "bhwc"}, label=f"bhwc transposed {name}"),
                    Sample((strided(x[:, :, 0]),), {"layout": "bcw"}, label=f"bcw strided {name}"),
                    Sample((x[:, 0],), {"layout": "bwc"}, label=f"bwc {name}")]
    samples.append(Sample((np.zeros((0, 3, 2, 2)),), {"layout": "bchw"}, label="empty batch"))
    return samples


def _global_grad_samples():
    r = np.random.default_rng(23)
    return [Sample((s.inputs[0], r.normal(size=_global_reference(s.inputs[0], **s.attrs).shape).astype(
        s.inputs[0].dtype)), s.attrs, label=s.label, constant_inputs=(0,)) for s in _global_samples()]


def _global_dims(in_dims, in_shapes, attrs, out_shape):
    where = layout_of("global_avg_pool", attrs["layout"], len(attrs["layout"]) - 2)
    return in_dims[0][where.batch], in_dims[0][where.channel]


global_avg_pool_op = defop(
    "global_avg_pool", shape=_global_shape, kernel=_global_kernel, promote="same", accepts=dtypes.FLOATS,
    samples=_global_samples, reference=_global_reference, family="pool", attrs={"layout": attributes.OneOf(GLOBAL_LAYOUTS)},
    dims=_global_dims, doc="The mean over the spatial axes of x ('bcw', 'bwc', 'bchw' or 'bhwc'): (batch, channels). "
    "Its gradient is global_avg_pool_grad, a dedicated kernel (differentiable).")
global_avg_pool_grad = defop(
    "global_avg_pool_grad", shape=_global_grad_shape, kernel=_global_grad_kernel, promote="same",
    accepts=dtypes.FLOATS, samples=_global_grad_samples, reference=_global_grad_reference, family="pool",
    attrs={"layout": attributes.OneOf(GLOBAL_LAYOUTS)}, dims=_same_dims,
    doc="global_avg_pool's gradient: grad / (spatial size) over x's shape; its gradient is global_avg_pool.")


@public("nn")
def global_avg_pool(x, layout=None, *, name=None):
    """The mean over the spatial axes: (batch, channels). ``layout``: 'bchw' (the default for rank 4), 'bhwc',
    'bcw' (the default for rank 3) or 'bwc'."""
    graph_of((x,), "global_avg_pool")
    if layout is None:
        layout = {3: "bcw", 4: "bchw"}.get(x.rank, "bchw")
    return global_avg_pool_op(x, name=name, layout=layout)
