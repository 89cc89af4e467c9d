"""Fused recurrent kernels: LSTM and GRU over all time steps, and their backpropagation through time.

Every array is C-contiguous and time-major: ``x`` is (T, B, F), the packed forward result is
(sections, T + 1, B, H) (graphview/ops/recurrent.py says what each section holds), row T holds the
final states. Per-step matrix products are BLAS calls through ``np.dot`` on contiguous (B, ...) blocks;
the input projection of all steps is one product before the loop. A sequence b stops at
``lengths[b]``: its rows past it are 0 and its state is carried unchanged to row T.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def first_bad_length(lengths, steps):
    """The first batch entry whose length is outside [0, steps], or -1."""
    for b in range(lengths.shape[0]):
        if lengths[b] < 0 or lengths[b] > steps:
            return b
    return -1


# --- activations without libm calls, so that the loops over a row vectorize ------------------------
# Numba has no SVML here, and libm's exp and tanh made the LSTM step 3 to 5 times slower. exp(a) is
# Cody-Waite's: a = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor polynomial, 2^k put in the
# exponent bits. float32 rows compute in float32 (half the work of float64, as PyTorch does); each
# activation is dispatched on its argument's type (_sigmoid, _tanh below).

@njit(**JIT)
def _exp64(a):
    """exp(a), relative error about 1e-15 over [-708, 709] (a is clamped there)."""
    a = min(max(a, -708.0), 709.0)
    k = np.floor(a * 1.4426950408889634 + 0.5)
    r = (a - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 + r * (
        1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 + r * (
            1.0 / 479001600 + r * (1.0 / 6227020800)))))))))))))
    return p * np.int64((np.int64(k) + 1023) << 52).view(np.float64)


@njit(**JIT)
def _exp32(a):
    """exp(a) in float32, relative error about 2e-7 over [-87, 88] (a is clamped there)."""
    a = min(max(a, np.float32(-87.0)), np.float32(88.0))
    k = np.floor(a * np.float32(1.442695) + np.float32(0.5))
    r = (a - k * np.float32(0.693359375)) - k * np.float32(-2.12194440e-4)
    p = np.float32(1.0) + r * (np.float32(1.0) + r * (np.float32(0.5) + r * (np.float32(1.0 / 6) + r * (
        np.float32(1.0 / 24) + r * (np.float32(1.0 / 120) + r * (np.float32(1.0 / 720) + r * np.float32(1.0 / 5040)))))))
    return p * np.int32((np.int32(k) + np.int32(127)) << np.int32(23)).view(np.float32)


@njit(**JIT)
def _sigmoid64(a):
    return 1.0 / (1.0 + _exp64(-a))


@njit(**JIT)
def _sigmoid32(a):
    return np.float32(1.0) / (np.float32(1.0) + _exp32(-a))


@njit(**JIT)
def _tanh64(a):
    """1 - 2 / (exp(2a) + 1), and its Taylor series below |a| = 0.05, where that would cancel."""
    a2 = a * a
    small = a * (1.0 + a2 * (-1.0 / 3 + a2 * (2.0 / 15 + a2 * (-17.0 / 315 + a2 * (62.0 / 2835 + a2 * (
        -1382.0 / 155925))))))
    large = 1.0 - 2.0 / (_exp64(a + a) + 1.0)
    return small if abs(a) < 0.05 else large


@njit(**JIT)
def _tanh32(a):
    """As _tanh64 in float32, with the series below |a| = 0.2."""
    a2 = a * a
    small = a * (np.float32(1.0) + a2 * (np.float32(-1.0 / 3) + a2 * (np.float32(2.0 / 15) + a2 * (
        np.float32(-17.0 / 315) + a2 * (np.float32(62.0 / 2835) + a2 * np.float32(-1382.0 / 155925))))))
    large = np.float32(1.0) - np.float32(2.0) / (_exp32(a + a) + np.float32(1.0))
    return small if abs(a) < np.float32(0.2) else large


def _sigmoid(a):
    """1 / (1 + exp(-a)) in a's precision (a stub: Numba compiles the overload below)."""


def _tanh(a):
    """tanh(a) in a's precision (a stub: Numba compiles the overload below)."""


def _one(array):
    """1 in the dtype of ``array`` (a stub: Numba compiles the overload below), so that float32 rows
    stay float32."""


@overload(_one, jit_options=JIT)
def _one_typed(array):
    return (lambda array: np.float32(1.0)) if array.dtype == types.float32 else (lambda array: 1.0)


@overload(_sigmoid, jit_options=JIT)
def _sigmoid_typed(a):
    return (lambda a: _sigmoid32(a)) if a == types.float32 else (lambda a: _sigmoid64(a))


@overload(_tanh, jit_options=JIT)
def _tanh_typed(a):
    return (lambda a: _tanh32(a)) if a == types.float32 else (lambda a: _tanh64(a))


