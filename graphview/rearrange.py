"""``gv.rearrange(x, "b h w c -> b (h w) c")``: einops-style patterns compiled to cached view plans;
``gv.reduce(x, "b t f -> b f", "mean")``: the same patterns with a reduction in the middle.

A pattern names every axis of x on the left and says on the right how the
result is laid out. A parenthesised group on the left splits an axis (give the
sizes as keywords, all but one may be inferred), a group on the right merges
axes, ``1`` or ``()`` on the right adds an axis of size 1 and on the left drops
one. The plan is: split, squeeze, permute, merge, expand. Permute, split,
squeeze and expand are zero-copy views; a merge is a view when the merged axes
are adjacent in memory (contiguous data, even after a permute that keeps them
in order), otherwise a copy (``g.explain`` shows which).

Every step is cached per (input, step) in the graph's dims table, so
``rearrange`` twice, or a layout view and a pattern meaning the same, give the
same variables. The layout views of :mod:`graphview.layouts.views` are compiled
here too.
"""
import math
import re

import numpy as np

from graphview import core, dims as dimmath, dtypes
from graphview.dims import Dim, batch_dim
from graphview.errors import DTypeError, GraphviewError
from graphview.layouts import ops as layout_ops, table
from graphview.ops.view import apply_view
from graphview.registry import default_graph, get as get_op, op as registered_op
from graphview.variable import Kind, Variable

_TOKEN = re.compile(r"\(|\)|[A-Za-z_][A-Za-z0-9_]*|[0-9]+|\.\.\.|\S")
ELLIPSIS = "..."
ANONYMOUS = "#"   # "2#r3": the anonymous axis of size 2 at token 3 of the right side; '#' is in no name


class PatternError(GraphviewError, ValueError):
    """A rearrange pattern that does not parse or does not fit the input."""


def parse_side(text, where, side):
    """A side (``"l"`` or ``"r"``) of a pattern as a list of items: a name, ``"1"``, or a tuple of names.

    A number n > 1 is an anonymous axis of size n, named ``"n#<side><i>"`` (i: the token's position), so
    that two anonymous axes are never the same axis, on one side or across the two, as in einops."""
    items, group = [], None
    for position, token in enumerate(_TOKEN.findall(text)):
        if token.isascii() and token.isdigit():
            size = int(token)
            if size == 0:
                raise PatternError(f"{where}: an anonymous axis must have a size of at least 1, not {token}")
            token = "1" if size == 1 else f"{size}{ANONYMOUS}{side}{position}"
        if token == "(":
            if group is not None:
                raise PatternError(f"{where}: groups cannot nest")
            group = []
        elif token == ")":
            if group is None:
                raise PatternError(f"{where}: ')' without '('")
            items.append(tuple(group) if group else "1")
            group = None
        elif token == "1":
            (group if group is not None else items).append("1")
        elif token.isidentifier() or token == ELLIPSIS or anonymous_size(token):
            (group if group is not None else items).append(token)
        else:
            raise PatternError(f"{where}: unexpected {token!r}")
    if group is not None:
        raise PatternError(f"{where}: '(' without ')'")
    return items


def expand_ellipsis(left, right, rank, where, reducing=False):
    """Both sides with ``...`` replaced by names for the axes the left side does not name.

    When ``reducing``, ``...`` may be on the left only: the axes it covers are reduced.
    """
    counts = [sum(item.count(ELLIPSIS) if isinstance(item, tuple) else item == ELLIPSIS for item in side)
              for side in (left, right)]
    if max(counts) > 1:
        raise PatternError(f"{where}: '...' may appear at most once on each side")
    if counts[0] != counts[1] and not (reducing and counts[0]):
        side = "left" if counts[1] else "right"
        raise PatternError(f"{where}: '...' on one side only (add it to the {side} side)")
    if not counts[0]:
        return left, right
    if any(isinstance(item, tuple) and ELLIPSIS in item for item in left):
        raise PatternError(f"{where}: '...' cannot be split, so it cannot sit in a group on the left")
    missing = rank - (len(left) - 1)
    if missing < 0:
        raise PatternError(f"{where}: the left side names {len(left) - 1} axes besides '...' "
                           f"but the input has {rank}")
    names = tuple(f"...{i}" for i in range(missing))   # cannot clash: not identifiers

    def expand(side):
        result = []
        for item in side:
            if item == ELLIPSIS:
                result.extend(names)
            elif isinstance(item, tuple) and ELLIPSIS in item:
                grouped = tuple(n for part in item for n in (names if part == ELLIPSIS else (part,)))
                result.append(grouped if grouped else "1")
            else:
                result.append(item)
        return result

    return expand(left), expand(right)


