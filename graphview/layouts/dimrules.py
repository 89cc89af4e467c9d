"""How dims follow an op from its inputs to its output (ADR 0017).

An op's rule is ``definition.dims`` when it declares one (``gv.defop(..., dims=rule)`` or
``registry.defdims(op, rule)``), else its family's default below; an op with neither gives an
output whose dims are unknown (None). A rule is called as ``rule(in_dims, in_shapes, attrs,
out_shape)``: one tuple of Dim or None per input, the input shapes, the node's attributes and
its shape; it returns one Dim or None per output axis (or None: nothing known).

The built-in ops whose dims move differently from their family's default get their rules here,
registered by name as JAX registers a rule per primitive; no code switches on op names.
"""
import math

from graphview import registry
from graphview.dims import DimError
from graphview.errors import ShapeError
from graphview.layouts import table
from graphview.ops import linalg, masked, shape  # noqa: F401  (registers the ops given rules below)
from graphview.shapes import expand_axes, normalize_axes, normalize_axis, squeeze_axes

# What a rule may raise on inputs it does not expect: the output's dims are then unknown.
_UNKNOWN_WHEN = (DimError, ShapeError, ValueError, IndexError, TypeError)


# --- the family defaults -------------------------------------------------------------------------

def broadcast(in_dims, in_shapes, attrs, out_shape):
    """Right-aligned, as NumPy broadcasts: an axis keeps the dim its inputs agree on, else None."""
    rank = len(out_shape)
    result = []
    for position in range(rank):
        everyone, sized = [], []
        for dims, shape_ in zip(in_dims, in_shapes):
            i = len(shape_) - rank + position
            if i >= 0:
                everyone.append(dims[i])
                if shape_[i] != 1:
                    sized.append(dims[i])
        known = [d for d in (sized or everyone) if d is not None]
        result.append(known[0] if known and all(d == known[0] for d in known) else None)
    return tuple(result)


def reduction(in_dims, in_shapes, attrs, out_shape):
    """The reduced axes are removed (None where ``keepdims`` keeps them); the others keep their dims."""
    first = in_dims[0]
    axes = normalize_axes(attrs.get("axis"), len(first))
    if attrs.get("keepdims"):
        return tuple(None if i in axes else d for i, d in enumerate(first))
    return tuple(d for i, d in enumerate(first) if i not in axes)


def same_rank(in_dims, in_shapes, attrs, out_shape):
    """An output of input 0's rank keeps its dims (softmax, dropout); another rank's are unknown."""
    first = in_dims[0] if in_dims else ()
    return first if len(out_shape) == len(first) else None


FAMILY_DEFAULTS = {"elementwise": broadcast, "reduce": reduction, "nn": same_rank}


def rule_of(definition):
    """The op's declared dims rule, else its family's default, else None."""
    return definition.dims or FAMILY_DEFAULTS.get(definition.family)


def carry(graph, definition, variables, result):
    """After building ``result``: tag it with the dims the op's rule gives (building's hook). An axis
    whose dim has a static size other than the axis's own is left unknown."""
    found = table.dims_table(graph, create=False)
    if found is None or not any(v.name in found.dims for v in variables):
        return
    rule = rule_of(definition)
    if rule is None:
        return
    in_dims = [table.dims_of(v) for v in variables]
    in_shapes = [v.shape for v in variables]
    try:
        dims = rule(in_dims, in_shapes, result.node.attributes, result.shape)
    except _UNKNOWN_WHEN:
        dims = None
    except Exception as error:  # noqa: BLE001  (a user's rule failing some other way: name the op)
        raise DimError(f"{definition.name} {result.name!r}: its dims rule raised {type(error).__name__}: "
                       f"{error}") from error
    if dims is None:
        return
    if len(dims) != len(result.shape):
        raise DimError(f"{definition.name} {result.name!r}: its dims rule gave {len(dims)} dims for an output of "
                       f"rank {len(result.shape)}")
    dims = tuple(d if d is None or d.size is None or s is None or d.size == s else None
                 for d, s in zip(dims, result.shape))
    if any(d is not None for d in dims):
        found.dims[result.name] = dims
        _derive_lengths(graph, rule, in_dims, in_shapes, result.node.attributes, dims)


