"""Axis layouts and dims: layout views (dp), the dims side table and the view ops they are built from.

This package's ``__init__`` imports nothing on purpose: ``graphview.building``
imports :mod:`graphview.layouts.table` while ops are still being registered.
"""
