"""Fused recurrent kernels: LSTM and GRU over all time steps, and their backpropagation through time.

Every array is C-contiguous and time-major: ``x`` is (T, B, F); the packed forward result is (T + 1, B,
sections * H), one row per step and sequence holding every section side by side (graphview/ops/recurrent.py
says which), row T the final states. The matrix products are BLAS calls (kernels/blas.py's ``product``, with
leading dimensions and beta, so a product reads and writes columns of a packed row in place):
the input projection of all steps is one product into the gate columns before the loop, each step adds
h_{t-1} @ W_hh^T onto them, and the activations then run in place. A sequence b stops at ``lengths[b]``:
its rows past it are 0 and row T holds its last valid state.
"""
import numpy as np
from numba import njit

from .blas import JIT, product
from .vector_math import one_like, sigmoid, tanh, wide_vectors


@njit(**JIT)
def _final_rows(out, h0, c0, lengths, width):
    """Row T: each sequence's last valid h (and c when ``width`` is 2H, not H), h0 (c0) for a length of 0, the
    rest 0. ``width`` is a size, not a count of states, so that LSTM and GRU calls share one signature."""
    steps, hidden = out.shape[0] - 1, h0.shape[1]
    last = out[steps]
    last[:] = 0
    for b in range(out.shape[1]):
        if lengths[b] == 0:
            last[b, :hidden] = h0[b]
            if width > hidden:
                last[b, hidden:2 * hidden] = c0[b]
        else:
            last[b, :width] = out[lengths[b] - 1, b, :width]


@njit(**JIT)
def adds_nothing(h0, w_hh):
    """Whether h0 @ W_hh^T is exactly 0: h0 all zero and W_hh finite (0 times an infinity or NaN is NaN). The
    forward kernels then skip the first step's product: zero initial states are the common case."""
    for value in h0.reshape(h0.size):
        if value != 0:
            return False
    for value in w_hh.reshape(w_hh.size):
        if not np.isfinite(value):
            return False
    return True


# --- LSTM: a packed row is [h | c | i | f | g | o], the gates after their activations ------------------

@njit(**JIT)
def lstm_forward(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths, out):
    """out[t, b] = [h_t | c_t | i | f | g | o] of step t (0 past lengths[b]), out[T, b] = [h_n | c_n | 0].
    ``w_ih`` (4H, F), ``w_hh`` (4H, H), ``b_ih`` and ``b_hh`` (4H,) as PyTorch holds them."""
    steps, batch, features = x.shape
    bias = b_ih + b_hh
    hidden = h0.shape[1]
    width = out.shape[2]
    packed, weights = out.reshape(out.size), w_hh.reshape(w_hh.size)
    product(False, True, steps * batch, 4 * hidden, features, x.reshape(x.size), 0, features,
            w_ih.reshape(w_ih.size), 0, features, 0.0, packed, 2 * hidden, width)
    skip = steps > 0 and adds_nothing(h0, w_hh)
    for t in range(steps):
        if t == 0:   # the gate columns += h_{t-1} @ W_hh^T, h_{t-1} read in place
            if not skip:
                product(False, True, batch, 4 * hidden, hidden, h0.reshape(h0.size), 0, hidden, weights, 0, hidden,
                        1.0, packed, 2 * hidden, width)
        else:
            product(False, True, batch, 4 * hidden, hidden, packed, (t - 1) * batch * width, width, weights, 0,
                    hidden, 1.0, packed, t * batch * width + 2 * hidden, width)
        for b in range(batch):
            if t < lengths[b]:
                _lstm_cell(out[t, b], c0[b] if t == 0 else out[t - 1, b], 0 if t == 0 else hidden, bias, hidden)
            else:
                out[t, b] = 0
    _final_rows(out, h0, c0, lengths, 2 * hidden)


