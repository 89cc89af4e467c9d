"""Built-in ops, one file per family; importing this package registers them all."""
from graphview.ops import math, reduce, nn, linalg, shape, loss, random  # noqa: F401
from graphview.ops import view, inplace  # noqa: F401,E402  (views engineer: ADR 0008, 0009)
from graphview.ops import masked  # noqa: F401,E402  (layouts engineer: issue 8)
from graphview.layouts import ops as layout_ops  # noqa: F401,E402  (layouts engineer: issue 8)
