"""Graph files: ``g.save(path)`` writes one, ``gv.load(path)`` reads it back.

A graph file is a zip holding ``graph.json`` (format name and version, the
graph's name, every node as recorded, the loss variables, and the dims of
:mod:`graphview.layouts.dimfile` when the graph has any) and one ``.npy``
member per stored array (variable and constant values, and optionally
placeholder values for the CLI). Loading parses JSON and reads arrays with
``allow_pickle=False``: nothing in a file is ever executed. Nodes are
re-created exactly as recorded (no dtype promotion is re-run), and every
field is checked against the op registry by re-running the op's shape and
dtype rules, so a file that loads is a graph that could have been built.
Anything else raises :class:`graphview.GraphFileError`. See
adr/0010-graph-file-format.md.
"""
import contextlib
import json
import math
import os
import secrets
import stat
import struct
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from graphview import core, infer
from graphview.errors import GraphFileError, GraphviewError, PlaceholderError
from graphview.execution import checked_feed
from graphview.graph_archive import DTYPES, ArchiveReader
from graphview.layouts import dimfile
from graphview.registry import get as get_op
from graphview.shapes import MAX_RANK, format_shape
from graphview.variable import Kind
from graphview.version import __version__

FORMAT = "graphview-graph"
VERSION = 1
GRAPH_JSON = "graph.json"
MAX_JSON_BYTES = 256 * 2**20
MAX_RATIO = 1100  # the most any deflated data inflates (deflate's limit is about 1032:1)
NODE_FIELDS = {"name", "kind", "op", "inputs", "attrs", "shape", "dtype", "value"}
SPECIAL_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# What a damaged zip or .npy member can raise from inside zipfile, zlib and NumPy.
LOW_LEVEL_ERRORS = (zipfile.BadZipFile, zlib.error, struct.error, EOFError, ValueError, KeyError,
                    TypeError, IndexError, OverflowError, RecursionError, MemoryError, UnicodeDecodeError,
                    NotImplementedError, OSError, RuntimeError)


# --- writing -----------------------------------------------------------------

def save(graph, path, placeholders=None):
    """Write ``graph`` (and optional placeholder values, by name) to the graph file ``path``."""
    shown = _path(path, "save: ")
    if placeholders is not None and not isinstance(placeholders, Mapping):
        raise PlaceholderError(f"save: placeholders must be a dict of name -> value, not {type(placeholders).__name__}")
    arrays = {}

    def store(folder, array):
        member = f"{folder}/{len(arrays)}.npy"
        arrays[member] = array
        return member

    nodes = []
    for node in graph.nodes():
        entry = {"name": node.name, "kind": node.kind.value, "op": node.op, "inputs": list(node.inputs),
                 "attrs": [[key, _encode(value)] for key, value in node.attrs],
                 "shape": list(node.shape), "dtype": node.dtype.name}
        if node.kind in (Kind.VARIABLE, Kind.CONSTANT):
            entry["value"] = store("arrays", graph.stored(node.name))
        nodes.append(entry)
    stored = []
    for name, value in (placeholders or {}).items():
        stored.append({"name": name, "value": store("placeholders", _checked_placeholder(graph, name, value))})
    document = {"format": FORMAT, "version": VERSION, "graphview": __version__, "name": graph.name,
                "nodes": nodes, "losses": list(graph.loss_names), "placeholders": stored}
    document.update(dimfile.write(graph))
    # Optional keys, written only when used: readers that predate them ignore them (every variable trainable).
    if graph.non_trainable:
        document["non_trainable"] = [n.name for n in graph.nodes() if n.name in graph.non_trainable]
    if graph.state_updates:
        document["state_updates"] = [[name, node] for name, node in graph.state_updates.items()]
    if graph.layers:
        document["layers"] = [{"name": name, **record} for name, record in graph.layers.items()]
    if graph.float_dtype != np.float64:
        document["float_dtype"] = graph.float_dtype.name
    text = _layout(document)
    try:
        with _replacing(shown) as stream, zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            # A fixed timestamp (as for the .npy members) makes the same graph give the same bytes.
            info = zipfile.ZipInfo(GRAPH_JSON, date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, text, compress_type=zipfile.ZIP_DEFLATED)
            for member, array in arrays.items():
                with archive.open(member, "w", force_zip64=True) as member_stream:
                    np.lib.format.write_array(member_stream, np.asarray(array), allow_pickle=False)
    except OSError as error:   # disk full, permissions, a folder in the way: the user's path, never ours
        raise GraphFileError(f"{shown}: cannot write the graph file: {error.strerror or error}") from None


