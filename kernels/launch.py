"""Launching element-wise kernels: the flat path or the strided 4-axis path, and threads.

Pure Python: it decides how a compiled kernel is called (which form, in which
chunks) and never computes an element itself; the kernels live in
``kernels.elementwise`` beside the scalar functions they compile.

Each form is compiled once per combination of dtypes, whatever the operands'
rank, layout and read-only flags (:class:`Signatures`): the flat form for 1-D
C-contiguous arrays (the launcher passes ``a.ravel()``, a view), the strided
form for 4-D arrays of any layout, inputs typed read-only and the output
writable. Every other combination of Numba array types (rank 0 to 4, 'C', 'F'
or 'A', read-only or not) would be a specialization of its own, compiled on
first use.
"""
import numpy as np
from numba import from_dtype, typeof, types

from .threads import WORKERS, chunks, pool


def array_type(dtype, ndim, layout, readonly=False):
    """The Numba type of an array of ``dtype`` (a NumPy dtype) with ``ndim`` axes and ``layout``."""
    return types.Array(from_dtype(dtype), ndim, layout, readonly=readonly)


class Signatures:
    """``signatures(dtypes)``: the compiled entry point of ``dispatcher`` for arrays of these dtypes.

    The arrays (inputs, then the output; ``arrays`` of them) have ``ndim`` axes and ``layout``; the
    inputs are typed read-only, the output writable; ``scalars`` are the Numba types of the arguments
    after them. One signature is compiled (or loaded from Numba's cache) per dtype combination and
    called through its entry point, which skips Numba's per-call type dispatch. The entry point
    trusts its arguments' rank and dtype: callers pass exactly the dtypes they looked up and arrays
    of ``ndim`` axes.
    """

    def __init__(self, dispatcher, ndim, layout, scalars=(), readonly=None):
        self.dispatcher = dispatcher
        self.ndim, self.layout, self.scalars = ndim, layout, tuple(scalars)
        self.readonly = readonly          # None: every array but the last is read-only
        self.entries = {}

    def __call__(self, dtypes):
        entry = self.entries.get(dtypes)
        if entry is None:
            entry = self.entries[dtypes] = self.dispatcher.compile(self.signature(dtypes))
        return entry

    def signature(self, dtypes):
        readonly = self.readonly if self.readonly is not None else [True] * (len(dtypes) - 1) + [False]
        return tuple(array_type(d, self.ndim, self.layout, r) for d, r in zip(dtypes, readonly)) + self.scalars


class AnyLayout:
    """``kernel(*args)`` for a kernel whose array arguments may have any strides: compiled once per
    combination of dtypes, ranks and scalar types, every array typed 'A' (read-only but for the
    positions in ``writes``), rather than once per layout ('C', 'F' or 'A') and read-only flag of
    each array. Called through the entry point, like :class:`Signatures`."""

    def __init__(self, dispatcher, writes):
        self.dispatcher = dispatcher
        self.writes = frozenset(writes)
        self.entries = {}

    def __call__(self, *args):
        key = tuple((a.dtype, a.ndim) if isinstance(a, np.ndarray) else type(a) for a in args)
        entry = self.entries.get(key)
        if entry is None:
            signature = tuple(array_type(a.dtype, a.ndim, "A", readonly=p not in self.writes)
                              if isinstance(a, np.ndarray) else typeof(a) for p, a in enumerate(args))
            entry = self.entries[key] = self.dispatcher.compile(signature)
        for position in self.writes:
            writable(args[position])
        return entry(*args)


BOUNDS = (types.int64, types.int64)


def writable(array):
    """Refuse a read-only output: the entry points, typed for a writable one, would not."""
    if not array.flags.writeable:
        raise ValueError("a kernel cannot write its output: the array is read-only")


def flat(array):
    """A C-contiguous array as the 1-D view the flat kernels take."""
    return array if array.ndim == 1 else array.ravel()


