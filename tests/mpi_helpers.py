"""What the test files that start ``mpiexec`` share: where the scripts and mpiexec are, the skip mark, the
environment every rank runs in, and the launch of a command on N ranks (tests/test_distributed*.py)."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parent / "distributed_scripts"
ROOT = SCRIPTS.parents[1]
MPIEXEC = pathlib.Path(sys.executable).parent / "mpiexec"
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None and MPIEXEC.exists()
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpi4py and the mpiexec next to sys.executable "
                                                    "(pip install graphview[distributed])")
TIMEOUT = 120           # seconds for one mpiexec job on a loaded machine; a hang fails the test instead
# One thread everywhere: a one-process reference and the ranks run the same kernels the same way.
ENVIRONMENT = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


def launch(ranks, *command, cwd=ROOT, timeout=TIMEOUT):
    """``command`` on ``ranks`` processes under mpiexec (None or 0: one plain process), in ENVIRONMENT;
    the CompletedProcess, stdout and stderr as text."""
    prefix = [str(MPIEXEC), "-n", str(ranks)] if ranks else []
    return subprocess.run(prefix + [str(part) for part in command], capture_output=True, text=True,
                          timeout=timeout, env=ENVIRONMENT, cwd=cwd)


def mpiexec(ranks, script, *arguments, cwd=ROOT, timeout=TIMEOUT):
    """tests/distributed_scripts/``script`` with ``arguments`` on ``ranks`` processes, as ``launch``."""
    return launch(ranks, sys.executable, SCRIPTS / script, *arguments, cwd=cwd, timeout=timeout)


def succeeded(done):
    """``done`` (a CompletedProcess of ``launch``) after asserting that every rank exited 0."""
    assert done.returncode == 0, f"{' '.join(done.args)} failed:\n{done.stdout}\n{done.stderr[-3000:]}"
    return done
