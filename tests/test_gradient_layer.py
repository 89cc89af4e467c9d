"""Gradient rules are their own layer (ADR 0017): graphview/gradients/ registers one rule per op with
defvjp, the forward ops import none of it, and unbroadcast is the one decision of how a gradient is
summed back to an input's shape."""
import ast
import pathlib
import subprocess
import sys

import numpy as np

import graphview as gv
from graphview.gradients.unbroadcast import keeps_output_shape, unbroadcast

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORWARD_OP_MODULES = sorted((ROOT / "graphview" / "ops").glob("*.py")) + [ROOT / "graphview" / "layouts" / "ops.py"]


def _imports(path):
    """(module imported, line, whether the import is inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0:
                found.append((child.module, child.lineno, in_function))
                found.extend((f"{child.module}.{alias.name}", child.lineno, in_function) for alias in child.names)
            visit(child, inside)
    visit(tree, False)
    return found


def test_forward_op_modules_import_no_gradient_code():
    for path in FORWARD_OP_MODULES:
        for module, line, _ in _imports(path):
            assert not module.startswith("graphview.gradients"), (
                f"{path.relative_to(ROOT)}:{line} imports {module}; gradient rules import the ops, not the other way")


def test_gradient_modules_import_at_module_level():
    for path in sorted((ROOT / "graphview" / "gradients").glob("*.py")):
        late = [(module, line) for module, line, in_function in _imports(path) if in_function]
        assert not late, f"{path.relative_to(ROOT)} imports inside a function: {late}"


def test_after_import_graphview_every_op_has_a_rule_or_is_marked_non_differentiable():
    # A fresh process: the registry holds the built-in ops and nothing other tests declared.
    check = ("import numpy as np, graphview as gv\n"
             "from graphview import registry\n"
             "def unmarked():\n"
             "    return [d.name for d in registry.definitions() if d.vjp is None and d.differentiable is not False]\n"
             "print(unmarked())\n"
             "gv.defop('vague', shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x))\n"
             "print(unmarked())\n")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == ["[]", "['vague']"]


def test_unbroadcast_adds_no_node_when_the_input_keeps_the_output_shape():
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    b = g.var("b", np.zeros(3))
    out = g.math.add(x, b)
    grad = g.math.mul(out, 2.0)
    assert keeps_output_shape(x, out) and unbroadcast(grad, x, out) is grad
    assert not keeps_output_shape(b, out)
    summed = unbroadcast(grad, b, out)
    assert summed.op == "reduce_to" and summed.shape == (3,)


def test_unbroadcast_sums_when_an_unknown_size_may_broadcast():
    g = gv.Graph()
    x = g.placeholder("x", (None, 3))
    y = g.placeholder("y", (None, 3))   # either may have size 1 along axis 0 at run time
    out = g.math.add(x, y)
    assert not keeps_output_shape(x, out)
    assert unbroadcast(out, x, out).op == "reduce_to"
    assert unbroadcast(out, x).op == "reduce_to"


def test_unbroadcast_adds_no_node_for_equal_static_shapes():
    g = gv.Graph()
    x = g.var("x", np.ones((2, 3)))
    grad = g.math.mul(x, 2.0)
    assert unbroadcast(grad, x) is grad
    row = g.var("row", np.ones((1, 3)))
    assert unbroadcast(grad, row).op == "reduce_to" and unbroadcast(grad, row).shape == (1, 3)


def test_import_graphview_imports_every_op_and_rule_module():
    """A module in graphview/ops or graphview/gradients that nothing imports would be an op family
    without its ops or its rules: each must be named in its package's import list."""
    import importlib
    import pkgutil
    import sys

    import graphview  # noqa: F401
    for package in ("graphview.ops", "graphview.gradients"):
        path = importlib.import_module(package).__path__
        missing = [m.name for m in pkgutil.iter_modules(path) if f"{package}.{m.name}" not in sys.modules]
        assert not missing, f"{package}/__init__.py does not import {missing}"
