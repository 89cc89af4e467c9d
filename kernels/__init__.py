"""Tensor-level kernels: pure Numba functions over strided arrays.

This package never imports ``graphview``; the graph level finds kernels
through the op registry. Every function here is compiled lazily with
``cache=True`` in nopython mode and without ``fastmath``.
"""
