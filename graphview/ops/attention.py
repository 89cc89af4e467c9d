"""Attention: ``g.nn.scaled_dot_product_attention``, built from matmul, softmax and where (ADR 0021).

It is a composition, not an op of its own, so its gradient (and the second one) comes from the rules of
the ops it is built from, and a key dim with lengths masks it through the masked softmax: the scores
``q @ k^T`` carry the query dim and the key dim (matmul's dims rule), and a softmax over a key dim with
lengths is built as ``masked_softmax``. The one op declared here is the causal mask.
``g.nn.multi_head_attention`` is the functional form (weights given, as PyTorch's
``F.multi_head_attention_forward``); a layer that owns its weights belongs to the layers (issue 17).
"""
import math

import numpy as np

from graphview import dtypes
from graphview.dims import batch_dim
from graphview.errors import DTypeError, OpArgumentError, ShapeError
from graphview.layouts import table
from graphview.layouts.ops import merge_axes_copy, split_axis
from graphview.ops.linalg import matmul, transpose
from graphview.ops.masked import mask_of
from graphview.ops.math import add, mul, ne, where
from graphview.ops.nn import softmax
from graphview.ops.reduce import max as reduce_max
from graphview.ops.shape import permute
from graphview.registry import defop, public
from graphview.testing import Sample
from graphview_kernels import attention as kernels


def _causal_shape(like):
    if len(like) < 2:
        raise ShapeError(f"causal_mask needs an input of rank >= 2 (queries x keys), got {like}")
    return tuple(like[-2:])


def _causal_kernel(like, out):
    kernels.causal_mask(out)


def _causal_reference(like):
    return np.tril(np.ones(like.shape[-2:], bool))


def _causal_samples():
    r = np.random.default_rng(90)
    return [Sample((r.normal(size=(2, 3, 4)),), label="more keys"), Sample((r.normal(size=(5, 2)),), label="more queries"),
            Sample((np.zeros((0, 3)),), label="no query")]


causal_mask = defop("causal_mask", shape=_causal_shape, kernel=_causal_kernel, dtype=lambda like: dtypes.BOOL,
                    differentiable=False, accepts=dtypes.ALL, samples=_causal_samples, reference=_causal_reference,
                    family="nn", doc="The (queries, keys) bool mask j <= i of like's last two axes (PyTorch's "
                                     "is_causal): True where a query may attend.")


def _check(q, k, v, mask):
    what = "scaled_dot_product_attention"
    for label, x in (("q", q), ("k", k), ("v", v)):
        if len(x.shape) < 2:
            raise ShapeError(f"{what}: {label} {x.name!r} has shape {x.shape}; it needs (..., length, features)")
        if not dtypes.is_float(x.dtype):
            raise DTypeError(f"{what}: {label} {x.name!r} is {x.dtype.name}; q, k and v must be floats")
    if None not in (q.shape[-1], k.shape[-1]) and q.shape[-1] != k.shape[-1]:
        raise ShapeError(f"{what}: q {q.name!r} has {q.shape[-1]} features but k {k.name!r} has {k.shape[-1]} "
                         f"(shapes {q.shape} and {k.shape})")
    if None not in (k.shape[-2], v.shape[-2]) and k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{what}: k {k.name!r} has {k.shape[-2]} keys but v {v.name!r} has {v.shape[-2]} "
                         f"(shapes {k.shape} and {v.shape})")
    if mask is not None and not (mask.dtype == np.bool_ or dtypes.is_float(mask.dtype)):
        raise DTypeError(f"{what}: mask {mask.name!r} is {mask.dtype.name}; it must be bool (True: attend) or "
                         "float (added to the scores)")


def _padding_zeroed(x):
    """x with the padding of its length axis (-2) set to 0 when that dim has lengths. The masked softmax
    gives padded keys weight 0, but 0 * NaN is still NaN: a NaN in v's padding would reach the output,
    and one in q's or k's padding the gradients of every entry (through dscores @ k and dscores^T @ q)."""
    dims = table.dims_of(x)
    dim = dims[-2]
    if dim is None or dim.size is not None or batch_dim not in dims or table.lengths_of(x.graph, dim) is None:
        return x
    return where(mask_of(x, dim), x, 0.0)


def _scores_dims(scores, q, k):
    """Tag the scores' axes matmul's dims rule leaves unknown: the key axis from k (when q has fewer axes)
    and each leading axis from k's (aligned from the end, as broadcasting aligns them) where q has no dim
    there. So keys with lengths are masked also when q is a plain placeholder (cross-attention): the
    scores' batch axis is the one that broadcasts against k's."""
    dims, q_dims, k_dims = list(table.dims_of(scores)), table.dims_of(q), table.dims_of(k)
    wanted = [None] * (len(dims) - len(q_dims)) + list(q_dims[:-2]) + [q_dims[-2], k_dims[-2]]
    lead = len(dims) - len(k_dims)
    for axis, dim in enumerate(k_dims[:-2]):
        if wanted[lead + axis] is None and dim is not None and k.shape[axis] in (None, scores.shape[lead + axis]):
            wanted[lead + axis] = dim
    merged = tuple(d if d is not None else w for d, w in zip(dims, wanted))
    if merged != tuple(dims):
        table.set_dims(scores, merged)
    return scores


