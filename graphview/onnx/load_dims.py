"""Shapes as data in ``graphview.onnx.load``: Constant, ConstantOfShape, Shape, Expand, and the integer
shape arithmetic exporters write with unknown sizes (PyTorch's LSTM states for a dynamic batch).

A Shape of dims known when building is a NumPy array (folded like any constant). With unknown dims it
is a load_ops.Dims: entries that are ints or (variable, axis). Gather, Concat, (Un)Squeeze, Slice and
Cast on it give Dims (an array again once every entry is known); Reshape reads its unknown entries as
unknown dims; ConstantOfShape and Expand build run-time tensors of that shape with broadcast_like.
DIMS_BUILDERS maps these op types to builders that fall back to load_ops' builders for other inputs.
"""
import numpy as np

from graphview.onnx.load_ops import BUILDERS, Dims, axis_of, identity, known, reshape_to, view
from graphview.ops.shape import broadcast_like


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
    if isinstance(x, Dims):
        cx.fail("Shape of a shape with unknown sizes")
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

    if np.dtype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"])).kind not in "iu":
        cx.fail("a shape with unknown sizes can only be cast to integers")
    return [ins[0]]


@sym
def reshape(cx, node, ins, attrs):
    x, wanted = cx.var(ins[0]), entries(cx, ins[1], "the shape")
    target = []
    for i, entry in enumerate(wanted):
        if isinstance(entry, tuple):
            target.append(None)
        elif entry == 0 and not attrs.get("allowzero", 0):
            target.append(x.shape[i])
        else:
            target.append(entry)
    return [reshape_to(cx, x, target, cx.name())]


def filled(cx, items, value, dtype, name=None):
    """A run-time tensor of shape ``items`` (ints and (variable, axis)) holding ``value``."""
    rank = len(items)
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
    "Cast": cast, "Reshape": reshape,
}
