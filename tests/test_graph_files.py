"""Graph files at the edges: where g.save may write, how its files are permitted, and .npy headers and
node sizes that gv.load must refuse with GraphFileError."""
import json
import os
import struct
import zipfile

import numpy as np
import pytest

import graphview as gv


def _graph():
    g = gv.Graph("files")
    x = g.placeholder("x", (None, 3))
    w = g.var("w", np.arange(6.0).reshape(3, 2))
    g.set_loss(g.math.sum(x @ w, name="loss"))
    return g


# --- saving ----------------------------------------------------------------------

def test_saving_into_a_missing_folder_names_the_path(tmp_path):
    target = tmp_path / "missing" / "x.gvz"
    with pytest.raises(gv.GraphFileError, match=f"{tmp_path / 'missing'}.* does not exist") as caught:
        _graph().save(target)
    assert str(target) in str(caught.value) and ".tmp" not in str(caught.value)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize("path, match", [
    (None, "a graph file path must be a string or path, not NoneType"),
    (3, "a graph file path must be a string or path, not int"),
    ("", "the graph file path is empty"),
])
def test_saving_to_something_that_is_not_a_path_is_a_graph_file_error(path, match):
    with pytest.raises(gv.GraphFileError, match=match):
        _graph().save(path)


def test_saving_over_a_folder_names_it_and_leaves_no_temporary_file(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(gv.GraphFileError, match=f"{tmp_path / 'folder'}: cannot write the graph file: it is a folder"):
        _graph().save(tmp_path / "folder")
    assert sorted(os.listdir(tmp_path)) == ["folder"]
    with pytest.raises(gv.GraphFileError, match=r"^\.: cannot write the graph file: it is a folder"):
        _graph().save(".")


def test_placeholder_values_must_be_a_mapping(tmp_path):
    with pytest.raises(gv.PlaceholderError, match="save: placeholders must be a dict of name -> value, not list"):
        _graph().save(tmp_path / "x.gvz", placeholders=[np.ones((2, 3))])


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_saved_files_respect_the_umask(tmp_path, umask, mode):
    previous = os.umask(umask)
    try:
        _graph().save(tmp_path / "x.gvz")
    finally:
        os.umask(previous)
    assert os.stat(tmp_path / "x.gvz").st_mode & 0o777 == mode
    assert gv.load(tmp_path / "x.gvz").nodes() == _graph().nodes()


def test_saving_over_a_file_keeps_its_permissions_and_writes_through_a_link(tmp_path):
    # As open() does: an existing file keeps its mode, and a link's target is what gets replaced.
    kept = tmp_path / "kept.gvz"
    kept.write_bytes(b"old")
    os.chmod(kept, 0o600)
    _graph().save(kept)
    assert os.stat(kept).st_mode & 0o777 == 0o600
    assert gv.load(kept).nodes() == _graph().nodes()
    target, link = tmp_path / "target.gvz", tmp_path / "link.gvz"
    target.write_bytes(b"old")
    link.symlink_to(target)
    _graph().save(link)
    assert link.is_symlink() and gv.load(target).nodes() == _graph().nodes()


def test_saving_over_a_read_only_file_is_refused_as_open_refuses_it(tmp_path, monkeypatch):
    kept = tmp_path / "kept.gvz"
    kept.write_bytes(b"old")
    os.chmod(kept, 0o444)
    # os.access is what open() consults in effect; root may write anything, so ask as a user would.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(kept) and mode == os.W_OK
                        else real_access(p, mode, **kw))
    with pytest.raises(gv.GraphFileError, match=r"kept.gvz: cannot write the graph file: it is read-only"):
        _graph().save(kept)
    assert kept.read_bytes() == b"old"


# --- reading: .npy headers ---------------------------------------------------------