def anonymous_size(name):
    """The size of the anonymous axis ``name`` (a number in the pattern), or None for a named axis."""
    size, mark, _ = name.partition(ANONYMOUS)
    return int(size) if mark and size.isdigit() else None


def _shown(names):
    """Names as the pattern wrote them: an anonymous axis as its size."""
    return [str(anonymous_size(n) or n) for n in names]


def _names(items):
    result = []
    for item in items:
        if isinstance(item, tuple):
            result.extend(n for n in item if n != "1")
        elif item != "1":
            result.append(item)
    return result


def rearrange(x, pattern, /, **sizes):
    """x with its axes split, dropped, permuted, merged and added as ``pattern`` says (cached)."""
    if not isinstance(x, Variable):
        return _on_array(rearrange, x, pattern, (), sizes)
    left, right, sizes, where = _parse(x, pattern, sizes, "rearrange", "'a b c -> c (a b)'")
    ins, outs = _names(left), _names(right)
    anonymous = [n for n in ins + outs if anonymous_size(n)]
    if anonymous:
        raise PatternError(f"{where}: anonymous axes ({', '.join(_shown(anonymous))}) are for gv.reduce, which "
                           "reduces them; rearrange takes only 1 or () (a unit axis), as einops")
    if set(ins) != set(outs):
        raise PatternError(f"{where}: names on one side only: {sorted(set(ins) ^ set(outs))}")
    return _planned(x, left, right, sizes, where)


REDUCTIONS = ("sum", "mean", "max", "min", "prod", "logsumexp")


def reduce(x, pattern, /, reduction, **sizes):
    """einops' reduce: the axes named on the left but not on the right are reduced by ``reduction``.

    ``gv.reduce(x, "b (h h2) (w w2) c -> b h w c", "max", h2=2, w2=2)`` is 2x2 max
    pooling. The left side is split first, the reduction is the graph's own op (so
    a dim with lengths is masked, as for ``g.math.mean(x, axis=dim)``), and the
    right side is then laid out as rearrange does. ``...`` may be on the left only:
    the axes it covers are reduced. A number n > 1 on the left is an anonymous axis of
    size n, which is reduced (``"(c 2) h -> c h"``), as in einops.
    """
    if not isinstance(x, Variable):
        return _on_array(reduce, x, pattern, (reduction,), sizes)
    if reduction not in REDUCTIONS:
        raise PatternError(f"reduce {pattern!r}: reduction must be one of {', '.join(REDUCTIONS)}, "
                           f"not {reduction!r}")
    left, right, sizes, where = _parse(x, pattern, sizes, "reduce", "'b t f -> b f'", reducing=True)
    ins, outs = _names(left), _names(right)
    anonymous = [n for n in outs if anonymous_size(n)]
    if anonymous:
        raise PatternError(f"{where}: anonymous axes ({', '.join(_shown(anonymous))}) on the right side; each "
                           "number is an axis of its own, which reduce cannot create (as einops; use 1 or () "
                           "for a new unit axis, a name to keep an axis)")
    extra = sorted(set(outs) - set(ins))
    if extra:
        raise PatternError(f"{where}: {_shown(extra)} on the right side only; reduce cannot create axes "
                           "(use 1 or () for a new unit axis)")
    sizes = {**sizes, **{n: anonymous_size(n) for n in ins if anonymous_size(n)}}
    split = _planned(x, left, ins, sizes, where)
    axes = tuple(position for position, name in enumerate(ins) if name not in outs)
    if axes:
        split = getattr(x.graph.math, reduction)(split, axis=axes)
    return _planned(split, [n for n in ins if n in outs], right, {}, where)


