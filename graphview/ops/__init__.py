"""Built-in ops (forward only), one module per family; importing this package registers them all. Their
gradient rules are registered by graphview.gradients, which graphview/__init__ imports next.

Every module here is imported, in name order, so a new family is one new file (each module imports
what it builds on at module level, so the order does not matter)."""
import importlib
import pkgutil

for _family in sorted(module.name for module in pkgutil.iter_modules(__path__)):
    importlib.import_module(f"{__name__}.{_family}")
importlib.import_module("graphview.layouts.ops")   # the layout views' ops (ADR 0014)
