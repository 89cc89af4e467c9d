"""BatchNorm and LayerNorm layers (ADR 0023; the ops and their state updates: ADR 0019)."""
from graphview import init as initializers
from graphview.dims import Dim
from graphview.errors import GraphviewError, OpArgumentError
from graphview.layers.base import Layer, float_dtype, static_size
from graphview.layers.basic import feature_axis
from graphview.ops.spatial import LAYOUTS, layout_of

# The channel axis of each layout name a layer takes: the image layouts' (ops/spatial.py) and the
# recurrent ones' features ('btf', 'tbf'), and 'bf'.
CHANNEL_AXIS = {**{name: layout_of("BatchNorm", name, rank).channel for rank, names in LAYOUTS.items()
                   for name in names}, "btf": 2, "tbf": 2, "bf": 1}


class BatchNorm(Layer):
    """PyTorch's BatchNorm1d/2d: ``g.nn.batch_norm`` over the channels on ``axis`` (1, or -1 for a
    channels-last ``layout`` such as 'bhwc'; an int or a Dim), with a learned scale (``weight``, ones)
    and shift (``bias``, zeros) and running statistics (zeros and ones) that are variables made with
    ``trainable=False``: updated in place by training steps, used by ``g.predict``, ``g.evaluate`` and
    every run outside training. A BatchNorm layer cannot be shared (its running statistics have one
    update per training step)."""

    def __init__(self, axis=None, momentum=0.1, eps=1e-5, layout=None, dtype=None, *, name=None):
        super().__init__(name=name)
        if axis is not None and layout is not None:
            raise OpArgumentError("BatchNorm: give axis or layout, not both")
        if layout is not None and layout not in CHANNEL_AXIS:
            raise OpArgumentError(f"BatchNorm: layout {layout!r} is not one of {', '.join(map(repr, CHANNEL_AXIS))}")
        self.axis = axis if axis is not None else (CHANNEL_AXIS[layout] if layout is not None else 1)
        self.momentum, self.eps, self.dtype = momentum, eps, dtype

    def build(self, x):
        channels = static_size(self, x, feature_axis(self, x, self.axis), "channel")
        dtype = float_dtype(self, x, self.dtype)
        self.gamma = self.add_variable("weight", (channels,), dtype, initializers.ones())
        self.beta = self.add_variable("bias", (channels,), dtype, initializers.zeros())
        self.running_mean = self.add_variable("running_mean", (channels,), dtype, initializers.zeros(),
                                              trainable=False)
        self.running_var = self.add_variable("running_var", (channels,), dtype, initializers.ones(), trainable=False)

    def forward(self, x):
        if self.graph.layers[self.name]["calls"]:
            raise GraphviewError(f"{self.describe()} is called a second time; a BatchNorm layer's running "
                                 "statistics have one update per training step, so each use needs its own layer")
        axis = self.axis if isinstance(self.axis, Dim) else feature_axis(self, x, self.axis)
        return x.graph.nn.batch_norm(x, self.gamma, self.beta, self.running_mean, self.running_var, axis=axis,
                                     momentum=self.momentum, eps=self.eps)


class LayerNorm(Layer):
    """PyTorch's nn.LayerNorm: ``g.nn.layer_norm`` over ``axis`` (the last by default; an int, a tuple
    or Dims), with a scale (ones) and shift (zeros) of the normalized axes' shape."""

    def __init__(self, axis=-1, eps=1e-5, dtype=None, *, name=None):
        super().__init__(name=name)
        self.axis, self.eps, self.dtype = axis, eps, dtype

    def _axes(self, x):
        axes = self.axis if isinstance(self.axis, (tuple, list)) else (self.axis,)
        return tuple(feature_axis(self, x, a) for a in axes)

    def build(self, x):
        shape = tuple(static_size(self, x, a, "normalized") for a in self._axes(x))
        dtype = float_dtype(self, x, self.dtype)
        self.gamma = self.add_variable("weight", shape, dtype, initializers.ones())
        self.beta = self.add_variable("bias", shape, dtype, initializers.zeros())

    def forward(self, x):
        axes = self._axes(x)
        return x.graph.nn.layer_norm(x, self.gamma, self.beta, axis=axes if len(axes) > 1 else axes[0], eps=self.eps)


__all__ = ["BatchNorm", "LayerNorm"]
