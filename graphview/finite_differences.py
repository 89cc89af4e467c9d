"""Finite differences in a private copy of a graph: the pieces the gradient checker and its localiser share.

``float64_copy`` makes the private float64 copy every check runs in, ``Loss`` is the summed loss as a
function of one array of that copy (perturbed in place), ``central_difference`` and
``projected_difference`` differentiate it numerically, and ``relative_error`` compares the results
(ADR 0007). ``shared_differences`` splits a list of such differences across the ranks of an MPI world
and gathers them, so that every rank holds every value.
"""
import dataclasses
import math
import pickle
import time
import zlib

import numpy as np

from graphview import dtypes
from graphview.data.sharding import shard_rows
from graphview.distributed.comm import DistributedError, DistributedTimeoutError
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


def projected_difference(loss, direction, eps, one_sided=False):
    """``(L(x + eps u) - L(x - eps u)) / 2 eps`` along the array ``direction`` u (``loss.array`` restored after);
    with ``one_sided`` also ``(L(x + eps u) - L(x)) / eps`` and ``(L(x) - L(x - eps u)) / eps``, which
    disagree where a kink (relu at 0, a max-pool tie) lies within ``eps`` of the point."""
    if not one_sided:
        plus, minus = losses_along(loss, direction, (eps, -eps))
        return (plus - minus) / (2 * eps)
    plus, minus, center = losses_along(loss, direction, (eps, -eps, 0.0))
    return (plus - minus) / (2 * eps), (plus - center) / eps, (center - minus) / eps


def losses_along(loss, direction, offsets):
    """``[L(x + t u) for t in offsets]`` along the array ``direction`` u (``loss.array`` restored after)."""
    array = loss.array
    original = array.copy()
    values = []
    try:
        for offset in offsets:
            array[...] = original + offset * direction if offset else original
            values.append(loss())
    finally:
        array[...] = original
    return values


FIRST_ROUND = 8  # items per rank in the first round of a check that stops at its first failure


@dataclasses.dataclass
class Shared:
    """What :func:`shared_differences` gathered: ``values[p]`` and ``seconds[p]`` of item ``p`` where
    ``known[p]``; ``errors`` the ``(position, exception)`` at which a rank stopped its share."""
    values: np.ndarray
    seconds: np.ndarray
    known: np.ndarray
    errors: list

    def value(self, position):
        """Item ``position``'s value, or the error raised at (or before) it on the rank that computed it."""
        if self.known[position]:
            return float(self.values[position])
        before = [(p, error) for p, error in self.errors if p <= position]
        if not before:
            raise DistributedError(f"item {position} was not computed on any rank")
        raise max(before, key=lambda item: item[0])[1]


def shared_differences(world, count, compute, *, stop=None, progress=None):
    """``compute(p)`` for every item ``p < count``, each rank of ``world`` computing a contiguous share,
    gathered in item order so that every rank holds every value (a :class:`Shared`).

    Without ``stop`` one round covers every item. With ``stop(p, value)`` (True when the caller would stop
    at item ``p``) items go in rounds of growing size, and none after the first round where ``stop`` holds.
    A rank that raises stops its share there; its exception, in the gathered ``errors``, is raised by
    :meth:`Shared.value` on every rank that asks for that item (its own object on the rank that raised
    it). ``progress(done)`` gets the items done over all ranks: exact after each round, estimated from
    this rank's count in between (the shares differ by at most one item).
    """
    values, seconds = np.full(count, np.nan), np.zeros(count)
    known = np.zeros(count, bool)
    errors = []
    start, per_rank = 0, FIRST_ROUND if stop is not None else count
    while start < count:
        total = min(count - start, per_rank * world.size)
        low, high = (start + bound for bound in shard_rows(total, world.rank, world.size))
        mine, spent, failure = np.empty(high - low), np.empty(high - low), None
        done = 0
        for position in range(low, high):
            began = time.perf_counter()
            try:
                mine[done] = compute(position)
            except Exception as error:  # noqa: BLE001 - every rank raises it when the caller reaches the item
                failure = position, error
                break
            spent[done] = time.perf_counter() - began
            done += 1
            if progress is not None:
                progress(start + min(done * world.size, total))
        shares = world.allgather_object((low, mine[:done], spent[:done], _portable(failure)))
        for rank, (first, part, times, error) in enumerate(shares):
            values[first:first + part.size], seconds[first:first + part.size] = part, times
            known[first:first + part.size] = True
            if error is not None:
                errors.append(failure if rank == world.rank else error)
        if progress is not None:
            progress(start + total)
        if errors or (stop is not None and any(stop(p, values[p]) for p in range(start, start + total))):
            break
        start += total
        per_rank *= 2
    return Shared(values, seconds, known, errors)


