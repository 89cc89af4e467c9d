"""Attention kernels: the causal mask (a query attends to keys at or before its own position)."""
from numba import njit


@njit(cache=True)
def causal_mask(out):
    """out[i, j] = j <= i, PyTorch's is_causal mask (lower triangle, aligned at the top left)."""
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = j <= i
