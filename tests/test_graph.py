"""The graph: variables, kinds, names, scopes, immutability, set_value and summary."""
import dataclasses

import networkx as nx
import numpy as np
import pytest

import graphview as gv


def demo():
    g = gv.Graph("demo")
    x = g.placeholder("x", shape=(None, 3), dtype="float64")
    w = g.var("w", np.ones((3, 2)))
    b = g.constant("b", np.zeros(2))
    y = g.nn.relu(x @ w + b, name="y")
    return g, x, w, b, y


def test_the_issue_example_runs_and_matches_numpy():
    g, *_ = demo()
    out = g.output({"x": np.ones((4, 3))}, ["y"])
    np.testing.assert_array_equal(out["y"], np.full((4, 2), 3.0))
    assert set(out) == {"y"}


def test_variables_have_name_shape_dtype_and_kind():
    g, x, w, b, y = demo()
    assert (x.name, x.shape, x.dtype, x.kind) == ("x", (None, 3), np.dtype("float64"), gv.PLACEHOLDER)
    assert (w.kind, w.shape) == (gv.VARIABLE, (3, 2))
    assert (b.kind, b.shape) == (gv.CONSTANT, (2,))
    assert (y.kind, y.shape, y.op) == (gv.ARRAY, (None, 2), "relu")
    assert isinstance(y.dtype, np.dtype)


def test_automatic_names_are_readable_and_unique():
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    first, second = g.math.exp(x), g.math.exp(x)
    assert (first.name, second.name) == ("exp", "exp_1")


def test_duplicate_names_raise():
    g = gv.Graph()
    g.placeholder("x", (2,))
    with pytest.raises(gv.NameConflictError, match="already has a variable named 'x'"):
        g.var("x", np.zeros(2))
    with pytest.raises(gv.NameConflictError, match="'x'"):
        g.math.exp(g["x"], name="x")


def test_name_scope_prefixes_names_and_nests():
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    with g.name_scope("layer1"):
        a = g.math.exp(x, name="act")
        with g.name_scope("inner"):
            c = g.var("w", np.ones(2))
    d = g.math.exp(x)
    assert (a.name, c.name, d.name) == ("layer1/act", "layer1/inner/w", "exp")
    with pytest.raises(gv.GraphviewError, match="name_scope"):
        with g.name_scope("a/b"):
            pass


def test_nodes_are_frozen_and_building_never_changes_existing_nodes():
    g, x, w, b, y = demo()
    before = [dataclasses.replace(node) for node in g.nodes()]
    g.math.tanh(y) * 2.0
    assert g.nodes()[:len(before)] == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.node("y").op = "sigmoid"


def test_networkx_view_is_read_only_and_follows_edges():
    g, *_ = demo()
    view = g.nx
    assert set(view.predecessors("y")) == {"add"}
    assert nx.is_directed_acyclic_graph(view)
    with pytest.raises(nx.NetworkXError):
        view.add_node("intruder")


def test_networkx_view_attributes_cannot_be_changed():
    g, *_ = demo()
    view = g.nx
    kind = view.nodes["x"]["kind"]
    with pytest.raises(TypeError):
        view.nodes["x"]["kind"] = "VARIABLE"
    with pytest.raises(TypeError):
        next(iter(view.edges(data=True)))[2]["position"] = 5
    with pytest.raises(TypeError):
        view.graph["name"] = "other"
    assert g.nx.nodes["x"]["kind"] == kind
    assert g.node("x").kind == kind


def test_set_loss_rejects_a_loss_given_twice():
    g = gv.Graph()
    s = g.math.sum(g.var("w", np.ones(3)))
    with pytest.raises(gv.GraphviewError, match="set_loss: 'sum' is given twice"):
        g.set_loss(s, s)
    with pytest.raises(gv.GraphviewError, match="given twice"):
        g.set_loss([s], "sum")
    assert g.losses == ()


def test_values_are_copied_in_and_out():
    array = np.ones((2, 2))
    g = gv.Graph()
    g.var("w", array)
    array[0, 0] = 5.0
    held = g.value("w")
    held[1, 1] = 7.0
    np.testing.assert_array_equal(g.value("w"), np.ones((2, 2)))