def _path(path, what):
    """``path`` as a string, or a GraphFileError saying ``what`` was given instead."""
    try:
        shown = os.fspath(path)
    except TypeError:
        raise GraphFileError(f"{what}a graph file path must be a string or path, not {type(path).__name__}") from None
    if isinstance(shown, bytes):
        shown = os.fsdecode(shown)
    if not shown:
        raise GraphFileError(f"{what}the graph file path is empty")
    if "\0" in shown:
        raise GraphFileError(f"{what}the graph file path {shown!r} holds a NUL character, which no file name can")
    return shown


@contextlib.contextmanager
def _replacing(path):
    """A binary stream whose bytes replace ``path`` when the block ends; nothing is left if it fails.

    The temporary file beside ``path`` is created as ``open`` creates files (mode 0666 less the umask),
    not as ``tempfile.mkstemp`` does (0600), so a saved graph is as readable as any file its user writes.
    As with ``open``, a link is written through (its target is replaced) and an existing file keeps
    its permissions.
    """
    if os.path.isdir(path):
        raise GraphFileError(f"{path}: cannot write the graph file: it is a folder; give a file name in it")
    given, path = path, os.path.realpath(path)
    folder = os.path.dirname(path)
    if os.path.isfile(path) and not os.access(path, os.W_OK):
        raise GraphFileError(f"{given}: cannot write the graph file: it is read-only (as open() would say)")
    if not os.path.isdir(folder):
        missing = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise GraphFileError(f"{given}: cannot write the graph file: the folder {folder} {missing}")
    for _ in range(100):
        temporary = os.path.join(folder, f".graphview-{secrets.token_hex(6)}.tmp")
        try:
            handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise GraphFileError(f"{given}: cannot write the graph file: no free temporary name in {folder}")
    try:
        if os.path.isfile(path):
            os.chmod(handle, stat.S_IMODE(os.stat(path).st_mode))
        with os.fdopen(handle, "wb") as stream:
            yield stream
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _layout(document):
    """JSON with one node per line, so graph.json reads (and diffs) like a table."""
    dump = lambda value: json.dumps(value, allow_nan=False)  # noqa: E731
    lines = ["{"]
    for key, value in document.items():
        if isinstance(value, list) and value:
            items = ",\n".join(f"  {dump(item)}" for item in value)
            lines.append(f' {dump(key)}: [\n{items}\n ],')
        else:
            lines.append(f" {dump(key)}: {dump(value)},")
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines + ["}"]) + "\n"


def _checked_placeholder(graph, name, value):
    if not isinstance(name, str) or name not in graph or graph.node(name).kind is not Kind.PLACEHOLDER:
        known = ", ".join(n.name for n in graph.nodes() if n.kind is Kind.PLACEHOLDER) or "none"
        raise GraphviewError(f"save: {name!r} is not a placeholder of graph {graph.name!r} "
                             f"(its placeholders are: {known})")
    return checked_feed(graph.node(name), value)


def _encode(value):
    """An attribute value as JSON: tuples become lists, non-finite floats {"float": "nan"}."""
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return value


# --- reading -----------------------------------------------------------------

def load(path):
    """The graph stored in the graph file ``path``; a malformed file raises GraphFileError."""
    return read(path)[0]


def read(path):
    """``(graph, placeholders)`` from the graph file ``path``; placeholders is a dict of arrays."""
    shown = _path(path, "")
    try:
        return _Reader(shown).read()
    except GraphFileError:
        raise
    except FileNotFoundError:
        raise GraphFileError(f"{shown}: no such graph file") from None
    except (IsADirectoryError, PermissionError) as error:
        raise GraphFileError(f"{shown}: cannot open the graph file: {error.strerror}") from None
    except GraphviewError as error:
        raise GraphFileError(f"{shown}: inconsistent graph file: {error}") from None
    except LOW_LEVEL_ERRORS as error:
        raise GraphFileError(f"{shown}: corrupt or truncated graph file ({type(error).__name__}: {error})") from None


