"""In-place ops through views: assign_, add_, sub_, mul_, div_.

``g.add_(view, value)`` is a new value in the functional graph: the view's base
after ``base[view] += value``. The op's inputs are ``(base, value, *dynamic
descriptors)`` and its ``chain`` attribute holds the descriptors of every
create_view between the base and the view, so the kernel re-derives the view
from whatever base array it gets (the executor may hand it a private copy, see
ADR 0009) and writes through it. The op declares ``inplace=(0,)``: it writes
its base input and returns it.
"""
import numpy as np

from graphview import attributes, dtypes
from graphview.errors import DTypeError, GraphviewError, ShapeError
from graphview.ops.math import cast
from graphview.ops.view import DYNAMIC, apply_view, count_dynamic, view_shape
from graphview.registry import defop
from graphview.shapes import broadcast_shapes, format_shape
from graphview.testing import Sample, transposed
from graphview.variable import Variable
from graphview_kernels import elementwise, inplace as kernels


def _views(base, entries_chain, arrays):
    """The view the chain selects from ``base``; dynamic descriptor arrays are consumed in order."""
    view = base
    arrays = list(arrays)
    for level, entries in enumerate(entries_chain):
        count = count_dynamic(entries)
        view = apply_view(view, entries, tuple(arrays[:count]), position_base=0) if count else apply_view(view, entries)
        arrays = arrays[count:]
    return view


def chain_shape(base, chain, dynamic_shapes):
    shape = tuple(base)
    shapes = list(dynamic_shapes)
    for entries in chain:
        count = count_dynamic(entries)
        shape = view_shape(shape, entries, shapes[:count])
        shapes = shapes[count:]
    return shape


def _shape(base, value, *dynamic, chain):
    _check_value(chain_shape(base, chain, dynamic), value)
    return base


def _check_value(target, value):
    """ShapeError unless a value of shape ``value`` may broadcast to the view shape ``target``.

    The rule is the binary ops' (broadcast_shapes), with one more constraint: the result must be
    the target's shape. Where a size is unknown (None) it may still fit, as for binary ops; the
    plan re-applies this rule to the sizes fed and raises, naming the op and node, if they don't.
    """
    if len(value) > len(target):
        raise ShapeError(f"the value of shape {format_shape(value)} has more axes than the view {format_shape(target)}")
    result = broadcast_shapes(target, value)
    if any(None not in (t, r) and r != t for t, r in zip(target, result)):
        raise ShapeError(f"the value of shape {format_shape(value)} does not broadcast to the view {format_shape(target)}")


def _runner(write):
    def kernel(base, value, *dynamic, chain):
        if not base.flags.writeable:
            # A read-only base (a broadcast view) cannot be written: the result is a fresh copy.
            copied = np.empty(base.shape, base.dtype)
            elementwise.copy(base, copied)
            base = copied
        view = _views(base, chain, dynamic)
        if dynamic:
            # The view's size came from run-time descriptors: the plan could not check it.
            try:
                _check_value(view.shape, value.shape)
            except ShapeError:
                raise ShapeError(f"the value of shape {format_shape(value.shape)} does not broadcast to the view "
                                 f"{format_shape(view.shape)} that the dynamic descriptors select from the base "
                                 f"{format_shape(base.shape)} at run time") from None
        if view.size:
            write(view, value)
        return base
    return kernel


def _reference(numpy_update):
    def reference(base, value, *dynamic, chain):
        result = base.copy()
        view = _views(result, chain, dynamic)
        numpy_update(view, value)
        return result
    return reference


def _set(view, value):
    view[...] = value


def _iadd(view, value):
    view += value


def _isub(view, value):
    view -= value


def _imul(view, value):
    view *= value


def _idiv(view, value):
    view /= value


def _samples(dtype_list):
    def samples():
        r = np.random.default_rng(13)
        out = []
        row = ((0, 1, 1, 1, 1), (1, 2, 1, 0, 6, 2, 0))          # [1, 0:6:2]
        rev = ((1, 2, 1, -1, 0, -1, 1),)                         # [::-1]
        for dtype in dtype_list:
            name = np.dtype(dtype).name
            base = (r.random((4, 6)) * 4 + 1).astype(dtype)
            out.append(Sample((base, (r.random(3) + 1).astype(dtype)), {"chain": (row,)}, label=f"row {name}"))
            out.append(Sample((transposed(base), (r.random((1, 6)) + 1).astype(dtype)), {"chain": (rev,)},
                              label=f"transposed broadcast {name}"))
        base = r.random((5, 4)) + 1
        out.append(Sample((base, r.random((2, 4)) + 1), {"chain": (((1, 2, 1, 0, 4, 1, 0),), ((1, 2, 1, 1, 3, 1, 0),))},
                          label="view of a view"))
        out.append(Sample((base, r.random(4) + 1, np.array([0, 1, 1, -2, 1])),
                          {"chain": (((DYNAMIC, 0),),)}, label="dynamic point", constant_inputs=(2,)))
        out.append(Sample((base[::-1, ::2], np.float64(2.5) * np.ones(())), {"chain": ()}, label="whole strided base"))
        return out
    return samples


