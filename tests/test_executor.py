"""The executor: cached pruned plans, placeholder validation, memory, output ownership, threads."""
import tracemalloc

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.execution import executor_of
from graphview_kernels import elementwise

CALLS = []


def _recording_kernel(x, out):
    CALLS.append(x.shape)
    elementwise.copy(x, out)


record = gv.defop("test_record", shape=lambda x: x, kernel=_recording_kernel, differentiable=False,
                  reference=lambda x: x, samples=lambda: [gv.Sample((np.arange(3.0),))])


def chain():
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    y = record(g.math.exp(x), name="y")
    z = g.math.neg(x, name="z")
    return g, x, y, z


def test_plans_are_built_once_per_outputs_and_feed_signature():
    g, x, y, z = chain()
    executor = executor_of(g)
    first, _ = executor.plan({"x": np.ones((2, 3))}, ["y"])
    again, _ = executor.plan({"x": np.zeros((2, 3))}, ["y"])
    other, _ = executor.plan({"x": np.ones((5, 3))}, ["y"])
    assert first is again
    assert other is not first


def test_plans_are_pruned_to_what_the_outputs_need():
    g, x, y, z = chain()
    CALLS.clear()
    out = g.output({"x": np.ones((2, 3))}, ["z"])
    np.testing.assert_array_equal(out["z"], -np.ones((2, 3)))
    assert CALLS == []
    g.output({"x": np.ones((2, 3))}, ["y"])
    assert CALLS == [(2, 3)]


@pytest.mark.parametrize("feeds, error, message", [
    ({}, gv.PlaceholderError, r"missing placeholder 'x' \(\(\?, 3\) float64\)"),
    ({"x": np.ones((2, 3)), "w": np.ones(2)}, gv.PlaceholderError, "unknown placeholder 'w'.*are: x"),
    ({"x": np.ones((2, 4))}, gv.ShapeError, r"'x' expects shape \(\?, 3\), got an array of shape \(2, 4\)"),
    ({"x": np.ones(3)}, gv.ShapeError, r"'x' expects shape \(\?, 3\)"),
    ({"x": np.ones((2, 3), np.float32)}, gv.DTypeError, "'x' expects dtype float64, got an array of dtype float32"),
    ({"x": np.ones((2, 3), np.int64)}, gv.DTypeError, "'x' expects dtype float64"),
    ({"x": [["a", "b", "c"]]}, gv.DTypeError, "'x' expects dtype float64"),
    ({"x": [[1.0, 2.0, 3.0], [1.0, 2.0]]}, gv.PlaceholderError, "'x' was fed a list that is not a rectangular array"),
    ({"x": np.ma.MaskedArray(np.ones((2, 3)), mask=np.eye(2, 3))}, gv.PlaceholderError,
     r"'x' was fed a masked array.*array.filled\(fill_value\) or np.asarray"),
    ({"x": np.ones((2, 3), ">f8")}, gv.DTypeError,
     r"'x' expects dtype float64 in the machine's byte order, got an array of dtype float64 with byte order '>' "
     r"\(big-endian\); convert it with array.astype\('float64'\)"),
    ({"x": [[1.0, None, 2.0]]}, gv.DTypeError, "'x' expects dtype float64, got a list that NumPy can only store as "
                                               "Python objects"),
])
def test_bad_placeholders_fail_before_any_kernel_runs(feeds, error, message):
    g, x, y, z = chain()
    CALLS.clear()
    with pytest.raises(error, match=message):
        g.output(feeds, ["y"])
    assert CALLS == []


def test_python_lists_take_the_placeholder_dtype():
    g, x, y, z = chain()
    out = g.output({"x": [[1, 2, 3]]}, ["z"])
    assert out["z"].dtype == np.float64
    np.testing.assert_array_equal(out["z"], [[-1.0, -2.0, -3.0]])


