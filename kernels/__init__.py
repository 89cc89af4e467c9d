"""Tensor-level kernels: pure Numba functions over strided arrays.

This package never imports ``graphview``; the graph level finds kernels
through the op registry. Every function here is compiled lazily with
``cache=True`` in nopython mode and without ``fastmath``.

The folder installs as ``graphview_kernels`` (ADR 0015), and its modules import
one another relatively, so it works under that name and never shadows (or is
shadowed by) a user's own ``kernels`` module.
"""
from . import caching  # noqa: F401  (every kernel's cache is stamped with all kernel files, ADR 0003)
