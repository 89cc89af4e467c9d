"""The graphview command, through main(argv) and through a subprocess for the exit codes."""
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import graphview as gv
from graphview import registry
from graphview.cli import main
from graphview.targets import load_target
from cli_helpers import usage_error as _usage_error
from optable import build

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MLP = os.path.join(ROOT, "examples", "mlp.py") + ":build"


def run(*argv, cwd=ROOT):
    """The command in a fresh interpreter: (exit status, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "graphview", *argv], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    return done.returncode, done.stdout, done.stderr


# --- main(argv) ------------------------------------------------------------------

def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"graphview {gv.__version__}"
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("gradcheck", "summary", "ops", "dot"):
        assert command in out


def test_ops_lists_every_registered_op(capsys):
    assert main(["ops"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = lines[2:lines.index("")] if "" in lines else lines[2:-1]   # the op rows end at a blank line
    listed = {line.split()[0] for line in table}
    assert listed == set(gv.ops())
    tanh = next(line.split() for line in lines if line.startswith("tanh "))
    samples = len(list(registry.get("tanh").samples()))
    assert tanh[1:] == ["elementwise", "yes", "no", "no", str(samples), f"{samples}/{samples}", "samples"]


def test_gradcheck_of_a_function_target_writes_json_and_junit(capsys, tmp_path):
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    assert main(["gradcheck", MLP, "--max-per-param", "7", "--json", str(report), "--junit", str(junit)]) == 0
    out, err = capsys.readouterr()
    assert "PASSED" in out and "hidden/w" in out and err == ""
    document = json.loads(report.read_text())
    assert document["passed"] is True and document["failures"] == [] and document["violations"] == []
    assert document["options"] == {"eps": 1e-5, "max_rel_error": 1e-5, "min_abs_error": 1e-6, "max_per_param": 7,
                                   "subset": "random", "seed": 12345, "exit_on_first_failure": False,
                                   "fast": False, "activations": False, "validate_inplace": True}
    rows = {row["variable"]: row for row in document["variables"]}
    assert set(rows) == {"hidden/w", "hidden/b", "output/w", "output/b"}
    assert rows["hidden/w"]["checked"] == 7 and rows["hidden/b"]["checked"] == 5
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("tests") == "5" and suite.get("failures") == "0"
    assert {case.get("name") for case in suite.iter("testcase")} == set(rows) | {"non-inplace validation"}


def test_gradcheck_of_a_graph_file_with_stored_and_npz_inputs(capsys, tmp_path):
    graph, placeholders = load_target(MLP)
    graph.save(tmp_path / "mlp.gvz", placeholders=placeholders)
    assert main(["gradcheck", str(tmp_path / "mlp.gvz"), "--wrt", "output/b", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASSED") and out.count("\n") == 1
    np.savez(tmp_path / "batch.npz", x=np.ones((3, 4)), y=np.array([0, 1, 2]))
    assert main(["gradcheck", str(tmp_path / "mlp.gvz"), "--inputs", str(tmp_path / "batch.npz"), "--fast"]) == 0
    np.savez(tmp_path / "wrong.npz", x=np.ones((3, 7)))
    _usage_error(capsys, ["gradcheck", str(tmp_path / "mlp.gvz"), "--inputs", str(tmp_path / "wrong.npz")],
                 "placeholder 'x' expects shape (?, 4)")


def test_gradcheck_of_the_op_suite_prints_coverage(capsys, tmp_path):
    report, junit = tmp_path / "ops.json", tmp_path / "ops.xml"
    assert main(["gradcheck", "--ops", "tanh,matmul,argmax", "--json", str(report), "--junit", str(junit)]) == 0
    out = capsys.readouterr().out
    assert "2/2 differentiable ops covered" in out and "not differentiable" in out
    document = json.loads(report.read_text())
    assert [row["op"] for row in document["ops"]] == ["tanh", "matmul", "argmax"]
    assert {row["op"]: row["status"] for row in document["ops"]} == {
        "tanh": "ok", "matmul": "ok", "argmax": "not differentiable"}
    cases = [c for c in document["cases"] if c["op"] == "tanh"]
    assert len(cases) == len(list(registry.get("tanh").samples())) and all(c["status"] == "passed" for c in cases)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert int(suite.get("tests")) == len(document["cases"]) and suite.get("failures") == "0"
    assert int(suite.get("skipped")) == sum(c["status"] == "skipped" for c in document["cases"])


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_goes_to_stderr_only_on_a_terminal_and_not_with_quiet(monkeypatch, capsys, quiet):
    monkeypatch.setattr("graphview.cli.PROGRESS_DELAY", 0.0)
    monkeypatch.setattr("graphview.cli_progress._columns", lambda stream: 80)  # a StringIO has no width
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert main(["gradcheck", "--ops", "tanh,sum"] + (["--quiet"] if quiet else [])) == 0
    shown = sys.stderr.getvalue()
    assert ("gradcheck ops" in shown) is not quiet
    assert "gradcheck ops" not in capsys.readouterr().out
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert main(["gradcheck", MLP] + (["--quiet"] if quiet else [])) == 0
    shown = sys.stderr.getvalue()
    assert ("element" in shown and "/" in shown) is not quiet, shown[-300:]


@pytest.mark.parametrize("argv, message", [
    (["gradcheck", "missing.gvz"], "missing.gvz: no such graph file"),
    (["gradcheck", "examples/nope.py:build"], "no such file 'examples/nope.py'"),
    (["gradcheck", "examples/mlp.py:nothing"], "has no function 'nothing'"),
    (["gradcheck", "no_such_module_xyz:build"], "cannot import no_such_module_xyz"),
    (["gradcheck", "--ops", "frobnicate"], "no registered op named 'frobnicate'"),
    (["gradcheck", MLP, "--ops", "tanh"], "--ops is for the built-in op suite"),
    (["gradcheck", "--wrt", "w"], "--wrt needs a TARGET"),
    (["gradcheck", MLP, "--wrt", "nope"], "--wrt nope: graph 'mlp' has no variable named 'nope'"),
    (["gradcheck", MLP, "--eps", "0"], "argument --eps: '0' must be greater than 0"),
    (["gradcheck", MLP, "--subset", "all"], "invalid choice: 'all'"),
    (["gradcheck", MLP, "--eps", "nan"], "argument --eps: 'nan' is not a finite number"),
    (["gradcheck", MLP, "--eps", "inf"], "argument --eps: 'inf' is not a finite number"),
    (["gradcheck", MLP, "--max-rel-error", "nan"], "argument --max-rel-error: 'nan' is not a finite number"),
    (["gradcheck", MLP, "--max-rel-error", "-1"], "argument --max-rel-error: '-1' must be 0 or more"),
    (["gradcheck", MLP, "--min-abs-error", "nan"], "argument --min-abs-error: 'nan' is not a finite number"),
    (["gradcheck", MLP, "--min-abs-error", "inf"], "argument --min-abs-error: 'inf' is not a finite number"),
    (["gradcheck", MLP, "--min-abs-error=-1e-6"], "argument --min-abs-error: '-1e-6' must be 0 or more"),
    (["gradcheck", MLP, "--seed", "-1"], "argument --seed: '-1' must be 0 or more"),
    (["gradcheck", MLP, "--seed", "1.5"], "argument --seed: '1.5' is not an integer"),
    (["gradcheck", MLP, "--max-per-param", "0"], "argument --max-per-param: '0' must be greater than 0"),
    (["gradcheck", MLP, "--inputs", "missing.npz"], "--inputs missing.npz: no such file"),
    (["gradcheck", "--frobnicate"], "graphview gradcheck: error: unrecognized argument: --frobnicate"),
    (["summary"], "the following arguments are required: TARGET"),
    (["launch"], "invalid choice: 'launch'"),
    ([], "give a command"),
])
def test_usage_and_input_errors_are_one_line_with_status_2(capsys, argv, message, monkeypatch):
    monkeypatch.chdir(ROOT)
    _usage_error(capsys, argv, message)


@pytest.mark.parametrize("argv, message", [
    (["gradcheck", MLP, "--json", "{missing}/r.json"], "argument --json: cannot write"),
    (["gradcheck", MLP, "--junit", "{missing}/r.xml"], "argument --junit: cannot write"),
    (["gradcheck", "--ops", "tanh", "--json", "{tmp}"], "argument --json: '{tmp}' is a directory"),
    (["convert", MLP, "{missing}/m.onnx", "--outputs", "loss"], "argument DESTINATION: cannot write"),
])
def test_a_report_path_that_cannot_be_written_stops_the_command_before_any_work(capsys, tmp_path, argv, message):
    missing = tmp_path / "no" / "such"
    argv = [part.format(missing=missing, tmp=tmp_path) for part in argv]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""                                # nothing ran: no report, no verdict
    assert err.startswith(f"graphview {argv[0]}: error: ") and err.count("\n") == 1
    assert message.format(tmp=tmp_path) in err
    assert not (tmp_path / "no").exists()           # and nothing was created


def test_targets_that_do_not_give_a_usable_graph(capsys, tmp_path):
    (tmp_path / "targets.py").write_text(textwrap.dedent("""
        import graphview as gv

        def number():
            return 42

        def no_loss():
            g = gv.Graph("plain")
            g.placeholder("x", (2,))
            return g, {}

        def broken():
            raise RuntimeError("the data is missing")
    """))
    target = str(tmp_path / "targets.py")
    _usage_error(capsys, ["gradcheck", f"{target}:number"], "must return (graph, placeholders)")
    _usage_error(capsys, ["gradcheck", f"{target}:no_loss"], "has no loss; call g.set_loss")
    _usage_error(capsys, ["summary", f"{target}:broken"], "raised RuntimeError: the data is missing")
    assert main(["summary", f"{target}:no_loss"]) == 0


def test_corrupt_graph_file_is_an_input_error(capsys, tmp_path):
    (tmp_path / "bad.gvz").write_bytes(b"PK\x03\x04 not really a zip")
    _usage_error(capsys, ["summary", str(tmp_path / "bad.gvz")], "bad.gvz")


def test_summary_of_a_file_and_of_a_function(capsys, tmp_path):
    graph, placeholders = load_target(MLP)
    graph.save(tmp_path / "mlp.gvz", placeholders=placeholders)
    assert main(["summary", str(tmp_path / "mlp.gvz")]) == 0
    from_file = capsys.readouterr().out
    assert from_file.startswith(graph.summary())
    assert "losses: loss" in from_file and "stored placeholder values: x, y" in from_file
    assert main(["summary", MLP]) == 0
    assert capsys.readouterr().out == from_file


def test_dot_marks_views_and_in_place_writes(capsys, tmp_path):
    graph = gv.Graph("marks")
    x = graph.placeholder("x", (2, 3))
    graph.set_loss(graph.math.sum(graph.shape.reshape(x, (3, 2)), name="loss"))
    graph.save(tmp_path / "marks.gvz")
    assert main(["dot", str(tmp_path / "marks.gvz")]) == 0
    dot = capsys.readouterr().out
    assert dot.startswith('digraph "marks" {') and dot.rstrip().endswith("}")
    assert '"x" -> "reshape" [color=blue, style=dashed, label="view of"' in dot
    assert "(view)" in dot and "peripheries=2" in dot
    inplace = [d for d in registry.definitions() if d.inplace and d.samples]
    if not inplace:
        pytest.skip("no in-place op is registered")
    definition = inplace[0]
    graph, output, _ = build(definition.name, list(definition.samples())[0])
    from graphview.dot import to_dot
    dot = to_dot(graph)
    written = graph.node(output.name).inputs[definition.inplace[0]]
    assert f'"{written}" -> "{output.name}" [color=red, style=bold, label="writes"' in dot
    assert "(in-place)" in dot


def test_dot_quotes_awkward_names():
    from graphview.dot import quote
    assert quote('a "b"\\c\nd') == '"a \\"b\\"\\\\c\\nd"'


# --- a fresh interpreter: exit codes, tracebacks, python -m -------------------------

FAULTY = textwrap.dedent('''
    import numpy as np
    import graphview as gv

    def _copy(x, out):
        out[...] = x

    def _clobber(x, out):
        out[...] = x
        x[...] = 0.0          # writes into its input, which it does not declare

    # d(x^2)/dx is 2x; this rule forgets the 2.
    square_wrong = gv.defop("square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
                            vjp=lambda grad, out, x: (grad * x,))
    clobber = gv.defop("clobber", shape=lambda x: x, kernel=_clobber, vjp=lambda grad, out, x: (grad,))

    def wrong_gradient():
        g = gv.Graph("wrong")
        w = g.var("w", np.array([1.0, 2.0, 3.0]))
        g.set_loss(g.math.sum(square_wrong(w), name="loss"))
        return g, {}

    def writes_input():
        g = gv.Graph("clobbering")
        w = g.var("w", np.array([1.0, 2.0, 3.0]))
        g.set_loss(g.math.sum(clobber(w * 1.0), name="loss"))
        return g, {}
''')


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faulty")
    (folder / "faulty.py").write_text(FAULTY)
    return folder


def test_a_wrong_gradient_exits_1_with_the_failing_elements(faulty):
    status, out, err = run("gradcheck", "faulty.py:wrong_gradient", "--json", "r.json", "--junit", "r.xml",
                           cwd=faulty)
    assert status == 1, err
    assert "FAILED" in out and "w[0]" in out and err == ""
    document = json.loads((faulty / "r.json").read_text())
    assert document["passed"] is False
    assert {(f["variable"], tuple(f["index"])) for f in document["failures"]} == {("w", (0,)), ("w", (1,)), ("w", (2,))}
    failure = document["failures"][1]
    assert failure["analytic"] == pytest.approx(2.0) and failure["numeric"] == pytest.approx(4.0, rel=1e-6)
    suite = ET.parse(faulty / "r.xml").getroot().find("testsuite")
    assert suite.get("failures") == "1"
    assert suite.find("testcase[@name='w']/failure") is not None


def test_an_op_writing_its_input_exits_1_with_the_violation(faulty):
    status, out, err = run("gradcheck", "faulty.py:writes_input", "--json", "v.json", cwd=faulty)
    assert status == 1, err
    document = json.loads((faulty / "v.json").read_text())
    assert document["violations"] and "clobber" in document["violations"][0]
    status, out, err = run("gradcheck", "faulty.py:writes_input", "--no-validate-inplace", cwd=faulty)
    assert status == 0 and "0 in-place violations" in out, "without the listener, the write goes unnoticed"


def test_exit_2_is_one_line_and_debug_shows_the_traceback(faulty):
    status, out, err = run("gradcheck", "missing.gvz", cwd=faulty)
    assert status == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    status, out, err = run("gradcheck", "missing.gvz", "--debug", cwd=faulty)
    assert status == 2 and "Traceback" in err and err.rstrip().endswith("no such graph file (a TARGET is a graph "
                                                                        "file, file.py:function or "
                                                                        "package.module:function)")


def test_python_dash_m_and_the_console_script_behave_alike():
    status, out, err = run("--version")
    assert (status, out.strip(), err) == (0, f"graphview {gv.__version__}", "")
    script = os.path.join(os.path.dirname(sys.executable), "graphview")
    if not os.path.exists(script):
        pytest.skip("the graphview console script is not installed (pip install -e .)")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, out)


@pytest.mark.parametrize("example", ["mlp.py:build", "regression.py:build", "regression.py:save_file"])
def test_examples_pass_their_gradient_checks(capsys, example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["gradcheck", os.path.join(ROOT, "examples", example), "--fast", "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("PASSED")
    if example.endswith("save_file"):
        assert main(["gradcheck", "regression.gvz", "--quiet"]) == 0


SUITE_WITH_FAULTS = textwrap.dedent('''
    import sys
    import numpy as np
    import graphview as gv
    from graphview.cli import main

    def samples():
        return [gv.Sample((np.array([1.0, 2.0, 3.0]),), label="vector")]

    gv.defop("square_wrong", shape=lambda x: x, kernel=lambda x, out: np.multiply(x, x, out=out),
             vjp=lambda grad, out, x: (grad * x,), samples=samples, reference=lambda x: x * x)
    gv.defop("no_rule", shape=lambda x: x, kernel=lambda x, out: np.copyto(out, x), differentiable=True,
             samples=samples, reference=lambda x: x)
    sys.exit(main(["gradcheck", "--ops", "tanh,square_wrong,no_rule", "--json", "suite.json"]))
''')


def test_the_op_suite_fails_on_a_wrong_rule_and_a_missing_rule(tmp_path):
    done = subprocess.run([sys.executable, "-c", SUITE_WITH_FAULTS], capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    assert done.returncode == 1, done.stderr
    assert "FAILED: square_wrong, no_rule" in done.stdout and "square_wrong[0] vector: FAILED" in done.stdout
    document = json.loads((tmp_path / "suite.json").read_text())
    assert {row["op"]: row["status"] for row in document["ops"]} == {
        "tanh": "ok", "square_wrong": "FAILED", "no_rule": "NO GRADIENT RULE"}


# --- defects found in review ------------------------------------------------------

def readme_console_after(marker):
    """The README's ```console block that follows ``marker``, with the ```python block before it (if any)."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split(marker, 1)[1]
    return section.split("```console\n", 1)[1].split("```", 1)[0]


