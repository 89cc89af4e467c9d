"""The fused recurrent ops (ADR 0020) against PyTorch eager, in the same run, both single-threaded.

An LSTM step as issue 16 sets it: float32, batch 64, 8 time steps, 8 -> 128 hidden, forward and
backward (the gradients of the loss sum(outputs) with respect to the four weights and x). graphview
runs ``g.calculate_gradients``; PyTorch runs ``torch.nn.LSTM`` and ``backward()``. Best of --repeat
tries of --number steps each, graphview's and PyTorch's tries taking turns. Then the same for the GRU,
and the parts of graphview's step (the forward kernel, backpropagation through time with dx, the
weight gradients) and what recomputing the gates in the backward pass, instead of storing them, would
add (ADR 0020).

"graphview alone" is graphview's step timed in a fresh process of its own (--alone), where PyTorch never
runs: the same, since graphview raises glibc's mmap threshold when imported (ADR 0026), so the step's
few-MB arrays come from the heap either way.

Run: OPENBLAS_NUM_THREADS=1 python benchmarks/bench_recurrent.py [--repeat N] [--number N]
"""
import argparse
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_of_turns, best_time, optional, table  # noqa: E402

import graphview as gv  # noqa: E402
from graphview.ops.recurrent import checked_lengths, time_major  # noqa: E402
from graphview_kernels import recurrent as kernels  # noqa: E402

BATCH, STEPS, FEATURES, HIDDEN = 64, 8, 8, 128


def weights(gates, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    scale = 1 / np.sqrt(HIDDEN)
    return [r.uniform(-scale, scale, shape).astype(dtype) for shape in
            ((gates * HIDDEN, FEATURES), (gates * HIDDEN, HIDDEN), (gates * HIDDEN,), (gates * HIDDEN,))]


def graphview_step(kind, x):
    """A function running one forward and backward step of graphview's fused op."""
    gates = 4 if kind == "lstm" else 3
    g = gv.Graph(f"bench-{kind}")
    names = ["w_ih", "w_hh", "b_ih", "b_hh"]
    variables = [g.var(name, value) for name, value in zip(names, weights(gates))]
    xs = g.var("x", x)
    zeros = np.zeros((BATCH, HIDDEN), np.float32)
    states = (zeros, zeros) if kind == "lstm" else (zeros,)
    results = getattr(g.nn, kind)(xs, *states, *variables)
    g.set_loss(g.math.sum(results[0]))
    wanted = names + ["x"]
    return lambda: g.calculate_gradients({}, wanted)


def torch_step(torch, kind, x):
    module = (torch.nn.LSTM if kind == "lstm" else torch.nn.GRU)(FEATURES, HIDDEN, batch_first=True)
    xs = torch.tensor(x, requires_grad=True)

    def step():
        module.zero_grad(set_to_none=True)
        xs.grad = None
        outputs, _ = module(xs)
        outputs.sum().backward()
    return step


def parts(repeat, number):
    """Best times (ms) of the LSTM's kernels alone, and of what recomputing the gates would add."""
    r = np.random.default_rng(1)
    x = r.normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    w_ih, w_hh, b_ih, b_hh = weights(4)
    h0 = np.zeros((BATCH, HIDDEN), np.float32)
    xt = time_major(x, "btf")
    lengths = checked_lengths("lstm", (), BATCH, STEPS)
    packed = np.empty((STEPS + 1, BATCH, 6 * HIDDEN), np.float32)
    kernels.lstm_forward(xt, h0, h0, w_ih, w_hh, b_ih, b_hh, lengths, packed)   # h_{t-1} below: values, not np.empty's
    grad = r.normal(size=(STEPS, BATCH, HIDDEN)).astype(np.float32)   # the outputs' alone, as the step's loss gives
    gates = np.empty((STEPS + 1, BATCH, 4 * HIDDEN + FEATURES), np.float32)
    weight_grads = np.empty((4 * HIDDEN, FEATURES + HIDDEN + 1), np.float32)
    previous = np.ascontiguousarray(packed[:STEPS, :, :HIDDEN].reshape(-1, HIDDEN))
    timed = {
        "forward kernel (stores h, c and the 4 gates)":
            lambda: kernels.lstm_forward(xt, h0, h0, w_ih, w_hh, b_ih, b_hh, lengths, packed),
        "backpropagation through time kernel (and dx; no dh0, as for the step's constant h0)":
            lambda: kernels.lstm_backward(grad, packed, h0, h0, w_hh, w_ih, lengths, False, gates),
        "weight gradients kernel": lambda: kernels.lstm_weight_gradients(gates, xt, h0, packed, weight_grads),
        "recomputing the gate pre-activations (2 products)":
            lambda: np.dot(previous, w_hh.T) + np.dot(xt.reshape(-1, FEATURES), w_ih.T),
    }
    return [(name, f"{best_time(f, repeat, number) * 1e3:.3f}") for name, f in timed.items()]


def alone(kind, repeat, number):
    """graphview's step in a fresh process where PyTorch never runs (seconds), by running --alone."""
    command = [sys.executable, os.path.abspath(__file__), "--alone", kind, "--repeat", str(repeat), "--number", str(number)]
    return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--number", type=int, default=10)
    parser.add_argument("--no-parts", action="store_true", help="only the whole steps, not the kernels alone")
    parser.add_argument("--alone", choices=("lstm", "gru"), help="time only graphview's step of this kind")
    args = parser.parse_args()
    x = np.random.default_rng(0).normal(size=(BATCH, STEPS, FEATURES)).astype(np.float32)
    if args.alone:
        print(best_of_turns([graphview_step(args.alone, x)], args.repeat, args.number, warmup_per_try=1)[0])
        return
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
    rows = []
    for kind in ("lstm", "gru"):
        steps = [graphview_step(kind, x)] + ([torch_step(torch, kind, x)] if torch is not None else [])
        ours, theirs = (best_of_turns(steps, args.repeat, args.number, warmup_per_try=1) + [None])[:2]
        rows.append((kind, f"{ours * 1e3:.3f}", "-" if theirs is None else f"{theirs * 1e3:.3f}",
                     "-" if theirs is None else f"{theirs / ours:.2f}x", f"{alone(kind, args.repeat, args.number) * 1e3:.3f}"))
    print(f"float32, batch {BATCH}, {STEPS} steps, {FEATURES} -> {HIDDEN} hidden, forward + backward, "
          f"single-threaded, best of {args.repeat} x {args.number}")
    print(table(rows, ("op", "graphview ms", "PyTorch eager ms", "speed-up (PyTorch / graphview)",
                       "graphview alone ms")))
    if not args.no_parts:
        print()
        print(table(parts(args.repeat, args.number), ("LSTM part", "ms")))


if __name__ == "__main__":
    main()
