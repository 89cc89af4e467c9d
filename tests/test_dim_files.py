"""Dims in graph files: round trips keep the dims table, loaded dims are new objects, bad records fail clearly."""
import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import graphview as gv

DATA = np.random.default_rng(3).random((2, 5, 3))
LENGTHS = np.array([5, 2])


def _model():
    g = gv.Graph("sequences")
    time, feature = gv.Dim("time"), gv.Dim("feature", 3)
    seq = g.placeholder("seq", dims=(gv.batch_dim, time, feature), lengths={time: "seq_len"})
    merged = gv.rearrange(seq, "b t f -> b (t f)")
    return g, seq, merged


def _saved(tmp_path, graph):
    path = tmp_path / "dims.gvz"
    graph.save(path)
    return path


def test_a_loaded_graph_keeps_dims_lengths_and_derived_dims(tmp_path):
    g, seq, merged = _model()
    loaded = gv.load(_saved(tmp_path, g))
    batch, time, feature = gv.dims_of(loaded["seq"])
    assert batch is gv.batch_dim and time.name == "time" and time.size is None and feature.size == 3
    assert gv.dims_of(loaded[merged.name]) == (gv.batch_dim, time * feature)
    assert gv.lengths_of(loaded, time).name == "seq_len"
    assert gv.dims_of(loaded["seq_len"]) == (gv.batch_dim,)


def test_ops_built_after_loading_are_masked_by_the_saved_lengths(tmp_path):
    g, _, _ = _model()
    loaded = gv.load(_saved(tmp_path, g))
    time = gv.dims_of(loaded["seq"])[1]
    pooled = loaded.math.mean(loaded["seq"], axis=time)
    assert pooled.op == "masked_mean"
    result = loaded.output({"seq": DATA, "seq_len": LENGTHS}, [pooled])[pooled.name]
    np.testing.assert_allclose(result, np.stack([DATA[0].mean(axis=0), DATA[1, :2].mean(axis=0)]))
    split = gv.rearrange(loaded[gv.rearrange(loaded["seq"], "b t f -> b (t f)").name], "b (t f) -> b t f", f=3)
    assert gv.dims_of(split) == gv.dims_of(loaded["seq"])


def test_loaded_dims_are_new_objects_never_matched_by_name(tmp_path):
    g, seq, _ = _model()
    path = _saved(tmp_path, g)
    first, second = gv.load(path), gv.load(path)
    original, once, twice = gv.dims_of(seq)[1], gv.dims_of(first["seq"])[1], gv.dims_of(second["seq"])[1]
    assert once.name == original.name == twice.name
    assert once != original and once != twice


def test_declared_sameness_survives_and_never_touches_the_global_batch_dim(tmp_path):
    g = gv.Graph()
    rows, columns = gv.Dim("rows", 4), gv.Dim("columns", 4)
    columns.declare_same_as(rows)
    x = g.placeholder("x", dims=(rows, columns))
    loaded = gv.load(_saved(tmp_path, g))
    a, b = gv.dims_of(loaded["x"])
    assert a == b and a is not b and a != rows
    assert gv.batch_dim.canonical() is gv.batch_dim
    assert gv.dims_of(x) == (rows, columns)


def test_a_graph_without_dims_writes_no_dims_keys(tmp_path):
    g = gv.Graph()
    g.placeholder("x", (None, 3))
    with zipfile.ZipFile(_saved(tmp_path, g)) as archive:
        document = json.loads(archive.read("graph.json"))
    assert not {"dims", "axis_dims", "dim_lengths"} & set(document)
    assert gv.dims_of(gv.load(tmp_path / "dims.gvz")["x"]) == (None, None)


