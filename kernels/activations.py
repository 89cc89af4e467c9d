"""Element-wise activation kernels with parameters: leaky_relu, elu, selu, softplus, silu, log_sigmoid, hard_tanh.

Built as kernels.elementwise builds its unary kernels (a flat loop over contiguous operands run in
chunks on threads above a size threshold, and a 4-axis strided loop for views, launched by
``launch.four_axis_blocks``), with one difference: the scalar function also takes a small float64
tuple of the op's parameters (alpha, min_val, max_val), passed per call rather than compiled in.

The scalar functions live in this file on purpose (as in kernels/elementwise.py): Numba's cache
tracks only the file of the function it compiles, so a callee in another file could leave a stale
kernel in the cache.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import types
from numba.extending import intrinsic, overload, register_jitable

from .launch import RANK, STAGED_BELOW, array_type, flat, four_axis_blocks, writable
from .threads import PARALLEL_THRESHOLD, STREAMING_THRESHOLD, WORKERS, chunks, pool

JIT = dict(cache=True, nogil=True, error_model="numpy")

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


class Parametric:
    """A callable ``kernel(x, out, params)``: x and out of one shape, params a sequence of floats.

    Each form is compiled once per (x dtype, out dtype, number of parameters), whatever the operands'
    rank, layout and read-only flags: the flat form for 1-D views, the strided one for the 4-D views of
    ``launch.four_axis_blocks`` (see kernels/launch.py)."""

    def __init__(self, name, contiguous, strided, threshold):
        self.name = name
        self.contiguous = contiguous
        self.strided = strided
        self.threshold = threshold
        self.entries = {}

    def entry(self, form, x, out, count):
        key = (form, x.dtype, out.dtype, count)
        entry = self.entries.get(key)
        if entry is None:
            rank, layout = (1, "C") if form == "flat" else (RANK, "A")
            signature = (array_type(x.dtype, rank, layout, readonly=True),
                         types.UniTuple(types.float64, count) if count else types.Tuple(()),
                         array_type(out.dtype, rank, layout))
            if form == "flat":
                signature += (types.int64, types.int64)
            dispatcher = self.contiguous if form == "flat" else self.strided
            entry = self.entries[key] = dispatcher.compile(signature)
        return entry

    def __call__(self, x, out, params):
        # A tuple, passed by value: the loop reads it as constants, where the elements of an array
        # might change with each store to out (no alias information) and keep the loop from vectorizing.
        params = tuple(float(value) for value in np.asarray(params, np.float64).reshape(-1))
        writable(out)
        if not (out.flags.c_contiguous and x.flags.c_contiguous and x.shape == out.shape):
            if x.shape == out.shape or out.size < STAGED_BELOW:
                # Through NumPy copies and the flat form, as launch.Elementwise.staged: no strided form
                # compiled.
                x = np.ascontiguousarray(np.broadcast_to(x, out.shape))
                if out.flags.c_contiguous:
                    return self(x, out, params)
                np.copyto(out, self(x, np.empty(out.shape, out.dtype), params))
                return out
            strided = self.entry("strided", x, out, len(params))
            for block in four_axis_blocks((x, out)):
                strided(block[0], params, block[1])
            return out
        size = out.size
        contiguous = self.entry("flat", x, out, len(params))
        xs, zs = flat(x), flat(out)
        if size < self.threshold or WORKERS == 1:
            contiguous(xs, params, zs, 0, size)
        else:
            futures = [pool().submit(contiguous, xs, params, zs, lo, hi) for lo, hi in chunks(size)]
            for future in futures:
                future.result()
        return out

    def __repr__(self):
        return f"<activation kernel {self.name}>"


def parametric(scalar, threshold=PARALLEL_THRESHOLD):
    @njit(**JIT)
    def contiguous(a, params, out, lo, hi):
        # 1-D operands (Parametric flattens them), unsigned indices: see kernels/elementwise.py's unary.
        for i in range(np.uint64(lo), np.uint64(hi)):
            out[i] = scalar(a[i], params)

    @njit(**JIT)
    def strided(a, params, out):
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                for k in range(out.shape[2]):
                    for m in range(out.shape[3]):
                        out[i, j, k, m] = scalar(a[i, j, k, m], params)

    return Parametric(scalar.__name__, contiguous, strided, threshold)


# --- branch-free math ------------------------------------------------------------
# A branch in the scalar function keeps LLVM from vectorizing the loop, and libm's exp, expm1 and
# log1p are calls it cannot vectorize at all: the functions below compute both sides and select,
# with exp and expm1 as in kernels/elementwise.py (repeated here, not imported: Numba's cache tracks
# only this file) and log1p by fdlibm's reduction. Each works in float64, so a float32 result is the
# float64 one rounded once.

@intrinsic
def select(typingctx, condition, if_true, if_false):
    """``if_true if condition else if_false`` as an LLVM select, without a branch."""
    if if_true != if_false:
        return None

    def codegen(context, builder, signature, args):
        return builder.select(args[0], args[1], args[2])
    return if_true(types.boolean, if_true, if_false), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c rounded once (IEEE fusedMultiplyAdd, exact where fastmath is not): one instruction
    on CPUs with FMA, where LLVM would not fuse a * b + c itself without fastmath."""
    if not (a == b == c and isinstance(a, types.Float)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return a(a, b, c), codegen


@intrinsic
def float64_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits`` (an LLVM bitcast, which vectorizes)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


LOG2_E = 1.4426950408889634
LN2_HIGH = 6.93147180369123816490e-01   # ln 2 split in two so that k * LN2_HIGH is exact
LN2_LOW = 1.90821492927058770002e-10
INVERSE_FACTORIALS = tuple(1.0 / math.factorial(n) for n in range(15))
SQRT2 = 1.4142135623730951
# fdlibm's log1p: log(1 + f) = f - f^2 / 2 + s (f^2 / 2 + R(s^2)), s = f / (2 + f), |s| < 0.172.
LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
      1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)


