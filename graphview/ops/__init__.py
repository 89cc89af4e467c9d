"""Built-in ops (forward only), one file per family; importing this package registers them all. Their
gradient rules are registered by graphview.gradients, which graphview/__init__ imports next."""
from graphview.ops import math, reduce, nn, linalg, shape, loss, random  # noqa: F401
from graphview.ops import view, inplace  # noqa: F401,E402  (ADRs 0008, 0009)
from graphview.ops import masked  # noqa: F401,E402  (ADR 0014)
from graphview.layouts import ops as layout_ops  # noqa: F401,E402  (ADR 0014)
