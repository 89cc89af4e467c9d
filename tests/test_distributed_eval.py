"""Data-parallel evaluate, predict and checkpoints under ``mpiexec`` (ADR 0025)."""
import os
import sys

import numpy as np
import pytest

from mpi_helpers import ROOT, launch, mpiexec, needs_mpi, succeeded

pytest.importorskip("mpi4py")
pytestmark = needs_mpi


def run(ranks, script, *arguments, cwd):
    """The stdout of tests/distributed_scripts/``script`` on ``ranks`` processes (0: one plain process)."""
    return succeeded(mpiexec(ranks, script, *arguments, cwd=cwd, timeout=180)).stdout


@pytest.mark.parametrize("ranks", [2, 3])
def test_predict_and_evaluate_share_the_rows_and_every_rank_gets_the_whole_result(ranks, tmp_path):
    lines = sorted(run(ranks, "evaluate_predict.py", cwd=tmp_path).split("\n")[:-1])
    assert len(lines) == ranks
    for rank, line in enumerate(lines):
        fields = line.split()
        assert fields[:3] == [str(rank), str(ranks), "True"]
        assert float(fields[3]) < 1e-13 and float(fields[4]) < 1e-13      # arrays, then a data set
        assert fields[5] == "True"         # the merged confusion matrix is the whole data set's
        assert fields[6] == "True"         # distributed=False: one rank computes all, the same values


@pytest.mark.parametrize("mode", ["plain", "sharded"])
def test_a_checkpoint_of_two_ranks_resumes_on_three_as_one_process_trains(mode, tmp_path):
    run(0, "checkpoint_resume.py", "single", "plain", "reference", cwd=tmp_path)
    run(2, "checkpoint_resume.py", "first", mode, "run", cwd=tmp_path)
    assert sorted(os.listdir(tmp_path / "run_ck")) == ["checkpoint-epoch0002.gvz", "checkpoint-epoch0002.state.npz"]
    state = np.load(tmp_path / "run_ck" / "checkpoint-epoch0002.state.npz")
    moments = [key for key in state.files if key.startswith("state/")]
    assert len(moments) == 4 and all(state[key].size in (35, 21) for key in moments)   # whole, not a chunk
    run(3, "checkpoint_resume.py", "resume", mode, "run", cwd=tmp_path)
    reference, resumed = np.load(tmp_path / "reference.npz"), np.load(tmp_path / "run.npz")
    for name in reference.files:
        np.testing.assert_allclose(resumed[name], reference[name], rtol=0, atol=1e-12)


def test_the_digits_example_trains_data_parallel_and_reports_once(tmp_path):
    example = ROOT / "examples" / "train_digits.py"
    done = succeeded(launch(2, sys.executable, example, "--data-parallel", "--epochs", "8", cwd=tmp_path, timeout=300))
    assert done.stdout.count("test accuracy") == 1 and "after 8 epochs on 2 ranks" in done.stdout


def test_a_listener_on_rank_0_stops_every_rank_at_the_same_step(tmp_path):
    lines = run(2, "early_stop.py", cwd=tmp_path).split("\n")[:-1]
    assert lines == ["[(3, 1, 3), (10, 2, 10)]"] * 2     # within an epoch at iteration 3; after epoch 2


def test_losses_averaged_over_valid_entries_and_ranks_reading_different_data_are_refused(tmp_path):
    lines = run(2, "refusals.py", cwd=tmp_path).split("\n")[:-1]
    assert lines == ["nll refused;sizes refused"] * 2