@njit(**JIT)
def _lstm_cell(row, previous, start, bias, hidden):
    """One sequence's step in place: row's gate columns hold the pre-activations (without the bias) and get
    the gates, then c and h; c_{t-1} is previous[start:start + H]. One loop per result over one row, so that
    each vectorizes (LLVM gives up on a loop whose arrays need too many overlap checks)."""
    wide_vectors()
    for j in range(hidden):   # i and f in one loop of 2H ran 3 times slower
        row[2 * hidden + j] = sigmoid(row[2 * hidden + j] + bias[j])
    for j in range(hidden):
        row[3 * hidden + j] = sigmoid(row[3 * hidden + j] + bias[hidden + j])
    for j in range(hidden):
        row[4 * hidden + j] = tanh(row[4 * hidden + j] + bias[2 * hidden + j])
    for j in range(hidden):
        row[5 * hidden + j] = sigmoid(row[5 * hidden + j] + bias[3 * hidden + j])
    for j in range(hidden):
        row[hidden + j] = row[3 * hidden + j] * previous[start + j] + row[2 * hidden + j] * row[4 * hidden + j]
    for j in range(hidden):
        row[j] = row[5 * hidden + j] * tanh(row[hidden + j])


@njit(**JIT)
def lstm_backward(grad, packed, h0, c0, w_hh, w_ih, lengths, with_dh0, out):
    """Backpropagation through time of lstm_forward; ``grad`` is the gradient of every entry of the packed
    result (T + 1, B, 6H), of its state columns alone (T + 1, B, 2H: [dh | dc], the gates' gradients 0), or
    of the steps' h alone (T, B, H: the outputs', the final states' gradients 0 too). Without ``with_dh0``
    (h0 has no gradient to give: a constant), the first step's product with W_hh is skipped, dh0 left 0.
    out[t, b] (t < T) = [di | df | dg | do | dx_t]: the gradients of step t's gate pre-activations,
    then of x_t; out[T, b] = [dh0 | dc0 | 0]. Row T holds the running dh and dc while the steps are walked
    back: each step's product adds d_gates @ W_hh onto dh in place."""
    steps, batch = packed.shape[0] - 1, packed.shape[1]
    hidden, features = h0.shape[1], w_ih.shape[1]
    width = out.shape[2]
    flat, weights = out.reshape(out.size), w_hh.reshape(w_hh.size)
    cells, wide, zeros = grad.shape[2] > hidden, grad.shape[2] > 2 * hidden, np.zeros(4 * hidden, grad.dtype)
    last = out[steps]
    last[:] = 0
    if grad.shape[0] > steps:
        for b in range(batch):
            last[b, :2 * hidden] = grad[steps, b, :2 * hidden]
    for t in range(steps - 1, -1, -1):
        for b in range(batch):
            if t < lengths[b]:
                row = grad[t, b]
                _lstm_cell_backward(row[:hidden], row[hidden:2 * hidden] if cells else zeros[:hidden],
                                    row[2 * hidden:] if wide else zeros, packed[t, b],
                                    c0[b] if t == 0 else packed[t - 1, b], 0 if t == 0 else hidden, last[b], out[t, b],
                                    hidden)
            else:
                out[t, b] = 0
        if t > 0 or with_dh0:
            product(False, False, batch, hidden, 4 * hidden, flat, t * batch * width, width, weights, 0, hidden, 1.0,
                    flat, steps * batch * width, width)
    if not with_dh0:
        last[:, :hidden] = 0
    product(False, False, steps * batch, features, 4 * hidden, flat, 0, width, w_ih.reshape(w_ih.size), 0, features,
            0.0, flat, 4 * hidden, width)


