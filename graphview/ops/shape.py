"""Shape ops: reshape, permute, squeeze, expand_dims, broadcast_to, concat, stack.

Reshape (of contiguous data), permute, squeeze, expand_dims and broadcast_to
are views: their "kernel" returns a NumPy view and computes nothing. Concat
and stack copy with the element-wise copy kernel. The last part of the file
holds the ops gradient rules are written with (reduce_to, broadcast_like,
reshape_like, numel, concat_part, select_index); the rules are in
graphview/gradients/shape.py.
"""
import math

import numpy as np

from graphview import attributes, dtypes
from graphview.dims import Dim, DimError
from graphview.errors import ShapeError
from graphview.layouts.table import axis_of
from graphview.ops.reduce import sum_kernel
from graphview.registry import defop, public
from graphview.shapes import (broadcast_shapes, expand_axes, format_shape, known_size, normalize_axes, normalize_axis,
                              squeeze_axes)
from graphview.testing import Sample, strided, transposed
from graphview_kernels.elementwise import copy as copy_kernel


def _view_op(name, shape, kernel, samples, reference, doc, namespace=None, differentiable=None, attrs=None):
    return defop(name, shape=shape, kernel=kernel, view=True, accepts=dtypes.ALL, samples=samples,
                 reference=reference, family="shape", namespace=namespace, doc=doc, differentiable=differentiable,
                 attrs=attrs)


def int_entries(values, op, what):
    """``values`` (an int or a sequence) as a tuple of ints; a float or bool entry is a ShapeError, never truncated."""
    return attributes.integers(values, op, what)


# --- reshape -------------------------------------------------------------------

def _reshape_shape(x, shape):
    target = list(int_entries(shape, "reshape", "the new shape"))
    if sum(d == -1 for d in target) > 1:
        raise ShapeError(f"the new shape {tuple(shape)} has more than one -1")
    if any(d < -1 for d in target):
        raise ShapeError(f"the new shape {tuple(shape)} has a negative size")
    size = known_size(x)
    rest = math.prod([d for d in target if d != -1])
    if -1 in target:
        if size is None:
            target[target.index(-1)] = None
        elif rest == 0 or size % rest:
            raise ShapeError(f"cannot reshape {format_shape(x)} ({size} elements) to {tuple(shape)}")
        else:
            target[target.index(-1)] = size // rest
    elif size is not None and size != rest:
        raise ShapeError(f"cannot reshape {format_shape(x)} ({size} elements) to {tuple(shape)} ({rest} elements)")
    return tuple(target)


def contiguous(x):
    """x itself when C-contiguous, else a contiguous copy made by the copy kernel."""
    if x.flags.c_contiguous:
        return x
    out = np.empty(x.shape, x.dtype)
    copy_kernel(x, out)
    return out


def _reshape_kernel(x, shape):
    view = x.view()
    try:
        view.shape = shape
    except AttributeError:
        return contiguous(x).reshape(shape)
    return view


def _reshape_samples():
    r = np.random.default_rng(1)
    x = r.random((3, 4))
    return [Sample((x,), {"shape": (4, 3)}, label="2-D"), Sample((x,), {"shape": (-1,)}, label="-1"),
            Sample((x.astype(np.float32),), {"shape": (2, -1, 2)}, label="float32"),
            Sample((transposed(x),), {"shape": (12,)}, label="transposed (copies)"),
            Sample((np.zeros((0, 3)),), {"shape": (3, 0)}, label="empty"),
            Sample((x.astype(np.int64),), {"shape": (6, 2)}, label="int64")]


_reshape = _view_op("reshape", _reshape_shape, _reshape_kernel, _reshape_samples,
                    lambda x, shape: np.reshape(x, shape), "x with a new shape; one dim may be -1.",
                    attrs={"shape": attributes.Shape(minus_one=True)})


@public("shape")
def reshape(x, shape, *, name=None):
    """x with a new shape; one dim may be -1 (a view when x is contiguous)."""
    return _reshape(x, name=name, shape=int_entries(shape, "reshape", "the new shape"))


# --- permute / transpose ---------------------------------------------------------

