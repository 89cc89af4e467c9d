"""In-place ops through views: NumPy equivalence, reader ordering, copies, copy-on-write and gradients."""
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graphview as gv

NUMPY = {"assign_": lambda v, x: v.__setitem__(Ellipsis, x), "add_": np.ndarray.__iadd__,
         "sub_": np.ndarray.__isub__, "mul_": np.ndarray.__imul__, "div_": np.ndarray.__itruediv__}


def intermediate(g, shape):
    """A placeholder x and exp(x)*1: an intermediate the run owns, so writes may go in place."""
    x = g.placeholder("x", shape)
    return x, g.math.mul(x, 1.0, name="t")


def test_writes_into_an_intermediate_are_in_place_and_match_numpy():
    g = gv.Graph()
    x, t = intermediate(g, (4, 6))
    t2 = g.add_(t[1:3, ::2], 5.0, name="t2")
    assert "writes t's buffer (no copy)" in g.explain([t2])
    base = np.arange(24.0).reshape(4, 6)
    expected = base.copy()
    expected[1:3, ::2] += 5.0
    np.testing.assert_array_equal(t2.eval({"x": base}), expected)
    np.testing.assert_array_equal(base, np.arange(24.0).reshape(4, 6))


@pytest.mark.parametrize("op", sorted(NUMPY))
def test_placeholders_variables_and_constants_are_never_modified(op):
    g = gv.Graph()
    feed = np.arange(1.0, 25.0).reshape(4, 6)
    x = g.placeholder("x", (4, 6))
    w = g.var("w", np.arange(1.0, 25.0).reshape(4, 6))
    c = g.constant("c", np.arange(1.0, 25.0).reshape(4, 6))
    outs = [getattr(g, op)(source[::2, 1], 3.0) for source in (x, w, c)]
    results = g.output({"x": feed}, outs)
    for source, out in zip(("x", "w", "c"), outs):
        assert f"copies {source} first" in g.explain([out])
        expected = np.arange(1.0, 25.0).reshape(4, 6)
        NUMPY[op](expected[::2, 1], 3.0)
        np.testing.assert_array_equal(results[out.name], expected)
    np.testing.assert_array_equal(feed, np.arange(1.0, 25.0).reshape(4, 6))
    np.testing.assert_array_equal(g.value("w"), np.arange(1.0, 25.0).reshape(4, 6))
    np.testing.assert_array_equal(g.value("c"), np.arange(1.0, 25.0).reshape(4, 6))


def test_readers_of_the_old_version_run_before_the_write():
    g = gv.Graph()
    x, t = intermediate(g, (3, 4))
    row = t[0]
    t2 = g.assign_(row, 0.0, name="t2")
    late_reader = g.math.sum(t, name="late")            # created after the write, reads the old t
    late_view_reader = g.math.neg(row, name="neg_row")   # reads the old t through a view
    text = g.explain([t2, late_reader, late_view_reader])
    assert "copies" not in text
    lines = [line.split()[1] for line in text.splitlines()[1:] if line.startswith("  ") and "=" in line]
    assert lines.index("late") < lines.index("t2") and lines.index("neg_row") < lines.index("t2")
    base = np.arange(12.0).reshape(3, 4)
    out = g.output({"x": base}, [t2, late_reader, late_view_reader])
    assert out["late"] == base.sum()
    np.testing.assert_array_equal(out["neg_row"], -base[0])
    expected = base.copy()
    expected[0] = 0.0
    np.testing.assert_array_equal(out["t2"], expected)


def test_a_reader_that_needs_both_versions_gets_a_copy_of_the_old_one():
    g = gv.Graph()
    x, t = intermediate(g, (3,))
    t2 = g.add_(t[1:], 10.0, name="t2")
    both = g.math.add(t, t2, name="both")       # reads the old t and the new one
    text = g.explain([both])
    assert "copies t first: both reads the old value of t but also depends on this write" in text
    out = g.output({"x": np.array([1.0, 2.0, 3.0])}, [both])
    np.testing.assert_array_equal(out["both"], [2.0, 14.0, 16.0])


def test_two_writes_of_one_version_and_a_requested_old_version_copy():
    g = gv.Graph()
    x, t = intermediate(g, (4,))
    first = g.add_(t[:2], 1.0, name="first")
    second = g.mul_(t[1:], 10.0, name="second")
    text = g.explain([first, second, t])
    assert "old value of t is a requested output" in text
    out = g.output({"x": np.arange(4.0)}, [first, second, t])
    np.testing.assert_array_equal(out["t"], np.arange(4.0))
    np.testing.assert_array_equal(out["first"], [1.0, 2.0, 2.0, 3.0])
    np.testing.assert_array_equal(out["second"], [0.0, 10.0, 20.0, 30.0])
    text = g.explain([first, second])
    assert "already writes the old value of t in place" in text
    out = g.output({"x": np.arange(4.0)}, [first, second])
    np.testing.assert_array_equal(out["first"], [1.0, 2.0, 2.0, 3.0])
    np.testing.assert_array_equal(out["second"], [0.0, 10.0, 20.0, 30.0])


