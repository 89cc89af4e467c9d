"""ONNX round trips of masks (issue 20): graphview's exports of masked ops, causal attention and recurrent
ops with lengths load back (their masks are ``Range`` compared with the lengths) and give the original
graph's outputs at other batch sizes, steps and lengths; ``Range`` itself against onnxruntime; and every
ONNX op type graphview's exporter writes is one its importer reads.
"""
import importlib
import re

import numpy as np
import pytest

import graphview as gv
from graphview.onnx import export_nn, export_ops, load_masks
from graphview.onnx.load import BUILDERS, load

ex = importlib.import_module("graphview.onnx.export")   # the module: gv.onnx.export is its function
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper as oh, numpy_helper  # noqa: E402
from onnx_helpers import assert_outputs_match, model_of, outputs_of, run_onnx  # noqa: E402

F32 = np.float32
# (batch, steps, lengths): the export's sizes first, then other batch sizes and steps (the sizes are symbolic).
SIZES = [(3, 5, [5, 0, 2]), (4, 7, [1, 7, 3, 0]), (1, 2, [2]), (5, 3, [3, 3, 1, 2, 0])]


def check_round_trip(g, names, make_feeds, sizes=SIZES, rtol=1e-5, atol=1e-6):
    """Export ``names``; onnxruntime equals graphview at the first sizes, and the loaded graph equals the
    original at every size. Returns the loaded graph."""
    model = ex.to_model(g, names)
    onnx.checker.check_model(model, full_check=True)
    assert "Range" in {node.op_type for node in model.graph.node}
    mapping = {}
    loaded = load(model, names=mapping)       # an output's name may be taken by a helper op's automatic name
    for i, size in enumerate(sizes):
        feeds = make_feeds(*size)
        want = outputs_of(g, feeds, names)
        if i == 0:
            for name, a, b in zip(names, run_onnx(model, feeds), want):
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"onnxruntime: {name}")
        assert_outputs_match(outputs_of(loaded, feeds, [mapping[name] for name in names]), want, rtol, atol,
                             names=names, where=f"loaded, sizes {size}: ")
    return loaded


def ops_of(graph):
    return {node.op for node in graph.nodes()}


# --- graphview's masked ops --------------------------------------------------------------------------

def op_(name, *inputs, **attrs):
    return gv.registry.op(name)(*inputs, **attrs)


MASKED = {
    "masked_sum": lambda g, x, n: gv.masked_sum(x, n, axis=1),
    "masked_mean": lambda g, x, n: gv.masked_mean(x, n, axis=(1, 2), keepdims=True),
    "masked_max": lambda g, x, n: gv.masked_max(x, n, axis=1),
    "masked_min": lambda g, x, n: gv.masked_min(x, n, axis=(0, 1)),
    "masked_softmax": lambda g, x, n: gv.masked_softmax(x, n),
    "masked_log_softmax": lambda g, x, n: gv.masked_log_softmax(x, n),
    "masked_logsumexp": lambda g, x, n: gv.masked_logsumexp(x, n, axis=1),
    "masked_count": lambda g, x, n: op_("masked_count", x, n, axis=1),
    "sequence_mask": lambda g, x, n: g.math.where(op_("sequence_mask", n, x), x, -1.0),
    "masked_softmax_cross_entropy": lambda g, x, n: gv.masked_softmax_cross_entropy(
        x, g.math.cast(g.math.abs(x[..., 0]) * 1.3, "int64"), n),
    # time before batch: the exporter transposes its (batch, time) mask
    "masked_sum (time-major)": lambda g, x, n: gv.masked_sum(x, n, axis=0, batch_axis=1, time_axis=0),
    "masked_softmax (time-major)": lambda g, x, n: gv.masked_softmax(x, n, batch_axis=1, time_axis=0),
    "masked_mean (batch last)": lambda g, x, n: gv.masked_mean(x, n, axis=1, batch_axis=2, time_axis=1),
}


def sequences(batch_axis=0, time_axis=1, features=4, seed=0):
    def make(batch, steps, lengths):
        shape = [features] * 3
        shape[batch_axis], shape[time_axis] = batch, steps
        x = np.random.default_rng(seed + batch * 10 + steps).normal(size=shape).astype(F32)
        return {"x": x, "lengths": np.array(lengths, np.int64)}
    return make


