"""Scalar exp, sigmoid and tanh without libm calls, so that loops over a row of them vectorize (the fused
recurrent kernels' cells, ADR 0020), each in its argument's precision; and ``wide_vectors``, which lets
those loops use the CPU's widest vector registers.
"""
import numpy as np
from numba import njit, types
from numba.extending import intrinsic, overload

JIT = dict(cache=True, nogil=True, error_model="numpy")


# --- activations without libm calls, so that the loops over a row vectorize ------------------------
# Numba has no SVML here, and libm's exp and tanh made the LSTM step 3 to 5 times slower. exp(a) is
# Cody-Waite's: a = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor polynomial, 2^k put in the
# exponent bits. float32 rows compute in float32 (half the work of float64, as PyTorch does); each
# activation is dispatched on its argument's type (sigmoid, tanh below). float32's tanh is e / (e + 2)
# with e = expm1(2a), one formula (float64's keeps its series near 0 and 1 - 2 / (e^{2a} + 1) elsewhere).
# float32's polynomials are fused multiply-adds (_fma; Numba contracts nothing without fastmath): the
# LSTM's forward cells took 141 us over 7 steps of 64 x 128, 210 with a multiply and an add per term.

@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma, which the vectorizer keeps); a, b and c of one float type."""
    if not (a == b == c and a in (types.float32, types.float64)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, b, c), codegen


# Past these, exp overflows to +inf, as libm's and PyTorch's do: the largest a whose exp is finite, in each
# precision. The clamps below keep 2^k within the exponent bits; without this overflow, exp(+inf) was finite
# and sigmoid(-inf) 1e-308 (6e-39 in float32) instead of 0, so that a GRU's r * (W_hn h + b_hn) with an
# infinite h was an infinity where PyTorch's 0 * inf gives NaN, and h finite where PyTorch's is NaN.
LARGEST_FINITE_EXP64 = 709.782712893384
LARGEST_FINITE_EXP32 = np.float32(88.72283)


@njit(**JIT)
def _exp64(a):
    """exp(a), relative error about 1e-15 over [-708, 709] (a is clamped there), +inf past
    LARGEST_FINITE_EXP64; NaN propagates."""
    clamped = min(max(a, -708.0), 709.0)
    k = np.floor(clamped * 1.4426950408889634 + 0.5)
    r = (clamped - k * 0.6931471803691238) - k * 1.9082149292705877e-10
    p = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 + r * (
        1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 + r * (
            1.0 / 479001600 + r * (1.0 / 6227020800)))))))))))))
    return np.inf if a > LARGEST_FINITE_EXP64 else p * np.int64((np.int64(k) + 1023) << 52).view(np.float64)


@njit(**JIT)
def _exp_parts32(a):
    """(2^k, e^r - 1) for a = k ln 2 + r, |r| <= ln 2 / 2, a clamped to [-87, 88]; e^r - 1 = r (1 + r/2 + ...)."""
    a = min(max(a, np.float32(-87.0)), np.float32(88.0))
    k = np.floor(_fma(a, np.float32(1.442695), np.float32(0.5)))
    r = _fma(k, np.float32(2.12194440e-4), _fma(k, np.float32(-0.693359375), a))
    q = _fma(np.float32(1.0 / 5040), r, np.float32(1.0 / 720))
    q = _fma(q, r, np.float32(1.0 / 120))
    q = _fma(q, r, np.float32(1.0 / 24))
    q = _fma(q, r, np.float32(1.0 / 6))
    q = _fma(q, r, np.float32(0.5))
    q = _fma(q, r, np.float32(1.0))
    return np.int32((np.int32(k) + np.int32(127)) << np.int32(23)).view(np.float32), r * q


@njit(**JIT)
def _exp32(a):
    """exp(a) in float32, relative error about 2e-7 over [-87, 88] (a is clamped there), +inf past
    LARGEST_FINITE_EXP32; NaN propagates."""
    scale, em = _exp_parts32(a)
    return np.float32(np.inf) if a > LARGEST_FINITE_EXP32 else _fma(scale, em, scale)


@njit(**JIT)
def _sigmoid64(a):
    return 1.0 / (1.0 + _exp64(-a))


@njit(**JIT)
def _sigmoid32(a):
    return np.float32(1.0) / (np.float32(1.0) + _exp32(-a))


@njit(**JIT)
def _tanh64(a):
    """1 - 2 / (exp(2a) + 1), and its Taylor series below |a| = 0.05, where that would cancel."""
    a2 = a * a
    small = a * (1.0 + a2 * (-1.0 / 3 + a2 * (2.0 / 15 + a2 * (-17.0 / 315 + a2 * (62.0 / 2835 + a2 * (
        -1382.0 / 155925))))))
    large = 1.0 - 2.0 / (_exp64(a + a) + 1.0)
    return small if abs(a) < 0.05 else large


@njit(**JIT)
def _expm1_32(a):
    """exp(a) - 1 in float32 (a clamped to [-87, 88]): 2^k (e^r - 1) + (2^k - 1), accurate near 0 too."""
    scale, em = _exp_parts32(a)
    return _fma(scale, em, scale - np.float32(1.0))


@njit(**JIT)
def _tanh32(a):
    """tanh(a) = e / (e + 2) with e = exp(2a) - 1, one formula over the whole range (no branch): 3.05 ulp
    at most over 4 million samples, where the series-or-1 - 2 / (e^{2a} + 1) blend it replaces had 7.4."""
    e = _expm1_32(a + a)
    return e / (e + np.float32(2.0))


def sigmoid(a):
    """1 / (1 + exp(-a)) in a's precision (a stub: Numba compiles the overload below)."""


def tanh(a):
    """tanh(a) in a's precision (a stub: Numba compiles the overload below)."""


def one_like(array):
    """1 in the dtype of ``array``, so that float32 rows stay float32 (a stub: Numba compiles the overload below)."""


@overload(one_like, jit_options=JIT)
def _one_typed(array):
    return (lambda array: np.float32(1.0)) if array.dtype == types.float32 else (lambda array: 1.0)


@overload(sigmoid, jit_options=JIT)
def _sigmoid_typed(a):
    return (lambda a: _sigmoid32(a)) if a == types.float32 else (lambda a: _sigmoid64(a))


@overload(tanh, jit_options=JIT)
def _tanh_typed(a):
    return (lambda a: _tanh32(a)) if a == types.float32 else (lambda a: _tanh64(a))


@intrinsic
def wide_vectors(typingctx):
    """Called first in a function, lets LLVM vectorize that function's loops 512 bits wide where the CPU has
    AVX-512 (its "prefer-vector-width" attribute): LLVM's tuning for those CPUs prefers 256-bit vectors, and
    the LSTM's forward cells ran 123 against 98 us per 512 rows of 128. The attribute must sit on the function
    that holds the loops (Numba optimizes each function before inlining it). The results are the same: the
    same operations on more lanes at a time, and without fastmath LLVM reorders no floating-point sum. CPUs
    without AVX-512 ignore the attribute."""
    def codegen(context, builder, signature, args):
        # llvmlite's attribute set takes known names only; a string attribute is written out as it is.
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen

