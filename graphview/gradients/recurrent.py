"""Gradient rules of the fused recurrent ops (graphview/ops/recurrent.py, ADR 0020).

The gradient of the packed result (every section: the views the public functions return scatter
into it) goes through one backpropagation-through-time op, then one op for the weight gradients of
all steps; the input gradient is one batched product with w_ih. The pieces are views.
"""
from graphview.ops.linalg import matmul
from graphview.ops.recurrent import gru_backward, gru_op, gru_weight_gradients, lstm_backward, lstm_op, \
    lstm_weight_gradients
from graphview.ops.shape import permute
from graphview.registry import defvjp


def _input_gradient(gates, w_ih, width, layout):
    """dx = (the input-side gate gradients of every step) @ w_ih, back in x's layout."""
    dx = matmul(gates[:-1, :, :width], w_ih)
    return permute(dx, (1, 0, 2)) if layout == "btf" else dx


def _lstm(grad, out, x, h0, c0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    gates = lstm_backward(grad, out, h0, c0, w_hh, *lengths)
    weights = lstm_weight_gradients(gates, x, h0, out, layout=layout)
    bias = weights[:, features + hidden]
    return (_input_gradient(gates, w_ih, 4 * hidden, layout), gates[-1, :, :hidden],
            gates[-1, :, hidden:2 * hidden], weights[:, :features], weights[:, features:features + hidden],
            bias, bias) + (None,) * len(lengths)


def _gru(grad, out, x, h0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden, features = w_hh.shape[1], w_ih.shape[1]
    gates = gru_backward(grad, out, h0, w_hh, *lengths)
    weights = gru_weight_gradients(gates, x, h0, out, layout=layout)
    return (_input_gradient(gates, w_ih, 3 * hidden, layout), gates[-1, :, :hidden],
            weights[:, :features], weights[:, features:features + hidden], weights[:, features + hidden],
            weights[:, features + hidden + 1]) + (None,) * len(lengths)


defvjp(lstm_op, _lstm)
defvjp(gru_op, _gru)