def normalize_permutation(rank, perm):
    """``perm`` as a tuple of non-negative axes of a rank-``rank`` array (reversed when None)."""
    if perm is None:
        return tuple(reversed(range(rank)))
    perm = int_entries(perm, "permute", "perm")
    if sorted(p % rank if rank else p for p in perm) != list(range(rank)) or len(perm) != rank:
        raise ShapeError(f"{perm} is not a permutation of the {rank} axes")
    return tuple(p % rank for p in perm)


def _permute_shape(x, perm=None):
    return tuple(x[p] for p in normalize_permutation(len(x), perm))


def _permute_samples():
    r = np.random.default_rng(2)
    x = r.random((2, 3, 4))
    return [Sample((x,), {"perm": (2, 0, 1)}, label="3-D"), Sample((x.astype(np.float32),), {"perm": (1, 0, 2)}, label="float32"),
            Sample((transposed(x[0]),), {"perm": (1, 0)}, label="transposed"), Sample((np.zeros((0, 2)),), {"perm": (1, 0)}, label="empty"),
            Sample((x,), {"perm": None}, label="reverse")]


# The Perm attribute checked perm against the input's axes when the node was built: the kernel trusts it
# (NumPy's transpose takes None and negative axes as they are).
permute_op = _view_op("permute", _permute_shape, lambda x, perm=None: x.transpose(perm),
                      _permute_samples, lambda x, perm=None: np.transpose(x, perm),
                      "x with its axes reordered by perm (a view).", attrs={"perm": attributes.Perm()})


@public("shape")
def permute(x, *perm, name=None):
    """x with its axes reordered: permute(x, 2, 0, 1) or permute(x, (2, 0, 1)) (a view)."""
    if len(perm) == 1 and isinstance(perm[0], (tuple, list)):
        perm = perm[0]
    return permute_op(x, name=name, perm=int_entries(axes_of_dims(x, perm, "permute"), "permute", "perm"))


def axes_of_dims(x, axes, op):
    """``axes`` with every gv.Dim replaced by its position among x's axes (other entries unchanged)."""
    return tuple(axis_of(x, a, op) if isinstance(a, Dim) else a for a in axes)


# --- squeeze / expand_dims ---------------------------------------------------------

def _squeeze_shape(x, axis=None):
    axes = squeeze_axes(x, axis)
    return tuple(d for i, d in enumerate(x) if i not in axes)


def _squeeze_kernel(x, axis=None):
    return x.squeeze(squeeze_axes(x.shape, axis))


def _squeeze_samples():
    x = np.random.default_rng(3).random((1, 3, 1))
    return [Sample((x,), {"axis": None}, label="all"), Sample((x,), {"axis": 2}, label="one"),
            Sample((x.astype(np.float32),), {"axis": (0, 2)}, label="float32"), Sample((np.zeros((0, 1)),), {"axis": 1}, label="empty")]


_squeeze = _view_op("squeeze", _squeeze_shape, _squeeze_kernel, _squeeze_samples, lambda x, axis=None: np.squeeze(x, axis), "x without size-1 axes (a view).",
                    attrs={"axis": attributes.Axis(many=True, none=True)})


@public("shape")
def squeeze(x, axis=None, *, name=None):
    """x without its size-1 axes (all of them, or those in axis)."""
    return _squeeze(x, name=name, axis=axis)


def _expand_shape(x, axis):
    axes = expand_axes(len(x), axis)
    dims = iter(x)
    return tuple(1 if i in axes else next(dims) for i in range(len(x) + len(axes)))


def _expand_samples():
    x = np.random.default_rng(4).random((3, 4))
    return [Sample((x,), {"axis": 0}, label="front"), Sample((x,), {"axis": -1}, label="back"),
            Sample((x.astype(np.float32),), {"axis": (0, 2)}, label="two"), Sample((transposed(x),), {"axis": 1}, label="transposed")]


_expand_dims = _view_op("expand_dims", _expand_shape,
                        lambda x, axis: np.expand_dims(x, expand_axes(x.ndim, axis)),
                        _expand_samples,
                        lambda x, axis: np.expand_dims(x, axis), "x with new size-1 axes at axis (a view).",
                        attrs={"axis": attributes.Axis(many=True, new=True)})


@public("shape")
def expand_dims(x, axis, *, name=None):
    """x with new size-1 axes inserted at axis (an int or a tuple)."""
    for a in axis if isinstance(axis, (list, tuple)) else (axis,):
        if isinstance(a, Dim):
            raise DimError(f"expand_dims: axis gives positions in the result, but {a!r} names an axis of "
                           f"{x.name!r}; give the position of the new axis as an int")
    return _expand_dims(x, name=name, axis=axis)