@pytest.mark.parametrize("case", sorted(MASKED))
def test_masked_op_round_trips(case):
    batch_axis, time_axis = (1, 0) if "time-major" in case else (2, 1) if "batch last" in case else (0, 1)
    g = gv.Graph("masked")
    shape = [4, 4, 4]
    shape[batch_axis] = shape[time_axis] = None
    x = g.placeholder("x", tuple(shape), "float32")
    lengths = g.placeholder("lengths", (None,), "int64")
    y = MASKED[case](g, x, lengths)
    sizes = SIZES if batch_axis != 2 else [(b, t, n) for b, t, n in SIZES if b != 4]   # features 4 on axis 0
    loaded = check_round_trip(g, [y.name], sequences(batch_axis, time_axis), sizes)
    assert "sequence_mask" in ops_of(loaded)              # graphview's own mask op, not a computed range
    assert "causal_mask" not in ops_of(loaded)


def test_masked_ops_sharing_one_mask_and_int32_lengths():
    g = gv.Graph("two")
    x = g.placeholder("x", (None, None, 4), "float32")
    lengths = g.placeholder("lengths", (None,), "int32")
    total, top = gv.masked_sum(x, lengths, axis=1), gv.masked_max(x, lengths, axis=(1, 2))
    make = sequences()

    def feeds(*size):
        values = make(*size)
        values["lengths"] = values["lengths"].astype(np.int32)
        return values
    check_round_trip(g, [total.name, top.name], feeds)


def test_padding_values_do_not_reach_the_loaded_outputs():
    g = gv.Graph("padding")
    x = g.placeholder("x", (None, None, 3), "float32")
    y = gv.masked_mean(x, g.placeholder("lengths", (None,), "int64"), axis=1)
    loaded = load(ex.to_model(g, [y.name]))
    values = np.random.default_rng(5).normal(size=(2, 4, 3)).astype(F32)
    lengths = np.array([2, 4])
    padded = values.copy()
    padded[0, 2:] = 1e30
    first, second = (outputs_of(loaded, {"x": v, "lengths": lengths}, [y.name])[0] for v in (values, padded))
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, [values[0, :2].mean(0), values[1].mean(0)], rtol=1e-6)


def test_lengths_past_the_steps_are_refused_as_by_the_original():
    """onnxruntime's Less takes any length; graphview's sequence_mask, in the original and the loaded graph,
    refuses one outside [0, steps] when the graph runs."""
    g = gv.Graph("long")
    x = g.placeholder("x", (None, None, 2), "float32")
    y = gv.masked_sum(x, g.placeholder("lengths", (None,), "int64"), axis=1)
    mapping = {}
    loaded = load(ex.to_model(g, [y.name]), names=mapping)
    feeds = {"x": np.ones((2, 3, 2), F32), "lengths": np.array([1, 4])}
    for graph, name in ((g, y.name), (loaded, mapping[y.name])):
        with pytest.raises(gv.ExecutionError, match=r"length 4 of batch entry 1 is outside \[0, 3\]"):
            graph.output(feeds, [name])


# --- causal attention ------------------------------------------------------------------------------

def test_causal_attention_round_trips():
    g = gv.Graph("attention")
    x = g.placeholder("x", (None, None, 4), "float32")
    r = np.random.default_rng(2)
    wq, wk, wv = (g.var(name, r.normal(0, 0.5, (4, 4)).astype(F32)) for name in ("wq", "wk", "wv"))
    y = g.nn.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, causal=True)
    make = sequences(seed=3)
    loaded = check_round_trip(g, [y.name], make)
    assert "causal_mask" in ops_of(loaded)
    assert "sequence_mask" not in ops_of(loaded)
    # the first step attends only to itself: its output is its own value row
    feeds = make(2, 6, [6, 6])
    (got,) = outputs_of(loaded, feeds, [y.name])
    np.testing.assert_allclose(got[:, 0], feeds["x"][:, 0] @ g.value("wv"), rtol=1e-5, atol=1e-6)


def test_causal_mask_of_four_axes_round_trips():
    g = gv.Graph("heads")
    q = g.placeholder("q", (None, 2, None, 3), "float32")
    y = g.nn.scaled_dot_product_attention(q, q * 0.5, q - 1.0, causal=True)

    def make(batch, steps, lengths):
        return {"q": np.random.default_rng(batch + steps).normal(size=(batch, 2, steps, 3)).astype(F32)}
    assert "causal_mask" in ops_of(check_round_trip(g, [y.name], make))


