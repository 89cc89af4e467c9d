"""Pooling kernels over (batch, channel, height, width) arrays of any strides.

The caller passes channels-first views (a channels-last tensor permuted, a 1-D one with a height
axis of 1) and checks the sizes: every window holds at least one element of the input (padding is
at most half the kernel, as PyTorch requires), and out has the output size the attributes give.
Max pooling takes the first maximum of a window in row-major order, or its last NaN, as PyTorch's
CPU kernels do; the gradient kernels find the same element again (no index array is stored).
Sums accumulate in float64.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def _argmax(x, b, c, h0, w0, kh, kw):
    """(h, w) of the window's first maximum (its last NaN if it holds one); windows are never empty."""
    height, width = x.shape[2], x.shape[3]
    best_h, best_w = -1, -1
    best = x[b, c, 0, 0]
    for i in range(kh):
        h = h0 + i
        if h < 0 or h >= height:
            continue
        for j in range(kw):
            w = w0 + j
            if w < 0 or w >= width:
                continue
            value = x[b, c, h, w]
            if best_h < 0 or value > best or np.isnan(value):
                best, best_h, best_w = value, h, w
    return best_h, best_w


@njit(**JIT)
def max_pool(x, out, kh, kw, sh, sw, ph, pw):
    """out[b, c, i, j] = the maximum of x over the window at (i * sh - ph, j * sw - pw)."""
    batch, channels, oh, ow = out.shape
    for b in range(batch):
        for c in range(channels):
            for i in range(oh):
                for j in range(ow):
                    h, w = _argmax(x, b, c, i * sh - ph, j * sw - pw, kh, kw)
                    out[b, c, i, j] = x[b, c, h, w]


@njit(**JIT)
def max_pool_grad(x, grad, out, kh, kw, sh, sw, ph, pw):
    """out (x's shape) = grad added at each window's argmax in x, zero elsewhere."""
    batch, channels, oh, ow = grad.shape
    out[:, :, :, :] = 0
    for b in range(batch):
        for c in range(channels):
            for i in range(oh):
                for j in range(ow):
                    h, w = _argmax(x, b, c, i * sh - ph, j * sw - pw, kh, kw)
                    out[b, c, h, w] += grad[b, c, i, j]


@njit(**JIT)
def max_pool_select(x, values, out, kh, kw, sh, sw, ph, pw):
    """out (the pool's shape) = values (x's shape) at each window's argmax in x."""
    batch, channels, oh, ow = out.shape
    for b in range(batch):
        for c in range(channels):
            for i in range(oh):
                for j in range(ow):
                    h, w = _argmax(x, b, c, i * sh - ph, j * sw - pw, kh, kw)
                    out[b, c, i, j] = values[b, c, h, w]


@njit(**JIT)
def avg_pool(x, out, kh, kw, sh, sw, ph, pw, include_pad):
    """The window means; the divisor is kh * kw with include_pad, else the window's input elements."""
    batch, channels, oh, ow = out.shape
    height, width = x.shape[2], x.shape[3]
    for b in range(batch):
        for c in range(channels):
            for i in range(oh):
                h0 = i * sh - ph
                for j in range(ow):
                    w0 = j * sw - pw
                    total = 0.0
                    count = 0
                    for hh in range(max(h0, 0), min(h0 + kh, height)):
                        for ww in range(max(w0, 0), min(w0 + kw, width)):
                            total += x[b, c, hh, ww]
                            count += 1
                    out[b, c, i, j] = total / (kh * kw if include_pad else count)


@njit(**JIT)
def avg_pool_grad(grad, out, kh, kw, sh, sw, ph, pw, include_pad):
    """out (the input's shape) = each window's grad divided by avg_pool's divisor, spread over it."""
    batch, channels, oh, ow = grad.shape
    height, width = out.shape[2], out.shape[3]
    out[:, :, :, :] = 0
    for b in range(batch):
        for c in range(channels):
            for i in range(oh):
                h0 = i * sh - ph
                h_start, h_end = max(h0, 0), min(h0 + kh, height)
                for j in range(ow):
                    w0 = j * sw - pw
                    w_start, w_end = max(w0, 0), min(w0 + kw, width)
                    count = kh * kw if include_pad else (h_end - h_start) * (w_end - w_start)
                    share = grad[b, c, i, j] / count
                    for hh in range(h_start, h_end):
                        for ww in range(w_start, w_end):
                            out[b, c, hh, ww] += share
