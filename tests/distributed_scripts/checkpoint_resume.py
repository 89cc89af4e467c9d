"""Under mpiexec: checkpoints written by rank 0 (whole updater state, also with the sharded update) resume
on any number of ranks. argv: phase (single, first, resume), plain|sharded, output prefix."""
import sys

import numpy as np

import graphview as gv
phase, sharded, out = sys.argv[1], sys.argv[2] == "sharded", sys.argv[3]
world = gv.distributed.init(timeout=60)
r = np.random.default_rng(0)
X = r.normal(size=(101, 5)); Y = r.integers(0, 3, 101)
def build():
    g = gv.Graph("ck")
    x = g.placeholder("x", (None, 5)); y = g.placeholder("y", (None,), "int64")
    w1 = g.var("w1", r.normal(size=(5, 7)) * 0.3); w2 = g.var("w2", r.normal(size=(7, 3)) * 0.3)
    g.set_loss(g.loss.softmax_cross_entropy(g.math.tanh(x @ w1) @ w2, y))
    return g
data = gv.data.ArrayDataSet({"x": X}, {"y": Y}) >> gv.data.Shuffle(seed=1) >> gv.data.Batch(32)
if phase == "single":
    g = build(); g.fit(data, epochs=3, config=gv.TrainingConfig(gv.Adam(0.01), ["x"], ["y"]), progress=False)
elif phase == "first":
    g = build()
    dp = gv.distributed.DataParallel(world, sharded_update=sharded)
    g.fit(data, epochs=2, config=gv.TrainingConfig(gv.Adam(0.01), ["x"], ["y"], data_parallel=dp),
          listeners=[gv.CheckpointListener(out + "_ck", every=2)], progress=False)
    sys.exit(0)
else:
    g = gv.load(out + "_ck/checkpoint-epoch0002.gvz")
    dp = gv.distributed.DataParallel(world, sharded_update=sharded)
    g.fit(data, epochs=1, config=gv.TrainingConfig(gv.Adam(0.01), ["x"], ["y"], data_parallel=dp),
          resume_from=out + "_ck/checkpoint-epoch0002.gvz", progress=False)
if world.rank == 0:
    np.savez(out + ".npz", w1=g.stored("w1"), w2=g.stored("w2"))