@njit(**JIT)
def _lstm_cell_backward(dh, dc, gates, p, previous, start, state, d, hidden):
    """One sequence's step backwards: dh, dc and ``gates`` (of the stored i, f, g, o) are its row of the
    packed gradient, p its row of the packed result, c_{t-1} is
    previous[start:start + H], state = [dh | dc] (from step t + 1), d gets [di | df | dg | do]. dc becomes
    dc_{t-1}; dh is consumed (left 0 for the step's product to add onto). tanh(c_t) waits in do's place."""
    wide_vectors()
    one = one_like(p)
    for j in range(hidden):
        state[j] += dh[j]
    for j in range(hidden):
        d[3 * hidden + j] = tanh(p[hidden + j])
    for j in range(hidden):
        state[hidden + j] = state[hidden + j] + dc[j] + state[j] * p[5 * hidden + j] * (
            one - d[3 * hidden + j] * d[3 * hidden + j])
    for j in range(hidden):
        d[3 * hidden + j] = (state[j] * d[3 * hidden + j] + gates[3 * hidden + j]) * p[5 * hidden + j] * (
            one - p[5 * hidden + j])
    for j in range(hidden):
        d[j] = (state[hidden + j] * p[4 * hidden + j] + gates[j]) * p[2 * hidden + j] * (
            one - p[2 * hidden + j])
    for j in range(hidden):
        d[hidden + j] = (state[hidden + j] * previous[start + j] + gates[hidden + j]) * p[3 * hidden + j] * (
            one - p[3 * hidden + j])
    for j in range(hidden):
        d[2 * hidden + j] = (state[hidden + j] * p[2 * hidden + j] + gates[2 * hidden + j]) * (
            one - p[4 * hidden + j] * p[4 * hidden + j])
    for j in range(hidden):
        state[hidden + j] *= p[3 * hidden + j]
    state[:hidden] = 0


# --- GRU: a packed row is [h | r | z | W_hn h + b_hn | n] ----------------------------------------------

@njit(**JIT)
def gru_forward(x, h0, w_ih, w_hh, b_ih, b_hh, lengths, out):
    """out[t, b] = [h_t | r | z | W_hn h_{t-1} + b_hn | n] of step t (the last what n's gradient needs),
    out[T, b] = [h_n | 0]. PyTorch's GRU: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n
    + z * h. r, z and W_hn h + b_hn are side by side, so that one product per step adds h_{t-1} @ W_hh^T."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    width = out.shape[2]
    packed, xs, inputs, weights = out.reshape(out.size), x.reshape(x.size), w_ih.reshape(w_ih.size), \
        w_hh.reshape(w_hh.size)
    product(False, True, steps * batch, 2 * hidden, features, xs, 0, features, inputs, 0, features, 0.0, packed,
            hidden, width)
    product(False, True, steps * batch, hidden, features, xs, 0, features, inputs, 2 * hidden * features, features,
            0.0, packed, 4 * hidden, width)
    skip = steps > 0 and adds_nothing(h0, w_hh)
    for t in range(steps):
        for b in range(batch):
            out[t, b, 3 * hidden:4 * hidden] = b_hh[2 * hidden:]
        if t == 0:
            if not skip:
                product(False, True, batch, 3 * hidden, hidden, h0.reshape(h0.size), 0, hidden, weights, 0, hidden,
                        1.0, packed, hidden, width)
        else:
            product(False, True, batch, 3 * hidden, hidden, packed, (t - 1) * batch * width, width, weights, 0,
                    hidden, 1.0, packed, t * batch * width + hidden, width)
        for b in range(batch):
            if t < lengths[b]:
                _gru_cell(out[t, b], h0[b] if t == 0 else out[t - 1, b], b_ih, b_hh, hidden)
            else:
                out[t, b] = 0
    _final_rows(out, h0, h0, lengths, hidden)


@njit(**JIT)
def _gru_cell(row, previous, b_ih, b_hh, hidden):
    """One sequence's step in place: row's r, z columns hold both products, its W_hn h + b_hn column is
    complete, its n column holds W_in x; h_{t-1} is previous[:H]. One loop per result, as the LSTM's."""
    wide_vectors()
    one = one_like(row)
    for j in range(hidden):   # r and z in one loop of 2H ran 3 times slower
        row[hidden + j] = sigmoid(row[hidden + j] + b_ih[j] + b_hh[j])
    for j in range(hidden):
        row[2 * hidden + j] = sigmoid(row[2 * hidden + j] + b_ih[hidden + j] + b_hh[hidden + j])
    for j in range(hidden):
        row[4 * hidden + j] = tanh(row[4 * hidden + j] + b_ih[2 * hidden + j] + row[hidden + j] * row[3 * hidden + j])
    for j in range(hidden):
        row[j] = (one - row[2 * hidden + j]) * row[4 * hidden + j] + row[2 * hidden + j] * previous[j]


