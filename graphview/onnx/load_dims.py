"""Shapes as data in ``graphview.onnx.load``: Constant, ConstantOfShape, Shape, Expand, and the integer
shape arithmetic exporters write with unknown sizes (PyTorch's LSTM states for a dynamic batch).

A Shape of dims known when building is a NumPy array (folded like any constant). With unknown dims it
is a load_ops.Dims: entries that are ints or (variable, axis). Gather, Concat, (Un)Squeeze, Slice and
Cast on it give Dims (an array again once every entry is known); Reshape reads its unknown entries as
unknown dims; ConstantOfShape and Expand build run-time tensors of that shape with broadcast_like.
ReduceProd of unknown sizes gives a Product entry (a merged size: unknown to Reshape, computed at run
time where a Cast to a float uses the sizes as values, as graphview's numel export does).
DIMS_BUILDERS maps these op types to builders that fall back to load_ops' builders for other inputs.
"""
import numpy as np

from graphview.layouts.ops import split_axis
from graphview.onnx.load_ops import BUILDERS, Dims, axes_input, axis_of, identity, known, reshape_to, view
from graphview.ops.shape import broadcast_like, numel


class Product:
    """A Dims entry: the product of ``entries`` (ints and (variable, axis)), known only at run time."""

    def __init__(self, entries):
        self.entries = list(entries)


