"""Gradient rules, one module per op family (ADR 0017): importing this package gives every built-in op
its rule with ``defvjp``. ``graphview/__init__`` imports it right after ``graphview.ops``, so no user
code runs before the rules are registered; the forward ops in ``graphview/ops`` import none of it."""
from graphview.gradients import math, reduce, shape, view, inplace, nn, loss, linalg, masked, layouts  # noqa: F401
