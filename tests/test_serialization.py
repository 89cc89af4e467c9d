"""Graph files: round-trips over the op table, clear errors for bad files, and fuzzing."""
import io
import json
import os
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graphview as gv
from graphview import registry
from graphview.serialization import read
from optable import build

OPS = [d.name for d in registry.definitions() if d.samples]


def _run(graph, feeds):
    outputs = [n.name for n in graph.nodes() if n.kind is gv.ARRAY]
    return graph.output(feeds, outputs) if outputs else {}


def _assert_same_graph(original, loaded):
    assert loaded.name == original.name
    assert loaded.nodes() == original.nodes()
    assert [v.name for v in loaded.losses] == [v.name for v in original.losses]
    for node in original.nodes():
        if node.kind in (gv.VARIABLE, gv.CONSTANT):
            expected, actual = original.value(node.name), loaded.value(node.name)
            assert actual.dtype == expected.dtype
            np.testing.assert_array_equal(actual, expected)


def _assert_same_outputs(expected, actual):
    assert expected.keys() == actual.keys()
    for name in expected:
        assert actual[name].dtype == expected[name].dtype and actual[name].shape == expected[name].shape, name
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)


@pytest.mark.parametrize("op", OPS)
def test_round_trip_of_every_op_sample(op, tmp_path):
    for index, sample in enumerate(registry.get(op).samples()):
        graph, output, feeds = build(op, sample)
        before, after = tmp_path / f"{index}-before.gvz", tmp_path / f"{index}-after.gvz"
        graph.save(before, placeholders=feeds)
        expected = _run(graph, feeds)
        graph.save(after, placeholders=feeds)
        for path in (before, after):
            loaded, stored = read(path)
            _assert_same_graph(graph, loaded)
            assert stored.keys() == feeds.keys()
            for name, value in feeds.items():
                np.testing.assert_array_equal(stored[name], value)
            _assert_same_outputs(expected, _run(loaded, feeds))
            _assert_same_outputs(expected, _run(loaded, stored))
        assert before.read_bytes() == after.read_bytes(), "running a graph must not change its file"


