"""Content fingerprints of arrays of any layout, for the non-inplace validation listener.

An array is read in logical (C) order as unsigned integers of its item size
(its bits, so NaN payloads and -0.0 count), and cut into blocks of ``BLOCK``
elements. Each block's fingerprint is the wrapping sum of ``mix(bits ^ (i * K))``
over its elements, where ``i`` is the element's logical index and ``mix`` a
64-bit bijective finaliser (splitmix64's), so a change of any element, or a swap
of two, changes the block's sum. The per-element terms are independent, so the
loop pipelines instead of waiting on a serial hash chain.

Optionally a one-byte digest per element (the top byte of its mixed term) is
written as well: comparing digests after a fingerprint mismatch locates the
first changed element without keeping a copy of the array.
"""
import numpy as np
from numba import njit
from numba.extending import register_jitable

from .threads import PARALLEL_THRESHOLD, WORKERS, pool

BLOCK = 1024

_K = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S56 = np.uint64(56)
_ZERO = np.uint64(0)

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

JIT = dict(cache=True, nogil=True)


@register_jitable
def _term(bits, index):
    z = np.uint64(bits) ^ (np.uint64(index) * _K)
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(**JIT)
def blocks_contiguous(flat, hashes, first_block, last_block):
    """Block sums of a 1-D contiguous bit array, for blocks [first_block, last_block)."""
    n = flat.size
    for b in range(first_block, last_block):
        start = b * BLOCK
        stop = min(start + BLOCK, n)
        total = _ZERO
        for i in range(start, stop):
            total += _term(flat[i], i)
        hashes[b] = total


@njit(**JIT)
def blocks_and_digests_contiguous(flat, hashes, digests, first_block, last_block):
    """Block sums and one-byte element digests of a 1-D contiguous bit array."""
    n = flat.size
    for b in range(first_block, last_block):
        start = b * BLOCK
        stop = min(start + BLOCK, n)
        total = _ZERO
        for i in range(start, stop):
            term = _term(flat[i], i)
            total += term
            digests[i] = np.uint8(term >> _S56)
        hashes[b] = total


@njit(**JIT)
def blocks_strided(array, hashes, digests, with_digests):
    """Block sums (and digests) of a bit array of any layout, in logical order."""
    for b in range(hashes.size):
        hashes[b] = _ZERO
    i = 0
    for bits in array.flat:
        term = _term(bits, i)
        hashes[i // BLOCK] += term
        if with_digests:
            digests[i] = np.uint8(term >> _S56)
        i += 1


def bits_of(array):
    """The array's elements reinterpreted as unsigned integers of the same size (no copy)."""
    return array.view(_UNSIGNED[array.dtype.itemsize])


def fingerprint(array, digests=False):
    """``(block hashes, element digests or None)`` of ``array``'s contents in logical order."""
    bits = bits_of(array)
    size = bits.size
    hashes = np.empty(-(-size // BLOCK), np.uint64)
    element_digests = np.empty(size, np.uint8) if digests else None
    if not bits.flags.c_contiguous:
        blocks_strided(bits, hashes, element_digests if digests else np.empty(0, np.uint8), digests)
        return hashes, element_digests
    flat = bits.reshape(size)
    count = hashes.size
    if size < PARALLEL_THRESHOLD or WORKERS == 1:
        _run(flat, hashes, element_digests, 0, count)
    else:
        step = -(-count // WORKERS)
        futures = [pool().submit(_run, flat, hashes, element_digests, lo, min(lo + step, count))
                   for lo in range(0, count, step)]
        for future in futures:
            future.result()
    return hashes, element_digests


def _run(flat, hashes, digests, first, last):
    if digests is None:
        blocks_contiguous(flat, hashes, first, last)
    else:
        blocks_and_digests_contiguous(flat, hashes, digests, first, last)


def first_change(array, hashes, digests):
    """The logical flat index of the first element that changed since ``fingerprint(array, True)``.

    Returns -1 when the fingerprints agree. When the digests of the first changed
    block happen to agree (a 1-in-256 chance per changed element), the block's
    first index is returned.
    """
    now, _ = fingerprint(array)
    differing = np.flatnonzero(now != hashes)
    if differing.size == 0:
        return -1
    block = int(differing[0])
    _, now_digests = fingerprint(array, digests=True)
    start, stop = block * BLOCK, min((block + 1) * BLOCK, array.size)
    changed = np.flatnonzero(now_digests[start:stop] != digests[start:stop])
    return start + int(changed[0]) if changed.size else start
