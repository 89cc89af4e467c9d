"""Fusion at plan time: groups of element-wise ops that run as one generated kernel (ADR 0024).

:func:`groups` reads a schedule (ADR 0009) and finds maximal groups of element-wise nodes whose
intermediates nobody else needs: each member other than the group's root is read only by members, is
no requested output, and has the root's static shape. The group runs at the root's place in the order,
so it reads its inputs later than its members would have; a member is left out when an in-place write
is scheduled between it and the root, so a group never reads a buffer version that such a write
replaced. A group reads each input whole or as one element: one whose static shape is neither the
root's nor a single element (a bias row) keeps the group from forming. :func:`runner` makes, for one
group and the shapes of a plan, the function the executor calls in place of the members' kernels: one
flat loop over the output, no intermediate buffers (graphview/fused_kernels.py writes and caches the
kernel); it declines when the plan's inputs are strided or broadcast after all.

Fused are the ops whose kernel is one of ``graphview_kernels.elementwise``'s (arithmetic, exp/log/...,
relu, sigmoid, gelu, comparisons, where) without attributes, and ``cast``; and a whole-array ``sum`` or
``mean`` that alone reads a group's floating-point value joins the group as its last member, its values
summed as they are computed in the unfused kernel's order (a trailing reduction).
"""
import math

import numpy as np

from graphview import fused_kernels
from graphview.registry import get as get_op
from graphview.variable import Kind
from graphview_kernels import elementwise
from graphview_kernels.launch import Elementwise
from graphview_kernels.threads import WORKERS, chunks, pool, run_chunked

MAX_MEMBERS = 64          # a longer chain is cut into several kernels (compile time grows with the text)
# LLVM inlines the scalar functions and vectorizes the loop only while the loop body stays small: past
# about a dozen ops with a few transcendental ones it stops inlining them, and the fused loop became up
# to 4x slower than the ops one by one (bench_gradcheck's chain on 10^6 elements). Outputs of unknown or
# large size are therefore fused in pieces of at most COST_BUDGET, a transcendental op costing
# HEAVY_COST and any other 1; small static outputs (where vector width does not matter) up to MAX_MEMBERS.
COST_BUDGET, HEAVY_COST, SMALL = 24, 4, 4096
REDUCTIONS = ("sum", "mean")      # a whole-array one after a group (floating point) is fused into it
HEAVY = {"pow_scalar", "exp_scalar", "log_scalar", "sqrt_scalar", "sin_scalar", "cos_scalar", "tanh_scalar",
         "sigmoid_scalar", "gelu_scalar", "gelu_derivative_scalar"}

# The scalar function of each element-wise kernel object, by identity.
SCALARS = {id(value): value.name for value in vars(elementwise).values() if isinstance(value, Elementwise)}
CAST_SCALARS = {np.dtype(d): f"to_{np.dtype(d).name}_scalar" for d in elementwise.CASTS}


class Group:
    """The members of one fused group, in run order; ``root`` (the last) gives the value. With a
    trailing ``reduction`` (a whole sum or mean of the element-wise part), that node is the last member
    and the root: the element-wise values are summed as they are computed, never stored."""
    __slots__ = ("members", "root", "reduction")

    def __init__(self, members, reduction=None):
        self.members = members
        self.root = members[-1]
        self.reduction = reduction

    @property
    def elementwise(self):
        return self.members[:-1] if self.reduction is not None else self.members

    def describe(self):
        return ", ".join(f"{m.op} {m.name}" for m in self.members)


def scalar_of(node):
    """The name of the scalar function computing ``node`` element by element, or None."""
    if node.kind is not Kind.ARRAY:
        return None
    if node.op == "cast":
        return CAST_SCALARS.get(node.dtype)
    definition = get_op(node.op)
    if node.attrs or definition.inplace or definition.view:
        return None
    return SCALARS.get(id(definition.kernel))


def groups(schedule, names):
    """The fused groups of a schedule for outputs ``names`` (structure only: shapes are checked again
    by :func:`runner` when a plan is built). Executors cache them with the schedule."""
    order = schedule.order
    position = {node.name: i for i, node in enumerate(order)}
    consumers = {node.name: set() for node in order}
    for node in order:
        for name in node.inputs:
            if name in consumers:
                consumers[name].add(node.name)
    writes = [position[n.name] for n in order if get_op(n.op).inplace]
    fusable = {node.name for node in order if scalar_of(node) is not None}
    by_name = {node.name: node for node in order}
    every = {node.name: node for node in schedule.sources + order}
    requested, taken, found = set(names), set(), []
    for root in reversed(order):
        if root.name not in fusable or root.name in taken:
            continue
        small = None not in root.shape and math.prod(root.shape) <= SMALL
        budget = MAX_MEMBERS if small else COST_BUDGET
        members, grew, spent = {root.name}, True, _cost(root, small)
        while grew:                                     # to a fixed point: a member may unlock another
            grew = False
            for name in sorted({i for m in members for i in by_name[m].inputs} - members):
                cost = _cost(by_name[name], small) if name in fusable else None
                if (cost is not None and spent + cost <= budget and name not in taken and name not in requested
                        and by_name[name].shape == root.shape and consumers[name] <= members
                        and not any(position[name] < w < position[root.name] for w in writes)):
                    members.add(name)
                    spent += cost
                    grew = True
        reduction = _trailing_reduction(root, consumers, requested, by_name)
        if reduction is not None and any(position[root.name] < w < position[reduction.name] for w in writes):
            reduction = None                            # the group would run after that write
        if (len(members) > 1 or reduction is not None) and _flat_inputs(members, every, root.shape):
            taken |= members
            ordered = sorted((by_name[m] for m in members), key=lambda n: position[n.name])
            if reduction is not None:
                taken.add(reduction.name)
                ordered.append(reduction)
            found.append(Group(ordered, reduction))
    return sorted(found, key=lambda group: position[group.root.name])


