"""Layer ops against NumPy and PyTorch eager, single-threaded, in the same run.

    python benchmarks/bench_layers.py [--repeats 15] [--steps 10] [--profile]

1. conv2d forward alone at the digits-CNN shapes (float32, batch 256, 8x8 images, 3x3 kernels,
   padding 1): graphview's kernel (the op's launch on arrays), the op through ``g.output``, NumPy
   im2col (sliding_window_view) + matmul, and ``torch.nn.functional.conv2d``.
2. The digits-CNN training step (float32, batch 256): conv3x3 1->16 pad 1, relu, conv3x3 16->32 pad 1,
   relu, max_pool 2, conv3x3 32->32 pad 1, relu, max_pool 2, linear 128->10, softmax cross-entropy;
   forward, backward and a plain SGD update. graphview through a GradientStep (what ``fit`` runs per
   batch) and its SGD updater, against PyTorch eager with torch.optim.SGD.
3. ``g.fit`` per step for examples/cnn_digits.py's model (issue 17's layers: conv 1->16 "same", relu, conv
   16->32 "same", batch norm, relu, max_pool 2, flatten, dropout 0.25, dense 512->10; float32, batch 64,
   Adam): one epoch of ``fit`` over ``--fit-batches`` batches (its data pipeline, dropout masks and batch
   norm's running statistics included) divided by the batches, against the same model in PyTorch eager
   (nn.Sequential, model.train(), Adam) stepping through the same batches in a plain loop, no DataLoader.

Everything runs on one thread: OPENBLAS_NUM_THREADS (and the other BLAS variables) are set before
NumPy loads, Numba's threads are set to 1 and so are PyTorch's. Each figure is the best, over
``--repeats`` tries, of the mean time of ``--steps`` calls, the candidates taking turns try by try;
ratios are NumPy's or PyTorch's time over graphview's (above 1: graphview is faster). ``--clock cpu``
times the calling thread's CPU time (``time.thread_time``) instead of the wall clock: on a shared
machine it leaves out the time the thread waits for a core, and as every candidate computes on the
calling thread (PyTorch's autograd runs a CPU-only backward there too) it is as fair.
``--profile`` adds graphview's step time per op (a ProfilingListener; the listener adds a little time).
"""
import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_variable] = "1"

import argparse  # noqa: E402  (the thread variables must be set before NumPy loads)
import sys  # noqa: E402
import time  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

import graphview as gv  # noqa: E402
from graphview import registry  # noqa: E402
from graphview.listeners import ProfilingListener  # noqa: E402
from graphview.training.step import GradientStep  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import best_of_turns, optional, table  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from cnn_digits import build_cnn  # noqa: E402  (the model of examples/cnn_digits.py)

BATCH, CLASSES, LEARNING_RATE = 256, 10, 0.05
CONVS = [(1, 16), (16, 32), (32, 32)]          # (in, out) channels, 3x3, padding 1
SIZES = [8, 8, 4]                               # input height = width of each convolution


def parameters(seed=0):
    rng = np.random.default_rng(seed)
    params = {}
    for i, (cin, cout) in enumerate(CONVS, 1):
        params[f"w{i}"] = rng.normal(0, np.sqrt(2 / (9 * cin)), (cout, cin, 3, 3)).astype(np.float32)
        params[f"b{i}"] = np.zeros(cout, np.float32)
    params["w4"] = rng.normal(0, np.sqrt(1 / 128), (128, CLASSES)).astype(np.float32)
    params["b4"] = np.zeros(CLASSES, np.float32)
    x = rng.normal(size=(BATCH, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    return x, y, params


def numpy_conv(x, w):
    """im2col with sliding_window_view, then one matmul: NumPy's idiomatic convolution (padding 1, stride 1)."""
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))   # n c h w kh kw
    n, c, h, width = windows.shape[:4]
    col = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * width, c * 9)
    out = col @ w.reshape(w.shape[0], -1).T
    return out.reshape(n, h, width, -1).transpose(0, 3, 1, 2)