# --- broadcast_to -------------------------------------------------------------------

def _broadcast_to_shape(x, shape):
    shape = int_entries(shape, "broadcast_to", "shape")
    if len(shape) < len(x):
        raise ShapeError(f"cannot broadcast {format_shape(x)} to the lower-rank {tuple(shape)}")
    result = broadcast_shapes(x, tuple(shape))
    if tuple(d if d is not None else s for d, s in zip(result, shape)) != tuple(shape):
        raise ShapeError(f"cannot broadcast {format_shape(x)} to {tuple(shape)}")
    return tuple(shape)


def _broadcast_samples():
    x = np.random.default_rng(5).random((3, 1))
    return [Sample((x,), {"shape": (3, 4)}, label="column"), Sample((x.astype(np.float32),), {"shape": (2, 3, 4)}, label="rank up"),
            Sample((np.float64(2.0) * np.ones(()),), {"shape": (2, 2)}, label="scalar"), Sample((x,), {"shape": (3, 0)}, label="empty")]


_broadcast_to = _view_op("broadcast_to", _broadcast_to_shape, lambda x, shape: np.broadcast_to(x, shape),
                         _broadcast_samples,
                         lambda x, shape: np.broadcast_to(x, shape), "x broadcast to shape (a view, stride 0).",
                         attrs={"shape": attributes.Shape()})


@public("shape")
def broadcast_to(x, shape, *, name=None):
    """x broadcast to ``shape`` (a read-only view with stride 0 on broadcast axes)."""
    return _broadcast_to(x, name=name, shape=int_entries(shape, "broadcast_to", "shape"))


# --- concat / stack -------------------------------------------------------------------

def _concat_shape(*shapes, axis=0):
    if not shapes:
        raise ShapeError("concat needs at least one input")
    rank = len(shapes[0])
    if rank == 0:
        raise ShapeError("cannot concatenate rank-0 inputs; use stack")
    axis = normalize_axis(axis, rank)
    for s in shapes:
        if len(s) != rank or any(i != axis and a is not None and b is not None and a != b
                                 for i, (a, b) in enumerate(zip(s, shapes[0]))):
            raise ShapeError(f"inputs of shapes {', '.join(map(format_shape, shapes))} differ outside axis {axis}")
    sizes = [s[axis] for s in shapes]
    total = None if None in sizes else sum(sizes)
    return tuple(total if i == axis else next((s[i] for s in shapes if s[i] is not None), None) for i in range(rank))


def _concat_kernel(*arrays, axis=0):
    *inputs, out = arrays
    axis = axis % out.ndim
    offset = 0
    for array in inputs:
        part = [slice(None)] * out.ndim
        part[axis] = slice(offset, offset + array.shape[axis])
        copy_kernel(array, out[tuple(part)])
        offset += array.shape[axis]


def _concat_samples():
    r = np.random.default_rng(6)
    a, b = r.random((2, 3)), r.random((4, 3))
    return [Sample((a, b), {"axis": 0}, label="rows"), Sample((a.T, b.T), {"axis": 1}, label="transposed"),
            Sample((a.astype(np.float32), b.astype(np.float32), a.astype(np.float32)), {"axis": -2}, label="three float32"),
            Sample((np.zeros((0, 3)), a), {"axis": 0}, label="empty part"),
            Sample((a.astype(np.int64), b.astype(np.int64)), {"axis": 0}, label="int64")]


_concat = defop("concat", shape=_concat_shape, kernel=_concat_kernel, promote="same",
                accepts=dtypes.ALL, samples=_concat_samples,
                reference=lambda *xs, axis=0: np.concatenate(xs, axis=axis), family="shape",
                attrs={"axis": attributes.Axis()},
                doc="Inputs joined along an existing axis.")


@public("shape")
def concat(inputs, axis=0, *, name=None):
    """The inputs joined along an existing axis."""
    return _concat(*inputs, name=name, axis=axis)