@pytest.mark.parametrize("value", [[2**40, 0, 0], [-2**31 - 1, 0, 0], [2**70, 0, 0]])
def test_python_integers_outside_the_placeholder_dtype_are_refused(value):
    g = gv.Graph()
    i = g.placeholder("i", (3,), "int32")
    doubled = i * 2
    with pytest.raises(gv.DTypeError, match="placeholder 'i' expects dtype int32, got a list"):
        g.output({"i": value}, [doubled])
    out = g.output({"i": [2**30 - 1, -2**30, 1]}, [doubled])[doubled.name]
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [2**31 - 2, -2**31, 2])


class Tagged(np.ndarray):
    """An ndarray subclass that carries nothing graphview must honour."""


def test_ndarray_subclasses_other_than_masked_arrays_are_read_as_plain_arrays():
    g, x, y, z = chain()
    out = g.output({"x": np.array([[1.0, 2.0, 3.0]]).view(Tagged)}, ["z"])["z"]
    assert type(out) is np.ndarray
    np.testing.assert_array_equal(out, [[-1.0, -2.0, -3.0]])


def dynamic_view(g, length=7):
    """A placeholder x of 6 elements and a view of it whose size the fed descriptor decides."""
    x = g.placeholder("x", (6,))
    d = g.placeholder("d", (length,), "int64")
    return x, d, g.create_view(x, d, name="v")


@pytest.mark.parametrize("build, reference", [
    (lambda g, v: g.math.exp(v) + np.ones(3), lambda v: np.exp(v) + 1.0),
    (lambda g, v: g.math.where(v > 0.5, g.math.exp(v), np.full(3, -1.0)),
     lambda v: np.where(v > 0.5, np.exp(v), -1.0)),
    (lambda g, v: g.math.maximum(g.math.exp(v), np.full(3, 1.5)), lambda v: np.maximum(np.exp(v), 1.5)),
    (lambda g, v: g.math.exp(v) * np.ones((2, 3)), lambda v: np.exp(v) * np.ones((2, 3))),
], ids=["add", "where", "maximum", "broadcast up"])
def test_a_dynamic_view_combines_with_fixed_size_partners(build, reference):
    g = gv.Graph()
    x, d, v = dynamic_view(g)
    y = build(g, v)
    feed = np.arange(6.0) / 2
    np.testing.assert_allclose(g.output({"x": feed, "d": gv.interval(1, 4)}, [y])[y.name], reference(feed[1:4]),
                               rtol=1e-15)


def test_gradients_through_a_dynamic_view_and_a_fixed_size_partner():
    g = gv.Graph()
    x = g.var("x", np.arange(6.0))
    d = g.placeholder("d", (7,), "int64")
    g.set_loss(g.math.sum(g.math.square(g.create_view(x, d)) * np.array([1.0, 2.0, 3.0]), name="loss"))
    gradient = g.calculate_gradients({"d": gv.interval(2, 5)}, ["x"])["x"]
    np.testing.assert_array_equal(gradient, [0.0, 0.0, 4.0, 12.0, 24.0, 0.0])


