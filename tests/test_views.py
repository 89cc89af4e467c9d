"""create_view in graphs: zero copy, basic indexing on variables, dynamic descriptors, errors, gather, gradients."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import graphview as gv
from graphview import registry
from graphview.execution import executor_of
from graphview.ops.view import apply_view


def test_the_issue_example():
    g = gv.Graph()
    a = g.var("a", np.arange(24.0).reshape(4, 6))
    v = g.create_view(a, gv.point(1), gv.interval(0, 6, 2))
    a2 = g.add_(v, 10.0)
    w = a[1, ::2]
    out = g.output({}, [v, a2, w])
    expected = np.arange(24.0).reshape(4, 6)
    np.testing.assert_array_equal(out[v.name], expected[1, 0:6:2])
    np.testing.assert_array_equal(out[w.name], expected[1, ::2])
    expected[1, 0:6:2] += 10.0
    np.testing.assert_array_equal(out[a2.name], expected)
    np.testing.assert_array_equal(g.value("a"), np.arange(24.0).reshape(4, 6))
    assert v.shape == (3,) and a2.shape == (4, 6)


@pytest.mark.parametrize("make", [
    lambda r: r.random((5, 6)),
    lambda r: r.random((6, 5)).T,
    lambda r: r.random((10, 6))[::-2],
    lambda r: r.random((4, 5, 6))[1, ::-1, 1:],
])
def test_the_kernel_returns_a_view_of_any_base(make):
    base = make(np.random.default_rng(0))
    g = gv.Graph()
    x = g.placeholder("x", base.shape)
    view = g.create_view(x, gv.interval(-1, 0, -2, inclusive=True), gv.new_axis(), gv.point(-1))
    step = executor_of(g).plan({"x": base}, [view.name])[0].steps[0]
    result = step.run(base)
    assert np.shares_memory(result, base)
    np.testing.assert_array_equal(result, base[::-2, None, -1])
    # A view of the view is still a view of the base.
    again = apply_view(result, ((1, 2, 1, 1, 9, 1, 0),))
    assert np.shares_memory(again, base)


def test_view_creation_is_constant_in_the_base_size():
    entries = ((0, 1, 1, 3, 1), (1, 2, 1, 0, 100, 3, 0))
    for size in (10, 1_000_000):
        base = np.zeros((8, size // 8 + 100))
        apply_view(base, entries)
        tracemalloc.start()
        view = apply_view(base, entries)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert np.shares_memory(view, base)
        assert peak < 4096, f"creating a view allocated {peak} bytes for a base of {base.nbytes}"


def test_getitem_builds_the_same_create_view():
    g = gv.Graph()
    x = g.placeholder("x", (3, 4, 5))
    y = x[..., 1, None, ::-2]
    assert y.op == "create_view" and y.shape == (3, 1, 3)
    base = np.random.default_rng(1).random((3, 4, 5))
    np.testing.assert_array_equal(y.eval({"x": base}), base[..., 1, None, ::-2])


@pytest.mark.parametrize("key", [[0, 2], np.array([1, 0]), np.array([True, False, True]), True])
def test_advanced_indices_point_to_gather(key):
    g = gv.Graph()
    x = g.placeholder("x", (3, 4))
    with pytest.raises(gv.IndexDescriptorError, match="copy, not a view; use g.shape.gather"):
        x[key]


def test_gather_copies_rows_like_numpy_take():
    g = gv.Graph()
    x = g.placeholder("x", (4, 3))
    rows = g.shape.gather(x, np.array([3, -1, 0]), axis=0)
    base = np.arange(12.0).reshape(4, 3)
    result = rows.eval({"x": base})
    np.testing.assert_array_equal(result, base[[3, -1, 0]])
    assert not np.shares_memory(result, base)
    bad = g.shape.gather(x, np.array([4]), axis=0)
    with pytest.raises(gv.ExecutionError, match="index 4 is out of range for axis 0 of size 4"):
        bad.eval({"x": base})


def test_a_scalar_integer_variable_is_a_dynamic_point():
    g = gv.Graph()
    x = g.placeholder("x", (4, 3))
    k = g.placeholder("k", (), "int64")
    row = x[k]
    assert row.shape == (3,)
    base = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(row.eval({"x": base, "k": np.int64(-2)}), base[-2])
    with pytest.raises(gv.IndexDescriptorError, match="point\\(4\\) is out of range for axis 0 of size 4"):
        row.eval({"x": base, "k": np.int64(4)})


def test_dynamic_descriptors_give_unknown_sizes_and_are_checked_at_run_time():
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    rows = g.placeholder("rows", (7,), "int64")
    col = g.placeholder("col", (5,), "int64")
    view = g.create_view(x, rows, col)
    assert view.shape == (None,)
    doubled = g.math.mul(view, 2.0)
    assert doubled.shape == (None,)
    base = np.arange(24.0).reshape(4, 6)
    out = g.output({"x": base, "rows": gv.interval(3, 0, -1), "col": gv.point(2)}, [view, doubled])
    np.testing.assert_array_equal(out[view.name], base[3:0:-1, 2])
    np.testing.assert_array_equal(out[doubled.name], 2 * base[3:0:-1, 2])
    out = g.output({"x": base, "rows": gv.interval(0, -1, 1, True), "col": gv.point(0)}, [doubled])
    np.testing.assert_array_equal(out[doubled.name], 2 * base[:, 0])
    with pytest.raises(gv.IndexDescriptorError, match="descriptor 1: field 3 \\(offset\\) point\\(6\\)"):
        g.output({"x": base, "rows": gv.interval(0, 4), "col": gv.point(6)}, [doubled])
    malformed = np.array([1, 2, 1, 0, 4, 0, 0], np.int64)
    with pytest.raises(gv.IndexDescriptorError, match="descriptor 0: field 5 \\(stride\\)"):
        g.output({"x": base, "rows": malformed, "col": gv.point(0)}, [doubled])
    point_as_interval = np.array([0, 1, 1, 2, 1, 0, 0], np.int64)
    with pytest.raises(gv.IndexDescriptorError, match="descriptor 0: a point descriptor has 5 fields"):
        g.output({"x": base, "rows": point_as_interval, "col": gv.point(0)}, [doubled])


def test_a_dynamic_descriptor_keeps_its_build_time_type():
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    d = g.placeholder("d", (5,), "int64")
    view = g.create_view(x, d)
    assert view.shape == (6,)
    with pytest.raises(gv.IndexDescriptorError, match="type\\) is 3 \\(new axis\\) at run time, but the graph was "
                                                      "built for a point"):
        view.eval({"x": np.zeros((4, 6)), "d": np.array([3, 1, 1, 0, 1], np.int64)})


def test_a_computed_descriptor_works():
    g = gv.Graph()
    x = g.placeholder("x", (5,))
    offset = g.placeholder("offset", (), "int64")
    start = g.shape.reshape(offset, (1,))
    descriptor = g.shape.concat([np.array([1, 2, 1], np.int64), start, np.array([5, 1, 0], np.int64)])
    view = g.create_view(x, descriptor)
    np.testing.assert_array_equal(view.eval({"x": np.arange(5.0), "offset": np.int64(2)}), [2.0, 3.0, 4.0])


@pytest.mark.parametrize("descriptors, error, message", [
    ((gv.point(9),), gv.IndexDescriptorError, "point\\(9\\) is out of range for axis 0 of size 4"),
    ((gv.all(), gv.all(), gv.all()), gv.IndexDescriptorError, "index 3 axes, but the input has only 2"),
    ((np.array([0, 1, 1, 2], np.int64),), gv.IndexDescriptorError, "descriptor 0: a point descriptor has 5 fields"),
    ((gv.all(), [0, 1, 1, 2, 1]), gv.IndexDescriptorError, "descriptor 1: expected an int64 NumPy array"),
])
def test_bad_static_descriptors_fail_when_the_op_is_built(descriptors, error, message):
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    with pytest.raises(error, match=message):
        g.create_view(x, *descriptors)


def test_bad_dynamic_descriptor_variables_fail_when_the_op_is_built():
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    with pytest.raises(gv.IndexDescriptorError, match="dtype int32, it must be int64"):
        g.create_view(x, g.placeholder("a", (5,), "int32"))
    with pytest.raises(gv.IndexDescriptorError, match="must be 1-D"):
        g.create_view(x, g.placeholder("b", (1, 5), "int64"))
    with pytest.raises(gv.IndexDescriptorError, match="known length of 4 \\(all\\), 5 \\(point\\) or 7"):
        g.create_view(x, g.placeholder("c", (None,), "int64"))


def test_a_constant_descriptor_is_read_when_the_graph_is_built():
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    view = g.create_view(x, g.constant("d", gv.interval(1, 3)))
    assert view.shape == (2, 6)


def test_gradient_of_a_view_scatters_into_zeros():
    g = gv.Graph()
    a = g.var("a", np.arange(12.0).reshape(3, 4))
    v = a[1:, ::-2]
    g.set_loss(g.math.sum(g.math.square(v)))
    grads = g.calculate_gradients({}, ["a"])
    expected = np.zeros((3, 4))
    expected[1:, ::-2] = 2 * np.arange(12.0).reshape(3, 4)[1:, ::-2]
    np.testing.assert_array_equal(grads["a"], expected)
    report = gv.check_gradients(g, {})
    assert report.passed, str(report)


def test_gradient_checks_through_dynamic_views_with_the_listener():
    g = gv.Graph()
    a = g.var("a", np.random.default_rng(3).random((4, 5)))
    d = g.placeholder("d", (7,), "int64")
    v = g.create_view(a, gv.all(), d)
    g.set_loss(g.math.sum(g.math.exp(v) * 1.5))
    report = gv.check_gradients(g, {"d": gv.interval(-1, 0, -2, True)})
    assert report.passed and not report.violations, str(report)


def test_gather_gradient_adds_repeated_rows():
    g = gv.Graph()
    a = g.var("a", np.arange(6.0).reshape(3, 2))
    rows = g.shape.gather(a, np.array([2, 0, 2]), axis=0)
    g.set_loss(g.math.sum(rows))
    grads = g.calculate_gradients({}, ["a"])
    np.testing.assert_array_equal(grads["a"], [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])
    assert gv.check_gradients(g, {}).passed


def test_the_validation_listener_exempts_create_view_but_checks_other_ops():
    listener = gv.NonInplaceValidationListener()
    g = gv.Graph()
    x = g.placeholder("x", (4, 6))
    v = x[1:3]
    y = g.math.exp(v)
    g.output({"x": np.ones((4, 6))}, [v, y], listeners=[listener])
    assert not listener.violations and listener.checked_ops >= 1


def test_the_example_and_the_readme_section_run():
    import pathlib
    import re
    import runpy
    root = pathlib.Path(__file__).resolve().parent.parent
    runpy.run_path(str(root / "examples" / "views_inplace.py"), run_name="__main__")
    readme = pathlib.Path("/work/coord/readme/views.md")
    if not readme.exists():
        readme = root / "README.md"
    blocks = re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
    section = "\n".join(b for b in blocks if "create_view" in b or "assign_" in b)
    if "create_view" in section:
        exec(compile(section, str(readme), "exec"), {})


@pytest.mark.parametrize("index", [10**8, 3, -4, -5])
def test_scatter_add_refuses_out_of_range_indices_before_its_kernel_runs(index, tmp_path):
    scatter_add = registry.op("scatter_add")
    g = gv.Graph()
    values = g.placeholder("values", (1, 2))
    indices = g.constant("indices", np.array([index]))
    out = scatter_add(values, indices, g.constant("like", np.zeros((3, 2))), axis=0, name="out")
    message = f"scatter_add: index {index} is out of range for axis 0 of size 3"
    with pytest.raises(gv.ExecutionError, match=message):
        out.eval({"values": np.ones((1, 2))})
    g.save(tmp_path / "scatter.gv")
    loaded = gv.load(tmp_path / "scatter.gv")
    with pytest.raises(gv.ExecutionError, match=message):
        loaded.output({"values": np.ones((1, 2))}, ["out"])


def test_scatter_add_indices_fed_at_run_time_are_checked_and_negative_ones_wrap_like_gather():
    scatter_add = registry.op("scatter_add")
    g = gv.Graph()
    indices = g.placeholder("indices", (2,), "int64")
    out = scatter_add(np.array([[1.0, 2.0], [3.0, 4.0]]), indices, np.zeros((3, 2)), axis=0)
    np.testing.assert_array_equal(out.eval({"indices": np.array([-1, 0])}), [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]])
    with pytest.raises(gv.ExecutionError, match="index -7 is out of range for axis 0 of size 3"):
        out.eval({"indices": np.array([0, -7])})


def test_scatter_add_checks_the_values_shape_and_index_dtype_when_built():
    scatter_add = registry.op("scatter_add")
    g = gv.Graph()
    like = g.constant("like", np.zeros((3, 2)))
    with pytest.raises(gv.ShapeError, match=r"need values of shape \(2, 2\)"):
        scatter_add(g.constant("v", np.ones((3, 2))), np.array([0, 1]), like, axis=0)
    with pytest.raises(gv.DTypeError, match="int32 or int64"):
        scatter_add(g.constant("w", np.ones((1, 2))), np.array([0.0]), like, axis=0)


def test_gather_takes_its_axis_by_position_or_by_name():
    g = gv.Graph()
    x = g.constant("x", np.arange(12.0).reshape(4, 3))
    by_position, by_name = g.shape.gather(x, np.array([2, 0]), 1), g.shape.gather(x, np.array([2, 0]), axis=1)
    values = g.output({}, [by_position, by_name])
    np.testing.assert_array_equal(values[by_position.name], np.arange(12.0).reshape(4, 3)[:, [2, 0]])
    np.testing.assert_array_equal(values[by_name.name], values[by_position.name])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_gradient_of_any_view_is_its_upstream_gradient_in_place_and_zeros_elsewhere(data):
    # scatter_view zeroes only around a box region (slices of step 1) and everything otherwise.
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    index = []
    for size in shape:
        kind = data.draw(st.sampled_from(["all", "slice", "step", "point"]))
        start = data.draw(st.integers(0, size - 1))
        index.append({"all": slice(None), "point": start, "slice": slice(start, data.draw(st.integers(start + 1, size))),
                      "step": slice(start, None, data.draw(st.sampled_from([2, -1])))}[kind])
    index = tuple(index)
    g = gv.Graph()
    x = g.var("x", np.random.default_rng(0).normal(size=shape))
    weights = np.random.default_rng(1).uniform(1.0, 2.0, np.empty(shape)[index].shape)
    g.set_loss(g.math.sum(x[index] * g.constant("w", weights)))
    expected = np.zeros(shape)
    expected[index] = weights
    np.testing.assert_array_equal(g.calculate_gradients({}, ["x"])["x"], expected)
