"""What the ``graphview`` command works on: a graph file, or a function that builds a graph.

A TARGET is either a graph file (``model.gvz``, see graphview/serialization.py)
or ``path/to/file.py:function`` / ``package.module:function``, where the
function takes no arguments and returns ``(graph, placeholders)``. Anything
wrong with a target raises :class:`TargetError`, which the CLI reports in one
line with exit status 2.
"""
import importlib
import importlib.util
import os
import re
import sys
import zlib
import zipfile

import numpy as np

from graphview.errors import GraphFileError, GraphviewError, did_you_mean
from graphview.graph import Graph
from graphview.onnx.load import load as load_onnx
from graphview.serialization import read
from graphview.variable import Kind

MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
GRAPH_FILE_SUFFIXES = (".gvz", ".onnx")  # g.save's files, and ONNX models (gv.onnx.load)


class TargetError(GraphviewError):
    """A TARGET or input file the command cannot use (exit status 2)."""


def is_function_target(target):
    """``file.py:function`` or ``package.module:function`` (a graph file may not contain ':')."""
    module, colon, function = target.rpartition(":")
    if not colon or not function.isidentifier():
        return False
    return module.endswith(".py") or (MODULE_NAME.match(module) is not None and not os.path.exists(target))


def load_target(target, *, need_loss=False, loss=None):
    """``(graph, placeholders)`` for TARGET; raises TargetError when it is unusable. A graph without a
    loss gets the sum of output ``loss`` as its loss when ``loss`` is given; an ONNX model (``.onnx``)
    the sum of its first output when a loss is needed and none is named."""
    _refuse_a_file_with_a_function(target)
    if target.endswith(".onnx") and not is_function_target(target):
        graph, placeholders = _onnx_model(target, need_loss, loss), {}
    elif is_function_target(target):
        graph, placeholders = _call(target)
    else:
        module, colon, function = target.rpartition(":")
        if target.endswith(".py") or (colon and module.endswith(".py")):
            script = module if colon else target
            raise TargetError(f"{target}: a Python file needs the function that builds the graph: "
                              f"{script}:FUNCTION, where FUNCTION takes no arguments and returns "
                              "(graph, placeholders)")
        if not os.path.exists(target):
            raise TargetError(f"{target}: no such graph file (a TARGET is a graph file, file.py:function "
                              "or package.module:function)")
        try:
            graph, placeholders = read(target)
        except GraphFileError as error:
            raise TargetError(str(error)) from error
    if not isinstance(graph, Graph):
        raise TargetError(f"{target} did not give a graphview Graph (got {type(graph).__name__})")
    if loss is not None and not graph.losses:
        _sum_as_loss(graph, loss, target)
    if need_loss and not graph.losses:
        raise TargetError(f"{target}: graph {graph.name!r} has no loss; call g.set_loss(...) before returning it")
    return graph, placeholders


def _onnx_model(target, need_loss, loss):
    """The graph of an ONNX model file; with a loss needed, the sum of output ``loss`` (an ONNX output
    name, default its first output)."""
    if not os.path.exists(target):
        raise TargetError(f"{target}: no such ONNX file")
    names = {}
    try:
        graph = load_onnx(target, names=names)
        outputs = _onnx_outputs(target)
    except GraphFileError as error:
        raise TargetError(str(error)) from error
    if need_loss or loss is not None:
        chosen = loss if loss is not None else outputs[0]
        if chosen not in outputs and chosen not in names.values():
            raise TargetError(f"--loss {chosen}: model {target} has no output named {chosen!r}; its outputs are: "
                              f"{', '.join(outputs)}")
        kind = graph[names.get(chosen, chosen)].kind
        if kind is not Kind.ARRAY:      # an initializer or an input: not computed by the model
            raise TargetError(f"--loss {chosen}: {chosen!r} is a {kind} of model {target} (an initializer or "
                              f"input), not a value the model computes; its outputs are: {', '.join(outputs)}")
        _sum_as_loss(graph, names.get(chosen, chosen), target)
    return graph


def _onnx_outputs(path):
    """The graph output names of the ONNX model at ``path`` (which gv.onnx.load has read already)."""
    import onnx  # an optional dependency (the onnx extra)
    return [output.name for output in onnx.load(path, load_external_data=False).graph.output]


def _sum_as_loss(graph, name, target):
    if name not in graph:
        raise TargetError(f"--loss {name}: graph {graph.name!r} of {target} has no variable named {name!r}"
                          f"{did_you_mean(name, [n.name for n in graph.nodes()])}")
    output = graph[name]
    graph.set_loss(graph.math.sum(output, name=f"sum_of_{name.replace('/', '_')}"))


def _refuse_a_file_with_a_function(target):
    """``model.gvz:build`` or ``notes.txt:build``: a file that is no Python module, said so before anything
    is imported (``sp.gvz`` would otherwise be imported as module ``gvz`` of package ``sp``, running sp.py)."""
    module, colon, function = target.rpartition(":")
    if not colon or module.endswith(".py") or os.path.exists(target):
        return
    if module.endswith(GRAPH_FILE_SUFFIXES) or os.path.isfile(module):
        kind = "a graph file" if module.endswith(GRAPH_FILE_SUFFIXES) else "not a Python file"
        raise TargetError(f"{target}: {module} is {kind}, so it has no function {function!r} to call; give a "
                          f"graph file alone ({module}), or the function that builds the graph as "
                          "file.py:function or package.module:function")


