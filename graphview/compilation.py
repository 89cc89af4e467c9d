"""Which kernel Numba is compiling now, for the progress that ``graphview gradcheck`` and ``fit`` show.

Numba compiles each kernel on its first call (a second or more each, then cached on disk), so a first
run can spend tens of seconds compiling with nothing else to show. Numba announces each compilation
through its ``numba:compile`` event; :func:`watching` keeps a stack of the kernels being compiled
(nested compilations stack) and calls back on every change, and :func:`status` is the text both
progress displays show.
"""
from contextlib import contextmanager

from numba.core import event

from graphview import fused_kernels


def kernel_name(function):
    """What progress calls a kernel: its qualified name, or "fused <key>" for a generated fused kernel (each
    is a function named ``kernel`` in a module of its own, so its name alone would read "kernel kernel")."""
    module = getattr(function, "__module__", None) or ""
    source = getattr(getattr(function, "__code__", None), "co_filename", "")
    if module.startswith(fused_kernels.PREFIX):
        return f"fused {module[len(fused_kernels.PREFIX):]}"
    if source.startswith("<graphview fused "):
        return f"fused {source[len('<graphview fused '):].rstrip('>')}"
    return getattr(function, "__qualname__", "?").replace(".<locals>", "")


def status(kernel):
    """The text a progress display shows while ``kernel`` (a name from :func:`kernel_name`) compiles."""
    return f"compiling kernel {kernel} (once; cached)"


class _CompileListener(event.Listener):
    """Pushes the kernel Numba starts compiling onto ``stack``, pops it when done, calls ``changed()``."""

    def __init__(self, stack, changed):
        self.stack, self.changed = stack, changed

    def on_start(self, compile_event):
        dispatcher = compile_event.data.get("dispatcher")
        self.stack.append(kernel_name(getattr(dispatcher, "py_func", None)))
        self.changed()

    def on_end(self, compile_event):
        if self.stack:
            self.stack.pop()
        self.changed()


@contextmanager
def watching(stack, changed):
    """Within the block, ``stack`` (a list) holds the kernels being compiled, innermost last, and
    ``changed()`` is called whenever it changes."""
    with event.install_listener("numba:compile", _CompileListener(stack, changed)):
        yield