def _on_array(function, x, pattern, args, sizes):
    """``function`` (rearrange or reduce) applied to an array, as einops does for NumPy arrays: the
    pattern is compiled on a one-placeholder graph (named "array") that computes it."""
    what = f"{function.__name__} {pattern!r}" if isinstance(pattern, str) else function.__name__
    names = ", ".join(d.name for d in dtypes.ALL)
    try:
        array = np.asarray(x)
    except (TypeError, ValueError) as error:   # ragged nested lists, objects NumPy cannot take
        raise DTypeError(f"{what}: x must be a graphview Variable or an array, not {type(x).__name__} "
                         f"({error})") from None
    if array.dtype not in dtypes.ALL:
        shown = f"an array of dtype {array.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        raise DTypeError(f"{what}: x must be a graphview Variable or an array of {names}, not {shown}")
    graph = core.new_graph(f"gv.{function.__name__}")
    result = function(graph.placeholder("array", array.shape, array.dtype), pattern, *args, **sizes)
    # An ndarray goes to the placeholder as given, so that its check refuses a masked array (whose mask
    # np.asarray would drop) exactly as it does for any graph.
    return graph.output({"array": x if isinstance(x, np.ndarray) else array}, [result])[result.name]


def _parse(x, pattern, sizes, what, example, reducing=False):
    """(left, right, sizes, where): both sides parsed and checked against x, the sizes as ints;
    ``where`` prefixes errors."""
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        raise PatternError(f"{what}: the pattern must look like {example}, not {pattern!r}")
    where = f"{what} {pattern!r}"
    left_text, right_text = pattern.split("->")
    left, right = parse_side(left_text, where, "l"), parse_side(right_text, where, "r")
    left, right = expand_ellipsis(left, right, len(x.shape), where, reducing)
    if len(left) != len(x.shape):
        raise PatternError(f"{where}: the left side names {len(left)} axes but {x.name!r} has "
                           f"{len(x.shape)} (shape {x.shape})")
    for side, names in (("left", _names(left)), ("right", _names(right))):
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise PatternError(f"{where}: {', '.join(repeated)} repeated on the {side} side")
    unknown = sorted(set(sizes) - set(_names(left)))
    if unknown:
        raise PatternError(f"{where}: sizes given for {unknown}, which are not in the pattern")
    for name, size in sizes.items():
        if isinstance(size, bool) or not hasattr(size, "__index__") or size.__index__() < 0:
            raise PatternError(f"{where}: {name}={size!r} is not a size (an int >= 0)")
    return left, right, {name: size.__index__() for name, size in sizes.items()}, where


def _planned(x, left, right, sizes, where):
    """The cached plan taking x laid out as ``left`` to ``right`` (parsed sides with the same names)."""
    key = ("rearrange", x.name, " ".join(map(str, left)) + " -> " + " ".join(map(str, right)),
           tuple(sorted(sizes.items())))
    entries = table.dims_table(x.graph)
    if key in entries.cache:
        return x.graph[entries.cache[key]]
    token = default_graph.set(x.graph)
    try:
        result = _compile(x, left, right, sizes, where)
    finally:
        default_graph.reset(token)
    entries.cache[key] = result.name
    return result


