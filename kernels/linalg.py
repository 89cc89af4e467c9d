"""Matrix products. Floating-point products call BLAS through Numba's np.dot."""
import numpy as np
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")


@njit(**JIT)
def matmul_float(a, b, out):
    """out = a @ b for 2-D float arrays, C- or F-contiguous."""
    np.dot(a, b, out)


@njit(**JIT)
def matmul_float_batched(a, b, out, a_step, b_step):
    """out[i] = a[i * a_step] @ b[i * b_step]; a step of 0 broadcasts one matrix."""
    for i in range(out.shape[0]):
        np.dot(a[i * a_step], b[i * b_step], out[i])


@njit(**JIT)
def matmul_integer_batched(a, b, out, a_step, b_step):
    """Integer products have no BLAS; a plain i-k-j loop, exact in the output dtype."""
    for batch in range(out.shape[0]):
        x = a[batch * a_step]
        y = b[batch * b_step]
        z = out[batch]
        z[:, :] = 0
        for i in range(x.shape[0]):
            for k in range(x.shape[1]):
                value = x[i, k]
                for j in range(y.shape[1]):
                    z[i, j] += value * y[k, j]