def conv_figures(repeats, steps, clock=time.perf_counter):
    torch = optional("torch")
    rng = np.random.default_rng(1)
    launch = registry.get("conv2d").kernel
    rows = []
    for (cin, cout), size in zip(CONVS, SIZES):
        x = rng.normal(size=(BATCH, cin, size, size)).astype(np.float32)
        w = rng.normal(size=(cout, cin, 3, 3)).astype(np.float32)
        out = np.empty((BATCH, cout, size, size), np.float32)
        attrs = dict(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1, layout="bchw")
        g = gv.Graph()
        y = g.nn.conv2d(g.placeholder("x", (None, cin, size, size), "float32"), g.var("w", w), padding=1)
        launch(x, w, out, **attrs)
        expected = numpy_conv(x, w)
        assert np.allclose(out, expected, rtol=1e-4, atol=1e-4), "conv2d differs from NumPy's im2col"
        candidates = [lambda: launch(x, w, out, **attrs), lambda: g.output({"x": x}, [y]), lambda: numpy_conv(x, w)]
        if torch is not None:
            xt, wt = torch.from_numpy(x), torch.from_numpy(w)

            def torch_conv():
                with torch.no_grad():
                    return torch.nn.functional.conv2d(xt, wt, padding=1)
            candidates.append(torch_conv)
        kernel, graph, numpy_time, *torch_time = best_of_turns(candidates, repeats, steps, warmup=2, clock=clock)
        row = [f"{cin}->{cout} on {size}x{size}", f"{kernel * 1e3:.3f}", f"{graph * 1e3:.3f}", f"{numpy_time * 1e3:.3f}",
               f"{numpy_time / kernel:.2f}x"]
        if torch_time:
            row += [f"{torch_time[0] * 1e3:.3f}", f"{torch_time[0] / kernel:.2f}x"]
        rows.append(row)
    header = ["conv2d (batch 256, 3x3, pad 1)", "graphview kernel ms", "g.output ms", "NumPy im2col ms",
              "NumPy / graphview"]
    if torch is not None:
        header += ["torch ms", "torch / graphview"]
    return table(rows, header)


def graphview_step(listeners=()):
    """The CNN step as fit runs it: a GradientStep (loss and gradients in one executor run), then SGD
    (``listeners`` watch the executor run: the profile below passes a ProfilingListener)."""
    x, y, params = parameters()
    g = gv.Graph("digits-cnn")
    xs = g.placeholder("x", (None, 1, 8, 8), "float32")
    ys = g.placeholder("y", (None,), "int64")
    v = {key: g.var(key, value) for key, value in params.items()}
    h = g.nn.relu(g.nn.conv2d(xs, v["w1"], v["b1"], padding=1))
    h = g.nn.max_pool2d(g.nn.relu(g.nn.conv2d(h, v["w2"], v["b2"], padding=1)), 2)
    h = g.nn.max_pool2d(g.nn.relu(g.nn.conv2d(h, v["w3"], v["b3"], padding=1)), 2)
    logits = g.shape.reshape(h, (-1, 128)) @ v["w4"] + v["b4"]
    g.set_loss(g.loss.softmax_cross_entropy(logits, ys, name="loss"))
    gradients = GradientStep(g, list(params))
    updater = gv.SGD(learning_rate=LEARNING_RATE)
    feeds = {"x": x, "y": y}

    def step():
        loss, grads = gradients(feeds, listeners)
        updater.step(g, grads)
        return loss
    return step


def torch_step(torch):
    x, y, params = parameters()
    p = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
    optimizer = torch.optim.SGD(list(p.values()), lr=LEARNING_RATE)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    F = torch.nn.functional

    def step():
        optimizer.zero_grad(set_to_none=True)
        h = F.relu(F.conv2d(xt, p["w1"], p["b1"], padding=1))
        h = F.max_pool2d(F.relu(F.conv2d(h, p["w2"], p["b2"], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, p["w3"], p["b3"], padding=1)), 2)
        loss = F.cross_entropy(h.reshape(-1, 128) @ p["w4"] + p["b4"], yt)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def step_figures(repeats, steps, clock=time.perf_counter):
    torch = optional("torch")
    if "max_pool2d" not in registry.ops():
        return "digits CNN step: skipped, g.nn.max_pool2d is not registered (graphview/ops/pool.py)"
    candidates = [graphview_step()] + ([torch_step(torch)] if torch is not None else [])
    ours, *theirs = best_of_turns(candidates, repeats, steps, warmup=2, clock=clock)
    rows = [["graphview (GradientStep + SGD)", f"{ours * 1e3:.2f}", "1.00x"]]
    if theirs:
        rows.append(["PyTorch eager (autograd + optim.SGD)", f"{theirs[0] * 1e3:.2f}", f"{theirs[0] / ours:.2f}x"])
    return table(rows, ["digits CNN step (float32, batch 256)", "ms per step", "torch / graphview"])