def exp_nonpositive_float64(x):
    """e ** x for x <= 0 (or NaN) within 1 ulp: x = k ln 2 + r, e ** r by its Taylor series,
    times 2 ** k in two halves (so that subnormal results round once); x is clamped at -746,
    where the result rounds to 0, and NaN is put back at the end."""
    y = select(x > -746.0, x, -746.0)
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
    return select(x != x, x, result)


def expm1_nonpositive_float64(x):
    """e ** x - 1 for x <= 0 (or NaN) within 2 ulp: e ** r - 1 by its Taylor series without the
    constant term (small x keep their precision), then 2 ** k (e ** r - 1) - (1 - 2 ** k), whose
    terms are exact. Below -60 the result rounds to -1."""
    y = select(x > -60.0, x, -60.0)
    k = np.rint(y * LOG2_E)
    r = (y - k * LN2_HIGH) - k * LN2_LOW
    c = INVERSE_FACTORIALS
    q = c[14]
    for n in range(13, 1, -1):   # unrolled by LLVM
        q = fma(q, r, c[n])
    p = (q * r) * r + r
    scale = float64_from_bits((np.int64(k) + 1023) << 52)
    result = select(y == 0.0, y, scale * p - (1.0 - scale))   # expm1(-0.0) is -0.0
    return select(x != x, x, result)


def log1p_unit_float64(t):
    """log(1 + t) for t in [0, 1] (or NaN) within 1 ulp, as fdlibm's log1p: u = 1 + t is 2 ** k (1 + f)
    with 1 + f in [sqrt(2) / 2, sqrt(2)] (k is 0 or 1), plus the rounding error of u divided by u."""
    u = 1.0 + t
    correction = (t - (u - 1.0)) / u
    high = u > SQRT2
    f = select(high, 0.5 * u - 1.0, u - 1.0)
    k = select(high, 1.0, 0.0)
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    big_r = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6]))) + w * (LG[1] + w * (LG[3] + w * LG[5]))
    half_square = 0.5 * f * f
    return k * LN2_HIGH - ((half_square - (s * (half_square + big_r) + (k * LN2_LOW + correction))) - f)


