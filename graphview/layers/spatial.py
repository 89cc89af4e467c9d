"""Convolution and pooling layers over 'bcw'/'bwc' (1-D) and 'bchw'/'bhwc' (2-D) layouts (ADR 0023)."""
import math

from graphview import init as initializers
from graphview.errors import OpArgumentError
from graphview.layers.base import Layer, flag, float_dtype, positive_int, static_size
from graphview.layers.basic import activation_of
from graphview.ops.spatial import LAYOUTS, layout_of, tuple_of

class _Conv(Layer):
    rank = None

    def __init__(self, filters, kernel_size, stride=1, padding=0, dilation=1, groups=1, use_bias=True,
                 activation=None, kernel_init=None, bias_init=None, layout=None, dtype=None, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        owner = type(self).__name__
        self.filters = positive_int(self, "filters", filters)
        self.kernel_size = tuple_of(owner, "kernel_size", kernel_size, self.rank)
        self.groups = positive_int(self, "groups", groups)
        if self.filters % self.groups:
            raise OpArgumentError(f"{owner}: filters {self.filters} is not divisible by groups {self.groups}")
        self.layout = layout_of(owner, layout or LAYOUTS[self.rank][0], self.rank).name
        self.options = {"stride": stride, "padding": padding, "dilation": dilation, "groups": self.groups,
                        "layout": self.layout}
        self.use_bias, self.dtype = flag(self, "use_bias", use_bias), dtype
        self.activation = activation_of(owner, activation)
        self.kernel_init = initializers.get(kernel_init or initializers.fan_in_uniform())
        self.bias_init = initializers.get(bias_init or initializers.fan_in_uniform())

    def build(self, x):
        channel_axis = layout_of(self.describe(), self.layout, self.rank).channel
        channels = static_size(self, x, channel_axis, "channel")
        if channels % self.groups:
            raise OpArgumentError(f"{self.describe()}: {x.name!r} has {channels} channels, not divisible by "
                                  f"groups {self.groups}")
        per_group = channels // self.groups
        receptive = math.prod(self.kernel_size)
        fans = (per_group * receptive, self.filters // self.groups * receptive)
        dtype = float_dtype(self, x, self.dtype)
        self.weight = self.add_variable("weight", (self.filters, per_group) + self.kernel_size, dtype,
                                        self.kernel_init, fans)
        self.bias = self.add_variable("bias", (self.filters,), dtype, self.bias_init, fans) if self.use_bias else None

    def forward(self, x):
        conv = x.graph.nn.conv1d if self.rank == 1 else x.graph.nn.conv2d
        y = conv(x, self.weight, self.bias, **self.options)
        return self.activation(y)


class Conv1D(_Conv):
    """PyTorch's nn.Conv1d as a layer: ``g.nn.conv1d`` with a (filters, in/groups, k) weight, initial values
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch. ``padding`` is an int, a pair, "same" or "valid"."""
    rank = 1


class Conv2D(_Conv):
    """PyTorch's nn.Conv2d as a layer: ``g.nn.conv2d`` with a (filters, in/groups, kh, kw) weight, initial
    values U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch. ``padding`` is an int, a tuple, "same" or "valid"."""
    rank = 2


class _Pool(Layer):
    rank, op = None, None

    def __init__(self, kernel_size, stride=None, padding=0, layout=None, *, name=None, **options):
        super().__init__(name=name)
        owner = type(self).__name__
        self.kernel_size = tuple_of(owner, "kernel_size", kernel_size, self.rank)
        self.options = {"stride": stride, "padding": padding,
                        "layout": layout_of(owner, layout or LAYOUTS[self.rank][0], self.rank).name, **options}

    def forward(self, x):
        return getattr(x.graph.nn, self.op)(x, self.kernel_size, **self.options)


class MaxPool1D(_Pool):
    """``g.nn.max_pool1d`` as a layer (stride defaults to kernel_size)."""
    rank, op = 1, "max_pool1d"


class MaxPool2D(_Pool):
    """``g.nn.max_pool2d`` as a layer (stride defaults to kernel_size)."""
    rank, op = 2, "max_pool2d"


class AvgPool1D(_Pool):
    """``g.nn.avg_pool1d`` as a layer (``count_include_pad=True`` as PyTorch)."""
    rank, op = 1, "avg_pool1d"

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True, layout=None, *, name=None):
        super().__init__(kernel_size, stride, padding, layout, name=name, count_include_pad=count_include_pad)


class AvgPool2D(_Pool):
    """``g.nn.avg_pool2d`` as a layer (``count_include_pad=True`` as PyTorch)."""
    rank, op = 2, "avg_pool2d"

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True, layout=None, *, name=None):
        super().__init__(kernel_size, stride, padding, layout, name=name, count_include_pad=count_include_pad)


class GlobalAvgPool(Layer):
    """The mean over every spatial axis: (batch, channels) (``g.nn.global_avg_pool``)."""

    def __init__(self, layout=None, *, name=None):
        super().__init__(name=name)
        self.layout = layout

    def forward(self, x):
        return x.graph.nn.global_avg_pool(x, layout=self.layout)