def test_chained_writes_views_of_views_and_overlapping_values():
    g = gv.Graph()
    x, t = intermediate(g, (5, 4))
    inner = t[1:4][::-1, 1:]                  # a view of a view
    t2 = g.add_(inner, 1.0, name="t2")
    t3 = g.sub_(t2[0:3], t2[2:5], name="t3")  # the value overlaps the region written
    assert "copies input 1" in g.explain([t3])
    base = np.arange(20.0).reshape(5, 4)
    expected = base.copy()
    expected[1:4][::-1, 1:] += 1.0
    expected[0:3] -= expected[2:5].copy()
    np.testing.assert_array_equal(t3.eval({"x": base}), expected)


def test_writes_through_dynamic_views():
    g = gv.Graph()
    x, t = intermediate(g, (4, 6))
    d = g.placeholder("d", (7,), "int64")
    t2 = g.mul_(g.create_view(t, gv.all(), d), 2.0)
    base = np.arange(24.0).reshape(4, 6)
    expected = base.copy()
    expected[:, 5:0:-2] *= 2.0
    np.testing.assert_array_equal(t2.eval({"x": base, "d": gv.interval(5, 0, -2)}), expected)
    with pytest.raises(gv.IndexDescriptorError, match="field 6 \\(inclusive\\) is 3"):
        t2.eval({"x": base, "d": np.array([1, 2, 1, 0, 3, 1, 3], np.int64)})


def test_values_that_do_not_fit_a_dynamic_view_are_refused_at_run_time():
    g = gv.Graph()
    x, t = intermediate(g, (4, 6))
    d = g.placeholder("d", (7,), "int64")
    t2 = g.add_(g.create_view(t, gv.all(), d), np.arange(3.0), name="t2")
    base = np.arange(24.0).reshape(4, 6)
    expected = base.copy()
    expected[:, 1:4] += np.arange(3.0)
    np.testing.assert_array_equal(t2.eval({"x": base, "d": gv.interval(1, 4)}), expected)
    with pytest.raises(gv.ShapeError, match=r"add_ 't2': the value of shape \(3,\) does not broadcast to the view "
                                            r"\(4, 2\) that the dynamic descriptors select from the base \(4, 6\)"):
        t2.eval({"x": base, "d": gv.interval(1, 3)})


def test_value_dtypes_follow_numpy_same_kind():
    g = gv.Graph()
    a = g.placeholder("a", (3,), "int64")
    with pytest.raises(gv.DTypeError, match="cannot write a float64 value into 'a' of dtype int64"):
        g.add_(a[1:], 1.5)
    with pytest.raises(gv.DTypeError, match="floating point"):
        g.div_(a[1:], 2)
    f = g.placeholder("f", (3,), "float32")
    out = g.add_(f[1:], np.ones(2))            # float64 value into float32: an explicit cast node
    assert out.dtype == np.float32 and any(n.op == "cast" for n in g.nodes())
    with pytest.raises(gv.ShapeError, match="do not broadcast"):
        g.add_(f[1:], np.ones(3))


def test_the_write_costs_the_view_not_the_base():
    g = gv.Graph()
    x, t = intermediate(g, (1000, 1000))
    t2 = g.add_(t[:10], 1.0)
    feed = np.zeros((1000, 1000))
    g.output({"x": feed}, [t2])
    tracemalloc.start()
    g.output({"x": feed}, [t2])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1.1 * feed.nbytes, f"peak {peak / feed.nbytes:.2f} bases"


def test_threads_running_an_in_place_graph_do_not_interfere(run_in_threads):
    g = gv.Graph()
    x, t = intermediate(g, (50,))
    t2 = g.add_(t[::3], 1.0)
    failures = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(40):
            value = r.random(50)
            expected = value.copy()
            expected[::3] += 1.0
            if not np.array_equal(t2.eval({"x": value}), expected):
                failures.append(seed)

    run_in_threads(work)
    assert failures == []


# --- property test: random views and values vs NumPy's base[idx] op= x ---------------------

@st.composite
def cases(draw):
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    key = []
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            key.append(draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-size - 1, size + 1))
            key.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, -1, -2]))))
        else:
            key.append(slice(None))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    op = draw(st.sampled_from(sorted(NUMPY)))
    layout = draw(st.sampled_from(["intermediate", "transposed", "variable"]))
    broadcast_value = draw(st.booleans())
    return shape, tuple(key), op, layout, broadcast_value