def _portable(failure):
    """``failure`` with an exception that survives pickling (else a DistributedError with its text)."""
    if failure is None:
        return None
    position, error = failure
    try:
        pickle.loads(pickle.dumps(error))
        return failure
    except Exception:  # noqa: BLE001 - any exception that cannot travel is sent as text
        return position, DistributedError(f"{type(error).__name__}: {error}")


class SharedDifferences:
    """The finite differences of a gradient check, every rank of ``world`` computing a contiguous share and
    all gathered before the check asks for any, so that every rank judges them as one process would.

    ``elements[name]``: the flat indices checked; ``directions[name]``: fast mode's direction (fast mode
    when not empty); ``stop``: the check stops at its first failure; ``disagree(analytic, numeric)``:
    its failure rule.
    """

    def __init__(self, world, losses, analytic, elements, directions, settings, stop, disagree):
        self.progress, eps = settings["progress"], settings["eps"]
        self.world = world
        names = list(losses)
        wrong = [n for n in names if analytic[n].shape != losses[n].array.shape]
        if stop and wrong:  # the check ends at the first gradient of the wrong shape
            names = names[:names.index(wrong[0])]
        names = [n for n in names if n not in wrong]
        self._agree(losses, elements, settings)
        projected = [n for n in names if n in directions]
        self.projections = self._share(len(projected), lambda p: projected_difference(
            losses[projected[p]], directions[projected[p]], eps), 0, None)
        self.projected = {n: p for p, n in enumerate(projected)}
        full = [] if directions else names
        for p, n in enumerate(projected):  # fast mode: the variables whose projection fails run in full
            if not self.projections.known[p]:
                break
            if disagree(float(np.sum(analytic[n] * directions[n])), self.projections.value(p)):
                full.append(n)
        items = [(n, int(flat)) for n in full for flat in elements[n]]
        self.positions = {item: p for p, item in enumerate(items)}
        if directions:
            self.progress.total += len(items)
        base = self.progress.done
        failed = (lambda p, value: disagree(float(analytic[items[p][0]].flat[items[p][1]]), value)) if stop else None
        self.elements = self._share(len(items), lambda p: central_difference(
            losses[items[p][0]], np.unravel_index(items[p][1], losses[items[p][0]].array.shape), eps), base, failed)
        self.seconds = {}
        for (name, _), seconds in zip(items, self.elements.seconds):
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        for name, p in self.projected.items():
            self.seconds[name] = self.seconds.get(name, 0.0) + self.projections.seconds[p]

    def element(self, loss, flat, index):
        return self.elements.value(self.positions[loss.name, flat])

    def projection(self, loss, direction):
        return self.projections.value(self.projected[loss.name])

    def rerun(self, count):
        pass  # counted when the shares were planned

    def timed(self, result):
        """The time the ranks spent on ``result``'s variable, summed (what one process would have spent)."""
        result.seconds = self.seconds.get(result.name, result.seconds)

    def _share(self, count, compute, base, stop):
        try:
            return shared_differences(self.world, count, compute, stop=stop,
                                      progress=lambda done: self.progress.to(base + done))
        except DistributedTimeoutError as error:
            raise DistributedTimeoutError(f"check_gradients: {error}; {_EVERY_RANK}") from error

    def _agree(self, losses, elements, settings):
        """Refuse, on every rank, a check whose graph, values, elements or options differ between ranks."""
        def digest(*arrays):
            return [zlib.crc32(np.ascontiguousarray(a).tobytes()) for a in arrays]
        graph = next(iter(losses.values())).graph
        mine = {"graph": (graph.name, zlib.crc32(repr([(n.name, n.op, n.inputs, n.shape) for n in graph.nodes()])
                                                 .encode())),
                "options": repr(sorted((k, v) for k, v in settings.items()
                                       if k not in ("progress", "numbers", "mask"))),
                "variables": [(n, tuple(loss.array.shape)) for n, loss in losses.items()],
                "values": {n: digest(loss.array) for n, loss in losses.items()},
                "feeds": {n: digest(v) for n, v in next(iter(losses.values())).feeds.items()},
                "elements": {n: digest(e) for n, e in elements.items()}}
        try:
            everyone = self.world.allgather_object(mine)
        except DistributedTimeoutError as error:
            raise DistributedTimeoutError(f"check_gradients: {error}; {_EVERY_RANK}") from error
        for rank, theirs in enumerate(everyone):
            differ = [key for key in mine if theirs[key] != everyone[0][key]]
            if differ:
                raise DistributedError(f"check_gradients: rank {rank} of {self.world.size} checks different "
                                       f"{' and '.join(differ)} than rank 0; {_EVERY_RANK}")


_EVERY_RANK = ("every rank must call check_gradients with the same graph, values, feeds and options "
               "(world=gv.distributed.LocalWorld() checks on one rank alone)")
