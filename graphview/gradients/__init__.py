"""Gradient rules, one module per op family (ADR 0017): importing this package gives every built-in op
its rule with ``defvjp``. ``graphview/__init__`` imports it right after ``graphview.ops``, so no user
code runs before the rules are registered; the forward ops in ``graphview/ops`` import none of it.

Every module here is imported, in name order, so a new family's rules are one new file."""
import importlib
import pkgutil

for _family in sorted(module.name for module in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_family}")
