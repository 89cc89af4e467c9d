"""Gradient rules of the pooling ops (graphview/ops/pool.py) and of pad (graphview/ops/pad.py)."""
from graphview.ops.pad import pad_grad, pad_op
from graphview.registry import defvjp


def _pad(grad, out, x, pad_width, mode="constant", value=0.0):
    if mode == "constant":   # a view of the gradient: its centre
        return (grad[tuple(slice(before, -after if after else None) for before, after in pad_width)],)
    return (pad_grad(grad, pad_width=pad_width, mode=mode),)


defvjp(pad_op, _pad)
defvjp(pad_grad, lambda grad, out, g, pad_width, mode="constant": (pad_op(grad, pad_width=pad_width, mode=mode),))
