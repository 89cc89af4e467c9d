"""What the ``graphview`` command shows on stderr while it works: one tqdm bar naming the task at hand.

Numba compiles each kernel on its first call (a second or more each, then cached on
disk), so a first ``graphview gradcheck`` spends most of its time compiling. The bar
says which op is being checked and, through graphview.compilation (Numba's
``numba:compile`` event), which kernel is compiling; a background thread redraws it
twice a second so the elapsed time keeps moving during a long compilation. It appears after ``delay`` seconds and never
with ``--quiet``. When stderr is not a terminal (a CI log, ``make run | tee``) the same
activity is written as plain status lines instead, one every few seconds while anything
changes and one at least every ``HEARTBEAT`` seconds during a long compilation, so no log
stays silent for long. Reports on stdout stay clean either way. See adr/0011-cli-design.md.
"""
import os
import sys
import threading
import time
from contextlib import contextmanager

from tqdm import tqdm

from graphview import compilation

REDRAW = 0.5  # seconds between redraws while nothing else moves the bar
LINE_EVERY = 3.0  # seconds between status lines on a stderr that is not a terminal
HEARTBEAT = 10.0  # a status line at least this often there, even when nothing changed


class Activity:
    """A progress bar with a task (``doing``) and, while Numba compiles, the kernel being compiled."""

    def __init__(self, bar, delay, total=None, unit="it"):
        self.bar, self.delay = bar, delay
        self.task, self.compiling = "", []
        # Counted here too: a disabled tqdm (status lines, --quiet) counts nothing.
        self.done, self.total, self.unit = 0, total, unit

    def doing(self, task):
        """Name what runs next (an op, a variable); shown after the counts."""
        self.task = task
        self._show()

    def update(self, steps=1):
        self.done += steps
        self.bar.update(steps)

    def advance(self, done, total):
        """A ``check_gradients`` ``progress(done, total)`` callback."""
        if self.total != total:
            self.total = self.bar.total = total
            self.redraw()
        self.done = done
        self.bar.update(done - self.bar.n)

    def redraw(self):
        """Draw now, once the bar's delay has passed (tqdm alone redraws only on updates)."""
        if not self.bar.disable and self.bar._time() - self.bar.start_t >= self.delay:
            self.bar.refresh()

    def status(self):
        """The task and the kernel compiling, as the bar's postfix shows them."""
        text = self.task
        if self.compiling:
            text = f"{text}: " if text else ""
            text += compilation.status(self.compiling[-1])
        return text

    def _show(self):
        self.bar.set_postfix_str(self.status(), refresh=False)
        self.redraw()


class StatusLines:
    """Writes an activity's state as plain lines, for a stderr that cannot redraw a bar."""

    def __init__(self, activity, description, stream, delay):
        self.activity, self.description, self.stream, self.delay = activity, description, stream, delay
        self.started = self.printed_at = time.monotonic()
        self.last = None

    def tick(self):
        now = time.monotonic()
        if now - self.started < self.delay:
            return
        current = self.activity
        counts = (f"{current.done}/{current.total} {current.unit}s" if current.total
                  else f"{current.done} {current.unit}s" if current.done else "")
        state = ", ".join(part for part in (counts, self.activity.status()) if part)
        changed = state != self.last
        if (changed and now - self.printed_at >= LINE_EVERY) or now - self.printed_at >= HEARTBEAT \
                or self.last is None:
            self.stream.write(f"{self.description}: {state or 'working'} [{now - self.started:.0f} s]\n")
            self.stream.flush()
            self.printed_at, self.last = now, state


@contextmanager
def activity(show, description, *, total=None, unit="it", delay=1.0):
    """An :class:`Activity` on ``sys.stderr``: ``show`` is "bar", "lines" or None (silent)."""
    bar = tqdm(file=sys.stderr, disable=show != "bar", delay=delay, leave=False, dynamic_ncols=True,
               desc=description, total=total, unit=unit)
    current = Activity(bar, delay, total, unit)
    if not show:
        with bar:
            yield current
        return
    stop = threading.Event()
    lines = StatusLines(current, description, sys.stderr, delay) if show == "lines" else None
    if lines is not None:
        lines.tick()  # with no delay, a first line at once

    def redraw():
        while not stop.wait(REDRAW):
            if lines is not None:
                lines.tick()
            else:
                current.redraw()

    painter = threading.Thread(target=redraw, name="graphview-progress", daemon=True)
    painter.start()
    try:
        with compilation.watching(current.compiling, current._show):
            yield current
    finally:
        stop.set()
        painter.join()
        bar.close()


def shown(args):
    """How ``args`` (a parsed command line) shows progress: "bar" on a terminal, "lines" elsewhere, None with --quiet.

    A terminal that reports no width (``docker run -t``, ``script`` under CI) counts as elsewhere: tqdm
    draws nothing in 0 columns. Under ``mpiexec`` only rank 0 (``args.rank``) shows anything."""
    if getattr(args, "quiet", False) or getattr(args, "rank", 0) != 0:
        return None
    return "bar" if sys.stderr.isatty() and _columns(sys.stderr) > 0 else "lines"


def _columns(stream):
    """The width of the terminal ``stream`` writes to, 0 when it reports none or cannot say."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0
