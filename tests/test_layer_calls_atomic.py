"""A layer call is atomic (ADR 0023, amendment of 5th December 2026): when it fails, the graph is exactly as
before it (nodes, variables, names, counters, layer records, dims) and the layer can be called again."""
import copy

import numpy as np
import pytest

import graphview as gv
from graphview import layers as L


def placeholders(g):
    """The inputs every case reads, made in the same order in every graph (so auto-names agree)."""
    return {
        "vector": g.placeholder("vector", (None, 3)),
        "flags": g.placeholder("flags", (None, 3), dtype="bool"),
        "ints": g.placeholder("ints", (None, 3), dtype="int64"),
        "floats_as_ids": g.placeholder("floats_as_ids", (None, 4)),
        "ids": g.placeholder("ids", (None, 4), dtype="int64"),
        "sequence": g.placeholder("sequence", (None, 5, 4)),
        "signal": g.placeholder("signal", (None, 3, 8)),
        "image": g.placeholder("image", (None, 3, 8, 8)),
        "flat": g.placeholder("flat", (None,)),
        "five": g.placeholder("five", (None, 5)),
        "six": g.placeholder("six", (None, 6)),
    }


ACTIVATION_CLASSES = [L.ReLU, L.Sigmoid, L.Tanh, L.GELU, L.ELU, L.SELU, L.Softplus, L.SiLU, L.LogSigmoid,
                      L.HardTanh, L.LeakyReLU, L.Softmax, L.LogSoftmax]

# (layer class, a new layer, the input its call fails on, an input it takes, the error).
CASES = [
    (L.Dense, lambda: L.Dense(2), "flat", "vector", gv.GraphviewError),
    (L.Conv1D, lambda: L.Conv1D(2, 3), "vector", "signal", gv.ShapeError),
    (L.Conv2D, lambda: L.Conv2D(4, 3), "signal", "image", gv.ShapeError),
    (L.MaxPool1D, lambda: L.MaxPool1D(2), "vector", "signal", gv.ShapeError),
    (L.MaxPool2D, lambda: L.MaxPool2D(2), "signal", "image", gv.ShapeError),
    (L.AvgPool1D, lambda: L.AvgPool1D(2), "vector", "signal", gv.ShapeError),
    (L.AvgPool2D, lambda: L.AvgPool2D(2), "signal", "image", gv.ShapeError),
    (L.GlobalAvgPool, lambda: L.GlobalAvgPool(), "vector", "image", gv.GraphviewError),
    (L.BatchNorm, lambda: L.BatchNorm(), "flags", "vector", gv.DTypeError),
    (L.LayerNorm, lambda: L.LayerNorm(), "flat", "vector", gv.GraphviewError),
    (L.Dropout, lambda: L.Dropout(0.5), "flags", "vector", gv.DTypeError),
    (L.Embedding, lambda: L.Embedding(5, 2), "floats_as_ids", "ids", gv.DTypeError),
    (L.LSTM, lambda: L.LSTM(3), "vector", "sequence", gv.GraphviewError),
    (L.GRU, lambda: L.GRU(3), "vector", "sequence", gv.GraphviewError),
    (L.MultiHeadAttention, lambda: L.MultiHeadAttention(2), "five", "sequence", gv.OpArgumentError),
    (L.Flatten, lambda: L.Flatten(), "flat", "signal", gv.ShapeError),
    (L.Reshape, lambda: L.Reshape((3, 2)), "five", "six", gv.ShapeError),
    (L.Activation, lambda: L.Activation("relu"), "flags", "vector", gv.DTypeError),
    # A container whose second layer fails: the first one's variables go too, and it is unbound.
    (L.Sequential, lambda: gv.Sequential([L.Dense(4), L.Conv1D(2, 1)]), "vector", "signal", gv.ShapeError),
] + [(cls, cls, "flags", "vector", gv.DTypeError) for cls in ACTIVATION_CLASSES]


def test_every_layer_class_has_a_case():
    exported = {getattr(L, name) for name in L.__all__ if isinstance(getattr(L, name), type)} - {L.Layer}
    assert exported == {case[0] for case in CASES}


