"""Reductions over the middle axis of a C-contiguous (outer, n, inner) array.

Any reduction over one axis, or over adjacent axes, of a C-contiguous array is
a reshape to (outer, n, inner) with no copy; the launcher moves non-adjacent
axes together first. Sums accumulate in float64 (int64 for integer sums, float64
for means of integers, as in NumPy), pairwise along contiguous rows, so float32
sums are more accurate than NumPy's.

The masked reductions (sum, mean, max, min, logsumexp and count over the entries
before each sequence's length) are a mode of the same kernel, reduce_rows: given
the number of valid rows (or entries) of each outer row, it skips the padding,
and with ``fold`` it reduces over the outer axis too (ADR 0017, decision 5).
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
def sum_flat(x, lo, hi, zero):
    return pairwise_sum(x, lo, hi, zero)


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
                    if value > best if sign > 0 else value < best:   # no subtraction: ints would wrap
                        best = value
                        index = i
            out[o, k] = index


# What reduce3 computes; COUNT is how many valid elements each output covers.
SUM, MEAN, MAX, MIN, LOGSUMEXP, COUNT = 0, 1, 2, 3, 4, 5

# rows_of / cols_of without a mask. Writeable, as the masks are: a read-only array is another Numba
# type, and every kernel would be compiled once more for it.
NO_LENGTHS = np.zeros(0, np.int64)


@njit(**JIT)
def reduce_rows(x, out, mode, masked, rows_of, cols_of, fold, zero, scale, start, lo, hi):
    """out[o] = the reduction of the valid elements of x[o] (an (outer, n, inner) array) over its
    middle axis, for lo <= o < hi; with ``fold``, out[0] = the reduction over x[lo:hi] whole.

    Without ``masked`` every element is valid. With it, entry k of row i of outer row o is valid when
    i < rows_of[o] and k < cols_of[o] (an empty rows_of / cols_of: no limit). An unmasked sum of a
    contiguous row (inner 1) is pairwise, as NumPy's; every other sum accumulates sequentially, in
    the order of the elements, in the type of ``zero``, and is multiplied by ``scale`` (a masked mean
    divides by the count of valid elements instead). Maxima start at ``start`` (the lowest value of
    the dtype; the highest for minima; a float64 -inf for logsumexp) and the first NaN wins. Over no
    valid element: sum and count 0, mean NaN, max, min and logsumexp ``start``.
    """
    n = x.shape[1]
    inner = x.shape[2]
    extreme = mode == MAX or mode == MIN or mode == LOGSUMEXP
    lowest = mode == MIN
    pairwise = inner == 1 and not masked and not extreme
    counted = mode == COUNT or (masked and mode == MEAN)
    top = np.empty(inner if extreme else 0, np.asarray(start).dtype)
    acc = np.empty(inner if mode != MAX and mode != MIN else 0, np.asarray(zero).dtype)
    count = np.empty(inner if counted else 0)
    step = max(hi - lo, 1) if fold else 1
    for first in range(lo, max(hi, lo + 1) if fold else hi, step):   # folded, even over no row
        if pairwise:
            out[first, 0] = pairwise_sum(x[first, :, 0], np.int64(0), n, zero) * scale
            continue
        last = min(first + step, hi)
        for k in range(top.shape[0]):
            top[k] = start
        for k in range(acc.shape[0]):
            acc[k] = zero
        for k in range(count.shape[0]):
            count[k] = 0.0
        for o in range(first, last):
            rows = rows_of[o] if masked and rows_of.shape[0] > 0 else n
            cols = cols_of[o] if masked and cols_of.shape[0] > 0 else inner
            if cols == 0:
                continue
            if inner == 1:   # one column: in a scalar, not through memory
                if extreme:   # the first NaN wins: nothing replaces it, and no row after it is read
                    best = top[0]
                    if lowest:
                        for i in range(rows if best == best else 0):
                            value = x[o, i, 0]
                            if value < best or value != value:
                                best = value
                                if value != value:
                                    break
                    else:
                        for i in range(rows if best == best else 0):
                            value = x[o, i, 0]
                            if value > best or value != value:
                                best = value
                                if value != value:
                                    break
                    top[0] = best
                else:
                    total = acc[0]
                    for i in range(rows):
                        total += x[o, i, 0]
                    acc[0] = total
                    if counted:
                        count[0] += rows
                continue
            # Whole rows at a time, through 1-D slices, so the inner loop vectorizes.
            if extreme:
                for i in range(rows):
                    row = x[o, i]
                    for k in range(cols):
                        best = top[k]
                        value = row[k]
                        if best == best and (value != value or (value < best if lowest else value > best)):
                            top[k] = value
            else:
                for i in range(rows):
                    row = x[o, i]
                    for k in range(cols):
                        acc[k] += row[k]
                if counted:
                    for k in range(cols):
                        count[k] += rows
        if mode == LOGSUMEXP:   # a second pass: the exponentials shifted by the maxima
            for o in range(first, last):
                rows = rows_of[o] if masked and rows_of.shape[0] > 0 else n
                cols = cols_of[o] if masked and cols_of.shape[0] > 0 else inner
                if inner == 1:
                    shift = top[0]
                    if cols > 0 and shift != -np.inf and shift != np.inf and shift == shift:
                        total = acc[0]
                        for i in range(rows):
                            total += np.exp(x[o, i, 0] - shift)
                        acc[0] = total
                    continue
                for i in range(rows):
                    row = x[o, i]
                    for k in range(cols):
                        shift = top[k]
                        if shift != -np.inf and shift != np.inf and shift == shift:
                            acc[k] += np.exp(row[k] - shift)
        target = 0 if fold else first
        for k in range(inner):
            if mode == MAX or mode == MIN:
                out[target, k] = top[k]
            elif mode == LOGSUMEXP:
                shift = top[k]
                finite = shift != -np.inf and shift != np.inf and shift == shift
                out[target, k] = shift + np.log(acc[k]) if finite else shift
            elif mode == COUNT:
                out[target, k] = count[k]
            elif counted:
                out[target, k] = acc[k] / count[k] if count[k] > 0 else np.nan
            else:
                out[target, k] = acc[k] * scale


def reduce3(x, out, mode, zero, scale, start, mask=None):
    """Reduce a C-contiguous (outer, n, inner) array over n into out (outer, inner), on threads when
    large. ``mask``: None, or the masked reductions' (rows_of, cols_of, fold) as reduce_rows takes
    them (out is then (1, inner) with fold)."""
    outer, n, inner = x.shape
    masked = mask is not None
    if masked:
        rows_of, cols_of, fold = mask
    else:
        rows_of = cols_of = NO_LENGTHS
        fold = False
    if x.size >= PARALLEL_THRESHOLD and WORKERS > 1 and not fold:
        if outer >= WORKERS:
            parts = [pool().submit(reduce_rows, x, out, mode, masked, rows_of, cols_of, fold, zero, scale, start,
                                   lo, hi) for lo, hi in chunks(outer)]
            for part in parts:
                part.result()
            return
        if outer == 1 and inner == 1 and (mode == SUM or mode == MEAN) and not masked:
            flat = x.reshape(n)
            parts = [pool().submit(sum_flat, flat, lo, hi, zero) for lo, hi in chunks(n)]
            total = zero
            for part in parts:
                total += part.result()
            out[0, 0] = total * scale
            return
    reduce_rows(x, out, mode, masked, rows_of, cols_of, fold, zero, scale, start, 0, outer)
