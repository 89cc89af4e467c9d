"""pad (``g.shape.pad``: NumPy's np.pad with the modes constant, reflect and edge) and pad_grad.

``pad_width`` follows NumPy: an int, ``(before, after)``, ``((before, after),)`` or one pair per
axis; the public function broadcasts it to one pair per axis, the form a node keeps. A reflect pad
must be smaller than its axis (PyTorch's rule; NumPy would reflect again), and reflect and edge
cannot extend an empty axis. The gradient (graphview/gradients/pool.py) of a constant pad is a view
of the incoming gradient; that of reflect and edge is ``pad_grad``, a kernel that adds the padded
entries back onto the entries they copy, and whose own gradient is ``pad``.
"""
from dataclasses import dataclass

import numpy as np

from graphview import attributes, dtypes
from graphview.dims import Dim
from graphview.errors import OpArgumentError, ShapeError
from graphview.ops.shape import contiguous
from graphview.registry import defop, graph_of, public
from graphview.shapes import format_shape
from graphview.testing import Sample, strided, transposed
from graphview_kernels import pad as kernels
from graphview_kernels.elementwise import copy as copy_kernel

MODES = {"constant": kernels.CONSTANT, "reflect": kernels.REFLECT, "edge": kernels.EDGE}


@dataclass(frozen=True)
class PadWidths(attributes.Attribute):
    """One (before, after) pair of ints >= 0 per axis of input 0 (the public function broadcasts
    NumPy's shorter forms)."""

    def parse(self, value):
        if not isinstance(value, (tuple, list)) or not all(
                isinstance(pair, (tuple, list)) and len(pair) == 2 and all(map(attributes.is_integer, pair))
                for pair in value):
            raise attributes.Invalid(f"{value!r:.80} is not one (before, after) pair of ints per axis")
        pairs = tuple((int(b), int(a)) for b, a in value)
        if any(b < 0 or a < 0 for b, a in pairs):
            raise attributes.Invalid(f"{pairs!r:.80} holds a negative pad")
        return pairs

    def check(self, value, inputs, definition):
        if inputs and len(value) != len(inputs[0][1]):
            label, shape = inputs[0]
            raise attributes.Invalid(f"{len(value)} pairs for input 0 ({label}) of rank {len(shape)}", ShapeError)


def pad_widths(op, pad_width, rank):
    """NumPy's pad_width (an int, a pair, one pair or a pair per axis) as ``rank`` (before, after) pairs."""
    try:
        array = np.asarray(pad_width)
    except (ValueError, TypeError):
        array = None
    if array is None or array.dtype == object or (array.size and array.dtype.kind not in "iu"):
        raise OpArgumentError(f"{op}: pad_width {pad_width!r:.80} is not an int or (before, after) pairs of ints")
    try:
        pairs = np.broadcast_to(array.astype(np.int64), (rank, 2))
    except ValueError:
        raise ShapeError(f"{op}: pad_width {pad_width!r:.80} (shape {array.shape}) does not broadcast to "
                         f"({rank}, 2), one (before, after) pair per axis of the rank-{rank} input") from None
    if (pairs < 0).any():
        raise OpArgumentError(f"{op}: pad_width {pad_width!r:.80} holds a negative pad")
    return tuple((int(b), int(a)) for b, a in pairs)


def _pad_shape(x, pad_width, mode="constant", value=0.0):
    out = []
    for axis, (size, (before, after)) in enumerate(zip(x, pad_width)):
        if size is not None and mode != "constant" and (before or after):
            if size == 0:
                raise ShapeError(f"pad: mode {mode!r} cannot pad axis {axis} of {format_shape(x)}, which is empty")
            if mode == "reflect" and max(before, after) >= size:
                raise ShapeError(f"pad: reflect padding {(before, after)} of axis {axis} must be smaller than the "
                                 f"axis's size {size} (input {format_shape(x)})")
        out.append(None if size is None else size + before + after)
    return tuple(out)


def _rows(shape, axis):
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return outer, shape[axis], inner


def _pad_kernel(x, out, pad_width, mode="constant", value=0.0):
    axes = [axis for axis, pair in enumerate(pad_width) if pair != (0, 0)]
    if out.size == 0:
        return
    if not axes:
        copy_kernel(x, out)
        return
    current = contiguous(x)
    fill = out.dtype.type(value)
    for axis in axes:
        before, after = pad_width[axis]
        shape = current.shape[:axis] + (current.shape[axis] + before + after,) + current.shape[axis + 1:]
        target = out if axis == axes[-1] else np.empty(shape, out.dtype)
        kernels.pad_axis(current.reshape(_rows(current.shape, axis)), target.reshape(_rows(shape, axis)),
                         before, MODES[mode], fill)
        current = target


def _pad_dims(in_dims, in_shapes, attrs, out_shape):
    return tuple(d if pair == (0, 0) else (d + (pair[0] + pair[1]) if isinstance(d, Dim) else None)
                 for d, pair in zip(in_dims[0], attrs["pad_width"]))


def _pad_reference(x, pad_width, mode="constant", value=0.0):
    if mode == "constant":
        return np.pad(x, pad_width, mode="constant", constant_values=value)
    return np.pad(x, pad_width, mode=mode)


