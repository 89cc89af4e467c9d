"""Data-parallel training and distributed gradient checks on MPI (mpi4py; ADR 0025).

    world = gv.distributed.init()          # world.rank, world.size; one process without mpiexec
    config = gv.TrainingConfig(..., data_parallel=gv.distributed.DataParallel(world))
"""
from graphview.distributed.comm import (DEFAULT_TIMEOUT, DistributedError, DistributedTimeoutError, LocalWorld,
                                        MPIWorld, init)
from graphview.distributed.parallel import DataParallel

__all__ = ["init", "DataParallel", "LocalWorld", "MPIWorld", "DistributedError", "DistributedTimeoutError",
           "DEFAULT_TIMEOUT"]