def _npy(header):
    """An .npy version 1.0 member with ``header`` (bytes) as its header dict, padded as NumPy pads."""
    header = header + b" " * ((-(10 + len(header) + 1)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _with_value(tmp_path, data):
    _graph().save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    members["arrays/0.npy"] = data
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return tmp_path / "bad.gvz"


@pytest.mark.parametrize("header", [
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,",          # cut short: tokenize.TokenError
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2), ",     # no closing brace
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2)} }",   # unbalanced
    b"{'descr': '<f8', 'fortran_order': False, 'shape': (3, 'x')}",   # shape not ints
    b"{'descr': '<f8', 'fortran_order': False}",                      # a key missing
    b"{'descr': 'not a dtype', 'fortran_order': False, 'shape': (3, 2)}",
    b"[1, 2, 3]",                                                     # not a dict
    b"\xff\xfe\x00",                                                  # not text
    b"__import__('os').system('false')",                              # never evaluated
    b"",
])
def test_a_malformed_npy_header_is_a_graph_file_error(tmp_path, header):
    with pytest.raises(gv.GraphFileError, match=r"node 1 \('w'\): arrays/0.npy has a malformed .npy header"):
        gv.load(_with_value(tmp_path, _npy(header)))


def test_an_npy_member_cut_inside_its_magic_is_a_graph_file_error(tmp_path):
    with pytest.raises(gv.GraphFileError, match=r"arrays/0.npy has a malformed .npy header"):
        gv.load(_with_value(tmp_path, b"\x93NUM"))


# --- reading: sizes ----------------------------------------------------------------

def _resized(tmp_path, shapes):
    """The file of a bool graph (x (4, 1), y (1, 16), eq) with the node shapes replaced by ``shapes``."""
    g = gv.Graph("sizes")
    x, y = g.placeholder("x", (4, 1), "bool"), g.placeholder("y", (1, 16), "bool")
    g.math.eq(x, y, name="same")
    g.save(tmp_path / "good.gvz")
    with zipfile.ZipFile(tmp_path / "good.gvz") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    document = json.loads(members["graph.json"])
    for node in document["nodes"]:
        node["shape"] = shapes.get(node["name"], node["shape"])
    members["graph.json"] = json.dumps(document)
    with zipfile.ZipFile(tmp_path / "bad.gvz", "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return tmp_path / "bad.gvz"


def test_a_node_too_large_for_an_array_is_refused_on_load_as_when_built(tmp_path):
    # Each input fits (2**60 bytes), their comparison needs 2**64: building refuses it, so must loading.
    with pytest.raises(gv.ShapeError, match="2\\*\\*63 - 1"):
        g = gv.Graph()
        g.math.eq(g.placeholder("x", (2**60, 1), "bool"), g.placeholder("y", (1, 16), "bool"))
    path = _resized(tmp_path, {"x": [2**60, 1], "same": [2**60, 16]})
    with pytest.raises(gv.GraphFileError, match=r"node 2 \('same'\): .*\(1152921504606846976, 16\) of bool "
                                                 r"needs 18446744073709551616 bytes; an array holds at most 2\*\*63 - 1"):
        gv.load(path)


def test_a_placeholder_too_large_for_an_array_is_refused_on_load(tmp_path):
    path = _resized(tmp_path, {"x": [2**64, 1], "same": [2**64, 16]})
    with pytest.raises(gv.GraphFileError, match=r"node 0 \('x'\): .*needs 18446744073709551616 bytes"):
        gv.load(path)


def test_a_shape_that_fits_still_loads(tmp_path):
    path = _resized(tmp_path, {"x": [2**40, 1], "same": [2**40, 16]})
    assert gv.load(path).node("same").shape == (2**40, 16)


def test_paths_no_file_can_have_are_graph_file_errors(tmp_path):
    with pytest.raises(gv.GraphFileError, match="save: the graph file path 'a\\\\x00b' holds a NUL character"):
        _graph().save("a\0b")
    with pytest.raises(gv.GraphFileError, match="the graph file path 'a\\\\x00b' holds a NUL character"):
        gv.load("a\0b")
    (tmp_path / "file").write_text("")
    with pytest.raises(gv.GraphFileError, match=f"the folder {tmp_path / 'file'} is not a folder"):
        _graph().save(tmp_path / "file" / "x.gvz")
