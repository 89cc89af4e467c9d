"""Data-parallel training on MPI (issue 19): the scripts in tests/distributed_scripts run under
``mpiexec -n N`` in a subprocess and rank 0 writes a JSON report that these tests judge; sharding and
the one-process world are tested in this process.

The mpiexec tests need mpi4py and the mpiexec next to this Python (the ``distributed`` extra: mpi4py and
the mpich wheel); without them they are skipped with the reason.
"""
import json
import pathlib
import re
import sys
import time
import types

import numpy as np
import pytest

import graphview as gv
from distributed_scripts.common import batches, data, mlp
from mpi_helpers import launch, mpiexec, needs_mpi, succeeded


def report(ranks, script, path):
    succeeded(mpiexec(ranks, script, path))
    return json.loads(pathlib.Path(path).read_text())


@pytest.fixture(scope="module", params=[2, 3], ids=["2 ranks", "3 ranks"])
def training(request, tmp_path_factory):
    return report(request.param, "train_equal.py", tmp_path_factory.mktemp("dp") / "report.json")


RUNS = ["sgd plain", "sgd sharded", "sgd segmented", "adam plain", "adam sharded", "adam segmented"]


# --- equivalence with one process ------------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("run", RUNS)
def test_n_ranks_train_like_one_process_on_the_whole_batch(training, run):
    figures = training["runs"][run]
    assert figures["steps"] == 9 and figures["changed"] > 0.05          # 3 epochs of 3 batches really trained
    assert figures["weight_error"] <= 1e-12
    assert figures["iteration_loss_error"] <= 1e-12                      # History holds the global losses
    assert figures["epoch_loss_error"] <= 1e-12


@needs_mpi
def test_each_rank_trains_on_its_share_including_an_uneven_batch_and_a_rank_without_rows(training):
    size = training["size"]
    rows = training["runs"]["sgd plain"]["rows"]                          # [rank][step] = [local, global]
    assert len(rows) == size
    for step in range(9):
        local = [rows[rank][step][0] for rank in range(size)]
        total = rows[0][step][1]
        assert sum(local) == total and max(local) - min(local) <= 1
        assert local == sorted(local, reverse=True)                      # the first ranks take the extra rows
    last = [rows[rank][2] for rank in range(size)]
    assert last == [[1, size - 1]] * (size - 1) + [[0, size - 1]]       # fewer rows than ranks: the last has none


@needs_mpi
@pytest.mark.parametrize("updater", ["sgd", "adam"])
def test_gradient_all_reduces_start_during_the_backward_pass(training, updater):
    runs, size = training["runs"], training["size"]
    for rank in range(size):
        rows = runs[f"{updater} plain"]["rows"][rank]
        segmented = runs[f"{updater} segmented"]["started_early"][rank]
        plain = runs[f"{updater} plain"]["started_early"][rank]
        for step, (local, _) in enumerate(rows):
            if local == 0:                      # no backward pass: finish packs zeros and starts everything
                continue
            # One segment per variable: w2 and b2 (computed first) are on their way before w1's gradient
            # comes; with one segment for the whole MLP nothing can start before its last gradient.
            assert segmented[step] >= 2 and plain[step] == 0


# --- identical weights -----------------------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("run", RUNS)
def test_every_rank_ends_with_bitwise_identical_weights(training, run):
    hashes = training["runs"][run]["hashes"]
    assert len(hashes) == training["size"] and len(set(hashes)) == 1


@needs_mpi
def test_check_weights_fails_loudly_when_one_rank_diverges(training):
    size = training["size"]
    plain, sharded = zip(*training["perturbed"])                          # per rank: [plain, sharded]
    pattern = (r"^DistributedError: data-parallel step \d+: the ranks' variables differ \(hashes by rank: "
               + ", ".join(f"{rank}: ([0-9a-f]{{16}})" for rank in range(size)) + r"\)$")
    for message in plain:                                                 # every rank raises the same error
        assert message == plain[0]
        hashes = re.match(pattern, message).groups()
        assert hashes[0] not in hashes[1:] and len(set(hashes[1:])) == 1  # rank 0 was perturbed
    # The sharded update all-gathers each chunk from the rank that owns it, so the ranks cannot drift apart.
    assert sharded == (None,) * size


# --- sharded update memory -------------------------------------------------------------------------

