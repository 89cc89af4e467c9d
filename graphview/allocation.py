"""One allocation at import that lets glibc reuse memory for arrays of up to 16 MiB (ADR 0026).

glibc serves a request above its mmap threshold (128 KiB at start) with fresh pages from ``mmap`` and
returns them on free, so every run that allocates and frees arrays of a few MB (the packed result of an
LSTM, a convolution's columns, their gradients) pays a page fault per 4 KiB page: about 1,100 per LSTM
training step at the benchmark's shapes, 30% of its time. glibc raises the threshold by itself to the
size of the first mmap'd block that is freed (up to 32 MiB), which is why the same step is faster in a
process where PyTorch has run once. graphview frees one such block of 16 MiB when it is imported, so its
own temporaries of up to 16 MiB come from the heap and are reused. Nothing is touched or kept; other
allocators and platforms ignore it.
"""
import os

import numpy as np

from graphview.config import OFF

BLOCK = 16 * 1024 * 1024


def raise_mmap_threshold():
    """Allocate and free one untouched 16 MiB block (unless GRAPHVIEW_MMAP_THRESHOLD is 0, false, off or no,
    as GRAPHVIEW_FUSION reads them)."""
    if os.environ.get("GRAPHVIEW_MMAP_THRESHOLD", "1").strip().lower() in OFF:
        return
    block = np.empty(BLOCK, np.uint8)
    del block


raise_mmap_threshold()
