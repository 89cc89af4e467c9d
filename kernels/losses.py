"""Loss kernels with a reduction: binary cross-entropy with logits, Huber, L1 (element pairs) and NLL.

``reduce`` is 0 for one loss per element (written to out in out's shape), 1 for their sum and 2 for
their mean (out[0]); sums are accumulated in float64. Operands arrive C-contiguous and flat, labels
as int64 checked by the caller with first_bad_label (Numba does no bounds checking).
"""
import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

JIT = dict(cache=True, nogil=True, error_model="numpy")

NONE, SUM, MEAN = 0, 1, 2


@register_jitable
def bce_with_logits_scalar(x, t, parameter):
    # max(x, 0) - x t + log1p(exp(-|x|)): exp never overflows.
    return max(x, 0.0) - x * t + math.log1p(math.exp(-abs(x)))


@register_jitable
def huber_scalar(p, t, delta):
    d = abs(p - t)
    if d <= delta:
        return 0.5 * d * d
    return delta * (d - 0.5 * delta)


@register_jitable
def l1_scalar(p, t, parameter):
    return abs(p - t)


def pairwise(scalar):
    @njit(**JIT)
    def loss(x, y, parameter, out, reduce):
        # 1-D operands (the launcher flattens them): a reshape here made each kernel compile 50% longer.
        n = x.size
        if reduce == NONE:
            for i in range(n):
                out[i] = scalar(x[i], y[i], parameter)
            return
        total = 0.0
        for i in range(n):
            total += scalar(x[i], y[i], parameter)
        if reduce == MEAN:
            total = total / n if n else np.nan
        out[0] = total
    return loss


bce_with_logits = pairwise(bce_with_logits_scalar)
huber = pairwise(huber_scalar)
l1 = pairwise(l1_scalar)


@njit(**JIT)
def first_bad_label(labels, classes, ignore_index):
    """The position of the first label outside [0, classes) that is not ignore_index, or -1."""
    for j in range(labels.size):
        k = labels[j]
        if (k < 0 or k >= classes) and k != ignore_index:
            return j
    return -1


@njit(**JIT)
def nll(log_probs, labels, ignore_index, out, reduce):
    """-log_probs[n, labels[n, k], k] for (N, C, K) log_probs and (N, K) labels; 0 (and not counted in a
    mean) where the label is ignore_index."""
    batch, classes, rest = log_probs.shape
    total = 0.0
    count = 0
    for n in range(batch):
        for k in range(rest):
            c = labels[n, k]
            value = 0.0
            if c != ignore_index:
                value = -log_probs[n, c, k]
                count += 1
            if reduce == NONE:
                out[n, k] = value
            else:
                total += value
    if reduce == NONE:
        return
    if reduce == MEAN:
        total = total / count if count else np.nan
    out[0, 0] = total


@njit(**JIT)
def nll_grad(labels, g, ignore_index, out, reduce):
    """The gradient of nll for its log_probs (N, C, K): -g (g[n, k] for reduce NONE, g[0, 0] else, divided
    by the count of labels that are not ignore_index for MEAN) at each label, 0 elsewhere."""
    batch, classes, rest = out.shape
    out[:, :, :] = 0
    count = 0
    for n in range(batch):
        for k in range(rest):
            if labels[n, k] != ignore_index:
                count += 1
    scale = 1.0
    if reduce == MEAN:
        scale = 1.0 / count if count else np.nan
    for n in range(batch):
        for k in range(rest):
            c = labels[n, k]
            if c == ignore_index:
                continue
            weight = g[n, k] if reduce == NONE else g[0, 0]
            out[n, c, k] = -weight * scale
