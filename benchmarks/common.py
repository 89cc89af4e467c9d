"""Timing helpers shared by the benchmark scripts: best-of-N timing (of one function, or of several
taking turns) and a plain table."""
import importlib
import time


def best_of_turns(functions, repeat, number=1, warmup=1, warmup_per_try=0, clock=time.perf_counter):
    """The best time per call of each function, in seconds: the least mean of ``number`` calls over
    ``repeat`` tries. The functions take turns, one try each, so that a busy machine slows them alike.

    Each function is first called ``warmup`` times, untimed, and ``warmup_per_try`` more times just
    before each of its tries (so that a try starts on its own data in the caches, not on the last
    function's). ``clock`` is what is timed: the wall clock by default, or e.g. ``time.thread_time``.
    """
    for function in functions:
        for _ in range(warmup):
            function()
    best = [float("inf")] * len(functions)
    for _ in range(repeat):
        for index, function in enumerate(functions):
            for _ in range(warmup_per_try):
                function()
            start = clock()
            for _ in range(number):
                function()
            best[index] = min(best[index], (clock() - start) / number)
    return best


def best_time(function, repeat=5, number=1):
    """The best wall time of ``number`` calls, over ``repeat`` tries, in seconds per call (after one
    warm-up call)."""
    return best_of_turns([function], repeat, number)[0]


def optional(module):
    """The module if it is installed, else None (PyTorch and JAX are optional comparisons)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def table(rows, header):
    """Rows of strings as an aligned text table."""
    rows = [tuple(header)] + [tuple(str(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
