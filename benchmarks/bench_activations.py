"""Activation benchmark: graphview's element-wise activations against a NumPy formula and PyTorch.

Every figure is measured in this run, through ``g.output`` (executor included), on one array per
dtype; the candidates take turns try by try, so a busy machine slows them alike. exp and relu are
the bounds: a transcendental activation costs about one exp, a select about one copy. Ratios are
the other's time over graphview's (above 1: graphview is faster).
Run: python benchmarks/bench_activations.py [--shape 512x512] [--repeat 20] [--ops softplus,silu]
"""
import argparse
import os
import sys
from math import erf

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_of_turns, optional, table  # noqa: E402

import graphview as gv  # noqa: E402

torch = optional("torch")
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
ERF = np.vectorize(erf, otypes=[np.float64])


def _log1p_exp_neg_abs(x):
    return np.log1p(np.exp(-np.abs(x)))


# name: (graphview builder, NumPy formula, PyTorch function)
OPS = {
    "exp": (lambda g, x: g.math.exp(x), np.exp, lambda t: torch.exp(t)),
    "relu": (lambda g, x: g.nn.relu(x), lambda x: np.maximum(x, 0), lambda t: torch.relu(t)),
    "sigmoid": (lambda g, x: g.nn.sigmoid(x), lambda x: 1 / (1 + np.exp(-x)), lambda t: torch.sigmoid(t)),
    "tanh": (lambda g, x: g.math.tanh(x), np.tanh, lambda t: torch.tanh(t)),
    "gelu": (lambda g, x: g.nn.gelu(x), lambda x: 0.5 * x * (1 + ERF(x * 0.7071067811865476)),
             lambda t: torch.nn.functional.gelu(t)),
    "softplus": (lambda g, x: g.nn.softplus(x), lambda x: np.maximum(x, 0) + _log1p_exp_neg_abs(x),
                 lambda t: torch.nn.functional.softplus(t)),
    "silu": (lambda g, x: g.nn.silu(x), lambda x: x / (1 + np.exp(-x)), lambda t: torch.nn.functional.silu(t)),
    "log_sigmoid": (lambda g, x: g.nn.log_sigmoid(x), lambda x: np.minimum(x, 0) - _log1p_exp_neg_abs(x),
                    lambda t: torch.nn.functional.logsigmoid(t)),
    "elu": (lambda g, x: g.nn.elu(x), lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))),
            lambda t: torch.nn.functional.elu(t)),
    "selu": (lambda g, x: g.nn.selu(x),
             lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0))),
             lambda t: torch.nn.functional.selu(t)),
    "leaky_relu": (lambda g, x: g.nn.leaky_relu(x), lambda x: np.where(x > 0, x, x * 0.01),
                   lambda t: torch.nn.functional.leaky_relu(t)),
    "hard_tanh": (lambda g, x: g.nn.hard_tanh(x), lambda x: np.clip(x, -1, 1),
                  lambda t: torch.nn.functional.hardtanh(t)),
}


def measure(name, dtype, shape, repeat):
    build, formula, torch_function = OPS[name]
    x = np.random.default_rng(0).normal(scale=4.0, size=shape).astype(dtype)
    g = gv.Graph(name)
    y = build(g, g.placeholder("x", shape, dtype))
    feeds = {"x": x}
    candidates = [lambda: g.output(feeds, [y]), lambda: formula(x)]
    if torch is not None:
        t = torch.from_numpy(x)

        def run_torch():
            with torch.no_grad():
                return torch_function(t)
        candidates.append(run_torch)
    with np.errstate(over="ignore"):
        times = best_of_turns(candidates, repeat)
    ours, numpy_time = times[0], times[1]
    row = [name, np.dtype(dtype).name, f"{ours * 1e3:.3f}", f"{numpy_time * 1e3:.3f}", f"{numpy_time / ours:.2f}"]
    if torch is not None:
        row += [f"{times[2] * 1e3:.3f}", f"{times[2] / ours:.2f}"]
    else:
        row += ["not installed", "-"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="512x512")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--dtypes", default="float32,float64")
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split("x"))
    rows = [measure(name, dtype, shape, args.repeat)
            for name in args.ops.split(",") for dtype in args.dtypes.split(",")]
    print(f"shape {shape}, best of {args.repeat}, ms per call (ratios: other / graphview, above 1 = graphview faster)")
    print(table(rows, ["op", "dtype", "graphview", "numpy", "np/gv", "torch", "torch/gv"]))


if __name__ == "__main__":
    main()
