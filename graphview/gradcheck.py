"""Gradient checks: analytic gradients (autodiff) against central differences, with SameDiff's semantics.

Every check runs on a private float64 copy of the graph (float32 nodes, values,
placeholders and ``dtype`` attributes become float64), so the user's graph is
never touched and float32 rounding cannot hide or fake an error: the check tests
the gradient *rules*. Under ``mpiexec -n N`` the finite differences are shared among the
ranks and every rank gets the report one process would. See ADR 0007 for the exact semantics.
"""
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from graphview import core, dtypes
from graphview.autodiff import gradient_graph
from graphview.distributed.comm import init, launched
from graphview.errors import GraphviewError
from graphview.finite_differences import (Loss, central_difference, float64_copy, projected_difference,
                                          SharedDifferences, relative_error)
from graphview.listeners import NonInplaceValidationListener
from graphview.localize import Culprit, Localizer
from graphview.ops.math import mul
from graphview.ops.reduce import sum as reduce_sum
from graphview.registry import default_graph, definitions, op
from graphview.variable import Kind, Variable

SUBSETS = ("random", "every_n")


@dataclass
class Failure:
    """One failed comparison. ``kind``: "gradient", "nonfinite", "reentrancy", "fast" (a projection) or
    "shape" (the analytic gradient's shape is not the variable's; ``index`` is None, the values NaN)."""
    variable: str
    index: Optional[tuple]
    analytic: float
    numeric: float
    rel_error: float
    abs_error: float
    kind: str = "gradient"

    shapes: Optional[tuple] = None  # kind "shape": (analytic gradient shape, variable shape)
    culprit: Optional[Culprit] = None  # the op whose gradient rule disagrees (graphview/localize.py)

    def __str__(self):
        blame = f"; {self.culprit}" if self.culprit is not None else ""
        return self._describe() + blame

    def _describe(self):
        if self.kind == "shape":
            gradient, variable = self.shapes
            return (f"{self.variable} FAILED (wrong shape): the analytic gradient has shape {gradient}, "
                    f"the variable has shape {variable}; a gradient rule does not un-broadcast")
        where = f"{self.variable}{list(self.index)}" if self.index is not None else f"{self.variable} (projection)"
        second = {"reentrancy": "secondGrad", "fast": "numericalProjection"}.get(self.kind, "numericalGrad")
        label = {"reentrancy": "NOT REENTRANT", "nonfinite": "FAILED (not finite)"}.get(self.kind, "FAILED")
        return (f"{where} {label}: grad={self.analytic!r}, {second}={self.numeric!r}, "
                f"relError={self.rel_error:.3g}, absError={self.abs_error:.3g}")


@dataclass
class VariableResult:
    """The checks of one variable: how many comparisons ran, passed and failed, and the largest relative error."""
    name: str
    shape: tuple
    checked: int = 0
    passed: int = 0
    failed: int = 0
    max_rel_error: float = 0.0
    seconds: float = 0.0  # from this variable's start to its last comparison (JUnit times each variable)
    started: float = field(default_factory=time.perf_counter, repr=False, compare=False)

    def add(self, failed, rel_error):
        self.seconds = time.perf_counter() - self.started
        self.checked += 1
        self.failed += bool(failed)
        self.passed += not failed
        if math.isnan(rel_error) or math.isnan(self.max_rel_error):
            self.max_rel_error = math.nan
        else:
            self.max_rel_error = max(self.max_rel_error, rel_error)


