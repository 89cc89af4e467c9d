"""Localising a failed gradient check: the op whose gradient rule disagrees with finite differences (ADR 0007).

A failed check names a variable; the wrong rule can be any op between it and the losses. Every edge
(an op reading one floating-point input) on that way gets its own check: in a probe copy of the graph
the op reads ``input + zero``, where ``zero`` is a placeholder fed zeros, so the gradient of that sum
(read by the op alone) is exactly what the op's rule sends back along that edge, and central
differences along one random direction of ``zero`` say what it should be. Walking from the losses
back toward the variable, the first edge that disagrees names the culprit: every edge out of its op
was checked before it and agreed, so the op's output gradient agrees and the gradient its rule gives
that input does not.

Only a failed check pays: the probe is built on the first failure, one analytic run serves every edge,
and each edge costs two forward runs, at most once per check.
"""
import dataclasses
import math
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np

from graphview import dtypes
from graphview.autodiff import gradient_graph
from graphview.errors import GraphviewError
from graphview.execution import executor_of
from graphview.finite_differences import Loss, projected_difference, relative_error
from graphview.registry import get as get_op
from graphview.variable import Kind


@dataclass(frozen=True)
class Culprit:
    """The op whose rule gives input ``position`` (node ``input``) a gradient that disagrees with central
    differences, though the gradient of its own output agrees; ``analytic`` and ``numeric`` are that
    input's gradient projected on one random unit direction (``analytic`` NaN and ``shapes`` set when
    the rule's gradient does not even have the input's shape)."""
    op: str
    node: str
    input: str
    position: int
    analytic: float
    numeric: float
    shapes: Optional[tuple] = None  # (gradient shape, input shape) when the rule gives the wrong shape
    kink: Optional[tuple] = None    # (forward, backward) one-sided differences that disagree: not the rule

    @property
    def rel_error(self):
        return relative_error(self.analytic, self.numeric)

    def __str__(self):
        rule = f"the gradient rule of op {self.op!r} (node {self.node!r})"
        if self.kink is not None:
            return (f"the loss is not differentiable within eps of this point at op {self.op!r} (node {self.node!r}, "
                    f"input {self.position} {self.input!r}): its one-sided differences along a random direction "
                    f"disagree (forward "
                    f"{self.kink[0]:.6g}, backward {self.kink[1]:.6g}; the rule gives {self.analytic:.6g}), so the "
                    "rule is not blamed: a kink (relu at 0, a max-pool tie, abs at 0) lies within eps; check at "
                    "another point or with a smaller eps")
        if self.shapes is not None:
            return (f"{rule} gives its input {self.position} ({self.input!r}, shape {self.shapes[1]}) a gradient "
                    f"of shape {self.shapes[0]}")
        return (f"{rule} disagrees with finite differences for its input {self.position} ({self.input!r}): "
                f"projected grad={self.analytic:.6g}, numericalGrad={self.numeric:.6g}")


