"""Convolution kernels: im2row + BLAS (np.dot) on C-contiguous (batch, channels, height, width) arrays.

A convolution of ``x`` (N, C, H, W) with ``w`` (O, C/groups, kh, kw) is, per group, the matrix
product ``rows (N*L, K) @ w_g.T (K, O/g)`` where ``K = C/g * kh * kw``, ``L = OH * OW`` and ``rows``
holds one input patch per output position, taps (i, j) in order and channels innermost (im2row,
from a channels-last copy of the chunk). OpenBLAS's sgemm runs this tall product as fast as
NumPy's, while ``w_g @ col`` (positions as columns) ran 30-50% slower through Numba. The batch goes
through in chunks of about ``COLUMNS`` positions, so that the patches stay in the L2 cache, and each
chunk's product through blocks of rows small enough (``M * N * K`` at most ``SMALL``) for OpenBLAS's
small-matrix kernels, which skip packing the operands: at the digits CNN's shapes (K = 144 or 288,
N = 32) they ran 30-50% faster than one product per chunk, as fast as MKL's. Every product goes
through :func:`_product`, :func:`_product_tn` or :func:`_product_nt`, so that Numba specializes
``np.dot`` (a large piece of code) three times per dtype rather than once per call site.

- :func:`conv_forward` is the convolution (cross-correlation, as PyTorch's conv2d); patches of
  fewer than ``SHALLOW`` entries (a 3x3 kernel over 1-3 channels) take im2col and ``w_g @ col``,
  as im2row's runs of cg entries would be too short;
- :func:`conv_backward_input` is its adjoint: ``rows = gy_rows @ w_g`` then row2im (summing
  overlapping patches). It is conv2d's input gradient and conv_transpose2d's forward;
- :func:`conv_backward_weight` is ``gy_g.T @ rows`` per block of positions (``gy_g @ col.T`` for
  shallow patches): conv2d's weight gradient.

A 1-D convolution is the 2-D one with a height of 1. Every index is computed from the shapes the
caller checked (graphview/ops/conv.py); nothing here reads outside them.
"""
import numpy as np
from numba import njit

from .blas import SMALL

JIT = dict(cache=True, nogil=True, error_model="numpy")

COLUMNS = 512     # about this many columns of col per chunk of the batch
IMAGE_ROWS = 32    # conv_backward_input takes one product per image from this many positions per image
# SMALL: OpenBLAS (x86-64) takes its small-matrix path, without packing, for M * N * K at most this (blas.py)
SHALLOW = 32       # below this many entries per patch (cg * kh * kw), conv_forward uses im2col, else im2row


