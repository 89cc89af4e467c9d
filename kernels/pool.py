"""Pooling kernels over (batch, channel, height, width) arrays of any strides.

The caller passes channels-first views (a channels-last tensor permuted, a 1-D one with a height
axis of 1) and checks the sizes: every window holds at least one element of the input (padding is
at most half the kernel, as PyTorch requires), and out has the output size the attributes give.
Max pooling takes the first maximum of a window in row-major order, or its last NaN, as PyTorch's
CPU kernels do; the gradient kernels find the same element again (no index array is stored).
Sums accumulate in float64. :func:`max_pool_2x2` and :func:`max_pool_grad_2x2` (2x2 windows at
stride 2 without padding, the common case) are also called on their own with C-contiguous arrays,
where they run up to twice as fast as typed for any strides.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def _argmax_nan(plane, h_start, h_end, w_start, w_end):
    """PyTorch's rule, for a window holding a NaN: the first maximum, replaced by each NaN met."""
    best_h, best_w = h_start, w_start
    best = plane[h_start, w_start]
    for h in range(h_start, h_end):
        for w in range(w_start, w_end):
            value = plane[h, w]
            if value > best or np.isnan(value):
                best, best_h, best_w = value, h, w
    return best_h, best_w


@njit(**JIT)
def _pairs(x, kh, kw, sh, sw, ph, pw):
    """Whether the windows are 2x2 at stride 2 without padding: the tiled kernels below take them."""
    return kh == 2 and kw == 2 and sh == 2 and sw == 2 and ph == 0 and pw == 0


@njit(**JIT)
def max_pool_2x2(x, out):
    """max_pool for 2x2 windows at stride 2, no padding: the four entries compared without branches
    (first maximum in row-major order, NaN if the window holds one)."""
    batch, channels, oh, ow = out.shape
    for b in range(batch):
        for c in range(channels):
            plane = x[b, c]
            target = out[b, c]
            for i in range(oh):
                upper, lower, row = plane[2 * i], plane[2 * i + 1], target[i]
                for j in range(ow):
                    p, q, r, s = upper[2 * j], upper[2 * j + 1], lower[2 * j], lower[2 * j + 1]
                    best = q if q > p else p
                    best = r if r > best else best
                    best = s if s > best else best
                    nan = (p != p) | (q != q) | (r != r) | (s != s)
                    row[j] = np.nan if nan else best


@njit(**JIT)
def max_pool_grad_2x2(x, grad, out):
    """max_pool_grad for 2x2 windows at stride 2, no padding: each window's four entries of out are
    zeroed and grad written at its first maximum (its last NaN if it holds one), so out needs no
    zeroing pass but for the rows and columns no window covers."""
    batch, channels, oh, ow = grad.shape
    height, width = out.shape[2], out.shape[3]
    for b in range(batch):
        for c in range(channels):
            plane = x[b, c]
            source = grad[b, c]
            target = out[b, c]
            for i in range(oh):
                upper, lower, values = plane[2 * i], plane[2 * i + 1], source[i]
                top, bottom = target[2 * i], target[2 * i + 1]
                for j in range(ow):
                    p, q, r, s = upper[2 * j], upper[2 * j + 1], lower[2 * j], lower[2 * j + 1]
                    # The maximum as max_pool's (float selects), then the first entry equal to it, in
                    # integer arithmetic on the comparisons: no branch (random data mispredicts them)
                    # and no chain of selects on the index (which ran 60% slower); a window with a NaN,
                    # rare, takes the branch to its last NaN.
                    best = q if q > p else p
                    best = r if r > best else best
                    best = s if s > best else best
                    at = (p != best) * (1 + (q != best) * (1 + (r != best)))
                    if (p != p) | (q != q) | (r != r) | (s != s):
                        at = 3 if s != s else 2 if r != r else 1 if q != q else 0
                    top[2 * j] = 0
                    top[2 * j + 1] = 0
                    bottom[2 * j] = 0
                    bottom[2 * j + 1] = 0
                    target[2 * i + (at >> 1), 2 * j + (at & 1)] = values[j]
                for w in range(2 * ow, width):
                    top[w] = 0
                    bottom[w] = 0
            for h in range(2 * oh, height):
                target[h, :] = 0


