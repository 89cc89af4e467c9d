"""Built-in ops, one file per family; importing this package registers them all."""
from graphview.ops import math, reduce, nn, linalg, shape, loss, random  # noqa: F401
