"""Distributed gradient checks (issue 19 item 7, ADR 0007): under ``mpiexec -n N`` check_gradients and
``graphview gradcheck`` share the finite differences among the ranks, and every rank gets the report one
process gives, figure for figure. tests/distributed_scripts/gradcheck_shares.py runs the cases.

The mpiexec tests need mpi4py and the mpiexec next to this Python (the ``distributed`` extra); without
them they are skipped with the reason.
"""
import json
import sys
import time

import pytest

import graphview as gv

from mpi_helpers import ROOT, launch, mpiexec, needs_mpi, succeeded

pytestmark = needs_mpi
FAULTY = '''
import numpy as np
import graphview as gv

# d(x^2)/dx is 2x; this rule forgets the 2.
square_wrong = gv.defop("dgc_cli_square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                        vjp=lambda grad, out, x: (grad * x,))

def wrong_gradient():
    g = gv.Graph("wrong")
    w = g.var("w", np.arange(1.0, 10.0))
    g.set_loss(g.math.sum(square_wrong(w), name="loss"))
    return g, {}
'''


def reports(ranks, folder):
    succeeded(mpiexec(ranks, "gradcheck_shares.py", folder / "report"))
    return [json.loads((folder / f"report.{rank}.json").read_text()) for rank in range(ranks or 1)]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    return reports(None, tmp_path_factory.mktemp("one"))[0]


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_rank_gets_the_report_of_one_process(ranks, one_process, tmp_path):
    assert one_process["size"] == 1 and one_process["mpi4py"] is False, "a plain check never imports mpi4py"
    alone = one_process["results"]
    # The cases judge something: the wrong rule fails on the hidden layer only, and is localised.
    assert alone["full"]["passed"] and alone["sampled"]["passed"]
    wrong = alone["wrong"]
    assert not wrong["passed"] and {f[0] for f in wrong["failures"]} == {"w1", "b1"} and len(wrong["failures"]) == 30
    assert all("dgc_square_wrong" in f[7] for f in wrong["failures"])
    assert len(alone["wrong-stop"]["failures"]) == 1 and alone["wrong-fast"]["failures"][0][6] == "fast"
    assert alone["raises"] == "GraphviewError: dgc_picky 'dgc_picky': picky: element 7 must not grow"
    for rank, shared in enumerate(reports(ranks, tmp_path)):
        assert shared["size"] == ranks
        for case, expected in alone.items():
            got = shared["results"][case]
            if case == "disagrees":
                assert got.startswith("check_gradients: rank 1 of") and "different feeds than rank 0" in got
                continue
            if isinstance(expected, dict):
                # Progress counts the work done: a check stopping at its first failure does a round more.
                done, total = got.pop("last_progress")
                assert done == total or case == "wrong-stop", (case, done, total)
                expected = {k: v for k, v in expected.items() if k != "last_progress"}
            assert got == expected, f"rank {rank} of {ranks}, case {case!r}"


def test_a_rank_checking_alone_times_out_with_the_reason():
    started = time.monotonic()
    done = mpiexec(2, "gradcheck_shares.py", "lonely")
    assert done.returncode != 0 and time.monotonic() - started < 50, "the abort ends the job, not the sleep"
    assert "DistributedTimeoutError: check_gradients: rank 0 of 2:" in done.stderr, done.stderr
    assert "did not complete within 2 s" in done.stderr
    assert "every rank must call check_gradients with the same graph" in done.stderr


def _cli(ranks, folder, target, *options):
    """``graphview gradcheck`` on ``ranks`` processes; each rank's exit status goes to stderr."""
    script = (f'"{sys.executable}" -m graphview gradcheck {target} {" ".join(options)}; '
              'echo "rank ${PMI_RANK:-0} exit $?" >&2')
    return launch(ranks, "/bin/sh", "-c", script, cwd=folder)


def _statuses(stderr):
    return sorted(line for line in stderr.splitlines() if line.startswith("rank "))


def test_the_cli_prints_one_report_writes_json_once_and_exits_alike(tmp_path):
    (tmp_path / "faulty.py").write_text(FAULTY)
    alone = _cli(None, tmp_path, "faulty.py:wrong_gradient", "--json", "one.json")
    shared = _cli(2, tmp_path, "faulty.py:wrong_gradient", "--json", "two.json", "--junit", "two.xml")
    assert _statuses(alone.stderr) == ["rank 0 exit 1"]
    assert _statuses(shared.stderr) == ["rank 0 exit 1", "rank 1 exit 1"], shared.stderr
    assert shared.stdout.count("gradient check of graph 'wrong'") == 1, "rank 0 alone prints the report"
    assert shared.stdout.count("FAILED: gradient check of faulty.py:wrong_gradient") == 1
    # The report, failure lines included, is one process's; only the time on the verdict line differs.
    assert shared.stdout.splitlines()[:-1] == alone.stdout.splitlines()[:-1] and "w[8] FAILED" in shared.stdout
    one, two = (json.loads((tmp_path / name).read_text()) for name in ("one.json", "two.json"))
    for document in (one, two):  # the time spent differs
        assert all(row.pop("seconds") >= 0 for row in document["variables"])
    assert one["passed"] is False and two == one
    assert (tmp_path / "two.xml").exists()
    passing = _cli(2, ROOT, "examples/mlp.py:build")
    assert _statuses(passing.stderr) == ["rank 0 exit 0", "rank 1 exit 0"], passing.stderr
    assert passing.stdout.count("PASSED: gradient check of examples/mlp.py:build") == 1


def test_a_world_that_is_not_a_world_is_refused():
    graph = gv.Graph("tiny")
    graph.set_loss(graph.math.sum(graph.var("w", [1.0, 2.0]) * 2.0, name="loss"))
    with pytest.raises(gv.GraphviewError, match="world must come from gv.distributed.init"):
        gv.check_gradients(graph, {}, world="rank 0")
    assert gv.check_gradients(graph, {}, world=gv.distributed.LocalWorld()).passed
