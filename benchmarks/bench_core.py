"""Core benchmark: executor overhead, element-wise throughput, sum, matmul and start-up.

Every figure is measured in this run, against NumPy (and PyTorch or JAX when
installed); ratios above 1 mean graphview is faster. Run: python benchmarks/bench_core.py
"""
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_time, optional, table  # noqa: E402

import graphview as gv  # noqa: E402

torch = optional("torch")
CHAIN = 1000
BIG = 10_000_000


def chain_graph():
    """``(graph, output, feeds)``: CHAIN element-wise ops (tanh, neg, * 0.5 in turn) on 16 elements."""
    g = gv.Graph("chain")
    x = g.placeholder("x", (16,))
    y = x
    for step in range(CHAIN):
        y = (g.math.tanh, g.math.neg, lambda v: g.math.mul(v, 0.5))[step % 3](y)
    return g, y, {"x": np.linspace(-1, 1, 16)}


def torch_chain_time(repeat=7):
    """PyTorch eager's microseconds per op on the same chain, or None without PyTorch."""
    if torch is None:
        return None
    value = torch.linspace(-1, 1, 16, dtype=torch.float64)

    def run():
        y = value
        for step in range(CHAIN):
            y = (torch.tanh, torch.neg, lambda v: v * 0.5)[step % 3](y)
        return y
    return best_time(run, repeat=repeat, number=5) / CHAIN * 1e6


def executor_overhead():
    """Microseconds per node of a chain of element-wise ops on 16 elements."""
    g, y, feeds = chain_graph()
    ours = best_time(lambda: g.output(feeds, [y]), repeat=7, number=5) / CHAIN * 1e6
    theirs = torch_chain_time()
    reference = "not installed" if theirs is None else f"{theirs:.2f} us/op"
    return [("executor overhead (us per node)", f"{ours:.2f}", "-", "-", "<= 2 us", reference)]


def elementwise_throughput():
    r = np.random.default_rng(0)
    a, b = r.uniform(0.1, 1.0, BIG), r.uniform(0.1, 1.0, BIG)
    g = gv.Graph("elementwise")
    x, y = g.placeholder("a", (BIG,)), g.placeholder("b", (BIG,))
    outputs = {"add": x + y, "mul": x * y, "exp": g.math.exp(x)}
    references = {"add": lambda: np.add(a, b), "mul": lambda: np.multiply(a, b), "exp": lambda: np.exp(a)}
    targets = {"add": ">= 1.0", "mul": ">= 0.9", "exp": ">= 0.9"}
    feeds = {"a": a, "b": b}
    rows = []
    for name, variable in outputs.items():
        # Fresh 80 MB outputs page-fault at very different speeds on a VM: best of many.
        ours = best_time(lambda: g.output(feeds, [variable]), repeat=15)
        numpy = best_time(references[name], repeat=15)
        rows.append((f"{name} 1e7 float64 (ms)", f"{ours * 1e3:.1f}", f"{numpy * 1e3:.1f}", f"{numpy / ours:.2f}",
                     targets[name], _torch_elementwise(name, a, b)))
    return rows


def _torch_elementwise(name, a, b):
    if torch is None:
        return "not installed"
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    run = {"add": lambda: ta + tb, "mul": lambda: ta * tb, "exp": lambda: torch.exp(ta)}[name]
    return f"{best_time(run) * 1e3:.1f} ms"


def reduction():
    values = np.random.default_rng(1).normal(size=BIG)
    g = gv.Graph("sum")
    total = g.math.sum(g.placeholder("x", (BIG,)))
    ours = best_time(lambda: g.output({"x": values}, [total]), repeat=10)
    numpy = best_time(lambda: np.sum(values), repeat=10)
    other = f"{best_time(lambda: torch.sum(torch.from_numpy(values))) * 1e3:.2f} ms" if torch else "not installed"
    return [("sum 1e7 float64 (ms)", f"{ours * 1e3:.2f}", f"{numpy * 1e3:.2f}", f"{numpy / ours:.2f}", ">= 0.8", other)]


def matmul():
    rows = []
    for dtype in ("float32", "float64"):
        r = np.random.default_rng(2)
        a, b = r.normal(size=(512, 512)).astype(dtype), r.normal(size=(512, 512)).astype(dtype)
        g = gv.Graph("matmul")
        product = g.placeholder("a", a.shape, dtype) @ g.placeholder("b", b.shape, dtype)
        feeds = {"a": a, "b": b}
        ours = best_time(lambda: g.output(feeds, [product]), repeat=7)
        numpy = best_time(lambda: a @ b, repeat=7)
        other = "not installed"
        if torch:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            other = f"{best_time(lambda: ta @ tb, repeat=7) * 1e3:.2f} ms"
        rows.append((f"matmul 512x512 {dtype} (ms)", f"{ours * 1e3:.2f}", f"{numpy * 1e3:.2f}", f"{numpy / ours:.2f}",
                     ">= 0.8", other))
    return rows


TEN_OPS = """
import numpy as np, graphview as gv
g = gv.Graph("ten")
x = g.placeholder("x", (4, 3))
w = g.var("w", np.ones((3, 3)))
y = g.nn.relu(x @ w + 1.0)
y = g.math.tanh(y * 2.0 - 0.5)
y = g.nn.softmax(g.math.exp(y) / 3.0)
g.output({"x": np.ones((4, 3))}, [g.math.sum(y)])
"""


def startup():
    def fresh(code):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    fresh(TEN_OPS)  # warm the Numba cache
    bare = min(fresh("pass") for _ in range(3))
    imported = min(fresh("import graphview") for _ in range(3))
    ten = min(fresh(TEN_OPS) for _ in range(3))
    return [("python -c 'import graphview' (s)", f"{imported:.2f}", f"{bare:.2f} (bare python)", "-", "-", "-"),
            ("fresh process, 10-op graph, warm cache (s)", f"{ten:.2f}", "-", "-", "<= 1.5 s", "-")]


def main():
    print(f"graphview {gv.__version__}, numpy {np.__version__}, torch {torch.__version__ if torch else 'not installed'}, "
          f"{os.cpu_count()} cores")
    rows = executor_overhead() + elementwise_throughput() + reduction() + matmul() + startup()
    print(table(rows, ("measure", "graphview", "numpy", "numpy/graphview", "target", "pytorch")))


if __name__ == "__main__":
    main()
