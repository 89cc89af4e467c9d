"""Under mpiexec -n 2: DataParallel refuses losses averaged over valid entries, and ranks that read batches
of different sizes fail with a DistributedError (not a timeout). Rank 0 prints what it caught."""
import sys

import numpy as np

import graphview as gv

world = gv.distributed.init(timeout=20)
r = np.random.default_rng(0)
caught = []
g = gv.Graph("nll")
x, y = g.placeholder("x", (None, 4)), g.placeholder("y", (None,), "int64")
g.set_loss(g.loss.nll(g.nn.log_softmax(x @ g.var("w", r.normal(size=(4, 3)))), y))
data = gv.data.ArrayDataSet({"x": r.normal(size=(8, 4))}, {"y": r.integers(0, 3, 8)}) >> gv.data.Batch(8)
try:
    g.fit(data, epochs=1, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"],
                                                   data_parallel=gv.distributed.DataParallel(world)), progress=False)
except gv.distributed.DistributedError as error:
    caught.append("nll refused" if "mean over the labels" in str(error) else str(error))
h = gv.Graph("rows")
x, y = h.placeholder("x", (None, 4)), h.placeholder("y", (None,), "int64")
h.set_loss(h.loss.softmax_cross_entropy(x @ h.var("w", r.normal(size=(4, 3))), y))
rows = 8 if world.rank == 0 else 6                       # the ranks read different data
data = gv.data.ArrayDataSet({"x": r.normal(size=(rows, 4))}, {"y": r.integers(0, 3, rows)}) >> gv.data.Batch(8)
try:
    h.fit(data, epochs=1, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"],
                                                   data_parallel=gv.distributed.DataParallel(world)), progress=False)
except gv.distributed.DistributedError as error:
    caught.append("sizes refused" if "give different batches" in str(error) else str(error))
lines = world.allgather_object(";".join(caught))
if world.rank == 0:
    print("\n".join(lines), flush=True)
sys.exit(0)
