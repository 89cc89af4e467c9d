"""Normalization kernels over C-contiguous (outer, n, inner) arrays.

Batch norm's channels are the middle axis (statistics over outer and inner);
layer norm normalizes along the middle axis (one mean and variance per (outer,
inner) position). Sums, means and variances are accumulated in float64, the
variance in two passes (mean first), and results are rounded once into the
output's dtype.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def channel_sums(x, out):
    """out[c] = the sum of x[:, c, :] (x C-contiguous (outer, channels, inner)), accumulated in float64:
    the rows added column by column into a buffer first (an element-wise loop, which vectorizes where a
    running scalar sum, without fastmath, would not), then the buffer's entries summed. A convolution's
    bias gradient, and the first pass of channel_moments."""
    outer, channels, inner = x.shape
    acc = np.empty(inner)
    for c in range(channels):
        for k in range(inner):
            acc[k] = 0.0
        for o in range(outer):
            row = x[o, c]
            for k in range(inner):
                acc[k] += row[k]
        total = 0.0
        for k in range(inner):
            total += acc[k]
        out[c] = total


@njit(**JIT)
def channel_moments(x, mean, var):
    """Per channel (middle axis): ``mean`` and the biased variance ``var`` (float64), NaN when empty: the
    sums by channel_sums, then the squared deviations added the same way (columns first)."""
    outer, channels, inner = x.shape
    count = outer * inner
    channel_sums(x, mean)
    acc = np.empty(inner)
    for c in range(channels):
        m = mean[c] / count if count > 0 else np.nan
        for k in range(inner):
            acc[k] = 0.0
        for o in range(outer):
            row = x[o, c]
            for k in range(inner):
                d = row[k] - m
                acc[k] += d * d
        squares = 0.0
        for k in range(inner):
            squares += acc[k]
        mean[c] = m
        var[c] = squares / count if count > 0 else np.nan


@njit(**JIT)
def masked_channel_moments(x, valid, mean, var):
    """channel_moments over the (outer, inner) positions where ``valid`` (float64 0/1) is not 0; the
    others are never read. Returns the number of valid positions."""
    outer, channels, inner = x.shape
    count = 0
    for o in range(outer):
        for k in range(inner):
            if valid[o, k] != 0:
                count += 1
    for c in range(channels):
        total = 0.0
        for o in range(outer):
            for k in range(inner):
                if valid[o, k] != 0:
                    total += x[o, c, k]
        m = total / count if count > 0 else np.nan
        squares = 0.0
        for o in range(outer):
            for k in range(inner):
                if valid[o, k] != 0:
                    d = x[o, c, k] - m
                    squares += d * d
        mean[c] = m
        var[c] = squares / count if count > 0 else np.nan
    return count


@njit(**JIT)
def zero_padding(out, valid):
    """``out[o, c, k] = 0`` where ``valid[o, k]`` is 0."""
    outer, channels, inner = out.shape
    for o in range(outer):
        for k in range(inner):
            if valid[o, k] == 0:
                for c in range(channels):
                    out[o, c, k] = 0


@njit(**JIT)
def channel_affine(x, scale, shift, out):
    """``out[o, c, k] = x[o, c, k] * scale[c] + shift[c]`` (scale and shift float64)."""
    outer, channels, inner = x.shape
    for o in range(outer):
        for c in range(channels):
            a = scale[c]
            b = shift[c]
            for k in range(inner):
                out[o, c, k] = x[o, c, k] * a + b


@njit(**JIT)
def channel_grad_sums(x, g, mean, invstd, sum_g, sum_gxhat):
    """Per channel: ``sum_g = sum(g)`` and ``sum_gxhat = sum(g * (x - mean) * invstd)`` (float64; columns
    first, as channel_moments)."""
    outer, channels, inner = x.shape
    acc_g = np.empty(inner)
    acc_gx = np.empty(inner)
    for c in range(channels):
        m = mean[c]
        for k in range(inner):
            acc_g[k] = 0.0
            acc_gx[k] = 0.0
        for o in range(outer):
            xs = x[o, c]
            gs = g[o, c]
            for k in range(inner):
                acc_g[k] += gs[k]
                acc_gx[k] += gs[k] * (xs[k] - m)
        s = 0.0
        sx = 0.0
        for k in range(inner):
            s += acc_g[k]
            sx += acc_gx[k]
        sum_g[c] = s
        sum_gxhat[c] = sx * invstd[c]


@njit(**JIT)
def batch_norm_grad_input(x, g, mean, invstd, scale, sum_g, sum_gxhat, count, out):
    """The input gradient of batch norm through the batch statistics (PyTorch's training backward):
    ``out = scale * (g - sum_g / N - xhat * sum_gxhat / N)``, xhat = (x - mean) * invstd, N = ``count``
    values per channel."""
    outer, channels, inner = x.shape
    for o in range(outer):
        for c in range(channels):
            a = scale[c]
            m = mean[c]
            s = invstd[c]
            mean_g = sum_g[c] / count
            mean_gx = sum_gxhat[c] / count
            for k in range(inner):
                xhat = (x[o, c, k] - m) * s
                out[o, c, k] = a * (g[o, c, k] - mean_g - xhat * mean_gx)


@njit(**JIT)
def lerp_into(target, source, weight):
    """``target = (1 - weight) * target + weight * source`` in place (1-D; source float64); returns target."""
    keep = 1.0 - weight
    for i in range(target.shape[0]):
        target[i] = keep * target[i] + weight * source[i]
    return target


@njit(**JIT)
def _row_stats(x, o, eps, mean, rstd):
    """Mean and 1/sqrt(var + eps) along the middle axis at every inner position of row ``o``."""
    n, inner = x.shape[1], x.shape[2]
    for k in range(inner):
        mean[k] = 0.0
        rstd[k] = 0.0
    for i in range(n):
        for k in range(inner):
            mean[k] += x[o, i, k]
    for k in range(inner):
        mean[k] = mean[k] / n
    for i in range(n):
        for k in range(inner):
            d = x[o, i, k] - mean[k]
            rstd[k] += d * d
    for k in range(inner):
        rstd[k] = 1.0 / np.sqrt(rstd[k] / n + eps)


@njit(**JIT)
def layer_norm_forward(x, gamma, beta, eps, out):
    """``out = (x - mean) / sqrt(var + eps) * gamma + beta`` along the middle axis; gamma, beta float64 (n,)."""
    outer, n, inner = x.shape
    if n == 0:
        return
    mean = np.empty(inner)
    rstd = np.empty(inner)
    for o in range(outer):
        _row_stats(x, o, eps, mean, rstd)
        for i in range(n):
            a = gamma[i]
            b = beta[i]
            for k in range(inner):
                out[o, i, k] = (x[o, i, k] - mean[k]) * rstd[k] * a + b


@njit(**JIT)
def layer_norm_backward(x, gamma, g, eps, dx, dgamma, dbeta, want_dx, want_params):
    """Layer norm's backward along the middle axis: ``dx`` (when ``want_dx``) and the float64 sums
    ``dgamma = sum(g * xhat)``, ``dbeta = sum(g)`` over outer and inner (when ``want_params``).

    dx = rstd * (g*gamma - mean(g*gamma) - xhat * mean(g*gamma*xhat)), the means along the middle axis.
    """
    outer, n, inner = x.shape
    if n == 0:
        return
    mean = np.empty(inner)
    rstd = np.empty(inner)
    mean_dy = np.empty(inner)
    mean_dyx = np.empty(inner)
    for i in range(n):
        dgamma[i] = 0.0
        dbeta[i] = 0.0
    for o in range(outer):
        _row_stats(x, o, eps, mean, rstd)
        if want_params:
            for i in range(n):
                sg = 0.0
                sgx = 0.0
                for k in range(inner):
                    sg += g[o, i, k]
                    sgx += g[o, i, k] * (x[o, i, k] - mean[k]) * rstd[k]
                dbeta[i] += sg
                dgamma[i] += sgx
        if want_dx:
            for k in range(inner):
                mean_dy[k] = 0.0
                mean_dyx[k] = 0.0
            for i in range(n):
                a = gamma[i]
                for k in range(inner):
                    dy = g[o, i, k] * a
                    mean_dy[k] += dy
                    mean_dyx[k] += dy * (x[o, i, k] - mean[k]) * rstd[k]
            for k in range(inner):
                mean_dy[k] = mean_dy[k] / n
                mean_dyx[k] = mean_dyx[k] / n
            for i in range(n):
                a = gamma[i]
                for k in range(inner):
                    xhat = (x[o, i, k] - mean[k]) * rstd[k]
                    dx[o, i, k] = rstd[k] * (g[o, i, k] * a - mean_dy[k] - xhat * mean_dyx[k])