class Elementwise:
    """A callable ``kernel(*inputs, out)`` choosing the contiguous or strided form.

    ``contiguous(*inputs, out, lo, hi)`` calls the flat form directly (C-contiguous operands of any
    rank); ``flat_form`` and ``strided_form`` are the two compiled forms.
    """

    def __init__(self, name, contiguous, strided, threshold, arity, broadcasts=True):
        self.name = name
        self.arity = arity
        self.flat_form = Signatures(contiguous, 1, "C", BOUNDS)
        self.strided_form = Signatures(strided, RANK, "A")
        # Outputs of at least this many elements are computed in chunks on threads.
        self.threshold = threshold
        # Whether the flat form repeats an input of one element or a row itself; when not (unary ops
        # but copies and casts: their input has the output's shape but in direct calls), the launcher
        # repeats such an input with NumPy first.
        self.broadcasts = broadcasts
        self.contiguous = _flat_caller(self.flat_form, arity, broadcasts)
        # Unary ops (but the copy itself) stage a strided operand of the output's shape at any size.
        self.staging = False

    def __call__(self, *arrays):
        out = arrays[-1]
        writable(out)
        shape = out.shape
        if not out.flags.c_contiguous or not all(fits_contiguous(a, shape) for a in arrays[:-1]):
            if out.size < STAGED_BELOW or (self.staging and arrays[0].shape == shape):
                return self.staged(arrays)
            strided = self.strided_form(tuple(a.dtype for a in arrays))
            for block in four_axis_blocks(arrays):
                strided(*block)
            return out
        size = out.size
        if not self.broadcasts and arrays[0].size != size:
            arrays = (repeated(arrays[0], size), out)
        contiguous = self.flat_form(tuple(a.dtype for a in arrays))
        operands = [flat(a) for a in arrays]
        if size < self.threshold or WORKERS == 1:
            contiguous(*operands, 0, size)
        else:
            period = min([a.size for a in arrays[:-1] if 1 < a.size < size] or [1])
            futures = [pool().submit(contiguous, *operands, lo * period, hi * period)
                       for lo, hi in chunks(size // period)]
            for future in futures:
                future.result()
        return out

    def staged(self, arrays):
        """Operands the flat form cannot read, through it: NumPy copies each such input into a
        C-contiguous buffer (at the output's shape, if it broadcasts otherwise), the flat form computes,
        and NumPy copies the result into a strided ``out``. The values are the same, computed by the
        same scalar function, and no strided form is compiled: below STAGED_BELOW elements for every op
        (and faster there: the strided launch costs more than the copies), at any size for unary ops
        on operands of the output's shape (a pass over memory more than the strided form)."""
        out = arrays[-1]
        shape = out.shape
        inputs = [a if fits_contiguous(a, shape) else np.ascontiguousarray(np.broadcast_to(a, shape))
                  for a in arrays[:-1]]
        if out.flags.c_contiguous:
            return self(*inputs, out)
        np.copyto(out, self(*inputs, np.empty(shape, out.dtype)))
        return out

    def __repr__(self):
        return f"<element-wise kernel {self.name}>"


class Swapped(Elementwise):
    """A comparison computed by another with its operands exchanged: ``lt(a, b, out)`` is
    ``gt(b, a, out)``, ``le`` is ``ge`` (``x < y`` is ``y > x`` for every pair of values, NaN
    included, and Numba converts both operands to one type either way). It shares the other kernel's
    compiled forms, so a program using both compiles one kernel instead of two. ``name`` is the
    op's own scalar function (fused groups generate code from it)."""

    def __init__(self, name, kernel):
        self.name, self.arity, self.kernel, self.broadcasts = name, 2, kernel, True
        self.flat_form, self.strided_form = kernel.flat_form, kernel.strided_form
        self.threshold = kernel.threshold
        self.staging = False
        entries, signatures = self.flat_form.entries, self.flat_form

        def contiguous(a, b, out, lo, hi):
            entry = entries.get((b.dtype, a.dtype, out.dtype)) or signatures((b.dtype, a.dtype, out.dtype))
            if out.ndim != 1 or a.ndim != 1 or b.ndim != 1:
                a, b, out = a.ravel(), b.ravel(), out.ravel()
            entry(b, a, out, lo, hi)
        self.contiguous = contiguous

    def __call__(self, a, b, out):
        return self.kernel(b, a, out)


def repeated(array, size):
    """A C-contiguous ``array`` that the flat kernels would repeat (one element, or a row read
    periodically) as the 1-D array of ``size`` elements they would read."""
    return np.ascontiguousarray(np.broadcast_to(array.reshape(-1), (size // array.size, array.size))).reshape(-1)


def _flat_caller(signatures, arity, broadcasts=True):
    """``contiguous(*inputs, out, lo, hi)`` for C-contiguous operands of any rank (one per arity:
    the executor calls it per node, so it does no more than look up and flatten; ``ravel`` of a
    C-contiguous array is a view, and cheaper to call than ``reshape(-1)``)."""
    entries = signatures.entries
    if arity == 1:
        def contiguous(a, out, lo, hi):
            entry = entries.get((a.dtype, out.dtype)) or signatures((a.dtype, out.dtype))
            if not broadcasts and a.size != out.size:
                a = repeated(a, out.size)
            if out.ndim != 1 or a.ndim != 1:
                a, out = a.ravel(), out.ravel()
            entry(a, out, lo, hi)
    elif arity == 2:
        def contiguous(a, b, out, lo, hi):
            entry = entries.get((a.dtype, b.dtype, out.dtype)) or signatures((a.dtype, b.dtype, out.dtype))
            if out.ndim != 1 or a.ndim != 1 or b.ndim != 1:
                a, b, out = a.ravel(), b.ravel(), out.ravel()
            entry(a, b, out, lo, hi)
    else:
        def contiguous(*arrays):
            *operands, lo, hi = arrays
            entry = signatures(tuple(a.dtype for a in operands))
            entry(*[a.ravel() for a in operands], lo, hi)
    return contiguous


RANK = 4
# Outputs below this many elements whose operands the flat form cannot read are staged (Elementwise.staged):
# measured faster than the strided form up to 2**15 elements, slower from 2**16 (add of a transposed or
# column-broadcast operand).
STAGED_BELOW = 1 << 15


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
