"""A small multi-layer perceptron, as a `graphview gradcheck` target.

    graphview gradcheck examples/mlp.py:build
    graphview gradcheck examples/mlp.py:build --max-per-param 50 --json report.json

``build()`` returns ``(graph, placeholders)``: 8 examples of 4 features, one
tanh hidden layer of 5 units, 3 classes and a softmax cross-entropy loss.
"""
import numpy as np

import graphview as gv


def build(batch=8, features=4, hidden=5, classes=3, seed=0):
    """The MLP graph with its loss set, and a batch of placeholder values."""
    r = np.random.default_rng(seed)
    g = gv.Graph("mlp")
    x = g.placeholder("x", (None, features))
    y = g.placeholder("y", (None,), "int64")
    with g.name_scope("hidden"):
        w1 = g.var("w", r.normal(0, 0.5, (features, hidden)))
        b1 = g.var("b", r.normal(0, 0.1, hidden))
    with g.name_scope("output"):
        w2 = g.var("w", r.normal(0, 0.5, (hidden, classes)))
        b2 = g.var("b", r.normal(0, 0.1, classes))
    logits = g.nn.tanh(x @ w1 + b1) @ w2 + b2
    g.set_loss(g.loss.softmax_cross_entropy(logits, y, name="loss"))
    placeholders = {"x": r.normal(size=(batch, features)), "y": r.integers(0, classes, batch)}
    return g, placeholders


if __name__ == "__main__":
    graph, feeds = build()
    print(graph.summary())
    print("loss:", graph.output(feeds, ["loss"])["loss"])
