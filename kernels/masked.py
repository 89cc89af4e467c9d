"""Kernels that skip padding: entries t >= lengths[b] of a padded (batch, time, ...) array.

The launchers move the batch axis first and the dynamic (time) axis second, so
every kernel here sees x as (B, T, ...) C-contiguous and reads lengths[b] to
know where each batch entry's padding starts. Floating-point reductions accumulate in
float64; integer sums, maxima, minima and counts accumulate exactly in the output's
integer dtype (masked_reduce_integer).
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")

SUM, MEAN, MAX, MIN, LOGSUMEXP, COUNT = 0, 1, 2, 3, 4, 5


@njit(**JIT)
def first_bad_length(lengths, size):
    """The position of the first length outside [0, size], or -1."""
    for i in range(lengths.shape[0]):
        if lengths[i] < 0 or lengths[i] > size:
            return i
    return -1


@njit(**JIT)
def masked_reduce(x, lengths, out, mode, reduce_batch, reduce_time):
    """Reduce x (B, T, K, M) over M, and over B and/or T when asked, skipping t >= lengths[b].

    ``out`` is (B or 1, T or 1, K). Over no valid element: sum and count give 0,
    mean NaN, max -inf, min +inf, logsumexp -inf.
    """
    B, T, K, M = x.shape
    OB, OT = out.shape[0], out.shape[1]
    acc = np.zeros((OB, OT, K))
    count = np.zeros((OB, OT, K))
    top = np.empty((OB, OT, K))
    if mode == MAX or mode == LOGSUMEXP:
        top[:] = -np.inf
    elif mode == MIN:
        top[:] = np.inf
    for b in range(B):
        ob = 0 if reduce_batch else b
        valid = lengths[b]
        for t in range(valid):
            ot = 0 if reduce_time else t
            for k in range(K):
                for m in range(M):
                    value = x[b, t, k, m]
                    count[ob, ot, k] += 1.0
                    if mode == SUM or mode == MEAN:
                        acc[ob, ot, k] += value
                    elif mode == MAX or mode == LOGSUMEXP:
                        current = top[ob, ot, k]
                        if current == current and (value > current or value != value):
                            top[ob, ot, k] = value
                    elif mode == MIN:
                        current = top[ob, ot, k]
                        if current == current and (value < current or value != value):
                            top[ob, ot, k] = value
    if mode == LOGSUMEXP:
        for b in range(B):
            ob = 0 if reduce_batch else b
            for t in range(lengths[b]):
                ot = 0 if reduce_time else t
                for k in range(K):
                    shift = top[ob, ot, k]
                    if shift == -np.inf or shift == np.inf or shift != shift:
                        continue
                    for m in range(M):
                        acc[ob, ot, k] += np.exp(x[b, t, k, m] - shift)
    for ob in range(OB):
        for ot in range(OT):
            for k in range(K):
                if mode == SUM:
                    out[ob, ot, k] = acc[ob, ot, k]
                elif mode == MEAN:
                    n = count[ob, ot, k]
                    out[ob, ot, k] = acc[ob, ot, k] / n if n > 0 else np.nan
                elif mode == COUNT:
                    out[ob, ot, k] = count[ob, ot, k]
                elif mode == LOGSUMEXP:
                    shift = top[ob, ot, k]
                    if shift == -np.inf or shift == np.inf or shift != shift:
                        out[ob, ot, k] = shift
                    else:
                        out[ob, ot, k] = shift + np.log(acc[ob, ot, k])
                else:
                    out[ob, ot, k] = top[ob, ot, k]


@njit(**JIT)
def masked_reduce_integer(x, lengths, out, mode, reduce_batch, reduce_time, start):
    """masked_reduce for integer x and out (SUM, MAX, MIN or COUNT), exact: accumulates in out's dtype,
    wrapping on overflow as NumPy does. Every output starts at ``start`` (0, or for MAX / MIN the
    lowest / highest value of x's dtype, which is what an output over no valid element keeps).
    """
    B, T, K, M = x.shape
    out[:] = start
    for b in range(B):
        ob = 0 if reduce_batch else b
        for t in range(lengths[b]):
            ot = 0 if reduce_time else t
            for k in range(K):
                for m in range(M):
                    value = x[b, t, k, m]
                    if mode == SUM:
                        out[ob, ot, k] += value
                    elif mode == COUNT:
                        out[ob, ot, k] += 1
                    elif mode == MAX:
                        if value > out[ob, ot, k]:
                            out[ob, ot, k] = value
                    elif value < out[ob, ot, k]:
                        out[ob, ot, k] = value


@njit(**JIT)
def masked_softmax(x, lengths, out, log):
    """Softmax (log-softmax when ``log``) of x (B, T, R) along T over t < lengths[b]; 0 at padding.

    The loops keep r innermost, so every pass reads x and writes out contiguously.
    """
    B, T, R = x.shape
    top = np.empty(R)
    total = np.empty(R)
    for b in range(B):
        valid = lengths[b]
        top[:] = -np.inf
        total[:] = 0.0
        for t in range(valid):
            for r in range(R):
                if x[b, t, r] > top[r]:
                    top[r] = x[b, t, r]
        for r in range(R):
            if top[r] == -np.inf:
                top[r] = 0.0
        for t in range(valid):
            for r in range(R):
                e = np.exp(x[b, t, r] - top[r])
                total[r] += e
                if not log:
                    out[b, t, r] = e
        if log:
            # (x - max) - log(sum), not x - (max + log(sum)): see kernels.nn.softmax_rows.
            for r in range(R):
                total[r] = np.log(total[r])
            for t in range(valid):
                for r in range(R):
                    out[b, t, r] = (x[b, t, r] - top[r]) - total[r]
        else:
            for t in range(valid):
                for r in range(R):
                    out[b, t, r] /= total[r]
        for t in range(valid, T):
            for r in range(R):
                out[b, t, r] = 0.0


@njit(**JIT)
def sequence_mask(lengths, out):
    """out[b, t] = t < lengths[b] for out of shape (B, T)."""
    for b in range(out.shape[0]):
        for t in range(out.shape[1]):
            out[b, t] = t < lengths[b]


@njit(**JIT)
def first_bad_label(logits_classes, labels, lengths):
    """(b, t, r) flattened position of the first valid label outside [0, classes), or -1."""
    B, T, R = labels.shape
    for b in range(B):
        for t in range(lengths[b]):
            for r in range(R):
                if labels[b, t, r] < 0 or labels[b, t, r] >= logits_classes:
                    return (b * T + t) * R + r
    return -1


@njit(**JIT)
def masked_cross_entropy(logits, labels, lengths, out, grad, want_grad):
    """Mean over valid (b, t, r) of logsumexp(logits) - logits[label]; its gradient into ``grad``.

    logits is (B, T, R, C), labels (B, T, R). The gradient is (softmax - one_hot) / count
    at valid positions and 0 at padding; labels at padding are never read.
    """
    B, T, R, C = logits.shape
    count = 0.0
    for b in range(B):
        count += lengths[b] * R
    total = 0.0
    for b in range(B):
        for t in range(T):
            for r in range(R):
                if t >= lengths[b]:
                    if want_grad:
                        for c in range(C):
                            grad[b, t, r, c] = 0.0
                    continue
                top = -np.inf
                for c in range(C):
                    if logits[b, t, r, c] > top:
                        top = logits[b, t, r, c]
                acc = 0.0
                for c in range(C):
                    acc += np.exp(logits[b, t, r, c] - top)
                label = labels[b, t, r]
                total += (top - logits[b, t, r, label]) + np.log(acc)
                if want_grad:
                    for c in range(C):
                        grad[b, t, r, c] = np.exp(logits[b, t, r, c] - top) / acc / count
                    grad[b, t, r, label] -= 1.0 / count
    out[0] = total / count if count > 0 else np.nan
