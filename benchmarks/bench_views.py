"""Views benchmark: create_view cost against base size, and add_ through a 1% view of a 10^8 intermediate.

Every figure is measured in this run. Part 1 times create_view on bases of 10^3
to 10^8 float64 elements (the kernel alone and a whole g.output run) and the
bytes one call allocates. Part 2 builds a graph computing a 10^8-element
intermediate, add_s into a view covering 1% of it, and compares the add_ step
with copying the base, with the functional plan (which must copy) and with
NumPy's ``base[idx] += x``. Run once: python benchmarks/bench_views.py
(needs about 2.5 GB of memory).
"""
import time
import tracemalloc

import numpy as np

import graphview as gv
from graphview.execution import copy_array, executor_of
from graphview.ops.view import apply_view

SIZES = [10 ** k for k in range(3, 9)]
SIDE = 10_000                      # the intermediate is SIDE x SIDE = 10^8 float64 (800 MB)


def best(function, repeat=7, number=1):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            function()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def create_view_scaling():
    entries = ((0, 1, 1, 3, 1), (1, 2, 1, 0, 100, 3, 0))          # base[3, 0:100:3]
    rows = []
    for size in SIZES:
        base = np.zeros((10, size // 10))                          # calloc: pages are never touched
        apply_view(base, entries)
        kernel = best(lambda: apply_view(base, entries), number=2000)
        g = gv.Graph()
        x = g.placeholder("x", base.shape)
        view = g.create_view(x, gv.point(3), gv.interval(0, 100, 3))
        step = executor_of(g).plan({"x": base}, [view.name])[0].steps[0]
        step_time = best(lambda: step.run(base), number=2000)
        run = best(lambda: g.output({"x": base}, [view]), number=200)
        tracemalloc.start()
        apply_view(base, entries)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append((size, kernel, step_time, run, peak))
        del base
    print("create_view on a base of N float64 elements (view base[3, 0:100:3])")
    print(f"  {'N':>11}  {'kernel µs':>9}  {'plan step µs':>12}  {'g.output µs':>11}  {'bytes allocated':>15}")
    for size, kernel, step_time, run, peak in rows:
        print(f"  {size:>11,}  {kernel * 1e6:>9.2f}  {step_time * 1e6:>12.2f}  {run * 1e6:>11.2f}  {peak:>15,}")
    for column, label in ((1, "kernel"), (2, "plan step"), (3, "g.output")):
        values = [row[column] for row in rows]
        print(f"  {label}: max/min over sizes = {max(values) / min(values):.2f}")
    return rows


class StepTimer:
    """A listener timing one named step (pre_op to post_op)."""

    def __init__(self, name):
        self.name, self.seconds = name, None

    def pre_op(self, ctx, node, inputs):
        if node.name == self.name:
            self.start = time.perf_counter()

    def post_op(self, ctx, node, inputs, outputs):
        if node.name == self.name:
            self.seconds = time.perf_counter() - self.start


def peak_of(function):
    tracemalloc.start()
    result = function()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, peak


def traffic_bound(region, base_bytes, line=64):
    """Bytes the copy moves over bytes add_ moves: every cache line of the base against the lines the
    view touches (a strided view touches a whole line per element). copy/add_ times track this ratio."""
    offsets = np.zeros((), np.int64)
    for size, stride in zip(region.shape, region.strides):
        offsets = np.add.outer(offsets, np.arange(size, dtype=np.int64) * stride)
    start = region.__array_interface__["data"][0]
    lines = np.unique((offsets.ravel() + start) // line).size
    return base_bytes / (lines * line)


def in_place_update(label, key):
    g = gv.Graph()
    row = g.placeholder("row", (SIDE, 1))
    col = g.placeholder("col", (1, SIDE))
    t = g.math.add(row, col, name="t")                              # the 10^8-element intermediate
    t2 = g.add_(t[key], 1.0, name="t2")
    feeds = {"row": np.arange(SIDE, dtype=np.float64).reshape(SIDE, 1),
             "col": np.arange(SIDE, dtype=np.float64).reshape(1, SIDE)}
    base_bytes = SIDE * SIDE * 8
    small = gv.Graph()                                              # compile the kernels on small data first
    s = small.math.add(small.placeholder("row", (4, 1)), small.placeholder("col", (1, 4)))
    small.output({"row": np.zeros((4, 1)), "col": np.zeros((1, 4))}, [small.add_(s[key], 1.0)])

    timer = StepTimer("t2")
    out, peak = peak_of(lambda: g.output(feeds, [t2], listeners=[timer]))
    assert out["t2"][0, 0] == 1.0 and out["t2"][-1, -1] == 2.0 * (SIDE - 1), "wrong result"
    cold_steps = [timer.seconds]
    del out
    for _ in range(2):                                  # two more runs: the step on freshly computed data
        g.output(feeds, [t2], listeners=[timer])
        cold_steps.append(timer.seconds)
    add_step = min(cold_steps)
    base = g.output(feeds, [t])["t"]
    copy_time = best(lambda: copy_array(base), repeat=3)
    numpy_cold = []
    for _ in range(3):
        copy_array(base)                                # 1.6 GB of traffic: the view is out of cache again
        start = time.perf_counter()
        base[key] += 1.0
        numpy_cold.append(time.perf_counter() - start)
    numpy_time = min(numpy_cold)
    plan = executor_of(g).plan(feeds, [t2.name])[0]
    step = next(s for s in plan.steps if s.node.name == "t2")
    one = np.ones(())
    warm_step = best(lambda: step.run(base, one), repeat=7)
    warm_numpy = best(lambda: base[key].__iadd__(1.0), repeat=7)
    region = base[key]
    bound = traffic_bound(region, base_bytes)
    del base
    functional, functional_peak = peak_of(lambda: g.output(feeds, [t2, t]))
    explain = g.explain([t2, t]).splitlines()[-1].strip()
    del functional
    print(f"\nadd_ into {label} ({region.size:,} of {SIDE * SIDE:,} elements, {region.size / SIDE ** 2:.0%})")
    print(f"  add_ step in the run {add_step * 1e3:8.2f} ms | copy of the base {copy_time * 1e3:8.2f} ms "
          f"| copy/add_ = {copy_time / add_step:6.1f}x (target >= 20; bytes moved, copy/add_: {bound:.0f}x)")
    print(f"  NumPy base[idx] += 1.0, view out of cache {numpy_time * 1e3:8.2f} ms | add_/NumPy = "
          f"{add_step / numpy_time:5.2f} (target <= 1.5)")
    print(f"  warm (view in cache): add_ step {warm_step * 1e3:8.3f} ms | NumPy {warm_numpy * 1e3:8.3f} ms "
          f"| add_/NumPy = {warm_step / warm_numpy:5.2f}")
    print(f"  peak memory, in place: {peak / base_bytes:5.2f} bases (target <= 1.1) | functional plan "
          f"(old value also requested): {functional_peak / base_bytes:5.2f} bases")
    print(f"  functional plan says: {explain}")


def main():
    create_view_scaling()
    in_place_update("rows [0:100] (a contiguous 1% slab)", (slice(0, 100),))
    in_place_update("columns [:, ::100] (a strided 1% view)", (slice(None), slice(None, None, 100)))


if __name__ == "__main__":
    main()
