"""Time per training step: MLP 64-128-10 (relu), batch 256, softmax cross-entropy, SGD with momentum 0.9.

graphview (one executor run for loss + gradients, then the in-place updater
kernels) against PyTorch eager and jax.jit, in the same run, float32 and
float64. PyTorch and JAX are optional (the ``compare`` extra); a missing one
is reported and skipped.

    python benchmarks/bench_train.py [--steps 300] [--repeats 5] [--threads N]

Two kinds of figure. A "step" is everything one training iteration does once
the batch is in memory: forward, loss, backward and the parameter update. A
"fit step" also includes the data handling: one epoch of 20 shuffled batches
from arrays of 5,120 examples, through ``g.fit(ArrayDataSet >> Shuffle >>
Batch(256))`` for graphview, and for PyTorch both through a
``DataLoader(TensorDataset, batch_size=256, shuffle=True)`` and through a
hand-written loop (``randperm`` and one index per tensor per batch), divided
by the 20 steps. Each figure is the median over repeats of the mean time per
step. ``--threads`` sets the BLAS threads (graphview, through threadpoolctl)
and PyTorch's threads; by default each library uses its own default.
"""
import argparse
import os
import statistics
import time

import numpy as np

FEATURES, HIDDEN, CLASSES, BATCH = 64, 128, 10, 256
LEARNING_RATE, MOMENTUM = 0.05, 0.9
BATCHES = 20        # batches per epoch in the fit figures
THREADS = None      # --threads


def epoch_data(dtype, seed=1):
    """One epoch of examples for the fit figures."""
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(BATCHES * BATCH, FEATURES)).astype(dtype),
            rng.integers(0, CLASSES, BATCHES * BATCH).astype(np.int64))


def problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, FEATURES)).astype(dtype)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    params = {"w1": rng.normal(0, np.sqrt(2 / FEATURES), (FEATURES, HIDDEN)).astype(dtype),
              "b1": np.zeros(HIDDEN, dtype),
              "w2": rng.normal(0, np.sqrt(1 / HIDDEN), (HIDDEN, CLASSES)).astype(dtype),
              "b2": np.zeros(CLASSES, dtype)}
    return x, y, params


def timed(candidates, repeats):
    """Median seconds per step of each candidate ``(function, calls, steps per call)``, repeats interleaved.

    Taking one repeat of every candidate in turn, rather than all repeats of one
    and then the next, lets a shared machine's changing load hit all of them alike.
    """
    for function, calls, _ in candidates.values():
        for _ in range(max(2, calls // 10)):
            function()
    means = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, (function, calls, per_call) in candidates.items():
            start = time.perf_counter()
            for _ in range(calls):
                function()
            means[name].append((time.perf_counter() - start) / (calls * per_call))
    return {name: statistics.median(values) for name, values in means.items()}


def graphview_model(name, dtype, params):
    """The MLP as a graphview graph whose loss is set: x -> relu(x w1 + b1) w2 + b2 -> cross-entropy."""
    import graphview as gv
    g = gv.Graph(name)
    xs = g.placeholder("x", (None, FEATURES), dtype)
    ys = g.placeholder("y", (None,), "int64")
    v = {key: g.var(key, value) for key, value in params.items()}
    logits = g.nn.relu(xs @ v["w1"] + v["b1"]) @ v["w2"] + v["b2"]
    g.set_loss(g.loss.softmax_cross_entropy(logits, ys, name="loss"))
    return g


def graphview_step(dtype):
    import graphview as gv
    from graphview.training.step import GradientStep
    x, y, params = problem(dtype)
    g = graphview_model("bench", dtype, params)
    gradients = GradientStep(g, list(params))
    updater = gv.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM)
    feeds = {"x": x, "y": y}

    def step():
        loss, grads = gradients(feeds)
        updater.step(g, grads)
        return loss
    return step


def graphview_fit_step(dtype):
    """One epoch through g.fit: the pipeline slices shuffled batches from the arrays, then the steps run."""
    import graphview as gv
    _, _, params = problem(dtype)
    g = graphview_model("bench-fit", dtype, params)
    x, y = epoch_data(dtype)
    dataset = gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Shuffle(seed=0) >> gv.data.Batch(BATCH)
    config = gv.TrainingConfig(gv.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM), ["x"], ["y"])

    def epoch():
        g.fit(dataset, epochs=1, config=config, progress=False)
    return epoch


