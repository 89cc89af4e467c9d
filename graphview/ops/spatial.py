"""What the spatial ops (convolution, pooling) share: layouts, padding, output sizes and dims.

- **Layouts** are dp view names: ``b`` batch, ``c`` channel and the spatial axes ``h``, ``w``:
  'bcw'/'bwc' for 1-D ops, 'bchw'/'bhwc' for 2-D ones. :func:`layout_of` says which axis is which.
- **Padding** is an int, one int per spatial axis, one ``(before, after)`` pair per spatial axis,
  ``"valid"`` (none) or ``"same"`` (PyTorch's rule: ``dilation * (kernel - 1)`` in all, half before,
  and the odd one out after). :func:`padding_pairs` turns any of them into pairs, the form a node keeps.
- **Output sizes**: :func:`output_size` is ``(size + before + after - dilation * (kernel - 1) - 1)
  // stride + 1``, with an error naming the op when the kernel is larger than the padded input;
  :func:`transposed_size` is its inverse (transposed convolution).
- **Dims**: :func:`dims_rule` makes an op's dims rule (``defop(..., dims=...)``): batch kept, spatial
  dims derived by dim arithmetic (a stride-1 "same" convolution keeps its input's dims), channels
  kept or unknown.

The attribute declarations :class:`Ints`, :class:`Pads` and :func:`layout_name` check node attributes
when a node is built or loaded, and normalize ints to tuples.
"""
from dataclasses import dataclass
from functools import lru_cache

from graphview import attributes
from graphview.attributes import Attribute
from graphview.dims import Dim
from graphview.errors import OpArgumentError, ShapeError

LAYOUTS = {1: ("bcw", "bwc"), 2: ("bchw", "bhwc")}


@dataclass(frozen=True)
class Layout:
    """Where the batch, channel and spatial axes of a layout name are."""
    name: str
    batch: int
    channel: int
    spatial: tuple

    @property
    def channels_last(self):
        return self.channel == len(self.name) - 1

    @property
    def to_channels_first(self):
        """The permutation taking this layout to batch, channel, spatial axes."""
        return (self.batch, self.channel) + self.spatial

    @property
    def from_channels_first(self):
        """The permutation taking batch, channel, spatial axes back to this layout."""
        order = self.to_channels_first
        return tuple(order.index(i) for i in range(len(order)))


def layout_of(op, layout, spatial_rank):
    """The :class:`Layout` of ``layout`` for an op with ``spatial_rank`` spatial axes; an
    OpArgumentError naming the op and the layouts it takes otherwise."""
    names = LAYOUTS[spatial_rank]
    if not isinstance(layout, str) or layout not in names:
        raise OpArgumentError(f"{op}: layout {layout!r} is not one of {', '.join(map(repr, names))} "
                              "(b batch, c channel, h height, w width)")
    return _layout(layout)


@lru_cache(maxsize=None)
def _layout(name):
    """The Layout of a known layout name, made once (the kernels' launchers ask for it at every run)."""
    return Layout(name, name.index("b"), name.index("c"), tuple(i for i, a in enumerate(name) if a in "hw"))


def _ints(value, count, minimum, what):
    """``value`` (an int or ``count`` ints) as a tuple of ``count`` ints >= minimum, or attributes.Invalid."""
    items = (value,) * count if attributes.is_integer(value) else value
    if not isinstance(items, (tuple, list)) or len(items) != count or not all(map(attributes.is_integer, items)):
        raise attributes.Invalid(f"{value!r} is not an int or {count} int{'s' if count > 1 else ''}{what}")
    items = tuple(int(v) for v in items)
    if any(v < minimum for v in items):
        raise attributes.Invalid(f"{value!r} holds a value below {minimum}")
    return items