class Localizer:
    """Finds the :class:`Culprit` of a failed variable in the private copy ``work`` fed with ``feeds``.

    ``disagree(analytic, numeric)`` is the check's own rule for a failed comparison.
    """

    def __init__(self, work, feeds, eps, seed, disagree):
        self.work, self.feeds, self.eps, self.seed, self.disagree = work, feeds, eps, seed, disagree
        self._probe = None
        self._unbuildable = False
        self._verdicts = {}

    def culprit(self, name):
        """The culprit of variable ``name``'s failure, or None when every edge on its way agrees
        (or the probe cannot be built: localising never turns a failed check into an error)."""
        if self._unbuildable:
            return None
        try:
            if self._probe is None:
                self._probe = _Probe(self.work, self.feeds)
            for edge in self._probe.edges_from(name):
                analytic, numeric, shapes, sides = self._verdict(edge)
                # A loss that is not finite near the point judges nothing (e.g. a mean over no elements).
                if shapes is not None or (math.isfinite(numeric) and self.disagree(analytic, numeric)):
                    consumer, position = edge
                    node = self.work.node(consumer)
                    kink = sides if shapes is None and self.disagree(*sides) else None
                    return Culprit(node.op, consumer, node.inputs[position], position, analytic, numeric, shapes,
                                   kink)
        except GraphviewError:
            self._unbuildable = self._probe is None
            return None
        return None

    def _verdict(self, edge):
        if edge not in self._verdicts:
            probe = self._probe
            zero = probe.zeros[edge]
            loss = Loss(probe.graph, probe.feeds, zero)
            rng = np.random.default_rng([self.seed, zlib.crc32(zero.encode()), 2])
            direction = rng.standard_normal(loss.array.shape)
            direction /= max(np.linalg.norm(direction), 1e-300)
            gradient = probe.gradients[probe.sums[edge]]
            numeric, forward, backward = projected_difference(loss, direction, self.eps, one_sided=True)
            if gradient.shape != direction.shape:
                self._verdicts[edge] = math.nan, numeric, (tuple(gradient.shape), tuple(direction.shape)), None
            else:
                self._verdicts[edge] = float(np.sum(gradient * direction)), numeric, None, (forward, backward)
        return self._verdicts[edge]


class _Probe:
    """The copy of ``work`` in which each checked edge reads ``input + zero``, and the gradient of each sum."""

    def __init__(self, work, feeds):
        reach_loss = work.ancestors(work.loss_names)
        self.work = work
        self.zeros, self.sums = {}, {}

        def probed(node, graph):
            """``node`` reading ``input + zero`` on each floating-point input, the two new nodes added first."""
            if node.kind is not Kind.ARRAY or node.name not in reach_loss or not _has_rule(node.op):
                return node
            inputs = list(node.inputs)
            for position, source in enumerate(node.inputs):
                source = work.node(source)
                if not dtypes.is_float(source.dtype):
                    continue
                zero = _fresh(work, graph, f"{node.name}/zero{position}")
                graph.add_node(zero, Kind.PLACEHOLDER, None, (), (), source.shape, source.dtype)
                inputs[position] = _fresh(work, graph, f"{node.name}/input{position}")
                graph.add_node(inputs[position], Kind.ARRAY, "add", (source.name, zero), (), source.shape,
                               source.dtype)
                self.zeros[node.name, position], self.sums[node.name, position] = zero, inputs[position]
            return dataclasses.replace(node, inputs=tuple(inputs))

        graph = self.graph = work.clone(f"{work.name}/localize", rewrite=probed, store=work.store)
        sources = sorted({work.node(consumer).inputs[position] for consumer, position in self.zeros})
        values = executor_of(work).run(feeds, sources) if sources else {}
        self.feeds = dict(feeds)
        for (consumer, position), zero in self.zeros.items():
            source = work.node(consumer).inputs[position]
            self.feeds[zero] = np.zeros(np.shape(values[source]), graph.node(zero).dtype)
        names = list(self.sums.values())   # not the zeros: add's own rule would un-broadcast a wrong shape
        self.gradients = gradient_graph(graph, names).run(self.feeds, check_shapes=False) if names else {}

    def edges_from(self, name):
        """The checked edges on the way from ``name`` to the losses, the edges nearest the losses first."""
        downstream = {name}
        for node in self.work.nodes():
            if any(source in downstream for source in node.inputs):
                downstream.add(node.name)
        edges = [(consumer, position) for consumer, position in self.zeros
                 if self.work.node(consumer).inputs[position] in downstream]
        return sorted(edges, key=lambda edge: (-self.work.node(edge[0]).index, edge[1]))


def _has_rule(op):
    definition = get_op(op)
    return definition.differentiable is not False and definition.vjp is not None


def _fresh(work, graph, name):
    while name in work or name in graph:
        name += "_"
    return name
