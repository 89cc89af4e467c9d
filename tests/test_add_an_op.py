"""Adding an element-wise op takes its kernel, its declaration and its gradient rule: nothing else (ADR 0017).

A module written to a temporary folder declares ``g.math.added_cube`` with an ``@njit(cache=True)`` kernel,
``gv.defop`` and ``gv.defvjp``. The generic op-table tests, a gradient check, a save/load round trip,
``graphview ops`` and the README's op-table test then take it as they take a built-in op. Each check
runs in a subprocess: the registry is process-wide, and this one must not see the op.
"""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NAME = "added_cube"

MODULE = '''
"""An element-wise op added by a user: x ** 3."""
import numpy as np
from numba import njit

import graphview as gv


@njit(cache=True)
def cube_kernel(x, out):
    flat_x, flat_out = x.ravel(), out.reshape(out.size)
    for i in range(flat_x.size):
        flat_out[i] = flat_x[i] * flat_x[i] * flat_x[i]


def samples():
    return [gv.Sample((np.linspace(-2.0, 2.0, 7),)),
            gv.Sample((np.arange(12.0).reshape(3, 4).T / 4.0,), label="transposed"),
            gv.Sample((np.linspace(-1.0, 1.0, 6, dtype=np.float32),), label="float32")]


cube = gv.defop("added_cube", shape=lambda x: x, kernel=cube_kernel, family="elementwise", namespace="math",
                reference=lambda x: x ** 3, samples=samples)
gv.defvjp(cube, lambda grad, out, x: (grad * 3.0 * x * x,))
'''

CHECKS = '''
import numpy as np

import graphview as gv
from graphview import gradcheck, registry
import added_op

definition = registry.get("added_cube")
assert definition.differentiable and definition.has_gradient
for sample in definition.samples():
    report = gradcheck.check_op("added_cube", sample)
    assert report.passed, str(report)

g = gv.Graph("uses_added_cube")
x = g.placeholder("x", (None, 3))
y = g.math.added_cube(x, name="y")
g.set_loss(g.math.sum(y))
feeds = {"x": np.arange(6.0).reshape(2, 3)}
g.save("added.gvz")
loaded = gv.load("added.gvz")
assert loaded.node("y").op == "added_cube"
np.testing.assert_array_equal(loaded.output(feeds, ["y"])["y"], g.output(feeds, ["y"])["y"])
np.testing.assert_array_equal(loaded.calculate_gradients(feeds, ["x"])["x"], 3.0 * feeds["x"] ** 2)
print("checked")
'''


@pytest.fixture(scope="module")
def added(tmp_path_factory):
    """The folder holding the op's module (added_op.py), and the environment that finds it and tests/."""
    folder = tmp_path_factory.mktemp("added_op")
    (folder / "added_op.py").write_text(MODULE)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(folder), str(ROOT / "tests"), str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return folder, environment


def run(command, added, **options):
    folder, environment = added
    result = subprocess.run(command, cwd=options.get("cwd", ROOT), env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


def test_the_generic_op_table_and_readme_tests_take_the_new_op(added):
    # The module is imported as a pytest plugin (-p), so the op is registered before the tests collect.
    output = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "added_op",
                  "tests/test_op_table.py", "tests/test_readme.py::test_readme_op_table_names_only_ops_of_their_namespace",
                  "-k", f"{NAME} or declares_samples or readme_op_table"], added)
    assert "8 passed" in output, output   # 3 samples x 2 op-table tests, the declarations, the README table


def test_it_passes_its_gradient_check_and_a_save_load_round_trip(added):
    folder, _ = added
    script = folder / "checks.py"
    script.write_text(textwrap.dedent(CHECKS))
    assert run([sys.executable, str(script)], added, cwd=folder).strip().endswith("checked")


def test_graphview_ops_lists_it_with_its_gradient_rule(added):
    folder, _ = added
    output = run([sys.executable, "-m", "graphview", "--import", str(folder / "added_op.py"), "ops"], added)
    row = next(line.split() for line in output.splitlines() if line.startswith(NAME + " "))
    assert row[1:4] == ["elementwise", "yes", "no"] and row[-2:] == ["3/3", "samples"], row
