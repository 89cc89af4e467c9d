"""Packing kernels: the valid box of each batch entry moved to the front of a merged axis, and back.

Arrays are viewed as (batch, outer, merged, inner). ``extents[b]`` holds, per merged factor, how many
entries of batch entry ``b`` are valid (a dynamic dim's length, else the factor's full size), and
``sizes`` the factors' padded sizes. Packing writes the valid multi-indices of the box in row-major
order at the front of the merged axis (their count is the product of the extents) and zeros after;
unpacking writes them back to their places in the padded axes and zeros at the padding. A merge of
``(f t)`` with lengths on ``t`` is then a merged axis whose padding is at its end, with the length
``f * t's`` (RETURNN's merge of a dynamic inner dim), which masked kernels read like any other.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def _padded_index(q, extents, b, sizes):
    """The position in the padded merged axis of the q-th valid multi-index of entry b's box."""
    rest, index, stride = q, 0, 1
    for j in range(sizes.shape[0] - 1, -1, -1):
        extent = extents[b, j]
        index += (rest % extent) * stride
        rest //= extent
        stride *= sizes[j]
    return index


@njit(cache=True)
def pack(x, extents, sizes, out):
    """x, out: (batch, outer, padded merged, inner) / (batch, outer, merged, inner)."""
    batch, outer, _, inner = x.shape
    count_all = out.shape[2]
    for b in range(batch):
        count = 1
        for j in range(sizes.shape[0]):
            count *= extents[b, j]
        for a in range(outer):
            for q in range(count):
                p = _padded_index(q, extents, b, sizes)
                for c in range(inner):
                    out[b, a, q, c] = x[b, a, p, c]
            for q in range(count, count_all):
                for c in range(inner):
                    out[b, a, q, c] = 0


@njit(cache=True)
def unpack(y, extents, sizes, out):
    """y: (batch, outer, merged, inner) packed; out: (batch, outer, padded merged, inner)."""
    batch, outer, padded, inner = out.shape
    for b in range(batch):
        count = 1
        for j in range(sizes.shape[0]):
            count *= extents[b, j]
        for a in range(outer):
            for p in range(padded):
                for c in range(inner):
                    out[b, a, p, c] = 0
            for q in range(count):
                p = _padded_index(q, extents, b, sizes)
                for c in range(inner):
                    out[b, a, p, c] = y[b, a, q, c]


def as_four_axes(array, batch_axis, start, stop):
    """``array`` as (batch, outer, merged, inner) with axes [start, stop) merged (batch not among them);
    a view when the strides allow, else a copy."""
    moved = np.moveaxis(array, batch_axis, 0)
    if batch_axis > start:
        start, stop = start + 1, stop + 1
    shape = moved.shape
    outer = int(np.prod(shape[1:start], dtype=np.int64))
    merged = int(np.prod(shape[start:stop], dtype=np.int64))
    inner = int(np.prod(shape[stop:], dtype=np.int64))
    return moved.reshape(shape[0], outer, merged, inner)
