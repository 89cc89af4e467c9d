"""Kernels that skip padding: entries t >= lengths[b] of a padded (batch, time, ...) array.

The launchers move the batch axis first and the dynamic (time) axis second, so
every kernel here sees x as (B, T, ...) C-contiguous and reads lengths[b] to
know where each batch entry's padding starts. The masked reductions are not here:
they are the plain ones' kernel, ``reduce.reduce3``, given the valid rows.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def first_bad_length(lengths, size):
    """The position of the first length outside [0, size], or -1."""
    for i in range(lengths.shape[0]):
        if lengths[i] < 0 or lengths[i] > size:
            return i
    return -1


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
