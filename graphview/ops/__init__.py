"""Built-in ops (forward only), one module per family; importing this package registers them all. Their
gradient rules are registered by graphview.gradients, which graphview/__init__ imports next.

A new family is a new module here and its name in this list (each module imports what it builds on at
module level, so the order is only for reading)."""
from graphview.ops import math, reduce, shape, view, inplace, linalg, random  # noqa: F401
from graphview.ops import nn, activations, embedding, loss, reduction_losses, masked, masked_loss  # noqa: F401
from graphview.ops import conv, pool, pad, norm, recurrent, recurrent_backward, attention, ctc  # noqa: F401  (images, sequences)
from graphview.layouts import ops as layout_ops  # noqa: F401  (the layout views' ops, ADR 0014)
