"""Under mpiexec -n 2: ranks whose data give different batches (another count, another size) are refused
before any step of the epoch, on the array-sliced and the per-sample pipeline alike; equal batches train.
Rank 0 writes, per case, every rank's error (or None), steps taken and whether its variables changed."""
import numpy as np

import graphview as gv
from common import data, digest, mlp, report

world = gv.distributed.init(timeout=30)


def sliced(rows, size):
    x, y = data(rows=rows)
    return gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Shuffle(seed=1) >> gv.data.Batch(size)


def per_sample(rows, size):
    x, y = data(rows=rows)
    return gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Filter(lambda sample: True) >> gv.data.Batch(size)


first = world.rank == 0
CASES = {       # name: this rank's data set
    "lengths 100 and 110": sliced(100 if first else 110, 32),    # 32, 32, 32, 4 against 32, 32, 32, 14
    "lengths 100 and 70": sliced(100 if first else 70, 32),      # 4 batches against 3
    "batch sizes 32 and 40": sliced(64, 32 if first else 40),    # 32, 32 against 40, 24
    "per-sample lengths 100 and 70": per_sample(100 if first else 70, 32),
    "equal per-sample": per_sample(70, 32),
}
results = {}
for name, dataset in CASES.items():
    g = mlp()
    before = digest(g)
    updater = gv.SGD(0.1)
    config = gv.TrainingConfig(updater, ["x"], ["y"], data_parallel=gv.distributed.DataParallel(world))
    try:
        g.fit(dataset, epochs=2, config=config, progress=False)
        error = None
    except gv.distributed.DistributedError as caught:
        error = str(caught)
    results[name] = world.allgather_object({"error": error, "steps": updater.iteration,
                                            "changed": digest(g) != before, "digest": digest(g)})
report(world, results)
