"""The world of processes: ``gv.distributed.init()`` (ADR 0025).

Under ``mpiexec -n N`` (or ``srun``, or any MPI launcher) :func:`init` returns an :class:`MPIWorld`
over ``MPI.COMM_WORLD`` (mpi4py, the ``distributed`` extra); started plainly, or where mpi4py is not
installed, a :class:`LocalWorld` of one process with the same methods, so the same script runs either
way. Collectives work on NumPy buffers in place (no pickling) and never wait forever: each is started
non-blocking and polled until ``timeout`` seconds, after which :class:`DistributedTimeoutError` says
which collective and which rank waited. In a world of several processes an exception that reaches the
top of the program on any rank prints that rank's traceback and aborts every rank (``MPI_Abort``), so
a failure never leaves the others hanging.
"""
import os
import pickle
import sys
import threading
import time
import traceback

import numpy as np

from graphview.errors import GraphviewError

DEFAULT_TIMEOUT = 300.0
SPIN_SECONDS = 1.0      # how long a rank waiting in a collective polls without sleeping
_yield_core = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))


class DistributedError(GraphviewError):
    """A distributed run went wrong: ranks disagree, or the world is not set up for what was asked."""


class DistributedTimeoutError(DistributedError):
    """A collective did not complete within the world's timeout: a rank never arrived."""


def checked_timeout(value):
    """``value`` as seconds > 0 (a float); a DistributedError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise DistributedError(f"timeout must be a number of seconds > 0, not {value!r}")
    return float(value)


class LocalWorld:
    """A world of one process: every collective is the identity."""
    rank, size = 0, 1

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self.timeout = checked_timeout(timeout)

    def allreduce_(self, array):
        """Sum ``array`` over the ranks, in place; returns it."""
        return array

    def start_allreduce_(self, array):
        """Start summing ``array`` over the ranks in place; returns a handle for :meth:`wait_`. The
        array must not be touched until the wait returns."""
        return None

    def progress_(self, handles):
        """Move started collectives on (MPI advances them only inside its calls); True when all are done."""
        return True

    def wait_(self, handles, what="an all-reduce"):
        """Wait for started collectives, within the timeout."""

    def reduce_scatter_(self, send, receive, counts):
        """Sum ``send`` over the ranks and keep this rank's block (``counts[rank]`` elements) in ``receive``."""
        receive[...] = send[:counts[0]]
        return receive

    def allgather_(self, send, receive, counts):
        """Every rank's ``send`` (``counts[r]`` elements each), concatenated in rank order, into ``receive``."""
        receive[...] = send
        return receive

    def broadcast_(self, array, root=0):
        """Rank ``root``'s ``array`` into every rank's ``array``, in place."""
        return array

    def sum(self, value):
        """The sum of a float over the ranks."""
        return float(value)

    def allgather_object(self, value, what="an all-gather"):
        """Every rank's (small, picklable) ``value``, in rank order; ``what`` names it in a timeout."""
        return [value]

    def barrier(self):
        pass

    def __repr__(self):
        return "<graphview LocalWorld: 1 process>"