@pytest.mark.parametrize("build, message", [
    (lambda g, x, d, v: g.math.add(v, np.ones(3), name="total"),
     r"add 'total' \(v \(2,\), const \(3,\), sizes known only at run time\): shapes \(2,\) and \(3,\) do not "
     r"broadcast"),
    (lambda g, x, d, v: g.math.mul(g.math.exp(v), np.ones(3), name="total"), r"mul 'total' \(exp \(2,\), const \(3,\)"),
    (lambda g, x, d, v: g.linalg.matmul(v, np.ones((3, 2)), name="total"),
     r"matmul 'matmul' \(expand_dims \(1, 2\), const \(3, 2\), sizes known only at run time\): inner dimensions differ"),
    (lambda g, x, d, v: g.shape.stack([v, g.constant("c", np.ones(3))], name="total"),
     r"stack 'total' \(v \(2,\), c \(3,\)"),
    (lambda g, x, d, v: g.loss.mean_squared_error(v, np.ones(3), name="total"),
     r"mean_squared_error 'total' \(v \(2,\), const \(3,\)"),
    (lambda g, x, d, v: g.add_(g.create_view(g.math.exp(x), d), np.ones(3), name="total"),
     r"add_ 'total': the value of shape \(3,\) does not broadcast to the view \(2,\) that the dynamic "
     r"descriptors select from the base \(6,\) at run time"),
], ids=["add", "after exp", "matmul", "stack", "mean_squared_error", "add_"])
def test_sizes_known_only_at_run_time_are_checked_before_the_op_runs(build, message):
    g = gv.Graph()
    x, d, v = dynamic_view(g)
    y = record(build(g, x, d, v))
    feeds = {"x": np.arange(6.0), "d": gv.interval(0, 2)}
    CALLS.clear()
    with pytest.raises(gv.ShapeError, match=message):
        g.output(feeds, [y])
    assert CALLS == []


def test_run_time_errors_name_the_op_and_node_and_keep_their_type():
    g = gv.Graph()
    x = g.placeholder("x", (4,))
    d = g.placeholder("d", (5,), "int64")
    v = g.create_view(x, d, name="myview")
    for listeners in ([], [gv.DebugListener()]):
        with pytest.raises(gv.IndexDescriptorError,
                           match=r"^create_view 'myview': descriptor 0: .*point\(9\) is out of range"):
            g.output({"x": np.ones(4), "d": gv.point(9)}, [v], listeners=listeners)


def test_unknown_outputs_and_non_dict_placeholders_raise():
    g, *_ = chain()
    with pytest.raises(gv.UnknownNameError, match="no variable named 'nope'"):
        g.output({"x": np.ones((1, 3))}, ["nope"])
    with pytest.raises(gv.PlaceholderError, match="must be a dict"):
        g.output([np.ones((1, 3))], ["y"])


def test_intermediate_buffers_are_released_after_their_last_use():
    g = gv.Graph()
    x = g.placeholder("x", (1_000_000,))
    y = x
    for step in range(20):
        y = g.math.exp(y) if step % 2 else g.math.neg(y)
    feeds = {"x": np.zeros(1_000_000)}
    g.output(feeds, [y])  # compile and plan outside the measurement
    tracemalloc.start()
    g.output(feeds, [y])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    buffer = 8_000_000
    assert peak < 3.5 * buffer, f"peak {peak / buffer:.1f} buffers for a chain of 20"


def test_outputs_are_owned_by_the_caller():
    g = gv.Graph()
    x = g.placeholder("x", (3,))
    w = g.var("w", np.arange(3.0))
    c = g.constant("c", np.ones(3))
    flat = g.shape.reshape(w, (3, 1), name="flat")
    total = g.math.add(x, w, name="total")
    feed = np.zeros(3)
    out = g.output({"x": feed}, [x, w, c, flat, total])
    for name in ("x", "w", "c", "flat", "total"):
        out[name][...] = 99.0
    assert not np.shares_memory(out["x"], feed)
    np.testing.assert_array_equal(feed, np.zeros(3))
    np.testing.assert_array_equal(g.value("w"), np.arange(3.0))
    np.testing.assert_array_equal(g.value("c"), np.ones(3))
    again = g.output({"x": feed}, [flat, total])
    np.testing.assert_array_equal(again["flat"].ravel(), np.arange(3.0))
    np.testing.assert_array_equal(again["total"], np.arange(3.0))


def test_two_threads_running_one_graph_get_their_own_results(run_in_threads):
    g = gv.Graph()
    x = g.placeholder("x", (None, 4))
    w = g.var("w", np.linspace(-1, 1, 8).reshape(4, 2))
    g.math.sum(g.math.tanh(x @ w) * 2.0 + 1.0, axis=1, name="y")
    failures = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(50):
            value = r.normal(size=(int(r.integers(1, 6)), 4))
            expected = np.sum(np.tanh(value @ g.value("w")) * 2.0 + 1.0, axis=1)
            result = g.output({"x": value}, ["y"])["y"]
            if not np.allclose(result, expected, rtol=1e-12, atol=1e-12):
                failures.append(seed)

    run_in_threads(work)
    assert failures == []


