"""Gradient rules of the fused recurrent ops (graphview/ops/recurrent.py, ADR 0020).

The gradient of the packed result (every section: the views the public functions return scatter
into it) goes through one backpropagation-through-time op, which gives x's gradient too, then one op
for the weight gradients of all steps. The pieces are views, cut by the hidden size only (the weight
gradients' columns count from the end), so the number of features may be unknown when built.
"""
from graphview.ops.recurrent import gru_op, lstm_op
from graphview.ops.recurrent_backward import gru_backward, gru_weight_gradients, lstm_backward, \
    lstm_weight_gradients
from graphview.ops.shape import permute
from graphview.registry import defvjp


def _input_gradient(gates, hidden, layout):
    """dx: the columns after the gate gradients of every step, in x's layout."""
    dx = gates[:-1, :, 4 * hidden:]
    return permute(dx, (1, 0, 2)) if layout == "btf" else dx


def _lstm(grad, out, x, h0, c0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden = w_hh.shape[1]                      # static: the forward op refuses an unknown one
    gates = lstm_backward(grad, out, h0, c0, w_hh, w_ih, *lengths)
    weights = lstm_weight_gradients(gates, x, h0, out, layout=layout)   # (4H, F + H + 1)
    bias = weights[:, -1]
    return (_input_gradient(gates, hidden, layout), gates[-1, :, :hidden],
            gates[-1, :, hidden:2 * hidden], weights[:, :-(hidden + 1)], weights[:, -(hidden + 1):-1],
            bias, bias) + (None,) * len(lengths)


def _gru(grad, out, x, h0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden = w_hh.shape[1]
    gates = gru_backward(grad, out, h0, w_hh, w_ih, *lengths)
    weights = gru_weight_gradients(gates, x, h0, out, layout=layout)    # (3H, F + H + 2)
    return (_input_gradient(gates, hidden, layout), gates[-1, :, :hidden],
            weights[:, :-(hidden + 2)], weights[:, -(hidden + 2):-2], weights[:, -2],
            weights[:, -1]) + (None,) * len(lengths)


defvjp(lstm_op, _lstm)
defvjp(gru_op, _gru)
