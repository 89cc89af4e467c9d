"""How a gradient is summed back to an input's shape after broadcasting: decided once, here."""
from graphview.ops.shape import reduce_to


def unbroadcast(grad, like, out=None):
    """``grad`` summed back to ``like``'s shape (``reduce_to``), or ``grad`` itself when no sum is needed:
    when ``like``, an input of the broadcasting op ``out``, provably has ``out``'s shape at run time (a
    node would cost a pass over the gradient), or (``reduce_to``'s own shortcut) when ``grad`` has
    ``like``'s shape statically."""
    if out is not None and keeps_output_shape(like, out):
        return grad
    return reduce_to(grad, like)


def keeps_output_shape(like, out):
    """True when input ``like`` of ``out``'s broadcasting op has ``out``'s shape whatever is fed: equal
    static shapes, and along each unknown size every other input has size 1 or no such axis."""
    if len(like.shape) != len(out.shape) or any(a != b for a, b in zip(like.shape, out.shape)):
        return False
    rank = len(out.shape)
    partners = [out.graph.node(name).shape for name in out.node.inputs if name != like.name]
    for axis, size in enumerate(like.shape):
        if size is None:
            for shape in partners:
                offset = axis - (rank - len(shape))
                if offset >= 0 and shape[offset] != 1:
                    return False
    return True
