"""Content fingerprints of arrays of any layout, for the non-inplace validation listener.

An array is read in logical (C) order as unsigned integers of its item size
(its bits, so NaN payloads and -0.0 count), and cut into blocks of ``BLOCK``
elements. Each block's fingerprint is the wrapping sum of ``mix(bits ^ (i * K))``
over its elements, where ``i`` is the element's logical index and ``mix`` a
64-bit bijective finaliser (splitmix64's), so a change of any element, or a swap
of two, changes the block's sum. The per-element terms are independent, so the
loop vectorises (64-bit multiplies on AVX-512, ``i * K`` kept as a running sum)
instead of waiting on a serial hash chain.

Optionally a one-byte digest per element (the top byte of its mixed term) is
written as well: comparing digests after a fingerprint mismatch locates the
first changed element without keeping a copy of the array.

:func:`snapshot` is what the listener keeps before an op: the bytes themselves
for arrays of at most ``BLOCK`` elements (one ``tobytes`` costs less than a
kernel call there, and locates a change exactly), block fingerprints with
digests for larger ones.
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
def _mix(z):
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@register_jitable
def _term(bits, index):
    return _mix(np.uint64(bits) ^ (np.uint64(index) * _K))


@register_jitable
def _block_sum(flat, start, stop):
    # Over a slice, indexed from 0, with the key as a running sum: this is the form LLVM vectorises.
    block = flat[start:stop]
    key = np.uint64(start) * _K
    total = _ZERO
    for j in range(block.size):
        total += _mix(np.uint64(block[j]) ^ key)
        key += _K
    return total


@njit(**JIT)
def blocks_contiguous(flat, hashes, first_block, last_block):
    """Block sums of a 1-D contiguous bit array, for blocks [first_block, last_block)."""
    n = flat.size
    for b in range(first_block, last_block):
        hashes[b] = _block_sum(flat, b * BLOCK, min(b * BLOCK + BLOCK, n))


@njit(**JIT)
def blocks_and_digests_contiguous(flat, hashes, digests, first_block, last_block):
    """Block sums and one-byte element digests of a 1-D contiguous bit array."""
    n = flat.size
    for b in range(first_block, last_block):
        start = b * BLOCK
        stop = min(start + BLOCK, n)
        block = flat[start:stop]
        block_digests = digests[start:stop]
        key = np.uint64(start) * _K
        total = _ZERO
        for j in range(block.size):
            term = _mix(np.uint64(block[j]) ^ key)
            key += _K
            total += term
            block_digests[j] = np.uint8(term >> _S56)
        hashes[b] = total


@njit(**JIT)
def first_differing_block_contiguous(flat, hashes, first_block, last_block):
    """The first block in [first_block, last_block) whose sum is no longer ``hashes[b]``, else -1."""
    n = flat.size
    for b in range(first_block, last_block):
        if _block_sum(flat, b * BLOCK, min(b * BLOCK + BLOCK, n)) != hashes[b]:
            return b
    return -1


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
    elif digests:
        _over_blocks(blocks_and_digests_contiguous, bits.reshape(size), hashes, element_digests)
    else:
        _over_blocks(blocks_contiguous, bits.reshape(size), hashes)
    return hashes, element_digests


def first_differing_block(array, hashes):
    """The first block whose fingerprint differs from ``hashes`` (from :func:`fingerprint`), or -1."""
    bits = bits_of(array)
    if not bits.flags.c_contiguous:
        differing = np.flatnonzero(fingerprint(array)[0] != hashes)
        return int(differing[0]) if differing.size else -1
    found = [b for b in _over_blocks(first_differing_block_contiguous, bits.reshape(bits.size), hashes) if b >= 0]
    return min(found) if found else -1


def _over_blocks(kernel, flat, hashes, *outputs):
    """Call ``kernel(flat, hashes, *outputs, first, last)`` over all blocks: in one call on small
    arrays, else in one range per worker, the first on the calling thread (which would otherwise
    only wait), the others on the kernel pool. Returns the kernel's results, in block order."""
    count = hashes.size
    if flat.size < PARALLEL_THRESHOLD or WORKERS == 1:
        return [kernel(flat, hashes, *outputs, 0, count)]
    step = -(-count // WORKERS)
    futures = [pool().submit(kernel, flat, hashes, *outputs, lo, min(lo + step, count))
               for lo in range(step, count, step)]
    first = kernel(flat, hashes, *outputs, 0, min(step, count))
    return [first] + [future.result() for future in futures]


def first_change(array, hashes, digests):
    """The logical flat index of the first element that changed since ``fingerprint(array, True)``.

    Returns -1 when the fingerprints agree. When the digests of the first changed
    block happen to agree (a 1-in-256 chance per changed element), the block's
    first index is returned.
    """
    block = first_differing_block(array, hashes)
    if block < 0:
        return -1
    _, now_digests = fingerprint(array, digests=True)
    start, stop = block * BLOCK, min((block + 1) * BLOCK, array.size)
    changed = np.flatnonzero(now_digests[start:stop] != digests[start:stop])
    return start + int(changed[0]) if changed.size else start


def snapshot(array):
    """What is kept of ``array`` before an op, for :func:`first_change_since`: its bytes in logical
    order when it has at most ``BLOCK`` elements, else ``fingerprint(array, digests=True)``."""
    return array.tobytes() if array.size <= BLOCK else fingerprint(array, digests=True)


def first_change_since(array, kept):
    """The logical flat index of the first element of ``array`` that changed since ``kept =
    snapshot(array)``, or -1; exact for kept bytes, else as :func:`first_change`."""
    if not isinstance(kept, bytes):
        return first_change(array, *kept)
    now = array.tobytes()
    if now == kept:
        return -1
    differing = np.flatnonzero(np.frombuffer(now, np.uint8) != np.frombuffer(kept, np.uint8))
    return int(differing[0]) // array.itemsize