@njit(**JIT)
def _zero_padding(lengths, out):
    """out[:, t, b] = 0 for every step t past lengths[b] (out: (sections, T + 1, B, ...))."""
    for b in range(lengths.shape[0]):
        for t in range(lengths[b], out.shape[1] - 1):
            out[:, t, b] = 0


# --- LSTM: sections 0 h, 1 c, 2 i, 3 f, 4 g, 5 o ---------------------------------------------------

@njit(**JIT)
def lstm_forward(x, h0, c0, w_ih_t, w_hh_t, bias, lengths, out):
    """out[0, t] = h_t, out[1, t] = c_t, out[2:6, t] = the gates i, f, g, o after their activations;
    out[0, T] = h_n, out[1, T] = c_n. ``w_ih_t`` (F, 4H) and ``w_hh_t`` (H, 4H) are the transposed
    weights, ``bias`` = b_ih + b_hh."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    h = h0.copy()
    c = c0.copy()
    _zero_padding(lengths, out)
    if steps > 0 and batch > 0:
        projected = np.dot(x.reshape(steps * batch, features), w_ih_t)
        recurrent = np.empty((batch, 4 * hidden), h0.dtype)
        for t in range(steps):
            np.dot(h, w_hh_t, recurrent)
            for b in range(batch):
                if t < lengths[b]:
                    _lstm_cell(recurrent[b], projected[t * batch + b], bias, c[b], h[b], out[0, t, b], out[1, t, b],
                               out[2, t, b], out[3, t, b], out[4, t, b], out[5, t, b], hidden)
    out[:, steps] = 0
    out[0, steps] = h
    out[1, steps] = c


@njit(**JIT)
def _lstm_cell(pre, projected, bias, c, h, state, cell, i, f, g, o, hidden):
    """One sequence's step: pre (4H) holds h_{t-1} @ W_hh^T; c and h are updated; state, cell, i, f,
    g, o are its rows of the packed result. One loop per gate, each free of calls, over contiguous
    rows (passed one by one: a 2-D slice of the packed array would not be), so that each vectorizes."""
    for j in range(hidden):
        i[j] = _sigmoid(pre[j] + projected[j] + bias[j])
    for j in range(hidden):
        f[j] = _sigmoid(pre[hidden + j] + projected[hidden + j] + bias[hidden + j])
    for j in range(hidden):
        g[j] = _tanh(pre[2 * hidden + j] + projected[2 * hidden + j] + bias[2 * hidden + j])
    for j in range(hidden):
        o[j] = _sigmoid(pre[3 * hidden + j] + projected[3 * hidden + j] + bias[3 * hidden + j])
    for j in range(hidden):
        cell[j] = f[j] * c[j] + i[j] * g[j]
    for j in range(hidden):
        state[j] = o[j] * _tanh(cell[j])
    c[:] = cell
    h[:] = state


@njit(**JIT)
def lstm_backward(grad, packed, h0, c0, w_hh, lengths, out):
    """Backpropagation through time of lstm_forward. ``grad`` is the gradient of every entry of the
    packed result. out[t] (t < T) is the gradient of step t's gate pre-activations (i, f, g, o),
    out[T] holds the gradients of h0 (columns 0:H) and c0 (H:2H)."""
    steps, batch = packed.shape[1] - 1, packed.shape[2]
    hidden = h0.shape[1]
    dh = grad[0, steps].copy()
    dc = grad[1, steps].copy()
    _zero_padding(lengths, out.reshape((1,) + out.shape))
    back = np.empty((batch, hidden), h0.dtype)
    scratch = np.empty((3, hidden), h0.dtype)
    blocks = out.reshape(steps + 1, batch, 4, hidden)   # each gate's row, contiguous
    for t in range(steps - 1, -1, -1):
        gates = out[t]
        for b in range(batch):
            if t < lengths[b]:
                previous = c0[b] if t == 0 else packed[1, t - 1, b]
                _lstm_cell_backward(grad[0, t, b], grad[1, t, b], grad[2, t, b], grad[3, t, b], grad[4, t, b],
                                    grad[5, t, b], packed[1, t, b], packed[2, t, b], packed[3, t, b], packed[4, t, b],
                                    packed[5, t, b], previous, dh[b], dc[b], blocks[t, b, 0], blocks[t, b, 1],
                                    blocks[t, b, 2], blocks[t, b, 3], scratch, hidden)
        if batch > 0:
            np.dot(gates, w_hh, back)
        for b in range(batch):
            if t < lengths[b]:
                dh[b] = back[b]
    out[steps] = 0
    out[steps, :, :hidden] = dh
    out[steps, :, hidden:2 * hidden] = dc


@njit(**JIT)
def _lstm_cell_backward(g_h, g_c, g_i, g_f, g_g, g_o, cell, i, f, g, o, previous, dh, dc, d_i, d_f, d_g, d_o,
                        scratch, hidden):
    """One sequence's step backwards (g_*: the gradients of its packed rows; cell, i, f, g, o: the
    rows): d_i, d_f, d_g, d_o get the pre-activation gradients, dc becomes dc_{t-1}; dh (the gradient
    from step t + 1) is read only. Each loop reads and writes few rows: LLVM vectorizes a loop only
    when it can check the rows' overlap in a few tests."""
    one = _one(cell)
    squashed, dh_total, dc_total = scratch[0], scratch[1], scratch[2]
    for j in range(hidden):
        squashed[j] = _tanh(cell[j])
    for j in range(hidden):
        dh_total[j] = dh[j] + g_h[j]
    for j in range(hidden):
        dc_total[j] = dc[j] + g_c[j] + dh_total[j] * o[j] * (one - squashed[j] * squashed[j])
    for j in range(hidden):
        d_o[j] = (dh_total[j] * squashed[j] + g_o[j]) * o[j] * (one - o[j])
    for j in range(hidden):
        d_i[j] = (dc_total[j] * g[j] + g_i[j]) * i[j] * (one - i[j])
    for j in range(hidden):
        d_f[j] = (dc_total[j] * previous[j] + g_f[j]) * f[j] * (one - f[j])
    for j in range(hidden):
        d_g[j] = (dc_total[j] * i[j] + g_g[j]) * (one - g[j] * g[j])
    for j in range(hidden):
        dc[j] = dc_total[j] * f[j]