@njit(**JIT)
def max_pool(x, out, kh, kw, sh, sw, ph, pw):
    """out[b, c, i, j] = the maximum of x over the window at (i * sh - ph, j * sw - pw), NaN if it holds one."""
    if _pairs(x, kh, kw, sh, sw, ph, pw) and 2 * out.shape[2] <= x.shape[2] and 2 * out.shape[3] <= x.shape[3]:
        max_pool_2x2(x, out)
        return
    batch, channels, oh, ow = out.shape
    height, width = x.shape[2], x.shape[3]
    for b in range(batch):
        for c in range(channels):
            plane = x[b, c]
            target = out[b, c]
            for i in range(oh):
                h0 = i * sh - ph
                h_start, h_end = max(h0, 0), min(h0 + kh, height)
                for j in range(ow):
                    w0 = j * sw - pw
                    w_start, w_end = max(w0, 0), min(w0 + kw, width)
                    best = plane[h_start, w_start]
                    nan = False
                    for h in range(h_start, h_end):
                        for w in range(w_start, w_end):
                            value = plane[h, w]
                            best = value if value > best else best
                            nan |= value != value
                    target[i, j] = np.nan if nan else best


@njit(**JIT)
def _route(x, values, out, kh, kw, sh, sw, ph, pw, scatter):
    """For each window of x, its first maximum (its last NaN if it holds one) at (h, w): with scatter,
    out[b, c, h, w] += values[b, c, i, j], else out[b, c, i, j] = values[b, c, h, w]. The search selects
    without branches (random data mispredicts them; a window with a NaN is searched again), inline:
    a helper function returning (h, w) ran at half the speed."""
    batch, channels = x.shape[0], x.shape[1]
    height, width = x.shape[2], x.shape[3]
    oh, ow = (values.shape[2], values.shape[3]) if scatter else (out.shape[2], out.shape[3])
    for b in range(batch):
        for c in range(channels):
            plane = x[b, c]
            source = values[b, c]
            target = out[b, c]
            for i in range(oh):
                h0 = i * sh - ph
                h_start, h_end = max(h0, 0), min(h0 + kh, height)
                for j in range(ow):
                    w0 = j * sw - pw
                    w_start, w_end = max(w0, 0), min(w0 + kw, width)
                    best_h, best_w = h_start, w_start
                    best = plane[h_start, w_start]
                    nan = False
                    for h in range(h_start, h_end):
                        for w in range(w_start, w_end):
                            value = plane[h, w]
                            greater = value > best
                            best = value if greater else best
                            best_h += (h - best_h) * greater   # arithmetic, not a branch
                            best_w += (w - best_w) * greater
                            nan |= value != value
                    if nan:
                        best_h, best_w = _argmax_nan(plane, h_start, h_end, w_start, w_end)
                    if scatter:
                        target[best_h, best_w] += source[i, j]
                    else:
                        target[i, j] = source[best_h, best_w]


@njit(**JIT)
def max_pool_grad(x, grad, out, kh, kw, sh, sw, ph, pw):
    """out (x's shape) = grad added at each window's argmax in x, zero elsewhere."""
    if _pairs(x, kh, kw, sh, sw, ph, pw) and 2 * grad.shape[2] <= x.shape[2] and 2 * grad.shape[3] <= x.shape[3]:
        max_pool_grad_2x2(x, grad, out)
        return
    out[:, :, :, :] = 0
    _route(x, grad, out, kh, kw, sh, sw, ph, pw, kh > 0)    # True, typed bool: see max_pool_select


@njit(**JIT)
def max_pool_select(x, values, out, kh, kw, sh, sw, ph, pw):
    """out (the pool's shape) = values (x's shape) at each window's argmax in x."""
    # False, but computed: a literal True or False would compile _route once for each (Numba types a
    # constant argument as a literal), where a bool compiles it once for both callers.
    _route(x, values, out, kh, kw, sh, sw, ph, pw, kh < 0)


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
