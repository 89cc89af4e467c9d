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

COLUMNS = 1024     # about this many columns of col per chunk of the batch


@njit(**JIT)
def chunk(batch, positions):
    """How many batch entries one product takes."""
    return max(1, min(batch, COLUMNS // max(positions, 1)))


@njit(**JIT)
def padded(x, n0, m, c0, cg, top, bottom, left, right):
    """x[n0:n0+m, c0:c0+cg] with zeros around (x itself, and n0, c0, when there is no padding)."""
    if top == 0 and bottom == 0 and left == 0 and right == 0:
        return x, n0, c0
    height, width = x.shape[2], x.shape[3]
    result = np.zeros((m, cg, height + top + bottom, width + left + right), x.dtype)
    for b in range(m):
        for c in range(cg):
            for y in range(height):
                source = x[n0 + b, c0 + c, y]
                target = result[b, c, top + y]
                for z in range(width):
                    target[left + z] = source[z]
    return result, 0, 0


@njit(**JIT)
def _pads(height, width, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow):
    """(top, bottom, left, right): the padding the patches of an (oh, ow) output read."""
    bottom = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - height - ph)
    right = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - width - pw)
    return (ph, bottom, pw, right)


@njit(**JIT)
def im2col(x, n0, m, c0, cg, kh, kw, sh, sw, pads, dh, dw, oh, ow, col):
    """col[(c * kh + i) * kw + j, b * L + y * ow + z] = x[n0 + b, c0 + c, y*sh - top + i*dh, z*sw - left + j*dw],
    0 outside x; ``pads`` is (top, bottom, left, right). The patch rows are copied from a zero-padded
    copy of the chunk, so the inner loop has no bounds to test."""
    xp, n0, c0 = padded(x, n0, m, c0, cg, pads[0], pads[1], pads[2], pads[3])
    positions = oh * ow
    for c in range(cg):
        for i in range(kh):
            for j in range(kw):
                target = col[(c * kh + i) * kw + j]
                for b in range(m):
                    plane = xp[n0 + b, c0 + c]
                    base = b * positions
                    for y in range(oh):
                        source = plane[y * sh + i * dh]
                        start = base + y * ow
                        offset = j * dw
                        for z in range(ow):
                            target[start + z] = source[offset + z * sw]


@njit(**JIT)
def col2im(col, n0, m, c0, cg, kh, kw, sh, sw, pads, dh, dw, oh, ow, out):
    """The adjoint of im2col: out[n0 + b, c0 + c, ...] += each patch entry of col (out is not zeroed
    here). With padding, the patches are summed into a zero-padded buffer whose inside is added to out."""
    direct = pads[0] == 0 and pads[1] == 0 and pads[2] == 0 and pads[3] == 0
    if direct:
        target, b0, d0 = out, n0, c0
    else:
        target = np.zeros((m, cg, out.shape[2] + pads[0] + pads[1], out.shape[3] + pads[2] + pads[3]), out.dtype)
        b0, d0 = 0, 0
    positions = oh * ow
    for c in range(cg):
        for i in range(kh):
            for j in range(kw):
                source = col[(c * kh + i) * kw + j]
                offset = j * dw
                for b in range(m):
                    plane = target[b0 + b, d0 + c]
                    base = b * positions
                    for y in range(oh):
                        line = plane[y * sh + i * dh]
                        start = base + y * ow
                        for z in range(ow):
                            line[offset + z * sw] += source[start + z]
    if direct:
        return
    height, width = out.shape[2], out.shape[3]
    for b in range(m):
        for c in range(cg):
            for y in range(height):
                line = target[b, c, pads[0] + y]
                result = out[n0 + b, c0 + c, y]
                for z in range(width):
                    result[z] += line[pads[2] + z]


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
    pads = _pads(x.shape[2], x.shape[3], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    for g in range(groups):
        wg = np.ascontiguousarray(w2[g * og:(g + 1) * og])
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            col = np.empty((depth, m * positions), x.dtype)
            im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, pads, dh, dw, oh, ow, col)
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
    pads = _pads(out.shape[2], out.shape[3], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    for g in range(groups):
        wt = np.ascontiguousarray(w2[g * og:(g + 1) * og].T)
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            buffer = np.empty((og, m * positions), gy.dtype)
            _gather(gy3, n0, m, g * og, og, buffer)
            col = np.dot(wt, buffer)
            col2im(col, n0, m, g * cg, cg, kh, kw, sh, sw, pads, dh, dw, oh, ow, out)


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
    pads = _pads(x.shape[2], x.shape[3], kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    for g in range(groups):
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            col = np.empty((depth, m * positions), x.dtype)
            im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, pads, dh, dw, oh, ow, col)
            buffer = np.empty((og, m * positions), x.dtype)
            _gather(gy3, n0, m, g * og, og, buffer)
            part = np.dot(buffer, col.T)
            out2[g * og:(g + 1) * og] += part


@njit(**JIT)
def channel_sums(y3, out):
    """out[c] = the sum of y3[:, c, :] (y3 C-contiguous (outer, channels, inner)), accumulated in float64."""
    channels = y3.shape[1]
    totals = np.zeros(channels)
    for n in range(y3.shape[0]):
        for c in range(channels):
            row = y3[n, c]
            total = 0.0
            for p in range(row.shape[0]):
                total += row[p]
            totals[c] += total
    for c in range(channels):
        out[c] = totals[c]
