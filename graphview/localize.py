"""Localising a failed gradient check: the op whose gradient rule disagrees with finite differences (ADR 0007).

A failed check names a variable; the wrong rule can be any op between it and the losses. Every edge
(an op reading one floating-point input) on that way gets its own check: in a probe copy of the graph
the op reads ``input + zero``, where ``zero`` is a placeholder fed zeros, so the gradient of that sum
(read by the op alone) is exactly what the op's rule sends back along that edge, and central
differences along one random direction of ``zero`` say what it should be. Walking from the losses
back toward the variable, the first edge that disagrees names the culprit: every edge out of its op
was checked before it and agreed, so the op's output gradient agrees and the gradient its rule gives
that input does not.

A kink within eps (relu at 0, a max-pool tie) makes central differences disagree with any rule; an edge
is reported as a kink, not as a wrong rule, only when its one-sided differences at eps, eps/2 and eps/4
show a gap that curvature cannot explain and the rule lies among them (:func:`kink_verdict`).

Only a failed check pays: the probe is built on the first failure, one analytic run serves every edge,
and each edge costs three forward runs (four more where the rule and the one-sided differences
disagree), at most once per check.
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
from graphview.finite_differences import Loss, losses_along, relative_error
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
                analytic, numeric, shapes, kink = self._verdict(edge)
                # A loss that is not finite near the point judges nothing (e.g. a mean over no elements).
                if shapes is not None or (math.isfinite(numeric) and self.disagree(analytic, numeric)):
                    consumer, position = edge
                    node = self.work.node(consumer)
                    return Culprit(node.op, consumer, node.inputs[position], position, analytic, numeric, shapes,
                                   kink)
        except GraphviewError:
            self._unbuildable = self._probe is None
            return None
        return None

    def _verdict(self, edge):
        """``(analytic, numeric, shapes, kink)`` of ``edge``: its rule's gradient and central differences
        projected on one random unit direction, the shapes when the rule's gradient has the wrong one, and
        the one-sided differences when they disagree and a kink explains it (:func:`kink_verdict`)."""
        if edge not in self._verdicts:
            probe = self._probe
            zero = probe.zeros[edge]
            loss = Loss(probe.graph, probe.feeds, zero)
            rng = np.random.default_rng([self.seed, zlib.crc32(zero.encode()), 2])
            direction = rng.standard_normal(loss.array.shape)
            direction /= max(np.linalg.norm(direction), 1e-300)
            gradient = probe.gradients[probe.sums[edge]]
            plus, minus, center = losses_along(loss, direction, (self.eps, -self.eps, 0.0))
            numeric = (plus - minus) / (2 * self.eps)
            if gradient.shape != direction.shape:
                self._verdicts[edge] = math.nan, numeric, (tuple(gradient.shape), tuple(direction.shape)), None
            else:
                analytic = float(np.sum(gradient * direction))
                kink = None
                if math.isfinite(numeric) and self.disagree(analytic, numeric):
                    kink = kink_verdict(lambda offsets: losses_along(loss, direction, offsets), (center, plus, minus),
                                 self.eps, analytic, self.disagree)
                self._verdicts[edge] = analytic, numeric, None, kink
        return self._verdicts[edge]


SMOOTH_RESIDUAL = 0.05       # of the gap D(h): a smooth loss leaves about h^2 f''''/16 f'', a kink at least 1/3
ROUNDING = 16 * 2.0 ** -52   # relative rounding error allowed for each loss value (one float64 forward run)


def kink_verdict(losses_at, values, h, analytic, disagree):
    """``(forward, backward)``, the one-sided differences at step ``h``, when a kink within ``h`` explains
    why they disagree and the rule lies among them; None when the rule is to be blamed (ADR 0007, amendment
    of 5th December 2026). ``values`` are ``L(x), L(x + h u), L(x - h u)``; ``losses_at(offsets)`` gives
    ``L(x + t u)`` for more offsets ``t``.

    For a smooth loss the gap ``D(s) = F(s) - B(s)`` between the one-sided differences at step ``s`` is
    ``s f'' + O(s^3)``: curvature, not a kink, so ``D(h) - 2 D(h/2)`` and ``D(h/2) - 2 D(h/4)`` vanish to
    ``O(h^3)``. A slope jump ``J`` at ``t h`` from the point (0 <= t < 1) leaves at least a third of
    ``D(h) = J (1 - t)`` in one of them (each has a blind spot, at t = 1/3 and at t = 1/6 or t >= 1/2, never
    the same one); a kink is seen when that residual is above ``SMOOTH_RESIDUAL`` of ``D(h)`` and above the
    residuals' rounding bound ``40 e / h`` (each loss value off by at most ``e``). A rule that is right at a
    kink gives one side's slope (or, at the kink itself, a value between them), so a rule outside the span
    of the one-sided differences, by the check's own tolerance, is wrong whatever the kink."""
    center, plus, minus = values
    forward, backward = (plus - center) / h, (center - minus) / h
    if not disagree(forward, backward):
        return None
    more = losses_at((h / 2, -h / 2, h / 4, -h / 4))
    sides = [(forward, backward), ((more[0] - center) / (h / 2), (center - more[1]) / (h / 2)),
             ((more[2] - center) / (h / 4), (center - more[3]) / (h / 4))]
    gaps = [ahead - behind for ahead, behind in sides]
    residual = max(abs(gaps[0] - 2 * gaps[1]), abs(gaps[1] - 2 * gaps[2]))
    rounding = 40 * ROUNDING * max(abs(value) for value in (*values, *more)) / h
    if not (residual > SMOOTH_RESIDUAL * abs(gaps[0]) and residual > rounding):
        return None    # curvature (or rounding) explains the gap: the rule is blamed
    slopes = [slope for side in sides for slope in side]
    if not (min(slopes) <= analytic <= max(slopes) or any(not disagree(analytic, slope) for slope in slopes)):
        return None    # far from every one-sided slope: wrong whatever the kink
    return forward, backward


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
        # The sums pass gradients through by their own rule, so a wrong rule of add cannot skew what reaches
        # the edges behind them (every edge of the graph's own adds is still checked).
        rules = dict.fromkeys(names, _pass_through)
        self.gradients = {}
        if names:
            self.gradients = gradient_graph(graph, names, rules=rules).run(self.feeds, check_shapes=False)

    def edges_from(self, name):
        """The checked edges on the way from ``name`` to the losses, the edges nearest the losses first."""
        downstream = {name}
        for node in self.work.nodes():
            if any(source in downstream for source in node.inputs):
                downstream.add(node.name)
        edges = [(consumer, position) for consumer, position in self.zeros
                 if self.work.node(consumer).inputs[position] in downstream]
        return sorted(edges, key=lambda edge: (-self.work.node(edge[0]).index, edge[1]))


def _pass_through(grad, out, source, zero):
    """The probe's ``source + zero`` (equal shapes): the gradient reaches the source unchanged."""
    return grad, None


def _has_rule(op):
    definition = get_op(op)
    return definition.differentiable is not False and definition.vjp is not None


def _fresh(work, graph, name):
    while name in work or name in graph:
        name += "_"
    return name
