"""Gradient-check and validation-listener benchmark.

* full and fast gradient checks of an MLP 64 -> 32 tanh -> 10 with batch 16
  (2,368 weights, softmax cross-entropy), against torch.autograd.gradcheck on
  the same function when PyTorch is importable;
* the NonInplaceValidationListener's overhead on a 20-op element-wise chain over
  10**6 float64 elements, as a ratio to plain execution.

Run: .venv/bin/python benchmarks/bench_gradcheck.py [--repeat N]
"""
import argparse
import statistics
import time

import numpy as np

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


def chain(size=10 ** 6, length=20):
    g = gv.Graph("chain")
    value = g.placeholder("x", (size,))
    steps = [lambda v: v + 1.0, lambda v: v * 0.5, g.math.sin, lambda v: v - 0.25, g.math.tanh]
    for i in range(length):
        value = steps[i % len(steps)](value)
    return g, value, {"x": np.random.default_rng(1).normal(size=size)}


def listener_overhead(repeat):
    g, output, feeds = chain()
    listener = gv.NonInplaceValidationListener()
    g.output(feeds, [output], listeners=[listener])             # compile the fingerprint kernels
    plain = timed(lambda: g.output(feeds, [output]), repeat)
    listened = timed(lambda: g.output(feeds, [output], listeners=[listener]), repeat)
    assert not listener.violations
    return plain, listened


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    parameters, rows, feeds, weights = graphview_checks(repeat)
    rows += torch_checks(feeds, weights, repeat)
    plain, listened = listener_overhead(max(repeat, 10))
    print(f"gradient checks: MLP 64 -> 32 tanh -> 10, batch 16, {parameters} parameters (best / median of {repeat})")
    width = max(len(r[0]) for r in rows)
    print(f"  {'check':<{width}}  {'best s':>8}  {'median s':>8}  notes")
    for label, best, median, notes in rows:
        numbers = f"{best:8.3f}  {median:8.3f}" if best is not None else f"{'-':>8}  {'-':>8}"
        print(f"  {label:<{width}}  {numbers}  {notes}")
    print("NonInplaceValidationListener overhead: 20-op chain over 10**6 float64 elements")
    print(f"  plain execution      {plain[0] * 1e3:8.2f} ms best, {plain[1] * 1e3:8.2f} ms median")
    print(f"  with the listener    {listened[0] * 1e3:8.2f} ms best, {listened[1] * 1e3:8.2f} ms median")
    print(f"  ratio                {listened[0] / plain[0]:8.2f}x best, {listened[1] / plain[1]:8.2f}x median"
          "  (target <= 2x)")


if __name__ == "__main__":
    main()
