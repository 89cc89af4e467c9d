"""Reverse-mode autodiff: a separate, immutable gradient graph built from each op's ``vjp`` rule.

``gradient_graph(g, wrt)`` copies the forward nodes the losses and ``wrt`` need
into a new Graph (same names, same attributes), then walks them in reverse
creation order calling each op's ``vjp(grad, out, *inputs, **attrs)`` with
Variables of the new graph, so the backward pass is itself made of graphview
ops, run by the same executor and watched by the same listeners. The forward
graph is never changed. The new graph reads VARIABLE and CONSTANT values from
the forward graph's value store at run time (a ChainMap over it), so
``g.set_value`` is seen without rebuilding. Gradient graphs are cached per
(loss names, wrt names) on the forward graph: names are never reused and
nodes never change, so nodes added later cannot make a cached entry wrong.
See ADR 0005.
"""
import collections

import numpy as np

from graphview import dtypes
from graphview.errors import DTypeError, GraphviewError, ShapeError
from graphview.execution import executor_of
from graphview.ops.math import add, cast
from graphview.ops.shape import broadcast_like
from graphview.registry import default_graph, get as get_op
from graphview.rule_context import gradients_needed
from graphview.shapes import format_shape
from graphview.variable import Kind, Variable

class GradientGraph:
    """A forward + backward graph: ``graph`` runs it, ``gradients[name]`` is d(sum of losses)/d(name)."""

    def __init__(self, forward, graph, losses, wrt, gradients):
        self.forward = forward
        self.graph = graph
        self.losses = losses
        self.wrt = wrt
        self.gradients = gradients
        needed = graph.ancestors([gradients[name].name for name in wrt])
        self._placeholders = [node for node in graph.nodes() if node.kind is Kind.PLACEHOLDER and node.name in needed]

    def run(self, placeholders, listeners=None, mode="gradients", check_shapes=True):
        """``{wrt name: gradient array}`` for the given placeholder values.

        A gradient whose run-time shape differs from its placeholder's or
        variable's (a rule that does not un-broadcast, hidden by unknown dims
        when the graph was built) raises ShapeError; ``check_shapes=False``
        leaves that to the caller (the gradient checker records it as a failure).
        """
        feeds = self.feeds(placeholders)
        # Checked here, not by the executor, so the message names the user's gradients, not internal nodes.
        self.graph.check_feeds(feeds, self._placeholders, f"the gradient of {' + '.join(map(repr, self.losses))} "
                               f"with respect to {', '.join(map(repr, self.wrt))}")
        names = [self.gradients[name].name for name in self.wrt]
        listeners = list(self.forward.listeners) + list(listeners or ())
        values = executor_of(self.graph).run(feeds, names, listeners, mode=mode)
        result, seen = {}, set()
        for name in self.wrt:
            array = values[self.gradients[name].name]
            expected = self.value_shape(name, feeds)
            if check_shapes and expected is not None and tuple(array.shape) != expected:
                raise ShapeError(f"the gradient of {name!r} has shape {format_shape(array.shape)} but {name!r} "
                                 f"has shape {format_shape(expected)} in this run; a gradient rule on the way "
                                 "does not sum its gradient back to its input (gv.unbroadcast(grad, input, out) does)")
            # Two wrt names may share one gradient node; never hand out one array twice.
            result[name] = array.copy() if id(array) in seen else array
            seen.add(id(array))
        return result

    def feeds(self, placeholders):
        """The placeholder values the gradient graph reads, after checking every name against the forward graph."""
        self.forward.check_feeds(placeholders)
        return {name: value for name, value in placeholders.items() if name in self.graph}

    def value_shape(self, name, feeds):
        """The run-time shape of placeholder or stored value ``name``; None for an op output."""
        if name in feeds:
            return tuple(np.shape(feeds[name]))
        if name in self.graph.store:
            return tuple(np.shape(self.graph.store[name]))
        return None

    def __repr__(self):
        return f"<gradient graph of {self.forward.name!r}: d({' + '.join(self.losses)})/d({', '.join(self.wrt)})>"


def gradient_graph(graph, wrt, losses=None, rules=None):
    """The cached :class:`GradientGraph` of ``graph``'s losses with respect to ``wrt``; ``rules`` maps
    node names to gradient rules used for those nodes instead of their ops' (the localizer's probe)."""
    losses = tuple(losses) if losses is not None else graph.loss_names
    if not losses:
        raise GraphviewError(f"graph {graph.name!r} has no loss; call g.set_loss(...) before asking for gradients")
    wrt = tuple(dict.fromkeys(_names(graph, wrt)))
    for name in wrt:
        node = graph.node(name)
        if not dtypes.is_float(node.dtype):
            raise DTypeError(f"cannot differentiate with respect to {name!r}: it has dtype {node.dtype.name}; "
                             "gradients exist only for floating-point variables")
    rules = dict(rules or {})
    key = (losses, wrt, tuple(sorted(rules.items(), key=lambda item: item[0])))
    with graph.lock:
        # Kept on the graph (not in a module-level weak map, whose values would hold their own keys): a
        # gradient graph and its forward graph refer to each other, a cycle the collector frees together.
        cache = graph.derived.setdefault("gradient graphs", {})
        if key not in cache:
            cache[key] = _build(graph, losses, wrt, rules)
        return cache[key]


