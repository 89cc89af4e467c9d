"""Neural-network kernels over rows of a C-contiguous (outer, n, inner) array."""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def softmax_rows(x, out, log):
    """Softmax (or log-softmax when ``log``) along the middle axis, shifted by the max."""
    for o in range(x.shape[0]):
        for k in range(x.shape[2]):
            top = -np.inf
            for i in range(x.shape[1]):
                if x[o, i, k] > top:
                    top = x[o, i, k]
            if top == -np.inf:
                top = 0.0
            total = 0.0
            for i in range(x.shape[1]):
                total += np.exp(x[o, i, k] - top)
            if log:
                shift = top + np.log(total)
                for i in range(x.shape[1]):
                    out[o, i, k] = x[o, i, k] - shift
            else:
                for i in range(x.shape[1]):
                    out[o, i, k] = np.exp(x[o, i, k] - top) / total


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