@intrinsic
def float32_power_of_two(typingctx, k):
    """2 ** k for a float32 integer k in [-126, 127], from its exponent bits (in int32, so that
    the vectorized loop keeps 8 float32 lanes)."""
    def codegen(context, builder, signature, args):
        int32 = ir.IntType(32)
        exponent = builder.add(builder.fptosi(args[0], int32), ir.Constant(int32, 127))
        return builder.bitcast(builder.shl(exponent, ir.Constant(int32, 23)), ir.FloatType())
    return types.float32(types.float32), codegen


# float32 has 24 bits: degree 7 for e ** r and 8 for e ** r - 1 reach float32's precision (truncation
# below 6e-9 and 3e-10), and 4 terms of fdlibm's log1pf series (musl's constants).
F32 = {name: np.float32(value) for name, value in dict(
    log2_e=LOG2_E, ln2_high=0.693359375, ln2_low=-2.12194440e-4, sqrt2=SQRT2, exp_clamp=-104.0, expm1_clamp=-20.0,
    log_ln2_high=6.9313812256e-01, log_ln2_low=9.0580006145e-06, one=1.0, two=2.0, half=0.5, zero=0.0).items()}
INVERSE_FACTORIALS_32 = tuple(np.float32(c) for c in INVERSE_FACTORIALS[:9])
LG_32 = tuple(np.float32(float.fromhex(bits))
              for bits in ("0xaaaaaa.0p-24", "0xccce13.0p-25", "0x91e9ee.0p-25", "0xf89e26.0p-26"))
EXP_CLAMP_32, EXPM1_CLAMP_32, LOG2_E_32 = F32["exp_clamp"], F32["expm1_clamp"], F32["log2_e"]
LN2_HIGH_32, LN2_LOW_32, SQRT2_32 = F32["ln2_high"], F32["ln2_low"], F32["sqrt2"]
LOG_LN2_HIGH_32, LOG_LN2_LOW_32 = F32["log_ln2_high"], F32["log_ln2_low"]
ONE_32, TWO_32, HALF_32, ZERO_32 = F32["one"], F32["two"], F32["half"], F32["zero"]


def exp_nonpositive_float32(x):
    # As exp_nonpositive_float64, in float32 (8 lanes a vector instead of 4); below -104 e ** x rounds to 0.
    y = select(x > EXP_CLAMP_32, x, EXP_CLAMP_32)
    k = np.rint(y * LOG2_E_32)
    r = (y - k * LN2_HIGH_32) - k * LN2_LOW_32
    c = INVERSE_FACTORIALS_32
    p = c[7]
    for n in range(6, -1, -1):   # unrolled by LLVM
        p = fma(p, r, c[n])
    half = np.floor(k * HALF_32)
    result = p * float32_power_of_two(half) * float32_power_of_two(k - half)
    return select(x != x, x, result)


def expm1_nonpositive_float32(x):
    y = select(x > EXPM1_CLAMP_32, x, EXPM1_CLAMP_32)
    k = np.rint(y * LOG2_E_32)
    r = (y - k * LN2_HIGH_32) - k * LN2_LOW_32
    c = INVERSE_FACTORIALS_32
    q = c[8]
    for n in range(7, 1, -1):   # unrolled by LLVM
        q = fma(q, r, c[n])
    p = (q * r) * r + r
    scale = float32_power_of_two(k)
    result = select(y == ZERO_32, y, scale * p - (ONE_32 - scale))
    return select(x != x, x, result)


def log1p_unit_float32(t):
    u = ONE_32 + t
    correction = (t - (u - ONE_32)) / u
    high = u > SQRT2_32
    f = select(high, HALF_32 * u - ONE_32, u - ONE_32)
    k = select(high, ONE_32, ZERO_32)
    s = f / (TWO_32 + f)
    z = s * s
    w = z * z
    big_r = z * (LG_32[0] + w * LG_32[2]) + w * (LG_32[1] + w * LG_32[3])
    half_square = HALF_32 * f * f
    return k * LOG_LN2_HIGH_32 - ((half_square - (s * (half_square + big_r) + (k * LOG_LN2_LOW_32 + correction))) - f)


