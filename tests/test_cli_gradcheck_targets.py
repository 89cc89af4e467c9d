"""The gradient-check command on a user's module: a wrong unbroadcast, NaN tolerances, targets found
in the current folder, targets that exit or give nothing to check."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.cli import main
from cli_helpers import usage_error as _usage_error


REVIEWED = textwrap.dedent('''
    import sys

    import numpy as np
    import graphview as gv
    from graphview import registry
    from graphview.shapes import broadcast_shapes

    def defop(name, **declaration):  # each main() call imports this file afresh
        return registry._CALLABLES.get(name) or gv.defop(name, **declaration)

    forgetful_add = defop("test_cli_forgetful_add", shape=broadcast_shapes,
                          kernel=lambda x, b, out: np.add(x, b, out=out), vjp=lambda grad, out, x, b: (grad, grad))
    square_wrong = defop("test_cli_square_wrong", shape=lambda x: x,
                         kernel=lambda x, out: np.multiply(x, x, out=out), vjp=lambda grad, out, x: (grad * x,))

    def unbroadcast_forgotten():
        g = gv.Graph("broadcasting")
        x, b = g.placeholder("x", (None, 3)), g.placeholder("b", (None, 3))
        g.set_loss(g.math.sum(forgetful_add(x, b)))
        return g, {"x": np.ones((2, 3)), "b": np.ones((1, 3))}

    def wrong_gradient():
        g = gv.Graph("wrong")
        w = g.var("w", np.array([1.0, 2.0, 3.0]))
        g.set_loss(g.math.sum(square_wrong(w), name="loss"))
        return g, {}

    def exits():
        sys.exit(0)

    def only_placeholders():
        g = gv.Graph("x")
        x = g.placeholder("x", (3,))
        g.set_loss(g.math.sum(x * x))
        return g, {"x": np.ones(3)}
''')


@pytest.fixture
def reviewed(tmp_path, monkeypatch):
    """The folder holding reviewed.py, as the current folder; the ops it registers are removed afterwards."""
    (tmp_path / "reviewed.py").write_text(REVIEWED)
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    yield tmp_path
    for name in ("test_cli_forgetful_add", "test_cli_square_wrong"):
        registry._REGISTRY.pop(name, None)
        registry._CALLABLES.pop(name, None)
    for name in [m for m in sys.modules if m == "reviewed" or m.endswith("_reviewed")]:
        del sys.modules[name]
    assert sys.path == path, "importing a target must leave sys.path as it was"


def test_a_gradient_that_is_not_unbroadcast_fails_the_check_with_exit_1(capsys, reviewed):
    assert main(["gradcheck", "reviewed.py:unbroadcast_forgotten", "--wrt", "x,b", "--json", "r.json"]) == 1
    out, err = capsys.readouterr()
    assert err == "" and "internal error" not in out
    assert ("b FAILED (wrong shape): the analytic gradient has shape (2, 3), the variable has shape (1, 3)"
            in out), out
    failures = json.loads((reviewed / "r.json").read_text())["failures"]
    assert [(f["variable"], f["kind"]) for f in failures] == [("b", "shape")]


@pytest.mark.parametrize("option", ["--min-abs-error", "--max-rel-error"])
def test_nan_tolerances_cannot_make_a_wrong_gradient_pass(capsys, reviewed, option):
    assert main(["gradcheck", "reviewed.py:wrong_gradient", "--quiet"]) == 1
    capsys.readouterr()
    _usage_error(capsys, ["gradcheck", "reviewed.py:wrong_gradient", option, "nan"], "is not a finite number")
    assert main(["gradcheck", "reviewed.py:wrong_gradient", option, "0", "--quiet"]) == 1


def test_a_module_function_target_is_found_in_the_current_folder(capsys, reviewed):
    assert "reviewed" not in sys.modules
    assert main(["gradcheck", "reviewed:wrong_gradient", "--quiet"]) == 1
    assert "FAILED: gradient check of reviewed:wrong_gradient" in capsys.readouterr().out


def test_a_target_that_calls_sys_exit_is_an_input_error(capsys, reviewed):
    _usage_error(capsys, ["gradcheck", "reviewed.py:exits"],
                 "graphview gradcheck: error: reviewed.py:exits called sys.exit(0) instead of returning a graph")
    _usage_error(capsys, ["summary", "reviewed:exits"], "reviewed:exits called sys.exit(0)")


def test_a_graph_with_nothing_to_check_is_an_input_error(capsys, reviewed):
    _usage_error(capsys, ["gradcheck", "reviewed.py:only_placeholders"],
                 "check_gradients: nothing to check in graph 'x': no trainable floating-point variables; "
                 "name placeholders or values with wrt=")
    assert main(["gradcheck", "reviewed.py:only_placeholders", "--wrt", "x", "--quiet"]) == 0


# --- review: the README's console example runs as shown ----------------------------------------------


def _without_times(document):
    """A suite report with its run times left out (they differ run to run)."""
    text = json.dumps(document, sort_keys=True)
    return json.loads(text, object_hook=lambda d: {k: v for k, v in d.items() if "seconds" not in k and k != "time"})


def test_the_op_suite_on_several_processes_reports_what_one_process_reports(tmp_path):
    # Families shared among worker processes (each compiles its own kernels); an op declared in this
    # process only is unknown to the workers and is checked here.
    if "test_cli_local_double" not in registry.ops():
        gv.defop("test_cli_local_double", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, 2.0, out=out),
                 vjp=lambda grad, out, x: (grad * 2.0,), reference=lambda x: 2 * x,
                 samples=lambda: [gv.Sample((np.linspace(-1, 1, 5),))])
    ops = "tanh,sum,max_pool2d,layer_norm,test_cli_local_double"
    documents = []
    for jobs in ("1", "3"):
        path = tmp_path / f"suite{jobs}.json"
        assert main(["gradcheck", "--ops", ops, "--jobs", jobs, "--quiet", "--json", str(path)]) == 0
        documents.append(json.loads(path.read_text()))
    assert _without_times(documents[0]) == _without_times(documents[1])
    rows = {row["op"]: row for row in documents[1]["ops"]}
    assert set(rows) == set(ops.split(",")) and all(row["status"] == "ok" for row in rows.values())
    assert rows["test_cli_local_double"]["passed"] == 1 and rows["max_pool2d"]["passed"] > 1
    assert len(documents[1]["cases"]) == sum(row["samples"] for row in rows.values())


def test_jobs_must_be_a_positive_count(capsys):
    assert main(["gradcheck", "--ops", "tanh", "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err


def test_a_script_calling_main_without_a_main_guard_shares_the_suite_cleanly(tmp_path):
    # Spawned workers would import an unguarded script again and run its main() call in each of them.
    script = tmp_path / "unguarded.py"
    script.write_text("import sys\nfrom graphview.cli import main\n"
                      "sys.exit(main(['gradcheck', '--ops', 'tanh,sum', '--jobs', '2', '--quiet']))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.count("PASSED: gradient checks of 2 ops") == 1