def _compile(x, left, right, sizes, where):
    current, dims = x, list(table.dims_of(x))
    axes = []   # the elementary names, in the current order
    # Splits and squeezes, from the last axis back so earlier positions stay valid.
    plan = []
    for position, item in enumerate(left):
        if item == "1":
            plan.append(("squeeze", position, None))
        elif isinstance(item, tuple):
            plan.append(("split", position, item))
    for kind, position, item in reversed(plan):
        if kind == "squeeze":
            size = current.shape[position]
            if size not in (1, None):
                raise PatternError(f"{where}: axis {position} has size {size}, not 1")
            current = step(current, "squeeze", dims[:position] + dims[position + 1:], axis=position)
            del dims[position]
        else:
            current, new_dims = _split(current, dims, position, item, sizes, where)
            dims[position:position + 1] = new_dims
    for item in left:
        if isinstance(item, tuple):
            axes.extend(n for n in item if n != "1")
        elif item != "1":
            axes.append(item)
    for name, size in sizes.items():
        position = axes.index(name)
        if current.shape[position] is not None and current.shape[position] != size:
            given = f"the pattern's {size} is an axis of size {size}" if anonymous_size(name) else f"{name}={size}"
            raise PatternError(f"{where}: {given} but that axis has size {current.shape[position]}")
    order = _names(right)
    perm = tuple(axes.index(n) for n in order)
    # Which axes a merge can join without a copy: while the data is C-contiguous before the permute,
    # each axis covers a span of that contiguous layout, and adjacent spans merge as a view.
    contiguous = contiguity(current)
    covers = [(p, p) for p in perm]
    if perm != tuple(range(len(perm))):
        current = step(current, "permute", [dims[p] for p in perm], perm=perm)
        dims = [dims[p] for p in perm]
    # Merges and new axes, from the last item back.
    spans, position = [], 0
    for item in right:
        width = len([n for n in item if n != "1"]) if isinstance(item, tuple) else (0 if item == "1" else 1)
        spans.append((item, position, width))
        position += width
    for item, start, width in reversed(spans):
        if width == 0:
            current = step(current, "expand_dims", dims[:start] + [None] + dims[start:], axis=start)
            dims.insert(start, None)
            covers.insert(start, None)
        elif isinstance(item, tuple) and width > 1:
            merged = dimmath.product(dims[start:start + width]) if None not in dims[start:start + width] else None
            new_dims = dims[:start] + [merged] + dims[start + width:]
            group = covers[start:start + width]
            packed = _packed_merge(current, dims, start, width, merged, new_dims)
            if packed is not None:
                current, dims = packed, new_dims
                contiguous, covers = True, [(i, i) for i in range(len(dims))]
                continue
            view = bool(contiguous) and None not in group and all(a[1] + 1 == b[0] for a, b in zip(group, group[1:]))
            current = step(current, "merge_axes" if view else "merge_axes_copy", new_dims,   # unknown: copy
                           start=start, stop=start + width)
            dims = new_dims
            if view:
                covers[start:start + width] = [(group[0][0], group[-1][1])]
            else:   # the copy is C-contiguous in the current order
                contiguous, covers = True, [(i, i) for i in range(len(dims))]
    return current


def _packed_merge(x, dims, start, width, merged, new_dims):
    """The merge of ``dims[start:start + width]`` as pack_axes when a dim with lengths is not the outer
    one (``(f t)``, ``(t1 t2)``), so that the merged dim's padding is at its end and it has lengths
    (the product of its factors' lengths and sizes); None when a plain merge keeps the lengths right."""
    packing = layout_ops.needs_packing(x, dims, start, start + width)
    if merged is None or packing is None:
        return None
    lengths, dynamic, batch_axis = packing
    result = step(x, "pack_axes", new_dims, inputs=lengths, start=start, stop=start + width,
                  batch_axis=batch_axis, dynamic=dynamic)
    layout_ops.declare_merged_lengths(x.graph, merged, dims[start:start + width])
    table.dims_table(x.graph).cache.setdefault(("packed", id(merged.canonical())), (x.name, start))
    return result


def _packed_source(graph, dim):
    """(the tensor a packed ``dim`` was merged from, the merge's first axis), or None: recorded when the
    merge was built, else (a loaded graph, whose cache was not saved) found from its pack_axes node."""
    entry = table.dims_table(graph).cache.get(("packed", id(dim.canonical())))
    if entry is not None:
        return graph[entry[0]], entry[1]
    for node in graph.nodes():
        if node.op == "pack_axes":
            start = node.attributes["start"]
            tagged = table.dims_of(graph[node.name])
            if start < len(tagged) and tagged[start] is not None and tagged[start] == dim:
                return graph[node.inputs[0]], start
    return None


def _unpacked_split(current, dims, position, found, where):
    """The split of a merged dim built by pack_axes back into its factors (unpack_axis into the padded
    sizes of the tensor it was merged from), or None when ``dims[position]`` was not packed."""
    if found is None or batch_dim not in dims:
        return None
    lengths, dynamic = layout_ops.lengths_inputs(current.graph, found)
    if not dynamic or dynamic == (0,):
        return None   # padding at the end: a plain split
    packed = _packed_source(current.graph, dims[position])
    if packed is None:
        raise PatternError(f"{where}: {dims[position]!r} merges dims with lengths ({', '.join(map(str, found))}) "
                           f"but was not built by a merge in graph {current.graph.name!r}, so where its padding "
                           "lies is unknown; merge with gv.rearrange in this graph, or tag the axis with a new dim")
    like, like_start = packed
    new_dims = dims[:position] + list(found) + dims[position + 1:]
    return step(current, "unpack_axis", new_dims, inputs=[like, *lengths], axis=position, like_start=like_start,
                count=len(found), batch_axis=dims.index(batch_dim), dynamic=dynamic), found


