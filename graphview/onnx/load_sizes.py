"""Sizes known only at run time in ``graphview.onnx.load``, as attention exports use them: arithmetic on them,
a Reshape to several of them, and the op types PyTorch's attention exports add (Mod, Trilu).

* ``Mul`` of single sizes (load_ops.Dims of one entry: an int, (variable, axis) or load_dims.Product) and
  constants of one entry gives a Product entry (``B * heads``, ``B * T``); whole shapes are not multiplied.
  ``Div`` of a Product by an int that one of its int factors is a multiple of removes it
  (``(B * heads) / heads``); other arithmetic on run-time sizes (Add, Sub, Mod, a Div that does not cancel)
  is refused by name: the result would not be a size graphview can lay out. A Reshape of one size to a scalar
  or one entry stays a size (the dynamo exporter's ``Reshape(B * heads, [-1])``).
* ``Reshape`` to a shape of several run-time sizes that neither splits one axis of the input into known
  sizes nor keeps its leading axes and merges the rest (load_dims handles those) is built from the sizes
  themselves: the input flattened is split by ``unpack_axis`` into the target's factors, laid out by a zero
  tensor of the target's shape (``filled``: as many elements as the output), and the factors of each
  Product are merged back. The element counts are checked at run time (a mismatch is an error, as in
  onnxruntime, never a silently truncated result). A ``-1`` beside run-time sizes is told from the input's
  shape (``inferred``); only the right size passes the count check. A constant target whose 0s copy unknown
  sizes beside a -1 (``x.view(0, -1, heads)``) takes the same path.
* ``Mod`` of values known while building is folded with NumPy (fmod or Python's sign rule); of integer
  tensors computed at run time it is a - b * trunc(a / b), corrected to the divisor's sign without fmod;
  of float tensors computed at run time it is refused.
* ``Trilu`` of a constant is folded (np.triu / np.tril); of a run-time tensor it is Where(keep, x, 0) over
  its last two axes, ``keep`` comparing the column and row positions (j - i >= k upper, <= k lower), so
  -inf entries outside the kept triangle become 0 as ONNX says (a product with a 0/1 mask would give NaN).

SIZE_BUILDERS maps Mul, Div, Add, Sub and Reshape to builders that fall back to load_dims' and load_ops'
builders for other inputs; ATTENTION_BUILDERS has Mod and Trilu (load_more joins them to its table).
"""
import numpy as np

from graphview.layouts.ops import merge_axes, split_axis, unpack_axis
from graphview.onnx.load_dims import DIMS_BUILDERS, Product, dims_or_array, filled, splitting
from graphview.onnx.load_masks import Positions, materialize
from graphview.onnx.load_ops import BUILDERS, Dims, known, view


def factors(entry):
    """``entry``'s factors: ints and (variable, axis), a Product's flattened."""
    if isinstance(entry, Product):
        return [part for inner in entry.entries for part in factors(inner)]
    return [entry]


def times(a, b):
    """The product of two Dims entries: an int where both are, else a Product with the ints multiplied."""
    parts = factors(a) + factors(b)
    number = int(np.prod([p for p in parts if isinstance(p, int)], dtype=np.int64))
    rest = [p for p in parts if not isinstance(p, int)]
    if not rest:
        return number
    if number == 1 and len(rest) == 1:
        return rest[0]
    return Product(rest + ([number] if number != 1 else []))


def as_entries(cx, value, what):
    """(entries, scalar) of a Dims or of an integer array known while building."""
    if isinstance(value, Dims):
        return list(value.entries), value.scalar
    array = cx.static(value, what)
    if array.dtype.kind not in "iu":
        cx.fail(f"{what} must be an integer size, not {array.dtype}")
    return [int(v) for v in array.reshape(-1)], array.ndim == 0


def pairwise(cx, ins):
    (a, a_scalar), (b, b_scalar) = as_entries(cx, ins[0], "the first input"), as_entries(cx, ins[1], "the second")
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        cx.fail(f"sizes of {len(a)} and {len(b)} entries do not broadcast")
    count = max(len(a), len(b))
    return [(a[i if len(a) > 1 else 0], b[i if len(b) > 1 else 0]) for i in range(count)], a_scalar and b_scalar


def mul(cx, node, ins, attrs):
    if not any(isinstance(v, Dims) for v in ins):
        return BUILDERS["Mul"](cx, node, ins, attrs)
    if not all(len(v.entries) == 1 if isinstance(v, Dims) else np.size(v) == 1 for v in ins):
        cx.fail("a shape with unknown sizes (from Shape) is multiplied element-wise: only single sizes (one entry "
                "of a shape) and constants of one entry can be multiplied")
    pairs, scalar = pairwise(cx, ins)
    return [dims_or_array([times(a, b) for a, b in pairs], scalar)]


