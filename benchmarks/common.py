"""Timing helpers shared by the benchmark scripts: best-of-N timing and a plain table."""
import importlib
import time


def best_time(function, repeat=5, number=1):
    """The best wall time of ``number`` calls, over ``repeat`` tries, in seconds per call."""
    function()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function()
        best = min(best, (time.perf_counter() - start) / number)
    return best


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