@given(cases())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_in_place_ops_equal_numpy(case):
    shape, key, op, layout, broadcast_value = case
    base = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape)
    region_shape = base[key].shape
    value = np.full(region_shape[-1:] if broadcast_value else region_shape, 1.5)
    g = gv.Graph()
    if layout == "variable":
        source = g.var("w", base)
    else:
        x = g.placeholder("x", shape[::-1] if layout == "transposed" else shape)
        source = g.math.mul(x, 1.0)
        if layout == "transposed":
            source = g.shape.permute(source, tuple(reversed(range(len(shape)))))
    view = source[key]
    reader = g.math.sum(source, name="reader")      # an old-version reader created after the write below
    result = getattr(g, op)(view, value)
    feed = base.T.copy() if layout == "transposed" else base.copy()
    out = g.output({} if layout == "variable" else {"x": feed}, [result, reader, view])
    expected = base.copy()
    NUMPY[op](expected[key + (Ellipsis,)], value)
    np.testing.assert_allclose(out[result.name], expected, rtol=1e-15)
    np.testing.assert_allclose(out["reader"], base.sum(), rtol=1e-15)
    np.testing.assert_array_equal(out[view.name], base[key])
    if layout == "variable":
        np.testing.assert_array_equal(g.value("w"), base)


# --- gradients --------------------------------------------------------------------------------

@pytest.mark.parametrize("op", sorted(NUMPY))
def test_in_place_gradients_pass_checks_with_the_validation_listener(op):
    r = np.random.default_rng(5)
    g = gv.Graph()
    a = g.var("a", r.random((4, 5)) + 1.0)
    value = g.var("value", r.random((1, 3)) + 1.0)
    written = getattr(g, op)(g.math.exp(a)[1:3, ::-2], value)
    g.set_loss(g.math.sum(g.math.square(written)) + g.math.sum(a * 0.5))
    report = gv.check_gradients(g, {})
    assert report.passed and not report.violations, str(report)


def test_assign_gradient_zeroes_the_region_and_reduces_to_the_value():
    g = gv.Graph()
    a = g.var("a", np.ones((3, 4)))
    value = g.var("value", np.ones(4) * 2.0)
    written = g.assign_(a[1], value)
    g.set_loss(g.math.sum(written * np.arange(12.0).reshape(3, 4)))
    grads = g.calculate_gradients({}, ["a", "value"])
    expected = np.arange(12.0).reshape(3, 4)
    expected[1] = 0.0
    np.testing.assert_array_equal(grads["a"], expected)
    np.testing.assert_array_equal(grads["value"], np.arange(4.0, 8.0))


def test_the_listener_checks_the_value_but_not_the_written_base():
    listener = gv.NonInplaceValidationListener()
    g = gv.Graph()
    x, t = intermediate(g, (3, 4))
    t2 = g.add_(t[0], g.math.neg(x[1]))
    g.output({"x": np.ones((3, 4))}, [t2], listeners=[listener])
    assert not listener.violations and listener.checked_ops >= 2


def test_a_value_whose_unknown_dim_may_be_1_is_accepted_as_by_binary_ops_and_checked_at_run_time():
    g = gv.Graph()
    p = g.placeholder("p", (None, 1, 2))
    v = p[0:1, 0]                                  # (?, 2): 1 at run time, unless p is empty
    assert g.math.add(p, v).shape == (None, None, 2)
    out = g.sub_(p, v, name="out")
    assert out.shape == (None, 1, 2)
    data = np.arange(6.0).reshape(3, 1, 2)
    np.testing.assert_array_equal(out.eval({"p": data}), data - data[0:1, 0])
    with pytest.raises(gv.ShapeError, match=r"sub_ 'out' .*the value of shape \(0, 2\) does not broadcast to the "
                                            r"view \(0, 1, 2\)"):
        out.eval({"p": np.zeros((0, 1, 2))})

    target = g.placeholder("target", (4, 1, 2))
    value = g.placeholder("value", (None, 2))
    written = g.add_(target, value, name="written")
    np.testing.assert_array_equal(written.eval({"target": np.zeros((4, 1, 2)), "value": np.ones((1, 2))}),
                                  np.ones((4, 1, 2)))
    with pytest.raises(gv.ShapeError, match=r"add_ 'written' .*\(3, 2\) does not broadcast to the view \(4, 1, 2\)"):
        written.eval({"target": np.zeros((4, 1, 2)), "value": np.ones((3, 2))})
    with pytest.raises(gv.ShapeError, match=r"add_ .*\(3, 2\) does not broadcast"):   # known sizes: when built
        g.add_(target, np.ones((3, 2)))
