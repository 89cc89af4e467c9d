"""Embedding: rows of a table by integer ids (``g.nn.embedding``), and the scatter-add of its gradient.

PyTorch's torch.nn.functional.embedding: ``ids`` of any shape give ``ids.shape + (dim,)``; the
rows at ``padding_idx`` take no gradient. Ids are run-time values: they are checked against the
table's size before any kernel reads with them (an ExecutionError naming the op, the id and the
table size). Gradient rules: graphview/gradients/embedding.py.
"""
import operator
from dataclasses import dataclass

import numpy as np

from graphview import attributes, dtypes
from graphview.errors import ExecutionError, OpArgumentError, ShapeError
from graphview.registry import defop, public
from graphview.shapes import format_shape
from graphview.testing import Sample, transposed
from graphview.ops.shape import contiguous
from graphview_kernels import embedding as kernels


@dataclass(frozen=True)
class PaddingIndex(attributes.Attribute):
    """None, or an int: a row of the table (negative counts from the end, as in PyTorch)."""

    def parse(self, value):
        if value is None:
            return None
        return attributes.Int().parse(value)


def padding_row(op, padding_idx, rows):
    """padding_idx as a row in [0, rows), or -1 for None; out of range is an OpArgumentError."""
    if padding_idx is None:
        return -1
    if rows is not None and not -rows <= padding_idx < rows:
        raise OpArgumentError(f"{op}: padding_idx {padding_idx} is out of range for a table of {rows} rows "
                              f"(valid: {-rows}..{rows - 1})")
    return padding_idx % rows if rows else padding_idx


def checked_ids(op, ids, rows):
    """The ids flat (C order, int64), after refusing any outside [0, rows): Numba does no bounds checking."""
    flat = np.asarray(contiguous(ids).reshape(-1), np.int64)
    bad = kernels.first_bad_id(flat, rows)
    if bad >= 0:
        position = np.unravel_index(bad, ids.shape) if ids.ndim else ()
        raise ExecutionError(f"{op}: id {int(flat[bad])} at position {tuple(int(p) for p in position)} is out of "
                             f"range for a table of {rows} rows (valid: 0..{rows - 1})")
    return flat


def _ids_dtype(op, ids):
    dtypes.check_category(op, "ids", ids, dtypes.INTS)


# --- embedding ------------------------------------------------------------------------------------

def _embedding_shape(ids, table, padding_idx=None):
    if len(table) != 2:
        raise ShapeError(f"embedding: the table must be (rows, dim), not {format_shape(table)}")
    padding_row("embedding", padding_idx, table[0])
    return tuple(ids) + (table[1],)


def _embedding_dims(in_dims, in_shapes, attrs, out_shape):
    """The ids' dims (a time dim with lengths stays one), then the table's feature dim."""
    ids, table = in_dims
    return tuple(ids) + (table[1] if len(table) == 2 else None,)


def _embedding_dtype(ids, table, padding_idx=None):
    _ids_dtype("embedding", ids)
    return table


def _embedding_kernel(ids, table, out, padding_idx=None):
    flat = checked_ids("embedding", ids, table.shape[0])
    kernels.embedding(flat, contiguous(table), out.reshape(flat.size, table.shape[1]))


def _embedding_reference(ids, table, padding_idx=None):
    return table[np.asarray(ids, np.int64)]


def _embedding_samples():
    r = np.random.default_rng(161)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        table = r.normal(size=(6, 3)).astype(dtype)
        samples.append(Sample((np.array([[0, 5, 2], [2, 2, 1]]), table), label=f"repeated ids {name}",
                              constant_inputs=(0,)))
        # The padding row takes no gradient (PyTorch's choice) though the output reads it: no finite differences.
        samples.append(Sample((np.array([1, 0, 3, 0], np.int32), table), {"padding_idx": 0},
                              label=f"padding_idx, int32 {name}", constant_inputs=(0,), gradcheck=False))
    table = r.normal(size=(5, 4))
    samples += [Sample((np.array(3), table), label="rank-0 ids", constant_inputs=(0,)),
                Sample((np.zeros((0, 2), np.int64), table), label="no ids", constant_inputs=(0,)),
                Sample((transposed(np.array([[4, 1], [0, 2], [3, 3]])), transposed(table)),
                       label="transposed", constant_inputs=(0,)),
                Sample((np.array([[4, 1], [0, 2]]), table), {"padding_idx": -1}, label="padding_idx -1",
                       constant_inputs=(0,), gradcheck=False),
                Sample((np.array([0, 1]), np.zeros((2, 0))), label="dim 0", constant_inputs=(0,))]
    return samples


