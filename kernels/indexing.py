"""Kernels that move elements by index: gather (copying) and its scatters.

Arrays arrive as 3-D (outer, axis, inner) views so that one compiled loop
serves every rank; the caller reshapes. Indices are checked before anything is
written, so a bad index never leaves a half-written output.
"""
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
