"""In-place update kernels: ``target op= value`` written through a view.

The contiguous form takes the target as its only written operand, so the
compiler vectorizes the loop (an element-wise kernel called with the same
array as input and output fails LLVM's runtime alias check and runs scalar,
about 4x slower), and its loops index with unsigned integers (a ``range(lo, hi)``
loop over signed ones is not vectorized either: Numba tests each index for
wraparound). A one-element value is read once as a scalar. Targets that are not
C-contiguous, or values that broadcast, go through the element-wise 4-D strided
kernels. The scalar functions live here because Numba's cache
tracks only the file of the function it compiles.
"""
import numpy as np
from numba import njit
from numba.core import types
from numba.extending import register_jitable

from . import elementwise
from .launch import Signatures, flat, writable
from .threads import STREAMING_THRESHOLD, WORKERS, chunks, pool

JIT = dict(cache=True, nogil=True, error_model="numpy")


@register_jitable
def assign_scalar(x, y):
    return y


@register_jitable
def add_scalar(x, y):
    return x + y


@register_jitable
def sub_scalar(x, y):
    return x - y


@register_jitable
def mul_scalar(x, y):
    return x * y


@register_jitable
def div_scalar(x, y):
    return x / y


class Inplace:
    """``kernel(target, value)``: target op= value, value broadcast to target's shape."""

    def __init__(self, name, contiguous, strided):
        self.name, self.contiguous, self.strided = name, contiguous, strided
        # One compiled form per (target dtype, value dtype), for 1-D views (see kernels/launch.py).
        self.flat_form = Signatures(contiguous, 1, "C", (types.int64, types.int64), readonly=(False, True))

    def __call__(self, target, value):
        if target.size == 0:
            return target
        writable(target)
        if target.flags.c_contiguous and value.flags.c_contiguous and (value.size == 1 or value.shape == target.shape):
            size = target.size
            contiguous = self.flat_form((target.dtype, value.dtype))
            z, y = flat(target), flat(value)
            if size < STREAMING_THRESHOLD or WORKERS == 1:
                contiguous(z, y, 0, size)
            else:
                for future in [pool().submit(contiguous, z, y, lo, hi) for lo, hi in chunks(size)]:
                    future.result()
        else:
            self.strided(target, np.broadcast_to(value, target.shape))
        return target

    def __repr__(self):
        return f"<in-place kernel {self.name}>"


def inplace(scalar, strided):
    @njit(**JIT)
    def contiguous(target, value, lo, hi):
        # Unsigned indices (1-D operands: Inplace flattens them): Numba tests a signed index for
        # wraparound, and that test keeps LLVM from vectorizing a range(lo, hi) loop.
        z = target
        first, last = np.uint64(lo), np.uint64(hi)
        if value.size == 1:
            constant = value[0]
            for i in range(first, last):
                z[i] = scalar(z[i], constant)
        else:
            for i in range(first, last):
                z[i] = scalar(z[i], value[i])

    return Inplace(scalar.__name__.replace("_scalar", "_"), contiguous, strided)


assign_ = inplace(assign_scalar, lambda target, value: elementwise.copy(value, target))
add_ = inplace(add_scalar, lambda target, value: elementwise.add(target, value, target))
sub_ = inplace(sub_scalar, lambda target, value: elementwise.sub(target, value, target))
mul_ = inplace(mul_scalar, lambda target, value: elementwise.mul(target, value, target))
div_ = inplace(div_scalar, lambda target, value: elementwise.div(target, value, target))