@needs_mpi
@pytest.mark.parametrize("updater", ["sgd", "adam"])
def test_the_sharded_update_keeps_1_over_n_of_the_updater_state_on_each_rank(training, updater):
    size = training["size"]
    sharded = training["runs"][f"{updater} sharded"]
    whole = sharded["reference_state_bytes"]
    assert whole > 0 and sum(sharded["state_bytes"]) == whole
    assert sharded["state_bytes"] == [whole // size] * size              # 66 parameters: an even split
    assert training["runs"][f"{updater} plain"]["state_bytes"] == [0] * size
    assert training["runs"][f"{updater} segmented"]["state_bytes"] == [0] * size


# --- dropout and batch norm ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def layer_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layers")
    return [report(2, "layers_dp.py", folder / f"run{number}.json") for number in (1, 2)]


@needs_mpi
def test_dropout_masks_differ_between_ranks_and_repeat_run_to_run(layer_runs):
    first, second = layer_runs
    rank0, rank1 = first["dropout_gradients"]                            # the same rows on both ranks
    assert rank0.keys() == rank1.keys() == {"v", "w"}
    assert np.max(np.abs(np.subtract(rank0["w"], rank1["w"]))) > 1e-3   # so only the masks tell them apart
    assert second["dropout_gradients"] == first["dropout_gradients"]     # seeded: the same masks again
    assert second["dropout_hashes"] == first["dropout_hashes"] and len(set(first["dropout_hashes"])) == 1


@needs_mpi
def test_batch_norm_running_statistics_are_identical_on_every_rank(layer_runs):
    result = layer_runs[0]
    rank0, rank1 = result["running"]
    assert rank0 == rank1 and len(set(result["bn_hashes"])) == 1
    assert not np.allclose(rank0["running_var"], 1.0) and not np.allclose(rank0["running_mean"], 0.0)
    # On the inputs the running mean is linear in the batch means, which the shares' weighted mean gives exactly.
    np.testing.assert_allclose(rank0["running_mean"], result["running_one_process"]["running_mean"], rtol=0,
                               atol=1e-12)


# --- faults ----------------------------------------------------------------------------------------

@needs_mpi
def test_an_exception_on_one_rank_aborts_every_rank_quickly_with_its_message():
    start = time.monotonic()
    done = mpiexec(2, "faults.py", "raise", timeout=60)
    elapsed = time.monotonic() - start
    assert done.returncode != 0
    assert elapsed < 30                                                  # rank 0 waits with a 60 s timeout
    assert "rank 1 of 2: Traceback" in done.stderr and "ValueError: rank one's data is bad" in done.stderr
    assert "rank 1 of 2: aborting every rank" in done.stderr
    assert "DistributedTimeoutError" not in done.stderr and "finished" not in done.stdout


@needs_mpi
def test_a_rank_that_never_arrives_times_out_with_the_collective_named():
    start = time.monotonic()
    done = mpiexec(2, "faults.py", "sleep", timeout=60)                  # rank 1 sleeps 120 s: no hang allowed
    elapsed = time.monotonic() - start
    assert done.returncode != 0 and elapsed < 30
    # Rank 0 waits where its second epoch starts: in the exchange of the epoch's batch sizes.
    assert re.search(r"DistributedTimeoutError: rank 0 of 2: the all-gather of epoch 2's batch sizes did not "
                     r"complete within 2 s; a rank never arrived", done.stderr)
    assert "rank 0 of 2: aborting every rank" in done.stderr and "finished" not in done.stdout


@needs_mpi
def test_a_collective_completes_promptly_once_the_last_rank_arrives(tmp_path):
    # Rank 0 waits 20 ms in an all-reduce of 332 KiB before rank 1 joins; rank 1's part took >= 1.26 ms
    # (median 1.5 ms) while the waiting rank slept between polls, about 0.1 ms now that it keeps polling.
    figures = report(2, "latency.py", tmp_path / "latency.json")
    assert figures["best"] < 1e-3, figures


# --- gv.data.Shard and the one-process world (this process) -----------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 4, 7])
def test_shard_gives_each_rank_its_contiguous_share_in_rank_order(size):
    x = np.arange(40.0).reshape(20, 2)
    y = np.arange(20)
    batched = gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Batch(6)          # 6, 6, 6 and 2 rows
    shares = [list((batched >> gv.data.Shard(types.SimpleNamespace(rank=rank, size=size))).iterate(0))
              for rank in range(size)]
    whole = list(batched.iterate(0))
    for number, batch in enumerate(whole):
        parts = [shares[rank][number] for rank in range(size)]
        sizes = [part.size for part in parts]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
        np.testing.assert_array_equal(np.concatenate([part.features["x"] for part in parts]), batch.features["x"])
        np.testing.assert_array_equal(np.concatenate([part.targets["y"] for part in parts]), batch.targets["y"])
    every = np.concatenate([share.targets["y"] for rank in range(size) for share in shares[rank]])
    np.testing.assert_array_equal(np.sort(every), y)                     # every row once


def test_shard_refuses_a_world_without_rank_and_size_and_unbatched_items():
    with pytest.raises(gv.data.DataError, match=r"Shard: expected a world with rank and size"):
        gv.data.Shard(object())
    with pytest.raises(gv.data.DataError, match=r"Shard: expected a world"):
        gv.data.Shard(types.SimpleNamespace(rank=2, size=2))
    samples = gv.data.ArrayDataSet({"x": np.zeros((4, 2))}) >> gv.data.Shard(gv.distributed.LocalWorld())
    with pytest.raises(gv.data.DataError, match=r"put Shard after Batch"):
        list(samples.iterate(0))


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "sharded"])
@pytest.mark.parametrize("updater", [lambda: gv.SGD(0.1, momentum=0.9), lambda: gv.Adam(0.01)], ids=["sgd", "adam"])
def test_a_one_process_world_trains_exactly_like_no_data_parallel(updater, sharded):
    x, y = data(rows=65)
    histories, weights = [], []
    for parallel in (None, gv.distributed.DataParallel(gv.distributed.LocalWorld(), sharded_update=sharded,
                                                       check_weights=True)):
        g = mlp()
        config = gv.TrainingConfig(updater(), ["x"], ["y"], data_parallel=parallel)
        histories.append(g.fit(batches(x, y), epochs=2, config=config, progress=False))
        weights.append({name: g.stored(name).copy() for name in ("w1", "b1", "w2", "b2")})
    for name in weights[0]:
        np.testing.assert_array_equal(weights[1][name], weights[0][name])
    assert histories[1].iteration_losses == histories[0].iteration_losses
    assert histories[1].epoch_losses == histories[0].epoch_losses


