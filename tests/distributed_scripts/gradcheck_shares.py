"""Gradient checks under ``mpiexec -n N`` (tests/test_distributed_gradcheck.py): every case's report,
written by every rank to ``PATH.RANK.json``, must equal a one-process run's (``python gradcheck_shares.py PATH``);
``gradcheck_shares.py lonely`` checks on rank 0 alone, which times out.
"""
import json
import os
import sys
import time

import numpy as np

import graphview as gv

# d(x^2)/dx is 2x; this rule forgets the 2.
square_wrong = gv.defop("dgc_square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                        vjp=lambda grad, out, x: (grad * x,))


def _picky(x, out):
    if x[7] > 7.0 + 1e-9:
        raise gv.GraphviewError("picky: element 7 must not grow")
    out[...] = x


# Raises while the check perturbs element 7 (a share of the last rank), as it would in one process.
picky = gv.defop("dgc_picky", shape=lambda x: x, kernel=_picky, vjp=lambda grad, out, x: (grad,))

CASES = {
    "full": {},
    "wrong": {"wrong": True},
    "wrong-stop": {"wrong": True, "exit_on_first_failure": True},
    "wrong-fast": {"wrong": True, "fast": True},
    "sampled": {"max_per_param": 5, "seed": 7},
    "activations": {"activations": True, "wrong": True},
}


def build(wrong=False):
    r = np.random.default_rng(0)
    g = gv.Graph("dmlp")
    x = g.placeholder("x", (None, 4))
    y = g.placeholder("y", (None,), "int64")
    w1, b1 = g.var("w1", r.normal(0, 0.5, (4, 6))), g.var("b1", r.normal(0, 0.1, 6))
    w2, b2 = g.var("w2", r.normal(0, 0.5, (6, 3))), g.var("b2", r.normal(0, 0.1, 3))
    hidden = g.nn.tanh(x @ w1 + b1)
    if wrong:
        hidden = square_wrong(hidden)
    g.set_loss(g.loss.softmax_cross_entropy(hidden @ w2 + b2, y, name="loss"))
    return g, {"x": r.normal(size=(8, 4)), "y": r.integers(0, 3, 8)}


def raises(rank):
    """The check of a variable whose element 7 makes a kernel raise: the error every rank must raise."""
    g = gv.Graph("picky")
    v = g.var("v", np.arange(10.0))
    g.set_loss(g.math.sum(picky(v * v), name="loss"))
    try:
        gv.check_gradients(g, {})
    except gv.GraphviewError as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


def disagrees(rank):
    """Ranks feeding different values: refused on every rank."""
    graph, feeds = build()
    feeds["x"] = feeds["x"] + rank
    try:
        gv.check_gradients(graph, feeds)
    except gv.distributed.DistributedError as error:
        return str(error)
    return "no error"


def summary(report):
    return {"passed": report.passed, "text": str(report),
            "variables": [[v.name, list(v.shape), v.checked, v.passed, v.failed, repr(v.max_rel_error)]
                          for v in report.variables.values()],
            "failures": [[f.variable, f.index and list(f.index), repr(f.analytic), repr(f.numeric), repr(f.rel_error),
                          repr(f.abs_error), f.kind, str(f.culprit)] for f in report.failures],
            "violations": [str(v) for v in report.violations]}


def lonely():
    """Rank 0 checks alone while rank 1 sleeps: rank 0's timeout (2 s), uncaught, aborts the job."""
    world = gv.distributed.init(timeout=2)
    if world.rank == 0:
        gv.check_gradients(*build())
    time.sleep(60)


if __name__ == "__main__" and sys.argv[1:] == ["lonely"]:
    lonely()
elif __name__ == "__main__":
    # check_gradients finds the world itself; a plain run never imports mpi4py.
    rank = int(os.environ.get("PMI_RANK", "0"))
    results = {}
    for case, options in CASES.items():
        options = dict(options)
        graph, feeds = build(options.pop("wrong", False))
        calls = []
        report = gv.check_gradients(graph, feeds, progress=lambda done, total: calls.append((done, total)), **options)
        results[case] = dict(summary(report), last_progress=list(calls[-1]))
    results["raises"] = raises(rank)
    results["disagrees"] = disagrees(rank)
    imported = "mpi4py" in sys.modules
    world = gv.distributed.init()
    with open(f"{sys.argv[1]}.{world.rank}.json", "w") as stream:
        json.dump({"size": world.size, "results": results, "mpi4py": imported}, stream)
