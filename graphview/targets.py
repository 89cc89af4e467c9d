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
import zipfile

import numpy as np

from graphview.errors import GraphFileError, GraphviewError

MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class TargetError(GraphviewError):
    """A TARGET or input file the command cannot use (exit status 2)."""


def is_function_target(target):
    """``file.py:function`` or ``package.module:function`` (a graph file may not contain ':')."""
    module, colon, function = target.rpartition(":")
    if not colon or not function.isidentifier():
        return False
    return module.endswith(".py") or (MODULE_NAME.match(module) is not None and not os.path.exists(target))


def load_target(target, *, need_loss=False):
    """``(graph, placeholders)`` for TARGET; raises TargetError when it is unusable."""
    from graphview.graph import Graph
    from graphview.serialization import read
    if is_function_target(target):
        graph, placeholders = _call(target)
    else:
        if not os.path.exists(target):
            raise TargetError(f"{target}: no such graph file (a TARGET is a graph file, file.py:function "
                              "or package.module:function)")
        try:
            graph, placeholders = read(target)
        except GraphFileError as error:
            raise TargetError(str(error)) from error
    if not isinstance(graph, Graph):
        raise TargetError(f"{target} did not give a graphview Graph (got {type(graph).__name__})")
    if need_loss and not graph.losses:
        raise TargetError(f"{target}: graph {graph.name!r} has no loss; call g.set_loss(...) before returning it")
    return graph, placeholders


def _call(target):
    from graphview.graph import Graph
    module_name, _, function_name = target.rpartition(":")
    module = _import(module_name, target)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise TargetError(f"{target}: {module_name} has no function {function_name!r}")
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
    if module_name.endswith(".py"):
        path = os.path.abspath(module_name)
        if not os.path.isfile(path):
            raise TargetError(f"{target}: no such file {module_name!r}")
        name = "graphview_target_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        # The script's folder goes first on sys.path, as when running `python file.py`.
        sys.path.insert(0, os.path.dirname(path))
        try:
            spec.loader.exec_module(module)
        except SystemExit as exit:
            raise TargetError(f"{target}: importing {module_name} called sys.exit({exit.code!r})") from None
        except Exception as error:
            raise TargetError(f"{target}: importing {module_name} raised {type(error).__name__}: {error}") from error
        finally:
            _remove_path(os.path.dirname(path))
        return module
    # The current folder goes first on sys.path, as with `python -m graphview`, so that
    # `graphview gradcheck module:function` finds module.py where the user stands.
    folder = os.getcwd()
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise TargetError(f"{target}: cannot import {module_name}: {error}") from error
    except SystemExit as exit:
        raise TargetError(f"{target}: importing {module_name} called sys.exit({exit.code!r})") from None
    except Exception as error:
        raise TargetError(f"{target}: importing {module_name} raised {type(error).__name__}: {error}") from error
    finally:
        _remove_path(folder)


def _remove_path(folder):
    """Undo our ``sys.path.insert(0, folder)``, even if the imported code added entries in front of it."""
    if sys.path and sys.path[0] == folder:
        del sys.path[0]
    elif folder in sys.path:
        sys.path.remove(folder)


def _describe(value):
    if isinstance(value, tuple):
        return f"a tuple of {len(value)} ({', '.join(type(v).__name__ for v in value)})"
    return f"a {type(value).__name__}"


def read_inputs(path):
    """Placeholder arrays from an ``.npz`` file (``np.load`` with ``allow_pickle=False``)."""
    if not os.path.isfile(path):
        raise TargetError(f"--inputs {path}: no such file")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise TargetError(f"--inputs {path}: a single array; give an .npz of named arrays "
                              "(np.savez(path, x=..., y=...))")
        with archive:
            return {name: archive[name] for name in archive.files}
    except TargetError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
        raise TargetError(f"--inputs {path}: not a readable .npz file ({error})") from error
