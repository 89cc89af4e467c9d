"""Neural-network kernels over rows of a C-contiguous (outer, n, inner) array."""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def _softmax_last_axis(x, out, log):
    """softmax_rows for inner == 1 (softmax over the last axis): one row at a time, in scalars.

    The max and the exponentials stay in x's precision (float32 uses expf, as NumPy
    does for float32); the sum is accumulated in float64. Log-softmax is
    (x - max) - log(sum), as in PyTorch: x - (max + log(sum)) would round the
    shift to the max's precision and lose accuracy in proportion to the max.
    """
    outer, n = x.shape[0], x.shape[1]
    for o in range(outer):
        if n == 0:
            continue
        top = x[o, 0, 0]
        for i in range(1, n):
            if x[o, i, 0] > top:
                top = x[o, i, 0]
        if top == -np.inf:   # every entry is -inf: shift by 0 instead (read back from out, in x's dtype)
            out[o, 0, 0] = 0
            top = out[o, 0, 0]
        total = 0.0
        for i in range(n):
            value = np.exp(x[o, i, 0] - top)
            out[o, i, 0] = value
            total += value
        if log:
            log_total = np.log(total)
            for i in range(n):
                out[o, i, 0] = (x[o, i, 0] - top) - log_total
        else:
            for i in range(n):
                out[o, i, 0] = out[o, i, 0] / total


@njit(**JIT)
def softmax_rows(x, out, log):
    """Softmax (or log-softmax when ``log``) along the middle axis, shifted by the max.

    Log-softmax is (x - max) - log(sum), never x - (max + log(sum)) (see
    _softmax_last_axis). The inner axis is the innermost loop, so every pass reads memory in order
    whichever axis is reduced.
    """
    outer, n, inner = x.shape
    if inner == 1:
        _softmax_last_axis(x, out, log)
        return
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
                total[k] = np.log(total[k])
            for i in range(n):
                for k in range(inner):
                    out[o, i, k] = (x[o, i, k] - top[k]) - total[k]
        else:
            for i in range(n):
                for k in range(inner):
                    out[o, i, k] /= total[k]


@njit(**JIT)
def softmax_cross_entropy(logits, labels, out):
    """Mean over rows of logsumexp(logits[r]) - logits[r, labels[r]]; labels are checked by the caller."""
    rows, classes = logits.shape
    total = 0.0
    for r in range(rows):
        top = logits[r, 0]   # in logits' dtype, so float32 rows use float32 exponentials
        for c in range(1, classes):
            if logits[r, c] > top:
                top = logits[r, c]
        acc = 0.0
        for c in range(classes):
            acc += np.exp(logits[r, c] - top)
        # (top - logit) + log(acc): the difference first, so a large max costs no accuracy.
        total += (top - logits[r, labels[r]]) + np.log(acc)
    out[0] = total / rows if rows else np.nan


@njit(**JIT)
def softmax_cross_entropy_grad(logits, labels, scale, out):
    """out = (softmax(logits) - one_hot(labels)) * scale, row by row; labels are checked by the caller."""
    rows, classes = logits.shape
    for r in range(rows):
        top = logits[r, 0]
        for c in range(1, classes):
            if logits[r, c] > top:
                top = logits[r, c]
        if top == -np.inf:   # every logit is -inf: shift by 0 instead (read back from out, in logits' dtype)
            out[r, 0] = 0
            top = out[r, 0]
        total = 0.0
        for c in range(classes):
            value = np.exp(logits[r, c] - top)
            out[r, c] = value
            total += value
        factor = scale / total
        for c in range(classes):
            out[r, c] = out[r, c] * factor
        out[r, labels[r]] -= scale


@njit(**JIT)
def first_bad_label(labels, classes):
    """The index of the first label outside [0, classes), or -1 when all are valid."""
    for i in range(labels.shape[0]):
        if labels[i] < 0 or labels[i] >= classes:
            return i
    return -1


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