_embedding = defop(
    "embedding", shape=_embedding_shape, dtype=_embedding_dtype, kernel=_embedding_kernel, promote="float",
    promote_inputs=(1,), accepts=dtypes.NUMERIC, samples=_embedding_samples, reference=_embedding_reference,
    family="nn", attrs={"padding_idx": PaddingIndex()}, dims=_embedding_dims,
    doc="Rows of table (rows, dim) by integer ids of any shape: ids.shape + (dim,). Ids outside [0, rows) are an "
        "error before the kernel runs; the padding_idx row takes no gradient (its gradient is a scatter-add kernel, "
        "embedding_grad).")


@public("nn")
def embedding(ids, table, padding_idx=None, *, name=None):
    """Rows of ``table`` by integer ``ids`` (any shape): ``ids.shape + (dim,)``. The row ``padding_idx``
    (None: none) takes no gradient, as in PyTorch."""
    return _embedding(ids, table, name=name, padding_idx=padding_idx)


# --- its gradient for the table: a scatter-add ----------------------------------------------------

def _grad_shape(grad, ids, table, padding_idx=None):
    if tuple(grad[:-1]) != tuple(ids) or not grad:
        raise ShapeError(f"embedding_grad: the gradient {format_shape(grad)} must be the ids' shape "
                         f"{format_shape(ids)} plus a row axis")
    if len(table) != 2:
        raise ShapeError(f"embedding_grad: the table must be (rows, dim), not {format_shape(table)}")
    if None not in (table[1], grad[-1]) and table[1] != grad[-1]:
        raise ShapeError(f"embedding_grad: the gradient {format_shape(grad)} has rows of length {grad[-1]}, "
                         f"the table {format_shape(table)} rows of length {table[1]}")
    padding_row("embedding_grad", padding_idx, table[0])
    return (table[0], grad[-1])


def _grad_dtype(grad, ids, table, **attrs):
    _ids_dtype("embedding_grad", ids)
    return grad


def _grad_kernel(grad, ids, table, out, padding_idx=None):
    rows, dim = out.shape
    flat = checked_ids("embedding_grad", ids, rows)
    kernels.embedding_grad(contiguous(grad).reshape(flat.size, dim), flat,
                           padding_row("embedding_grad", padding_idx, rows), out)


def _grad_reference(grad, ids, table, padding_idx=None):
    out = np.zeros((table.shape[0], grad.shape[-1]), np.float64)
    np.add.at(out, np.asarray(ids, np.int64).reshape(-1), grad.reshape(np.size(ids), grad.shape[-1]))
    if padding_idx is not None:
        out[padding_idx] = 0.0
    return out.astype(grad.dtype)


def _grad_samples():
    r = np.random.default_rng(162)
    samples = []
    for sample in _embedding_samples():
        ids, table = sample.inputs
        grad = r.normal(size=np.shape(ids) + (table.shape[1],)).astype(table.dtype)
        samples.append(Sample((grad, ids, table), sample.attrs, label=sample.label, constant_inputs=(1, 2)))
    return samples


embedding_grad = defop(
    "embedding_grad", shape=_grad_shape, dtype=_grad_dtype, kernel=_grad_kernel, promote="float",
    promote_inputs=(0,), accepts=dtypes.NUMERIC, samples=_grad_samples, reference=_grad_reference, family="nn",
    attrs={"padding_idx": PaddingIndex()},
    doc="The gradient of embedding for its table: zeros shaped as the table (rows, dim), known at run time "
        "if need be, with each grad row added at its id (repeated ids add up), except at padding_idx; a "
        "scatter-add kernel summing in float64. The table only sizes the result.")


def padding_mask(rows, padding_idx, dtype):
    """(rows, 1): 0 at the padding row, 1 elsewhere (None when there is no padding row)."""
    if padding_idx is None:
        return None
    mask = np.ones((rows, 1), dtype)
    mask[operator.index(padding_idx)] = 0
    return mask