def console_steps(console):
    """``[(command, shown output lines, shown exit status or None)]`` from a console transcript."""
    steps = []
    for line in console.splitlines():
        if line.startswith("$ echo $?"):
            steps[-1][2] = "pending"
        elif line.startswith("$ "):
            steps.append([line[2:], [], None])
        elif steps[-1][2] == "pending":
            steps[-1][2] = int(line)
        else:
            steps[-1][1].append(line)
    return steps


def _without_timing(line):
    return re.sub(r" in \d+\.\d+s$", " in <time>s", line)


def test_the_readme_broken_py_console_example_prints_what_the_readme_shows(tmp_path):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    source = readme.split("```python\n# broken.py\n", 1)[1].split("```", 1)[0]
    (tmp_path / "broken.py").write_text(source)
    steps = console_steps(readme_console_after("# broken.py\n"))
    assert [command for command, _, _ in steps] == ["graphview gradcheck broken.py:build",
                                                    "graphview gradcheck model.gvz"]
    for command, shown, status in steps:
        code, out, err = run(*command.split()[1:], cwd=tmp_path)
        printed = [_without_timing(line) for line in (out + err).splitlines()]
        assert code == status, (command, out, err)
        missing = [line for line in map(_without_timing, shown) if line not in printed]
        assert not missing, f"{command}: README lines not printed: {missing}\nprinted:\n" + "\n".join(printed)
        assert len(printed) == len(shown), f"{command}: printed lines the README does not show:\n" + "\n".join(printed)