def _stack_shape(*shapes, axis=0):
    if not shapes:
        raise ShapeError("stack needs at least one input")
    if any(len(s) != len(shapes[0]) for s in shapes):
        raise ShapeError(f"inputs of shapes {', '.join(map(format_shape, shapes))} have different ranks")
    base = broadcast_shapes(*shapes)
    if any(a is not None and b is not None and a != b for s in shapes for a, b in zip(s, base)):
        raise ShapeError(f"inputs of shapes {', '.join(map(format_shape, shapes))} differ")
    axis = normalize_axis(axis, len(base) + 1)
    return base[:axis] + (len(shapes),) + base[axis:]


def _stack_kernel(*arrays, axis=0):
    *inputs, out = arrays
    axis = axis % out.ndim
    for index, array in enumerate(inputs):
        part = [slice(None)] * out.ndim
        part[axis] = index
        # The Ellipsis keeps the selection a (0-d) array view when the inputs are scalars.
        copy_kernel(array, out[tuple(part) + (Ellipsis,)])


def _stack_samples():
    r = np.random.default_rng(7)
    a, b = r.random((2, 3)), r.random((2, 3))
    return [Sample((a, b), {"axis": 0}, label="front"), Sample((a.T, b.T), {"axis": -1}, label="transposed back"),
            Sample((a.astype(np.float32), b.astype(np.float32)), {"axis": 1}, label="float32"),
            Sample((np.zeros((0, 2)), np.zeros((0, 2))), {"axis": 0}, label="empty"),
            Sample((np.float64(1.5) * np.ones(()), np.float64(-2.0) * np.ones(()), np.float64(3.0) * np.ones(())),
                   {"axis": 0}, label="rank 0"),
            Sample((np.float32(0.5) * np.ones(()),), {"axis": -1}, label="one rank-0 float32")]


_stack = defop("stack", shape=_stack_shape, kernel=_stack_kernel, promote="same", accepts=dtypes.ALL,
               samples=_stack_samples, reference=lambda *xs, axis=0: np.stack(xs, axis=axis), family="shape",
               attrs={"axis": attributes.Axis(new=True)},
               doc="Inputs joined along a new axis.")


@public("shape")
def stack(inputs, axis=0, *, name=None):
    """The inputs joined along a new axis."""
    return _stack(*inputs, name=name, axis=axis)


# --- the ops gradient rules are written with (graphview/gradients/shape.py) -------------

def _broadcast_axes(big, small):
    """The axes of ``big`` summed to get back to ``small`` after broadcasting."""
    lead = len(big) - len(small)
    return tuple(range(lead)) + tuple(lead + i for i, d in enumerate(small) if d == 1 and big[lead + i] != 1)


def _reduce_to_shape(x, like):
    if len(like) > len(x):
        raise ShapeError(f"cannot reduce {format_shape(x)} to the higher-rank {format_shape(like)}")
    broadcast_shapes(x, like)
    return like


def _reduce_to_kernel(x, like, out):
    # With a None (batch) dim the node exists even when the run-time shapes are equal;
    # summing over no axes walked every element as its own row (~0.9 ms for 256x128), a copy is enough.
    if x.shape == out.shape:
        copy_kernel(x, out)
        return
    sum_kernel(x, out.reshape((1,) * (x.ndim - out.ndim) + out.shape), axis=_broadcast_axes(x.shape, like.shape),
                keepdims=True)


def _reduce_to_samples():
    r = np.random.default_rng(8)
    return [Sample((r.random((3, 4)), r.random((4,))), label="rows", constant_inputs=(1,)),
            Sample((r.random((2, 3, 4)).astype(np.float32), r.random((3, 1)).astype(np.float32)), label="float32",
                   constant_inputs=(1,)),
            Sample((transposed(r.random((4, 3))), r.random((1, 3))), label="transposed", constant_inputs=(1,))]


# Gradient rules call it through graphview.gradients.unbroadcast, which adds no node where none is needed.
reduce_to_op = defop(
    "reduce_to", shape=_reduce_to_shape, kernel=_reduce_to_kernel, accepts=dtypes.ALL, samples=_reduce_to_samples,
    reference=lambda x, like: np.sum(x, axis=_broadcast_axes(x.shape, like.shape), keepdims=True).reshape(like.shape),
    family="shape", doc="x summed over the axes along which like was broadcast (un-broadcasting).")


def reduce_to(x, like):
    """x summed back to ``like``'s shape; x itself when it has that shape statically (no node)."""
    if x.shape == like.shape and None not in x.shape:
        return x
    return reduce_to_op(x, like)