def _pad_samples():
    r = np.random.default_rng(16)
    samples = []
    for dtype in (np.float64, np.float32):
        name = np.dtype(dtype).name
        x = r.normal(size=(3, 4, 5)).astype(dtype)
        samples += [
            Sample((x,), {"pad_width": ((0, 0), (1, 2), (2, 1))}, label=f"constant {name}"),
            Sample((x,), {"pad_width": ((1, 1), (3, 2), (0, 4)), "mode": "reflect"}, label=f"reflect {name}"),
            Sample((x,), {"pad_width": ((2, 0), (1, 3), (5, 0)), "mode": "edge"}, label=f"edge {name}"),
            Sample((transposed(x[0]),), {"pad_width": ((1, 2), (2, 2)), "mode": "reflect"},
                   label=f"transposed {name}"),
            Sample((strided(x[:, 1]),), {"pad_width": ((2, 2), (1, 0)), "mode": "constant", "value": -1.5},
                   label=f"strided, value {name}")]
    samples += [Sample((r.normal(size=(2, 3)),), {"pad_width": ((0, 0), (0, 0)), "mode": "edge"}, label="no pad"),
                Sample((np.zeros((0, 3)),), {"pad_width": ((1, 2), (1, 0)), "value": 2.0}, label="empty axis"),
                Sample((r.normal(size=(4,)),), {"pad_width": ((3, 3),), "mode": "reflect"}, label="1-D, pad = size - 1"),
                Sample((r.integers(-5, 5, (3, 4)),), {"pad_width": ((1, 1), (2, 0)), "mode": "edge"}, label="int64")]
    return samples


pad_op = defop("pad", shape=_pad_shape, kernel=_pad_kernel, accepts=dtypes.ALL, samples=_pad_samples,
               reference=_pad_reference, family="shape", dims=_pad_dims,
               attrs={"pad_width": PadWidths(), "mode": attributes.OneOf(MODES), "value": attributes.Float()},
               doc="np.pad with modes constant (value), reflect (pads smaller than the axis) and edge.")


@public("shape")
def pad(x, pad_width, mode="constant", value=0.0, *, name=None):
    """``x`` padded as ``np.pad(x, pad_width, mode)`` does (``constant_values=value`` for mode
    "constant"); ``pad_width`` is an int, ``(before, after)`` or one such pair per axis."""
    graph_of((x,), "pad")
    return pad_op(x, name=name, pad_width=pad_widths("pad", pad_width, x.rank), mode=mode, value=value)


# --- the gradient of reflect and edge padding ----------------------------------------------------------

def _pad_grad_shape(grad, pad_width, mode="constant"):
    out = []
    for axis, (size, (before, after)) in enumerate(zip(grad, pad_width)):
        if size is not None and size < before + after:
            raise ShapeError(f"pad_grad: axis {axis} of {format_shape(grad)} is shorter than its pads {(before, after)}")
        out.append(None if size is None else size - before - after)
    _pad_shape(tuple(out), pad_width, mode)   # the padding the gradient undoes must have been possible
    return tuple(out)


def _pad_grad_kernel(grad, out, pad_width, mode="constant"):
    axes = [axis for axis, pair in enumerate(pad_width) if pair != (0, 0)]
    if out.size == 0:
        return
    if not axes:
        copy_kernel(grad, out)
        return
    current = contiguous(grad)
    for axis in reversed(axes):
        before, after = pad_width[axis]
        shape = current.shape[:axis] + (current.shape[axis] - before - after,) + current.shape[axis + 1:]
        target = out if axis == axes[0] else np.empty(shape, out.dtype)
        kernels.fold_axis(current.reshape(_rows(current.shape, axis)), target.reshape(_rows(shape, axis)),
                          before, MODES[mode])
        current = target


def _pad_grad_reference(grad, pad_width, mode="constant"):
    result = grad.astype(np.float64)
    for axis in reversed(range(grad.ndim)):
        before, after = pad_width[axis]
        size = result.shape[axis] - before - after
        moved = np.moveaxis(result, axis, 0)
        folded = np.zeros((size,) + moved.shape[1:])
        for i in range(moved.shape[0]):
            r = i - before
            if mode == "constant" and not 0 <= r < size:
                continue
            if mode == "reflect":
                r = -r if r < 0 else 2 * (size - 1) - r if r >= size else r
            folded[min(max(r, 0), size - 1)] += moved[i]
        result = np.moveaxis(folded, 0, axis)
    return result.astype(grad.dtype)


def _pad_grad_samples():
    samples = []
    for sample in _pad_samples():
        x = sample.inputs[0]
        if x.dtype.kind == "f":
            padded = _pad_reference(x, **sample.attrs)
            attrs = {k: v for k, v in sample.attrs.items() if k != "value"}
            samples.append(Sample((np.random.default_rng(17).normal(size=padded.shape).astype(x.dtype),), attrs,
                                  label=sample.label))
    return samples


pad_grad = defop("pad_grad", shape=_pad_grad_shape, kernel=_pad_grad_kernel, accepts=dtypes.NUMERIC,
                 samples=_pad_grad_samples, reference=_pad_grad_reference, family="shape",
                 dims=lambda in_dims, in_shapes, attrs, out_shape: tuple(
                     d if pair == (0, 0) else None for d, pair in zip(in_dims[0], attrs["pad_width"])),
                 attrs={"pad_width": PadWidths(), "mode": attributes.OneOf(MODES)},
                 doc="The gradient of pad: each padded entry added back onto the entry it copies (its gradient is pad).")