def _pairs(value, count):
    if isinstance(value, str):
        raise attributes.Invalid(f"{value!r} is not explicit padding (g.nn's functions resolve 'same' and 'valid')")
    if isinstance(value, (tuple, list)) and len(value) == count and all(isinstance(v, (tuple, list)) for v in value):
        return tuple(_ints(tuple(v), 2, 0, " (before, after)") for v in value)
    return tuple((p, p) for p in _ints(value, count, 0, " or (before, after) pairs"))


@dataclass(frozen=True)
class Ints(Attribute):
    """An int, or ``count`` ints, each >= ``minimum``; parsed to a tuple of ``count`` ints (stride, dilation)."""
    count: int = 2
    minimum: int = 1

    def parse(self, value):
        return _ints(value, self.count, self.minimum, "")


@dataclass(frozen=True)
class Pads(Attribute):
    """Explicit padding: an int, ``count`` ints or ``count`` (before, after) pairs, all >= 0; parsed to pairs."""
    count: int = 2

    def parse(self, value):
        return _pairs(value, self.count)


def layout_name(spatial_rank):
    """The declaration of a layout name of an op with ``spatial_rank`` spatial axes."""
    return attributes.OneOf(LAYOUTS[spatial_rank])


def tuple_of(op, what, value, count, minimum=1):
    """``value`` (an int or ``count`` ints) as a tuple; an OpArgumentError naming the op otherwise."""
    try:
        return _ints(value, count, minimum, "")
    except attributes.Invalid as problem:
        raise OpArgumentError(f"{op}: {what} {problem}") from None


