"""Under ``mpiexec -n 2``: how long rank 1's all-reduce of 332 KiB takes when rank 0 has been waiting in
it for 20 ms (the usual case in training: one rank reaches the step's all-reduce first). Rank 0 writes
the median and the best over 20 tries, in seconds, as JSON to argv[1]."""
import statistics
import time

import numpy as np

import graphview as gv
from common import report


def main():
    world = gv.distributed.init(timeout=60)
    buffer = np.ones(85_000, np.float32)
    times = []
    for _ in range(20):
        world.barrier()
        if world.rank == 1:
            time.sleep(0.02)
        start = time.perf_counter()
        world.allreduce_(buffer)
        times.append(time.perf_counter() - start)
    late = world.allgather_object(times)[1]
    report(world, {"median": statistics.median(late), "best": min(late)})


if __name__ == "__main__":
    main()
