"""What the scripts that tests/test_distributed.py runs under ``mpiexec -n N`` share: small float64
models, the data, and hashes of a graph's variables."""
import hashlib
import json
import sys

import numpy as np

import graphview as gv
from graphview.variable import Kind

ROWS = 66           # with Batch(32): batches of 32, 32 and 2 rows (2 rows on 3 ranks: one rank gets none)


def data(rows=ROWS, features=5, classes=3, seed=0):
    generator = np.random.default_rng(seed)
    return generator.normal(size=(rows, features)), generator.integers(0, classes, rows)


def batches(x, y, size=32, seed=1):
    return gv.data.ArrayDataSet({"x": x}, {"y": y}) >> gv.data.Shuffle(seed=seed) >> gv.data.Batch(size)


def mlp(features=5, hidden=7, classes=3, seed=0):
    generator = np.random.default_rng(seed + 100)
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, features))
    y = g.placeholder("y", (None,), "int64")
    w1 = g.var("w1", generator.normal(size=(features, hidden)) * 0.3)
    b1 = g.var("b1", generator.normal(size=hidden) * 0.1)
    w2 = g.var("w2", generator.normal(size=(hidden, classes)) * 0.3)
    b2 = g.var("b2", np.zeros(classes))
    g.set_loss(g.loss.softmax_cross_entropy(g.math.tanh(x @ w1 + b1) @ w2 + b2, y))
    return g


def variables(graph):
    return {node.name: graph.stored(node.name).copy() for node in graph.nodes() if node.kind is Kind.VARIABLE}


def digest(graph):
    """A hash of every variable's bytes."""
    hashed = hashlib.sha256()
    for name, value in sorted(variables(graph).items()):
        hashed.update(name.encode())
        hashed.update(np.ascontiguousarray(value).tobytes())
    return hashed.hexdigest()


def report(world, result):
    """Rank 0 writes ``result`` as JSON to the path given as the script's first argument."""
    if world.rank == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(result, out)
