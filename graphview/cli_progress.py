"""What the ``graphview`` command shows on stderr while it works: one tqdm bar naming the task at hand.

Numba compiles each kernel on its first call (a second or more each, then cached on
disk), so a first ``graphview gradcheck`` spends most of its time compiling. The bar
says which op is being checked and, through Numba's ``numba:compile`` event, which
kernel is compiling; a background thread redraws it twice a second so the elapsed time
keeps moving during a long compilation. It appears after ``delay`` seconds, only when
stderr is a terminal and ``--quiet`` was not given: reports on stdout and stderr that is
piped or captured (CI, tests) stay clean. See adr/0011-cli-design.md.
"""
import sys
import threading
from contextlib import contextmanager

from numba.core import event
from tqdm import tqdm

REDRAW = 0.5  # seconds between redraws while nothing else moves the bar


class Activity:
    """A progress bar with a task (``doing``) and, while Numba compiles, the kernel being compiled."""

    def __init__(self, bar, delay):
        self.bar, self.delay = bar, delay
        self.task, self.compiling = "", []

    def doing(self, task):
        """Name what runs next (an op, a variable); shown after the counts."""
        self.task = task
        self._show()

    def update(self, steps=1):
        self.bar.update(steps)

    def advance(self, done, total):
        """A ``check_gradients`` ``progress(done, total)`` callback."""
        if self.bar.total != total:
            self.bar.total = total
            self.redraw()
        self.bar.update(done - self.bar.n)

    def redraw(self):
        """Draw now, once the bar's delay has passed (tqdm alone redraws only on updates)."""
        if not self.bar.disable and self.bar._time() - self.bar.start_t >= self.delay:
            self.bar.refresh()

    def _show(self):
        text = self.task
        if self.compiling:
            text = f"{text}: " if text else ""
            text += f"compiling kernel {self.compiling[-1]} (once; cached)"
        self.bar.set_postfix_str(text, refresh=False)
        self.redraw()


class _CompileListener(event.Listener):
    """Puts the kernel Numba is compiling into the bar (nested compilations stack)."""

    def __init__(self, activity):
        self.activity = activity

    def on_start(self, compile_event):
        dispatcher = compile_event.data.get("dispatcher")
        function = getattr(dispatcher, "py_func", None)
        name = getattr(function, "__qualname__", "?").replace(".<locals>", "")
        self.activity.compiling.append(name)
        self.activity._show()

    def on_end(self, compile_event):
        if self.activity.compiling:
            self.activity.compiling.pop()
        self.activity._show()


@contextmanager
def activity(show, description, *, total=None, unit="it", delay=1.0):
    """An :class:`Activity` drawn on ``sys.stderr`` when ``show``; a silent one otherwise."""
    bar = tqdm(file=sys.stderr, disable=not show, delay=delay, leave=False, dynamic_ncols=True,
               desc=description, total=total, unit=unit)
    current = Activity(bar, delay)
    if not show:
        with bar:
            yield current
        return
    stop = threading.Event()

    def redraw():
        while not stop.wait(REDRAW):
            current.redraw()

    painter = threading.Thread(target=redraw, name="graphview-progress", daemon=True)
    painter.start()
    try:
        with event.install_listener("numba:compile", _CompileListener(current)):
            yield current
    finally:
        stop.set()
        painter.join()
        bar.close()


def shown(args):
    """Whether ``args`` (a parsed command line) may draw progress: stderr is a terminal and no ``--quiet``."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()