def test_dims_with_lengths_and_multi_head_causal_attention_round_trip():
    """The README's dims with lengths: reductions and softmax over a dim with lengths are masked ops, and
    multi-head attention masks padded keys (merge_axes/split_axis for the heads) beside its causal mask."""
    g = gv.Graph("dims")
    time, feat = gv.Dim("time"), gv.Dim("feat", 8)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feat), lengths={time: "seq_len"}, dtype="float32")
    r = np.random.default_rng(8)
    weights = [g.var(name, r.normal(0, 0.3, (8, 8)).astype(F32)) for name in ("wq", "wk", "wv", "wo")]
    attended = g.nn.multi_head_attention(seq, seq, seq, 2, *weights, causal=True)
    pooled = g.math.mean(attended, axis=time)
    weights_over_time = g.nn.softmax(g.math.sum(seq, axis=feat), axis=time)

    def make(batch, steps, lengths):
        x = np.random.default_rng(batch * steps).normal(size=(batch, steps, 8)).astype(F32)
        return {"seq": x, "seq_len": np.array(lengths, np.int64)}
    loaded = check_round_trip(g, [pooled.name, weights_over_time.name, attended.name], make)
    assert {"sequence_mask", "causal_mask", "split_axis"} <= ops_of(loaded)


def test_loaded_masked_attention_passes_gradient_checks():
    """A loaded float64 model with length masks and a causal mask differentiates: the weights' gradients
    match finite differences."""
    g = gv.Graph("grad")
    x = g.placeholder("x", (None, None, 3), "float64")
    lengths = g.placeholder("lengths", (None,), "int64")
    r = np.random.default_rng(9)
    wq, wk = (g.var(name, r.normal(0, 0.5, (3, 3))) for name in ("wq", "wk"))
    attended = g.nn.scaled_dot_product_attention(x @ wq, x @ wk, x, causal=True)
    scores = gv.masked_log_softmax(g.math.sum(attended * x, axis=2), lengths)
    pooled = gv.masked_sum(scores, lengths, axis=1)
    mapping = {}
    loaded = load(ex.to_model(g, [pooled.name]), names=mapping)
    loaded.set_loss(loaded.math.sum(loaded[mapping[pooled.name]], name="loss"))
    feeds = {"x": r.normal(size=(3, 4, 3)), "lengths": np.array([4, 1, 2])}
    report = gv.check_gradients(loaded, feeds)
    assert report.passed, str(report)
    assert {"wq", "wk"} <= set(report.variables)


# --- recurrent ops with lengths --------------------------------------------------------------------

@pytest.mark.parametrize("op", ["lstm", "gru"])
def test_recurrent_with_lengths_round_trips(op):
    g = gv.Graph(op)
    x = g.placeholder("x", (None, None, 3), "float32")
    lengths = g.placeholder("lengths", (None,), "int64")
    r = np.random.default_rng(4)
    gates = 16 if op == "lstm" else 12
    weights = [g.var(n, r.normal(0, 0.5, s).astype(F32)) for n, s in
               (("wi", (gates, 3)), ("wh", (gates, 4)), ("bi", (gates,)), ("bh", (gates,)))]
    states = [g.placeholder(name, (None, 4), "float32") for name in ("h0", "c0")[:2 if op == "lstm" else 1]]
    results = getattr(g.nn, op)(x, *states, *weights, lengths=lengths)
    pooled = gv.masked_mean(results[0], lengths, axis=1)      # a mask (Range) beside the recurrent op
    make = sequences(features=3, seed=6)

    def feeds(batch, steps, lengths):
        values = make(batch, steps, lengths)
        for i, state in enumerate(states):
            values[state.name] = np.random.default_rng(i).normal(size=(batch, 4)).astype(F32)
        return values
    names = [result.name for result in results] + [pooled.name]
    check_round_trip(g, names, feeds)


# --- Range on its own, against onnxruntime ------------------------------------------------------------

def range_model(nodes, inputs, outputs, initializers=()):
    return model_of(oh.make_graph(nodes, "range", inputs, outputs, list(initializers)))


@pytest.mark.parametrize("start, limit, delta, dtype", [
    (0, 5, 1, np.int64), (2, 11, 3, np.int64), (10, -3, -4, np.int32), (0.5, 2.0, 0.25, np.float32),
    (3, 3, 1, np.int64), (5, 1, 1, np.int64)])
