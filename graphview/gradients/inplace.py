"""Gradient rules of the in-place ops (graphview/ops/inplace.py): each differentiates as the functional
scatter it denotes."""
from graphview import dtypes
from graphview.gradients.unbroadcast import unbroadcast
from graphview.ops.inplace import OPS
from graphview.ops.math import div, mul, neg
from graphview.ops.view import count_dynamic, create_view_op
from graphview.registry import defvjp


def _view_of(x, chain, dynamic):
    """x seen through the chain of create_views (the same region the op wrote)."""
    dynamic = list(dynamic)
    for entries in chain:
        count = count_dynamic(entries)
        x = create_view_op(x, *dynamic[:count], descriptors=entries)
        dynamic = dynamic[count:]
    return x


def _assign(grad, out, base, value, *dynamic, chain):
    zero = grad.graph.constant_like(0.0 if dtypes.is_float(grad.dtype) else 0, grad.dtype)
    return (OPS["assign_"](grad, zero, *dynamic, chain=chain),
            unbroadcast(_view_of(grad, chain, dynamic), value)) + (None,) * len(dynamic)


def _add(grad, out, base, value, *dynamic, chain):
    return (grad, unbroadcast(_view_of(grad, chain, dynamic), value)) + (None,) * len(dynamic)


def _sub(grad, out, base, value, *dynamic, chain):
    return (grad, unbroadcast(neg(_view_of(grad, chain, dynamic)), value)) + (None,) * len(dynamic)


def _mul(grad, out, base, value, *dynamic, chain):
    return (OPS["mul_"](grad, value, *dynamic, chain=chain),
            unbroadcast(mul(_view_of(grad, chain, dynamic), _view_of(base, chain, dynamic)), value)) \
        + (None,) * len(dynamic)


def _div(grad, out, base, value, *dynamic, chain):
    # d(b / v)/dv = -b / v**2 = -(b / v) / v, and b / v is the written region of out.
    region = div(_view_of(out, chain, dynamic), value)
    return (OPS["div_"](grad, value, *dynamic, chain=chain),
            unbroadcast(neg(mul(_view_of(grad, chain, dynamic), region)), value)) + (None,) * len(dynamic)


defvjp(OPS["assign_"], _assign)
defvjp(OPS["add_"], _add)
defvjp(OPS["sub_"], _sub)
defvjp(OPS["mul_"], _mul)
defvjp(OPS["div_"], _div)