def _broadcast_like_kernel(x, like):
    return np.broadcast_to(x, like.shape)


broadcast_like_op = _view_op(
    "broadcast_like", lambda x, like: _broadcast_to_shape(x, like) if None not in like else broadcast_shapes(x, like),
    _broadcast_like_kernel,
    lambda: [Sample((np.random.default_rng(9).random((3, 1)), np.zeros((3, 4))), label="column", constant_inputs=(1,))],
    lambda x, like: np.broadcast_to(x, like.shape), "x broadcast to like's shape (a view).")


def broadcast_like(x, like):
    """x broadcast to ``like``'s shape: x itself when it has that shape statically, else the broadcast_like op."""
    if x.shape == like.shape and None not in x.shape:
        return x
    return broadcast_like_op(x, like)


reshape_like = _view_op(
    "reshape_like", lambda x, like: like, lambda x, like: _reshape_kernel(x, like.shape),
    lambda: [Sample((np.random.default_rng(10).random((3, 4)), np.zeros((4, 3))), label="2-D", constant_inputs=(1,)),
             Sample((strided(np.random.default_rng(10).random((3, 4))), np.zeros((12,))), label="strided", constant_inputs=(1,))],
    lambda x, like: np.reshape(x, like.shape), "x reshaped to like's shape.")


def _numel_kernel(x, out, axis=None):
    out.fill(math.prod([x.shape[a] for a in normalize_axes(axis, x.ndim)]))


numel = defop("numel", shape=lambda x, axis=None: (normalize_axes(axis, len(x)), ())[1], kernel=_numel_kernel,
              dtype=lambda x, axis=None: dtypes.float_result(x), accepts=dtypes.ALL, differentiable=False,
              samples=lambda: [Sample((np.zeros((3, 4)),), {"axis": None}), Sample((np.zeros((3, 4)),), {"axis": (1,)})],
              reference=lambda x, axis=None: np.asarray(np.prod([x.shape[a] for a in normalize_axes(axis, x.ndim)]), float),
              family="shape", doc="The number of elements of x over axis, as a float scalar.",
              attrs={"axis": attributes.Axis(many=True, none=True)})


def _part_slices(shapes, axis, index):
    axis = axis % len(shapes[0])
    offset = sum(s[axis] for s in shapes[:index])
    part = [slice(None)] * len(shapes[0])
    part[axis] = slice(offset, offset + shapes[index][axis])
    return tuple(part)


concat_part = _view_op(
    "concat_part", lambda g, *inputs, axis=0, index=0: inputs[index],
    lambda g, *inputs, axis=0, index=0: g[_part_slices([x.shape for x in inputs], axis, index)],
    lambda: [Sample((np.arange(12.0).reshape(6, 2), np.zeros((2, 2)), np.zeros((4, 2))), {"axis": 0, "index": 1},
                    constant_inputs=(1, 2)),
             Sample((np.arange(12.0).reshape(2, 6), np.zeros((2, 3)), np.zeros((2, 3))), {"axis": -1, "index": 0},
                    label="last axis", constant_inputs=(1, 2))],
    lambda g, *inputs, axis=0, index=0: g[_part_slices([x.shape for x in inputs], axis, index)],
    "The part of a concat's gradient that belongs to input ``index``.",
    attrs={"axis": attributes.Axis(), "index": attributes.Int(minimum=0)})


def _select_slices(rank, axis, index):
    part = [slice(None)] * rank
    part[axis % rank] = index
    return tuple(part) + (Ellipsis,)  # a 0-d view, not a NumPy scalar, when rank is 1


select_index = _view_op(
    "select_index", lambda g, axis=0, index=0: g[:normalize_axis(axis, len(g))] + g[normalize_axis(axis, len(g)) + 1:],
    lambda g, axis=0, index=0: g[_select_slices(g.ndim, axis, index)],
    lambda: [Sample((np.arange(12.0).reshape(3, 4),), {"axis": 1, "index": 2}),
             Sample((np.arange(3.0),), {"axis": 0, "index": 1}, label="rank 1 to rank 0")],
    lambda g, axis=0, index=0: g[_select_slices(g.ndim, axis, index)],
    "Index ``index`` of axis ``axis`` (a view): the part of a stack's gradient for one input.",
    attrs={"axis": attributes.Axis(), "index": attributes.Int()})