@njit(**JIT)
def chunk(batch, positions):
    """How many batch entries one product takes."""
    return max(1, min(batch, COLUMNS // max(positions, 1)))


@njit(**JIT)
def block(rows, width):
    """Rows per product of a chunk of ``rows`` rows whose other two sizes multiply to ``width``: the most
    that keep M * N * K within SMALL; the whole chunk where that would be fewer than 32 rows (too thin
    a product: the packed path is then the better one)."""
    most = SMALL // max(width, 1)
    return rows if most < 32 else max(1, min(rows, most))


@njit(**JIT)
def _product(a, b, out):
    """out = a @ b (BLAS), every operand 2-D C-contiguous: the one product every kernel here calls, so
    that Numba compiles np.dot once per dtype (each call site of it is a large specialization)."""
    np.dot(a, b, out)


@njit(**JIT)
def _product_tn(a, b, out):
    """out = a.T @ b (BLAS reads a transposed), a and b 2-D C-contiguous: the weight gradient's product."""
    np.dot(a.T, b, out)


@njit(**JIT)
def _product_nt(a, b, out):
    """out = a @ b.T, a and b 2-D C-contiguous: the weight gradient's product for shallow patches."""
    np.dot(a, b.T, out)


@njit(**JIT)
def _span(size, start, step, count):
    """(lo, hi): the indices t in [0, count) with 0 <= start + t * step < size are lo <= t < hi."""
    lo = 0 if start >= 0 else min(count, (-start + step - 1) // step)
    hi = 0 if start >= size else min(count, (size - start + step - 1) // step)
    return lo, max(lo, hi)


@njit(**JIT)
def _channels_last(x3, n0, m, c0, cg, xc):
    """xc[b, p, c] = x3[n0 + b, c0 + c, p]: a chunk of the batch, channels innermost."""
    for b in range(m):
        target = xc[b]
        for c in range(cg):
            source = x3[n0 + b, c0 + c]
            for p in range(source.shape[0]):
                target[p, c] = source[p]


@njit(**JIT)
def im2row(xc, width, kh, kw, sh, sw, top, left, dh, dw, oh, ow, rows):
    """rows[b * L + y * ow + z, (i * kw + j) * cg + c] = xc[b, h * width + w, c] at h = y*sh - top + i*dh,
    w = z*sw - left + j*dw, 0 outside the input (xc is (m, H * W, cg), channels innermost): the tall
    operand of the product (BLAS is fastest with the batch's positions as rows). Per position and
    kernel row, the kw taps of a window inside the input are one run of kw * cg entries when the
    dilation is 1 (channels innermost, taps next). The flat indices are unsigned: Numba then adds no
    negative-index test and the copies vectorize."""
    m, cg = xc.shape[0], xc.shape[2]
    height = xc.shape[1] // width
    depth = rows.shape[1]
    run = kw * cg
    target = rows.reshape(rows.size)
    source = xc.reshape(xc.size)
    zero = rows.dtype.type(0)
    for b in range(m):
        for y in range(oh):
            for i in range(kh):
                h = y * sh - top + i * dh
                first = (b * oh + y) * ow * depth + i * run
                if h < 0 or h >= height:
                    for z in range(ow):
                        at = first + z * depth
                        for t in range(run):
                            target[np.uint64(at + t)] = zero
                    continue
                line = (b * height + h) * width
                for z in range(ow):
                    at = first + z * depth
                    w0 = z * sw - left
                    if dw == 1 and w0 >= 0 and w0 + kw <= width:
                        start = (line + w0) * cg
                        for t in range(run):
                            target[np.uint64(at + t)] = source[np.uint64(start + t)]
                        continue
                    for j in range(kw):
                        w = w0 + j * dw
                        if 0 <= w < width:
                            start = (line + w) * cg
                            for c in range(cg):
                                target[np.uint64(at + j * cg + c)] = source[np.uint64(start + c)]
                        else:
                            for c in range(cg):
                                target[np.uint64(at + j * cg + c)] = zero


@njit(**JIT)
def row2im(rows, width, kh, kw, sh, sw, top, left, dh, dw, oh, ow, xc):
    """The adjoint of im2row: each entry of rows added into xc (m, H * W, cg), which is not zeroed here
    (runs of kw * cg entries and unsigned flat indices, as im2row)."""
    m, cg = xc.shape[0], xc.shape[2]
    height = xc.shape[1] // width
    depth = rows.shape[1]
    run = kw * cg
    source = rows.reshape(rows.size)
    target = xc.reshape(xc.size)
    for b in range(m):
        for y in range(oh):
            for i in range(kh):
                h = y * sh - top + i * dh
                if h < 0 or h >= height:
                    continue
                first = (b * oh + y) * ow * depth + i * run
                line = (b * height + h) * width
                for z in range(ow):
                    at = first + z * depth
                    w0 = z * sw - left
                    if dw == 1 and w0 >= 0 and w0 + kw <= width:
                        start = (line + w0) * cg
                        for t in range(run):
                            target[np.uint64(start + t)] += source[np.uint64(at + t)]
                        continue
                    for j in range(kw):
                        w = w0 + j * dw
                        if 0 <= w < width:
                            start = (line + w) * cg
                            for c in range(cg):
                                target[np.uint64(start + c)] += source[np.uint64(at + j * cg + c)]


@njit(**JIT)
def im2col(x, n0, m, c0, cg, kh, kw, sh, sw, top, left, dh, dw, oh, ow, col):
    """col[(c * kh + i) * kw + j, b * L + y * ow + z] = x[n0 + b, c0 + c, y*sh - top + i*dh, z*sw - left + j*dw],
    0 outside x: the patch matrix with positions as columns (conv_forward's path for patches of fewer
    than SHALLOW entries, and the weight gradient's left operand). The entries of a tap that fall in
    the padding are zeroed, the others copied straight from x (unsigned flat indices, as im2row)."""
    channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    positions = oh * ow
    target = col.reshape(col.size)
    source = x.reshape(x.size)
    zero = col.dtype.type(0)
    for c in range(cg):
        for i in range(kh):
            y_lo, y_hi = _span(height, i * dh - top, sh, oh)
            for j in range(kw):
                row = ((c * kh + i) * kw + j) * m * positions
                offset = j * dw - left
                z_lo, z_hi = _span(width, offset, sw, ow)
                for b in range(m):
                    plane = ((n0 + b) * channels + c0 + c) * height * width
                    for y in range(oh):
                        start = row + b * positions + y * ow
                        lo, hi = (z_lo, z_hi) if y_lo <= y < y_hi else (ow, ow)
                        for z in range(lo):
                            target[np.uint64(start + z)] = zero
                        line = plane + (y * sh + i * dh - top) * width + offset
                        for z in range(lo, hi):
                            target[np.uint64(start + z)] = source[np.uint64(line + z * sw)]
                        for z in range(hi, ow):
                            target[np.uint64(start + z)] = zero


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
def _taps_last(w2, og, cg, kh, kw):
    """w2 (og, cg * kh * kw) in (c, i, j) order as a (kh * kw * cg, og) matrix in im2row's (i, j, c) order."""
    result = np.empty((kh * kw * cg, og), w2.dtype)
    for o in range(og):
        for c in range(cg):
            for t in range(kh * kw):
                result[t * cg + c, o] = w2[o, c * kh * kw + t]
    return result


@njit(**JIT)
def conv_forward(x, w, bias, has_bias, sh, sw, ph, pw, dh, dw, groups, out):
    """out = conv2d(x, w) (+ bias per output channel); x (N, C, H, W), w (O, C/groups, kh, kw), out (N, O, OH, OW).
    ph, pw are the top and left padding (any sign: the bottom and right follow from out's size).
    Per chunk of the batch: rows = im2row(x) (positions, taps * channels), then rows @ w_g.T (one tall product)."""
    batch, channels, height, width = x.shape
    outs, cg, kh, kw = w.shape
    oh, ow = out.shape[2], out.shape[3]
    positions = oh * ow
    og = outs // groups
    depth = cg * kh * kw
    x3 = x.reshape(batch, channels, height * width)
    out3 = out.reshape(batch, outs, positions)
    w2 = w.reshape(outs, depth)
    step = chunk(batch, positions)
    if depth < SHALLOW:
        for g in range(groups):
            wg = np.ascontiguousarray(w2[g * og:(g + 1) * og])
            for n0 in range(0, batch, step):
                m = min(step, batch - n0)
                col = np.empty((depth, m * positions), x.dtype)
                im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col)
                result = np.empty((og, m * positions), x.dtype)
                _product(wg, col, result)
                for o in range(og):
                    add = bias[g * og + o] if has_bias else 0
                    for b in range(m):
                        target = out3[n0 + b, g * og + o]
                        source = result[o, b * positions:(b + 1) * positions]
                        for p in range(positions):
                            target[p] = source[p] + add
        return
    xcs = np.empty((step, height * width, cg), x.dtype)
    all_rows = np.empty((step * positions, depth), x.dtype)
    results = np.empty((step * positions, og), x.dtype)
    for g in range(groups):
        wt = _taps_last(w2[g * og:(g + 1) * og], og, cg, kh, kw)
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            xc = xcs[:m]
            _channels_last(x3, n0, m, g * cg, cg, xc)
            rows = all_rows[:m * positions]
            im2row(xc, width, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, rows)
            result = results[:m * positions]
            size = block(m * positions, depth * og)
            for s in range(0, m * positions, size):
                e = min(s + size, m * positions)
                _product(rows[s:e], wt, result[s:e])
            for b in range(m):
                for o in range(og):
                    add = bias[g * og + o] if has_bias else 0
                    target = out3[n0 + b, g * og + o]
                    for p in range(positions):
                        target[p] = result[b * positions + p, o] + add


@njit(**JIT)
def conv_backward_input(gy, w, bias, has_bias, sh, sw, ph, pw, dh, dw, groups, out):
    """out = the adjoint of conv2d(., w) applied to gy (+ bias per channel of out): conv2d's input
    gradient and conv_transpose2d. gy (N, O, OH, OW), w (O, C/groups, kh, kw), out (N, C, H, W).
    Per group and chunk: gy's positions as rows (channels innermost) @ w_g (per image, gy's plane read
    transposed; for small images, gathered channels-last first and in blocks of rows), then row2im adds
    the patches back into a channels-last buffer, copied to out."""
    batch, channels, height, width = out.shape
    outs, cg, kh, kw = w.shape
    oh, ow = gy.shape[2], gy.shape[3]
    positions = oh * ow
    og = outs // groups
    gy3 = gy.reshape(batch, outs, positions)
    out3 = out.reshape(batch, channels, height * width)
    w2 = w.reshape(outs, cg * kh * kw)
    step = chunk(batch, positions)
    depth = cg * kh * kw
    all_rows = np.empty((step * positions, depth), gy.dtype)
    for g in range(groups):
        wg = np.ascontiguousarray(_taps_last(w2[g * og:(g + 1) * og], og, cg, kh, kw).T)
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            rows = all_rows[:m * positions]
            if positions >= IMAGE_ROWS:     # one product per image, gy's (og, positions) plane read transposed
                for b in range(m):
                    _product_tn(gy3[n0 + b, g * og:(g + 1) * og], wg, rows[b * positions:(b + 1) * positions])
            else:
                gc = np.empty((m, positions, og), gy.dtype)
                _channels_last(gy3, n0, m, g * og, og, gc)
                g2 = gc.reshape(m * positions, og)
                size = block(m * positions, depth * og)
                for s in range(0, m * positions, size):
                    e = min(s + size, m * positions)
                    _product(g2[s:e], wg, rows[s:e])
            xc = np.zeros((m, height * width, cg), out.dtype)
            row2im(rows, width, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, xc)
            for b in range(m):
                for c in range(cg):
                    add = bias[g * cg + c] if has_bias else 0
                    target = out3[n0 + b, g * cg + c]
                    source = xc[b]
                    for p in range(height * width):
                        target[p] = source[p, c] + add


@njit(**JIT)
def conv_backward_weight(x, gy, sh, sw, ph, pw, dh, dw, groups, out):
    """out (O, C/groups, kh, kw) = conv2d's weight gradient, per group and chunk of the batch: gy_g (O/g,
    positions) @ im2row(x) in blocks of positions (gy's positions as rows, read transposed; each block's
    product added to the group's total), or for shallow patches gy_g @ im2col(x).T."""
    batch, channels, height, width = x.shape
    outs, cg, kh, kw = out.shape
    oh, ow = gy.shape[2], gy.shape[3]
    positions = oh * ow
    og = outs // groups
    depth = cg * kh * kw
    x3 = x.reshape(batch, channels, height * width)
    gy3 = gy.reshape(batch, outs, positions)
    out2 = out.reshape(outs, depth)
    out2[:, :] = 0
    step = chunk(batch, positions)
    size = block(step * positions, depth * og)
    total = np.zeros((og, depth), out.dtype)
    product = np.empty((og, depth), out.dtype)
    shallow = depth < SHALLOW
    for g in range(groups):
        total[:, :] = 0
        for n0 in range(0, batch, step):
            m = min(step, batch - n0)
            if shallow:     # im2col's runs along the width beat im2row's runs of kw * cg entries
                buffer = np.empty((og, m * positions), x.dtype)
                _gather(gy3, n0, m, g * og, og, buffer)
                col = np.empty((depth, m * positions), x.dtype)
                im2col(x, n0, m, g * cg, cg, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, col)
                _product_nt(buffer, col, product)
                for o in range(og):
                    for d in range(depth):
                        out2[g * og + o, d] += product[o, d]
                continue
            xc = np.empty((m, height * width, cg), x.dtype)
            _channels_last(x3, n0, m, g * cg, cg, xc)
            rows = np.empty((m * positions, depth), x.dtype)
            im2row(xc, width, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, rows)
            gc = np.empty((m, positions, og), gy.dtype)
            _channels_last(gy3, n0, m, g * og, og, gc)
            g2 = gc.reshape(m * positions, og)
            for s in range(0, m * positions, size):
                e = min(s + size, m * positions)
                _product_tn(g2[s:e], rows[s:e], product)
                total += product
        if shallow:
            continue
        for o in range(og):
            for c in range(cg):
                for t in range(kh * kw):
                    out2[g * og + o, c * kh * kw + t] = total[o, t * cg + c]