class GradCheckReport:
    """The outcome of :func:`check_gradients`: ``passed``, ``failures``, ``variables``, ``violations``."""

    def __init__(self, graph_name, mode, converted):
        self.graph_name = graph_name
        self.mode = mode
        self.converted = converted
        self.failures = []
        self.variables = {}
        self.violations = []

    @property
    def passed(self):
        return not self.failures and not self.violations

    def __bool__(self):
        return self.passed

    def failures_of(self, name):
        return [f for f in self.failures if f.variable == name]

    def __str__(self):
        checked = sum(v.checked for v in self.variables.values())
        verdict = "PASSED" if self.passed else "FAILED"
        errors = [v.max_rel_error for v in self.variables.values()]
        largest = math.nan if any(math.isnan(e) for e in errors) else max(errors, default=0.0)
        lines = [f"gradient check of graph {self.graph_name!r} ({self.mode}"
                 f"{', in a float64 copy' if self.converted else ''}): {verdict}: {len(self.variables)} variables, "
                 f"{checked} checks, {len(self.failures)} failures, {len(self.violations)} in-place violations, "
                 f"largest relative error {largest:.3g}"]
        rows = [("variable", "shape", "checked", "passed", "failed", "max rel error")]
        rows += [(v.name, str(v.shape), str(v.checked), str(v.passed), str(v.failed), f"{v.max_rel_error:.3g}")
                 for v in self.variables.values()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for n, row in enumerate(rows):
            lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
            if n == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        culprits = {f.variable: f.culprit for f in self.failures if f.culprit is not None}
        lines += [f"  {name}: {culprit}" for name, culprit in culprits.items()]
        for number, failure in enumerate(self.failures[:25]):
            lines.append(f"  Param {number} ({failure._describe()})")
        if len(self.failures) > 25:
            lines.append(f"  ... and {len(self.failures) - 25} more failures")
        lines += [f"  in-place violation: {v}" for v in self.violations]
        return "\n".join(lines)

    __repr__ = __str__


def check_gradients(graph, placeholders, *, wrt=None, eps=1e-5, max_rel_error=1e-5, min_abs_error=1e-6, skip=(),
                    mask=None, max_per_param=None, subset="random", seed=12345, exit_on_first_failure=False,
                    fast=False, validate_inplace=True, activations=False, progress=None, world=None):
    """Compare the analytic gradients of the sum of ``graph``'s losses with central differences.

    ``wrt`` defaults to every trainable floating-point variable, leaving out those made
    with ``trainable=False`` (placeholders, ARRAY variables and non-trainable variables
    may be named too); ``skip`` removes names; ``mask`` maps a name
    to a boolean array of its shape (True = check); ``max_per_param`` limits the
    elements checked per variable, chosen by ``subset`` ("random" with ``seed``, or
    "every_n"). ``fast=True`` compares one random projection per variable and
    reruns the full check of a variable whose projection fails. ``activations=True``
    also checks every floating-point intermediate (ARRAY) value the loss depends on.
    ``progress(done, total)``, when given, is called once before the first comparison
    and after each; ``total`` grows when fast mode reruns a variable in full.

    In a ``world`` of several processes (default: ``gv.distributed.init()``'s when an MPI launcher
    started this one) every rank must make the same call: each computes the finite differences of a
    contiguous share of the elements, and all get the report one process would give (ADR 0007).
    ``world=gv.distributed.LocalWorld()`` checks on this rank alone.
    """
    _check_options(eps, max_rel_error, min_abs_error, max_per_param, subset, seed)
    world = _world(world)
    if not graph.loss_names:
        raise GraphviewError(f"check_gradients: graph {graph.name!r} has no loss; call g.set_loss(...) first")
    skip = {graph.name_of(s) for s in ([skip] if isinstance(skip, (str, Variable)) else skip)}
    if wrt is not None:
        wrt = [graph.name_of(w) for w in ([wrt] if isinstance(wrt, (str, Variable)) else wrt)]
    mask = {graph.name_of(k): v for k, v in (mask or {}).items()}
    work, feeds, converted = float64_copy(graph, placeholders)
    names = _targets(work, wrt, skip, activations)
    if not names:
        raise GraphviewError(_nothing_to_check(graph, wrt, skip, bool(_targets(work, wrt, (), activations))))
    report = GradCheckReport(graph.name, "fast" if fast else "full", converted)
    gradients = gradient_graph(work, names)
    listener = NonInplaceValidationListener(raise_errors=False) if validate_inplace else None
    analytic = gradients.run(feeds, [listener] if listener else None, check_shapes=False)
    if listener:
        report.violations.extend(listener.violations)
    settings = dict(eps=eps, max_rel_error=max_rel_error, min_abs_error=min_abs_error, mask=mask,
                    max_per_param=max_per_param, subset=subset, seed=seed, stop=exit_on_first_failure)
    losses = {name: Loss(work, feeds, name) for name in names}
    counts = [_elements(name, losses[name].array.shape, settings).size for name in names]
    settings["progress"] = _Progress(progress, sum(min(c, 1) if fast else c for c in counts))
    if _reentrancy(report, analytic, gradients.run(feeds, check_shapes=False), exit_on_first_failure):
        return report
    if world is None:
        settings["numbers"] = _Differences(settings)
    else:
        elements = {name: _elements(name, losses[name].array.shape, settings) for name in names}
        directions = {name: _direction(losses[name], elements[name], settings) for name in names
                      if fast and elements[name].size and analytic[name].shape == losses[name].array.shape}
        settings["numbers"] = SharedDifferences(
            world, losses, analytic, elements, directions, settings, exit_on_first_failure,
            lambda a, n: _disagree(a, n, max_rel_error, min_abs_error))
    localizer = Localizer(work, feeds, eps, seed, lambda a, n: _disagree(a, n, max_rel_error, min_abs_error))
    for name in names:
        loss = losses[name]
        result = report.variables[name] = VariableResult(name, tuple(loss.array.shape))
        if analytic[name].shape != loss.array.shape:
            result.add(True, math.nan)
            report.failures.append(Failure(name, None, math.nan, math.nan, math.nan, math.nan, "shape",
                                           (tuple(analytic[name].shape), tuple(loss.array.shape))))
            _blame(report, name, localizer)
            if exit_on_first_failure:
                return report
            continue
        if fast and not _fast_check(report, result, loss, analytic[name], settings):
            settings["numbers"].timed(result)
            continue
        if fast:
            settings["numbers"].rerun(_elements(name, loss.array.shape, settings).size)
        stop = _full_check(report, result, loss, analytic[name], settings)
        settings["numbers"].timed(result)
        if result.failed:
            _blame(report, name, localizer)
        if stop:
            return report
    return report


def _blame(report, name, localizer):
    """Name, in each of ``name``'s gradient failures, the op whose rule is wrong (when one is found)."""
    culprit = localizer.culprit(name)
    for failure in report.failures_of(name):
        if failure.kind in ("gradient", "nonfinite", "fast", "shape"):
            failure.culprit = culprit


def _check_options(eps, max_rel_error, min_abs_error, max_per_param, subset, seed):
    """Refuse option values that would crash the check or make it pass whatever the gradients are."""
    def number(value):
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))

    def integer(value):
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))

    if not (number(eps) and math.isfinite(eps) and eps > 0):
        raise GraphviewError(f"check_gradients: eps must be a finite number greater than 0, not {eps!r}")
    for option, value in (("max_rel_error", max_rel_error), ("min_abs_error", min_abs_error)):
        if not (number(value) and math.isfinite(value) and value >= 0):
            raise GraphviewError(f"check_gradients: {option} must be a finite number >= 0, not {value!r} "
                                 "(NaN or infinity would let every wrong gradient pass)")
    if max_per_param is not None and not (integer(max_per_param) and max_per_param >= 1):
        raise GraphviewError(f"check_gradients: max_per_param must be an integer >= 1 or None, not {max_per_param!r}")
    if not isinstance(subset, str) or subset not in SUBSETS:
        raise GraphviewError(f"check_gradients: subset must be one of {', '.join(SUBSETS)}, not {subset!r}")
    if not (integer(seed) and seed >= 0):
        raise GraphviewError(f"check_gradients: seed must be an integer >= 0, not {seed!r}")


