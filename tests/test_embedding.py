"""g.nn.embedding against torch.nn.functional.embedding: rows by ids of any shape, the scatter-add gradient
(padding_idx's row takes none), ids checked before any kernel reads, second derivatives, graph files."""
import numpy as np
import pytest

import graphview as gv
from graphview.ops.embedding import embedding_grad

torch = pytest.importorskip("torch")
R = np.random.default_rng(160)


def _model(table, ids_shape, padding_idx=None, ids_dtype="int64"):
    g = gv.Graph()
    t = g.var("table", table)
    ids = g.placeholder("ids", ids_shape, ids_dtype)
    y = g.nn.embedding(ids, t, padding_idx=padding_idx, name="rows")
    weights = np.linspace(-1.0, 2.0, int(np.prod(ids_shape)) * table.shape[1]).reshape(ids_shape + (table.shape[1],))
    g.set_loss(g.math.sum(g.math.mul(y, weights.astype(table.dtype)), name="loss"))
    return g, weights


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
@pytest.mark.parametrize("ids_shape", [(5,), (2, 3), (2, 2, 3), ()])
def test_values_and_table_gradient_match_pytorch(dtype, padding_idx, ids_shape):
    table = R.normal(size=(6, 4)).astype(dtype)
    ids = R.integers(0, 6, ids_shape)
    if ids.size > 1:
        ids.reshape(-1)[:2] = 5            # a repeated id, and the padding row when it is -1
        ids.reshape(-1)[-1] = 2
    g, weights = _model(table, ids_shape, padding_idx)
    values = g.output({"ids": ids}, ["rows"])["rows"]
    gradient = g.calculate_gradients({"ids": ids}, ["table"])["table"]
    t = torch.tensor(table, requires_grad=True)
    expected = torch.nn.functional.embedding(torch.tensor(ids), t, padding_idx=padding_idx)
    (expected * torch.tensor(weights.astype(dtype))).sum().backward()
    assert values.shape == ids_shape + (4,) and values.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(values, expected.detach().numpy())
    # float32: this sums in float64, so it may differ from float32 sums by their rounding (atol).
    np.testing.assert_allclose(gradient, t.grad.numpy(), **(dict(rtol=1e-6, atol=1e-6) if dtype == "float32" else
                                                             dict(rtol=1e-14, atol=1e-15)))


def test_int32_ids_and_strided_tables():
    table = R.normal(size=(4, 10))[:, ::2]
    ids = np.array([[3, 0], [0, 1]], np.int32).T
    g = gv.Graph()
    y = g.nn.embedding(g.constant("ids", ids), g.var("table", table))
    np.testing.assert_array_equal(g.output({}, [y])[y.name], table[ids])


@pytest.mark.parametrize("bad", [6, -1, 1000])
def test_out_of_range_ids_are_refused_before_any_kernel_reads(bad):
    g, _ = _model(R.normal(size=(6, 3)), (2, 2))
    ids = np.array([[0, 1], [bad, 2]])
    with pytest.raises(gv.ExecutionError, match=f"embedding: id {bad} at position \\(1, 0\\) is out of range for a "
                                                "table of 6 rows \\(valid: 0..5\\)"):
        g.output({"ids": ids}, ["rows"])
    with pytest.raises(gv.ExecutionError, match=f"embedding(_grad)?: id {bad} at position"):
        g.calculate_gradients({"ids": ids}, ["table"])


def test_bad_declarations_are_refused_when_built():
    g = gv.Graph()
    table = g.var("table", np.zeros((4, 3)))
    ids = g.placeholder("ids", (2,), "int64")
    with pytest.raises(gv.OpArgumentError, match="embedding: padding_idx 4 is out of range for a table of 4 rows"):
        g.nn.embedding(ids, table, padding_idx=4)
    with pytest.raises(gv.OpArgumentError, match="padding_idx"):
        g.nn.embedding(ids, table, padding_idx=1.5)
    with pytest.raises(gv.ShapeError, match="embedding: the table must be \\(rows, dim\\)"):
        g.nn.embedding(ids, g.var("flat", np.zeros(4)))
    with pytest.raises(gv.DTypeError, match="embedding: input ids has dtype float64"):
        g.nn.embedding(g.placeholder("f", (2,)), table)