def _edited(tmp_path, edit):
    g, _, _ = _model()
    path = _saved(tmp_path, g)
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["graph.json"])
    edit(document)
    members["graph.json"] = json.dumps(document)
    bad = tmp_path / "bad.gvz"
    with zipfile.ZipFile(bad, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return bad


BAD_DIMS = {
    "dims not a list": (lambda d: d.update(dims={}), "'dims' must be a list"),
    "unknown fields": (lambda d: d["dims"][1].update(colour="red"), r"dims\[1\] has fields"),
    "bad size": (lambda d: d["dims"][1].update(size=-2), r"dims\[1\]: Dim 'time': size must be"),
    "bad kind": (lambda d: d["dims"][1].update(kind="colour"), r"dims\[1\]: .*kind must be one of"),
    "forward operand": (lambda d: d["dims"][3]["derived"].__setitem__(1, {"dim": 3}),
                        r"dims\[3\]: 3 is not an earlier dim"),
    "unknown operation": (lambda d: d["dims"][3]["derived"].__setitem__(0, "pow"), "operation among"),
    "wrong derived size": (lambda d: d["dims"][3].update(size=7), "not a dim of size 7"),
    "same as a different size": (lambda d: d["dims"][1].update(same_as=2), r"dims\[1\].same_as: .*same size"),
    "same as nowhere": (lambda d: d["dims"][1].update(same_as=99), r"99 is not a dim index in \[0, "),
    "axis of an unknown node": (lambda d: d["axis_dims"][0].__setitem__(0, "nope"), "'nope' is not a node"),
    "too few axes": (lambda d: d["axis_dims"][0].__setitem__(1, [0, 1]), "has 3 axes .* but 2 dims"),
    "size mismatch": (lambda d: d["dims"][2].update(size=4), r"axis_dims\[0\]: .*axis 2 has size 3 but .*feature"),
    "lengths of a static dim": (lambda d: d["dim_lengths"][0].__setitem__(0, 2), "only dynamic dims have lengths"),
    "float lengths": (lambda d: d["dim_lengths"][0].__setitem__(1, "seq"), "must be a 1-D int array"),
}


@pytest.mark.parametrize("case", sorted(BAD_DIMS))
def test_bad_dims_records_raise_a_clear_graph_file_error(case, tmp_path):
    edit, message = BAD_DIMS[case]
    with pytest.raises(gv.GraphFileError, match=message):
        gv.load(_edited(tmp_path, edit))


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 6) | st.text(max_size=4)
    | st.sampled_from(["mul", "floordiv", "seq", "seq_len", {"dim": 1}, {"batch": True}]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "size", "kind", "derived", "same_as", "batch", "dim"]), children, max_size=3),
    max_leaves=8)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_dims_records_give_a_graph_or_graph_file_error(tmp_path, data):
    g, _, _ = _model()
    buffer = io.BytesIO()
    _saved(tmp_path, g)
    with zipfile.ZipFile(tmp_path / "dims.gvz") as archive:
        document = json.loads(archive.read("graph.json"))
        members = {name: archive.read(name) for name in archive.namelist()}
    key = data.draw(st.sampled_from(["dims", "axis_dims", "dim_lengths"]), label="key")
    entries = document[key]
    position = data.draw(st.integers(0, len(entries)), label="position")
    if position == len(entries):
        entries.append(data.draw(VALUES, label="added"))
    elif isinstance(entries[position], dict) and entries[position] and data.draw(st.booleans(), label="field"):
        field = data.draw(st.sampled_from(sorted(entries[position])), label="which")
        entries[position][field] = data.draw(VALUES, label="value")
    else:
        entries[position] = data.draw(VALUES, label="entry")
    members["graph.json"] = json.dumps(document)
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, member in members.items():
            archive.writestr(name, member)
    path = tmp_path / "mutated.gvz"
    path.write_bytes(buffer.getvalue())
    try:
        loaded = gv.load(path)
    except gv.GraphFileError as error:
        assert str(path) in str(error)
    else:
        assert isinstance(loaded, gv.Graph)


def test_batch_subset_dims_survive_a_round_trip(tmp_path):
    g, seq, _ = _model()
    part = gv.SequenceView("bwc", seq).sub(0, 1).get("bwc")
    loaded = gv.load(_saved(tmp_path, g))
    time = gv.dims_of(loaded["seq"])[1]
    assert gv.dims_of(loaded[part.name])[1].name == "time[0:1]"
    assert loaded.math.mean(loaded[part.name], axis=time).op == "masked_mean"