def _nothing_to_check(graph, wrt, skip, skipped):
    if wrt is not None and not wrt:
        return (f"check_gradients: nothing to check in graph {graph.name!r}: wrt is empty; name at least one "
                "variable or placeholder, or leave wrt=None for every trainable floating-point variable")
    if skipped:
        return (f"check_gradients: nothing to check in graph {graph.name!r}: skip= removes every variable "
                f"that would be checked ({', '.join(sorted(skip))})")
    return (f"check_gradients: nothing to check in graph {graph.name!r}: no trainable floating-point "
            "variables; name placeholders or values with wrt=")


class _Progress:
    """Counts comparisons and reports ``(done, total)`` to an optional callback."""

    def __init__(self, callback, total):
        self.callback, self.done, self.total = callback, 0, total
        if callback is not None:
            callback(0, total)

    def step(self):
        self.to(self.done + 1)

    def to(self, done):
        self.done = done
        if self.callback is not None:
            self.callback(self.done, self.total)


def _targets(work, wrt, skip, activations):
    if wrt is None:
        # Variables made with trainable=False (running statistics) are state, not parameters: checked only
        # when named in wrt.
        names = [n.name for n in work.nodes() if work.is_trainable(n.name) and dtypes.is_float(n.dtype)]
    else:
        names = list(wrt)
    if activations:
        upstream = work.ancestors(work.loss_names)
        names += [n.name for n in work.nodes()
                  if n.kind is Kind.ARRAY and n.name in upstream and dtypes.is_float(n.dtype)]
    return [n for n in dict.fromkeys(names) if n not in skip]