def test_init_without_mpiexec_is_a_one_process_world():
    world = gv.distributed.init()
    assert (world.rank, world.size) == (0, 1) and isinstance(world, gv.distributed.LocalWorld)


@pytest.mark.parametrize("arguments, message", [
    ({"timeout": 0}, r"timeout must be a number of seconds > 0, not 0"),
    ({"timeout": "5"}, r"timeout must be a number of seconds > 0, not '5'"),
    ({"timeout": True}, r"timeout must be a number of seconds > 0, not True"),
    ({"sharded_update": "yes"}, r"sharded_update must be True or False, not 'yes'"),
    ({"check_weights": 1}, r"check_weights must be True or False, not 1"),
    ({"loss_reduction": "max"}, r"loss_reduction must be 'mean' or 'sum', not 'max'"),
    ({"bucket_bytes": 0}, r"bucket_bytes must be an int >= 1, not 0"),
    ({"bucket_bytes": 1.5}, r"bucket_bytes must be an int >= 1, not 1.5"),
])
def test_data_parallel_refuses_bad_arguments(arguments, message):
    with pytest.raises(gv.distributed.DistributedError, match=message):
        gv.distributed.DataParallel(gv.distributed.LocalWorld(), **arguments)


def test_a_world_without_the_non_blocking_collectives_is_refused_when_data_parallel_is_made():
    class OldWorld:
        rank, size = 0, 2

        def allreduce_(self, array):
            return array
    with pytest.raises(gv.distributed.DistributedError, match=r"it has no start_allreduce_, progress_, wait_, "):
        gv.distributed.DataParallel(OldWorld())


def test_after_a_step_fails_with_collectives_running_the_world_refuses_to_train_on():
    parallel = gv.distributed.DataParallel(gv.distributed.LocalWorld())
    g = mlp()
    parallel.start(g, ["w1", "b1", "w2", "b2"], gv.SGD(0.1))
    finished = parallel.exchange(1.0)
    parallel.failed(finished, ValueError("nothing was running"))          # no collective running: fine
    running = parallel.exchange(1.0)
    running.handles.append(object())                                      # as a started all-reduce
    parallel.failed(running, ValueError("boom"))
    with pytest.raises(gv.distributed.DistributedError, match=r"rank 0 of 1: an earlier step failed with "
                       r"collectives still running \(ValueError: boom\); the ranks' collectives are out of step"):
        parallel.exchange(1.0)


def test_init_again_without_a_timeout_keeps_the_one_set():
    world = gv.distributed.init(timeout=7)
    try:
        assert gv.distributed.init() is world and world.timeout == 7.0
        gv.distributed.DataParallel()                    # makes its world with init(): the timeout stays
        assert world.timeout == 7.0
    finally:
        gv.distributed.init(timeout=gv.distributed.comm.DEFAULT_TIMEOUT)


