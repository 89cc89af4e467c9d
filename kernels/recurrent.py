"""Fused recurrent kernels: LSTM and GRU over all time steps, and their backpropagation through time.

Every array is C-contiguous and time-major: ``x`` is (T, B, F); the packed forward result is (T + 1, B,
sections * H), one row per step and sequence holding every section side by side (graphview/ops/recurrent.py
says which), row T the final states. The matrix products are BLAS calls (``_product``: numba's own gemm
wrapper, with leading dimensions and beta, so a product reads and writes columns of a packed row in place):
the input projection of all steps is one product into the gate columns before the loop, each step adds
h_{t-1} @ W_hh^T onto them, and the activations then run in place. A sequence b stops at ``lengths[b]``:
its rows past it are 0 and row T holds its last valid state.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

JIT = dict(cache=True, nogil=True, error_model="numpy")
SMALL = 1_000_000   # OpenBLAS's small-matrix gemm (no packing) for M*N*K <= 100**3: dx's 512x8x512 36 us, not 68


# --- matrix products on flat row-major storage ------------------------------------------------------
# np.dot in Numba wants whole contiguous matrices and overwrites its output; numba_xxgemm (Numba's BLAS wrapper, the
# one np.dot calls, resolved by name so that the cache holds) takes leading dimensions and beta (module docstring).

_CHAR = ir.IntType(8)
_VOID_P = ir.IntType(8).as_pointer()


@intrinsic
def _xxgemm(typingctx, trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """Row-major c[c_start:] (m x n, row stride ldc) = op(a) op(b) + beta * c, op(a) m x k, op(b) k x n; op
    transposes when trans_* is true; a, b, c are 1-D arrays of one float dtype. The BLAS status is returned."""
    if not all(isinstance(array, types.Array) and array.ndim == 1 for array in (a, b, c)) or \
            a.dtype not in (types.float32, types.float64) or not a.dtype == b.dtype == c.dtype:
        return None
    dtype = a.dtype

    def codegen(context, builder, signature, args):
        trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc = args
        kinds = signature.args
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [
            _CHAR, _CHAR, _CHAR, cgutils.intp_t, cgutils.intp_t, cgutils.intp_t, _VOID_P, _VOID_P, cgutils.intp_t,
            _VOID_P, cgutils.intp_t, _VOID_P, _VOID_P, cgutils.intp_t]), "numba_xxgemm")

        def pointer(position, start):
            data = context.make_array(kinds[position])(context, builder, value=args[position]).data
            return builder.bitcast(builder.gep(data, [start]), _VOID_P)

        def flag(position):
            on = context.cast(builder, args[position], kinds[position], types.boolean)
            return builder.select(on, ir.Constant(_CHAR, ord("t")), ir.Constant(_CHAR, ord("n")))
        alpha = cgutils.alloca_once_value(builder, context.get_constant(dtype, 1.0))
        scaled = cgutils.alloca_once_value(builder, context.cast(builder, beta, kinds[11], dtype))
        kind = ir.Constant(_CHAR, ord("s" if dtype == types.float32 else "d"))
        # BLAS is column-major: row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T.
        return builder.call(function, (kind, flag(1), flag(0), n, m, k, builder.bitcast(alpha, _VOID_P),
                                       pointer(8, b_start), ldb, pointer(5, a_start), lda,
                                       builder.bitcast(scaled, _VOID_P), pointer(12, c_start), ldc))
    return types.int32(trans_a, trans_b, types.intp, types.intp, types.intp, a, types.intp, types.intp, b,
                       types.intp, types.intp, beta, c, types.intp, types.intp), codegen


def _product(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """c = op(a) op(b) + beta c over flat row-major storage (see _xxgemm), beta 0 or 1 (a stub: see the overload)."""


@overload(_product, jit_options=JIT)
def _product_typed(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """An overload, typed without literal values (flags, offsets 0): one signature per dtype (njit: 9 in float64)."""
    return _product_body


def _product_body(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """_product's implementation; empty products are handled here (BLAS refuses a leading dimension of 0). Without
    trans_b, in blocks of rows within SMALL (of 32 rows at least; with trans_b or fewer rows, blocks gained nothing)."""
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0:
            for i in range(m):
                c[c_start + i * ldc:c_start + i * ldc + n] = 0
        return
    rows = m if trans_b or SMALL // (n * k) < 32 else min(m, SMALL // (n * k))
    for i in range(0, m, rows):
        if _xxgemm(trans_a, trans_b, min(rows, m - i), n, k, a, a_start + (i if trans_a else i * lda), lda, b,
                   b_start, ldb, beta, c, c_start + i * ldc, ldc) != 0:
            raise RuntimeError("the BLAS matrix product (numba_xxgemm) failed")


# --- activations without libm calls, so that the loops over a row vectorize ------------------------
# Numba has no SVML here, and libm's exp and tanh made the LSTM step 3 to 5 times slower. exp(a) is
# Cody-Waite's: a = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor polynomial, 2^k put in the
# exponent bits. float32 rows compute in float32 (half the work of float64, as PyTorch does); each
# activation is dispatched on its argument's type (_sigmoid, _tanh below). float32's tanh is e / (e + 2)
# with e = expm1(2a), one formula (float64's keeps its series near 0 and 1 - 2 / (e^{2a} + 1) elsewhere).
# float32's polynomials are fused multiply-adds (_fma; Numba contracts nothing without fastmath): the
# LSTM's forward cells took 141 us over 7 steps of 64 x 128, 210 with a multiply and an add per term.

@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma, which the vectorizer keeps); a, b and c of one float type."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, b, c), codegen


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
def _exp_parts32(a):
    """(2^k, e^r - 1) for a = k ln 2 + r, |r| <= ln 2 / 2, a clamped to [-87, 88]; e^r - 1 = r (1 + r/2 + ...)."""
    a = min(max(a, np.float32(-87.0)), np.float32(88.0))
    k = np.floor(_fma(a, np.float32(1.442695), np.float32(0.5)))
    r = _fma(k, np.float32(2.12194440e-4), _fma(k, np.float32(-0.693359375), a))
    q = _fma(np.float32(1.0 / 5040), r, np.float32(1.0 / 720))
    q = _fma(q, r, np.float32(1.0 / 120))
    q = _fma(q, r, np.float32(1.0 / 24))
    q = _fma(q, r, np.float32(1.0 / 6))
    q = _fma(q, r, np.float32(0.5))
    q = _fma(q, r, np.float32(1.0))
    return np.int32((np.int32(k) + np.int32(127)) << np.int32(23)).view(np.float32), r * q


@njit(**JIT)
def _exp32(a):
    """exp(a) in float32, relative error about 2e-7 over [-87, 88] (a is clamped there)."""
    scale, em = _exp_parts32(a)
    return _fma(scale, em, scale)


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
def _expm1_32(a):
    """exp(a) - 1 in float32 (a clamped to [-87, 88]): 2^k (e^r - 1) + (2^k - 1), accurate near 0 too."""
    scale, em = _exp_parts32(a)
    return _fma(scale, em, scale - np.float32(1.0))


@njit(**JIT)
def _tanh32(a):
    """tanh(a) = e / (e + 2) with e = exp(2a) - 1, one formula over the whole range (no branch): 3.05 ulp
    at most over 4 million samples, where the series-or-1 - 2 / (e^{2a} + 1) blend it replaces had 7.4."""
    e = _expm1_32(a + a)
    return e / (e + np.float32(2.0))


def _sigmoid(a):
    """1 / (1 + exp(-a)) in a's precision (a stub: Numba compiles the overload below)."""


