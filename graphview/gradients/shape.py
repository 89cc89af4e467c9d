"""Gradient rules of the shape ops (graphview/ops/shape.py), those the rules are written with included."""
import numpy as np

from graphview.gradients.unbroadcast import unbroadcast
from graphview.ops.shape import (broadcast_like, broadcast_like_op, concat, concat_part, normalize_permutation,
                                 permute_op, reshape_like, select_index, stack)
from graphview.registry import defvjp
from graphview.shapes import normalize_axis


def _permute(g, out, x, perm=None):
    order = normalize_permutation(x.rank, perm)
    return (permute_op(g, perm=tuple(int(i) for i in np.argsort(order))),)


def _zeros_like(x, dtype):
    """Zeros of x's shape (known or not) in ``dtype``: a broadcast view of one scalar."""
    return broadcast_like_op(x.graph.constant_like(0.0, dtype), x)


def _concat_part(grad, out, g, *inputs, axis=0, index=0):
    # concat_part is linear in g: its transpose puts grad back in place, zeros elsewhere.
    parts = [grad if i == index else _zeros_like(x, grad.dtype) for i, x in enumerate(inputs)]
    return (concat(parts, axis=axis),) + (None,) * len(inputs)


def _select_index(grad, out, g, axis=0, index=0):
    # select_index is linear in g: its transpose stacks grad at ``index`` among zeros.
    count = g.shape[normalize_axis(axis, len(g.shape))]
    parts = [grad if i == index else _zeros_like(grad, grad.dtype) for i in range(count)]
    return (stack(parts, axis=axis),)


defvjp("reshape", lambda g, out, x, shape: (reshape_like(g, x),))
defvjp("permute", _permute)
defvjp("squeeze", lambda g, out, x, axis=None: (reshape_like(g, x),))
defvjp("expand_dims", lambda g, out, x, axis: (reshape_like(g, x),))
defvjp("broadcast_to", lambda g, out, x, shape: (unbroadcast(g, x),))
defvjp("concat", lambda g, out, *inputs, axis=0: tuple(concat_part(g, *inputs, axis=axis, index=i)
                                                         for i in range(len(inputs))))
defvjp("stack", lambda g, out, *inputs, axis=0: tuple(select_index(g, axis=axis, index=i) for i in range(len(inputs))))
defvjp("reduce_to", lambda g, out, x, like: (broadcast_like(g, x), None))
defvjp("broadcast_like", lambda g, out, x, like: (unbroadcast(g, x), None))
defvjp(reshape_like, lambda g, out, x, like: (reshape_like(g, x), None))
defvjp(concat_part, _concat_part)
defvjp(select_index, _select_index)
