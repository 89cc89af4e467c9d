"""LSTM, GRU and MultiHeadAttention layers over the fused ops (ADR 0023; the ops: ADRs 0020, 0021)."""
import numpy as np

from graphview import init as initializers
from graphview.errors import OpArgumentError
from graphview.indexing import interval, point
from graphview.indexing import all as every
from graphview.layouts import table
from graphview.ops.recurrent import LAYOUTS
from graphview.layers.base import Layer, flag, float_dtype, positive_int, static_size



class _Recurrent(Layer):
    gates, op = None, None

    def __init__(self, units, return_sequences=False, layout=None, kernel_init=None, dtype=None, *, bias_init=None,
                 name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.units = positive_int(self, "units", units)
        if layout is not None and layout not in LAYOUTS:
            raise OpArgumentError(f"{type(self).__name__}: layout must be 'btf' or 'tbf', not {layout!r}")
        self.return_sequences = flag(self, "return_sequences", return_sequences)
        self.layout, self.dtype = layout, dtype
        self.kernel_init = initializers.get(kernel_init or initializers.fan_in_uniform())
        self.bias_init = initializers.get(bias_init or initializers.fan_in_uniform())

    def build(self, x, lengths=None):
        features = static_size(self, x, len(x.shape) - 1, "feature")
        dtype, rows, fans = float_dtype(self, x, self.dtype), self.gates * self.units, (self.units, self.units)
        self.weight_ih = self.add_variable("weight_ih", (rows, features), dtype, self.kernel_init, fans)
        self.weight_hh = self.add_variable("weight_hh", (rows, self.units), dtype, self.kernel_init, fans)
        self.bias_ih = self.add_variable("bias_ih", (rows,), dtype, self.bias_init, fans)
        self.bias_hh = self.add_variable("bias_hh", (rows,), dtype, self.bias_init, fans)
        self.zeros = self.graph.constant("zeros", np.zeros((1, self.units), dtype))

    def layout_of(self, x):
        """The layout given, else the one x's Dims say ('tbf' when its batch Dim is axis 1), else 'btf'; a
        layout that contradicts the Dims is refused (it would read the time axis as the batch)."""
        dims = table.dims_of(x) or ()
        batch = [axis for axis, dim in enumerate(dims) if dim is not None and dim.kind == "batch"]
        from_dims = {0: "btf", 1: "tbf"}.get(batch[0]) if batch else None
        if batch and from_dims is None:
            raise OpArgumentError(f"{self.describe()}: {x.name!r} has its batch Dim at axis {batch[0]}; a recurrent "
                                  "layer reads (batch, time, features) or (time, batch, features)")
        if self.layout is not None and from_dims is not None and self.layout != from_dims:
            raise OpArgumentError(f"{self.describe()}: layout {self.layout!r} but {x.name!r}'s Dims put the batch at "
                                  f"axis {batch[0]}, which is layout {from_dims!r}; give layout={from_dims!r} or "
                                  "leave layout out")
        return self.layout or from_dims or "btf"

    def zero_state(self, x, layout):
        """A (batch, units) zero state for x's batch, whatever its size: the zero row broadcast along a
        (batch, 1) view of x (the view's values, even NaN, do not reach it)."""
        g = x.graph
        batch = (every(), point(0), interval(0, 1)) if layout == "btf" else (point(0), every(), interval(0, 1))
        column = g.create_view(x, *batch)
        return g.math.where(g.math.eq(column, column), self.zeros, self.zeros)

    def forward(self, x, lengths=None):
        outputs, h_n = self.run(x, lengths, self.layout_of(x))
        return outputs if self.return_sequences else h_n


class LSTM(_Recurrent):
    """PyTorch's nn.LSTM (one layer, zero initial states) as a layer: ``g.nn.lstm``, one fused op over all
    steps. Returns the last valid step's hidden state (batch, units), or every step's outputs with
    ``return_sequences=True``. Lengths come from x's time Dim, or ``layer(x, lengths=...)``; padding steps
    never reach the result. Initial values U(-1/sqrt(units), 1/sqrt(units)) as PyTorch, unless ``kernel_init``
    (weight_ih, weight_hh) or ``bias_init`` (bias_ih, bias_hh) say otherwise."""
    gates = 4

    def run(self, x, lengths, layout):
        zeros = self.zero_state(x, layout)
        outputs, h_n, _ = x.graph.nn.lstm(x, zeros, zeros, self.weight_ih, self.weight_hh, self.bias_ih,
                                          self.bias_hh, lengths=lengths, layout=layout)
        return outputs, h_n


class GRU(_Recurrent):
    """PyTorch's nn.GRU (one layer, zero initial state) as a layer: ``g.nn.gru``, one fused op; returns
    as :class:`LSTM` does."""
    gates = 3

    def run(self, x, lengths, layout):
        return x.graph.nn.gru(x, self.zero_state(x, layout), self.weight_ih, self.weight_hh, self.bias_ih,
                              self.bias_hh, lengths=lengths, layout=layout)


class MultiHeadAttention(Layer):
    """PyTorch's nn.MultiheadAttention(embed_dim, num_heads, batch_first=True) as a layer:
    ``layer(query, key=None, value=None, mask=None, causal=False)`` (self-attention when key and value are
    not given), over ``g.nn.multi_head_attention``. embed_dim is the query's last axis. Initial values as
    PyTorch: Xavier-uniform projections (fans of the packed (3D, D) matrix), an out projection as
    nn.Linear, zero biases. A key Dim with lengths masks the padded keys; ``mask`` is True = attend."""

    def __init__(self, num_heads, use_bias=True, causal=False, dtype=None, *, name=None, seed=None):
        super().__init__(name=name, seed=seed)
        self.heads = positive_int(self, "num_heads", num_heads)
        self.use_bias, self.causal = flag(self, "use_bias", use_bias), flag(self, "causal", causal)
        self.dtype = dtype

    def build(self, query, key=None, value=None, mask=None, causal=None):
        key = query if key is None else key
        value = key if value is None else value
        d = static_size(self, query, len(query.shape) - 1, "feature")
        if d % self.heads:
            raise OpArgumentError(f"{self.describe()}: {self.heads} heads do not divide embed_dim {d}")
        dtype = float_dtype(self, query, self.dtype)
        packed = (d, 3 * d)
        d_k = static_size(self, key, len(key.shape) - 1, "key feature")       # both checked before any variable
        d_v = static_size(self, value, len(value.shape) - 1, "value feature")
        self.w_q = self.add_variable("w_q", (d, d), dtype, initializers.glorot_uniform(), packed)
        self.w_k = self.add_variable("w_k", (d, d_k), dtype, initializers.glorot_uniform(), packed)
        self.w_v = self.add_variable("w_v", (d, d_v), dtype, initializers.glorot_uniform(), packed)
        self.w_o = self.add_variable("w_o", (d, d), dtype, initializers.fan_in_uniform(), (d, d))
        self.biases = [self.add_variable(f"b_{part}", (d,), dtype, initializers.zeros()) if self.use_bias else None
                       for part in "qkvo"]

    def forward(self, query, key=None, value=None, mask=None, causal=None):
        key = query if key is None else key
        value = key if value is None else value
        b_q, b_k, b_v, b_o = self.biases
        return query.graph.nn.multi_head_attention(
            query, key, value, self.heads, self.w_q, self.w_k, self.w_v, self.w_o, b_q, b_k, b_v, b_o,
            mask=mask, causal=self.causal if causal is None else flag(self, "causal", causal))
