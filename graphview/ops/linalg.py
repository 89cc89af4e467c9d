"""Linear algebra: matmul (2-D and batched with broadcast leading dims) and transpose.

Their gradient rules are in graphview/gradients/linalg.py.
"""
import math

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ShapeError
from graphview.ops.shape import axes_of_dims, contiguous, expand_dims, normalize_permutation, squeeze
from graphview.registry import defop, graph_of, public
from graphview.shapes import broadcast_shapes, format_shape
from graphview.testing import Sample, transposed
from graphview_kernels import linalg as kernels


def _matmul_shape(a, b):
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul needs rank >= 2 inputs, got {format_shape(a)} and {format_shape(b)}")
    if a[-1] is not None and b[-2] is not None and a[-1] != b[-2]:
        raise ShapeError(f"inner dimensions differ: {format_shape(a)} @ {format_shape(b)} ({a[-1]} != {b[-2]})")
    return broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])


def _matmul_kernel(a, b, out):
    if out.size == 0:
        return
    if a.shape[-1] == 0:
        out[...] = 0
        return
    floating = out.dtype.kind == "f"
    if a.ndim == 2 and b.ndim == 2 and floating:
        kernels.matmul_float(_blas_ready(a), _blas_ready(b), out)
        return
    if b.ndim == 2 and a.flags.c_contiguous and floating:
        # A stack of matrices times one matrix is one larger product.
        kernels.matmul_float(a.reshape(-1, a.shape[-1]), _blas_ready(b), out.reshape(-1, out.shape[-1]))
        return
    batch = out.shape[:-2]
    a3 = _batched(a, batch)
    b3 = _batched(b, batch)
    out3 = out.reshape((-1,) + out.shape[-2:])
    function = kernels.matmul_float_batched if floating else kernels.matmul_integer_batched
    function(a3, b3, out3, int(a3.shape[0] > 1), int(b3.shape[0] > 1))


def _blas_ready(x):
    return x if x.flags.c_contiguous or x.flags.f_contiguous else contiguous(x)


def _batched(x, batch):
    """x as a C-contiguous (count, n, m) stack; count is 1 when x broadcasts over the batch."""
    if x.ndim == 2:
        return contiguous(x)[None]
    if x.shape[:-2] != batch:
        if math.prod(x.shape[:-2]) == 1:
            return contiguous(x).reshape((1,) + x.shape[-2:])
        x = np.broadcast_to(x, batch + x.shape[-2:])
    return contiguous(x).reshape((-1,) + x.shape[-2:])


def _matmul_samples():
    r = np.random.default_rng(12)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        a, b = r.random((3, 4)).astype(dtype), r.random((4, 2)).astype(dtype)
        samples += [Sample((a, b), label=f"2-D {name}"),
                    Sample((transposed(a), b[::1, ::-1]), label=f"transposed and reversed {name}"),
                    Sample((r.random((2, 3, 4)).astype(dtype), b), label=f"batch @ matrix {name}"),
                    Sample((r.random((2, 1, 3, 4)).astype(dtype), r.random((5, 4, 2)).astype(dtype)), label=f"broadcast batch {name}")]
    samples.append(Sample((np.zeros((0, 4)), r.random((4, 2))), label="empty rows"))
    samples.append(Sample((np.zeros((3, 0)), np.zeros((0, 2))), label="empty inner"))
    samples.append(Sample((r.integers(-3, 4, (3, 4)), r.integers(-3, 4, (2, 4, 2))), label="int64 batched"))
    return samples


matmul_op = defop("matmul", shape=_matmul_shape, kernel=_matmul_kernel, promote="same",
                  accepts=dtypes.NUMERIC, samples=_matmul_samples, reference=np.matmul, family="linalg",
                  doc="Matrix product with NumPy's broadcasting of leading dims (BLAS for floats).")


@public(("linalg", "math"))
def matmul(a, b, *, name=None):
    """a @ b: 2-D, batched with broadcast leading dims, or with a 1-D operand as in NumPy."""
    graph = graph_of((a, b), "matmul")
    a = a if hasattr(a, "graph") else graph.constant_like(np.asarray(a), None)
    b = b if hasattr(b, "graph") else graph.constant_like(np.asarray(b), None)
    if a.rank == 0 or b.rank == 0:
        raise ShapeError(f"matmul: operands must not be scalars (shapes {format_shape(a.shape)} and {format_shape(b.shape)}); use mul")
    if a.rank > 1 and b.rank > 1:
        return matmul_op(a, b, name=name)
    squeeze_axes = []
    if a.rank == 1:
        a = expand_dims(a, 0)
        squeeze_axes.append(-2)
    if b.rank == 1:
        b = expand_dims(b, -1)
        squeeze_axes.append(-1)
    product = matmul_op(a, b)
    rank = product.rank
    return squeeze(product, tuple(sorted(axis % rank for axis in squeeze_axes)), name=name)


def _transpose_samples():
    x = np.random.default_rng(13).random((3, 4))
    return [Sample((x,), label="2-D"), Sample((x.astype(np.float32),), {"perm": (1, 0)}, label="float32"),
            Sample((np.random.default_rng(13).random((2, 3, 4)),), {"perm": (0, 2, 1)}, label="3-D"),
            Sample((transposed(x),), label="transposed")]


transpose_op = defop("transpose", shape=lambda x, perm=None: tuple(x[p] for p in (perm or reversed(range(len(x))))),
                     kernel=lambda x, perm=None: x.transpose(perm), view=True, accepts=dtypes.ALL,
                     samples=_transpose_samples, reference=lambda x, perm=None: np.transpose(x, perm), family="linalg",
                     attrs={"perm": attributes.Perm()},
                     doc="x with its axes reversed, or reordered by perm (a view).")


@public(("linalg", "math"))
def transpose(x, perm=None, *, name=None):
    """x with its axes reversed, or reordered by ``perm`` (a view)."""
    if perm is not None:
        graph_of((x,), "transpose")
        perm = normalize_permutation(x.rank, axes_of_dims(x, perm, "transpose"))
    return transpose_op(x, name=name, perm=perm)
