"""Element-wise kernels, built from one scalar function per op.

Every op gets two compiled forms from the same scalar function:

* ``contiguous(*inputs, out, lo, hi)``: a flat loop over 1-D operands (C-contiguous
  operands flattened by the launcher) of the output's size, of one element (read
  as a scalar) or of the output's trailing axes (read periodically, as a bias
  row), run in chunks on threads for large arrays (1-D so that each dtype
  compiles once; a reshape in the kernel made it compile 25% longer). A unary
  op's input has the output's size (the launcher repeats a smaller one with
  NumPy first), but for copies and casts;
* ``strided(*inputs, out)``: four nested loops over 4-D arrays of any strides.
  The launcher broadcasts the inputs to the output's shape (stride 0), merges
  axes that are contiguous in every operand, and pads or splits the result to
  exactly four axes, so each dtype combination compiles once whatever the rank,
  transposition, negative strides or broadcasting of the operands.

Numba's ``vectorize`` ufuncs are not used: with a non-contiguous ``out`` they
write the results as if ``out`` were contiguous (Numba 0.68), which would
corrupt views.

The scalar functions live in this file on purpose: Numba's cache tracks only
the file of the function it compiles, so a callee in another file could leave
a stale kernel in the cache.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import types
from numba.extending import intrinsic, register_jitable

from .launch import Elementwise, Swapped
from .threads import PARALLEL_THRESHOLD, STREAMING_THRESHOLD

JIT = dict(cache=True, nogil=True, error_model="numpy")


def unary(scalar, threshold=STREAMING_THRESHOLD, broadcasts=False):
    """The kernels of a unary op. Its input has the output's shape, so the flat form has one loop
    (a third of the compile time of three); with ``broadcasts`` (copies and casts, which expand a
    value or a row) it also repeats an input of one element or a row."""
    @njit(**JIT)
    def contiguous(a, out, lo, hi):
        # Unsigned indices: Numba tests a signed one for wraparound, which keeps LLVM from vectorizing a
        # loop not starting at 0 (slicing each operand first costs twice the compile time; same loops).
        for i in range(np.uint64(lo), np.uint64(hi)):
            out[i] = scalar(a[i])

    @njit(**JIT)
    def repeating(a, out, lo, hi):
        x, z = a, out
        n = z.size
        first, last = np.uint64(lo), np.uint64(hi)   # unsigned: see contiguous
        if x.size == n:
            for i in range(first, last):
                z[i] = scalar(x[i])
            return
        if x.size == 1:
            value = x[0]
            for i in range(first, last):
                z[i] = scalar(value)
            return
        # A repeating row: the launcher cut lo, hi at multiples of its length.
        p = np.uint64(x.size)
        for start in range(first, last, p):
            for i in range(p):
                z[start + i] = scalar(x[i])

    @njit(**JIT)
    def strided(a, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                for k in range(out.shape[2]):
                    for m in range(out.shape[3]):
                        out[i, j, k, m] = scalar(a[i, j, k, m])

    return Elementwise(scalar.__name__, repeating if broadcasts else contiguous, strided, threshold, 1, broadcasts)


def binary(scalar, threshold=STREAMING_THRESHOLD):
    @njit(**JIT)
    def contiguous(a, b, out, lo, hi):
        x, y, z = a, b, out
        n = z.size
        first, last = np.uint64(lo), np.uint64(hi)   # unsigned: see unary
        if x.size == n and y.size == n:
            for i in range(first, last):
                z[i] = scalar(x[i], y[i])
            return
        if x.size == n and y.size == 1:
            right = y[0]
            for i in range(first, last):
                z[i] = scalar(x[i], right)
            return
        if x.size == 1 and y.size == n:
            left = x[0]
            for i in range(first, last):
                z[i] = scalar(left, y[i])
            return
        p = row_length(n, x.size, y.size, y.size)
        q = np.uint64(p)
        if x.size == n and y.size == p:
            # A full operand and a repeating row (a bias): the launcher cut lo, hi at rows.
            for start in range(first, last, q):
                for i in range(q):
                    z[start + i] = scalar(x[start + i], y[i])
            return
        if x.size == p and y.size == n:
            for start in range(first, last, q):
                for i in range(q):
                    z[start + i] = scalar(x[i], y[start + i])
            return
        nx, ny = np.uint64(x.size), np.uint64(y.size)
        sx = np.uint64(1 if x.size > 1 else 0)
        sy = np.uint64(1 if y.size > 1 else 0)
        for start in range(first, last, q):
            ox = (start % nx) * sx
            oy = (start % ny) * sy
            for c in range(q):
                z[start + c] = scalar(x[ox + c * sx], y[oy + c * sy])

    @njit(**JIT)
    def strided(a, b, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                for k in range(out.shape[2]):
                    for m in range(out.shape[3]):
                        out[i, j, k, m] = scalar(a[i, j, k, m], b[i, j, k, m])

    return Elementwise(scalar.__name__, contiguous, strided, threshold, 2)


def ternary(scalar, threshold=STREAMING_THRESHOLD):
    @njit(**JIT)
    def contiguous(a, b, c, out, lo, hi):
        x, y, w, z = a, b, c, out
        n = z.size
        first, last = np.uint64(lo), np.uint64(hi)   # unsigned: see unary
        if x.size == n and y.size == n and w.size == n:
            for i in range(first, last):
                z[i] = scalar(x[i], y[i], w[i])
            return
        q = np.uint64(row_length(n, x.size, y.size, w.size))
        nx, ny, nw = np.uint64(x.size), np.uint64(y.size), np.uint64(w.size)
        sx = np.uint64(1 if x.size > 1 else 0)
        sy = np.uint64(1 if y.size > 1 else 0)
        sw = np.uint64(1 if w.size > 1 else 0)
        for start in range(first, last, q):
            ox = (start % nx) * sx
            oy = (start % ny) * sy
            ow = (start % nw) * sw
            for k in range(q):
                z[start + k] = scalar(x[ox + k * sx], y[oy + k * sy], w[ow + k * sw])

    @njit(**JIT)
    def strided(a, b, c, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                for k in range(out.shape[2]):
                    for m in range(out.shape[3]):
                        out[i, j, k, m] = scalar(a[i, j, k, m], b[i, j, k, m], c[i, j, k, m])

    return Elementwise(scalar.__name__, contiguous, strided, threshold, 3)


@njit(**JIT)
def row_length(n, a, b, c):
    """The shortest period among operands that repeat along leading axes (sizes strictly
    between 1 and n); the launcher cuts chunks at multiples of it. n when none repeats."""
    p = n
    for size in (a, b, c):
        if 1 < size < p:
            p = size
    return max(p, 1)


# --- arithmetic -------------------------------------------------------------

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


@register_jitable
def pow_scalar(x, y):
    return x ** y


@register_jitable
def maximum_scalar(x, y):
    # NaN wins, as in np.maximum.
    if x != x:
        return x
    if y != y:
        return y
    return x if x >= y else y


@register_jitable
def minimum_scalar(x, y):
    if x != x:
        return x
    if y != y:
        return y
    return x if x <= y else y


@register_jitable
def neg_scalar(x):
    return -x


@register_jitable
def abs_scalar(x):
    return np.abs(x)


@register_jitable
def square_scalar(x):
    return x * x


@register_jitable
def sign_scalar(x):
    return np.sign(x)


@register_jitable
def reciprocal_scalar(x):
    return 1.0 / x


# --- transcendental ----------------------------------------------------------

@intrinsic
def float64_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (an LLVM bitcast, which vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


LOG2_E = 1.4426950408889634
LN2_HIGH = 6.93147180369123816490e-01   # ln 2 split in two so that k * LN2_HIGH is exact
LN2_LOW = 1.90821492927058770002e-10
OVERFLOW = 709.782712893384             # exp overflows above this
UNDERFLOW = -745.1332191019412          # and is 0 below this
INVERSE_FACTORIALS = tuple(1.0 / math.factorial(n) for n in range(15))


@intrinsic
def select(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` without a branch (a loop with one does not vectorize)."""
    if if_true != if_false:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return if_true(types.boolean, if_true, if_false), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c rounded once (IEEE fusedMultiplyAdd, not fastmath): one instruction with FMA."""
    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@register_jitable
def exp_scalar(x):
    """e ** x within 1 ulp of NumPy's, in a form LLVM vectorizes (libm's exp does not): x = k ln 2 + r,
    |r| <= ln 2 / 2 (Cody-Waite), e ** r by its Taylor series to degree 13 (truncation below 1e-17)
    in FMA steps, times 2 ** k from the exponent bits in two halves (subnormal results round once).
    No branch: x is clamped to [UNDERFLOW, OVERFLOW] (NaN too) and the ends selected at the end."""
    y = np.float64(x)
    y = select(y > UNDERFLOW, y, UNDERFLOW)
    y = select(y < OVERFLOW, y, OVERFLOW)
    k = np.rint(y * LOG2_E)
    r = (y - k * LN2_HIGH) - k * LN2_LOW
    c = INVERSE_FACTORIALS
    p = c[13]
    for n in range(12, 1, -1):   # unrolled by LLVM
        p = fma(p, r, c[n])
    p = fma(p, r, 1.0)
    p = fma(p, r, 1.0)
    n = np.int64(k)
    half = n >> 1
    result = p * float64_from_bits((half + 1023) << 52) * float64_from_bits((n - half + 1023) << 52)
    result = select(x < UNDERFLOW, 0.0, select(x > OVERFLOW, np.inf, result))
    return select(x != x, x + 0.0, result)


@register_jitable
def expm1_nonpositive(x):
    """e ** x - 1 for x <= 0 (or NaN) within 2 ulp, branch-free: e ** r - 1 by its Taylor series without
    the constant term (small x keep their precision), then 2 ** k (e ** r - 1) - (1 - 2 ** k)."""
    y = select(x > -60.0, x, -60.0)
    k = np.rint(y * LOG2_E)
    r = (y - k * LN2_HIGH) - k * LN2_LOW
    c = INVERSE_FACTORIALS
    q = c[14]
    for n in range(13, 1, -1):   # unrolled by LLVM
        q = fma(q, r, c[n])
    p = (q * r) * r + r
    scale = float64_from_bits((np.int64(k) + 1023) << 52)
    return select(x != x, x, select(y == 0.0, y, scale * p - (1.0 - scale)))   # expm1(-0.0) is -0.0


@register_jitable
def log_scalar(x):
    return np.log(x)


@register_jitable
def sqrt_scalar(x):
    return np.sqrt(x)


@register_jitable
def sin_scalar(x):
    return np.sin(x)


@register_jitable
def cos_scalar(x):
    return np.cos(x)


@register_jitable
def tanh_scalar(x):
    # tanh |x| = -m / (2 + m) with m = expm1(-2 |x|) in [-1, 0]: no cancellation near 0, no overflow far out.
    m = expm1_nonpositive(-2.0 * np.abs(np.float64(x)))
    return np.copysign(-m / (2.0 + m), x)


# --- activations -------------------------------------------------------------

@register_jitable
def relu_scalar(x):
    # NaN propagates, as in np.maximum(x, 0).
    return x if x > 0 or x != x else 0.0


@register_jitable
def sigmoid_scalar(x):
    # 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, from e = exp(-|x|) (no overflow) and a select.
    e = exp_scalar(-np.abs(np.float64(x)))
    return select(x >= 0, 1.0, e) / (1.0 + e)


@register_jitable
def gelu_scalar(x):
    return 0.5 * x * (1.0 + math.erf(x * 0.7071067811865476))


@register_jitable
def step_scalar(x):
    """1 where x > 0, else 0: the derivative of relu."""
    return 1.0 if x > 0 else 0.0


@register_jitable
def gelu_derivative_scalar(x):
    cdf = 0.5 * (1.0 + math.erf(x * 0.7071067811865476))
    pdf = 0.3989422804014327 * exp_scalar(-0.5 * x * x)
    return cdf + x * pdf


# --- comparisons and selection -----------------------------------------------

@register_jitable
def eq_scalar(x, y):
    return x == y


@register_jitable
def ne_scalar(x, y):
    return x != y


@register_jitable
def lt_scalar(x, y):
    return x < y


@register_jitable
def le_scalar(x, y):
    return x <= y


@register_jitable
def gt_scalar(x, y):
    return x > y


@register_jitable
def ge_scalar(x, y):
    return x >= y


@register_jitable
def where_scalar(condition, x, y):
    return x if condition else y


# --- copies and casts ----------------------------------------------------------

@register_jitable
def copy_scalar(x):
    return x


@register_jitable
def to_float32_scalar(x):
    return np.float32(x)


@register_jitable
def to_float64_scalar(x):
    return np.float64(x)


@register_jitable
def to_int32_scalar(x):
    return np.int32(x)


@register_jitable
def to_int64_scalar(x):
    return np.int64(x)


@register_jitable
def to_bool_scalar(x):
    return x != 0


add = binary(add_scalar)
sub = binary(sub_scalar)
mul = binary(mul_scalar)
div = binary(div_scalar)
pow = binary(pow_scalar, PARALLEL_THRESHOLD)
maximum = binary(maximum_scalar)
minimum = binary(minimum_scalar)
neg = unary(neg_scalar)
abs = unary(abs_scalar)
square = unary(square_scalar)
sign = unary(sign_scalar)
reciprocal = unary(reciprocal_scalar)
exp = unary(exp_scalar, PARALLEL_THRESHOLD)
log = unary(log_scalar, PARALLEL_THRESHOLD)
sqrt = unary(sqrt_scalar, PARALLEL_THRESHOLD)
sin = unary(sin_scalar, PARALLEL_THRESHOLD)
cos = unary(cos_scalar, PARALLEL_THRESHOLD)
tanh = unary(tanh_scalar, PARALLEL_THRESHOLD)
relu = unary(relu_scalar)
sigmoid = unary(sigmoid_scalar, PARALLEL_THRESHOLD)
gelu = unary(gelu_scalar, PARALLEL_THRESHOLD)
step = unary(step_scalar)
gelu_derivative = unary(gelu_derivative_scalar, PARALLEL_THRESHOLD)
eq = binary(eq_scalar)
ne = binary(ne_scalar)
gt = binary(gt_scalar)
ge = binary(ge_scalar)
lt = Swapped("lt_scalar", gt)   # x < y as y > x: one compiled kernel for both
le = Swapped("le_scalar", ge)
where = ternary(where_scalar)
copy = unary(copy_scalar, broadcasts=True)
CASTS = {
    np.dtype(np.float32): unary(to_float32_scalar, broadcasts=True),
    np.dtype(np.float64): unary(to_float64_scalar, broadcasts=True),
    np.dtype(np.int32): unary(to_int32_scalar, broadcasts=True),
    np.dtype(np.int64): unary(to_int64_scalar, broadcasts=True),
    np.dtype(np.bool_): unary(to_bool_scalar, broadcasts=True),
}
# Unary ops on strided operands of the output's shape go through NumPy copies and their flat form at any
# size (launch.Elementwise.staged).
for _kernel in [k for k in vars().values() if isinstance(k, Elementwise) and k.arity == 1] + list(CASTS.values()):
    _kernel.staging = _kernel is not copy
del _kernel
