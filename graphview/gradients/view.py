"""Gradient rules of create_view, scatter_view, gather and scatter_add (graphview/ops/view.py)."""
from graphview.ops.view import create_view_op, gather, scatter_add, scatter_view
from graphview.registry import defvjp


def _create_view(grad, out, x, *dynamic, descriptors):
    # The gradient of a view is the incoming gradient scattered into zeros of x's
    # shape (SameDiff re-viewed the gradient instead, which is wrong).
    return (scatter_view(grad, x, *dynamic, descriptors=descriptors),) + (None,) * len(dynamic)


defvjp(create_view_op, _create_view)
defvjp(scatter_view, lambda grad, out, values, like, *dynamic, descriptors:
       (create_view_op(grad, *dynamic, descriptors=descriptors), None) + (None,) * len(dynamic))
defvjp("gather", lambda grad, out, x, indices, axis=0: (scatter_add(grad, indices, x, axis=axis), None))
defvjp(scatter_add, lambda grad, out, values, indices, like, axis=0: (gather(grad, indices, axis=axis), None, None))