def test_gradient_and_second_derivative_pass_gradient_checks():
    g = gv.Graph()
    table = g.var("table", R.normal(size=(5, 3)))
    ids = g.constant("ids", np.array([[0, 4, 4], [2, 1, 0]]))
    rows = g.nn.embedding(ids, table, padding_idx=1)
    g.set_loss(g.math.sum(g.math.tanh(rows)))
    assert gv.check_gradients(g, {}, mask={"table": np.arange(5)[:, None] != np.ones((1, 3))}).passed
    first = g.gradient_graph(["table"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["table"])))
    report = gv.check_gradients(first.graph, {}, wrt=["table"])
    assert report.passed, str(report)
    assert first.graph.output({}, [first.gradients["table"]])[first.gradients["table"].name][1].tolist() == [0.0] * 3


def test_graph_files_save_and_load_embedding(tmp_path):
    g, _ = _model(R.normal(size=(6, 3)), (2, 3), padding_idx=0)
    path = tmp_path / "embedding.gvz"
    g.save(path)
    loaded = gv.load(path)
    ids = np.array([[0, 1, 2], [5, 5, 3]])
    np.testing.assert_array_equal(loaded.output({"ids": ids}, ["rows"])["rows"], g.output({"ids": ids}, ["rows"])["rows"])
    np.testing.assert_array_equal(loaded.calculate_gradients({"ids": ids}, ["table"])["table"],
                                  g.calculate_gradients({"ids": ids}, ["table"])["table"])
    assert loaded.node("rows").attributes["padding_idx"] == 0


def test_embedded_sequences_keep_their_time_dim_so_reductions_over_it_are_masked():
    g = gv.Graph()
    time = gv.Dim("time")
    ids = g.placeholder("ids", dims=(gv.batch_dim, time), dtype="int64", lengths={time: "length"})
    table = R.normal(size=(10, 4))
    pooled = g.math.mean(g.nn.embedding(ids, g.var("table", table)), axis=1)
    assert pooled.op == "masked_mean"
    ids_values = np.array([[1, 2, 3], [4, 5, 6]])
    result = g.output({"ids": ids_values, "length": np.array([3, 1])}, [pooled])[pooled.name]
    np.testing.assert_allclose(result, [table[[1, 2, 3]].mean(axis=0), table[4]], rtol=1e-14)


@pytest.mark.parametrize("ids", [3, np.int32(3), np.int64(3)])
def test_integer_scalar_ids_stay_integer_constants(ids):
    g = gv.Graph()
    table = R.normal(size=(5, 3)).astype(np.float32)
    y = g.nn.embedding(ids, g.var("table", table))
    const = g.node(y.node.inputs[0])
    assert const.dtype == (np.dtype(np.int64) if isinstance(ids, int) else ids.dtype)
    np.testing.assert_array_equal(g.output({}, [y])[y.name], table[3])


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_table_with_rows_known_only_at_run_time_has_first_and_second_derivatives(padding_idx):
    g = gv.Graph()
    table = g.placeholder("table", (None, 3))
    ids = g.constant("ids", np.array([[0, 4, 4], [2, 1, 0]]))
    rows = g.nn.embedding(ids, table, padding_idx=padding_idx)
    g.set_loss(g.math.sum(g.math.tanh(rows)))
    value = R.normal(size=(5, 3))
    feeds = {"table": value}
    t = torch.tensor(value, requires_grad=True)
    torch.tanh(torch.nn.functional.embedding(torch.tensor([[0, 4, 4], [2, 1, 0]]), t,
                                             padding_idx=padding_idx)).sum().backward()
    np.testing.assert_allclose(g.calculate_gradients(feeds, ["table"])["table"], t.grad.numpy(), rtol=1e-14)
    assert g.calculate_gradients({"table": np.vstack([value, value])}, ["table"])["table"].shape == (10, 3)
    first = g.gradient_graph(["table"])
    first.graph.set_loss(first.graph.math.sum(first.graph.math.sin(first.gradients["table"])))
    report = gv.check_gradients(first.graph, feeds, wrt=["table"])
    assert report.passed, str(report)


def test_embedding_grad_sizes_its_result_by_the_table():
    g = gv.Graph()
    grad = g.placeholder("grad", (2, 3))
    ids = g.constant("ids", np.array([1, 1]))
    with pytest.raises(gv.ShapeError, match="embedding_grad: the gradient \\(2, 3\\) has rows of length 3, the "
                                            "table \\(\\?, 4\\) rows of length 4"):
        embedding_grad(grad, ids, g.placeholder("t", (None, 4)))
    out = embedding_grad(grad, ids, g.placeholder("u", (None, 3)))
    assert out.shape == (None, 3)
    result = g.output({"grad": np.ones((2, 3)), "u": np.zeros((4, 3))}, [out])[out.name]
    np.testing.assert_array_equal(result, [[0.0] * 3, [2.0] * 3, [0.0] * 3, [0.0] * 3])