def quotient(cx, a, b):
    if isinstance(b, int) and b != 0:
        if isinstance(a, int):
            return int(np.fix(a / b))
        parts = factors(a)
        for i, part in enumerate(parts):
            if isinstance(part, int) and part % b == 0:
                rest = parts[:i] + ([part // b] if part // b != 1 else []) + parts[i + 1:]
                return rest[0] if len(rest) == 1 else Product(rest)
    cx.fail("Div of a size known only at run time is supported only where the divisor is a constant that one "
            "of the size's constant factors is a multiple of (as in (B * heads) / heads); the quotient of other "
            "run-time sizes is not a size graphview can lay out")


def div(cx, node, ins, attrs):
    if not any(isinstance(v, Dims) for v in ins):
        return BUILDERS["Div"](cx, node, ins, attrs)
    pairs, scalar = pairwise(cx, ins)
    return [dims_or_array([quotient(cx, a, b) for a, b in pairs], scalar)]


def refuse_sizes(builder):
    """``builder``, refusing run-time sizes (Dims) by name: their sums and differences are not sizes."""
    def build(cx, node, ins, attrs):
        if any(isinstance(v, Dims) for v in ins):
            cx.fail(f"{node.op_type} of sizes known only at run time (from Shape) is not supported: only Mul, and "
                    f"a Div that cancels a constant factor, give sizes graphview can lay out")
        return builder(cx, node, ins, attrs)
    return build


# --- Reshape to several run-time sizes -------------------------------------------------------------------

def own(x, entry, axis):
    """Whether ``entry`` is x's own size at ``axis`` ((x, axis), or the equal known int)."""
    if isinstance(entry, tuple):
        return entry[0] is x and entry[1] == axis
    return isinstance(entry, int) and axis < len(x.shape) and entry == x.shape[axis] and entry > 0


def reshape(cx, node, ins, attrs):
    if isinstance(ins[0], Dims):          # sizes as data (the dynamo exporter's Reshape(B * heads, [-1]))
        dims, target = ins[0], [int(d) for d in cx.static(ins[1], "the shape").reshape(-1)]
        if len(dims.entries) != 1 or target not in ([], [1], [-1]):
            cx.fail(f"a Reshape of a shape with unknown sizes ({len(dims.entries)} entries) to {target}: only one "
                    f"size, to a scalar or one entry, is supported")
        return [Dims(dims.entries, scalar=not target)]
    if not isinstance(ins[1], Dims) and not copies_unknown(cx, ins, attrs):
        return DIMS_BUILDERS["Reshape"](cx, node, ins, attrs)
    x = cx.var(ins[0])
    wanted = list(ins[1].entries) if isinstance(ins[1], Dims) else [int(d) for d in np.ravel(ins[1])]
    if not attrs.get("allowzero", 0):     # 0 copies the input's size
        wanted = [(x.shape[i] if x.shape[i] is not None else (x, i)) if isinstance(e, int) and e == 0 else e
                  for i, e in enumerate(wanted)]
    unknown = [e for e in wanted if not isinstance(e, int) or e == -1]
    keep = len(wanted) - 1
    merges_rest = len(x.shape) > keep and all(own(x, wanted[a], a) for a in range(keep))
    # One run-time size taken from another tensor would be read as reshape's -1, its value never checked
    # against that tensor's: it goes the checked way, as several do.
    foreign = len(unknown) == 1 and unknown[0] != -1 and any(
        isinstance(part, tuple) and part[0] is not x for part in factors(unknown[0]))
    if not foreign and (splitting(x, wanted) is not None or len(unknown) <= 1 or merges_rest):
        return DIMS_BUILDERS["Reshape"](cx, node, [x, Dims(wanted)], attrs)
    if -1 in wanted:
        wanted = inferred(cx, x, wanted)
    return [general_reshape(cx, x, wanted, cx.name())]


def copies_unknown(cx, ins, attrs):
    """Whether a constant target shape has, with its 0s copying unknown sizes of the input, two or more
    unknown entries (``x.view(0, -1, heads)`` on (None, None, C)): a Reshape for the run-time path."""
    x, shape = ins
    if known(x) or not known(shape) or attrs.get("allowzero", 0):
        return False
    target = [int(d) for d in np.ravel(cx.static(shape, "the shape"))]
    copied = [i for i, d in enumerate(target) if d == 0 and i < len(x.shape) and x.shape[i] is None]
    return bool(copied) and len(copied) + target.count(-1) > 1


def inferred(cx, x, wanted):
    """``wanted`` with its -1 replaced by a size told from x's: x's sizes over the others' where every run-time
    size of the target is one of x's (exact), else the product of x's axes left between the entries before the
    -1 (matched to x's leading axes) and those after it (matched to x's trailing axes). A wrong match cannot
    give a wrong result: the element counts are checked at run time, and only the right size passes (an
    error, then, where the match was wrong)."""
    at = wanted.index(-1)
    if -1 in wanted[at + 1:]:
        cx.fail(f"the target shape {described(wanted)} has two -1s")
    have = [part for a, d in enumerate(x.shape) for part in factors(d if d is not None else (x, a))]
    other = [part for e in wanted if not (isinstance(e, int) and e == -1) for part in factors(e)]
    top, bottom = [p for p in have if not isinstance(p, int)], [p for p in other if not isinstance(p, int)]
    for p in list(bottom):            # the same (variable, axis) above and below cancels
        same = [q for q in top if q[0] is p[0] and q[1] == p[1]]
        if same:
            top.remove(same[0])
            bottom.remove(p)
    numerator = int(np.prod([p for p in have if isinstance(p, int)], dtype=np.int64))
    denominator = int(np.prod([p for p in other if isinstance(p, int)], dtype=np.int64))
    if not bottom and denominator and numerator % denominator == 0:      # exact: the input's sizes left over
        size = numerator // denominator
        for p in top:
            size = times(size, p)
        return wanted[:at] + [size] + wanted[at + 1:]
    first, head = matched(x, wanted[:at], range(len(x.shape)))
    last, tail = matched(x, wanted[at + 1:][::-1], range(len(x.shape) - 1, -1, -1))
    if first is None or last is None or first > len(x.shape) - last:
        cx.fail(f"a -1 beside sizes known only at run time (target {described(wanted)}, input shape {x.shape}): "
                f"its size cannot be told from the input's")
    middle = [x.shape[a] if x.shape[a] is not None else (x, a) for a in range(first, len(x.shape) - last)]
    size = head * tail
    for entry in middle:
        size = times(size, entry)
    return wanted[:at] + [size] + wanted[at + 1:]


def matched(x, entries, axes):
    """(how many of x's ``axes``, in order, ``entries`` in the same order cover, the factor of the last one they
    leave to the -1), or (None, 1): an axis is its own entry, equal ints, ints that multiply to its size (or,
    for the last entries, to a divisor of it), or an unknown size and one run-time entry with the ints next to
    it (B and heads of B * heads)."""
    axes, used, i = list(axes), 0, 0
    while i < len(entries):
        if used == len(axes):
            return None, 1
        axis, entry = axes[used], entries[i]
        size = x.shape[axis]
        if own(x, entry, axis):
            i += 1
        elif size is None and not isinstance(entry, int):
            i += 1
            while i < len(entries) and isinstance(entries[i], int):
                i += 1
        elif size is not None and isinstance(entry, int):
            product = 1
            while i < len(entries) and isinstance(entries[i], int) and product < size:
                product, i = product * entries[i], i + 1
            if product != size:
                if i == len(entries) and product > 0 and size % product == 0:
                    return used + 1, size // product        # the rest of this axis goes to the -1
                return None, 1
        else:
            return None, 1
        used += 1
    return used, 1


def described(wanted):
    def one(entry):
        if isinstance(entry, Product):
            return "*".join(one(e) for e in entry.entries)
        return str(entry) if isinstance(entry, int) else f"{entry[0].name}.shape[{entry[1]}]"
    return "(" + ", ".join(one(e) for e in wanted) + ")"


def general_reshape(cx, x, wanted, name):
    """x reshaped to ``wanted`` (ints, (variable, axis), Products): its elements split into the factors,
    with the element counts checked at run time, then each Product's factors merged. The trailing known
    factors are a static reshape; the run-time ones (``lead``) are split by unpack_axis, laid out by a zero
    tensor of their shape (the output's size over the trailing factors' product)."""
    g = cx.g
    if x.dtype == np.bool_:         # the count check adds: bools travel as int32
        return g.math.cast(general_reshape(cx, g.math.cast(x, "int32"), wanted, None), "bool", name=name)
    parts, groups = [], []
    for entry in wanted:
        split = factors(entry)
        groups.append((len(parts), len(parts) + len(split)))
        parts += split
    cut = len(parts)
    while isinstance(parts[cut - 1], int):      # the general path has a run-time factor: cut stays >= 1
        cut -= 1
    lead, trail = parts[:cut], parts[cut:]
    inner = int(np.prod(trail, dtype=np.int64))
    flat = g.shape.reshape(x, (1, -1, inner))    # a count not divisible by inner: reshape's error
    like = filled(cx, lead, 0, x.dtype)
    # One element per row of flat and like's elements, each with one 0 after: adding them needs equal counts
    # (no 1 to broadcast); like is split back from that sum, so the data's split depends on the check.
    zero = cx.var(np.zeros((1, 1), dtype=x.dtype))
    padded = [g.shape.concat([v, zero], axis=1) for v in (view(cx, flat, (slice(None), slice(None), 0)),
                                                         g.shape.reshape(like, (1, -1)))]
    checked = g.math.add(*padded, name=g.new_name(None, f"{cx.node.output[0] or 'reshape'}_element_count_check"))
    layout = unpack_axis(view(cx, checked, (slice(None), slice(0, -1))), g.shape.expand_dims(like, 0), axis=1,
                         like_start=1, count=len(lead), batch_axis=0, dynamic=())
    out = unpack_axis(flat, layout, axis=1, like_start=1, count=len(lead), batch_axis=0, dynamic=())
    out = view(cx, out, (0,))                    # lead + (inner,)
    if len(trail) > 1:
        out = split_axis(out, axis=len(lead), sizes=tuple(trail))
    elif not trail:
        out = view(cx, out, (Ellipsis, 0))
    for start, stop in reversed(groups):
        if stop - start > 1:
            out = merge_axes(out, start=start, stop=stop)
    return view(cx, out, (Ellipsis,), name) if name is not None else out


# --- Mod and Trilu ---------------------------------------------------------------------------------------

def mod(cx, node, ins, attrs):
    a, b = ins
    fmod = bool(attrs.get("fmod", 0))
    if isinstance(a, Dims) or isinstance(b, Dims):
        cx.fail("Mod of sizes known only at run time (from Shape) is not supported")
    if known(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind == "f" and not fmod:
            cx.fail("fmod=0 with floats is invalid ONNX (Mod of floats needs fmod=1)")
        return [(np.fmod(a, b) if fmod else np.mod(a, b)).astype(np.result_type(a, b))]
    g = cx.g
    a, b = cx.var(a), cx.var(b)
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        cx.fail(f"Mod of {a.dtype} tensors computed at run time is not supported (integers are)")
    dtype = np.result_type(a.dtype, b.dtype)
    # trunc(a / b), computed in float64 as integer Div is: exact while the values stay below 2**53
    whole = g.math.cast(g.math.div(a, b), dtype.name)
    rest = g.math.sub(a, g.math.mul(b, whole))                            # the sign of a (fmod)
    if fmod:
        return [view(cx, rest, (Ellipsis,), cx.name())]
    zero = np.asarray(0, dtype)
    wrong = g.math.ne(g.math.lt(rest, zero), g.math.lt(b, zero))          # a remainder of the other sign than b
    shift = g.math.where(g.math.eq(rest, zero), zero, g.math.where(wrong, b, zero))
    return [g.math.add(rest, shift, name=cx.name())]


def trilu(cx, node, ins, attrs):
    x = ins[0]
    k = ins[1] if len(ins) > 1 else None
    if isinstance(k, (Dims, Positions)) or (k is not None and not known(k)):
        cx.fail("k must be a constant")
    k = 0 if k is None else int(cx.static(k, "k").reshape(-1)[0])
    upper = bool(attrs.get("upper", 1))
    shape = np.shape(x) if known(x) else x.shape
    if len(shape) < 2:
        cx.fail(f"the input must have rank 2 or more, not shape {shape}")
    if known(x):
        return [np.triu(x, k) if upper else np.tril(x, k)]
    rank = len(shape)
    if None not in shape[-2:]:
        rows, cols = np.indices(shape[-2:])
        keep = cx.var((cols - rows >= k) if upper else (cols - rows <= k))
    else:
        g = cx.g
        rows = materialize(cx, Positions(x, rank - 2, 0, 1, np.int64, 2, 0))
        cols = materialize(cx, Positions(x, rank - 1, 0, 1, np.int64, 2, 1))
        offset = g.math.sub(cols, rows)
        keep = g.math.ge(offset, np.asarray(k, np.int64)) if upper else g.math.le(offset, np.asarray(k, np.int64))
    return [cx.g.math.where(keep, x, np.zeros((), x.dtype), name=cx.name())]


# Builders of op types load_ops and load_dims have, taking run-time sizes too.
SIZE_BUILDERS = {
    "Mul": mul, "Div": div, "Add": refuse_sizes(BUILDERS["Add"]), "Sub": refuse_sizes(BUILDERS["Sub"]),
    "Reshape": reshape,
}
# The op types PyTorch's attention exports add (joined to load_more's table).
ATTENTION_BUILDERS = {"Mod": mod, "Trilu": trilu}