def constant(cx, node, ins, attrs):
    from onnx import numpy_helper  # an optional dependency (the onnx extra)

    if "value" in attrs:
        return [numpy_helper.to_array(attrs["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return [np.asarray(attrs[key], dtype=dtype)]
    cx.fail(f"a Constant with {sorted(attrs)} is not supported (value, value_float(s), value_int(s) are)")


def shape(cx, node, ins, attrs):
    x = ins[0]
    if isinstance(x, Dims):              # its own shape is known: the number of entries
        dims = () if x.scalar else (len(x.entries),)
    else:
        dims = np.shape(x) if known(x) else x.shape
    start, end = int(attrs.get("start", 0)), attrs.get("end")
    axes = list(range(len(dims)))[start:None if end is None else int(end)]
    if all(dims[a] is not None for a in axes):
        return [np.asarray([dims[a] for a in axes], dtype=np.int64)]
    return [Dims(dims[a] if dims[a] is not None else (x, a) for a in axes)]


def entries(cx, value, what):
    """A shape input as a list of ints and (variable, axis) entries."""
    if isinstance(value, Dims):
        return list(value.entries)
    return [int(d) for d in cx.static(value, what).reshape(-1)]


def dims_or_array(items, scalar=False):
    if all(isinstance(item, int) for item in items):
        array = np.asarray(items, dtype=np.int64)
        return array.reshape(()) if scalar else array
    return Dims(items, scalar)


def sym(builder):
    """``builder`` for Dims inputs, load_ops' own builder for the others."""
    def build(cx, node, ins, attrs):
        if any(isinstance(v, Dims) for v in ins):
            return builder(cx, node, ins, attrs)
        return BUILDERS[node.op_type](cx, node, ins, attrs)
    return build


@sym
def gather(cx, node, ins, attrs):
    data, indices = ins
    if isinstance(indices, Dims) or int(attrs.get("axis", 0)) != 0:
        cx.fail("Gather of a shape with unknown sizes needs constant indices on axis 0")
    indices = cx.static(indices, "the indices").astype(np.int64)
    picked = [data.entries[int(i)] for i in indices.reshape(-1)]
    return [dims_or_array(picked, scalar=indices.ndim == 0)]


@sym
def unsqueeze(cx, node, ins, attrs):
    dims = ins[0]
    if not dims.scalar:
        cx.fail("Unsqueeze of a 1-D shape with unknown sizes")
    return [Dims(dims.entries)]


@sym
def squeeze(cx, node, ins, attrs):
    dims = ins[0]
    if dims.scalar or len(dims.entries) != 1:
        cx.fail("Squeeze of a shape with unknown sizes needs a 1-D shape of one entry")
    return [Dims(dims.entries, scalar=True)]


@sym
def concat(cx, node, ins, attrs):
    items = []
    for part in ins:
        if part is not None:
            items += entries(cx, part, "a part")
    return [dims_or_array(items)]


@sym
def slice_(cx, node, ins, attrs):
    dims = ins[0]
    if cx.opset < 10:
        starts, ends, steps = attrs["starts"], attrs["ends"], [1]
    else:
        starts, ends = cx.static(ins[1], "starts"), cx.static(ins[2], "ends")
        steps = cx.static(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else [1]
    start, end, step = (int(np.ravel(v)[0]) for v in (starts, ends, steps))
    return [dims_or_array(dims.entries[max(min(start, 2 ** 62), -2 ** 62):max(min(end, 2 ** 62), -2 ** 62):step])]


@sym
def cast(cx, node, ins, attrs):
    import onnx  # an optional dependency (the onnx extra)

    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))
    if dtype.kind in "iu":
        return [ins[0]]
    if dtype.name not in ("float32", "float64"):
        cx.fail(f"a shape with unknown sizes can only be cast to integers, float32 or float64, not {dtype}")
    return [values(cx, ins[0], dtype, cx.name())]


def size_of(cx, entry, dtype):
    """One entry's size as a run-time scalar of ``dtype`` (numel of its axis; a Product multiplies)."""
    if isinstance(entry, int):
        return cx.var(np.asarray(entry, dtype=dtype))
    if isinstance(entry, Product):
        result = size_of(cx, entry.entries[0], dtype)
        for part in entry.entries[1:]:
            result = cx.g.math.mul(result, size_of(cx, part, dtype))
        return result
    source, axis = entry
    return cx.g.math.cast(numel(source, axis=axis), dtype.name)


def values(cx, dims, dtype, name):
    """The sizes of ``dims`` as a run-time tensor of ``dtype`` (used as values, not as a shape)."""
    sizes = [size_of(cx, entry, dtype) for entry in dims.entries]
    if dims.scalar:
        return view(cx, sizes[0], (Ellipsis,), name)
    return cx.g.shape.stack(sizes, axis=0, name=name)


@sym
def reduce_prod(cx, node, ins, attrs):
    dims = ins[0]
    axes = axes_input(cx, ins, attrs, 18)
    if dims.scalar or axes not in (None, [], [0], [-1]):
        cx.fail("ReduceProd of a shape with unknown sizes needs a 1-D shape and axis 0")
    ints = [e for e in dims.entries if isinstance(e, int)]
    rest = [e for e in dims.entries if not isinstance(e, int)]
    known_part = int(np.prod(ints, dtype=np.int64))
    entry = Product(rest + ([known_part] if known_part != 1 else [])) if rest else known_part
    if rest and len(rest) == 1 and known_part == 1:
        entry = rest[0]
    keep = bool(attrs.get("keepdims", 1))
    return [dims_or_array([entry]) if keep else dims_or_array([entry], scalar=True)]


def fold_reduce_prod(builder):
    """ReduceProd of a known array folded with NumPy (shape arithmetic), else ``builder``."""
    def build(cx, node, ins, attrs):
        if isinstance(ins[0], Dims) or not known(ins[0]):
            return builder(cx, node, ins, attrs)
        x = np.asarray(ins[0])
        axes = axes_input(cx, ins, attrs, 18)
        if not axes and attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = tuple(axis_of(cx, a, x.ndim) for a in axes) if axes else None
        return [np.prod(x, axis=axes, keepdims=bool(attrs.get("keepdims", 1))).astype(x.dtype)]
    return build


@sym
def reshape(cx, node, ins, attrs):
    x, wanted = cx.var(ins[0]), entries(cx, ins[1], "the shape")
    target = []
    for i, entry in enumerate(wanted):
        if not isinstance(entry, int):
            target.append(None)
        elif entry == 0 and not attrs.get("allowzero", 0):
            target.append(x.shape[i])
        else:
            target.append(entry)
    split = splitting(x, wanted)
    if split is not None and target.count(None) + target.count(-1) > 1:
        return [split_axis(x, axis=split[0], sizes=split[1], name=cx.name())]
    return [reshape_to(cx, x, target, cx.name())]


def splitting(x, wanted):
    """(axis, sizes) where ``wanted`` is x's shape with one axis split into known sizes (one may be -1),
    the other entries x's own sizes (its (x, axis) entries or equal known sizes); else None."""
    rank, extra = len(x.shape), len(wanted) - len(x.shape)

    def own(entry, axis):
        return entry[0] is x and entry[1] == axis if isinstance(entry, tuple) else (
            isinstance(entry, int) and entry == x.shape[axis] and entry not in (0, -1))
    if extra < 0 or any(isinstance(e, Product) for e in wanted):
        return None
    for axis in range(rank):
        sizes = wanted[axis:axis + extra + 1]
        if (all(own(wanted[a], a) for a in range(axis))
                and all(own(wanted[a + extra], a) for a in range(axis + 1, rank))
                and all(isinstance(s, int) and s >= -1 for s in sizes)):
            return axis, tuple(sizes)
    return None


def filled(cx, items, value, dtype, name=None):
    """A run-time tensor of shape ``items`` (ints and (variable, axis)) holding ``value``."""
    rank = len(items)
    if any(isinstance(item, Product) for item in items):
        cx.fail("a size computed as a product of sizes known only at run time cannot shape a new tensor")
    if np.dtype(dtype) == np.bool_:         # graphview adds numbers: built as int32, then cast
        result = cx.g.math.cast(filled(cx, items, int(bool(value)), np.int32), "bool")
        return result if name is None else view(cx, result, (Ellipsis,), name)
    result = cx.var(np.full(tuple(d if isinstance(d, int) else 1 for d in items), value, dtype=dtype))
    for position, item in enumerate(items):
        if isinstance(item, tuple):
            source, axis = item
            line = view(cx, source, tuple(slice(None) if a == axis else 0 for a in range(len(source.shape))))
            like = cx.g.shape.reshape(line, tuple(-1 if p == position else 1 for p in range(rank)))
            zeros = broadcast_like(cx.var(np.zeros((1,) * rank, dtype=dtype)), like)
            result = cx.g.math.add(result, zeros)
    if name is not None:
        result = view(cx, result, (Ellipsis,), name)
    return result


def constant_of_shape(cx, node, ins, attrs):
    from onnx import numpy_helper  # an optional dependency (the onnx extra)

    value = numpy_helper.to_array(attrs["value"]).reshape(-1) if "value" in attrs else np.zeros(1, np.float32)
    if isinstance(ins[0], Dims):
        return [filled(cx, ins[0].entries, value[0], value.dtype, cx.name())]
    return [np.full(tuple(int(d) for d in cx.static(ins[0], "the shape")), value[0], dtype=value.dtype)]


def expand(cx, node, ins, attrs):
    x, wanted = ins[0], entries(cx, ins[1], "the shape")
    if known(x) and not isinstance(ins[1], Dims):
        return [np.broadcast_to(x, np.broadcast_shapes(np.shape(x), tuple(wanted))).copy()]
    x = cx.var(x)
    rank = max(len(x.shape), len(wanted))
    have = [1] * (rank - len(x.shape)) + list(x.shape)
    wanted = [1] * (rank - len(wanted)) + wanted
    offset = rank - len(x.shape)
    target = [w if h == 1 else (h if h is not None else (x, i - offset)) if w == 1 or isinstance(w, tuple) else w
              for i, (h, w) in enumerate(zip(have, wanted))]
    if any(isinstance(w, int) and h not in (None, 1, w) and w != 1 for h, w in zip(have, wanted)):
        cx.fail(f"cannot broadcast input shape {x.shape} to {tuple(wanted)}")
    if all(isinstance(t, int) for t in target):
        if tuple(target) == tuple(x.shape):
            return identity(cx, node, [x], attrs)
        return [cx.g.shape.broadcast_to(x, tuple(target), name=cx.name())]
    if [t if isinstance(t, int) else None for t in target] == list(have) and rank == len(x.shape):
        return identity(cx, node, [x], attrs)
    return [broadcast_like(x, filled(cx, target, 0, x.dtype))]


DIMS_BUILDERS = {
    "Constant": constant, "Shape": shape, "ConstantOfShape": constant_of_shape, "Expand": expand,
    "Gather": gather, "Unsqueeze": unsqueeze, "Squeeze": squeeze, "Concat": concat, "Slice": slice_,
    "Cast": cast, "Reshape": reshape, "ReduceProd": fold_reduce_prod(reduce_prod),
}
