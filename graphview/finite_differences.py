"""Finite differences in a private copy of a graph: the pieces the gradient checker and its localiser share.

``float64_copy`` makes the private float64 copy every check runs in, ``Loss`` is the summed loss as a
function of one array of that copy (perturbed in place), ``central_difference`` and
``projected_difference`` differentiate it numerically, and ``relative_error`` compares the results
(ADR 0007).
"""
import dataclasses
import math

import numpy as np

from graphview import dtypes
from graphview.errors import GraphviewError
from graphview.execution import executor_of
from graphview.variable import Kind


def relative_error(analytic, numeric):
    """|a - n| / (|a| + |n|), 0 when both are 0."""
    if analytic == 0.0 and numeric == 0.0:
        return 0.0
    return abs(analytic - numeric) / (abs(analytic) + abs(numeric))


def float64_copy(graph, placeholders):
    """``(copy, feeds, converted)``: a private copy of ``graph`` with float32 made float64, and its feeds."""
    graph.check_feeds(placeholders)
    work = graph.clone(f"{graph.name}/check", rewrite=_as_float64)
    converted = any(copy.dtype != node.dtype or copy.attrs != node.attrs
                    for copy, node in zip(work.nodes(), graph.nodes()))
    feeds = {}
    for name, value in placeholders.items():
        array = np.asarray(value)
        target = dtypes.FLOAT64 if array.dtype == dtypes.FLOAT32 else array.dtype
        converted |= target != array.dtype
        feeds[name] = same_layout_copy(array, target)
    return work, feeds, converted


def _as_float64(node, clone):
    """``node`` with a float32 dtype, and a float32 ``dtype`` attribute, made float64."""
    dtype = dtypes.FLOAT64 if node.dtype == dtypes.FLOAT32 else node.dtype
    attrs = tuple((k, "float64" if k == "dtype" and v == "float32" else v) for k, v in node.attrs)
    return dataclasses.replace(node, dtype=dtype, attrs=attrs)


def same_layout_copy(array, dtype):
    """A copy of ``array`` in ``dtype`` that keeps its layout kind (C, Fortran, or strided)."""
    if array.flags.c_contiguous or array.ndim == 0:
        return np.array(array, dtype=dtype, order="C", copy=True)
    if array.flags.f_contiguous:
        return np.array(array, dtype=dtype, order="F", copy=True)
    doubled = np.zeros((array.shape[0] * 2,) + array.shape[1:], dtype)
    view = doubled[::2]
    view[...] = array
    return view


class Loss:
    """The summed loss as a function of one variable's value, perturbed in place in the private copy."""

    def __init__(self, work, feeds, name):
        node = work.node(name)
        self.graph, self.name = work, name
        if node.kind is Kind.ARRAY:
            # Cut the graph at the activation: it becomes a placeholder fed with its forward value.
            value = executor_of(work).run(feeds, [name])[name]
            self.graph = cut(work, name)
            feeds = dict(feeds, **{name: np.array(value, order="C", copy=True)})
        self.plan, self.feeds = executor_of(self.graph).plan(
            {k: v for k, v in feeds.items() if k in self.graph}, self.graph.loss_names)
        if node.kind in (Kind.VARIABLE, Kind.CONSTANT):
            self.array = self.graph.stored(name)
        elif name in self.feeds:
            self.array = self.feeds[name]
        elif name in feeds:
            self.array = feeds[name]    # a placeholder the losses do not read
        else:
            raise GraphviewError(f"check_gradients: placeholder {name!r} needs a value to be checked")

    def __call__(self):
        values = self.plan.run(self.feeds, None, None)
        # The same sum as autodiff's: each loss once, whatever set_loss was given.
        return math.fsum(float(np.sum(values[name], dtype=np.float64)) for name in dict.fromkeys(self.graph.loss_names))


def cut(work, name):
    """A copy of ``work`` in which ARRAY value ``name`` is a placeholder (its inputs stay, unread)."""
    def as_placeholder(node, clone):
        if node.name != name:
            return node
        return dataclasses.replace(node, kind=Kind.PLACEHOLDER, op=None, inputs=(), attrs=())
    return work.clone(f"{work.name}/cut-{name}", rewrite=as_placeholder, store=work.store)


def central_difference(loss, index, eps):
    """``(L(x + eps e) - L(x - eps e)) / 2 eps`` for the unit element ``index`` of ``loss.array`` (restored after)."""
    array = loss.array
    original = array[index]
    try:
        array[index] = original + eps
        plus = loss()
        array[index] = original - eps
        minus = loss()
    finally:
        array[index] = original
    return (plus - minus) / (2 * eps)


def projected_difference(loss, direction, eps):
    """``(L(x + eps u) - L(x - eps u)) / 2 eps`` along the array ``direction`` u (``loss.array`` restored after)."""
    array = loss.array
    original = array.copy()
    try:
        array[...] = original + eps * direction
        plus = loss()
        array[...] = original - eps * direction
        minus = loss()
    finally:
        array[...] = original
    return (plus - minus) / (2 * eps)