def _reentrancy(report, first, second, stop):
    for name, a in first.items():
        b = second[name]
        if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
            continue
        flat = int(np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))))[0]) if a.shape == b.shape else 0
        index = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.size else ()
        x, y = (float(a[index]), float(b[index])) if a.size and a.shape == b.shape else (math.nan, math.nan)
        report.failures.append(Failure(name, index, x, y, relative_error(x, y), abs(x - y), "reentrancy"))
        if stop:
            return True
    return False


def _elements(name, shape, settings):
    size = int(np.prod(shape, dtype=np.int64))
    candidates = np.arange(size)
    mask = settings["mask"].get(name)
    if mask is not None:
        mask = np.asarray(mask, bool)
        if mask.shape != tuple(shape):
            raise GraphviewError(f"check_gradients: the mask of {name!r} has shape {mask.shape}, "
                                 f"the variable has shape {tuple(shape)}")
        candidates = candidates[mask.reshape(-1)]
    limit = settings["max_per_param"]
    if limit is not None and candidates.size > limit:
        if settings["subset"] == "random":
            rng = np.random.default_rng([settings["seed"], zlib.crc32(name.encode())])
            candidates = np.sort(rng.choice(candidates, size=limit, replace=False))
        else:
            # Exactly `limit` evenly spread elements, the first and the last included.
            # Spacing (size-1)/(limit-1) >= 1, so the floored positions are distinct.
            positions = np.arange(limit, dtype=np.int64) * (candidates.size - 1) // max(limit - 1, 1)
            candidates = candidates[positions]
    return candidates


def _disagree(analytic, numeric, max_rel_error, min_abs_error):
    """The failure rule: not finite, or both the relative and the absolute error too large."""
    if not (math.isfinite(analytic) and math.isfinite(numeric)):
        return True
    return relative_error(analytic, numeric) > max_rel_error and abs(analytic - numeric) >= min_abs_error


def _compare(report, result, name, index, analytic, numeric, settings, kind="gradient"):
    """Record one comparison; True when it failed."""
    if not (math.isfinite(analytic) and math.isfinite(numeric)):
        result.add(True, math.nan)
        report.failures.append(Failure(name, index, analytic, numeric, math.nan, abs(analytic - numeric), "nonfinite"))
        return True
    abs_error = abs(analytic - numeric)
    rel_error = relative_error(analytic, numeric)
    failed = _disagree(analytic, numeric, settings["max_rel_error"], settings["min_abs_error"])
    result.add(failed, rel_error)
    if failed:
        report.failures.append(Failure(name, index, analytic, numeric, rel_error, abs_error, kind))
    return failed


def _full_check(report, result, loss, analytic, settings):
    """Check element by element; True when the whole check must stop (exit_on_first_failure)."""
    array = loss.array
    for flat in _elements(loss.name, array.shape, settings):
        index = tuple(int(i) for i in np.unravel_index(flat, array.shape))
        numeric = settings["numbers"].element(loss, int(flat), index)
        failed = _compare(report, result, loss.name, index, float(analytic[index]), numeric, settings)
        if failed and settings["stop"]:
            return True
    return False


def _fast_check(report, result, loss, analytic, settings):
    """PyTorch's fast mode: one random unit direction u, analytic g.u against (L(x+eps u) - L(x-eps u)) / 2eps.

    Returns True when the full check must run to explain a failure.
    """
    candidates = _elements(loss.name, loss.array.shape, settings)
    if candidates.size == 0:
        return False
    direction = _direction(loss, candidates, settings)
    numeric = settings["numbers"].projection(loss, direction)
    projected = float(np.sum(analytic * direction))
    return _compare(report, result, loss.name, None, projected, numeric, settings, kind="fast")