def profile_figures(steps):
    """Time per op of graphview's CNN step (ProfilingListener), over ``steps`` steps after two warm-up steps."""
    profiler = ProfilingListener()
    step = graphview_step([profiler])
    step()
    step()
    profiler.reset()
    for _ in range(steps):
        step()
    rows = [[r["op"], str(r["calls"] // steps), f"{r['seconds'] / steps * 1e3:.3f}", f"{100 * r['share']:.1f}%"]
            for r in profiler.rows()]
    total = sum(r["seconds"] for r in profiler.rows()) / steps
    rows.append(["all ops", "", f"{total * 1e3:.3f}", "100.0%"])
    return table(rows, ["graphview CNN step, per op", "calls per step", "ms per step", "share"])


def digits_batches(count, batch=64, seed=0):
    """``count`` batches of random 8x8 images and labels at the digits example's shapes (timing only)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(count * batch, 1, 8, 8)).astype(np.float32)
    return x, rng.integers(0, CLASSES, count * batch).astype(np.int64)


def graphview_fit_epoch(x, y, batch=64):
    """One epoch of ``g.fit`` over (x, y) in batches of ``batch`` for the example's CNN, with Adam."""
    g, logits = build_cnn("float32", seed=0)
    batches = gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Batch(batch)
    config = gv.TrainingConfig(updater=gv.Adam(learning_rate=1e-3), feature_mapping=["x"], label_mapping=["y"],
                               prediction=logits.name)
    return lambda: g.fit(batches, epochs=1, config=config, progress=False)


def torch_fit_epoch(torch, x, y, batch=64):
    """The same model in PyTorch eager: one pass of a plain training loop over the same batches."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding="same"), nn.ReLU(), nn.Conv2d(16, 32, 3, padding="same"),
                          nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Dropout(0.25),
                          nn.Linear(512, CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.from_numpy(x[i:i + batch]), torch.from_numpy(y[i:i + batch])) for i in range(0, len(x), batch)]

    def epoch():
        model.train()
        for xb, yb in batches:
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            optimizer.step()
        return loss.item()
    return epoch


def fit_figures(repeats, count, clock=time.perf_counter):
    """ms per step of ``g.fit`` on the example's CNN and of PyTorch's loop, over ``count`` batches of 64."""
    torch = optional("torch")
    x, y = digits_batches(count)
    candidates = [graphview_fit_epoch(x, y)] + ([torch_fit_epoch(torch, x, y)] if torch is not None else [])
    ours, *theirs = (seconds / count for seconds in best_of_turns(candidates, repeats, 1, warmup=2, clock=clock))
    rows = [["graphview g.fit (Adam)", f"{ours * 1e3:.2f}", "1.00x"]]
    if theirs:
        rows.append(["PyTorch eager loop (Adam)", f"{theirs[0] * 1e3:.2f}", f"{theirs[0] / ours:.2f}x"])
    return table(rows, [f"cnn_digits fit step (float32, batch 64, {count} batches)", "ms per step",
                        "torch / graphview"])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--fit-batches", type=int, default=22,
                        help="batches of 64 per timed epoch in section 3 (22: the digits training set)")
    parser.add_argument("--profile", action="store_true", help="also print the time per op of graphview's CNN step")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="time the wall clock or the calling thread's CPU time (less noisy on a shared machine)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock}; load average {os.getloadavg()[0]:.2f}")
    numba.set_num_threads(1)
    torch = optional("torch")
    if torch is not None:
        torch.set_num_threads(1)
    print(conv_figures(args.repeats, args.steps, clock))
    print()
    print(step_figures(args.repeats, args.steps, clock))
    print()
    print(fit_figures(args.repeats, args.fit_batches, clock))
    if args.profile:
        print()
        print(profile_figures(args.steps * 5))


if __name__ == "__main__":
    main()
