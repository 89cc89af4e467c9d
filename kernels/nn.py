"""Neural-network kernels over rows of a C-contiguous (outer, n, inner) array."""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def softmax_rows(x, out, log):
    """Softmax (or log-softmax when ``log``) along the middle axis, shifted by the max.

    The inner axis is the innermost loop, so every pass reads memory in order
    whichever axis is reduced.
    """
    outer, n, inner = x.shape
    top = np.empty(inner)
    total = np.empty(inner)
    for o in range(outer):
        top[:] = -np.inf
        total[:] = 0.0
        for i in range(n):
            for k in range(inner):
                if x[o, i, k] > top[k]:
                    top[k] = x[o, i, k]
        for k in range(inner):
            if top[k] == -np.inf:
                top[k] = 0.0
        # One exp per element: the shifted exponentials are kept in out.
        for i in range(n):
            for k in range(inner):
                value = np.exp(x[o, i, k] - top[k])
                out[o, i, k] = value
                total[k] += value
        if log:
            for k in range(inner):
                top[k] += np.log(total[k])
            for i in range(n):
                for k in range(inner):
                    out[o, i, k] = x[o, i, k] - top[k]
        else:
            for i in range(n):
                for k in range(inner):
                    out[o, i, k] /= total[k]


@njit(**JIT)
def softmax_cross_entropy(logits, labels, out):
    """Mean over rows of logsumexp(logits[r]) - logits[r, labels[r]]; labels are checked by the caller."""
    rows = logits.shape[0]
    total = 0.0
    for r in range(rows):
        top = -np.inf
        for c in range(logits.shape[1]):
            if logits[r, c] > top:
                top = logits[r, c]
        acc = 0.0
        for c in range(logits.shape[1]):
            acc += np.exp(logits[r, c] - top)
        total += top + np.log(acc) - logits[r, labels[r]]
    out[0] = total / rows if rows else np.nan


@njit(**JIT)
def one_hot(labels, out):
    """out[r, labels[r]] = 1, zeros elsewhere; labels are checked by the caller."""
    out[:, :] = 0
    for r in range(labels.shape[0]):
        out[r, labels[r]] = 1


@njit(**JIT)
def mean_squared_error(predictions, targets, out):
    total = 0.0
    n = predictions.size
    p = predictions.reshape(n)
    t = targets.reshape(n)
    for i in range(n):
        d = p[i] - t[i]
        total += d * d
    out[0] = total / n if n else np.nan