def _derive_lengths(graph, rule, in_dims, in_shapes, attrs, dims):
    """A rule with ``derived_lengths`` (convolution, pooling: graphview/ops/spatial.py) says which
    output dims are derived from dynamic input dims by a size formula; they get lengths by it."""
    derived = getattr(rule, "derived_lengths", None)
    if derived is None or not table.has_lengths(graph):
        return
    try:
        entries = derived(in_dims, in_shapes, attrs)
    except _UNKNOWN_WHEN:
        return
    for axis, source, offset, stride in entries:
        if dims[axis] is not None:
            table.derive_lengths(graph, dims[axis], source, offset, stride)


# --- the built-in ops' own rules -----------------------------------------------------------------

def permuted(in_dims, in_shapes, attrs, out_shape):
    first = in_dims[0]
    perm = attrs.get("perm")
    order = tuple(reversed(range(len(first)))) if perm is None else tuple(p % len(first) for p in perm)
    return tuple(first[p] for p in order)


def squeezed(in_dims, in_shapes, attrs, out_shape):
    axes = squeeze_axes(in_shapes[0], attrs.get("axis"))
    return tuple(d for i, d in enumerate(in_dims[0]) if i not in axes)


def expanded(in_dims, in_shapes, attrs, out_shape):
    axes = expand_axes(len(in_dims[0]), attrs["axis"])
    rest = iter(in_dims[0])
    return tuple(None if i in axes else next(rest) for i in range(len(out_shape)))


def _same_rest(old, new):
    """True when two static shape tails hold the same number of elements, so an unknown axis before
    them is the same axis in both (``(None, 3, 4)`` to ``(-1, 12)`` keeps the batch)."""
    return None not in old and None not in new and math.prod(old) == math.prod(new)


def reshaped(in_dims, in_shapes, attrs, out_shape):
    """Dims of the unchanged leading and trailing axes of a reshape."""
    dims, old, new = in_dims[0], in_shapes[0], out_shape
    result = [None] * len(new)
    lead = 0
    while lead < min(len(old), len(new)) and old[lead] == new[lead] and (
            old[lead] is not None or _same_rest(old[lead + 1:], new[lead + 1:])):
        result[lead] = dims[lead]
        lead += 1
    tail = 1
    while tail <= min(len(old), len(new)) - lead and old[-tail] == new[-tail] and old[-tail] is not None:
        result[-tail] = dims[-tail]
        tail += 1
    return tuple(result)


def broadcast_leading(in_dims, in_shapes, attrs, out_shape):
    """broadcast_to / broadcast_like: x's dims on the trailing axes, the new leading ones unknown."""
    first = in_dims[0]
    return (None,) * (len(out_shape) - len(first)) + tuple(first)


def concatenated(in_dims, in_shapes, attrs, out_shape):
    """Input 0's dims, except along the joined axis, whose size changed."""
    first = in_dims[0]
    axis = normalize_axis(attrs.get("axis", 0), len(first))
    return tuple(None if i == axis else d for i, d in enumerate(first))


def gathered(in_dims, in_shapes, attrs, out_shape):
    """x's dims around the gathered axis, which becomes the indices' (unknown) axes."""
    first = in_dims[0]
    axis = normalize_axis(attrs.get("axis", 0), len(first))
    return tuple(first[:axis]) + (None,) * len(in_shapes[1]) + tuple(first[axis + 1:])


def matmul_dims(in_dims, in_shapes, attrs, out_shape):
    """x's dims but the last, then y's last (when both have two axes or more and x's rank stays)."""
    first, second = in_dims[0], in_dims[1]
    if len(first) >= 2 and len(second) >= 2 and len(out_shape) == len(first):
        return tuple(first[:-1]) + (second[-1],)
    return None


def first_input_broadcast(in_dims, in_shapes, attrs, out_shape):
    """Input 0's dims (masked softmax: the lengths input carries no dims to the output)."""
    return broadcast(in_dims[:1], in_shapes, attrs, out_shape)


def masked_reduction(in_dims, in_shapes, attrs, out_shape):
    """A masked reduction's dims as a plain reduction's, when its node records keepdims."""
    return reduction(in_dims, in_shapes, attrs, out_shape) if "keepdims" in attrs else None


RULES = {
    "permute": permuted, "transpose": permuted, "squeeze": squeezed, "expand_dims": expanded,
    "reshape": reshaped, "reshape_like": reshaped, "broadcast_to": broadcast_leading,
    "broadcast_like": broadcast_leading, "concat": concatenated, "gather": gathered, "matmul": matmul_dims,
    "masked_softmax": first_input_broadcast, "masked_log_softmax": first_input_broadcast,
    **{name: masked_reduction for name in masked.MODES},   # the masked reductions
}
for _op, _rule in RULES.items():
    registry.defdims(_op, _rule)
