"""Axis layouts and dims: layout views (dp), the dims side table and the view ops they are built from.

This package's ``__init__`` imports nothing, so that importing one of its modules (``table``, the dims
store building uses; ``dimrules``, the per-op dims rules) does not pull in the others.
"""
