"""Embedding kernels: rows of a table by integer ids, and the scatter-add of their gradient.

The ids arrive flat (C order) and the rows as a C-contiguous (rows, dim) table; the ids are
checked with first_bad_id before either kernel reads with them (Numba does no bounds checking).
"""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def first_bad_id(ids, rows):
    """The position of the first id outside [0, rows), or -1 when all are valid."""
    for j in range(ids.size):
        if ids[j] < 0 or ids[j] >= rows:
            return j
    return -1


@njit(**JIT)
def embedding(ids, table, out):
    """out[j, :] = table[ids[j], :]."""
    dim = table.shape[1]
    for j in range(ids.size):
        row = table[ids[j]]
        target = out[j]
        for i in range(dim):
            target[i] = row[i]


@njit(**JIT)
def embedding_grad(grad, ids, padding_idx, out):
    """out[r, :] = the sum of grad[j, :] over j with ids[j] == r, for r != padding_idx (-1: none).

    Accumulated in float64 rows and written once, so float32 sums of many repeated ids keep their
    precision."""
    rows, dim = out.shape
    total = np.zeros((rows, dim))
    for j in range(ids.size):
        r = ids[j]
        if r == padding_idx:
            continue
        source = grad[j]
        target = total[r]
        for i in range(dim):
            target[i] += source[i]
    for r in range(rows):
        for i in range(dim):
            out[r, i] = total[r, i]