# --- batch plans and output (issue 27) --------------------------------------------------------------

@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    return report(2, "batch_plans.py", tmp_path_factory.mktemp("plans") / "report.json")


@needs_mpi
@pytest.mark.parametrize("case, described, first", [
    ("lengths 100 and 110", r"rank 0: 4 batches \(32 x3, 4 rows\); rank 1: 4 batches \(32 x3, 14 rows\)",
     r"batch 4 \(4 rows on rank 0, 14 rows on rank 1\)"),
    ("lengths 100 and 70", r"rank 0: 4 batches \(32 x3, 4 rows\); rank 1: 3 batches \(32 x2, 6 rows\)",
     r"batch 3 \(32 rows on rank 0, 6 rows on rank 1\)"),
    ("batch sizes 32 and 40", r"rank 0: 2 batches \(32 x2 rows\); rank 1: 2 batches \(40, 24 rows\)",
     r"batch 1 \(32 rows on rank 0, 40 rows on rank 1\)"),
    ("per-sample lengths 100 and 70", r"rank 0: 4 batches \(32 x3, 4 rows\); rank 1: 3 batches \(32 x2, 6 rows\)",
     r"batch 3 \(32 rows on rank 0, 6 rows on rank 1\)"),
])
def test_ranks_whose_data_give_different_batches_are_refused_before_any_step(plans, case, described, first):
    for rank in plans[case]:
        assert re.fullmatch(r"data-parallel epoch 1: the ranks' data give different batches \(" + described
                            + r"\); the first that differs is " + first + r"\. Each step combines every rank's "
                            r"share of one batch, .*; no step of the epoch ran", rank["error"])
        assert rank["steps"] == 0 and not rank["changed"]


@needs_mpi
def test_ranks_whose_data_give_equal_batches_train_through_a_per_sample_pipeline(plans):
    ranks = plans["equal per-sample"]
    assert [rank["error"] for rank in ranks] == [None, None]
    assert [rank["steps"] for rank in ranks] == [6, 6] and ranks[0]["changed"]      # 2 epochs of 32, 32, 6
    assert ranks[0]["digest"] == ranks[1]["digest"]


def readme_data_parallel_example():
    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text[text.index("## Data-parallel training on MPI"):]
    return section[section.index("```python\n") + len("```python\n"):section.index("```\n", section.index("```python"))]


@needs_mpi
def test_under_mpiexec_rank_0_prints_the_progress_and_the_other_ranks_stay_quiet(tmp_path):
    pytest.importorskip("tqdm", reason="the progress bar needs tqdm")
    script = tmp_path / "train.py"
    script.write_text(readme_data_parallel_example())
    succeeded(launch(2, "-errfile-pattern", tmp_path / "err.%r", "-outfile-pattern", tmp_path / "out.%r",
                     sys.executable, script))
    progress = (tmp_path / "err.0").read_text()
    for epoch in (1, 2, 3):
        assert re.search(rf"^epoch {epoch}: 4batch .*loss=\d\.\d{{4}}\]$", progress, re.M), progress
    for quiet in (tmp_path / "err.1", tmp_path / "out.1"):          # mpiexec makes the file once it has output
        assert not quiet.exists() or quiet.read_text() == ""


@pytest.mark.parametrize("pipeline", [
    lambda source: source >> gv.data.Shuffle(seed=3) >> gv.data.Batch(32),                  # sliced from arrays
    lambda source: source >> gv.data.Shuffle(seed=3, buffer_size=7) >> gv.data.Batch(32, drop_last=True),
    lambda source: source >> gv.data.Filter(lambda sample: sample["y"] != 1) >> gv.data.Batch(32),   # per sample
    lambda source: source >> gv.data.Batch(32) >> gv.data.Map(lambda batch: batch),        # after the Batch
    lambda source: source >> gv.data.BucketByLength("x", [3], 8),
], ids=["sliced", "sliced drop_last", "filtered", "mapped batches", "buckets"])
def test_batch_sizes_are_the_sizes_of_the_batches_the_pass_gives(pipeline):
    x, y = data(rows=100)
    dataset = pipeline(gv.data.ArrayDataSet({"x": x}, {"y": y}))
    for epoch in (0, 1):
        assert dataset.batch_sizes(epoch) == [batch.size for batch in dataset.iterate(epoch)]


def test_batch_sizes_of_a_data_set_of_samples_is_refused():
    with pytest.raises(gv.data.DataError, match=r"the data set gives Samples, not MiniBatches: end its pipeline "
                                                r"with gv.data.Batch"):
        gv.data.ArrayDataSet({"x": np.zeros((3, 2))}).batch_sizes(0)
