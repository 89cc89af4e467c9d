"""Fusion benchmark (ADR 0024): fused element-wise groups against unfused plans, NumPy, a hand-written
``@njit`` loop and PyTorch eager, all measured in this run; ratios above 1 mean graphview is faster.

    python benchmarks/bench_fusion.py [--repeats 7] [--cold]

1. ``relu(a*b + c)`` on 10^7 float64 (threads as the element-wise kernels use them; the hand loop is
   one thread): graphview fused, unfused, NumPy eager, the hand loop; and ``sum(relu(a*b + c))``, the
   group with a trailing reduction, against unfused and NumPy.
2. The executor chain of bench_core.py (1,000 element-wise ops on 16 elements): time per node, fused
   and unfused, against PyTorch eager's time per op.
3. The MLP training step of bench_train.py (float32 and float64, batch 256), fusion on and off.
4. With ``--cold``: ``graphview gradcheck --quiet`` over every op on empty Numba and graphview caches,
   then again warm (minutes).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, table  # noqa: E402
from bench_core import CHAIN, chain_graph, torch_chain_time  # noqa: E402
from bench_train import graphview_step  # noqa: E402

import graphview as gv  # noqa: E402

BIG = 10_000_000


@njit(cache=True)
def hand_loop(a, b, c, out):
    for i in range(a.size):
        v = a[i] * b[i] + c[i]
        out[i] = v if v > 0.0 else 0.0


def switched(on, function):
    """``function`` run with fusion on or off."""
    def run():
        gv.config.fusion = on
        try:
            return function()
        finally:
            gv.config.fusion = True
    return run


def relu_axpy(repeats):
    r = np.random.default_rng(0)
    a, b, c = (r.normal(size=BIG) for _ in range(3))
    g = gv.Graph("relu-axpy")
    y = g.nn.relu(g.placeholder("a", (BIG,)) * g.placeholder("b", (BIG,)) + g.placeholder("c", (BIG,)))
    feeds = {"a": a, "b": b, "c": c}
    expected = np.maximum(a * b + c, 0)
    assert np.array_equal(switched(True, lambda: g.output(feeds, [y]))()[y.name], expected)
    times = {
        "fused": best_time(switched(True, lambda: g.output(feeds, [y])), repeats),
        "unfused": best_time(switched(False, lambda: g.output(feeds, [y])), repeats),
        "numpy": best_time(lambda: np.maximum(a * b + c, 0), repeats),
        "hand": best_time(lambda: hand_loop(a, b, c, np.empty(BIG)), repeats),
    }
    return [("relu(a*b + c), 1e7 float64 (ms)", f"{times['fused'] * 1e3:.1f}", f"{times['unfused'] * 1e3:.1f}",
             f"NumPy {times['numpy'] * 1e3:.1f} (x{times['numpy'] / times['fused']:.2f}); hand @njit "
             f"{times['hand'] * 1e3:.1f} (fused/hand {times['fused'] / times['hand']:.2f})",
             ">= 3x NumPy, within 10% of the hand loop")] + summed(feeds, repeats)


def summed(feeds, repeats):
    """``sum(relu(a*b + c))``: the group with its trailing reduction, the values never stored."""
    g = gv.Graph("relu-axpy-sum")
    total = g.math.sum(g.nn.relu(g.placeholder("a", (BIG,)) * g.placeholder("b", (BIG,)) + g.placeholder("c", (BIG,))))
    a, b, c = feeds["a"], feeds["b"], feeds["c"]
    fused = switched(True, lambda: g.output(feeds, [total]))()[total.name]
    assert fused == switched(False, lambda: g.output(feeds, [total]))()[total.name]    # bit for bit
    times = {
        "fused": best_time(switched(True, lambda: g.output(feeds, [total])), repeats),
        "unfused": best_time(switched(False, lambda: g.output(feeds, [total])), repeats),
        "numpy": best_time(lambda: np.sum(np.maximum(a * b + c, 0)), repeats),
    }
    return [("sum(relu(a*b + c)), 1e7 float64 (ms)", f"{times['fused'] * 1e3:.1f}", f"{times['unfused'] * 1e3:.1f}",
             f"NumPy {times['numpy'] * 1e3:.1f} (x{times['numpy'] / times['fused']:.2f})", "a win over unfused")]


def chain(repeats):
    g, y, feeds = chain_graph()
    fused = best_time(switched(True, lambda: g.output(feeds, [y])), repeats, 5) / CHAIN * 1e6
    unfused = best_time(switched(False, lambda: g.output(feeds, [y])), repeats, 5) / CHAIN * 1e6
    per_op = torch_chain_time(repeats)
    reference = ("not installed" if per_op is None
                 else f"PyTorch {per_op:.2f} us/op (fused/PyTorch {fused / per_op:.3f})")
    return [("executor chain, 1,000 ops on 16 elements (us per node)", f"{fused:.3f}", f"{unfused:.2f}", reference,
             "<= 0.25x PyTorch")]


def training(repeats):
    rows = []
    for dtype in ("float32", "float64"):
        step = graphview_step(dtype)
        on = best_time(switched(True, step), repeats, 20) * 1e3
        off = best_time(switched(False, step), repeats, 20) * 1e3
        rows.append((f"MLP training step, {dtype} (ms)", f"{on:.3f}", f"{off:.3f}", f"unfused/fused {off / on:.2f}",
                     "report"))
    return rows


def cold_gradcheck():
    rows = []
    with tempfile.TemporaryDirectory() as numba_cache, tempfile.TemporaryDirectory() as graphview_cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=numba_cache, GRAPHVIEW_CACHE_DIR=graphview_cache)
        command = [os.path.join(os.path.dirname(sys.executable), "graphview"), "gradcheck", "--quiet"]
        for label in ("cold (empty caches)", "warm"):
            start = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            rows.append((f"graphview gradcheck, every op, {label} (s)", f"{seconds:.1f}", "-",
                         done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:],
                         "<= 30 s cold"))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--cold", action="store_true", help="also time a cold and a warm gradcheck (minutes)")
    args = parser.parse_args()
    rows = relu_axpy(args.repeats) + chain(args.repeats) + training(args.repeats)
    if args.cold:
        rows += cold_gradcheck()
    print(table(rows, ("measure", "fused", "unfused", "reference (same run)", "target")))


if __name__ == "__main__":
    main()
