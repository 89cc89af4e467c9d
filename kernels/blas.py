"""Matrix products on flat row-major storage through Numba's own BLAS wrapper, with leading dimensions and beta,
so that a product reads and writes columns of a packed row in place (the fused recurrent kernels, ADR 0020).
"""
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload

JIT = dict(cache=True, nogil=True, error_model="numpy")
SMALL = 1_000_000   # OpenBLAS's small-matrix gemm (no packing) for M*N*K <= 100**3: dx's 512x8x512 36 us, not 68


# --- matrix products on flat row-major storage ------------------------------------------------------
# np.dot in Numba wants whole contiguous matrices and overwrites its output; numba_xxgemm (Numba's BLAS wrapper, the
# one np.dot calls, resolved by name so that the cache holds) takes leading dimensions and beta (module docstring).

_CHAR = ir.IntType(8)
_VOID_P = ir.IntType(8).as_pointer()


@intrinsic
def _xxgemm(typingctx, trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """Row-major c[c_start:] (m x n, row stride ldc) = op(a) op(b) + beta * c, op(a) m x k, op(b) k x n; op
    transposes when trans_* is true; a, b, c are 1-D arrays of one float dtype. The BLAS status is returned."""
    if not all(isinstance(array, types.Array) and array.ndim == 1 for array in (a, b, c)) or \
            a.dtype not in (types.float32, types.float64) or not a.dtype == b.dtype == c.dtype:
        return None
    dtype = a.dtype

    def codegen(context, builder, signature, args):
        trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc = args
        kinds = signature.args
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), [
            _CHAR, _CHAR, _CHAR, cgutils.intp_t, cgutils.intp_t, cgutils.intp_t, _VOID_P, _VOID_P, cgutils.intp_t,
            _VOID_P, cgutils.intp_t, _VOID_P, _VOID_P, cgutils.intp_t]), "numba_xxgemm")

        def pointer(position, start):
            data = context.make_array(kinds[position])(context, builder, value=args[position]).data
            return builder.bitcast(builder.gep(data, [start]), _VOID_P)

        def flag(position):
            on = context.cast(builder, args[position], kinds[position], types.boolean)
            return builder.select(on, ir.Constant(_CHAR, ord("t")), ir.Constant(_CHAR, ord("n")))
        alpha = cgutils.alloca_once_value(builder, context.get_constant(dtype, 1.0))
        scaled = cgutils.alloca_once_value(builder, context.cast(builder, beta, kinds[11], dtype))
        kind = ir.Constant(_CHAR, ord("s" if dtype == types.float32 else "d"))
        # BLAS is column-major: row-major c = op(a) op(b) is column-major c^T = op(b)^T op(a)^T.
        return builder.call(function, (kind, flag(1), flag(0), n, m, k, builder.bitcast(alpha, _VOID_P),
                                       pointer(8, b_start), ldb, pointer(5, a_start), lda,
                                       builder.bitcast(scaled, _VOID_P), pointer(12, c_start), ldc))
    return types.int32(trans_a, trans_b, types.intp, types.intp, types.intp, a, types.intp, types.intp, b,
                       types.intp, types.intp, beta, c, types.intp, types.intp), codegen


def product(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """c = op(a) op(b) + beta c over flat row-major storage (see _xxgemm), beta 0 or 1 (a stub: see the overload)."""


@overload(product, jit_options=JIT)
def _product_typed(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """An overload, typed without literal values (flags, offsets 0): one signature per dtype (njit: 9 in float64)."""
    return _product_body


def _product_body(trans_a, trans_b, m, n, k, a, a_start, lda, b, b_start, ldb, beta, c, c_start, ldc):
    """product's implementation; empty products are handled here (BLAS refuses a leading dimension of 0). Without
    trans_b, in blocks of rows within SMALL (of 32 rows at least; with trans_b or fewer rows, blocks gained nothing)."""
    if m == 0 or n == 0:
        return
    if k == 0:
        if beta == 0:
            for i in range(m):
                c[c_start + i * ldc:c_start + i * ldc + n] = 0
        return
    rows = m if trans_b or SMALL // (n * k) < 32 else min(m, SMALL // (n * k))
    for i in range(0, m, rows):
        if _xxgemm(trans_a, trans_b, min(rows, m - i), n, k, a, a_start + (i if trans_a else i * lda), lda, b,
                   b_start, ldb, beta, c, c_start + i * ldc, ldc) != 0:
            raise RuntimeError("the BLAS matrix product (numba_xxgemm) failed")