def padding_pairs(op, padding, count, kernel=None, dilation=None, stride=None):
    """``padding`` as ``count`` (before, after) pairs. ``"same"`` needs the kernel (and dilation) and
    a stride of 1, as in PyTorch; an even total puts the extra pad after."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * count
        if padding != "same":
            raise OpArgumentError(f"{op}: padding {padding!r} is not an int, a tuple, 'same' or 'valid'")
        if stride is not None and any(s != 1 for s in stride):
            raise OpArgumentError(f"{op}: padding='same' needs stride 1 (as in PyTorch), got stride {stride}")
        dilation = dilation or (1,) * count
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    try:
        return _pairs(padding, count)
    except attributes.Invalid as problem:
        raise OpArgumentError(f"{op}: padding {problem}") from None


def output_size(op, axis, size, kernel, stride=1, pads=(0, 0), dilation=1, ceil_mode=False):
    """The output size along one spatial axis (None for an unknown ``size``); a ShapeError naming the
    op, the axis and the values when the (dilated) kernel is larger than the padded input.
    ``ceil_mode`` rounds up as PyTorch's pooling does (a last window must start inside the input
    or its leading padding)."""
    if size is None:
        return None
    span = dilation * (kernel - 1) + 1
    padded = size + pads[0] + pads[1]
    if padded < span:
        dilated = f", dilation {dilation}" if dilation != 1 else ""
        raise ShapeError(f"{op}: the kernel spans {span} along {axis} (kernel size {kernel}{dilated}) but the "
                         f"padded input has {padded} (size {size}, padding {pads[0]} + {pads[1]})")
    if not ceil_mode:
        return (padded - span) // stride + 1
    result = -(-(padded - span) // stride) + 1
    return result - 1 if (result - 1) * stride >= size + pads[0] else result


def transposed_size(op, axis, size, kernel, stride=1, pads=(0, 0), dilation=1, output_padding=0):
    """The output size of a transposed convolution along one axis: ``(size - 1) * stride - before -
    after + dilation * (kernel - 1) + output_padding + 1`` (None for an unknown ``size``)."""
    if size is None:
        return None
    result = (size - 1) * stride - pads[0] - pads[1] + dilation * (kernel - 1) + output_padding + 1
    if result <= 0:
        raise ShapeError(f"{op}: the output would have size {result} along {axis} (input {size}, kernel {kernel}, "
                         f"stride {stride}, padding {pads[0]} + {pads[1]}, dilation {dilation}, output_padding "
                         f"{output_padding})")
    return result


def output_dim(dim, kernel, stride=1, pads=(0, 0), dilation=1):
    """The dim of the output axis for an input axis of dim ``dim``, by dim arithmetic: ``dim + c``
    for stride 1 (``dim`` itself when the padding makes up for the kernel), else ``(dim + c') //
    stride + 1`` with ``c'`` chosen, for a static dim, so that the division is exact."""
    offset = pads[0] + pads[1] - dilation * (kernel - 1) - 1
    if stride == 1:
        return dim + (offset + 1)
    if dim.size is not None:
        offset -= (dim.size + offset) % stride
    return (dim + offset) // stride + 1


def transposed_dim(dim, kernel, stride=1, pads=(0, 0), dilation=1, output_padding=0):
    """The dim of a transposed convolution's output axis, by dim arithmetic."""
    offset = dilation * (kernel - 1) + output_padding + 1 - pads[0] - pads[1]
    if stride == 1:
        return dim + (offset - 1)
    return (dim + -1) * stride + offset


def dims_rule(spatial_rank, kernel_of, keep_channels=False, transposed=False):
    """A dims rule (``rule(in_dims, in_shapes, attrs, out_shape)``) for a spatial op whose input 0 is
    laid out as ``attrs["layout"]``: the batch dim is kept, the spatial dims are derived from the
    attributes ``stride``, ``padding``, ``dilation`` (and ``output_padding`` when ``transposed``)
    with the kernel sizes ``kernel_of(in_shapes, attrs)`` gives, and the channel dim is kept when
    ``keep_channels`` (pooling), else unknown."""
    def rule(in_dims, in_shapes, attrs, out_shape):
        layout = layout_of("dims", attrs.get("layout", LAYOUTS[spatial_rank][0]), spatial_rank)
        dims = in_dims[0]
        kernel = kernel_of(in_shapes, attrs)
        stride = attrs.get("stride") or (1,) * spatial_rank
        pads = attrs.get("padding") or ((0, 0),) * spatial_rank
        dilation = attrs.get("dilation") or (1,) * spatial_rank
        extra = attrs.get("output_padding") or (0,) * spatial_rank
        result = [None] * len(dims)
        result[layout.batch] = dims[layout.batch]
        if keep_channels:
            result[layout.channel] = dims[layout.channel]
        for i, axis in enumerate(layout.spatial):
            dim = dims[axis]
            if not isinstance(dim, Dim):
                continue
            if transposed:
                result[axis] = transposed_dim(dim, kernel[i], stride[i], pads[i], dilation[i], extra[i])
            else:
                result[axis] = output_dim(dim, kernel[i], stride[i], pads[i], dilation[i])
        return tuple(result)

    def derived_lengths(in_dims, in_shapes, attrs):
        """``[(output axis, input dim, offset, stride)]`` for each spatial axis whose output dim is
        ``(dim + offset) // stride + 1`` of a dynamic input dim: the lengths of that dim follow the
        same formula (RETURNN's), which the dims hook builds (graphview/layouts/table.derive_lengths)."""
        if transposed:
            return []
        layout = layout_of("dims", attrs.get("layout", LAYOUTS[spatial_rank][0]), spatial_rank)
        kernel = kernel_of(in_shapes, attrs)
        stride = attrs.get("stride") or (1,) * spatial_rank
        pads = attrs.get("padding") or ((0, 0),) * spatial_rank
        dilation = attrs.get("dilation") or (1,) * spatial_rank
        found = []
        for i, axis in enumerate(layout.spatial):
            dim = in_dims[0][axis]
            if isinstance(dim, Dim) and dim.size is None:
                offset = pads[i][0] + pads[i][1] - dilation[i] * (kernel[i] - 1) - 1
                found.append((axis, dim, offset, stride[i]))
        return found

    rule.derived_lengths = derived_lengths
    return rule
