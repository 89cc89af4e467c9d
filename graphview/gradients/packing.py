"""Gradient rules of pack_axes and unpack_axis (graphview/layouts/ops.py): each is the other.

Both move entries without changing them, so the gradient moves the gradient's entries back; the
padding of either output is a constant 0, so the padding of the input gets exactly 0. The lengths
(and unpack_axis's ``like``, read for its shape only) get no gradient.
"""
from graphview.layouts.ops import pack_axes, unpack_axis
from graphview.registry import defvjp


def _pack(g, out, x, *lengths, start, stop, batch_axis, dynamic):
    out_batch = batch_axis if batch_axis < start else batch_axis - (stop - start - 1)
    grad = unpack_axis(g, x, *lengths, axis=start, like_start=start, count=stop - start, batch_axis=out_batch,
                       dynamic=dynamic)
    return (grad,) + (None,) * len(lengths)


def _unpack(g, out, y, like, *lengths, axis, like_start, count, batch_axis, dynamic):
    out_batch = batch_axis if batch_axis < axis else batch_axis + count - 1
    grad = pack_axes(g, *lengths, start=axis, stop=axis + count, batch_axis=out_batch, dynamic=dynamic)
    return (grad, None) + (None,) * len(lengths)


defvjp(pack_axes, _pack)
defvjp(unpack_axis, _unpack)