class MPIWorld:
    """``MPI.COMM_WORLD`` (or another communicator) with timed, in-place collectives."""

    def __init__(self, comm, timeout=DEFAULT_TIMEOUT):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = checked_timeout(timeout)
        from mpi4py import MPI  # an optional dependency (the distributed extra)
        self.mpi = MPI

    def _wait(self, request, what):
        """Poll ``request`` (or a list of requests) until it completes or the timeout passes.

        MPI moves a non-blocking collective on only while its ranks call Test, so a rank that sleeps
        between polls holds up every round of the collective after the last rank arrives (an all-reduce
        of 332 KiB took 1.5 ms instead of 50 us when the first rank slept 0.2 ms per poll). A waiting
        rank polls without sleeping (yielding its core) for ``SPIN_SECONDS``, which covers the ranks'
        usual drift within a step, and then every millisecond."""
        start = time.monotonic()
        deadline = start + self.timeout
        test = request.Test if not isinstance(request, list) else lambda: self.mpi.Request.Testall(request)
        while not test():
            now = time.monotonic()
            if now > deadline:
                raise DistributedTimeoutError(
                    f"rank {self.rank} of {self.size}: {what} did not complete within {self.timeout:g} s; "
                    "a rank never arrived (it may have stopped, hung, or be running other code)")
            if now - start < SPIN_SECONDS:
                _yield_core()
            else:
                time.sleep(0.001)

    def allreduce_(self, array):
        self._wait(self.comm.Iallreduce(self.mpi.IN_PLACE, array, op=self.mpi.SUM), "an all-reduce")
        return array

    def start_allreduce_(self, array):
        return self.comm.Iallreduce(self.mpi.IN_PLACE, array, op=self.mpi.SUM)

    def progress_(self, handles):
        return self.mpi.Request.Testall(handles)

    def wait_(self, handles, what="an all-reduce"):
        if handles:
            self._wait(list(handles), what)

    def reduce_scatter_(self, send, receive, counts):
        self._wait(self.comm.Ireduce_scatter(send, receive, list(counts), op=self.mpi.SUM), "a reduce-scatter")
        return receive

    def allgather_(self, send, receive, counts, what="an all-gather"):
        displacements = np.concatenate([[0], np.cumsum(counts)[:-1]]).tolist()
        self._wait(self.comm.Iallgatherv(send, [receive, list(counts), displacements, _mpi_type(self.mpi, receive)]),
                   what)
        return receive

    def broadcast_(self, array, root=0):
        self._wait(self.comm.Ibcast(array, root=root), "a broadcast")
        return array

    def sum(self, value):
        buffer = np.array([value], np.float64)
        return float(self.allreduce_(buffer)[0])

    def allgather_object(self, value, what="an all-gather"):
        # Objects go through a length exchange and a byte all-gather, both timed.
        payload = np.frombuffer(_pickled(value), np.uint8)
        counts = np.zeros(self.size, np.int64)
        counts[self.rank] = payload.size
        self._wait(self.comm.Iallreduce(self.mpi.IN_PLACE, counts, op=self.mpi.SUM), what)
        gathered = np.empty(int(counts.sum()), np.uint8)
        self.allgather_(payload, gathered, counts.tolist(), what)
        edges = np.concatenate([[0], np.cumsum(counts)])
        return [_unpickled(gathered[edges[r]:edges[r + 1]].tobytes()) for r in range(self.size)]

    def barrier(self):
        self._wait(self.comm.Ibarrier(), "a barrier")

    def abort(self, code=1):
        self.comm.Abort(code)

    def __repr__(self):
        return f"<graphview MPIWorld: rank {self.rank} of {self.size}>"


def _mpi_type(mpi, array):
    return {np.dtype(np.float64): mpi.DOUBLE, np.dtype(np.float32): mpi.FLOAT, np.dtype(np.int64): mpi.INT64_T,
            np.dtype(np.uint8): mpi.UINT8_T, np.dtype(np.int32): mpi.INT32_T}[array.dtype]


def _pickled(value):
    return pickle.dumps(value)


def _unpickled(data):
    return pickle.loads(data)


_world = None
_lock = threading.Lock()

# What MPI launchers put in each process's environment: MPICH's and Intel MPI's (and srun --mpi=pmi2's) PMI,
# Open MPI's, MVAPICH's, and PMIx's (srun --mpi=pmix), whose size is not in the environment.
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_RANK_VARIABLES = ("PMIX_RANK",)


def launched():
    """True when an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) started this process among several, as
    its environment says; read without importing mpi4py, so a plain run never initialises MPI."""
    for name in _SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return True
    return any(name in os.environ for name in _RANK_VARIABLES)


def init(timeout=None, abort_on_error=True):
    """The world this process belongs to: an :class:`MPIWorld` under an MPI launcher with more than one
    process, else a :class:`LocalWorld`. The first call decides (``timeout`` default
    ``DEFAULT_TIMEOUT`` seconds); later calls return the same world, with ``timeout`` updated when one is
    given. With several processes and ``abort_on_error``, an uncaught exception on any rank prints
    ``rank R of N: <traceback>`` and aborts them all."""
    global _world
    with _lock:
        if _world is None:
            _world = _make_world(DEFAULT_TIMEOUT if timeout is None else timeout)
            if _world.size > 1 and abort_on_error:
                _install_abort(_world)
        elif timeout is not None:
            _world.timeout = checked_timeout(timeout)
        return _world


def current():
    """The world :func:`init` made, when it has more than one process; else None. ``g.evaluate`` and
    ``g.predict`` read it to share their work among the ranks."""
    world = _world
    return world if world is not None and world.size > 1 else None


def _make_world(timeout):
    try:
        from mpi4py import MPI  # an optional dependency (the distributed extra)
    except ImportError:
        return LocalWorld(timeout)
    comm = MPI.COMM_WORLD
    return MPIWorld(comm, timeout) if comm.Get_size() > 1 else LocalWorld(timeout)


def _install_abort(world):
    previous = sys.excepthook

    def abort_all(kind, error, trace):
        message = "".join(traceback.format_exception(kind, error, trace))
        sys.stderr.write(f"rank {world.rank} of {world.size}: {message}")
        sys.stderr.write(f"rank {world.rank} of {world.size}: aborting every rank\n")
        sys.stderr.flush()
        try:
            world.abort(1)
        except BaseException:               # MPI_Abort did not end the process: Python's own report then
            previous(kind, error, trace)
            raise
    sys.excepthook = abort_all
