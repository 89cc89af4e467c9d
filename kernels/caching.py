"""Numba's cache for the kernels, stamped with every kernel file (ADR 0003).

Numba stamps a cached function with its own source file only, so a kernel that calls a helper from
another file here (the recurrent kernels' BLAS wrapper and activations, conv's SMALL) would keep running
stale code after that file changed. Every cache locator Numba has is wrapped, for functions defined in
this package, so that its stamp also holds a digest of all this package's files: an edit to any of them
recompiles every kernel on next use (seconds, and only after an edit). Other code caches as before.
"""
import functools
import hashlib
import os

from numba.core import caching

DIRECTORY = os.path.dirname(os.path.abspath(__file__))


def package_stamp(directory=DIRECTORY):
    """A digest of the names and contents of every .py file in ``directory``."""
    digest = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            digest.update(name.encode() + b"\0")
            with open(os.path.join(directory, name), "rb") as source:
                digest.update(source.read())
    return digest.hexdigest()


_stamp = functools.lru_cache(maxsize=None)(package_stamp)


def _stamped(locator):
    """``locator`` (a Numba cache locator class) for functions in this package, its stamp with the package's."""
    class Stamped(locator):
        @classmethod
        def from_function(cls, py_func, py_file):
            if os.path.dirname(os.path.abspath(py_file)) != DIRECTORY:
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), _stamp()
    Stamped.__name__ = Stamped.__qualname__ = f"Kernels{locator.__name__}"
    return Stamped


def install():
    """Put the stamped locators before Numba's own (once; importing this package does it). Older Numba names
    the class ``_CacheImpl``; a Numba with neither keeps its own locators (and ADR 0003's caveat)."""
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if classes is not None and not any(getattr(cls, "__module__", None) == __name__ for cls in classes):
        impl._locator_classes = [_stamped(cls) for cls in classes] + list(classes)


install()
