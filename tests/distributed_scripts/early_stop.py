"""Under mpiexec: a listener on rank 0 that stops training within an epoch, or at an epoch's end, stops
every rank at the same step (listeners run on rank 0 only). Prints one line from rank 0."""
import numpy as np

import graphview as gv


class StopAt(gv.Listener):
    def __init__(self, iteration=None, epoch=None):
        self.iteration, self.epoch = iteration, epoch

    def iteration_end(self, ctx, loss):
        if ctx.iteration == self.iteration:
            ctx.stop_training = True

    def epoch_end(self, ctx, losses=None):
        if ctx.epoch == self.epoch:
            ctx.stop_training = True


world = gv.distributed.init(timeout=30)
r = np.random.default_rng(0)
g = gv.Graph("stop")
x, y = g.placeholder("x", (None, 4)), g.placeholder("y", (None,), "int64")
g.set_loss(g.loss.softmax_cross_entropy(x @ g.var("w", r.normal(size=(4, 3))), y))
data = gv.data.ArrayDataSet({"x": r.normal(size=(80, 4))}, {"y": r.integers(0, 3, 80)}) >> gv.data.Batch(16)
results = []
for listener in (StopAt(iteration=3), StopAt(epoch=1)):
    config = gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], data_parallel=gv.distributed.DataParallel(world))
    history = g.fit(data, epochs=5, config=config, listeners=[listener], progress=False)
    results.append((len(history.iteration_losses), len(history.epoch_losses), config.updater.iteration))
lines = world.allgather_object(str(results))
if world.rank == 0:
    print("\n".join(lines), flush=True)