def test_explain_describes_each_step():
    g, *_ = chain()
    text = g.explain(["y"])
    assert "y" in text and "exp" in text and "test_record" in text
    assert "z" not in text.split("\n", 1)[1]


def test_explain_counts_the_lines_it_lists():
    g = gv.Graph("counted")
    x = g.placeholder("x", (2, 3))
    w = g.var("w", np.ones((3, 3)))
    y = g.math.transpose(g.math.tanh(x @ w))
    header, *lines = g.explain([y.name]).splitlines()
    loads = [line for line in lines if line.split()[0] == "load"]
    ops = [line for line in lines if line.split()[0] in ("kernel", "view", "in-place")]
    assert header == f"plan for {y.name}: {len(loads)} inputs loaded, then {len(ops)} ops run in this order"
    assert (len(loads), len(ops)) == (2, 3)


def test_a_run_time_error_keeps_its_object_and_gains_the_op_and_node():
    class CodedError(gv.GraphviewError):
        def __init__(self, message, code=None):
            super().__init__(message)
            self.code = code

    def refuse(x, out):
        raise CodedError("negative first element", code=42)

    name = "test_coded_refusal"
    try:
        op = gv.defop(name, shape=lambda x: x, kernel=refuse, differentiable=False)
        g = gv.Graph()
        y = op(g.constant("a", np.ones(2)), name="y")
        for listeners in (None, [gv.ProfilingListener()]):
            with pytest.raises(CodedError, match=f"^{name} 'y': negative first element$") as caught:
                g.output({}, [y], listeners=listeners)
            assert caught.value.code == 42
            assert any(entry.name == "refuse" for entry in caught.traceback)
    finally:
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)


# --- errors from a user's kernel are named ------------------------------------------------------

RAISES = {-1.0: ValueError("negative input"), -2.0: KeyboardInterrupt(), -3.0: SystemExit(3)}


def _normalize_kernel(x, out):
    if x.size and float(x.flat[0]) in RAISES:
        raise RAISES[float(x.flat[0])]
    out[...] = x * (1 / int(x.sum()))        # ZeroDivisionError when the sum is 0


normalize = gv.defop("test_normalize", shape=lambda x: x, kernel=_normalize_kernel, differentiable=False,
                     reference=lambda x: x / int(x.sum()), samples=lambda: [gv.Sample((np.arange(1.0, 4.0),))])


def _shape_rule_that_divides(x):
    if x[0] is not None:
        x[0] // (x[0] - 2)                     # ZeroDivisionError for a size of 2, known only when fed
    return x


divides = gv.defop("test_divides_in_shape_rule", shape=_shape_rule_that_divides, kernel=elementwise.copy,
                   differentiable=False, reference=lambda x: x, samples=lambda: [gv.Sample((np.arange(3.0),))])


def _user_graph():
    g = gv.Graph()
    y = normalize(g.placeholder("x", (3,)), name="y")
    return g, g.math.neg(y, name="z")


@pytest.mark.parametrize("listened", [False, True])
@pytest.mark.parametrize("data, cause, message", [(np.zeros(3), ZeroDivisionError, "division by zero"),
                                                  (np.array([-1.0, 2.0, 3.0]), ValueError, "negative input")])