def torch_model(dtype):
    import torch
    if THREADS:
        torch.set_num_threads(THREADS)
    _, _, params = problem(dtype)
    p = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
    optimizer = torch.optim.SGD(list(p.values()), lr=LEARNING_RATE, momentum=MOMENTUM)

    def train(xt, yt):
        optimizer.zero_grad(set_to_none=True)
        logits = torch.relu(xt @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        loss = torch.nn.functional.cross_entropy(logits, yt)
        loss.backward()
        optimizer.step()
        return loss.item()
    return train


def torch_loader_fit_step(dtype):
    """One epoch of PyTorch's idiomatic loop: DataLoader(TensorDataset, shuffle=True)."""
    import torch
    train = torch_model(dtype)
    x, y = epoch_data(dtype)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                                         batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(0))

    def epoch():
        for xb, yb in loader:
            train(xb, yb)
    return epoch


def torch_indexed_fit_step(dtype):
    """One epoch of a hand-written PyTorch loop: a randperm, then one index per tensor per batch."""
    import torch
    train = torch_model(dtype)
    x, y = epoch_data(dtype)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    generator = torch.Generator().manual_seed(0)

    def epoch():
        order = torch.randperm(len(xt), generator=generator)
        for start in range(0, len(xt), BATCH):
            rows = order[start:start + BATCH]
            train(xt[rows], yt[rows])
    return epoch


def torch_step(dtype):
    import torch
    x, y, _ = problem(dtype)
    train = torch_model(dtype)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    return lambda: train(xt, yt)


def jax_step(dtype):
    import jax
    if dtype == np.float64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    x, y, params = problem(dtype)

    def loss_of(p, x, y):
        logits = jax.nn.relu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    @jax.jit
    def update(p, velocity, x, y):
        loss, grads = jax.value_and_grad(loss_of)(p, x, y)
        velocity = jax.tree_util.tree_map(lambda v, g: MOMENTUM * v + g, velocity, grads)
        p = jax.tree_util.tree_map(lambda w, v: w - LEARNING_RATE * v, p, velocity)
        return p, velocity, loss

    state = {"p": {k: jnp.asarray(v) for k, v in params.items()}}
    state["v"] = jax.tree_util.tree_map(jnp.zeros_like, state["p"])
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def step():
        state["p"], state["v"], loss = update(state["p"], state["v"], xj, yj)
        return float(loss)          # wait for the result, as the other two do
    return step


def main(argv=None):
    global THREADS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="BLAS and PyTorch threads (default: theirs)")
    args = parser.parse_args(argv)
    THREADS = args.threads
    if THREADS:
        import scipy.linalg.cython_blas  # noqa: F401  (load the BLAS that Numba's np.dot calls, to limit it)
        from threadpoolctl import threadpool_limits
        threadpool_limits(THREADS, user_api="blas")
    print(f"MLP {FEATURES}-{HIDDEN}-{CLASSES}, batch {BATCH}, SGD momentum {MOMENTUM}, "
          f"threads {THREADS or 'default'}: median over {args.repeats} repeats of the mean of {args.steps} steps")
    print(f"{'dtype':<8} {'framework':<40} {'ms/step':>9} {'vs torch':>9}")
    epochs = max(1, args.steps // BATCHES)
    for dtype in (np.float32, np.float64):
        candidates, tables = {}, {}
        for name, make, table in (
                ("graphview", graphview_step, "step"),
                ("pytorch eager", torch_step, "step"),
                ("jax.jit", jax_step, "step"),
                ("graphview g.fit (Shuffle >> Batch)", graphview_fit_step, "fit"),
                ("pytorch eager, DataLoader loop", torch_loader_fit_step, "fit"),
                ("pytorch eager, randperm + index loop", torch_indexed_fit_step, "fit")):
            try:
                function = make(dtype)
            except ImportError as error:
                print(f"{np.dtype(dtype).name:<8} {name:<40} {'skipped':>9}  ({error.name} is not installed)")
                continue
            candidates[name] = (function, args.steps, 1) if table == "step" else (function, epochs, BATCHES)
            tables[name] = table
        seconds = timed(candidates, args.repeats)
        for title, table, reference in (("step (batch in memory)", "step", "pytorch eager"),
                                        ("fit step (with data handling)", "fit",
                                         "pytorch eager, randperm + index loop")):
            print(f"-- {title}")
            base = seconds.get(reference)
            for name in (name for name in seconds if tables[name] == table):
                ratio = f"{seconds[name] / base:8.2f}x" if base else ""
                print(f"{np.dtype(dtype).name:<8} {name:<40} {1e3 * seconds[name]:9.3f} {ratio:>9}")


if __name__ == "__main__":
    main()