def state(g):
    nodes = [(n.name, n.kind, n.op, n.shape, n.dtype) for n in g.nodes()]
    values = {name: g.value(name) for name, *_ in nodes if name in g.store}
    return nodes, values, sorted(g.non_trainable), dict(g.state_updates), copy.deepcopy(g.layers)


@pytest.mark.parametrize("cls, make, bad, good, error", CASES, ids=[case[0].__name__ for case in CASES])
def test_a_failed_layer_call_leaves_the_graph_as_before(cls, make, bad, good, error):
    g = gv.Graph("atomic")
    inputs = placeholders(g)
    before = state(g)
    layer = make()
    with pytest.raises(error):
        layer(inputs[bad])
    after = state(g)
    assert after[0] == before[0]                                   # no node, and no variable, was added
    assert after[2:] == before[2:]                                 # nor trainability, state update, layer record
    assert layer.graph is None and layer.variables == [] and all(child.graph is None for child in layer.children())
    # The same layer now builds as in a graph that never saw the failure: same names (so no counter moved),
    # same values (seeded by name).
    output = layer(inputs[good])
    reference = gv.Graph("reference")
    expected = make()(placeholders(reference)[good])
    assert [n.name for n in g.nodes()] == [n.name for n in reference.nodes()]
    assert output.name == expected.name and output.shape == expected.shape
    for name in g.store:
        np.testing.assert_array_equal(g.value(name), reference.value(name))
    assert g.layers == reference.layers


def test_the_issue_case_conv2d_on_a_rank_3_input_leaves_no_orphan_variables():
    g = gv.Graph("orphans")
    x = g.placeholder("x", (None, 3, 8))
    with pytest.raises(gv.ShapeError):
        L.Conv2D(4, 3)(x)
    assert [n.name for n in g.nodes()] == ["x"] and g.layers == {}
    assert L.Conv2D(4, 3)(g.placeholder("image", (None, 3, 8, 8))).name.startswith("conv2d/")
    assert "conv2d/weight" in g and "conv2d_1/weight" not in g


def test_a_failed_call_keeps_what_earlier_calls_made():
    g = gv.Graph("shared")
    inputs = placeholders(g)
    dense = L.Dense(2)
    first = dense(inputs["vector"])
    before = state(g)
    with pytest.raises(gv.ShapeError):
        dense(inputs["six"])                   # a second call fails: the first call's variables stay
    assert state(g)[0] == before[0] and state(g)[4] == before[4]
    assert dense.graph is g and [v.name for v in dense.variables] == ["dense/weight", "dense/bias"]
    second = dense(inputs["vector"])
    assert second.name != first.name and g.layers["dense"]["calls"][1]["output"] == second.name


def test_an_atomic_block_undoes_dims_and_actions():
    g = gv.Graph("block")
    t = gv.Dim("t")
    x = g.placeholder("x", (None, None, 2), dims=(gv.batch_dim, t, None), lengths={t: "x_lengths"})
    nodes, undone = [n.name for n in g.nodes()], []
    with pytest.raises(gv.ShapeError):
        with g.atomic():
            g.on_rollback(lambda: undone.append("layer"))
            y = g.math.sum(x, axis=t)          # a masked reduction: its mask is cached in the dims table
            assert gv.dims_of(y)[0] is gv.batch_dim
            names = [n.name for n in g.nodes()]
            g.math.add(y, g.placeholder("other", (7, 7)))
    assert undone == ["layer"] and [n.name for n in g.nodes()] == nodes
    again = g.math.sum(x, axis=t)              # the same nodes and names again: the mask was not kept
    assert [n.name for n in g.nodes()] == names and gv.dims_of(again)[0] is gv.batch_dim


@pytest.mark.parametrize("make, shape, axis", [
    (lambda: L.Conv1D(2, 3, layout="bwc"), (None, 3), 2), (lambda: L.Conv2D(2, 3), (None,), 1),
    (lambda: L.LSTM(2), (), -1), (lambda: L.MultiHeadAttention(1), (), -1)])
def test_an_input_without_the_axis_a_layer_reads_its_size_from_is_a_shape_error(make, shape, axis):
    g = gv.Graph("short")
    x = g.placeholder("x", shape)
    with pytest.raises(gv.ShapeError, match=rf"'x' .* has no axis {axis} to read the \w+ size from"):
        make()(x)
    assert [n.name for n in g.nodes()] == ["x"] and g.layers == {}