# Each function in x's precision: float32 for float32, float64 for the rest.

def exp_nonpositive(x):
    """e ** x for x <= 0 (or NaN)."""


def expm1_nonpositive(x):
    """e ** x - 1 for x <= 0 (or NaN)."""


def log1p_unit(t):
    """log(1 + t) for t in [0, 1] (or NaN)."""


def as_float(x):
    """x as float32 if it is, else as float64 (integers are promoted to float64)."""


def like(x, value):
    """The constant ``value`` in x's type."""


@overload(exp_nonpositive)
def exp_nonpositive_overload(x):
    return exp_nonpositive_float32 if x == types.float32 else exp_nonpositive_float64


@overload(expm1_nonpositive)
def expm1_nonpositive_overload(x):
    return expm1_nonpositive_float32 if x == types.float32 else expm1_nonpositive_float64


@overload(log1p_unit)
def log1p_unit_overload(t):
    return log1p_unit_float32 if t == types.float32 else log1p_unit_float64


@overload(as_float)
def as_float_overload(x):
    return (lambda x: x) if x == types.float32 else (lambda x: np.float64(x))


@overload(like)
def like_overload(x, value):
    return (lambda x, value: np.float32(value)) if x == types.float32 else (lambda x, value: np.float64(value))


@register_jitable(inline="always")
def log1p_exp_negative_abs(x):
    """log(1 + e^-|x|), the part of softplus and log_sigmoid that never overflows (NaN propagates).

    Inlined by Numba (inline="always"), as are its callers: LLVM inlines exp and log1p here, and
    then finds the function too large to inline into the loop, which it would no longer vectorize."""
    return log1p_unit(exp_nonpositive(-np.abs(x)))


# --- activations ------------------------------------------------------------------
# Integers are promoted to float64 first; float32 is computed in float32.

@register_jitable
def leaky_relu_scalar(x, params):
    # x > 0 else alpha * x; NaN propagates (alpha * NaN).
    return x if x > 0 else x * params[0]


@register_jitable
def elu_scalar(x, params):
    # expm1 keeps the precision of small negative x, as PyTorch does; NaN goes to the expm1 side.
    y = as_float(x)
    return select(y > 0, y, like(y, params[0]) * expm1_nonpositive(select(y > 0, like(y, 0.0), y)))


@register_jitable
def selu_scalar(x, params):
    y = as_float(x)
    negative = like(y, SELU_SCALE * SELU_ALPHA) * expm1_nonpositive(select(y > 0, like(y, 0.0), y))
    return select(y > 0, like(y, SELU_SCALE) * y, negative)


@register_jitable(inline="always")
def softplus_scalar(x, params):
    # log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exp never overflows.
    y = as_float(x)
    t = log1p_exp_negative_abs(y)
    return select(y > 0, y + t, t)


@register_jitable
def sigmoid(x):
    # 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below, from e = exp(-|x|): never overflows.
    e = exp_nonpositive(-np.abs(x))
    one = like(x, 1.0)
    return select(x >= 0, one, e) / (one + e)


@register_jitable
def silu_scalar(x, params):
    y = as_float(x)
    return y * sigmoid(y)


@register_jitable(inline="always")
def log_sigmoid_scalar(x, params):
    # log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|).
    y = as_float(x)
    t = log1p_exp_negative_abs(y)
    return select(y < 0, y - t, -t)


@register_jitable
def hard_tanh_scalar(x, params):
    # NaN propagates, as in PyTorch's clamp.
    if x < params[0]:
        return params[0]
    if x > params[1]:
        return params[1]
    return x


leaky_relu = parametric(leaky_relu_scalar, STREAMING_THRESHOLD)
elu = parametric(elu_scalar)
selu = parametric(selu_scalar)
softplus = parametric(softplus_scalar)
silu = parametric(silu_scalar)
log_sigmoid = parametric(log_sigmoid_scalar)
hard_tanh = parametric(hard_tanh_scalar, STREAMING_THRESHOLD)