def _trailing_reduction(root, consumers, requested, nodes):
    """The whole-array sum or mean that alone reads ``root`` (a floating-point value nobody requested),
    or None: fused into the group, it reads the values as they are computed instead of from a buffer."""
    readers = consumers[root.name]
    if root.name in requested or len(readers) != 1 or root.dtype.kind != "f":
        return None
    reader = nodes.get(next(iter(readers)))
    if reader is None or reader.op not in REDUCTIONS or reader.inputs != (root.name,):
        return None
    axis = reader.attributes.get("axis")
    rank = len(root.shape)
    if axis is not None and sorted(a % rank for a in ((axis,) if isinstance(axis, int) else axis)) != list(range(rank)):
        return None
    return reader


def _flat_inputs(members, nodes, shape):
    """Whether no input of the group has a static shape other than the root's or a single element."""
    for member in members:
        for name in nodes[member].inputs:
            if name not in members:
                size = nodes[name].shape
                if None not in size and size != shape and math.prod(size) != 1:
                    return False
    return True


def _cost(node, small):
    return 1 if small or scalar_of(node) not in HEAVY else HEAVY_COST


def runner(group, shapes, contiguous):
    """``(inputs, run)``: the names the fused kernel reads, in order, and ``run(*arrays)`` returning the
    root's value; None when the plan's shapes do not allow this group (a member of another shape)."""
    body = group.elementwise
    shape = shapes[body[-1].name]
    if None in shape or any(shapes[m.name] != shape for m in body):
        return None
    names = {m.name for m in group.members}
    inputs, index = [], {}
    for member in body:
        for name in member.inputs:
            if name not in names and name not in index:
                index[name] = len(inputs)
                inputs.append(name)
    refs = {m.name: ("t", k) for k, m in enumerate(body)}
    members = [(scalar_of(m), tuple(refs.get(n, index.get(n)) for n in m.inputs),
                "bool_" if m.dtype == np.bool_ else m.dtype.name) for m in body]
    if any(None in shapes[name] for name in inputs):
        return None                                     # a size known only when the step runs
    dtype, size = group.root.dtype, math.prod(shape)
    single = tuple(i for i, name in enumerate(inputs) if math.prod(shapes[name]) == 1)
    flat = all(contiguous[name] and (shapes[name] == shape or i in single) for i, name in enumerate(inputs))
    if not flat:
        # Measured: the 4-D strided loop over broadcast or transposed inputs ran 2-5x slower than the ops
        # one by one (tanh(h + bias) on (256, 512): 1019 us fused, 187 us not), so such groups run unfused.
        return None
    if group.reduction is not None:
        if size == 0:
            return None
        kernel = fused_kernels.load(fused_kernels.reduction_source(members, len(inputs), single))
        mean = group.reduction.op == "mean"
        return inputs, _reduction_runner(kernel, shapes[group.root.name], dtype, size, mean)
    kernel = fused_kernels.load(fused_kernels.source(members, len(inputs), single))
    threshold = min(getattr(get_op(m.op).kernel, "threshold", math.inf) for m in group.members)
    return inputs, _flat_runner(kernel, shape, dtype, size, threshold)


def _reduction_runner(kernel, shape, dtype, size, mean):
    """The sum (or mean) of the values, in the order and types of the unfused reduction's kernel
    (graphview/ops/reduce.py's sum_kernel through reduce3: float64 accumulation, pairwise, chunks summed
    in turn on threads above PARALLEL_THRESHOLD)."""
    zero = np.float64(0)
    scale = np.float64(1.0 / size) if mean else zero + 1

    def run_reduction(*arrays):
        parts = run_chunked(lambda lo, hi: kernel(*arrays, lo, hi, zero), size)   # reduce3's chunks
        total = parts[0]
        for part in parts[1:]:
            total += part
        out = np.empty(shape, dtype)
        out[...] = total * scale
        return out
    return run_reduction


def _flat_runner(kernel, shape, dtype, size, threshold):
    empty = np.empty
    if size < threshold or WORKERS == 1:
        def run_flat(*arrays):
            out = empty(shape, dtype)
            kernel(*arrays, out, 0, size)
            return out
        return run_flat

    spans = list(chunks(size))

    def run_threaded(*arrays):
        out = empty(shape, dtype)
        futures = [pool().submit(kernel, *arrays, out, lo, hi) for lo, hi in spans]
        for future in futures:
            future.result()
        return out
    return run_threaded
