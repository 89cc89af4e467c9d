"""What a gradient rule may ask about the gradient graph being built: whether an input needs its gradient.

autodiff sets the names of the nodes whose gradients are needed (a loss depends on them and they depend on
a variable asked for) while it calls the rules; ``needs_gradient`` reads them, as PyTorch's
``ctx.needs_input_grad`` does, so that a rule can skip work that only an unneeded gradient takes (the
recurrent ops' product for dh0 when h0 is a constant).
"""
import contextlib
import contextvars

from graphview.errors import GraphviewError
from graphview.variable import Variable

_NEEDED = contextvars.ContextVar("graphview_gradients_needed", default=None)


def needs_gradient(variable):
    """Inside a gradient rule: whether the input ``variable`` (a graph variable) needs its gradient in the
    gradient graph being built. True outside gradient rules."""
    if not isinstance(variable, Variable):
        raise GraphviewError(f"needs_gradient takes one of the op's inputs, a graph variable, not "
                             f"{type(variable).__name__}")
    needed = _NEEDED.get()
    return needed is None or variable.name in needed


@contextlib.contextmanager
def gradients_needed(names):
    """While autodiff calls gradient rules: ``names`` are the nodes whose gradients are needed."""
    token = _NEEDED.set(frozenset(names))
    try:
        yield
    finally:
        _NEEDED.reset(token)
