"""Reductions over the middle axis of a C-contiguous (outer, n, inner) array.

Any reduction over one axis, or over adjacent axes, of a C-contiguous array is
a reshape to (outer, n, inner) with no copy; the launcher moves non-adjacent
axes together first. Sums accumulate in float64 (int64 for integer sums, float64
for means of integers, as in NumPy), pairwise along contiguous rows, so float32
sums are more accurate than NumPy's.
"""
import numpy as np
from numba import njit

from .threads import PARALLEL_THRESHOLD, WORKERS, chunks, pool

JIT = dict(cache=True, nogil=True, error_model="numpy")
BLOCK = 128


@njit(**JIT)
def block_sum(x, lo, hi, zero):
    """Sum of at most BLOCK elements with four accumulators (no reassociation beyond that)."""
    a0 = zero
    a1 = zero
    a2 = zero
    a3 = zero
    i = lo
    while i + 4 <= hi:
        a0 += x[i]
        a1 += x[i + 1]
        a2 += x[i + 2]
        a3 += x[i + 3]
        i += 4
    while i < hi:
        a0 += x[i]
        i += 1
    return (a0 + a1) + (a2 + a3)


@njit(**JIT)
def pairwise_sum(x, lo, hi, zero):
    """Sum of x[lo:hi] in the type of ``zero``: blocks of BLOCK combined pairwise.

    A binary counter over the block sums merges equal-sized partial sums, so the
    rounding error grows with log(n), as in NumPy's pairwise summation.
    """
    if hi - lo <= BLOCK:
        return block_sum(x, lo, hi, zero)
    partial = np.full(64, zero)
    filled = 0
    count = 0
    start = lo
    while start < hi:
        value = block_sum(x, start, min(start + BLOCK, hi), zero)
        start += BLOCK
        level = 0
        while count & (1 << level):
            value += partial[level]
            level += 1
        partial[level] = value
        count += 1
        if level + 1 > filled:
            filled = level + 1
    total = zero
    for level in range(filled):
        if count & (1 << level):
            total += partial[level]
    return total


@njit(**JIT)
def sum_rows(x, out, zero, scale, lo, hi):
    """out[o, k] = scale * sum(x[o, :, k]) for rows lo <= o < hi."""
    n = x.shape[1]
    inner = x.shape[2]
    for o in range(lo, hi):
        if inner == 1:
            out[o, 0] = pairwise_sum(x[o, :, 0], 0, n, zero) * scale
        else:
            # Whole rows at a time, through 1-D slices, so the inner loop vectorizes.
            acc = np.full(inner, zero)
            for i in range(n):
                row = x[o, i]
                for k in range(inner):
                    acc[k] += row[k]
            target = out[o]
            for k in range(inner):
                target[k] = acc[k] * scale


@njit(**JIT)
def sum_flat(x, lo, hi, zero):
    return pairwise_sum(x, lo, hi, zero)


@njit(**JIT)
def max_rows(x, out, sign):
    """out[o, k] = max(sign * x[o, :, k]) * sign: max for sign 1, min for sign -1; NaN wins."""
    n = x.shape[1]
    for o in range(x.shape[0]):
        for k in range(x.shape[2]):
            best = x[o, 0, k]
            for i in range(1, n):
                value = x[o, i, k]
                if best != best:
                    break
                if value != value or (value - best) * sign > 0:
                    best = value
            out[o, k] = best


@njit(**JIT)
def prod_rows(x, out, one):
    for o in range(x.shape[0]):
        for k in range(x.shape[2]):
            acc = one
            for i in range(x.shape[1]):
                acc *= x[o, i, k]
            out[o, k] = acc


@njit(**JIT)
def argmax_rows(x, out, sign):
    """Index of the first max (sign 1) or min (sign -1); the first NaN wins, as in NumPy."""
    for o in range(x.shape[0]):
        for k in range(x.shape[2]):
            best = x[o, 0, k]
            index = 0
            if best == best:
                for i in range(1, x.shape[1]):
                    value = x[o, i, k]
                    if value != value:
                        index = i
                        break
                    if (value - best) * sign > 0:
                        best = value
                        index = i
            out[o, k] = index


@njit(**JIT)
def logsumexp_rows(x, out):
    for o in range(x.shape[0]):
        for k in range(x.shape[2]):
            top = -np.inf
            for i in range(x.shape[1]):
                if x[o, i, k] > top or x[o, i, k] != x[o, i, k]:
                    top = x[o, i, k]
            if top == -np.inf or top == np.inf or top != top:
                out[o, k] = top
                continue
            acc = 0.0
            for i in range(x.shape[1]):
                acc += np.exp(x[o, i, k] - top)
            out[o, k] = top + np.log(acc)


def sum3(x, out, zero, scale):
    """Sum a (outer, n, inner) array into (outer, inner), on threads when large."""
    outer, n, inner = x.shape
    if x.size >= PARALLEL_THRESHOLD and WORKERS > 1:
        if outer >= WORKERS:
            parts = [pool().submit(sum_rows, x, out, zero, scale, lo, hi) for lo, hi in chunks(outer)]
            for part in parts:
                part.result()
            return
        if outer == 1 and inner == 1:
            flat = x.reshape(n)
            parts = [pool().submit(sum_flat, flat, lo, hi, zero) for lo, hi in chunks(n)]
            total = zero
            for part in parts:
                total += part.result()
            out[0, 0] = total * scale
            return
    sum_rows(x, out, zero, scale, 0, outer)