# --- GRU: sections 0 h, 1 r, 2 z, 3 n, 4 W_hn h + b_hn -------------------------------------------

@njit(**JIT)
def gru_forward(x, h0, w_ih_t, w_hh_t, b_ih, b_hh, lengths, out):
    """out[0, t] = h_t, out[1:4, t] = the gates r, z, n, out[4, t] = W_hn h_{t-1} + b_hn (what n's
    gradient needs); out[0, T] = h_n. PyTorch's GRU: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),
    h' = (1 - z) * n + z * h."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    h = h0.copy()
    _zero_padding(lengths, out)
    if steps > 0 and batch > 0:
        projected = np.dot(x.reshape(steps * batch, features), w_ih_t)
        recurrent = np.empty((batch, 3 * hidden), h0.dtype)
        for t in range(steps):
            np.dot(h, w_hh_t, recurrent)
            for b in range(batch):
                if t < lengths[b]:
                    _gru_cell(recurrent[b], projected[t * batch + b], b_ih, b_hh, h[b], out[0, t, b], out[1, t, b],
                              out[2, t, b], out[3, t, b], out[4, t, b], hidden)
    out[:, steps] = 0
    out[0, steps] = h


@njit(**JIT)
def _gru_cell(pre, projected, b_ih, b_hh, h, state, r, z, n, hn, hidden):
    """One sequence's step: pre (3H) holds h_{t-1} @ W_hh^T; h is updated; state, r, z, n and hn (W_hn h
    + b_hn) are its rows of the packed result (contiguous, so the loops vectorize)."""
    one = _one(h)
    for j in range(hidden):
        r[j] = _sigmoid(projected[j] + b_ih[j] + pre[j] + b_hh[j])
    for j in range(hidden):
        z[j] = _sigmoid(projected[hidden + j] + b_ih[hidden + j] + pre[hidden + j] + b_hh[hidden + j])
    for j in range(hidden):
        hn[j] = pre[2 * hidden + j] + b_hh[2 * hidden + j]
    for j in range(hidden):
        n[j] = _tanh(projected[2 * hidden + j] + b_ih[2 * hidden + j] + r[j] * hn[j])
    for j in range(hidden):
        state[j] = (one - z[j]) * n[j] + z[j] * h[j]
    h[:] = state


@njit(**JIT)
def gru_backward(grad, packed, h0, w_hh, lengths, out):
    """Backpropagation through time of gru_forward. out[t] (t < T) holds step t's gradients of the
    input-side pre-activations (r, z, n: columns 0:3H) and of W_hn h + b_hn (3H:4H); out[T, :, 0:H]
    is the gradient of h0."""
    steps, batch = packed.shape[1] - 1, packed.shape[2]
    hidden = h0.shape[1]
    dh = grad[0, steps].copy()
    _zero_padding(lengths, out.reshape((1,) + out.shape))
    hidden_side = np.zeros((batch, 3 * hidden), h0.dtype)
    back = np.empty((batch, hidden), h0.dtype)
    for t in range(steps - 1, -1, -1):
        gates = out[t]
        for b in range(batch):
            if t < lengths[b]:
                previous = h0[b] if t == 0 else packed[0, t - 1, b]
                _gru_cell_backward(grad[0, t, b], grad[1, t, b], grad[2, t, b], grad[3, t, b], grad[4, t, b],
                                   packed[1, t, b], packed[2, t, b], packed[3, t, b], packed[4, t, b], previous,
                                   dh[b], gates[b], hidden_side[b], hidden)
            else:
                hidden_side[b] = 0
        if batch > 0:
            np.dot(hidden_side, w_hh, back)
        for b in range(batch):
            if t < lengths[b]:
                dh[b] += back[b]
    out[steps] = 0
    out[steps, :, :hidden] = dh


@njit(**JIT)
def _gru_cell_backward(g_h, g_r, g_z, g_n, g_hn, r, z, n, hn, previous, dh, gates, hidden_side, hidden):
    """One sequence's step backwards (g_*: the gradients of its packed rows r, z, n, hn): gates (4H)
    gets dr, dz, dn (pre-activation) and d(W_hn h + b_hn), hidden_side (3H) the gradient of
    h_{t-1} @ W_hh^T + b_hh; dh becomes its part through z. Few rows per loop, as in the LSTM's."""
    d_r, d_z, d_n, d_hn = gates[:hidden], gates[hidden:2 * hidden], gates[2 * hidden:3 * hidden], gates[3 * hidden:]
    one = _one(r)
    for j in range(hidden):
        dh[j] += g_h[j]
    for j in range(hidden):
        d_n[j] = (dh[j] * (one - z[j]) + g_n[j]) * (one - n[j] * n[j])
    for j in range(hidden):
        d_z[j] = (dh[j] * (previous[j] - n[j]) + g_z[j]) * z[j] * (one - z[j])
    for j in range(hidden):
        dh[j] *= z[j]
    for j in range(hidden):
        d_r[j] = (d_n[j] * hn[j] + g_r[j]) * r[j] * (one - r[j])
    for j in range(hidden):
        d_hn[j] = d_n[j] * r[j] + g_hn[j]
    hidden_side[:2 * hidden] = gates[:2 * hidden]
    hidden_side[2 * hidden:] = d_hn