def _inplace_op(name, write, numpy_update, accepts, doc):
    return defop(name, shape=_shape, kernel=_runner(write), inplace=(0,), accepts=accepts, promote_inputs=(0,),
                 samples=_samples([d for d in (np.float64, np.float32, np.int64) if np.dtype(d) in accepts]),
                 reference=_reference(numpy_update), family="inplace", doc=doc,
                 attrs={"chain": attributes.Descriptors(2, DYNAMIC)})


# The registered ops by name; graphview/gradients/inplace.py holds their rules.
OPS = {
    "assign_": _inplace_op("assign_", kernels.assign_, _set, dtypes.ALL,
                           "The base of the view after view[...] = value."),
    "add_": _inplace_op("add_", kernels.add_, _iadd, dtypes.NUMERIC, "The base of the view after view += value."),
    "sub_": _inplace_op("sub_", kernels.sub_, _isub, dtypes.NUMERIC, "The base of the view after view -= value."),
    "mul_": _inplace_op("mul_", kernels.mul_, _imul, dtypes.NUMERIC, "The base of the view after view *= value."),
    "div_": _inplace_op("div_", kernels.div_, _idiv, dtypes.FLOATS, "The base of the view after view /= value."),
}


def view_chain(target):
    """(base, chain of descriptor entries from the base outwards, dynamic descriptor variables) of a view."""
    levels = []
    base = target
    while base.op == "create_view":
        node = base.node
        levels.append((node.attributes["descriptors"], [Variable(base.graph, n) for n in node.inputs[1:]]))
        base = Variable(base.graph, node.inputs[0])
    levels.reverse()
    return base, tuple(entries for entries, _ in levels), [v for _, dynamic in levels for v in dynamic]


def apply(op_name, target, value, name=None):
    """Add the in-place op ``op_name`` writing ``value`` through the view ``target``; returns the new base."""
    if not isinstance(target, Variable):
        raise GraphviewError(f"{op_name}: the target must be a graph variable (usually a view), "
                             f"not {type(target).__name__}")
    graph = target.graph
    base, chain, dynamic = view_chain(target)
    kind = base.dtype
    if isinstance(value, Variable):
        if value.graph is not graph:
            raise GraphviewError(f"{op_name}: the value belongs to graph {value.graph.name!r}, not {graph.name!r}")
        if value.dtype != kind:
            if not np.can_cast(value.dtype, kind, "same_kind"):
                raise DTypeError(f"{op_name}: cannot write a {value.dtype.name} value into {base.name!r} of dtype "
                                 f"{kind.name} (NumPy's same_kind rule); cast it first")
            value = cast(value, kind)
    else:
        try:
            value = graph.constant_like(value, kind)
        except GraphviewError as error:
            raise type(error)(f"{op_name}: value: {error}") from None
        if value.dtype != kind:
            if not np.can_cast(value.dtype, kind, "same_kind"):
                raise DTypeError(f"{op_name}: cannot write a {value.dtype.name} value into {base.name!r} of dtype "
                                 f"{kind.name} (NumPy's same_kind rule)")
            value = cast(value, kind)
    return OPS[op_name](base, value, *dynamic, name=name, chain=chain)


def assign_(target, value, name=None):
    """The base of ``target`` after ``target[...] = value`` (written in place when the plan allows)."""
    return apply("assign_", target, value, name)


def add_(target, value, name=None):
    """The base of ``target`` after ``target += value``."""
    return apply("add_", target, value, name)


def sub_(target, value, name=None):
    """The base of ``target`` after ``target -= value``."""
    return apply("sub_", target, value, name)


def mul_(target, value, name=None):
    """The base of ``target`` after ``target *= value``."""
    return apply("mul_", target, value, name)


def div_(target, value, name=None):
    """The base of ``target`` after ``target /= value``."""
    return apply("div_", target, value, name)
