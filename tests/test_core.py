"""The graph core (graphview/core.py, ADR 0017): new_graph, clone, ancestors and the executor cache."""
import collections
import gc
import weakref

import numpy as np

import graphview as gv
from graphview import core
from graphview.execution import executor_of


def small_graph():
    g = gv.Graph("small")
    x = g.placeholder("x", (2,))
    w = g.var("w", np.array([1.0, 2.0]))
    y = g.math.mul(x, w, name="y")
    unused = g.constant("unused", np.zeros(3))
    g.set_loss(g.math.sum(y, name="loss"))
    return g, x, w, y, unused


def test_new_graph_makes_the_registered_facade():
    graph = core.new_graph("made")
    assert type(graph) is gv.Graph and graph.name == "made"


def test_ancestors_are_the_nodes_a_name_needs_itself_included():
    g, x, w, y, unused = small_graph()
    assert g.ancestors(["loss"]) == {"x", "w", "y", "loss"}
    assert g.ancestors([unused.name]) == {"unused"}


def test_a_clone_copies_values_unless_it_is_given_a_store():
    g, *_ = small_graph()
    copy = g.clone("copy")
    assert [n.name for n in copy.nodes()] == [n.name for n in g.nodes()] and copy.loss_names == g.loss_names
    copy.stored("w")[0] = 7.0
    assert g.value("w")[0] == 1.0
    layered = g.clone("layered", keep=g.ancestors(["y"]), store=collections.ChainMap({}, g.store),
                      keep_losses=False)
    assert "unused" not in layered and "loss" not in layered and layered.loss_names == ()
    g.set_value("w", np.array([3.0, 4.0]))
    np.testing.assert_array_equal(layered.output({"x": np.ones(2)}, "y")["y"], [3.0, 4.0])


def test_a_rewrite_may_add_nodes_before_the_node_it_replaces():
    g, *_ = small_graph()

    def doubled_input(node, clone):
        if node.name != "y":
            return node
        clone.add_node("twice", gv.ARRAY, "add", ("x", "x"), (), node.shape, node.dtype)
        return type(node)(node.name, node.kind, node.op, ("twice", "w"), node.attrs, node.shape, node.dtype, 0)

    clone = g.clone("rewritten", rewrite=doubled_input, store=g.store)
    assert clone.node("y").inputs == ("twice", "w") and clone.node("twice").index < clone.node("y").index
    np.testing.assert_array_equal(clone.output({"x": np.ones(2)}, "y")["y"], [2.0, 4.0])


def test_the_executor_cache_keeps_no_graph_alive():
    g = small_graph()[0]
    g.output({"x": np.ones(2)}, "y")
    executor = executor_of(g)
    assert executor_of(g) is executor and executor.graph is g
    gone = weakref.ref(g)
    del g
    gc.collect()
    assert gone() is None
