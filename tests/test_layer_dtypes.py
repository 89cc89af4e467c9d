"""A model never changes float dtype unasked (ADR 0023, amendment of 5th December 2026): a layer follows
its input's float dtype; one whose input carries none (ids) takes the graph's ``float_dtype``; ``dtype=``
on a layer overrides both."""
import json
import zipfile

import numpy as np
import pytest

import graphview as gv
from graphview import layers as L


def float_dtypes(g):
    return {node.name: node.dtype.name for node in g.nodes() if node.dtype.kind == "f"}


def test_an_embedding_added_to_a_float32_positional_table_stays_float32():
    g = gv.Graph("tokens", float_dtype="float32")
    ids = g.placeholder("ids", (None, 6), dtype="int64")
    positions = g.var("positions", np.zeros((6, 8), np.float32))
    embedded = L.Embedding(50, 8)(ids)
    assert embedded.dtype == np.float32 and g.value("embedding/weight").dtype == np.float32
    assert g.math.add(embedded, positions).dtype == np.float32


def test_a_float32_model_has_only_float32_nodes_end_to_end():
    g = gv.Graph("small", float_dtype="float32")
    ids = g.placeholder("ids", (None, 6), dtype="int64")
    labels = g.placeholder("labels", (None,), dtype="int64")
    positions = g.var("positions", np.zeros((6, 8), np.float32))
    x = g.math.add(L.Embedding(50, 8)(ids), positions)
    x = L.LayerNorm()(L.Dense(8, activation="gelu")(x))
    x = L.MultiHeadAttention(2)(x)
    x = L.GRU(4, return_sequences=True)(x)
    h = L.LSTM(4)(x)
    h = L.Dropout(0.1)(L.BatchNorm()(L.Dense(6)(h)))
    loss = g.loss.softmax_cross_entropy(L.Dense(3)(h), labels, name="loss")
    g.set_loss(loss)
    # Every node but batch norm's batch moments, which ADR 0019 accumulates in float64 and whose state
    # updates write back in the running statistics' float32.
    found = float_dtypes(g)
    assert {name for name, dtype in found.items() if dtype != "float32"} == {"batch_norm/batch_norm_moments"}
    assert {found[name] for name in g.state_updates} | {found[node] for node in g.state_updates.values()} == {"float32"}
    feeds = {"ids": np.arange(12).reshape(2, 6) % 50, "labels": np.array([0, 2])}
    gradients = g.calculate_gradients(feeds, [v for v in g.variables() if g.is_trainable(v.name)])
    assert {value.dtype for value in gradients.values()} == {np.dtype(np.float32)}


def test_the_graph_float_dtype_is_float64_unless_given_and_is_what_placeholders_default_to():
    g = gv.Graph("plain")
    assert g.float_dtype == np.float64 and g.placeholder("x", (None, 3)).dtype == np.float64
    assert L.Embedding(5, 2)(g.placeholder("ids", (None,), dtype="int64")).dtype == np.float64
    narrow = gv.Graph("narrow", float_dtype="float32")
    assert narrow.placeholder("x", (None, 3)).dtype == np.float32
    assert narrow.placeholder("y", (None, 3), dtype="float64").dtype == np.float64
    with pytest.raises(gv.DTypeError, match="float_dtype must be float32 or float64, not int64"):
        gv.Graph("ints", float_dtype="int64")


def test_an_explicit_layer_dtype_overrides_the_graph_and_the_input():
    g = gv.Graph("override", float_dtype="float32")
    ids = g.placeholder("ids", (None,), dtype="int64")
    assert L.Embedding(5, 2, dtype="float64")(ids).dtype == np.float64
    x = g.placeholder("x", (None, 3))
    dense = L.Dense(2, dtype="float64")
    dense(x)
    assert g.value(dense.weight.name).dtype == np.float64
    assert L.Dense(2)(g.placeholder("wide", (None, 3), dtype="float64")).dtype == np.float64   # input's dtype
    with pytest.raises(gv.OpArgumentError, match="dtype must be float32 or float64, not int32"):
        L.Embedding(5, 2, dtype="int32")(ids)


def test_the_float_dtype_survives_clone_and_graph_files(tmp_path):
    g = gv.Graph("kept", float_dtype="float32")
    g.placeholder("x", (None, 3))
    assert g.clone("copy").float_dtype == np.float32
    g.save(tmp_path / "kept.gvz")
    assert gv.load(tmp_path / "kept.gvz").float_dtype == np.float32
    gv.Graph("default").save(tmp_path / "default.gvz")
    assert gv.load(tmp_path / "default.gvz").float_dtype == np.float64


def test_a_graph_file_with_a_wrong_float_dtype_is_a_graph_file_error(tmp_path):
    gv.Graph("kept", float_dtype="float32").save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["graph.json"])
    assert document["float_dtype"] == "float32"
    members["graph.json"] = json.dumps({**document, "float_dtype": "int8"})
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(gv.GraphFileError, match="'float_dtype' must be \"float32\" or \"float64\", got 'int8'"):
        gv.load(tmp_path / "bad.gvz")