def _split(current, dims, position, names, sizes, where):
    names = [n for n in names if n != "1"]
    found = dimmath.factors(dims[position], len(names)) if dims[position] is not None else None
    if found is not None and all(sizes.get(n, -1) in (-1, f.size) for n, f in zip(names, found)):
        unpacked = _unpacked_split(current, dims, position, found, where)
        if unpacked is not None:
            return unpacked
    given = [sizes.get(n, -1) for n in names]
    size = current.shape[position]
    source = dims[position]
    found = dimmath.factors(source, len(names)) if source is not None else None
    if found is not None and any(g != -1 and f.size != g for f, g in zip(found, given)):
        found = None   # the sizes asked for split the axis differently from how it was merged
    if found is not None:
        given = [f.size if f.size is not None else g for f, g in zip(found, given)]
    if given.count(-1) > 1:
        raise PatternError(f"{where}: give the sizes of all but one of {names}")
    if found is None:
        found = [Dim(n, v) if v != -1 else None for n, v in zip(names, given)]
        if None in found:
            missing = found.index(None)
            rest = [d for d in found if d is not None]
            if source is not None and missing == 0:
                found[0] = source // dimmath.product(rest)   # undone when source was merged so
            else:
                known = dimmath.product([d.size for d in rest]) if rest else 1
                found[missing] = Dim(names[missing], None if size is None or not known else size // known)
    return step(current, "split_axis", dims[:position] + list(found) + dims[position + 1:],
                axis=position, sizes=tuple(given)), found


def step(x, op, dims, inputs=(), **attrs):
    """One cached view step: the same (input, op, attributes) always gives the same variable."""
    entries = table.dims_table(x.graph)
    key = ("step", x.name, op, tuple(v.name for v in inputs), tuple(sorted(attrs.items())))
    if key in entries.cache:
        return x.graph[entries.cache[key]]
    result = registered_op(op)(x, *inputs, **attrs)
    table.set_dims(result, [d if d is None or d.size in (None, s) else None for d, s in zip(dims, result.shape)])
    entries.cache[key] = result.name
    return result


_PRESERVING = {"merge_axes", "split_axis", "reshape", "squeeze", "expand_dims", "reshape_like"}


def contiguity(x):
    """True / False when ``x`` is known at build time to be C-contiguous or not; None when unknown.

    Placeholders, variables and constants are taken to be fed C-contiguous.
    """
    node = x.node
    if node.kind is not Kind.ARRAY:
        return True
    definition = get_op(node.op)
    if not definition.view:
        return True
    source = x.graph[node.inputs[0]]
    if node.op in _PRESERVING:
        return contiguity(source)
    if node.op == "permute":
        perm = node.attributes.get("perm")
        return contiguity(source) if perm is not None and perm == tuple(range(len(perm))) else False
    if node.op == "create_view" and len(node.inputs) == 1 and contiguity(source):
        return _static_view_contiguity(source.shape, node.attributes["descriptors"])
    return None


def _static_view_contiguity(shape, entries):
    """Whether the view ``entries`` select of a C-contiguous array of ``shape`` is C-contiguous, tried
    on stand-ins (no memory: a one-element buffer with real strides) whose unknown sizes exceed every
    start, end and stride in the descriptors, so that a stride keeps more than one element; None when
    the stand-ins disagree or cannot take the view."""
    largest = max((abs(value) for entry in entries for value in entry), default=0)
    answers = set()
    for probe in (largest + 2, 2 * largest + 5):
        sizes = tuple(probe if d is None else d for d in shape)
        strides = tuple(8 * math.prod(sizes[i + 1:]) for i in range(len(sizes)))
        try:
            stand_in = np.lib.stride_tricks.as_strided(np.zeros(1), sizes, strides, writeable=False)
            answers.add(bool(apply_view(stand_in, entries).flags.c_contiguous))
        except (GraphviewError, IndexError, ValueError, OverflowError):
            return None
    return answers.pop() if len(answers) == 1 else None
