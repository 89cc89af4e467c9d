"""Gradient rules of the layout view ops (graphview/layouts/ops.py): each reshapes the gradient back."""
from graphview.layouts.ops import merge_axes, merge_axes_copy, split_axis
from graphview.ops.shape import reshape_like
from graphview.registry import defvjp


def _merge(g, out, x, start, stop):
    return (reshape_like(g, x),)


defvjp(merge_axes, _merge)
defvjp(merge_axes_copy, _merge)
defvjp(split_axis, lambda g, out, x, axis, sizes: (reshape_like(g, x),))