def test_an_exception_from_a_user_kernel_names_the_op_and_node(listened, data, cause, message):
    g, z = _user_graph()
    listeners = [gv.NonInplaceValidationListener()] if listened else None
    np.testing.assert_allclose(g.output({"x": np.arange(1.0, 4.0)}, [z], listeners=listeners)["z"],
                               -np.arange(1.0, 4.0) / 6)
    with pytest.raises(gv.ExecutionError, match=f"^test_normalize 'y': {cause.__name__}: {message}$") as caught:
        g.output({"x": data}, [z], listeners=listeners)
    assert isinstance(caught.value.__cause__, cause)
    assert isinstance(caught.value, gv.GraphviewError)


@pytest.mark.parametrize("listened", [False, True])
@pytest.mark.parametrize("first, kind", [(-2.0, KeyboardInterrupt), (-3.0, SystemExit)])
def test_interrupts_and_exits_from_a_kernel_are_not_wrapped(listened, first, kind):
    g, z = _user_graph()
    listeners = [gv.NonInplaceValidationListener()] if listened else None
    with pytest.raises(kind):
        g.output({"x": np.array([first, 1.0, 1.0])}, [z], listeners=listeners)


def test_graphview_errors_at_run_time_keep_their_type():
    g = gv.Graph()
    loss = g.loss.softmax_cross_entropy(g.placeholder("x", (2, 3)), g.placeholder("y", (2,), "int64"), name="loss")
    with pytest.raises(gv.ExecutionError, match="^softmax_cross_entropy 'loss': .*label 5 is out of range") as caught:
        loss.eval({"x": np.zeros((2, 3)), "y": np.array([0, 5])})
    assert type(caught.value) is gv.ExecutionError and caught.value.__cause__ is None


def test_an_exception_from_a_user_shape_rule_at_plan_time_names_the_op_and_node():
    g = gv.Graph()
    y = divides(g.placeholder("x", (None,)), name="y")
    np.testing.assert_array_equal(y.eval({"x": np.arange(4.0)}), np.arange(4.0))
    with pytest.raises(gv.ExecutionError, match="^test_divides_in_shape_rule 'y': ZeroDivisionError") as caught:
        y.eval({"x": np.arange(2.0)})
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


# --- outputs reported as soon as they are final ---------------------------------------------------

def _reporting_graph():
    g = gv.Graph()
    x = g.placeholder("x", (3,))
    first = g.math.exp(x, name="first")
    late = g.math.add(g.math.mul(first, first), 1.0, name="late")
    g.var("v", np.zeros(3))
    bumped = g.add_(first[:], late, name="bumped")         # writes first's buffer, after late has read it
    return g, [first.name, late.name, "v", bumped.name]


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("listened", [False, True], ids=["unlistened", "listened"])
def test_ready_reports_each_computed_output_once_with_its_final_value(fusion, listened, monkeypatch):
    monkeypatch.setattr(gv.config, "fusion", fusion)
    g, names = _reporting_graph()
    x = np.array([0.0, 1.0, -2.0])
    seen = []
    listeners = [gv.Listener()] if listened else None
    values = executor_of(g).run({"x": x}, names, listeners, ready=lambda name, array: seen.append((name, array.copy())))
    # "v" is a source, not computed by a step: the caller reads it from the result. The others come in
    # run order, each already holding the value the run returns (first is exp(x): the schedule copies it
    # before add_ writes its buffer, since it is requested).
    assert [name for name, _ in seen] == [names[0], names[1], names[3]]
    for name, array in seen:
        np.testing.assert_array_equal(array, values[name])
    np.testing.assert_array_equal(values[names[0]], np.exp(x))
    np.testing.assert_array_equal(values[names[1]], np.exp(x) ** 2 + 1)
    np.testing.assert_allclose(values[names[3]], np.exp(x) + (np.exp(x) ** 2 + 1), rtol=1e-15)


def test_an_error_raised_by_ready_is_the_callers_not_the_ops():
    g, names = _reporting_graph()

    def ready(name, array):
        raise KeyError(f"no place for {name}")
    with pytest.raises(KeyError, match="no place for first"):
        executor_of(g).run({"x": np.zeros(3)}, names, ready=ready)
