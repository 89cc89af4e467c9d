"""Under ``mpiexec -n N``: dropout's masks per rank (seen through each rank's own gradients before they
are combined, every rank fed the same rows) and batch norm's running statistics after training.
Rank 0 writes a JSON report to argv[1]; tests/test_distributed.py judges it (and runs this twice)."""
import numpy as np

import graphview as gv
from common import batches, data, digest, report


class Recording(gv.distributed.DataParallel):
    """Keeps this rank's own gradients of the first step, before the ranks combine them."""

    local = None

    def update(self, updater, graph, gradients, weight, exchange=None):
        if self.local is None:
            self.local = {name: np.asarray(value).tolist() for name, value in sorted(gradients.items())}
        return super().update(updater, graph, gradients, weight, exchange)


def dropout_model():
    g = gv.Graph("dropout")
    x = g.placeholder("x", (None, 16))
    y = g.placeholder("y", (None,), "int64")
    w = g.var("w", np.ones(16))
    v = g.var("v", np.random.default_rng(3).normal(size=(16, 3)))
    g.set_loss(g.loss.softmax_cross_entropy(g.nn.dropout(x * w, 0.5, seed=3) @ v, y))
    return g


def batch_norm_model():
    g = gv.Graph("bn")
    x = g.placeholder("x", (None, 5))
    y = g.placeholder("y", (None,), "int64")
    gamma, beta = g.var("gamma", np.ones(5)), g.var("beta", np.zeros(5))
    mean = g.var("running_mean", np.zeros(5), trainable=False)
    var = g.var("running_var", np.ones(5), trainable=False)
    w = g.var("w", np.random.default_rng(4).normal(size=(5, 3)) * 0.3)
    g.set_loss(g.loss.softmax_cross_entropy(g.nn.batch_norm(x, gamma, beta, mean, var) @ w, y))
    return g


def main():
    world = gv.distributed.init(timeout=60)
    result = {}
    # Dropout: every rank holds the same rows, so only the masks can make their gradients differ.
    g = dropout_model()
    parallel = Recording(world)
    rows = 4 * world.size
    same = batches(np.ones((rows, 16)), np.zeros(rows, np.int64), size=rows)
    g.fit(same, epochs=2, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], data_parallel=parallel),
          progress=False)
    result["dropout_gradients"] = world.allgather_object(parallel.local)
    result["dropout_hashes"] = world.allgather_object(digest(g))
    # Batch norm on the inputs: the running mean is linear in the batch means, so it equals one process's.
    x, y = data(rows=70)
    g = batch_norm_model()
    config = gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], data_parallel=gv.distributed.DataParallel(world))
    g.fit(batches(x, y, size=16), epochs=2, config=config, progress=False)
    alone = batch_norm_model()
    alone.fit(batches(x, y, size=16), epochs=2, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"]), progress=False)
    statistics = {name: g.stored(name).tolist() for name in ("running_mean", "running_var")}
    result["running"] = world.allgather_object(statistics)
    result["running_one_process"] = {name: alone.stored(name).tolist() for name in ("running_mean", "running_var")}
    result["bn_hashes"] = world.allgather_object(digest(g))
    report(world, result)


if __name__ == "__main__":
    main()