class _Reader(ArchiveReader):
    def read(self):
        if not zipfile.is_zipfile(self.path):
            if os.path.isdir(self.path):
                self.fail("is a directory, not a graph file")
            if not os.path.exists(self.path):
                self.fail("no such graph file")
            self.fail("not a graph file (not a zip archive; truncated or corrupt?)")
        self.file_size = os.path.getsize(self.path)
        # Deflate cannot compress better than about 1032:1; more than that is a lying zip directory.
        self.limit = MAX_RATIO * self.file_size + 2**20
        with zipfile.ZipFile(self.path) as archive:
            self.archive = archive
            self.members = self._members()
            if GRAPH_JSON not in self.members:
                self.fail(f"no {GRAPH_JSON} inside (is this a graph file written by g.save?)")
            document = self._document()
            graph = self._graph(document)
            placeholders = self._placeholders(document, graph)
        unused = sorted(set(self.members) - self.used - {GRAPH_JSON})
        if unused:
            self.fail(f"members {', '.join(unused[:5])} are not referenced by graph.json (inconsistent file)")
        return graph, placeholders

    def _document(self):
        if self.members[GRAPH_JSON].file_size > MAX_JSON_BYTES:
            self.fail(f"{GRAPH_JSON} is larger than {MAX_JSON_BYTES} bytes")
        text = self.archive.read(GRAPH_JSON).decode("utf-8")
        try:
            document = json.loads(text, parse_constant=_reject_constant)
        except json.JSONDecodeError as error:
            self.fail(f"{GRAPH_JSON} is not valid JSON: {error}")
        if not isinstance(document, dict):
            self.fail(f"{GRAPH_JSON} holds a {type(document).__name__}, not an object")
        if document.get("format") != FORMAT:
            self.fail(f"{GRAPH_JSON} has format {document.get('format')!r}, not {FORMAT!r}")
        version = document.get("version")
        if not _is_int(version):
            self.fail(f"{GRAPH_JSON} has no integer format version (got {version!r})")
        if version != VERSION:
            newer = " (written by a newer graphview?)" if version > VERSION else ""
            self.fail(f"format version {version} is not supported; this graphview reads version {VERSION}{newer}")
        for key, kind in (("name", str), ("nodes", list), ("losses", list), ("placeholders", list)):
            if not isinstance(document.get(key), kind):
                self.fail(f"{GRAPH_JSON}: {key!r} must be a {kind.__name__}, got {document.get(key)!r:.80}")
        return document

    def _graph(self, document):
        if not document["name"]:
            self.fail(f"{GRAPH_JSON}: the graph name is empty")
        float_dtype = document.get("float_dtype", "float64")
        if float_dtype not in ("float32", "float64"):
            self.fail(f"{GRAPH_JSON}: 'float_dtype' must be \"float32\" or \"float64\", got {float_dtype!r:.80}")
        graph = core.new_graph(document["name"], float_dtype)
        for position, entry in enumerate(document["nodes"]):
            self._add(graph, position, entry)
        dimfile.read(document, graph, lambda message: self.fail(f"{GRAPH_JSON}: {message}"))
        self._state(document, graph)
        self._layers(document, graph)
        losses = document["losses"]
        if losses:
            for name in losses:
                if not isinstance(name, str) or name not in graph:
                    self.fail(f"loss {name!r} is not a node of the graph")
            if len(set(losses)) != len(losses):
                self.fail(f"the losses {losses} name a variable twice")
            try:
                graph.set_loss(*losses)
            except GraphviewError as error:
                self.fail(f"the losses are not usable: {error}")
        return graph

    def _state(self, document, graph):
        """The optional ``non_trainable`` names and ``state_updates`` pairs (ADR 0019), checked as
        ``g.var(..., trainable=False)`` and ``g.add_state_update`` check them when a graph is built."""
        names = document.get("non_trainable", [])
        if not isinstance(names, list):
            self.fail(f"{GRAPH_JSON}: 'non_trainable' must be a list of variable names, got {names!r:.80}")
        for name in names:
            if not isinstance(name, str) or name not in graph or graph.node(name).kind is not Kind.VARIABLE:
                self.fail(f"{GRAPH_JSON}: non_trainable {name!r:.80} is not a VARIABLE of the graph")
            if name in graph.non_trainable:
                self.fail(f"{GRAPH_JSON}: non_trainable names {name!r} twice")
            graph.non_trainable.add(name)
        updates = document.get("state_updates", [])
        if not isinstance(updates, list):
            self.fail(f"{GRAPH_JSON}: 'state_updates' must be a list of [variable, node] pairs, got {updates!r:.80}")
        for pair in updates:
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and p in graph for p in pair)):
                self.fail(f"{GRAPH_JSON}: state update {pair!r:.80} is not a [variable, node] pair of the graph")
            try:
                graph.add_state_update(*pair)
            except GraphviewError as error:
                self.fail(f"{GRAPH_JSON}: {error}")

    def _layers(self, document, graph):
        """The optional ``layers`` records (ADR 0023): each names a layer once, its parent an earlier
        layer, and only nodes of the graph."""
        records = document.get("layers", [])
        if not isinstance(records, list):
            self.fail(f"{GRAPH_JSON}: 'layers' must be a list of layer records, got {records!r:.80}")
        for position, record in enumerate(records):
            where = f"{GRAPH_JSON}: layer {position}"
            if not isinstance(record, dict) or set(record) != {"name", "type", "parent", "variables", "calls"}:
                self.fail(f"{where} is not a record with name, type, parent, variables and calls: {record!r:.80}")
            name, parent = record["name"], record["parent"]
            if not isinstance(name, str) or not name or name in graph.layers or not isinstance(record["type"], str):
                self.fail(f"{where}: name {name!r:.80} is not a new layer name or type is not a string")
            if parent is not None and parent not in graph.layers:
                self.fail(f"{where} ({name!r}): parent {parent!r:.80} is not an earlier layer")
            variables, calls = record["variables"], record["calls"]
            if not isinstance(variables, list) or not all(isinstance(v, str) and v in graph for v in variables):
                self.fail(f"{where} ({name!r}): variables {variables!r:.80} are not nodes of the graph")
            if not isinstance(calls, list) or not all(
                    isinstance(call, dict) and set(call) == {"inputs", "output"} and isinstance(call["inputs"], list)
                    and all(isinstance(n, str) and n in graph for n in call["inputs"] + [call["output"]])
                    for call in calls):
                self.fail(f"{where} ({name!r}): calls {calls!r:.80} are not {{inputs, output}} of graph nodes")
            graph.layers[name] = {"type": record["type"], "parent": parent, "variables": list(variables),
                                  "calls": [{"inputs": list(c["inputs"]), "output": c["output"]} for c in calls]}

    def _add(self, graph, position, entry):
        where = f"node {position}"
        if not isinstance(entry, dict):
            self.fail(f"{where} is a {type(entry).__name__}, not an object")
        if set(entry) - NODE_FIELDS or not {"name", "kind", "op", "inputs", "attrs", "shape", "dtype"} <= set(entry):
            self.fail(f"{where} has fields {sorted(entry)}; expected {sorted(NODE_FIELDS)} ('value' only for "
                      "variables and constants)")
        name = entry["name"]
        if not isinstance(name, str) or not name:
            self.fail(f"{where} has name {name!r}, not a non-empty string")
        where = f"node {position} ({name!r})"
        if name in graph:
            self.fail(f"{where}: the name appears twice")
        try:
            kind = Kind(entry["kind"])
        except (ValueError, TypeError):
            self.fail(f"{where}: kind {entry['kind']!r:.40} is not one of {', '.join(k.value for k in Kind)}")
        dtype = DTYPES.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
        if dtype is None:
            self.fail(f"{where}: dtype {entry['dtype']!r:.40} is not one of {', '.join(DTYPES)}")
        shape = self._shape(where, entry["shape"], allow_none=kind in (Kind.PLACEHOLDER, Kind.ARRAY))
        self._check_size(where, shape, dtype)
        if kind is Kind.ARRAY:
            self._add_op(graph, where, entry, name, shape, dtype)
            return
        if entry["op"] is not None or entry["inputs"] != [] or entry["attrs"] != []:
            self.fail(f"{where}: a {kind.value} has no op, inputs or attributes")
        if kind is Kind.PLACEHOLDER:
            if "value" in entry:
                self.fail(f"{where}: a placeholder holds no value in the node list")
            graph.add_node(name, kind, None, (), (), shape, dtype)
            return
        if "value" not in entry:
            self.fail(f"{where}: a {kind.value} needs a stored value")
        array = np.require(self._array(where, entry["value"]), requirements="C")
        if array.shape != shape or array.dtype != dtype:
            self.fail(f"{where}: the node is {format_shape(shape)} {dtype.name} but its stored value is "
                      f"{format_shape(array.shape)} {array.dtype.name}")
        graph.add_node(name, kind, None, (), (), shape, dtype)
        graph.store[name] = array

    def _add_op(self, graph, where, entry, name, shape, dtype):
        if "value" in entry:
            self.fail(f"{where}: an op output holds no stored value")
        op = entry["op"]
        if not isinstance(op, str):
            self.fail(f"{where}: op {op!r:.40} is not an op name")
        try:
            definition = get_op(op)
        except GraphviewError:
            self.fail(f"{where}: unknown op {op!r}: no op of that name is registered; if your code declares "
                      "it with gv.defop, import that module before loading (the graphview command: "
                      "--import MODULE; `graphview ops` lists the registered ops)")
        inputs = entry["inputs"]
        if not isinstance(inputs, list) or not all(isinstance(i, str) and i in graph for i in inputs):
            self.fail(f"{where}: inputs {inputs!r:.120} must name nodes recorded before it")
        attrs = self._attrs(where, entry["attrs"], op)
        in_nodes = [graph.node(i) for i in inputs]
        attrs = self._check_rules(where, definition, in_nodes, attrs, shape, dtype)
        graph.add_node(name, Kind.ARRAY, op, inputs, attrs, shape, dtype)

    def _check_rules(self, where, definition, in_nodes, attrs, shape, dtype):
        """The recorded node must be what building the op on the recorded inputs gives: ``infer`` runs
        building's checks (arity, declared attributes, accepted dtypes, shape and dtype rules) on it, and
        no cast may be missing. Returns the attributes."""
        op = definition.name
        prefix = f"op {op} "
        try:
            inferred = infer.infer(definition, [(n.name, n.shape, n.dtype) for n in in_nodes], attrs, prefix)
        # The rules are registered graphview code, but the values they are given here come from
        # the file; whatever they raise means the file does not describe a buildable node.
        except Exception as error:  # noqa: BLE001
            message = str(error)
            self.fail(f"{where}: {message}" if message.startswith(prefix) else
                      f"{where}: op {op} rejects the recorded inputs and attributes: {message}")
        for p, target in inferred.casts:
            self.fail(f"{where}: input {p} ({in_nodes[p].name!r}) is {in_nodes[p].dtype.name} but {op} computes "
                      f"in {target.name}; the cast node building inserts is missing")
        if inferred.shape != shape or inferred.dtype != dtype:
            self.fail(f"{where}: recorded as {format_shape(shape)} {dtype.name}, but {op} of its inputs gives "
                      f"{format_shape(inferred.shape)} {inferred.dtype.name}")
        return inferred.attrs

    def _shape(self, where, shape, allow_none):
        if not isinstance(shape, list) or len(shape) > MAX_RANK:
            self.fail(f"{where}: shape {shape!r:.80} is not a list of at most {MAX_RANK} sizes")
        for dim in shape:
            if dim is None and allow_none:
                continue
            if not _is_int(dim) or dim < 0:
                self.fail(f"{where}: shape {shape!r:.80} holds {dim!r}, which is not a size")
        return tuple(shape)

    def _attrs(self, where, attrs, op):
        if not isinstance(attrs, list):
            self.fail(f"{where}: attrs must be a list of [name, value] pairs")
        decoded = {}
        for pair in attrs:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                self.fail(f"{where}: attribute {pair!r:.80} is not a [name, value] pair")
            if pair[0] in decoded:
                self.fail(f"{where}: attribute {pair[0]!r} appears twice")
            decoded[pair[0]] = self._decode(where, pair[1])
        try:
            return infer.freeze_attrs(op, decoded)
        except GraphviewError as error:
            self.fail(f"{where}: {error}")

    def _decode(self, where, value):
        if isinstance(value, list):
            return tuple(self._decode(where, item) for item in value)
        if isinstance(value, dict):
            if set(value) != {"float"} or value["float"] not in SPECIAL_FLOATS:
                self.fail(f"{where}: attribute value {value!r:.80} is not a number, string, bool, null or list")
            return SPECIAL_FLOATS[value["float"]]
        return value

    def _placeholders(self, document, graph):
        values = {}
        for entry in document["placeholders"]:
            if not isinstance(entry, dict) or set(entry) != {"name", "value"}:
                self.fail(f"stored placeholder {entry!r:.80} is not an object with name and value")
            name = entry["name"]
            if not isinstance(name, str) or name not in graph or graph.node(name).kind is not Kind.PLACEHOLDER:
                self.fail(f"stored placeholder value for {name!r:.80}, which is not a placeholder of the graph")
            if name in values:
                self.fail(f"placeholder {name!r} has two stored values")
            where = f"placeholder {name!r}"
            array = self._array(where, entry["value"])
            node = graph.node(name)
            if (array.dtype != node.dtype or array.ndim != len(node.shape)
                    or any(d is not None and d != a for d, a in zip(node.shape, array.shape))):
                self.fail(f"{where} is {format_shape(node.shape)} {node.dtype.name}, but its stored value is "
                          f"{format_shape(array.shape)} {array.dtype.name}")
            values[name] = array
        return values


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _reject_constant(name):
    raise ValueError(f"{name} is not allowed in a graph file")