def test_constant_range_matches_onnxruntime(start, limit, delta, dtype):
    code = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    # integer initializers are constants; a float one would be a weight, so the float limit is a Constant node
    given = (("start", start), ("delta", delta)) + ((("limit", limit),) if np.dtype(dtype).kind == "f" else ())
    constants = [oh.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v, dtype), name))
                 for name, v in given]
    nodes = constants + [oh.make_node("Range", ["start", "limit", "delta"], ["r"], name="range"),
                         oh.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
                         oh.make_node("Add", ["x", "rf"], ["y"], name="add")]
    size = len(np.arange(start, limit, delta))
    model = range_model(nodes, [oh.make_tensor_value_info("x", TensorProto.FLOAT, [size])],
                        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [size]),
                         oh.make_tensor_value_info("r", code, [size])],
                        [] if given[-1][0] == "limit" else [numpy_helper.from_array(np.asarray(limit, dtype), "limit")])
    feeds = {"x": np.random.default_rng(0).normal(size=size).astype(F32)}
    want = run_onnx(model, feeds)
    got = outputs_of(load(model), feeds, ["y", "r"])
    assert_outputs_match(got, want, rtol=1e-6)


def shape_range_model(start, delta, compare=None):
    """y = x[:, :, 0] + Range(start, x's axis 1, delta) as floats (the first steps), or a comparison of two
    ranges over axis 1 (``compare``), with x of symbolic batch and steps."""
    nodes = [oh.make_node("Shape", ["x"], ["shape"]), oh.make_node("Gather", ["shape", "one"], ["steps"], axis=0),
             oh.make_node("Range", ["start", "steps", "delta"], ["r"], name="range")]
    if compare:
        nodes += [oh.make_node("Unsqueeze", ["r", "zero"], ["row"]), oh.make_node("Unsqueeze", ["r", "one"], ["col"]),
                  oh.make_node(compare, ["row", "col"], ["y"], name="compare")]
        out = oh.make_tensor_value_info("y", TensorProto.BOOL, ["steps", "steps"])
    else:
        nodes += [oh.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
                  oh.make_node("Gather", ["x", "zero"], ["first"], axis=2),
                  oh.make_node("Slice", ["first", "starts", "ends", "axes", "strides"], ["picked"]),
                  oh.make_node("Add", ["picked", "rf"], ["y"], name="add")]
        out = oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "picked"])
    inits = [numpy_helper.from_array(np.asarray(v, np.int64), n) for n, v in
             (("start", start), ("delta", delta), ("zero", 0), ("one", 1), ("starts", [start]), ("ends", [1 << 40]),
              ("axes", [1]), ("strides", [delta]))]
    return range_model(nodes, [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "steps", 2])], [out], inits)


@pytest.mark.parametrize("start, delta", [(0, 1), (1, 2), (3, 1)])
def test_range_over_a_runtime_size_matches_onnxruntime(start, delta):
    """A Range whose limit is a symbolic axis's size, used as values (arithmetic): exact at every size."""
    model = shape_range_model(start, delta)
    loaded = load(model)
    for batch, steps in ((2, 5), (3, 1), (1, 8), (2, 2)):
        feeds = {"x": np.random.default_rng(steps).normal(size=(batch, steps, 2)).astype(F32)}
        (want,) = run_onnx(model, feeds)
        (got,) = outputs_of(loaded, feeds, ["y"])
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("compare", ["Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"])
def test_comparisons_of_two_runtime_ranges_match_onnxruntime(compare):
    """row <= col is the causal mask transposed; the others are computed from the positions themselves."""
    model = shape_range_model(0, 1, compare)
    loaded = load(model)
    for steps in (4, 1, 6):
        feeds = {"x": np.zeros((2, steps, 2), F32)}
        (want,) = run_onnx(model, feeds)
        (got,) = outputs_of(loaded, feeds, ["y"])
        np.testing.assert_array_equal(got, want)
    direct = compare in ("LessOrEqual", "GreaterOrEqual")      # graphview's causal mask as it is
    assert ("sum" not in ops_of(loaded)) is direct             # the others count positions from one


