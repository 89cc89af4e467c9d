"""Under mpiexec: g.predict (arrays and a data set) and g.evaluate shard and gather; prints one line per rank."""
import numpy as np

import graphview as gv
world = gv.distributed.init(timeout=60)
r = np.random.default_rng(0)
X = r.normal(size=(53, 5)); Y = r.integers(0, 4, 53)
g = gv.Graph("ev")
x = g.placeholder("x", (None, 5)); y = g.placeholder("y", (None,), "int64")
w = g.var("w", r.normal(size=(5, 4)))
logits = g.math.matmul(x, w, name="logits")
g.set_loss(g.loss.softmax_cross_entropy(logits, y))
p = g.predict(X, logits, batch_size=7)
ds = gv.data.ArrayDataSet({"x": X}, {"y": Y}) >> gv.data.Batch(10)
p2 = g.predict(ds, logits)
ev = g.evaluate(ds, "logits", "y")
ref = X @ g.stored("w")
local = g.predict(X, logits, distributed=False)
fields = (world.rank, world.size, p.shape == ref.shape, float(np.max(np.abs(p - ref))), float(np.max(np.abs(p2 - ref))),
          np.array_equal(ev.confusion, g.evaluate(ds, "logits", "y", distributed=False).confusion),
          np.array_equal(local, p))
lines = world.allgather_object(" ".join(map(str, fields)))
if world.rank == 0:                             # one process prints: the ranks' output would interleave
    print("\n".join(lines), flush=True)
