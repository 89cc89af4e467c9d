"""Gradient rules, one module per op family (ADR 0017): importing this package gives every built-in op
its rule with ``defvjp``. ``graphview/__init__`` imports it right after ``graphview.ops``, so no user
code runs before the rules are registered; the forward ops in ``graphview/ops`` import none of it.

A new family's rules are a new module here and its name in this list."""
from graphview.gradients import math, reduce, shape, view, inplace, linalg, layouts, packing  # noqa: F401
from graphview.gradients import nn, activations, embedding, loss, reduction_losses, masked  # noqa: F401
from graphview.gradients import conv, pool, norm, recurrent, ctc  # noqa: F401  (images, sequences)