def _direction(loss, candidates, settings):
    """Fast mode's random unit direction for ``loss``'s variable, on the ``candidates`` elements."""
    rng = np.random.default_rng([settings["seed"], zlib.crc32(loss.name.encode()), 1])
    direction = np.zeros(loss.array.size)
    direction[candidates] = rng.standard_normal(candidates.size)
    direction /= np.linalg.norm(direction)
    return direction.reshape(loss.array.shape)


class _Differences:
    """The finite differences of one process, computed when the check asks for them."""

    def __init__(self, settings):
        self.eps, self.progress = settings["eps"], settings["progress"]

    def element(self, loss, flat, index):
        value = central_difference(loss, index, self.eps)
        self.progress.step()
        return value

    def projection(self, loss, direction):
        value = projected_difference(loss, direction, self.eps)
        self.progress.step()
        return value

    def rerun(self, count):
        self.progress.total += count

    def timed(self, result):
        pass


def _world(world):
    """The world of several processes to share the check with, or None to check in this process alone."""
    if world is None and launched():
        world = init()               # the world the program made (its timeout kept), else a new one
    if world is not None and not all(hasattr(world, a) for a in ("rank", "size", "allgather_object")):
        raise GraphviewError(f"check_gradients: world must come from gv.distributed.init(), not {world!r}")
    return world if world is not None and world.size > 1 else None


# --- op validation -----------------------------------------------------------------------

_OP_RESULTS = {}


@dataclass
class OpCoverage:
    """One op's row of :func:`op_coverage`."""
    op: str
    samples: int
    differentiable: bool
    has_gradient: bool
    gradient_checked: Optional[bool]

    @property
    def complete(self):
        return self.samples > 0 and (self.differentiable is False or (self.has_gradient and bool(self.gradient_checked)))


def build_sample(name, sample):
    """``(graph, output, feeds)``: the op applied to placeholders holding the sample's arrays (strides kept)."""
    graph = core.new_graph(f"{name}-check")
    inputs, feeds = [], {}
    for position, value in enumerate(sample.inputs):
        if isinstance(value, np.ndarray):
            inputs.append(graph.placeholder(f"input{position}", value.shape, value.dtype))
            feeds[f"input{position}"] = value
        else:
            inputs.append(value)
    token = default_graph.set(graph)
    try:
        output = op(name)(*inputs, **sample.attrs)
    finally:
        default_graph.reset(token)
    return graph, output, feeds


def check_op(name, sample, build=None, **options):
    """Gradient-check op ``name`` on one :class:`graphview.Sample`; None when nothing is differentiable.

    The loss is ``sum(output * R)`` with a fixed random R, so every output element
    gets its own weight (a plain sum would hide errors, e.g. softmax's). Inputs in
    ``sample.constant_inputs`` and non-float inputs are not checked. The result is
    remembered for :func:`op_coverage`.
    """
    graph, output, feeds = (build or build_sample)(name, sample)
    wrt = [f"input{p}" for p, value in enumerate(sample.inputs)
           if isinstance(value, np.ndarray) and p not in sample.constant_inputs and dtypes.is_float(value.dtype)]
    if not wrt or not dtypes.is_float(output.dtype):
        return None
    # The weights need the output's shape: the shape rule's when it is static, so that the op is not run
    # (and compiled) in the sample's dtype only to learn it; the check itself runs in a float64 copy.
    shape = output.shape if None not in output.shape else graph.output(feeds, [output])[output.name].shape
    weights = graph.constant(f"{name}_weights", np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(output.dtype))
    graph.set_loss(reduce_sum(mul(output, weights)))
    report = check_gradients(graph, feeds, wrt=wrt, **options)
    _OP_RESULTS.setdefault(name, []).append(report.passed)
    return report


def op_coverage(check=False):
    """Per op: sample count, whether it is differentiable and has a gradient rule, and whether its
    gradient checks passed (None when not run; ``check=True`` runs the missing ones)."""
    rows = []
    for definition in definitions():
        samples = list(definition.samples()) if definition.samples else []
        if check and definition.differentiable and definition.has_gradient and definition.name not in _OP_RESULTS:
            for sample in samples:
                if sample.gradcheck:
                    try:
                        check_op(definition.name, sample)
                    except GraphviewError:
                        _OP_RESULTS.setdefault(definition.name, []).append(False)
        results = _OP_RESULTS.get(definition.name)
        rows.append(OpCoverage(definition.name, len(samples), definition.differentiable, definition.has_gradient,
                               all(results) if results else None))
    return rows