def test_set_value_checks_shape_and_dtype():
    g, x, w, *_ = demo()
    g.set_value("w", np.full((3, 2), 2.0))
    assert g.output({"x": np.ones((1, 3))}, ["y"])["y"].tolist() == [[6.0, 6.0]]
    with pytest.raises(gv.ShapeError, match=r"'w' has shape \(3, 2\).*\(2, 3\)"):
        g.set_value("w", np.ones((2, 3)))
    with pytest.raises(gv.DTypeError, match="'w' has dtype float64.*complex128"):
        g.set_value("w", np.ones((3, 2), np.complex128))
    with pytest.raises(gv.GraphviewError, match="only VARIABLEs can be set"):
        g.set_value("b", np.ones(2))


def test_summary_lists_every_variable_with_kind_op_shape_dtype_and_inputs():
    g, *_ = demo()
    lines = g.summary().splitlines()
    assert lines[1].split() == ["name", "kind", "op", "shape", "dtype", "inputs"]
    row = next(line for line in lines if line.startswith("y "))
    assert row.split() == ["y", "ARRAY", "relu", "(?,", "2)", "float64", "add"]
    assert len(lines) == 3 + len(g.nodes())


def test_scalars_and_arrays_are_accepted_as_constants():
    g = gv.Graph()
    x = g.placeholder("x", (3,))
    y = 2.0 * x + np.arange(3.0)
    assert g.node(y.node.inputs[1]).kind is gv.CONSTANT
    np.testing.assert_array_equal(y.eval({"x": np.ones(3)}), [2.0, 3.0, 4.0])


def test_operators_map_to_the_registered_ops():
    g = gv.Graph()
    x, y = g.placeholder("x", (2,)), g.placeholder("y", (2,))
    m = g.placeholder("m", (2, 2))
    built = {"add": x + y, "sub": x - y, "mul": x * y, "div": x / y, "pow": x ** y, "neg": -x, "matmul": m @ x,
             "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y, "eq": x == y, "ne": x != y}
    for op, variable in built.items():
        assert variable.op in (op, "squeeze"), op
    assert (x < y).dtype == np.bool_
    feeds = {"x": np.array([1.0, 4.0]), "y": np.array([2.0, 4.0]), "m": np.eye(2)}
    out = g.output(feeds, list(built.values()))
    assert out[built["lt"].name].tolist() == [True, False]
    assert out[built["eq"].name].tolist() == [False, True]
    np.testing.assert_array_equal(out[built["matmul"].name], [1.0, 4.0])


def test_truth_value_of_a_variable_is_an_error():
    g = gv.Graph()
    x = g.placeholder("x", (2,))
    with pytest.raises(gv.GraphviewError, match="truth value of variable 'gt' is not known"):
        bool(x > 0)


def test_inputs_from_two_graphs_are_rejected():
    a, b = gv.Graph("a"), gv.Graph("b")
    x, y = a.placeholder("x", (2,)), b.placeholder("y", (2,))
    with pytest.raises(gv.GraphviewError, match="two graphs"):
        x + y


@pytest.mark.parametrize("shape, message", [((-1, 2), "negative size -1"), ((2.5,), "not an int"),
                                            ("ab", "not an int")])
def test_bad_placeholder_shapes_raise(shape, message):
    with pytest.raises(gv.ShapeError, match=message):
        gv.Graph().placeholder("p", shape)


def test_unsupported_dtypes_raise():
    g = gv.Graph()
    with pytest.raises(gv.DTypeError, match="complex128 is not supported"):
        g.placeholder("p", (2,), "complex128")
    with pytest.raises(gv.DTypeError, match="not a dtype"):
        g.placeholder("q", (2,), "float99")
    with pytest.raises(gv.DTypeError, match="not supported"):
        g.constant("s", np.array(["a"]))


def test_every_error_is_a_graphview_error():
    for error in (gv.ShapeError, gv.DTypeError, gv.IndexDescriptorError, gv.InplaceModificationError,
                  gv.GraphFileError, gv.NameConflictError, gv.UnknownNameError, gv.PlaceholderError):
        assert issubclass(error, gv.GraphviewError)
    assert issubclass(gv.ShapeError, ValueError) and issubclass(gv.DTypeError, TypeError)