# --- weight gradients: one product over all steps ------------------------------------------------

@njit(**JIT)
def _operands(x, h0, packed_h, with_x, with_h):
    """(T * B, columns) C-contiguous: [x_t | h_{t-1} | 1] per step and sequence (x_t and h_{t-1}
    where asked for), so that one product with the gate gradients gives the weights' and the bias's
    gradients. Rows past a sequence's length hold 0 in packed_h, and their gate gradients are 0."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    width = (features if with_x else 0) + (hidden if with_h else 0) + 1
    result = np.empty((steps * batch, width), h0.dtype)
    for t in range(steps):
        for b in range(batch):
            row = result[t * batch + b]
            column = 0
            if with_x:
                row[:features] = x[t, b]
                column = features
            if with_h:
                row[column:column + hidden] = h0[b] if t == 0 else packed_h[t - 1, b]
            row[width - 1] = 1
    return result


@njit(**JIT)
def lstm_weight_gradients(gates, x, h0, packed_h, out):
    """out[:, 0:F] = dW_ih, out[:, F:F+H] = dW_hh, out[:, F+H] = db (both biases): one product of the
    gate gradients of all steps (``gates``, T + 1 rows, the last not read) with [x | h_{t-1} | 1]."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    if steps * batch == 0:
        out[:] = 0
        return
    flat = gates[:steps].reshape(steps * batch, 4 * hidden)
    np.dot(flat.T, _operands(x, h0, packed_h, True, True), out)


@njit(**JIT)
def gru_weight_gradients(gates, x, h0, packed_h, out):
    """out[:, 0:F] = dW_ih, out[:, F:F+H] = dW_hh, out[:, F+H] = db_ih, out[:, F+H+1] = db_hh, from
    gru_backward's gradients of all steps: the input side (r, z, n) with [x | 1], the hidden side
    (r, z, W_hn h + b_hn) with [h_{t-1} | 1]."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    rows = steps * batch
    if rows == 0:
        out[:] = 0
        return
    flat = gates[:steps].reshape(rows, 4 * hidden)
    hidden_side = np.empty((rows, 3 * hidden), h0.dtype)
    hidden_side[:, :2 * hidden] = flat[:, :2 * hidden]
    hidden_side[:, 2 * hidden:] = flat[:, 3 * hidden:]
    input_part = np.dot(np.ascontiguousarray(flat[:, :3 * hidden]).T, _operands(x, h0, packed_h, True, False))
    hidden_part = np.dot(hidden_side.T, _operands(x, h0, packed_h, False, True))
    out[:, :features] = input_part[:, :features]
    out[:, features:features + hidden] = hidden_part[:, :hidden]
    out[:, features + hidden] = input_part[:, features]
    out[:, features + hidden + 1] = hidden_part[:, hidden]
