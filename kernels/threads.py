"""Run a ``nogil`` kernel over chunks of large contiguous arrays on a thread pool.

Kernels are compiled with ``nogil=True`` so the chunks run truly in parallel;
this gives the speed of ``parallel=True`` on large arrays without compiling a
second, slower-to-build parallel variant of every kernel (see ADR 0003).
"""
import os
from concurrent.futures import ThreadPoolExecutor

# Below this many elements a thread hand-off (about 50 us through the pool) costs
# more than it saves. Kernels doing real arithmetic per element (exp, tanh, ...)
# gain from 2**18 elements; streaming kernels that only move memory (add, copy,
# an in-place +=) are bound by memory bandwidth and gain only from 2**21
# (measured on the project's 2-core machines; see ADR 0003).
PARALLEL_THRESHOLD = 1 << 18
STREAMING_THRESHOLD = 1 << 21
WORKERS = max(1, min(os.cpu_count() or 1, 8))

_pool = None


def pool():
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="graphview-kernel")
    return _pool


def chunks(size, parts=WORKERS):
    """Split ``range(size)`` into ``parts`` contiguous (start, stop) pairs."""
    step = -(-size // parts)
    return [(lo, min(lo + step, size)) for lo in range(0, size, step)]


def run_chunked(function, size, *args):
    """Call ``function(lo, hi, *args)`` for each chunk, in parallel when large."""
    if size < PARALLEL_THRESHOLD or WORKERS == 1:
        return [function(0, size, *args)]
    futures = [pool().submit(function, lo, hi, *args) for lo, hi in chunks(size)]
    return [future.result() for future in futures]