# --- review: "did you mean" wherever the command line names something --------------------------------

TWO_WEIGHTS = textwrap.dedent('''
    import numpy as np
    import graphview as gv

    def build():
        g = gv.Graph("two")
        x = g.placeholder("x", (3,))
        w1 = g.var("w1", np.ones(3))
        w2 = g.var("w2", np.ones(3))
        g.set_loss(g.math.sum(x * w1 * w2, name="loss"))
        return g, {"x": np.arange(3.0)}
''')


@pytest.mark.parametrize("argv, message", [
    (["gradcheck", "--ops", "tanhh"], "no registered op named 'tanhh' (did you mean 'tanh'"),
    (["gradcheck", "--ops", "Tanh"], "no registered op named 'Tanh' (did you mean 'tanh'"),
    (["gradcheck", "models.py:build", "--wrt", "w3"],
     "graphview gradcheck: error: --wrt w3: graph 'two' has no variable named 'w3' (did you mean 'w1' or 'w2'?)"),
    (["gradcheck", "models.py:build", "--skip", "w11"],
     "graphview gradcheck: error: --skip w11: graph 'two' has no variable named 'w11' (did you mean 'w1'?)"),
    (["summary", "models.py:buld"], "models.py:buld: models.py has no function 'buld' (did you mean 'build'?)"),
    (["gradcheck", "models.py:build", "--inputs", "X.npz"],
     "graphview gradcheck: error: --inputs X.npz: 'X' is not a placeholder of graph 'two' (did you mean 'x'?); "
     "its placeholders are: x"),
    (["gradchek"], "graphview: error: argument COMMAND: invalid choice: 'gradchek' (did you mean 'gradcheck'?)"),
    (["gradcheck", "--max-per-parm", "3"],
     "graphview gradcheck: error: unrecognized argument: --max-per-parm (did you mean '--max-per-param'"),
    (["gradcheck", "--subset", "randm"],
     "graphview gradcheck: error: argument --subset: invalid choice: 'randm' (did you mean 'random'?)"),
    (["adr", "lsit"], "graphview adr: error: argument COMMAND: invalid choice: 'lsit' (did you mean 'list'?)"),
    (["adr", "list", "--dri", "adr"], "graphview adr list: error: unrecognized arguments: --dri (did you mean '--dir'?)"),
])
def test_unknown_names_on_the_command_line_get_a_suggestion(tmp_path, argv, message):
    (tmp_path / "models.py").write_text(TWO_WEIGHTS)
    np.savez(tmp_path / "X.npz", X=np.ones(3))
    code, out, err = run(*argv, cwd=tmp_path)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert message in err, err


@pytest.mark.parametrize("name, candidates, suggestion", [
    ("Tanh", ["tanh", "abs"], " (did you mean 'tanh'?)"),
    ("X", ["x", "y"], " (did you mean 'x'?)"),
    ("w3", ["w1", "w2", "loss"], " (did you mean 'w1' or 'w2'?)"),
    ("tanhh", ["tanh", "abs"], " (did you mean 'tanh'?)"),
    ("x", ["y", "z"], ""),
    ("frobnicate", ["tanh", "abs"], ""),
])
def test_did_you_mean_ignores_case_and_suggests_one_edit_away(name, candidates, suggestion):
    from graphview.errors import did_you_mean
    assert did_you_mean(name, candidates) == suggestion


def test_ops_says_why_differentiation_through_a_backward_kernel_is_refused(capsys):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    assert "differentiation refused (gradients cannot pass through these ops):" in out
    assert "  ctc_grad: ctc's gradient is a dedicated backward kernel" in out
    assert next(line.split() for line in out.splitlines() if line.startswith("ctc_grad "))[2] == "refused"
