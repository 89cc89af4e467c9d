"""Under ``mpiexec -n 2``: ``raise`` makes rank 1 fail on its second batch's data while rank 0 waits in a
collective (timeout 60 s, so only the abort can end the job quickly); ``sleep`` makes rank 1 train one
epoch and then sleep while rank 0 trains a second (``DataParallel(world, timeout=2)``).
tests/test_distributed.py expects the whole job to end quickly, with that rank's message."""
import sys
import time

import graphview as gv
from common import batches, data, mlp


def main():
    mode = sys.argv[1]
    world = gv.distributed.init(timeout=60)
    x, y = data()

    def fail_on_rank_one(sample):
        if world.rank == 1 and (sample.features["x"] > 2.5).any():
            raise ValueError("rank one's data is bad")
        return sample

    dataset = batches(x, y)
    if mode == "raise":
        dataset = gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Map(fail_on_rank_one) >> gv.data.Batch(32)
    parallel = gv.distributed.DataParallel(world, timeout=2 if mode == "sleep" else None)
    epochs = 1 if mode == "sleep" and world.rank == 1 else 2
    mlp().fit(dataset, epochs=epochs, config=gv.TrainingConfig(gv.SGD(0.1), ["x"], ["y"], data_parallel=parallel),
              progress=False)
    if mode == "sleep" and world.rank == 1:
        time.sleep(120)
    print(f"rank {world.rank} finished", flush=True)


if __name__ == "__main__":
    main()
