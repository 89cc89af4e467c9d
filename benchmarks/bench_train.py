"""Time per training step: MLP 64-128-10 (relu), batch 256, softmax cross-entropy, SGD with momentum 0.9.

graphview (one executor run for loss + gradients, then the in-place updater
kernels) against PyTorch eager and jax.jit, in the same run, float32 and
float64. PyTorch and JAX are optional (the ``compare`` extra); a missing one
is reported and skipped.

    python benchmarks/bench_train.py [--steps 300] [--repeats 5]

A "step" is everything one training iteration does once the batch is in
memory: forward, loss, backward and the parameter update. The figure is the
median over repeats of the mean time per step.
"""
import argparse
import os
import statistics
import time

import numpy as np

FEATURES, HIDDEN, CLASSES, BATCH = 64, 128, 10, 256
LEARNING_RATE, MOMENTUM = 0.05, 0.9


def problem(dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(BATCH, FEATURES)).astype(dtype)
    y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
    params = {"w1": rng.normal(0, np.sqrt(2 / FEATURES), (FEATURES, HIDDEN)).astype(dtype),
              "b1": np.zeros(HIDDEN, dtype),
              "w2": rng.normal(0, np.sqrt(1 / HIDDEN), (HIDDEN, CLASSES)).astype(dtype),
              "b2": np.zeros(CLASSES, dtype)}
    return x, y, params


def timed(step, steps, repeats, warmup=20):
    for _ in range(warmup):
        step()
    means = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        means.append((time.perf_counter() - start) / steps)
    return statistics.median(means)


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
    """The same step through g.fit (pipeline batches, history, hooks): one epoch of 20 batches per call."""
    import graphview as gv
    x, y, params = problem(dtype)
    g = graphview_model("bench-fit", dtype, params)
    batches = 20
    data = gv.data.ArrayDataSet({"x": np.tile(x, (batches, 1))}, {"y": np.tile(y, batches)}) >> gv.data.Batch(BATCH)
    cached = list(data)
    dataset = gv.data.IterableDataSet(lambda: cached)        # time the training loop, not the batching
    config = gv.TrainingConfig(gv.SGD(learning_rate=LEARNING_RATE, momentum=MOMENTUM), ["x"], ["y"])

    def epoch():
        g.fit(dataset, epochs=1, config=config, progress=False)
    return epoch, batches


def torch_step(dtype):
    import torch
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    x, y, params = problem(dtype)
    p = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    optimizer = torch.optim.SGD(list(p.values()), lr=LEARNING_RATE, momentum=MOMENTUM)

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = torch.relu(xt @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        loss = torch.nn.functional.cross_entropy(logits, yt)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"MLP {FEATURES}-{HIDDEN}-{CLASSES}, batch {BATCH}, SGD momentum {MOMENTUM}: "
          f"median over {args.repeats} repeats of the mean of {args.steps} steps")
    print(f"{'dtype':<8} {'framework':<28} {'ms/step':>9} {'vs torch':>9}")
    for dtype in (np.float32, np.float64):
        results = {}
        results["graphview"] = timed(graphview_step(dtype), args.steps, args.repeats)
        epoch, batches = graphview_fit_step(dtype)
        results["graphview (through g.fit)"] = timed(epoch, max(1, args.steps // batches), args.repeats, 2) / batches
        for name, make in (("pytorch eager", torch_step), ("jax.jit", jax_step)):
            try:
                results[name] = timed(make(dtype), args.steps, args.repeats)
            except ImportError as error:
                print(f"{np.dtype(dtype).name:<8} {name:<28} {'skipped':>9}  ({error.name} is not installed)")
        reference = results.get("pytorch eager")
        for name, seconds in results.items():
            ratio = f"{seconds / reference:8.2f}x" if reference else ""
            print(f"{np.dtype(dtype).name:<8} {name:<28} {1e3 * seconds:9.3f} {ratio:>9}")


if __name__ == "__main__":
    main()
