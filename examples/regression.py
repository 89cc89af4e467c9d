"""Linear regression with a mean-squared-error loss, as a `graphview gradcheck` target.

    graphview gradcheck examples/regression.py:build --fast
    graphview gradcheck examples/regression.py:save_file    # also writes regression.gvz

``build()`` returns ``(graph, placeholders)``; ``save_file(path)`` stores the
graph and its placeholder values in a graph file for ``graphview summary``,
``graphview dot`` and ``graphview gradcheck regression.gvz``.
"""
import numpy as np

import graphview as gv


def build(samples=16, features=3, seed=1):
    """y ≈ x @ w + b on synthetic data, with the loss set."""
    r = np.random.default_rng(seed)
    g = gv.Graph("regression")
    x = g.placeholder("x", (None, features))
    target = g.placeholder("target", (None, 1))
    w = g.var("w", r.normal(size=(features, 1)))
    b = g.var("b", np.zeros(1))
    g.set_loss(g.loss.mean_squared_error(x @ w + b, target, name="loss"))
    inputs = r.normal(size=(samples, features))
    placeholders = {"x": inputs, "target": inputs @ np.array([[1.5], [-2.0], [0.5]]) + 0.3}
    return g, placeholders


def save_file(path="regression.gvz"):
    """Write the graph and its placeholder values to ``path``; return (graph, placeholders)."""
    graph, placeholders = build()
    graph.save(path, placeholders=placeholders)
    return graph, placeholders


if __name__ == "__main__":
    save_file()
    print("wrote regression.gvz")
