"""Views and in-place ops: zero-copy CreateView, basic indexing, writes through views, and their gradients.

Run: python examples/views_inplace.py
"""
import numpy as np

import graphview as gv


def main():
    g = gv.Graph("views")
    a = g.var("a", np.arange(24.0).reshape(4, 6))

    # A view from INT64 descriptors, and the same view from basic indexing.
    v = g.create_view(a, gv.point(1), gv.interval(0, 6, 2), name="v")       # a[1, 0:6:2]
    w = a[1, ::2]
    print("descriptors:", gv.point(1), gv.interval(0, 6, 2))

    # add_ denotes "a after the write"; a itself keeps its old value in the graph and in storage.
    a2 = g.add_(v, 10.0, name="a2")
    out = g.output({}, [v, w, a2])
    print("v  =", out["v"])
    print("a2 =\n", out["a2"])
    assert np.array_equal(out["v"], out[w.name])
    assert np.array_equal(g.value("a"), np.arange(24.0).reshape(4, 6))

    # On an intermediate the write really is in place; readers of the old value run first.
    x = g.placeholder("x", (3, 4))
    t = g.math.exp(x, name="t")
    t2 = g.assign_(t[0], 0.0, name="t2")
    total = g.math.sum(t, name="total")          # created after the write, still reads the old t
    print(g.explain([t2, total]))
    result = g.output({"x": np.zeros((3, 4))}, [t2, total])
    print("t2 =\n", result["t2"], "\nsum of the old t =", result["total"])

    # Dynamic descriptors: computed at run time, validated before any memory is touched.
    d = g.placeholder("d", (7,), "int64")
    cols = g.create_view(a, gv.all(), d, name="cols")
    print("cols shape at build time:", cols.shape)
    print("a[:, ::-3] =\n", cols.eval({"d": gv.interval(-1, 0, -3, inclusive=True)}))
    try:
        cols.eval({"d": np.array([1, 2, 1, 0, 6, 0, 0], np.int64)})
    except gv.IndexDescriptorError as error:
        print("bad descriptor:", error)

    # Gradients: a view scatters into zeros; in-place ops differentiate as functional scatters.
    g.set_loss(g.math.sum(g.math.square(a2)))
    grads = g.calculate_gradients({}, ["a"])
    print("d loss / d a =\n", grads["a"])
    report = gv.check_gradients(g, {"x": np.zeros((3, 4)), "d": gv.interval(0, 6, 2)})
    print("gradient check passed:", report.passed)
    assert report.passed


if __name__ == "__main__":
    main()
