"""Gradient rules of embedding (graphview/ops/embedding.py): a scatter-add for the table (sized by the table
itself, so a row count known only at run time works), and its adjoint (embedding of the incoming gradient,
the padding row zeroed) so that second derivatives work."""
from graphview.ops.embedding import embedding, embedding_grad, padding_mask
from graphview.ops.inplace import assign_
from graphview.ops.math import mul
from graphview.registry import defvjp


def _embedding(g, out, ids, table, padding_idx=None):
    return (None, embedding_grad(g, ids, table, padding_idx=padding_idx))


def _without_padding_row(h, padding_idx):
    """h (rows, dim) with its padding row zeroed: a constant mask when rows is known, else h with the row
    set to 0 through a view (negative padding_idx counts from the end at run time)."""
    rows = h.shape[0]
    if padding_idx is None:
        return h
    if rows is not None:
        return mul(h, padding_mask(rows, padding_idx, h.dtype))
    return assign_(h[padding_idx], 0)


def _embedding_grad(h, out, grad, ids, table, padding_idx=None):
    return (embedding(ids, _without_padding_row(h, padding_idx)), None, None)


defvjp("embedding", _embedding)
defvjp(embedding_grad, _embedding_grad)
