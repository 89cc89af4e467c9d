"""Under ``mpiexec -n N``: data-parallel training against one process's, for SGD with momentum and Adam,
all-reduce and sharded update; the ranks' weights; check_weights catching a perturbed rank.
Rank 0 writes a JSON report to argv[1]; tests/test_distributed.py judges it."""
import numpy as np

import graphview as gv
from common import batches, data, digest, mlp, report, variables

UPDATERS = {"sgd": lambda: gv.SGD(0.1, momentum=0.9), "adam": lambda: gv.Adam(0.01)}
EPOCHS = 3
ROWS = 64 + gv.distributed.init(timeout=60).size - 1   # Batch(32): 32, 32, then fewer rows than ranks


class Counting(gv.distributed.DataParallel):
    """Keeps the rows of each batch this rank trained on, and when its all-reduces started."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows, self.started_early = [], []

    def exchange(self, weight):
        """Records, per step, how many all-reduces had started when the step's last gradient arrived."""
        exchange = super().exchange(weight)
        arrive, seen = exchange.arrived, []

        def arrived(name, gradient):
            seen.append(exchange.started)
            arrive(name, gradient)
        exchange.arrived = arrived
        self.started_early.append(seen)
        return exchange

    def shard(self, batch):
        local, rows, total = super().shard(batch)
        self.rows.append([rows, total])
        return local, rows, total


def train(updater, parallel=None, listeners=()):
    g = mlp()
    x, y = data(rows=ROWS)
    config = gv.TrainingConfig(updater, ["x"], ["y"], data_parallel=parallel)
    history = g.fit(batches(x, y), epochs=EPOCHS, config=config, listeners=list(listeners), progress=False)
    return g, history


class Perturb(gv.Listener):
    """Adds 1e-9 to one weight after the second step (listeners run on rank 0 only)."""

    def iteration_end(self, ctx, loss):
        if ctx.iteration == 2:
            ctx.graph.stored("w1")[0, 0] += 1e-9


def main():
    world = gv.distributed.init(timeout=60)
    result = {"size": world.size, "runs": {}}
    for label, make in UPDATERS.items():
        reference_updater = make()
        reference, reference_history = train(reference_updater)
        expected = variables(reference)
        reference_state = sum(a.nbytes for arrays in reference_updater.state.values() for a in arrays)
        for mode, sharded, bucket in (("plain", False, None), ("sharded", True, None), ("segmented", False, 1)):
            # "segmented": one all-reduce per variable, each started during the backward pass
            options = {} if bucket is None else {"bucket_bytes": bucket}
            parallel = Counting(world, sharded_update=sharded, check_weights=True, **options)
            g, history = train(make(), parallel)
            run = {
                "weight_error": max(float(np.max(np.abs(value - expected[name])))
                                    for name, value in variables(g).items()),
                "epoch_loss_error": float(np.max(np.abs(np.subtract(history.epoch_losses,
                                                                    reference_history.epoch_losses)))),
                "iteration_loss_error": float(np.max(np.abs(np.subtract(history.iteration_losses,
                                                                        reference_history.iteration_losses)))),
                "steps": len(history.iteration_losses),
                "changed": float(np.max(np.abs(variables(g)["w1"] - variables(mlp())["w1"]))),
                "hashes": world.allgather_object(digest(g)),
                "state_bytes": world.allgather_object(parallel.state_bytes()),
                "reference_state_bytes": reference_state,
                "rows": world.allgather_object(parallel.rows),
                "started_early": world.allgather_object([seen[-1] if seen else None
                                                         for seen in parallel.started_early]),
            }
            result["runs"][f"{label} {mode}"] = run
    errors = []
    for sharded in (False, True):
        parallel = gv.distributed.DataParallel(world, sharded_update=sharded, check_weights=True)
        try:
            train(gv.SGD(0.1, momentum=0.9), parallel, [Perturb()])
            errors.append(None)
        except gv.distributed.DistributedError as error:
            errors.append(f"{type(error).__name__}: {error}")
    result["perturbed"] = world.allgather_object(errors)
    report(world, result)


if __name__ == "__main__":
    main()