@njit(**JIT)
def gru_backward(grad, packed, h0, w_hh, w_ih, lengths, with_dh0, out):
    """Backpropagation through time of gru_forward; ``grad`` is the gradient of the packed result (T + 1, B,
    5H), of its state columns alone (T + 1, B, H: the gates' gradients 0) or of the steps' h alone (T, B, H:
    the final state's gradient 0 too); without ``with_dh0``, the first step's product is skipped and dh0 left
    0. out[t, b] (t < T) = [dr | dz | d(W_hn h + b_hn) | dn | dx_t]: r's, z's and n's pre-activation gradients
    on the input side are columns 0:2H and 3H:4H, on the hidden side 0:3H; out[T, b] = [dh0 | 0], the running
    dh while the steps are walked back."""
    steps, batch = packed.shape[0] - 1, packed.shape[1]
    hidden, features = h0.shape[1], w_ih.shape[1]
    width = out.shape[2]
    flat, inputs, weights = out.reshape(out.size), w_ih.reshape(w_ih.size), w_hh.reshape(w_hh.size)
    wide, zeros = grad.shape[2] > hidden, np.zeros(4 * hidden, grad.dtype)
    last = out[steps]
    last[:] = 0
    if grad.shape[0] > steps:
        for b in range(batch):
            last[b, :hidden] = grad[steps, b, :hidden]
    for t in range(steps - 1, -1, -1):
        for b in range(batch):
            if t < lengths[b]:
                row = grad[t, b]
                _gru_cell_backward(row, row[hidden:] if wide else zeros, packed[t, b],
                                   h0[b] if t == 0 else packed[t - 1, b], last[b], out[t, b], hidden)
            else:
                out[t, b] = 0
        if t > 0 or with_dh0:
            product(False, False, batch, hidden, 3 * hidden, flat, t * batch * width, width, weights, 0, hidden, 1.0,
                    flat, steps * batch * width, width)
    if not with_dh0:
        last[:, :hidden] = 0
    product(False, False, steps * batch, features, 2 * hidden, flat, 0, width, inputs, 0, features, 0.0, flat,
            4 * hidden, width)
    product(False, False, steps * batch, features, hidden, flat, 3 * hidden, width, inputs, 2 * hidden * features,
            features, 1.0, flat, 4 * hidden, width)


@njit(**JIT)
def _gru_cell_backward(g, gates, p, previous, state, d, hidden):
    """One sequence's step backwards (g = [dh] and ``gates`` = [r | z | W_hn h + b_hn | n]: its row of the
    packed gradient; p: of the packed result; h_{t-1} is previous[:H]): d gets [dr | dz | d(W_hn h + b_hn) |
    dn], state[:H] (dh from step t + 1) becomes its part through z; the step's product adds the rest."""
    wide_vectors()
    one = one_like(p)
    for j in range(hidden):
        state[j] += g[j]
    for j in range(hidden):
        d[3 * hidden + j] = (state[j] * (one - p[2 * hidden + j]) + gates[3 * hidden + j]) * (
            one - p[4 * hidden + j] * p[4 * hidden + j])
    for j in range(hidden):
        d[hidden + j] = (state[j] * (previous[j] - p[4 * hidden + j]) + gates[hidden + j]) * p[2 * hidden + j] * (
            one - p[2 * hidden + j])
    for j in range(hidden):
        state[j] *= p[2 * hidden + j]
    for j in range(hidden):
        d[j] = (d[3 * hidden + j] * p[3 * hidden + j] + gates[j]) * p[hidden + j] * (one - p[hidden + j])
    for j in range(hidden):
        d[2 * hidden + j] = d[3 * hidden + j] * p[hidden + j] + gates[2 * hidden + j]


