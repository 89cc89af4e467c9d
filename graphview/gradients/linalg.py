"""Gradient rules of matmul and transpose (graphview/ops/linalg.py)."""
import numpy as np

from graphview.gradients.unbroadcast import unbroadcast
from graphview.ops.linalg import matmul_op, transpose_op
from graphview.ops.shape import permute_op
from graphview.registry import defvjp


def _swap_last(x):
    perm = tuple(range(x.rank - 2)) + (x.rank - 1, x.rank - 2)
    return permute_op(x, perm=perm)


def _matmul(g, out, a, b):
    grad_a, grad_b = matmul_op(g, _swap_last(b)), matmul_op(_swap_last(a), g)
    if a.rank == 2 and b.rank == 2:   # no batch axes were broadcast: the products have a's and b's shapes
        return grad_a, grad_b
    return unbroadcast(grad_a, a), unbroadcast(grad_b, b)


def _transpose(g, out, x, perm=None):
    order = tuple(reversed(range(x.rank))) if perm is None else perm
    return (transpose_op(g, perm=tuple(int(i) for i in np.argsort(order))),)


defvjp(matmul_op, _matmul)
defvjp(transpose_op, _transpose)