def _tanh(a):
    """tanh(a) in a's precision (a stub: Numba compiles the overload below)."""


def _one(array):
    """1 in the dtype of ``array``, so that float32 rows stay float32 (a stub: Numba compiles the overload below)."""


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


# --- LSTM: a packed row is [h | c | i | f | g | o], the gates after their activations ------------------

@njit(**JIT)
def lstm_forward(x, h0, c0, w_ih, w_hh, bias, lengths, out):
    """out[t, b] = [h_t | c_t | i | f | g | o] of step t (0 past lengths[b]), out[T, b] = [h_n | c_n | 0].
    ``w_ih`` (4H, F) and ``w_hh`` (4H, H) as PyTorch holds them, ``bias`` = b_ih + b_hh."""
    steps, batch, features = x.shape
    hidden = h0.shape[1]
    width = out.shape[2]
    packed, weights = out.reshape(out.size), w_hh.reshape(w_hh.size)
    _product(False, True, steps * batch, 4 * hidden, features, x.reshape(x.size), 0, features,
             w_ih.reshape(w_ih.size), 0, features, 0.0, packed, 2 * hidden, width)
    for t in range(steps):
        if t == 0:   # the gate columns += h_{t-1} @ W_hh^T, h_{t-1} read in place
            _product(False, True, batch, 4 * hidden, hidden, h0.reshape(h0.size), 0, hidden, weights, 0, hidden, 1.0,
                     packed, 2 * hidden, width)
        else:
            _product(False, True, batch, 4 * hidden, hidden, packed, (t - 1) * batch * width, width, weights, 0,
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
    for j in range(hidden):   # i and f in one loop of 2H ran 3 times slower
        row[2 * hidden + j] = _sigmoid(row[2 * hidden + j] + bias[j])
    for j in range(hidden):
        row[3 * hidden + j] = _sigmoid(row[3 * hidden + j] + bias[hidden + j])
    for j in range(hidden):
        row[4 * hidden + j] = _tanh(row[4 * hidden + j] + bias[2 * hidden + j])
    for j in range(hidden):
        row[5 * hidden + j] = _sigmoid(row[5 * hidden + j] + bias[3 * hidden + j])
    for j in range(hidden):
        row[hidden + j] = row[3 * hidden + j] * previous[start + j] + row[2 * hidden + j] * row[4 * hidden + j]
    for j in range(hidden):
        row[j] = row[5 * hidden + j] * _tanh(row[hidden + j])


@njit(**JIT)
def lstm_backward(grad, packed, h0, c0, w_hh, w_ih, lengths, out):
    """Backpropagation through time of lstm_forward; ``grad`` is the gradient of every entry of the packed
    result. out[t, b] (t < T) = [di | df | dg | do | dx_t]: the gradients of step t's gate pre-activations,
    then of x_t; out[T, b] = [dh0 | dc0 | 0]. Row T holds the running dh and dc while the steps are walked
    back: each step's product adds d_gates @ W_hh onto dh in place."""
    steps, batch = packed.shape[0] - 1, packed.shape[1]
    hidden, features = h0.shape[1], w_ih.shape[1]
    width = out.shape[2]
    flat, weights = out.reshape(out.size), w_hh.reshape(w_hh.size)
    last = out[steps]
    last[:] = 0
    for b in range(batch):
        last[b, :2 * hidden] = grad[steps, b, :2 * hidden]
    for t in range(steps - 1, -1, -1):
        for b in range(batch):
            if t < lengths[b]:
                _lstm_cell_backward(grad[t, b], packed[t, b], c0[b] if t == 0 else packed[t - 1, b],
                                    0 if t == 0 else hidden, last[b], out[t, b], hidden)
            else:
                out[t, b] = 0
        _product(False, False, batch, hidden, 4 * hidden, flat, t * batch * width, width, weights, 0, hidden, 1.0,
                 flat, steps * batch * width, width)
    _product(False, False, steps * batch, features, 4 * hidden, flat, 0, width, w_ih.reshape(w_ih.size), 0, features,
             0.0, flat, 4 * hidden, width)


@njit(**JIT)
def _lstm_cell_backward(g, p, previous, start, state, d, hidden):
    """One sequence's step backwards: g and p are its rows of the packed gradient and result, c_{t-1} is
    previous[start:start + H], state = [dh | dc] (from step t + 1), d gets [di | df | dg | do]. dc becomes
    dc_{t-1}; dh is consumed (left 0 for the step's product to add onto). tanh(c_t) waits in do's place."""
    one = _one(p)
    for j in range(hidden):
        state[j] += g[j]
    for j in range(hidden):
        d[3 * hidden + j] = _tanh(p[hidden + j])
    for j in range(hidden):
        state[hidden + j] = state[hidden + j] + g[hidden + j] + state[j] * p[5 * hidden + j] * (
            one - d[3 * hidden + j] * d[3 * hidden + j])
    for j in range(hidden):
        d[3 * hidden + j] = (state[j] * d[3 * hidden + j] + g[5 * hidden + j]) * p[5 * hidden + j] * (
            one - p[5 * hidden + j])
    for j in range(hidden):
        d[j] = (state[hidden + j] * p[4 * hidden + j] + g[2 * hidden + j]) * p[2 * hidden + j] * (
            one - p[2 * hidden + j])
    for j in range(hidden):
        d[hidden + j] = (state[hidden + j] * previous[start + j] + g[3 * hidden + j]) * p[3 * hidden + j] * (
            one - p[3 * hidden + j])
    for j in range(hidden):
        d[2 * hidden + j] = (state[hidden + j] * p[2 * hidden + j] + g[4 * hidden + j]) * (
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
    _product(False, True, steps * batch, 2 * hidden, features, xs, 0, features, inputs, 0, features, 0.0, packed,
             hidden, width)
    _product(False, True, steps * batch, hidden, features, xs, 0, features, inputs, 2 * hidden * features, features,
             0.0, packed, 4 * hidden, width)
    for t in range(steps):
        for b in range(batch):
            out[t, b, 3 * hidden:4 * hidden] = b_hh[2 * hidden:]
        if t == 0:
            _product(False, True, batch, 3 * hidden, hidden, h0.reshape(h0.size), 0, hidden, weights, 0, hidden, 1.0,
                     packed, hidden, width)
        else:
            _product(False, True, batch, 3 * hidden, hidden, packed, (t - 1) * batch * width, width, weights, 0,
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
    one = _one(row)
    for j in range(hidden):   # r and z in one loop of 2H ran 3 times slower
        row[hidden + j] = _sigmoid(row[hidden + j] + b_ih[j] + b_hh[j])
    for j in range(hidden):
        row[2 * hidden + j] = _sigmoid(row[2 * hidden + j] + b_ih[hidden + j] + b_hh[hidden + j])
    for j in range(hidden):
        row[4 * hidden + j] = _tanh(row[4 * hidden + j] + b_ih[2 * hidden + j] + row[hidden + j] * row[3 * hidden + j])
    for j in range(hidden):
        row[j] = (one - row[2 * hidden + j]) * row[4 * hidden + j] + row[2 * hidden + j] * previous[j]


@njit(**JIT)
def gru_backward(grad, packed, h0, w_hh, w_ih, lengths, out):
    """Backpropagation through time of gru_forward. out[t, b] (t < T) = [dr | dz | d(W_hn h + b_hn) | dn |
    dx_t]: r's, z's and n's pre-activation gradients on the input side are columns 0:2H and 3H:4H, on the
    hidden side 0:3H; out[T, b] = [dh0 | 0], the running dh while the steps are walked back."""
    steps, batch = packed.shape[0] - 1, packed.shape[1]
    hidden, features = h0.shape[1], w_ih.shape[1]
    width = out.shape[2]
    flat, inputs, weights = out.reshape(out.size), w_ih.reshape(w_ih.size), w_hh.reshape(w_hh.size)
    last = out[steps]
    last[:] = 0
    for b in range(batch):
        last[b, :hidden] = grad[steps, b, :hidden]
    for t in range(steps - 1, -1, -1):
        for b in range(batch):
            if t < lengths[b]:
                _gru_cell_backward(grad[t, b], packed[t, b], h0[b] if t == 0 else packed[t - 1, b], last[b], out[t, b],
                                   hidden)
            else:
                out[t, b] = 0
        _product(False, False, batch, hidden, 3 * hidden, flat, t * batch * width, width, weights, 0, hidden, 1.0,
                 flat, steps * batch * width, width)
    _product(False, False, steps * batch, features, 2 * hidden, flat, 0, width, inputs, 0, features, 0.0, flat,
             4 * hidden, width)
    _product(False, False, steps * batch, features, hidden, flat, 3 * hidden, width, inputs, 2 * hidden * features,
             features, 1.0, flat, 4 * hidden, width)


@njit(**JIT)
def _gru_cell_backward(g, p, previous, state, d, hidden):
    """One sequence's step backwards (g, p: its rows of the packed gradient and result; h_{t-1} is
    previous[:H]): d gets [dr | dz | d(W_hn h + b_hn) | dn], state[:H] (dh from step t + 1) becomes its
    part through z; the step's product adds the rest."""
    one = _one(p)
    for j in range(hidden):
        state[j] += g[j]
    for j in range(hidden):
        d[3 * hidden + j] = (state[j] * (one - p[2 * hidden + j]) + g[4 * hidden + j]) * (
            one - p[4 * hidden + j] * p[4 * hidden + j])
    for j in range(hidden):
        d[hidden + j] = (state[j] * (previous[j] - p[4 * hidden + j]) + g[2 * hidden + j]) * p[2 * hidden + j] * (
            one - p[2 * hidden + j])
    for j in range(hidden):
        state[j] *= p[2 * hidden + j]
    for j in range(hidden):
        d[j] = (d[3 * hidden + j] * p[3 * hidden + j] + g[hidden + j]) * p[hidden + j] * (one - p[hidden + j])
    for j in range(hidden):
        d[2 * hidden + j] = d[3 * hidden + j] * p[hidden + j] + g[3 * hidden + j]


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
    _product(True, False, 4 * hidden, features + hidden, steps * batch, gates.reshape(gates.size), 0, gates.shape[2],
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
    _product(True, False, 2 * hidden, columns, rows, flat, 0, width, operand, 0, columns, 0.0, result, 0, out.shape[1])
    _product(True, False, hidden, features, rows, flat, 3 * hidden, width, operand, 0, columns, 0.0, result,
             2 * hidden * out.shape[1], out.shape[1])
    _product(True, False, hidden, hidden, rows, flat, 2 * hidden, width, operand, features, columns, 0.0, result,
             2 * hidden * out.shape[1] + features, out.shape[1])
    sums = _column_sums(gates, steps, 0, 4 * hidden)
    out[:2 * hidden, features + hidden] = sums[:2 * hidden]
    out[2 * hidden:, features + hidden] = sums[3 * hidden:]
    out[:, features + hidden + 1] = sums[:3 * hidden]
