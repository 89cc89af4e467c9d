"""Einsum and Tile in ``graphview.onnx.load`` (what hand-written attention, ``torch.einsum`` and ``repeat``, exports).

* ``Einsum`` of one or two operands, explicit (``->``) or implicit, without ``...`` and without a letter twice in
  one operand (a diagonal): each letter is a batch letter (in both operands and the output), a contracted one (in
  both, not in the output), or a free one (in one operand; summed first where the output lacks it). With at most
  one free letter per operand and at most one contracted letter it is one batched ``matmul`` (operands permuted to
  (batch, free, contracted) and (batch, contracted, free)); otherwise the operands are broadcast against each
  other, multiplied and summed over the contracted letters, which holds the whole product in memory.
* ``Tile`` with constant repeats is a concat of copies along each repeated axis (sizes may be unknown); a repeat
  that is a size known only at run time (``x.mean(1, keepdim=True).repeat(1, x.shape[1], 1)``) is a broadcast
  where the axis has size 1, and refused by name elsewhere.

EINSUM_BUILDERS maps the two op types to their builders (load_more joins them to its table).
"""
import numpy as np

from graphview.onnx.load_dims import filled
from graphview.onnx.load_ops import Dims, known, view
from graphview.ops.shape import broadcast_like


def parse(cx, equation, count):
    text = equation.decode() if isinstance(equation, bytes) else equation
    text = text.replace(" ", "")
    if "." in text:
        cx.fail(f"equation {text!r}: an ellipsis (...) is not supported")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != count or not all(t.isalpha() or t == "" for t in terms + [output]):
        cx.fail(f"equation {text!r} does not describe {count} operand(s) with letters")
    if any(len(set(t)) != len(t) for t in terms) or len(set(output)) != len(output):
        cx.fail(f"equation {text!r}: a letter twice in one term (a diagonal or a repeated output) is not supported")
    if not arrow:          # implicit: the letters seen once, in alphabetical order
        output = "".join(sorted(c for c in set(inputs) if c != "," and inputs.count(c) == 1))
    if set(output) - set("".join(terms)):
        cx.fail(f"equation {text!r}: output letters {sorted(set(output) - set(''.join(terms)))} are in no operand")
    return terms, output


def summed(g, x, term, keep):
    """x (letters ``term``) summed over the letters not in ``keep``; (value, its letters)."""
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if not axes:
        return x, term
    return g.math.sum(x, axis=axes), "".join(c for c in term if c in keep)


def arranged(g, x, term, order):
    """x (letters ``term``, a subset of ``order``) permuted into ``order``'s sequence, size-1 axes for the rest."""
    present = [c for c in order if c in term]
    if present != list(term):
        x = g.shape.permute(x, *[term.index(c) for c in present])
    for position, c in enumerate(order):
        if c not in term:
            x = g.shape.expand_dims(x, position)
    return x


def einsum(cx, node, ins, attrs):
    terms, output = parse(cx, attrs.get("equation", ""), len(ins))
    if len(ins) > 2:
        cx.fail(f"{len(ins)} operands: Einsum of one or two operands is supported")
    if known(*ins):
        return [np.einsum(f"{','.join(terms)}->{output}", *ins)]
    g = cx.g
    xs = [cx.var(v) for v in ins]
    for x, term in zip(xs, terms):
        if len(x.shape) != len(term):
            cx.fail(f"operand of shape {x.shape} for the term {term!r}")
    if len(xs) == 1:
        x, term = summed(g, xs[0], terms[0], output)
        return [g.shape.permute(x, *[term.index(c) for c in output], name=cx.name()) if term != output else
                view(cx, x, (Ellipsis,), cx.name())]
    (a, sa), (b, sb) = (summed(g, x, t, set(output) | set(other)) for x, t, other in
                        ((xs[0], terms[0], terms[1]), (xs[1], terms[1], terms[0])))
    batch = [c for c in output if c in sa and c in sb]
    contracted = [c for c in sa if c in sb and c not in output]
    left, right = [c for c in sa if c not in sb], [c for c in sb if c not in sa]
    if len(left) <= 1 and len(right) <= 1 and len(contracted) <= 1:
        rows, cols, inner = left or ["1"], right or ["2"], contracted or ["3"]    # "1", "2", "3": size-1 axes
        product = g.math.matmul(arranged(g, a, sa, batch + rows + inner), arranged(g, b, sb, batch + inner + cols))
        letters = batch + rows + cols
        drop = tuple(i for i, c in enumerate(letters) if c in "12")
        if drop:
            product = g.shape.squeeze(product, axis=drop)
            letters = [c for c in letters if c not in "12"]
    else:
        order = batch + left + right + contracted
        product = g.math.mul(arranged(g, a, sa, order), arranged(g, b, sb, order))
        if contracted:
            product = g.math.sum(product, axis=tuple(range(len(order) - len(contracted), len(order))))
        letters = batch + left + right
    if letters == list(output):
        return [view(cx, product, (Ellipsis,), cx.name())]
    return [g.shape.permute(product, *[letters.index(c) for c in output], name=cx.name())]


def tile(cx, node, ins, attrs):
    x, repeats = ins
    if isinstance(repeats, Dims):
        return [tile_sizes(cx, cx.var(x), repeats.entries)]
    repeats = [int(r) for r in cx.static(repeats, "repeats").reshape(-1)]
    rank = np.ndim(x) if known(x) else len(x.shape)
    if len(repeats) != rank or min(repeats, default=1) < 0:
        cx.fail(f"repeats {repeats} for an input of rank {rank} (one count >= 0 per axis)")
    if known(x):
        return [np.tile(x, repeats)]
    if 0 in repeats:
        cx.fail(f"repeats {repeats} with a 0 (an empty output) are not supported")
    return [view(cx, copies(cx, cx.var(x), repeats), (Ellipsis,), cx.name())]


def copies(cx, x, repeats):
    for axis, count in enumerate(repeats):
        if count > 1:
            x = cx.g.shape.concat([x] * count, axis=axis)
    return x


def tile_sizes(cx, x, repeats):
    """Tile by repeats of which some are sizes known only at run time: those on axes of size 1 (a broadcast)."""
    if len(repeats) != len(x.shape):
        cx.fail(f"{len(repeats)} repeats for an input of rank {len(x.shape)}")
    ints = [r if isinstance(r, int) else 1 for r in repeats]
    if any(not isinstance(r, (int, tuple)) or not isinstance(r, int) and x.shape[a] != 1
           for a, r in enumerate(repeats)):
        cx.fail(f"repeats known only at run time are supported on axes of size 1 only (where Tile is a broadcast), "
                f"not for an input of shape {x.shape}")
    x = copies(cx, x, ints)
    like = filled(cx, [r if not isinstance(r, int) else x.shape[a] if x.shape[a] is not None else (x, a)
                       for a, r in enumerate(repeats)], 0, x.dtype)
    return view(cx, broadcast_like(x, like), (Ellipsis,), cx.name())


EINSUM_BUILDERS = {"Einsum": einsum, "Tile": tile}