@public("nn")
def scaled_dot_product_attention(q, k, v, mask=None, causal=False, scale=None, *, name=None):
    """softmax(q @ k^T * scale + mask) @ v, as torch.nn.functional.scaled_dot_product_attention.

    q is (..., Lq, E), k (..., Lk, E), v (..., Lk, Ev); the leading axes broadcast. ``scale`` defaults
    to 1 / sqrt(E). ``mask`` broadcasts to (..., Lq, Lk): bool (True: attend; a row with no True gives
    0, as PyTorch 2.x's safe softmax) or float (added to the scores); a NumPy mask becomes an auto-named
    constant. ``causal=True`` lets query i attend keys j <= i (PyTorch's is_causal; here it may be
    combined with ``mask``). When k's key axis is a gv.Dim with
    lengths, padded keys get weight 0 (the softmax over them is masked) and v's padding is not read; the
    padding of q's and k's length dims is read as 0, so NaN there leaves values and gradients finite.
    When q has no dims (a plain placeholder), the scores take k's batch dim on the axis that broadcasts
    against it, so k's lengths still mask.
    """
    if isinstance(mask, (np.ndarray, list, tuple, bool, np.bool_)):
        mask = q.graph.constant_like(np.asarray(mask), None)
    _check(q, k, v, mask)
    if scale is None:
        if q.shape[-1] is None:
            raise ShapeError(f"scaled_dot_product_attention: q {q.name!r} has an unknown number of features "
                             f"(shape {q.shape}); give scale=")
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    rank = len(k.shape)
    keys_last = permute(_padding_zeroed(k), tuple(range(rank - 2)) + (rank - 1, rank - 2))
    scores = mul(_scores_dims(matmul(_padding_zeroed(q), keys_last), q, k), float(scale))
    if causal:
        scores = where(causal_mask(scores), scores, -np.inf)
    if mask is not None:
        scores = where(mask, scores, -np.inf) if mask.dtype == np.bool_ else add(scores, mask)
    if mask is None:
        weights = softmax(scores, axis=-1)
    else:   # PyTorch's safe softmax: a row the mask leaves nothing to attend to gets weight 0, gradient 0
        attends = ne(reduce_max(scores, axis=-1, keepdims=True), -np.inf)
        weights = where(attends, softmax(where(attends, scores, 0.0), axis=-1), 0.0)
    return matmul(weights, _padding_zeroed(v), name=name)


def _projected(x, weight, bias, heads, what):
    """x @ weight^T (+ bias) split into heads: (..., L, D) -> (..., heads, L, D / heads), dims kept."""
    projected = matmul(x, transpose(weight))
    if bias is not None:
        projected = add(projected, bias)
    size = projected.shape[-1]
    if size is not None and size % heads:
        raise ShapeError(f"multi_head_attention: {what} projects to {size} features, which {heads} heads do not "
                         f"divide")
    dims = table.dims_of(x)
    rank = len(projected.shape)
    split = split_axis(projected, axis=rank - 1, sizes=(heads, -1))
    table.set_dims(split, tuple(dims[:-1]) + (None, None))
    return permute(split, tuple(range(rank - 2)) + (rank - 1, rank - 2, rank))


@public("nn")
def multi_head_attention(query, key, value, num_heads, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None,
                         mask=None, causal=False, *, name=None):
    """PyTorch's multi-head attention (``nn.MultiheadAttention(batch_first=True)``) with its weights given:
    query (..., Lq, D), key (..., Lk, Dk), value (..., Lk, Dv); ``w_q``, ``w_k``, ``w_v`` (D, D / Dk / Dv)
    and ``w_o`` (D, D) as ``nn.Linear`` weights (out, in), biases (D,). Each head is
    :func:`scaled_dot_product_attention` over D / num_heads features; ``mask`` (bool or float) broadcasts
    to (..., num_heads, Lq, Lk); a key dim with lengths masks every head (PyTorch's key_padding_mask).

    BEWARE: a bool ``mask`` here means True = ATTEND (as ``F.scaled_dot_product_attention``), the
    OPPOSITE of ``nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` (True = blocked):
    pass ``~attn_mask`` to replicate a PyTorch call. A float mask is added to the scores in both."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, (int, np.integer)) or num_heads < 1:
        raise OpArgumentError(f"multi_head_attention: num_heads must be an int >= 1, not {num_heads!r}")
    heads = int(num_heads)
    q = _projected(query, w_q, b_q, heads, "query")
    k = _projected(key, w_k, b_k, heads, "key")
    v = _projected(value, w_v, b_v, heads, "value")
    attended = scaled_dot_product_attention(q, k, v, mask=mask, causal=causal)
    rank = len(attended.shape)
    together = permute(attended, tuple(range(rank - 3)) + (rank - 2, rank - 3, rank - 1))
    merged = merge_axes_copy(together, start=rank - 2, stop=rank)
    table.set_dims(merged, tuple(table.dims_of(query)[:-1]) + (None,))
    if b_o is None:
        return matmul(merged, transpose(w_o), name=name)
    return add(matmul(merged, transpose(w_o)), b_o, name=name)
