"""Gradient-check and validation-listener benchmark.

* full and fast gradient checks of an MLP 64 -> 32 tanh -> 10 with batch 16
  (2,368 weights, softmax cross-entropy), against torch.autograd.gradcheck on
  the same function when PyTorch is importable;
* the NonInplaceValidationListener's overhead as a ratio to plain execution, on
  the 20-op benchmark chain over 10**6 float64 and on chains of cheap ops (+1,
  *0.5) over 10**6, 1000 and 16 elements, next to the floor of a check that
  reads the inputs (a listener that only reads each input once before and once
  after its op) and to the listener with ``fingerprint_all=True``, which also
  hashes the inputs of element-wise ops (ADR 0006, addendum 2).

Run: .venv/bin/python benchmarks/bench_gradcheck.py [--repeat N]
"""
import argparse
import statistics
import time

import numpy as np
from numba import njit

import graphview as gv


def mlp(rng):
    g = gv.Graph("mlp")
    x = g.placeholder("x", (16, 64))
    y = g.placeholder("y", (16,), "int64")
    w1 = g.var("w1", rng.normal(size=(64, 32)) * 0.2)
    w2 = g.var("w2", rng.normal(size=(32, 10)) * 0.2)
    g.set_loss(g.loss.softmax_cross_entropy(g.nn.tanh(x @ w1) @ w2, y, name="loss"))
    return g, {"x": rng.normal(size=(16, 64)), "y": rng.integers(0, 10, 16)}


def timed(function, repeat):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times), result


def graphview_checks(repeat):
    g, feeds = mlp(np.random.default_rng(0))
    parameters = sum(v.node.shape[0] * v.node.shape[1] for v in g.variables() if v.kind is gv.VARIABLE)
    gv.check_gradients(g, feeds, fast=True)                     # compile kernels, build plans
    rows = []
    for label, fast in (("graphview full check", False), ("graphview fast check", True)):
        best, median, report = timed(lambda: gv.check_gradients(g, feeds, fast=fast), repeat)
        assert report.passed, str(report)
        checks = sum(v.checked for v in report.variables.values())
        rows.append((label, best, median, f"{checks} comparisons, passed"))
    return parameters, rows, feeds, {name: g.value(name) for name in ("w1", "w2")}


def torch_checks(feeds, weights, repeat):
    try:
        import torch
    except ImportError:
        return [("torch.autograd.gradcheck", None, None, "PyTorch not installed")]
    torch.set_num_threads(1)
    x = torch.tensor(feeds["x"])
    y = torch.tensor(feeds["y"])
    w1 = torch.tensor(weights["w1"], requires_grad=True)
    w2 = torch.tensor(weights["w2"], requires_grad=True)

    def function(a, b):
        return torch.nn.functional.cross_entropy(torch.tanh(x @ a) @ b, y)

    rows = []
    for label, fast in (("torch gradcheck (slow mode)", False), ("torch gradcheck (fast_mode)", True)):
        best, median, passed = timed(lambda: torch.autograd.gradcheck(function, (w1, w2), fast_mode=fast), repeat)
        rows.append((label, best, median, f"torch {torch.__version__}, passed={passed}"))
    return rows


def chain(size, length, cheap):
    """``length`` element-wise ops over ``size`` float64: the benchmark mix (+, *, sin, -, tanh) or,
    with ``cheap``, +1 and *0.5 alternating, ops cheaper than reading their input twice."""
    g = gv.Graph("chain")
    value = g.placeholder("x", (size,))
    steps = [lambda v: v + 1.0, lambda v: v * 0.5, g.math.sin, lambda v: v - 0.25, g.math.tanh]
    for i in range(length):
        value = steps[i % (2 if cheap else len(steps))](value)
    return g, value, {"x": np.random.default_rng(1).normal(size=size)}


CHAINS = (("benchmark chain: 20 ops (+, *, sin, -, tanh), 10**6 float64", 10 ** 6, 20, False),
          ("cheap chain: 20 ops (+1, *0.5), 10**6 float64", 10 ** 6, 20, True),
          ("cheap chain: 100 ops (+1, *0.5), shape (1000,)", 1000, 100, True),
          ("cheap chain: 100 ops (+1, *0.5), shape (16,)", 16, 100, True))


@njit(nogil=True)
def _read(flat):
    total = np.uint64(0)
    for i in range(flat.size):
        total += flat[i]
    return total


class ReadTwice(gv.Listener):
    """Reads each input of over 1024 elements once before and once after its op, as 64-bit words on
    one thread, and checks nothing: about the least that a check reading the inputs costs (the
    validation listener keeps the bytes of smaller inputs), and so the floor of its overhead."""

    def pre_op(self, ctx, node, inputs):
        for array in inputs:
            if array.size > 1024:
                flat = np.ascontiguousarray(array).reshape(-1)
                _read(flat.view(np.uint64) if flat.dtype.itemsize == 8 else flat.view(np.uint8))

    def post_op(self, ctx, node, inputs, outputs):
        self.pre_op(ctx, node, inputs)


def listener_overhead(repeat):
    """Per chain: plain runs and runs with each listener, interleaved (the machine is shared), as
    (label, {variant: (best, median)}). With a listener attached a plan runs op by op, so the
    plain reference is the unfused run where fusion exists (gv.config, ADR 0024)."""
    config = getattr(gv, "config", None)
    fusion = config.fusion if config is not None else None
    rows = []
    for label, size, length, cheap in CHAINS:
        g, output, feeds = chain(size, length, cheap)
        listener = gv.NonInplaceValidationListener()
        variants = {"plain": [], "read twice (floor)": [ReadTwice()], "validation listener": [listener],
                    "fingerprint_all=True": [gv.NonInplaceValidationListener(fingerprint_all=True)]}
        runs = repeat if size >= 10 ** 5 else 20 * repeat
        times = {name: [] for name in variants}
        if config is not None:
            config.fusion = False
        for index in range(runs + 1):                                   # the first round compiles
            for name, listeners in variants.items():
                start = time.perf_counter()
                g.output(feeds, [output], listeners=listeners)
                if index:
                    times[name].append(time.perf_counter() - start)
        summary = {name: (min(t), statistics.median(t)) for name, t in times.items()}
        if config is not None:
            config.fusion = True
            g.output(feeds, [output])
            summary["plain, fused"] = timed(lambda: g.output(feeds, [output]), runs)[:2]
            config.fusion = fusion
        assert not listener.violations
        rows.append((label, summary))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    parameters, rows, feeds, weights = graphview_checks(repeat)
    rows += torch_checks(feeds, weights, repeat)
    overhead = listener_overhead(max(repeat, 10))
    print(f"gradient checks: MLP 64 -> 32 tanh -> 10, batch 16, {parameters} parameters (best / median of {repeat})")
    width = max(len(r[0]) for r in rows)
    print(f"  {'check':<{width}}  {'best s':>8}  {'median s':>8}  notes")
    for label, best, median, notes in rows:
        numbers = f"{best:8.3f}  {median:8.3f}" if best is not None else f"{'-':>8}  {'-':>8}"
        print(f"  {label:<{width}}  {numbers}  {notes}")
    print("NonInplaceValidationListener overhead: ms best and median, ratio to plain (unfused) execution")
    for label, times in overhead:
        print(f"  {label}")
        plain = times["plain"]
        for name, (best, median) in times.items():
            print(f"    {name:<20} {best * 1e3:9.3f} {median * 1e3:9.3f}   {best / plain[0]:5.2f}x best, "
                  f"{median / plain[1]:5.2f}x median")


if __name__ == "__main__":
    main()
