"""A first graph: build it, look at it, run it. `python examples/quickstart.py`"""
import numpy as np

import graphview as gv

g = gv.Graph("demo")
x = g.placeholder("x", shape=(None, 3), dtype="float64")
w = g.var("w", np.arange(6.0).reshape(3, 2) / 6.0)
b = g.constant("b", np.array([0.5, -0.5]))
with g.name_scope("head"):
    y = g.nn.relu(x @ w + b, name="y")
    p = g.nn.softmax(y, name="p")

print(g.summary())
print()
out = g.output({"x": np.ones((4, 3))}, ["head/y", p])
print("head/y =\n", out["head/y"])
print("head/p =\n", out["head/p"])