def _model():
    g = gv.Graph("model")
    with g.name_scope("layer"):
        x = g.placeholder("x", (None, 3), "float32")
        w = g.var("w", np.linspace(-1, 1, 6).reshape(3, 2))
        b = g.constant("b", np.array([np.inf, -0.5]))
    noise = g.random.normal((2,), std=2.0, seed=7)
    hidden = g.nn.tanh(x @ w) + g.math.minimum(b, 1.0) + noise * 0.0
    loss = g.math.sum(g.math.square(hidden), name="loss")
    g.set_loss(loss)
    return g, {"layer/x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def test_round_trip_keeps_values_losses_and_scopes(tmp_path):
    # Non-finite attributes (no built-in op takes one now): tests/test_attributes.py, a custom op's.
    graph, feeds = _model()
    graph.save(tmp_path / "m.gvz", placeholders=feeds)
    loaded = gv.load(tmp_path / "m.gvz")
    _assert_same_graph(graph, loaded)
    _assert_same_outputs(_run(graph, feeds), _run(loaded, feeds))
    grown = loaded.math.exp(loaded["loss"])
    assert grown.name == "exp" and "exp" not in graph


def test_the_same_graph_gives_the_same_bytes(tmp_path):
    graph, feeds = _model()
    graph.save(tmp_path / "a.gvz", placeholders=feeds)
    graph.save(tmp_path / "b.gvz", placeholders=feeds)
    assert (tmp_path / "a.gvz").read_bytes() == (tmp_path / "b.gvz").read_bytes()


def test_save_rejects_placeholder_values_that_do_not_fit(tmp_path):
    graph, _ = _model()
    with pytest.raises(gv.GraphviewError, match="'w' is not a placeholder"):
        graph.save(tmp_path / "m.gvz", placeholders={"w": np.zeros((3, 2))})
    with pytest.raises(gv.ShapeError, match="layer/x"):
        graph.save(tmp_path / "m.gvz", placeholders={"layer/x": np.zeros((2, 4), np.float32)})
    assert not os.listdir(tmp_path), "a failed save leaves no file behind"


# --- malformed files -----------------------------------------------------------

def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _edited(tmp_path, edit):
    """A copy of the model's file with graph.json passed through ``edit(document, members)``."""
    graph, feeds = _model()
    graph.save(tmp_path / "good.gvz", placeholders=feeds)
    members = _members(tmp_path / "good.gvz")
    document = json.loads(members["graph.json"])
    edit(document, members)
    members["graph.json"] = json.dumps(document)
    return _write(tmp_path / "bad.gvz", members)


def _node(document, name):
    return next(n for n in document["nodes"] if n["name"] == name)


BAD_DOCUMENTS = {
    "wrong version": (lambda d, m: d.update(version=2), "format version 2 is not supported.*newer graphview"),
    "wrong format": (lambda d, m: d.update(format="other"), "format 'other'"),
    "unknown op": (lambda d, m: _node(d, "tanh").update(op="frobnicate"), "unknown op 'frobnicate'"),
    "wrong shape": (lambda d, m: _node(d, "matmul").update(shape=[None, 5]), r"recorded as \(\?, 5\)"),
    "wrong dtype": (lambda d, m: _node(d, "loss").update(dtype="float32"), "recorded as .* float32"),
    "missing cast": (lambda d, m: _node(d, "matmul").update(inputs=["layer/x", "layer/w"]),
                     "cast node building inserts is missing"),
    "input later": (lambda d, m: _node(d, "tanh").update(inputs=["loss"]), "must name nodes recorded before"),
    "bad attribute": (lambda d, m: _node(d, "loss").update(attrs=[["axis", {"x": 1}]]), "attribute value"),
    "rejected attribute": (lambda d, m: _node(d, "loss").update(attrs=[["axis", 9], ["keepdims", False]]),
                           r"op sum attribute 'axis': axis 9 is out of range for input 0 \('square'\) of rank 2"),
    "duplicate name": (lambda d, m: _node(d, "tanh").update(name="layer/w"), "appears twice"),
    "unknown kind": (lambda d, m: _node(d, "layer/w").update(kind="WEIGHT"), "kind 'WEIGHT'"),
    "unknown dtype": (lambda d, m: _node(d, "layer/w").update(dtype="complex128"), "dtype 'complex128'"),
    "value shape": (lambda d, m: _node(d, "layer/w").update(shape=[2, 3]), r"stored value is \(3, 2\)"),
    "missing value": (lambda d, m: _node(d, "layer/w").pop("value"), "needs a stored value"),
    "missing member": (lambda d, m: m.pop("arrays/0.npy"), "not an .npy member"),
    "extra member": (lambda d, m: m.update({"arrays/9.npy": m["arrays/0.npy"]}), "not referenced"),
    "unknown loss": (lambda d, m: d.update(losses=["nope"]), "loss 'nope'"),
    "integer loss": (lambda d, m: d.update(losses=["layer/x"]) or _node(d, "layer/x").update(dtype="int64"),
                     "a loss must be floating point"),
    "placeholder for variable": (lambda d, m: d["placeholders"][0].update(name="layer/w"), "not a placeholder"),
    "nodes not a list": (lambda d, m: d.update(nodes={}), "'nodes' must be a list"),
    "extra field": (lambda d, m: _node(d, "tanh").update(colour="red"), "has fields"),
    "negative size": (lambda d, m: _node(d, "layer/w").update(shape=[-3, 2]), "not a size"),
}


@pytest.mark.parametrize("case", sorted(BAD_DOCUMENTS))
def test_inconsistent_files_raise_a_clear_graph_file_error(case, tmp_path):
    edit, message = BAD_DOCUMENTS[case]
    path = _edited(tmp_path, edit)
    with pytest.raises(gv.GraphFileError, match=message):
        gv.load(path)


def test_unreadable_paths_raise_graph_file_error(tmp_path):
    with pytest.raises(gv.GraphFileError, match="no such graph file"):
        gv.load(tmp_path / "missing.gvz")
    with pytest.raises(gv.GraphFileError, match="directory"):
        gv.load(tmp_path)
    (tmp_path / "text.gvz").write_text("hello")
    with pytest.raises(gv.GraphFileError, match="not a zip archive"):
        gv.load(tmp_path / "text.gvz")
    _write(tmp_path / "other.zip", {"data.txt": b"x"})
    with pytest.raises(gv.GraphFileError, match="no graph.json"):
        gv.load(tmp_path / "other.zip")
    _write(tmp_path / "notjson.gvz", {"graph.json": b"{nodes: ["})
    with pytest.raises(gv.GraphFileError, match="not valid JSON"):
        gv.load(tmp_path / "notjson.gvz")
    assert issubclass(gv.GraphFileError, gv.GraphviewError)


def test_truncated_file_raises_graph_file_error(tmp_path):
    graph, feeds = _model()
    graph.save(tmp_path / "m.gvz", placeholders=feeds)
    data = (tmp_path / "m.gvz").read_bytes()
    (tmp_path / "cut.gvz").write_bytes(data[: len(data) // 2])
    with pytest.raises(gv.GraphFileError, match="cut.gvz"):
        gv.load(tmp_path / "cut.gvz")


class _Marker:
    """Unpickling this would create a file: the proof that loading ran code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_arrays_are_never_unpickled(tmp_path):
    marker = tmp_path / "pwned"
    payload = io.BytesIO()
    np.save(payload, np.array([_Marker(str(marker))], dtype=object), allow_pickle=True)

    def swap(document, members):
        members["arrays/0.npy"] = payload.getvalue()
    path = _edited(tmp_path, swap)
    with pytest.raises(gv.GraphFileError, match="dtype"):
        gv.load(path)
    assert not marker.exists()


def test_lying_npy_header_raises_graph_file_error(tmp_path):
    def grow(document, members):
        data = members["arrays/0.npy"]
        members["arrays/0.npy"] = data.replace(b"(3, 2)", b"(3, 9)")
    with pytest.raises(gv.GraphFileError, match="header says"):
        gv.load(_edited(tmp_path, grow))


# --- fuzzing ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def good_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "good.gvz"
    graph, feeds = _model()
    graph.save(path, placeholders=feeds)
    return path.read_bytes()


def _load_bytes(data, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(data)
    try:
        result = gv.load(path)
    except gv.GraphFileError as error:
        assert str(path) in str(error)
        return None
    assert isinstance(result, gv.Graph)
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_byte_flips_and_truncations_give_a_graph_or_graph_file_error(good_file, tmp_path, data):
    damaged = bytearray(good_file)
    for _ in range(data.draw(st.integers(1, 8), label="flips")):
        position = data.draw(st.integers(0, len(damaged) - 1), label="position")
        damaged[position] ^= data.draw(st.integers(1, 255), label="mask")
    cut = data.draw(st.integers(0, len(damaged)), label="cut")
    if data.draw(st.booleans(), label="truncate"):
        damaged = damaged[:cut]
    _load_bytes(bytes(damaged), tmp_path, "flipped.gvz")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["float64", "int32", "ARRAY", "VARIABLE", "sum", "tanh", "layer/w", "loss", "arrays/0.npy"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_graph_json_gives_a_graph_or_graph_file_error(good_file, tmp_path, data):
    members = _members(io.BytesIO(good_file))
    document = json.loads(members["graph.json"])
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        target = document
        if data.draw(st.booleans(), label="in a node"):
            nodes = document.get("nodes")
            target = data.draw(st.sampled_from(nodes), label="node") if isinstance(nodes, list) and nodes else None
        if not isinstance(target, dict) or not target:
            break
        key = data.draw(st.sampled_from(sorted(target)), label="field")
        target[key] = data.draw(JSON_VALUES, label="value")
    members["graph.json"] = json.dumps(document)
    buffer = io.BytesIO()
    _write(buffer, members)
    _load_bytes(buffer.getvalue(), tmp_path, "mutated.gvz")


# --- defects found in review -------------------------------------------------------

def test_an_npy_member_larger_than_its_header_says_is_refused_before_it_is_read(tmp_path):
    import tracemalloc

    def inflate(document, members):
        members["arrays/0.npy"] += bytes(64 * 2**20)     # 64 MiB of zeros: a small deflated member

    graph, feeds = _model()
    graph.save(tmp_path / "good.gvz", placeholders=feeds)
    members = _members(tmp_path / "good.gvz")
    inflate(None, members)
    path = tmp_path / "bomb.gvz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    del members
    assert os.path.getsize(path) < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(gv.GraphFileError, match=r"arrays/0.npy holds 67108912 data bytes, but its header says "
                                                    r"\(3, 2\) float64 \(48 bytes\)"):
            gv.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"loading read the inflated member ({peak} bytes at the peak)"


def test_arrays_inflating_past_what_deflate_could_give_are_refused(tmp_path, monkeypatch):
    from graphview import serialization
    g = gv.Graph("zeros")
    g.var("big", np.zeros(2**18))                          # 2 MiB that deflate to a few KiB
    g.save(tmp_path / "zeros.gvz")
    assert os.path.getsize(tmp_path / "zeros.gvz") < 2**16
    assert gv.load(tmp_path / "zeros.gvz").node("big").shape == (2**18,)
    monkeypatch.setattr(serialization, "MAX_RATIO", 10)   # as if deflate could not do better than 10:1
    with pytest.raises(gv.GraphFileError, match="the arrays inflate to more than .* bytes, more than the file's "
                                                ".* bytes could hold"):
        gv.load(tmp_path / "zeros.gvz")


def _view_model():
    g = gv.Graph("views")
    x = g.var("x", np.arange(12.0).reshape(3, 4))
    y = g.var("y", np.zeros((3, 4)))
    g.add_(y[1], np.ones(4))
    g.set_loss(g.math.sum(x[::2] * 1.0, name="loss"))
    return g


@pytest.mark.parametrize("op, bad", [("create_view", 2.5), ("create_view", 2.0), ("create_view", True),
                                     ("add_", 1.5)])
def test_view_descriptors_must_be_integers(tmp_path, op, bad):
    graph = _view_model()
    graph.save(tmp_path / "good.gvz")
    members = _members(tmp_path / "good.gvz")
    document = json.loads(members["graph.json"])
    node = next(n for n in document["nodes"] if n["op"] == op)
    attribute = node["attrs"][0]
    entry = attribute[1][0] if op == "create_view" else attribute[1][0][0]
    assert attribute[0] == ("descriptors" if op == "create_view" else "chain") and isinstance(entry[1], int)
    entry[1] = bad
    members["graph.json"] = json.dumps(document)
    _write(tmp_path / "bad.gvz", members)
    with pytest.raises(gv.GraphFileError, match=f"node {document['nodes'].index(node)} \\({node['name']!r}\\): "
                                                f"op {op} attribute '{attribute[0]}': descriptor .* holds "
                                                f"{bad!r}, which is not an integer"):
        gv.load(tmp_path / "bad.gvz")


# --- attributes and arity are checked on load as when built (issue 13 item 10, ADR 0016) ----------

def _seeded_model():
    g = gv.Graph("seeded")
    x = g.placeholder("x", (2, 3))
    noise = g.random.normal((2, 3), mean=0.5, std=2.0, seed=3, name="noise")
    dropped = g.nn.dropout(x + noise, 0.5, seed=11, name="dropped")
    g.set_loss(g.math.sum(g.math.add(dropped, x, name="sum_in"), name="loss"))
    return g


def _edit_attribute(node, key, value):
    node["attrs"] = [[k, value if k == key else v] for k, v in node["attrs"]]


@pytest.mark.parametrize("node, key, value, message", [
    ("dropped", "seed", "x", "attribute 'seed': 'x' is not a seed"),
    ("dropped", "seed", -1, "attribute 'seed': -1 is not a seed: a seed is an int in \\[0, 2\\*\\*64\\)"),
    ("dropped", "seed", 2**64, "attribute 'seed': 18446744073709551616 is not a seed"),
    ("dropped", "rate", 1.5, "attribute 'rate': 1.5 is not in \\[0.0, 1.0\\)"),
    ("noise", "mean", "x", "attribute 'mean': 'x' is not a number"),
    ("noise", "std", [1.0], "attribute 'std': \\(1.0,\\) is not a number"),
    ("noise", "seed", 1.5, "attribute 'seed': 1.5 is not a seed"),
    ("noise", "dtype", "int64", "attribute 'dtype': 'int64' is not one of the dtypes float32, float64"),
    ("loss", "axis", "0", "attribute 'axis': '0' is not an int or a tuple of ints or None"),
])
def test_attribute_values_building_refuses_are_refused_when_loaded(tmp_path, node, key, value, message):
    _seeded_model().save(tmp_path / "good.gvz")
    members = _members(tmp_path / "good.gvz")
    document = json.loads(members["graph.json"])
    _edit_attribute(_node(document, node), key, value)
    members["graph.json"] = json.dumps(document)
    _write(tmp_path / "bad.gvz", members)
    position = [n["name"] for n in document["nodes"]].index(node)
    with pytest.raises(gv.GraphFileError, match=f"node {position} \\({node!r}\\): op \\w+ {message}"):
        gv.load(tmp_path / "bad.gvz")


def test_an_op_changed_to_one_of_another_arity_is_refused_when_loaded(tmp_path):
    _seeded_model().save(tmp_path / "good.gvz")
    members = _members(tmp_path / "good.gvz")
    document = json.loads(members["graph.json"])
    _node(document, "sum_in").update(op="reshape")
    members["graph.json"] = json.dumps(document)
    _write(tmp_path / "bad.gvz", members)
    with pytest.raises(gv.GraphFileError, match=r"\('sum_in'\): op reshape rejects the recorded inputs and "
                                                r"attributes: reshape needs the attribute 'shape'"):
        gv.load(tmp_path / "bad.gvz")
    _node(document, "sum_in").update(op="exp")
    members["graph.json"] = json.dumps(document)
    _write(tmp_path / "bad.gvz", members)
    with pytest.raises(gv.GraphFileError, match=r"op exp rejects .*: exp takes 1 input \(x\), got 2"):
        gv.load(tmp_path / "bad.gvz")
