"""Kernels that move elements by index: gather (copying) and its scatters.

Arrays arrive as 3-D (outer, axis, inner) views so that one compiled loop
serves every rank; the caller reshapes. Indices are checked before anything is
written, so a bad index never leaves a half-written output.
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def first_bad_index(indices, size):
    """The position of the first index outside [-size, size), or -1 when all are valid."""
    for j in range(indices.size):
        k = indices[j]
        if k < -size or k >= size:
            return j
    return -1


@njit(**JIT)
def gather(x, indices, out):
    """out[o, j, i] = x[o, indices[j], i]; negative indices count from the end."""
    size = x.shape[1]
    for o in range(x.shape[0]):
        for j in range(indices.size):
            k = indices[j]
            if k < 0:
                k += size
            for i in range(x.shape[2]):
                out[o, j, i] = x[o, k, i]


@njit(**JIT)
def scatter_add(values, indices, out):
    """out[o, indices[j], i] += values[o, j, i]: the adjoint of gather (repeated indices add up).

    Nothing here is bounds-checked: the caller must first refuse indices outside
    [-size, size) with first_bad_index."""
    size = out.shape[1]
    for o in range(out.shape[0]):
        for j in range(indices.size):
            k = indices[j]
            if k < 0:
                k += size
            for i in range(out.shape[2]):
                out[o, k, i] += values[o, j, i]


@njit(**JIT)
def fill(out, value):
    """Every element of the contiguous 1-D ``out`` set to ``value``."""
    for i in range(out.size):
        out[i] = value


@njit(**JIT)
def scatter_box(values, out, shape, starts, sizes, zero):
    """``out`` (the contiguous 1-D storage of a C-ordered array of ``shape``) as ``zero`` with ``values`` in the
    box starts[k] <= index[k] < starts[k] + sizes[k], each element written once: the box's contiguous runs in
    order, the gaps between them filled. ``values`` is 1-D: the box's elements in C order, or one element
    for all of them. The caller checks that the box lies inside ``shape`` and is not empty."""
    ndim = shape.size
    axis, stride = ndim - 1, 1         # trailing axes the box spans whole join its rows into longer runs
    while axis > 0 and starts[axis] == 0 and sizes[axis] == shape[axis]:
        stride *= shape[axis]
        axis -= 1
    run = sizes[axis] * stride         # stride: elements per index along ``axis``
    strides = np.empty(ndim, np.int64)
    step = 1
    for k in range(ndim - 1, -1, -1):
        strides[k] = step
        step *= shape[k]
    index = starts[:axis].copy()
    done, taken = 0, 0
    while True:
        offset = starts[axis] * stride
        for k in range(axis):
            offset += index[k] * strides[k]
        out[done:offset] = zero
        if values.size == 1:
            out[offset:offset + run] = values[0]
        else:
            out[offset:offset + run] = values[taken:taken + run]
            taken += run
        done = offset + run
        k = axis - 1                   # the next run: the box's leading index counts up like an odometer
        while k >= 0:
            index[k] += 1
            if index[k] < starts[k] + sizes[k]:
                break
            index[k] = starts[k]
            k -= 1
        if k < 0:
            break
    out[done:] = zero