def calculate_gradients(graph, placeholders, wrt, listeners=None):
    """``{name: gradient}`` of the sum of the graph's losses, for each name in ``wrt``."""
    return gradient_graph(graph, wrt).run(placeholders, listeners)


def _names(graph, wrt):
    items = [wrt] if isinstance(wrt, (str, Variable)) else list(wrt)
    if not items:
        raise GraphviewError("wrt is empty: name at least one variable to differentiate with respect to")
    return [graph.name_of(item) for item in items]


def _build(forward, losses, wrt, rules):
    needed = forward.ancestors(losses + wrt)
    order = [node for node in forward.nodes() if node.name in needed]
    # The gradient graph's constants go to its own layer; variables are read live from the forward store.
    graph = forward.clone(f"{forward.name}/grad", keep=needed, store=collections.ChainMap({}, forward.store),
                          keep_losses=False)
    token = default_graph.set(graph)
    try:
        with graph.name_scope("grad"):
            gradients = _backward(graph, order, losses, wrt, rules)
    finally:
        default_graph.reset(token)
    return GradientGraph(forward, graph, losses, wrt, gradients)


def _backward(graph, order, losses, wrt, rules):
    reach_loss = graph.ancestors(losses)
    depends = set(wrt)
    for node in order:     # no gradient passes through an integer or boolean value
        if dtypes.is_float(node.dtype) and any(name in depends for name in node.inputs):
            depends.add(node.name)
    relevant = reach_loss & depends
    pending = collections.defaultdict(list)
    for name in dict.fromkeys(losses):
        if name in relevant:
            loss = graph[name]
            pending[name].append(broadcast_like(graph.constant_like(1.0, loss.dtype), loss))
    totals = {}
    with gradients_needed(relevant):
        _propagate(graph, order, relevant, pending, totals, rules)
    result = {}
    for name in wrt:
        result[name] = totals.get(name)
        if result[name] is None:
            variable = graph[name]
            result[name] = broadcast_like(graph.constant_like(0.0, variable.dtype), variable)
    return result


def _propagate(graph, order, relevant, pending, totals, rules):
    """Walk the forward nodes backwards, summing each one's pending gradient contributions (into ``totals``)
    and passing them through its gradient rule to its inputs."""
    for node in reversed(order):
        if node.name not in relevant or not pending.get(node.name):
            continue
        grad = _sum(pending.pop(node.name))
        totals[node.name] = grad
        if node.kind is not Kind.ARRAY:
            continue
        definition = get_op(node.op)
        if definition.differentiable is False:
            if definition.no_gradient:
                raise GraphviewError(f"cannot differentiate through {node.op} (node {node.name!r}): "
                                     f"{definition.no_gradient}")
            continue
        if definition.vjp is None:
            declared = "is declared differentiable but" if definition.differentiable else "is not marked differentiable=False and"
            raise GraphviewError(f"op {node.op} (node {node.name!r}) {declared} has no gradient rule; "
                                 "give it one (defop's vjp= or gv.defvjp) or mark it differentiable=False")
        inputs = [graph[name] for name in node.inputs]
        rule = rules.get(node.name, definition.vjp)
        contributions = rule(grad, graph[node.name], *inputs, **node.attributes)
        if isinstance(contributions, Variable) or contributions is None:
            contributions = (contributions,)
        contributions = tuple(contributions)
        if len(contributions) != len(inputs):
            raise GraphviewError(f"the gradient rule of {node.op} (node {node.name!r}) returned "
                                 f"{len(contributions)} gradients for {len(inputs)} inputs")
        for source, contribution in zip(inputs, contributions):
            if contribution is None or source.name not in relevant:
                continue
            pending[source.name].append(_checked(node, source, contribution))


def _checked(node, source, grad):
    """A gradient contribution in its input's dtype, after checking its static shape."""
    if not isinstance(grad, Variable):
        raise GraphviewError(f"the gradient rule of {node.op} (node {node.name!r}) returned "
                             f"{type(grad).__name__} for input {source.name!r}; expected a graph variable or None")
    # Unknown (None) dims can only be checked at run time; everything known must agree now.
    mismatch = len(grad.shape) != len(source.shape) or any(
        g is not None and s is not None and g != s for g, s in zip(grad.shape, source.shape))
    if mismatch:
        raise ShapeError(f"the gradient rule of {node.op} (node {node.name!r}) gave a gradient of shape "
                         f"{format_shape(grad.shape)} for input {source.name!r} of shape {format_shape(source.shape)}; "
                         "a rule for a broadcasting op must sum the gradient back to its input (gv.unbroadcast(grad, input, out) does)")
    if grad.dtype != source.dtype:
        grad = cast(grad, source.dtype)
    return grad


def _sum(grads):
    total = grads[0]
    for grad in grads[1:]:
        total = add(total, grad)
    return total