# --- weight gradients: products over all steps at once -----------------------------------------------

@njit(**JIT)
def _operand(x, h0, packed, gates):
    """[x_t | h_{t-1}] for every step and sequence, (T * B, F + H): one product with the gate gradients of
    all steps gives both weights' gradients (a product on x and one on the packed h columns took longer:
    OpenBLAS is slow on the product with F columns alone; so is it with F + H + 1 for the biases). Rows past
    a length meet gate gradients of 0; such a row holding a NaN or an infinity (padding) is written as
    zeros, so it adds 0, not NaN."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    result = np.empty((steps * batch, features + hidden), h0.dtype)
    for t in range(steps):
        for b in range(batch):
            row, inputs = result[t * batch + b], x[t, b]
            state = h0[b] if t == 0 else packed[t - 1, b]
            finite = True
            for j in range(features):
                row[j] = inputs[j]
                finite &= np.isfinite(inputs[j])
            for j in range(hidden):
                row[features + j] = state[j]
            if not finite and not gates[t, b].any():
                row[:] = 0
    return result


@njit(**JIT)
def _column_sums(gates, steps, start, stop):
    """gates[:steps, :, start:stop] summed over steps and sequences (rows sliced first: 4 times faster)."""
    count = stop - start
    sums = np.zeros(count, gates.dtype)
    for t in range(steps):
        for b in range(gates.shape[1]):
            row = gates[t, b, start:stop]
            for j in range(count):
                sums[j] = sums[j] + row[j]
    return sums


@njit(**JIT)
def lstm_weight_gradients(gates, x, h0, packed, out):
    """out = [dW_ih | dW_hh | db] (4H, F + H + 1), db that of both biases, from lstm_backward's gradients
    of all steps (``gates``; its row T is not read) and the packed forward result (for h_{t-1})."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    product(True, False, 4 * hidden, features + hidden, steps * batch, gates.reshape(gates.size), 0, gates.shape[2],
            _operand(x, h0, packed, gates).reshape(-1), 0, features + hidden, 0.0, out.reshape(out.size), 0, out.shape[1])
    out[:, features + hidden] = _column_sums(gates, steps, 0, 4 * hidden)


@njit(**JIT)
def gru_weight_gradients(gates, x, h0, packed, out):
    """out = [dW_ih | dW_hh | db_ih | db_hh] (3H, F + H + 2) from gru_backward's gradients of all steps:
    r and z (columns 0:2H of ``gates``) with [x | h_{t-1}], n (3H:4H) with x, W_hn h + b_hn (2H:3H) with
    h_{t-1}."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    rows, width, columns = steps * batch, gates.shape[2], features + hidden
    flat, operand, result = gates.reshape(gates.size), _operand(x, h0, packed, gates).reshape(-1), out.reshape(out.size)
    product(True, False, 2 * hidden, columns, rows, flat, 0, width, operand, 0, columns, 0.0, result, 0, out.shape[1])
    product(True, False, hidden, features, rows, flat, 3 * hidden, width, operand, 0, columns, 0.0, result,
            2 * hidden * out.shape[1], out.shape[1])
    product(True, False, hidden, hidden, rows, flat, 2 * hidden, width, operand, features, columns, 0.0, result,
            2 * hidden * out.shape[1] + features, out.shape[1])
    sums = _column_sums(gates, steps, 0, 4 * hidden)
    out[:2 * hidden, features + hidden] = sums[:2 * hidden]
    out[2 * hidden:, features + hidden] = sums[3 * hidden:]
    out[:, features + hidden + 1] = sums[:3 * hidden]
