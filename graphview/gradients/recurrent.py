"""Gradient rules of the fused recurrent ops (graphview/ops/recurrent.py, ADR 0020).

The gradient of the packed result goes through one backpropagation-through-time op, which gives x's
gradient too, then one op for the weight gradients of all steps. The public results read the packed
result through one view of its state columns, so their gradients reach the op as one scatter of those
columns into zeros of the packed shape; the rule then gives the backward op the scattered values alone
(and when only the outputs have a gradient, theirs alone), so the zeros are neither built nor read. Any
other gradient of the packed result (a gradient check of the op itself) is taken whole. When h0 needs no
gradient (a constant), the backward op skips the product that only dh0 needs. The pieces are views, cut
by the hidden size only (the weight gradients' columns count from the end), so the number of features
may be unknown when built.
"""
from graphview.ops.recurrent import gru_op, lstm_op, state_columns, step_rows
from graphview.ops.recurrent_backward import gru_backward, gru_weight_gradients, lstm_backward, \
    lstm_weight_gradients
from graphview.ops.shape import permute
from graphview.registry import defvjp
from graphview.rule_context import needs_gradient


def _input_gradient(gates, hidden, layout):
    """dx: the columns after the gate gradients of every step, in x's layout."""
    dx = gates[:-1, :, 4 * hidden:]
    return permute(dx, (1, 0, 2)) if layout == "btf" else dx


def _scattered(grad, descriptors):
    """The values ``grad`` scatters through ``descriptors`` when it is such a scatter (the gradient of that
    view: zeros of its input's shape but there), else None."""
    node = grad.node
    if node.op == "scatter_view" and node.attributes["descriptors"] == descriptors:
        return grad.graph[node.inputs[0]]
    return None


def _public_gradient(grad, states, hidden):
    """What the backward op takes of ``grad``: the state columns' gradient (T + 1, B, states * H) when ``grad``
    is its scatter (the public results read the packed result through that view), and the steps' h rows'
    (T, B, H) when that in turn is their scatter alone (only the outputs have a gradient); else ``grad``."""
    columns = _scattered(grad, state_columns(states * hidden))
    if columns is None:
        return grad
    steps = _scattered(columns, step_rows(hidden))
    return columns if steps is None else steps


def _lstm(grad, out, x, h0, c0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden = w_hh.shape[1]                      # static: the forward op refuses an unknown one
    wanted = needs_gradient(h0)     # not for constant initial states: no product for dh0
    gates = lstm_backward(_public_gradient(grad, 2, hidden), out, h0, c0, w_hh, w_ih, *lengths, h0_gradient=wanted)
    weights = lstm_weight_gradients(gates, x, h0, out, layout=layout)   # (4H, F + H + 1)
    bias = weights[:, -1]
    return (_input_gradient(gates, hidden, layout), gates[-1, :, :hidden] if wanted else None,
            gates[-1, :, hidden:2 * hidden], weights[:, :-(hidden + 1)], weights[:, -(hidden + 1):-1],
            bias, bias) + (None,) * len(lengths)


def _gru(grad, out, x, h0, w_ih, w_hh, b_ih, b_hh, *lengths, layout="btf"):
    hidden = w_hh.shape[1]
    wanted = needs_gradient(h0)     # not for constant initial states: no product for dh0
    gates = gru_backward(_public_gradient(grad, 1, hidden), out, h0, w_hh, w_ih, *lengths, h0_gradient=wanted)
    weights = gru_weight_gradients(gates, x, h0, out, layout=layout)    # (3H, F + H + 2)
    return (_input_gradient(gates, hidden, layout), gates[-1, :, :hidden] if wanted else None,
            weights[:, :-(hidden + 2)], weights[:, -(hidden + 2):-2], weights[:, -2],
            weights[:, -1]) + (None,) * len(lengths)


defvjp(lstm_op, _lstm)
defvjp(gru_op, _gru)
