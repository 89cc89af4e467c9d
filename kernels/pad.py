"""Padding kernels (NumPy's np.pad modes constant, reflect and edge) and their adjoint.

An array of any rank is padded one axis at a time, as NumPy does: the caller views the array
padded so far as (outer, size, inner), C-contiguous, and :func:`pad_axis` writes it padded along
the middle axis into a (outer, before + size + after, inner) array; corners come out right because
each axis copies the rows the earlier axes padded. :func:`fold_axis` is the adjoint of one step
(the gradient runs the axes in reverse order). Mode codes: 0 constant, 1 reflect, 2 edge. The
caller checks that a padded axis is not empty (reflect and edge) and that a reflect pad is smaller
than the axis.
"""
from numba import njit

JIT = dict(cache=True, nogil=True, error_model="numpy")

CONSTANT = 0
REFLECT = 1
EDGE = 2


@njit(**JIT)
def _source(r, size, mode):
    """The row of the unpadded axis that row ``r`` (counted from the first unpadded row) copies;
    -1 for a constant pad."""
    if 0 <= r < size:
        return r
    if mode == CONSTANT:
        return -1
    if mode == REFLECT:
        return -r if r < 0 else 2 * (size - 1) - r
    return 0 if r < 0 else size - 1


@njit(**JIT)
def pad_axis(x, out, before, mode, value):
    """out[:, i, :] = x[:, source(i - before), :], or value for a constant pad."""
    outer, size, inner = x.shape
    n = out.shape[1]
    for o in range(outer):
        for i in range(n):
            src = _source(i - before, size, mode)
            if src < 0:
                for k in range(inner):
                    out[o, i, k] = value
            else:
                for k in range(inner):
                    out[o, i, k] = x[o, src, k]


@njit(**JIT)
def fold_axis(grad, out, before, mode):
    """The adjoint of pad_axis: out[:, s, :] = the sum of grad[:, i, :] over the rows i copying row s."""
    outer, size, inner = out.shape
    n = grad.shape[1]
    out[:, :, :] = 0
    for o in range(outer):
        for i in range(n):
            src = _source(i - before, size, mode)
            if src >= 0:
                for k in range(inner):
                    out[o, src, k] += grad[o, i, k]