def _call(target):
    module_name, _, function_name = target.rpartition(":")
    module = _import(module_name, target)
    function = getattr(module, function_name, None)
    if not callable(function):
        functions = [name for name, value in vars(module).items() if callable(value) and not name.startswith("_")]
        raise TargetError(f"{target}: {module_name} has no function {function_name!r}"
                          f"{did_you_mean(function_name, functions)}")
    try:
        result = function()
    except SystemExit as exit:  # the CLI would otherwise exit with the user's status and report nothing
        raise TargetError(f"{target} called sys.exit({exit.code!r}) instead of returning a graph") from None
    except GraphviewError as error:
        raise TargetError(f"{target}: {type(error).__name__}: {error}") from error
    except Exception as error:
        raise TargetError(f"{target} raised {type(error).__name__}: {error}") from error
    if isinstance(result, Graph):
        return result, {}
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], Graph)
            and isinstance(result[1], (dict, type(None)))):
        raise TargetError(f"{target} must return (graph, placeholders), a graphview Graph and a dict of "
                          f"placeholder arrays; it returned {_describe(result)}")
    return result[0], dict(result[1] or {})


def _import(module_name, target):
    try:
        return import_module(module_name)
    except TargetError as error:
        raise TargetError(f"{target}: {error}") from error


def import_module(spec):
    """Import ``spec``, a dotted module name or a path to a ``.py`` file, as Python itself would.

    A file is imported under its real module name (``models.py`` as ``models``; inside
    packages, ``pkg/sub/models.py`` as ``pkg.sub.models`` from the folder above ``pkg``),
    with that folder first on ``sys.path``, as ``python -m`` would; a dotted name with
    the current folder first. The module goes into ``sys.modules``, so a later
    ``import models`` and Numba's on-disk cache (``@njit(cache=True)``, keyed by file and
    module) find the same module. The folder stays on ``sys.path``, as for ``python
    file.py``; the ``graphview`` command restores ``sys.path`` when it ends.
    """
    if spec.endswith(".py"):
        return _import_file(spec)
    if not MODULE_NAME.match(spec):
        raise TargetError(f"{spec!r} is neither a module name (package.module) nor a path to a .py file")
    sys.path.insert(0, os.getcwd())
    return _run_import(spec, spec)


def _import_file(spec):
    path = os.path.abspath(spec)
    if not os.path.isfile(path):
        raise TargetError(f"no such file {spec!r}")
    folder, parts = os.path.dirname(path), [os.path.splitext(os.path.basename(path))[0]]
    while os.path.isfile(os.path.join(folder, "__init__.py")) and os.path.basename(folder).isidentifier():
        folder, package = os.path.split(folder)
        parts.insert(0, package)
    name = ".".join(parts)
    sys.path.insert(0, folder)
    if not MODULE_NAME.match(name):
        return _import_unimportable(name, path, spec)
    module = _run_import(name, spec)
    loaded = getattr(module, "__file__", None)
    if not (loaded and os.path.exists(loaded) and os.path.samefile(loaded, path)):
        # The name belongs to a module loaded before (the standard library's random.py, numpy): load the
        # file under a private name of its own, the same in every run, so Numba's cache still finds it.
        private = f"graphview_target_{name.replace('.', '_')}_{zlib.crc32(path.encode()):08x}"
        return _import_unimportable(private, path, spec)
    return module


def _import_unimportable(name, path, spec):
    """A file whose name is no module name (``my-model.py``): loaded under that name all the same,
    into ``sys.modules`` as an import would, so that Numba's cache finds it."""
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == path:
        return module
    loader_spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        _guarded(spec, loader_spec.loader.exec_module, module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _run_import(name, spec):
    try:
        return _guarded(spec, importlib.import_module, name)
    except TargetError:
        raise
    except ImportError as error:
        raise TargetError(f"cannot import {spec}: {error}") from error


def _guarded(spec, function, *args):
    """``function(*args)``, with anything but ImportError raised by the user's code as a TargetError."""
    try:
        return function(*args)
    except SystemExit as exit:
        raise TargetError(f"importing {spec} called sys.exit({exit.code!r})") from None
    except ImportError:
        raise
    except Exception as error:
        raise TargetError(f"importing {spec} raised {type(error).__name__}: {error}") from error


def _describe(value):
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    return f"a {type(value).__name__}"


INPUTS_EXPECTED = ("--inputs expects an .npz file of placeholder values by name, "
                   "as np.savez(path, x=..., y=...) writes")


def read_inputs(path):
    """Placeholder arrays from an ``.npz`` file (``np.load`` with ``allow_pickle=False``)."""
    if not os.path.isfile(path):
        raise TargetError(f"--inputs {path}: no such file; {INPUTS_EXPECTED}")
    with open(path, "rb") as stream:
        magic = stream.read(6)
    if magic == b"\x93NUMPY":
        raise TargetError(f"--inputs {path}: an .npy file holds a single array; {INPUTS_EXPECTED}")
    if not magic.startswith(b"PK"):
        raise TargetError(f"--inputs {path}: not an .npz file; {INPUTS_EXPECTED}")
    name = None
    try:
        with np.load(path, allow_pickle=False) as archive:
            inputs = {}
            for name in archive.files:
                inputs[name] = archive[name]
            return inputs
    except ValueError as error:
        if name is not None and "allow_pickle" in str(error):
            raise TargetError(f"--inputs {path}: array {name!r} holds Python objects, which are never "
                              "unpickled; save numeric arrays") from error
        raise TargetError(f"--inputs {path}: a damaged .npz file ({error}); {INPUTS_EXPECTED}") from error
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise TargetError(f"--inputs {path}: a damaged .npz file ({error}); {INPUTS_EXPECTED}") from error