def test_positional_embedding_range_matches_onnxruntime():
    """PyTorch's positional embeddings: Range(0, steps) gathers rows of a table; the positions are also an output."""
    nodes = [oh.make_node("Shape", ["x"], ["shape"]), oh.make_node("Gather", ["shape", "one"], ["steps"], axis=0),
             oh.make_node("Range", ["zero", "steps", "one"], ["positions"]),
             oh.make_node("Gather", ["table", "positions"], ["rows"], axis=0), oh.make_node("Add", ["x", "rows"], ["y"])]
    inits = [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in (("zero", 0), ("one", 1))]
    inits.append(numpy_helper.from_array(np.random.default_rng(1).normal(size=(9, 3)).astype(F32), "table"))
    model = range_model(nodes, [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "steps", 3])],
                        [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "steps", 3]),
                         oh.make_tensor_value_info("positions", TensorProto.INT64, ["steps"])], inits)
    loaded = load(model)
    for batch, steps in ((2, 5), (1, 9), (3, 1)):
        feeds = {"x": np.random.default_rng(steps).normal(size=(batch, steps, 3)).astype(F32)}
        for got, want in zip(outputs_of(loaded, feeds, ["y", "positions"]), run_onnx(model, feeds)):
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-6)
    assert loaded.is_trainable("table")           # the table is a weight: fine-tuning reaches it


def test_range_with_a_limit_computed_from_values_is_refused():
    nodes = [oh.make_node("ReduceMax", ["n"], ["limit"], keepdims=0, name="longest"),
             oh.make_node("Range", ["zero", "limit", "one"], ["y"], name="positions")]
    model = range_model(nodes, [oh.make_tensor_value_info("n", TensorProto.INT64, ["batch"])],
                        [oh.make_tensor_value_info("y", TensorProto.INT64, ["k"])],
                        [numpy_helper.from_array(np.asarray(v, np.int64), k) for k, v in (("zero", 0), ("one", 1))])
    with pytest.raises(gv.GraphFileError, match=r"node positions \(Range\): the limit must be a constant or the "
                                                r"size of an axis"):
        load(model)


@pytest.mark.parametrize("start, delta, why", [(-1, 1, "start must be >= 0"), (0, -1, "delta > 0")])
def test_range_over_a_runtime_size_counting_down_is_refused(start, delta, why):
    with pytest.raises(gv.GraphFileError, match=rf"node range \(Range\): .*{why}"):
        load(shape_range_model(start, delta))


@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("depth_from", ["constant", "shape"])
def test_one_hot_matches_onnxruntime(axis, depth_from):
    """OneHot with negative indices (counted from the end) and indices out of range (a row of the off value),
    its depth a constant or the size of a symbolic axis."""
    nodes = [oh.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=axis, name="hot")]
    inits = [numpy_helper.from_array(np.array([-2.0, 5.0], F32), "values")]
    if depth_from == "shape":
        nodes = [oh.make_node("Shape", ["x"], ["shape"]), oh.make_node("Gather", ["shape", "last"], ["depth"], axis=0)
                 ] + nodes
        inits.append(numpy_helper.from_array(np.array(-1, np.int64), "last"))
    else:
        inits.append(numpy_helper.from_array(np.array([5], np.int64), "depth"))
    inputs = [oh.make_tensor_value_info("i", TensorProto.INT64, ["batch", 3]),
              oh.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "classes"])]
    model = range_model(nodes, inputs, [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = onnx.shape_inference.infer_shapes(model)
    values = np.array([[0, 4, -1], [-5, 7, -6], [2, 2, 3]], np.int64)
    loaded = load(model)
    for rows in (3, 1):
        feeds = {"i": values[:rows], "x": np.zeros((rows, 5), F32)}
        (want,) = run_onnx(model, feeds)
        (got,) = outputs_of(loaded, feeds, ["y"])
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


# --- op type coverage: what the exporter writes, the importer reads -------------------------------------

# ONNX op types the exporter writes that the importer does not read, with the reason (ideally none).
NOT_IMPORTED = {}


def exported_op_types():
    """Every ONNX op type named in the export tables' source (emit's op types, the element-wise, comparison
    and reduction tables, Constant nodes), plus LSTM and GRU (written as ``node.op.upper()``)."""
    names = set()
    for module in (ex, export_ops, export_nn):
        with open(module.__file__, encoding="utf-8") as file:
            names |= set(re.findall(r'"([A-Z][A-Za-z]+)"', file.read()))
    return {name for name in names if onnx.defs.has(name)} | {"LSTM", "GRU"}


def test_every_exported_op_type_is_imported():
    emitted = exported_op_types()
    assert {"Range", "Less", "LessOrEqual", "ScatterND", "LSTM", "ReduceLogSumExp", "Constant"} <= emitted
    missing = sorted(emitted - set(BUILDERS) - set(NOT_IMPORTED))
    assert not missing, f"exported but not imported: {missing}"
    assert not set(NOT_IMPORTED) - emitted, "an exception for an op type the exporter no longer writes"
    assert "Range" in BUILDERS and BUILDERS["Range"] is load_masks.range_
