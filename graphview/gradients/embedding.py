"""Gradient rules of embedding (graphview/ops/embedding.py): a scatter-add for the table, and its adjoint
(embedding of the incoming gradient, the padding row zeroed) so that second derivatives work."""
from graphview.ops.embedding import embedding, embedding_grad, padding_mask
from graphview.ops.math import mul
from graphview.registry import defvjp


def _embedding(g, out, ids, table, padding_idx=None):
    return (None, embedding_grad(g, ids, rows=table.shape[0], padding_idx=padding_idx))


def _embedding_grad(h, out, grad, ids, rows, padding_idx=None):
    mask = padding_mask(rows, padding_idx, h.dtype)
    return (embedding(ids, h if mask is None else mul(h, mask)), None)


defvjp("embedding", _embedding)
defvjp(embedding_grad, _embedding_grad)
