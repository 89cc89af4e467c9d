"""Launching element-wise kernels: the flat path or the strided 4-axis path, and threads.

Pure Python: it decides how a compiled kernel is called (which form, in which
chunks) and never computes an element itself; the kernels live in
``kernels.elementwise`` beside the scalar functions they compile.
"""
import numpy as np

from .threads import WORKERS, chunks, pool


class Elementwise:
    """A callable ``kernel(*inputs, out)`` choosing the contiguous or strided form."""

    def __init__(self, name, contiguous, strided, threshold):
        self.name = name
        self.contiguous = contiguous
        self.strided = strided
        # Outputs of at least this many elements are computed in chunks on threads.
        self.threshold = threshold

    def __call__(self, *arrays):
        out = arrays[-1]
        shape = out.shape
        if not out.flags.c_contiguous or not all(fits_contiguous(a, shape) for a in arrays[:-1]):
            for block in four_axis_blocks(arrays):
                self.strided(*block)
            return out
        size = out.size
        if size < self.threshold or WORKERS == 1:
            self.contiguous(*arrays, 0, size)
        else:
            period = min([a.size for a in arrays[:-1] if 1 < a.size < size] or [1])
            futures = [pool().submit(self.contiguous, *arrays, lo * period, hi * period)
                       for lo, hi in chunks(size // period)]
            for future in futures:
                future.result()
        return out

    def __repr__(self):
        return f"<element-wise kernel {self.name}>"


RANK = 4


def fits_contiguous(array, shape):
    """Whether the flat contiguous kernels can read ``array`` for an output of ``shape``."""
    return array.flags.c_contiguous and flat_broadcast(array.shape, shape)


def flat_broadcast(operand, shape):
    """Whether an operand of shape ``operand`` broadcasts to ``shape`` by repeating its flat
    data: the same shape, one element (read as a scalar), or the trailing axes of ``shape``
    (a bias row); the flat kernels then read it with period ``operand``'s size."""
    if operand == shape:
        return True
    size = 1
    for dim in operand:
        size *= dim
    if size == 1:
        return True
    core = tuple(operand)
    while core and core[0] == 1:
        core = core[1:]
    return len(core) <= len(shape) and tuple(shape[len(shape) - len(core):]) == core


def four_axis_blocks(arrays):
    """The operands (inputs broadcast to ``out``, then ``out``) as 4-D strided views.

    Axes of size 1 are dropped and adjacent axes that are contiguous in every
    operand are merged; fewer than four axes are padded with leading size-1
    axes, more are split into one block per index of the leading axes.
    """
    out = arrays[-1]
    operands = [np.broadcast_to(a, out.shape) for a in arrays[:-1]] + [out]
    shape, strides = [], [[] for _ in operands]
    for axis, size in enumerate(out.shape):
        if size == 1:
            continue
        if shape and all(s[-1] == o.strides[axis] * size for s, o in zip(strides, operands)):
            shape[-1] *= size
            for s, o in zip(strides, operands):
                s[-1] = o.strides[axis]
            continue
        shape.append(size)
        for s, o in zip(strides, operands):
            s.append(o.strides[axis])
    lead = max(0, len(shape) - RANK)
    pad = [1] * max(0, RANK - len(shape))
    views = [np.lib.stride_tricks.as_strided(o, shape=pad + shape, strides=[0] * len(pad) + s,
                                             writeable=o is out) for o, s in zip(operands, strides)]
    if not lead:
        return [views]
    return [[v[index] for v in views] for index in np.ndindex(*shape[:lead])]
