"""Gradient rules of the pooling ops (graphview/ops/pool.py) and of pad (graphview/ops/pad.py)."""
from graphview.ops import pool
from graphview.ops.pad import pad_grad, pad_op
from graphview.registry import defvjp


def _pad(grad, out, x, pad_width, mode="constant", value=0.0):
    if mode == "constant":   # a view of the gradient: its centre
        return (grad[tuple(slice(before, -after if after else None) for before, after in pad_width)],)
    return (pad_grad(grad, pad_width=pad_width, mode=mode),)


defvjp(pad_op, _pad)
defvjp(pad_grad, lambda grad, out, g, pad_width, mode="constant": (pad_op(grad, pad_width=pad_width, mode=mode),))


def _pool_rules(forward, grad_op, select=None, avg=False):
    """forward's gradient is grad_op(x, grad); grad_op's (in grad) is select, or forward itself for avg."""
    defvjp(forward, lambda grad, out, x, **attrs: (grad_op(x, grad, **attrs),))
    back = forward if avg else select
    defvjp(grad_op, lambda grad, out, x, g, **attrs: (None, back(grad, **attrs) if avg else back(x, grad, **attrs)))
    if select is not None:
        defvjp(select, lambda grad, out, x, values, **attrs: (None, grad_op(x, grad, **attrs)))


_pool_rules(pool.max_pool1d_op, pool.max_pool1d_grad, pool.max_pool1d_select)
_pool_rules(pool.max_pool2d_op, pool.max_pool2d_grad, pool.max_pool2d_select)
_pool_rules(pool.avg_pool1d_op, pool.avg_pool1d_grad, avg=True)
_pool_rules(pool.avg_pool2d_op, pool.avg_pool2d_grad, avg=True)
_pool_rules(pool.global_avg_pool_op, pool.global_avg_pool_grad, avg=True)
