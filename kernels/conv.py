"""Convolution kernels: im2col + BLAS (np.dot) on C-contiguous (batch, channels, height, width) arrays.

A convolution of ``x`` (N, C, H, W) with ``w`` (O, C/groups, kh, kw) is, per group, the matrix
product ``w_g (O/g, K) @ col (K, N*L)`` where ``K = C/g * kh * kw``, ``L = OH * OW`` and ``col``
holds the input patches (im2col). The batch goes through in chunks of about ``COLUMNS`` columns,
so that small images make few large products and large images few rows of ``col`` at a time.

- :func:`conv_forward` is the convolution (cross-correlation, as PyTorch's conv2d);
- :func:`conv_backward_input` is its adjoint: ``col = w_g.T @ gy_g`` then col2im (summing
  overlapping patches). It is conv2d's input gradient and conv_transpose2d's forward;
- :func:`conv_backward_weight` is ``gy_g @ col.T``: conv2d's weight gradient.

A 1-D convolution is the 2-D one with a height of 1. Every index is computed from the shapes the
caller checked (graphview/ops/conv.py); nothing here reads outside them.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")

COLUMNS = 4096     # about this many columns of col per chunk of the batch


@njit(**JIT)
def chunk(batch, positions):
    """How many batch entries one product takes."""
    return max(1, min(batch, COLUMNS // max(positions, 1)))


@njit(**JIT)
def _valid(size, pad, offset, stride, count):
    """The output positions [low, high) whose input index ``p * stride - pad + offset`` is in [0, size)."""
    a = pad - offset
    low = 0 if a <= 0 else (a + stride - 1) // stride
    b = size + a
    high = 0 if b <= 0 else (b + stride - 1) // stride
    return min(low, count), max(min(high, count), min(low, count))


@njit(**JIT)
def im2col(x, n0, m, c0, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col):
    """col[(c * kh + i) * kw + j, b * L + y * ow + z] = x[n0 + b, c0 + c, y*sh - ph + i*dh, z*sw - pw + j*dw], 0 outside."""
    height, width = x.shape[2], x.shape[3]
    positions = oh * ow
    for c in range(cg):
        for i in range(kh):
            y_low, y_high = _valid(height, ph, i * dh, sh, oh)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                z_low, z_high = _valid(width, pw, j * dw, sw, ow)
                for b in range(m):
                    plane = x[n0 + b, c0 + c]
                    base = b * positions
                    for y in range(oh):
                        start = base + y * ow
                        if y < y_low or y >= y_high:
                            for z in range(ow):
                                col[row, start + z] = 0
                            continue
                        source = plane[y * sh - ph + i * dh]
                        for z in range(z_low):
                            col[row, start + z] = 0
                        first = z_low * sw - pw + j * dw
                        for z in range(z_low, z_high):
                            col[row, start + z] = source[first + (z - z_low) * sw]
                        for z in range(z_high, ow):
                            col[row, start + z] = 0


@njit(**JIT)
def col2im(col, n0, m, c0, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, out):
    """The adjoint of im2col: out[n0 + b, c0 + c, ...] += each patch entry of col (out is not zeroed here)."""
    height, width = out.shape[2], out.shape[3]
    positions = oh * ow
    for c in range(cg):
        for i in range(kh):
            y_low, y_high = _valid(height, ph, i * dh, sh, oh)
            for j in range(kw):
                row = (c * kh + i) * kw + j
                z_low, z_high = _valid(width, pw, j * dw, sw, ow)
                first = z_low * sw - pw + j * dw
                for b in range(m):
                    plane = out[n0 + b, c0 + c]
                    base = b * positions
                    for y in range(y_low, y_high):
                        target = plane[y * sh - ph + i * dh]
                        start = base + y * ow
                        for z in range(z_low, z_high):
                            target[first + (z - z_low) * sw] += col[row, start + z]


@njit(**JIT)
def _gather(y3, n0, m, o0, count, buffer):
    """buffer[o, b * L + l] = y3[n0 + b, o0 + o, l]."""
    positions = y3.shape[2]
    for o in range(count):
        for b in range(m):
            source = y3[n0 + b, o0 + o]
            base = b * positions
            for p in range(positions):
                buffer[o, base + p] = source[p]


@njit(**JIT)
def conv_forward(x, w, bias, has_bias, sh, sw, ph, pw, dh, dw, groups, out):
    """out = conv2d(x, w) (+ bias per output channel); x (N, C, H, W), w (O, C/groups, kh, kw), out (N, O, OH, OW)."""
    batch = x.shape[0]
    outs, cg, kh, kw = w.shape
    oh, ow = out.shape[2], out.shape[3]
    positions = oh * ow
    og = outs // groups
    depth = cg * kh * kw
    out3 = out.reshape(batch, outs, positions)
    w2 = w.reshape(outs, depth)
    step = chunk(batch, positions)
    for g in range(groups):
        wg = np.ascontiguousarray(w2[g * og:(g + 1) * og])
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            col = np.empty((depth, m * positions), x.dtype)
            im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col)
            result = np.dot(wg, col)
            for o in range(og):
                add = bias[g * og + o] if has_bias else 0
                for b in range(m):
                    target = out3[n0 + b, g * og + o]
                    base = b * positions
                    for p in range(positions):
                        target[p] = result[o, base + p] + add


@njit(**JIT)
def conv_backward_input(gy, w, bias, has_bias, sh, sw, ph, pw, dh, dw, groups, out):
    """out = the adjoint of conv2d(., w) applied to gy (+ bias per channel of out): conv2d's input
    gradient and conv_transpose2d. gy (N, O, OH, OW), w (O, C/groups, kh, kw), out (N, C, H, W)."""
    batch = gy.shape[0]
    outs, cg, kh, kw = w.shape
    oh, ow = gy.shape[2], gy.shape[3]
    positions = oh * ow
    og = outs // groups
    depth = cg * kh * kw
    gy3 = gy.reshape(batch, outs, positions)
    w2 = w.reshape(outs, depth)
    channels = out.shape[1]
    for n in range(batch):
        for c in range(channels):
            out[n, c] = bias[c] if has_bias else 0
    step = chunk(batch, positions)
    for g in range(groups):
        wt = np.ascontiguousarray(w2[g * og:(g + 1) * og].T)
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            buffer = np.empty((og, m * positions), gy.dtype)
            _gather(gy3, n0, m, g * og, og, buffer)
            col = np.dot(wt, buffer)
            col2im(col, n0, m, g * cg, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, out)


@njit(**JIT)
def conv_backward_weight(x, gy, sh, sw, ph, pw, dh, dw, groups, out):
    """out (O, C/groups, kh, kw) = conv2d's weight gradient: per group, gy_g @ col(x).T."""
    batch = x.shape[0]
    outs, cg, kh, kw = out.shape
    oh, ow = gy.shape[2], gy.shape[3]
    positions = oh * ow
    og = outs // groups
    depth = cg * kh * kw
    gy3 = gy.reshape(batch, outs, positions)
    out2 = out.reshape(outs, depth)
    out2[:, :] = 0
    step = chunk(batch, positions)
    for g in range(groups):
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            col = np.empty((depth, m * positions), x.dtype)
            im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col)
            buffer = np.empty((og, m * positions), x.dtype)
            _gather(gy3, n0, m, g * og, og, buffer)
            part = np.dot(buffer, np.ascontiguousarray(col.T))
            out2[g * og:(g + 1) * og] += part
